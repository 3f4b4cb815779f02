// The campaign finds every planted numeric fault of the faulty backend at the right stage, blames
// the faulty backend, and deduplicates (many hits, one unique finding each); a campaign killed with
// SIGKILL resumes without losing a recorded finding or leaving a half-written bundle.
#include "campaign/campaign.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "campaign/bundle.h"
#include "campaign/replay.h"
#include "store/store.h"
#include "core/fileio.h"
#include "ir/json_io.h"
#include "ops/materialize.h"
#include "ops/registry.h"
#include "worker/supervisor.h"

namespace quorum::campaign {
namespace {

namespace fs = std::filesystem;

// A chain of single-data-input operators; the first step's case gives the graph inputs.
ir::Graph chain(const std::vector<std::pair<std::string, ops::Case>>& steps, core::Rng& rng) {
  ir::Graph g;
  std::vector<core::TensorType> cur = steps[0].second.inputs;
  std::vector<std::string> names;
  for (size_t i = 0; i < cur.size(); ++i) {
    names.push_back("x" + std::to_string(i));
    g.inputs.push_back({names.back(), {core::DType::F32, cur[i].shape}});
  }
  for (size_t s = 0; s < steps.size(); ++s) {
    const ops::OpSpec& spec = ops::op(steps[s].first);
    const core::Attrs attrs = ops::canonical_attrs(spec, steps[s].second.attrs);
    const ops::Signature sig = spec.infer(cur, attrs);
    ir::Node n;
    n.name = steps[s].first + std::to_string(s);
    n.op = spec.name;
    n.attrs = attrs;
    n.inputs = names;
    for (const auto& p : sig.params) {
      const std::string w = n.name + "." + p.name;
      g.initializers.emplace(w, ops::init_param(p, rng).to(core::DType::F32));
      n.inputs.push_back(w);
    }
    n.outputs = {n.name};
    names = {n.name};
    cur = sig.outputs;
    g.nodes.push_back(std::move(n));
  }
  g.outputs = names;
  ir::validate(g, "chain");
  return g;
}

ops::Case one(core::Shape shape, core::Attrs attrs = {}) {
  ops::Case c;
  c.inputs = {{core::DType::F64, std::move(shape)}};
  c.attrs = std::move(attrs);
  return c;
}

// Models that exercise each planted fault, cycling with the model index.
ir::Graph trigger_graph(int64_t index, core::Rng& rng) {
  const int64_t w = 4 + 2 * rng.randint(0, 2) + 1;  // odd sizes 5, 7, 9
  switch (index % 9) {
    case 0:  // same-pad-off-by-one: SAME_UPPER with an odd total padding (even kernel, stride 1)
      return chain({{"conv2d", one({1, 2, w, w}, {{"out_channels", int64_t{3}},
                                                   {"kernel_shape", std::vector<int64_t>{2, 2}},
                                                   {"auto_pad", std::string("SAME_UPPER")}})}},
                   rng);
    case 1:  // bn-eps-outside-sqrt: a large epsilon makes the difference visible
      return chain({{"batch_norm", one({2, 3, 4}, {{"epsilon", 1.0}})}}, rng);
    case 2:  // relu-grad-at-zero: the second relu sees exact zeros
      return chain({{"relu", one({1, 6})}, {"relu", one({1, 6})}}, rng);
    case 3:  // avgpool-counts-padding
      return chain({{"avg_pool2d", one({1, 2, w, w}, {{"kernel_shape", std::vector<int64_t>{3, 3}},
                                                     {"pads", std::vector<int64_t>{1, 1, 1, 1}}})}},
                   rng);
    case 4:  // softmax-no-max-sub: the data's edge values include 100
      return chain({{"softmax", one({4, 16})}}, rng);
    case 5:  // maxpool-grad-all-ties: -relu(x) is 0 wherever x > 0, so most windows hold tied maxima
      return chain({{"relu", one({1, 1, 4, 4})},
                    {"neg", one({1, 1, 4, 4})},
                    {"max_pool2d", one({1, 1, 4, 4}, {{"kernel_shape", std::vector<int64_t>{2, 2}},
                                                      {"strides", std::vector<int64_t>{2, 2}}})}},
                   rng);
    case 6: {  // concat-drops-last
      ops::Case c;
      c.inputs = {{core::DType::F64, {1, 3}}, {core::DType::F64, {1, 2}}};
      ir::Graph g;
      g.inputs = {{"a", {core::DType::F32, {1, 3}}}, {"b", {core::DType::F32, {1, 2}}}};
      g.nodes.push_back({"concat", "concat", {"a", "b"}, {"concat"}, {{"axis", int64_t{1}}}});
      g.outputs = {"concat"};
      ir::validate(g, "concat");
      return g;
    }
    case 7:  // loss-grad-x2: a small output keeps the loss gradient large
      return chain({{"tanh", one({1, 2})}}, rng);
    default:  // relu-nan-to-zero: log of negative inputs is the model's own NaN, which relu must keep
      return chain({{"log", one({1, 8})}, {"relu", one({1, 8})}}, rng);
  }
}

ModelCase trigger(int64_t index, core::Rng& rng) {
  ModelCase m;
  m.graph = trigger_graph(index, rng);
  return m;
}

struct Expect {
  std::string fault;
  core::FindingKind kind;
  core::Stage stage;
  std::string op;
};

const std::vector<Expect> kExpected = {
    {"same-pad-off-by-one", core::FindingKind::Inconsistency, core::Stage::Forward, "conv2d"},
    {"bn-eps-outside-sqrt", core::FindingKind::Inconsistency, core::Stage::Forward, "batch_norm"},
    {"relu-grad-at-zero", core::FindingKind::Inconsistency, core::Stage::Backward, "relu"},
    {"avgpool-counts-padding", core::FindingKind::Inconsistency, core::Stage::Forward, "avg_pool2d"},
    {"softmax-no-max-sub", core::FindingKind::NaN, core::Stage::Forward, "softmax"},
    {"maxpool-grad-all-ties", core::FindingKind::Inconsistency, core::Stage::Backward, "max_pool2d"},
    {"concat-drops-last", core::FindingKind::Inconsistency, core::Stage::Forward, "concat"},
    {"loss-grad-x2", core::FindingKind::Inconsistency, core::Stage::Loss, "mse_loss"},
    {"relu-nan-to-zero", core::FindingKind::NaNSwallowed, core::Stage::Forward, "relu"},
};

std::string scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("quorum_campaign_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d.string();
}

std::string backends_with_torch(const std::string& base) {
  const auto& b = worker::available_backends();
  return std::find(b.begin(), b.end(), "torch") != b.end() ? base + ",torch" : base;
}

// The loss-gradient fault hides every backward finding downstream of the loss (BC needs the loss
// to agree), so it gets a faulty backend of its own.
const std::string kMostFaults =
    "faulty:same-pad-off-by-one+bn-eps-outside-sqrt+relu-grad-at-zero+avgpool-counts-padding+softmax-no-max-sub+"
    "maxpool-grad-all-ties+concat-drops-last+relu-nan-to-zero";
const std::string kLossFault = "faulty:loss-grad-x2";

TEST(Campaign, FindsEveryPlantedFaultAtTheRightStageOnce) {
  CampaignOptions opt;
  opt.generator = "planted-fault triggers";
  opt.setup.backends = parse_backends(backends_with_torch(kMostFaults + "," + kLossFault));
  opt.setup.mode = Mode::Both;
  opt.models = 108;
  opt.seed = 7;
  opt.out = scratch("faults");
  opt.quiet = true;
  opt.reduce_runs = 30;
  std::ostringstream log;
  const Summary s = run_campaign(opt, trigger, log);
  EXPECT_EQ(s.models_run, 108);
  EXPECT_EQ(s.errors, 0);
  const auto all = store::open_sqlite_store(opt.out)->findings();
  for (const auto& e : kExpected) {
    int unique = 0;
    int64_t hits = 0;
    for (const auto& f : all)
      if (f.kind == e.kind && f.stage == e.stage && f.op == e.op &&
          f.backend == (e.fault == "loss-grad-x2" ? kLossFault : kMostFaults)) {
        ++unique;
        hits += f.hits;
        EXPECT_TRUE(fs::exists(fs::path(f.bundle) / "finding.json")) << f.bundle;
      }
    EXPECT_EQ(unique, 1) << e.fault << ": expected one unique " << core::to_string(e.kind) << " at "
                         << core::to_string(e.stage) << " in " << e.op;
    EXPECT_GE(hits, 2) << e.fault << " should be hit by several models";
  }
  // Each planted fault's finding arrives reduced: to the faulty operator alone (fed the values the
  // library saw), except the loss fault, whose case keeps the output node the loss judges.
  for (const auto& f : all) {
    if (f.backend.rfind("faulty", 0) != 0) continue;
    ASSERT_FALSE(f.reduced.empty()) << f.signature << " was not reduced";
    const ir::Graph r = ir::load_graph((fs::path(f.reduced) / "model.json").string());
    if (f.stage == core::Stage::Loss) {
      EXPECT_LE(r.nodes.size(), 1u) << f.signature;
      continue;
    }
    ASSERT_EQ(r.nodes.size(), 1u) << f.signature << " reduced to " << r.nodes.size() << " nodes";
    EXPECT_EQ(r.nodes[0].op, f.op) << f.signature;
  }
  // Every finding is one of the planted faults: the faulty backends are exact elsewhere.
  for (const auto& f : all) {
    if (f.backend.rfind("faulty", 0) != 0) continue;
    // concat-drops-last also drops the last input's gradient: where a model's extreme values
    // (data::place_extreme_values) leave that input ±0 or subnormal, the forward is within tolerance
    // and the same fault shows in the backward.
    const bool dropped_gradient = f.kind == core::FindingKind::Inconsistency && f.stage == core::Stage::Backward &&
                                  f.op == "concat";
    const bool expected = dropped_gradient || std::any_of(kExpected.begin(), kExpected.end(), [&](const Expect& e) {
                            return f.kind == e.kind && f.stage == e.stage && f.op == e.op;
                          });
    EXPECT_TRUE(expected) << "unexpected finding " << f.signature << ": " << f.detail;
  }
  // Nothing blamed on the reference.
  for (const auto& f : all) EXPECT_NE(f.backend, "ref") << f.signature;
  fs::remove_all(opt.out);
}

// The per-node rule needs no second library: the planted softmax overflow is found with the
// faulty backend alone beside the reference (Muffin's NaN rule wanted another library clean).
TEST(Campaign, ALibrarysNaNIsFoundWhenItIsTheOnlyLibrary) {
  CampaignOptions opt;
  opt.generator = "planted-fault triggers";
  opt.setup.backends = parse_backends("faulty:softmax-no-max-sub");
  opt.setup.mode = Mode::Infer;
  opt.models = 27;
  opt.seed = 7;
  opt.out = scratch("alone");
  opt.quiet = true;
  std::ostringstream log;
  run_campaign(opt, [](int64_t index, core::Rng& rng) { return trigger(4 + 9 * index, rng); }, log);
  const auto all = store::open_sqlite_store(opt.out)->findings();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].signature, "nan|FC|faulty:softmax-no-max-sub|softmax");
  fs::remove_all(opt.out);
}

// A finding an earlier run left unreduced (here one with --reduce 0) is reduced by the background
// reducer when the campaign resumes, to the root cause an uninterrupted run gives it; the hits the
// two runs batched add up to the uninterrupted run's.
TEST(Campaign, AResumedCampaignReducesWhatAnEarlierRunLeftAndCountsTheSameHits) {
  CampaignOptions opt;
  opt.generator = "planted-fault triggers";
  opt.setup.backends = parse_backends("faulty:all-numeric");
  opt.setup.mode = Mode::Both;
  opt.seed = 5;
  opt.quiet = true;
  opt.jobs = 2;
  opt.out = scratch("resume_reduce");
  opt.models = 20;
  opt.reduce_runs = 0;
  std::ostringstream log;
  run_campaign(opt, trigger, log);
  const auto first = store::open_sqlite_store(opt.out)->findings();
  ASSERT_FALSE(first.empty());
  for (const auto& f : first) EXPECT_TRUE(f.reduced.empty()) << f.signature;
  opt.models = 40;
  opt.reduce_runs = 30;
  run_campaign(opt, trigger, log);
  CampaignOptions whole = opt;
  whole.out = scratch("resume_reduce_whole");
  run_campaign(whole, trigger, log);
  const auto resumed = store::open_sqlite_store(opt.out)->findings();
  const auto uninterrupted = store::open_sqlite_store(whole.out)->findings();
  EXPECT_EQ(store::open_sqlite_store(opt.out)->models_done(), 40);
  ASSERT_EQ(resumed.size(), uninterrupted.size());
  std::map<std::string, store::StoredFinding> by_signature;  // (with two jobs the order of first models varies)
  for (const auto& f : uninterrupted) by_signature[f.signature] = f;
  for (const auto& f : resumed) {
    ASSERT_TRUE(by_signature.count(f.signature)) << f.signature;
    const store::StoredFinding& w = by_signature.at(f.signature);
    EXPECT_EQ(f.hits, w.hits) << f.signature;
    EXPECT_EQ(f.root_cause, w.root_cause) << f.signature;
    EXPECT_EQ(f.reduced.empty(), w.reduced.empty()) << f.signature;
  }
  size_t reduced = 0;
  for (const auto& f : resumed) reduced += f.reduced.empty() ? 0 : 1;
  EXPECT_GT(reduced, 0u);
  fs::remove_all(opt.out);
  fs::remove_all(whole.out);
}

TEST(Campaign, ReplayReproducesABundle) {
  CampaignOptions opt;
  opt.generator = "planted-fault triggers";
  opt.setup.backends = parse_backends("faulty:all-numeric");
  opt.models = 8;
  opt.seed = 3;
  opt.out = scratch("replay");
  opt.quiet = true;
  std::ostringstream log;
  run_campaign(opt, trigger, log);
  const auto all = store::open_sqlite_store(opt.out)->findings();
  ASSERT_FALSE(all.empty());
  for (const auto& f : all) {
    const Replayed r = replay(f.bundle);
    EXPECT_TRUE(r.reproduced) << f.signature;
  }
  fs::remove_all(opt.out);
}

TEST(Campaign, ResumesAfterSigkillWithoutLosingFindings) {
  const std::string out = scratch("kill");
  const std::string cmd_args[] = {QUORUM_BINARY, "fuzz", "--generator", "unit", "--backends", "faulty:all-numeric",
                                  "--models", "100000", "--seed", "11", "--out", out};
  // First run: killed with SIGKILL once it has recorded a few findings.
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : cmd_args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    ::execv(QUORUM_BINARY, argv.data());
    ::_exit(127);
  }
  std::vector<store::StoredFinding> before;
  for (int i = 0; i < 600 && before.size() < 3; ++i) {
    ::usleep(100000);
    if (!fs::exists(out + "/findings.db")) continue;
    try {
      before = store::open_sqlite_store(out)->findings();
    } catch (const std::exception&) {
    }
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the campaign ended before it was killed";
  ASSERT_GE(before.size(), 3u) << "no findings recorded within a minute";
  int64_t done_before;
  {
    const auto s = store::open_sqlite_store(out);
    before = s->findings();
    done_before = s->models_done();
  }
  // Resume for a bounded number of further models.
  const std::string resume = std::string(QUORUM_BINARY) +
                             " fuzz --generator unit --backends faulty:all-numeric --models " +
                             std::to_string(done_before + 20) + " --out " + out + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(resume.c_str()), 0);
  const auto s = store::open_sqlite_store(out);
  const auto after = s->findings();
  EXPECT_GE(s->models_done(), done_before + 20);
  for (const auto& b : before) {
    auto it = std::find_if(after.begin(), after.end(),
                           [&](const store::StoredFinding& a) { return a.signature == b.signature; });
    ASSERT_NE(it, after.end()) << "lost " << b.signature;
    EXPECT_GE(it->hits, b.hits);
  }
  // Every bundle in place is complete; no temporary directory is left.
  for (const auto& e : fs::directory_iterator(fs::path(out) / "bundles")) {
    EXPECT_NE(e.path().filename().string().rfind(".tmp-", 0), 0u) << e.path();
    for (const char* f : {"finding.json", "model.json", "target.npy"})
      EXPECT_TRUE(fs::exists(e.path() / f)) << e.path() << " lacks " << f;
  }
  for (const auto& a : after) EXPECT_TRUE(fs::exists(fs::path(a.bundle) / "finding.json")) << a.bundle;
  fs::remove_all(out);
}

}  // namespace
}  // namespace quorum::campaign
