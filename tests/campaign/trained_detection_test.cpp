// CRADLE's detection on the trained LeNet-5 (data/trained/lenet5/model.json, trained by quorum train):
// a planted fault that moves the smallest softmax outputs slightly (faulty:floor=softmax@5e-7, below
// softmax's float32 tolerance) is caught by detection — the pair is inconsistent by the MAD
// distance, a unique inconsistency with a bundle that replays — while the per-node rule passes every
// node on the most inconsistent input, and a random campaign with the same fault finds nothing.
// Without the fault the same pair is consistent.
#include "campaign/trained_detection.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "campaign/bundle.h"
#include "campaign/campaign.h"
#include "campaign/model_source.h"
#include "campaign/replay.h"
#include "core/fileio.h"
#include "gen/generator.h"
#include "ir/json_io.h"
#include "store/store.h"

namespace quorum::campaign {
namespace {

namespace fs = std::filesystem;

const std::string kFault = "faulty:floor=softmax@5e-7";

fs::path scratch(const std::string& tag) {
  const auto d = fs::temp_directory_path() / ("quorum_detect_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

ir::Graph trained_lenet5() {
  const std::string path = std::string(QUORUM_SOURCE_DIR) + "/data/trained/lenet5/model.json";
  if (!fs::exists(path)) ADD_FAILURE() << path << " is missing: the trained LeNet-5 comes from quorum train";
  return ir::load_graph(path);
}

DetectOptions options(const std::string& backends, const fs::path& out) {
  DetectOptions opt;
  opt.setup.backends = parse_backends(backends);
  opt.setup.mode = Mode::Infer;
  opt.out = out.string();
  opt.seed = 5;
  opt.reduce_runs = 0;
  return opt;
}

const detect::PairResult* pair(const Detection& d, const std::string& a, const std::string& b) {
  for (const auto& p : d.pairs)
    if (p.a == a && p.b == b) return &p;
  return nullptr;
}

TEST(Detect, APlantedSoftmaxFloorIsCaughtOnTheTrainedLeNet5ButNotPerNode) {
  const ir::Graph g = trained_lenet5();
  const data::Validation v = data::fashion_mnist_validation(data::fashion_mnist_dir(), 1000, g.inputs[0].type.shape);
  const fs::path out = scratch("planted");
  const DetectOptions opt = options("ref," + kFault, out);
  WorkerSet workers(opt.setup.backends, opt.setup.limits);
  const auto store = store::open_sqlite_store(out.string());
  const Detection d = detect_model(g, v, opt, workers, store.get(), 0, nullptr);
  ASSERT_TRUE(d.failed.empty());
  EXPECT_GE(d.correct.at(kReferenceName), 1000 * 80 / 100) << "the trained LeNet-5 should classify most images";
  const detect::PairResult* p = pair(d, "ref", kFault);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p->by_mad.inconsistent) << "MAD triggering inputs: " << p->by_mad.triggering;
  // One unique inconsistency per pattern; the pair's MAD one is judged on its most inconsistent input.
  const DetectedCase* c = nullptr;
  for (const auto& k : d.cases)
    if (k.metric == detect::Metric::Mad && k.pattern == p->by_mad.pattern) c = &k;
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->finding.has_value()) << c->note;
  EXPECT_EQ(c->finding->kind, core::FindingKind::Detection);
  EXPECT_EQ(c->finding->backend, kFault);
  EXPECT_EQ(c->finding->op, "softmax") << "the localization map's prime suspect";
  // The per-node rule passes the fault: every node of the faulty run within its tolerance.
  for (const auto& f : c->verdicts) EXPECT_NE(f.backend, kFault) << f.signature() << ": " << f.detail;
  // The finding is in the store with a bundle that replays.
  const auto all = store->findings();
  const auto it = std::find_if(all.begin(), all.end(),
                               [](const store::StoredFinding& f) { return f.kind == core::FindingKind::Detection; });
  ASSERT_NE(it, all.end());
  EXPECT_TRUE(fs::exists(fs::path(it->bundle) / "finding.json"));
  const Replayed r = replay(it->bundle);
  EXPECT_TRUE(r.reproduced) << r.expected;
  fs::remove_all(out);
}

// A fault the per-node rule sees (relu's outputs whose input lies in [2, 2.05] off by +1): the
// unique inconsistency's input comes with the per-node verdict and its reduced case, one relu.
TEST(Detect, APerNodeVerdictOnTheInputIsReducedLikeACampaignsFinding) {
  const ir::Graph g = trained_lenet5();
  const data::Validation v = data::fashion_mnist_validation(data::fashion_mnist_dir(), 200, g.inputs[0].type.shape);
  const fs::path out = scratch("band");
  DetectOptions opt = options("faulty:band=relu@2.0..2.05", out);
  opt.reduce_runs = 30;
  WorkerSet workers(opt.setup.backends, opt.setup.limits);
  const auto store = store::open_sqlite_store(out.string());
  const Detection d = detect_model(g, v, opt, workers, store.get(), 0, nullptr);
  ASSERT_FALSE(d.cases.empty());
  const DetectedCase& c = d.cases[0];
  ASSERT_FALSE(c.verdicts.empty());
  EXPECT_EQ(c.verdicts[0].op, "relu");
  ASSERT_FALSE(c.reduced.empty());
  for (const auto& f : store->findings())
    if (f.kind == core::FindingKind::Inconsistency) {
      ASSERT_FALSE(f.reduced.empty()) << f.signature;
      const ir::Graph r = ir::load_graph((fs::path(f.reduced) / "model.json").string());
      ASSERT_EQ(r.nodes.size(), 1u);
      EXPECT_EQ(r.nodes[0].op, "relu");
    }
  fs::remove_all(out);
}

TEST(Detect, WithoutTheFaultThePairIsConsistent) {
  const ir::Graph g = trained_lenet5();
  const data::Validation v = data::fashion_mnist_validation(data::fashion_mnist_dir(), 300, g.inputs[0].type.shape);
  const fs::path out = scratch("clean");
  const DetectOptions opt = options("ref,faulty", out);
  WorkerSet workers(opt.setup.backends, opt.setup.limits);
  const Detection d = detect_model(g, v, opt, workers, nullptr, 0, nullptr);
  const detect::PairResult* p = pair(d, "ref", "faulty");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->by_class.triggering, 0);
  EXPECT_EQ(p->by_mad.triggering, 0);
  EXPECT_EQ(p->label_changes, 0);
  fs::remove_all(out);
}

// The random campaign's per-node rule does not see the same fault: classifiers drawn on
// Fashion-MNIST (each ending in softmax) with the faulty backend beside the reference.
TEST(Detect, TheRandomCampaignDoesNotSeeThePlantedFloor) {
  CampaignOptions opt;
  opt.generator = "muffin";
  opt.setup.backends = parse_backends(kFault);
  opt.setup.mode = Mode::Infer;
  opt.models = 30;
  opt.seed = 11;
  opt.out = scratch("random").string();
  opt.quiet = true;
  opt.reduce_runs = 0;
  gen::GenOptions gopt;
  gopt.generator = "muffin";
  gopt.max_nodes = 6;
  const ModelFactory factory = generator_factory(gopt, "fashion-mnist");
  std::ostringstream log;
  const Summary s = run_campaign(opt, factory, log);
  EXPECT_GE(s.models_run, 20);
  int softmax_models = 0;
  for (int64_t i = 0; i < opt.models; ++i) {
    core::Rng rng = gen::model_rng(opt.seed, static_cast<uint64_t>(i));
    try {
      for (const auto& n : factory(i, rng).graph.nodes) softmax_models += n.op == "softmax";
    } catch (const std::exception&) {
    }
  }
  EXPECT_GE(softmax_models, 10) << "the campaign should run the faulty softmax";
  for (const auto& f : store::open_sqlite_store(opt.out)->findings())
    EXPECT_NE(f.op, "softmax") << f.signature << ": " << f.detail;
  fs::remove_all(opt.out);
}

}  // namespace
}  // namespace quorum::campaign
