// Libraries' execution variants (backend options, docs/backends.md): libtorch's channels-last and
// strided layouts and thread count, oneDNN's ISA dispatch limit and threads, OpenCV's threads. Each
// variant runs and gives the plain backend's values; an unknown option stops the worker at its
// start; a finding on a variant records it, replays on it, and its reproducer runs it. Each test is
// skipped when its library backend is not built (QUORUM_WITH_LIBRARIES=OFF).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/backend.h"
#include "campaign/bundle.h"
#include "campaign/replay.h"
#include "campaign/campaign.h"
#include "store/store.h"
#include "core/fileio.h"
#include "ir/json_io.h"
#include "report/repro.h"
#include "run_quorum.h"
#include "worker/supervisor.h"
#include "worker/worker_set.h"

namespace quorum::backends {
namespace {

namespace fs = std::filesystem;

bool built(const std::string& name) {
  const auto& have = worker::available_backends();
  return std::find(have.begin(), have.end(), name) != have.end();
}

// conv2d -> dilated max pool -> leaky_relu with a negative slope, float32, [2, 3, 9, 10]: 4-D
// values (channels-last applies), a weight, and two of the audit's widened values.
std::string data(int64_t n, uint64_t seed) {
  core::Rng rng(seed);
  std::string s;
  for (int64_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(rng.uniform(-0.5, 0.5));
  return s;
}

ir::Graph model() {
  return ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [2, 3, 9, 10]}],
    "outputs": ["r"],
    "initializers": [{"name": "w", "dtype": "float32", "shape": [4, 3, 3, 3], "data": [)" +
                                 data(108, 5) + R"(]},
                     {"name": "b", "dtype": "float32", "shape": [4], "data": [)" +
                                 data(4, 6) + R"(]}],
    "nodes": [
      {"name": "c", "op": "conv2d", "inputs": ["x", "w", "b"], "outputs": ["c"],
       "attrs": {"out_channels": 4, "kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}},
      {"name": "p", "op": "max_pool2d", "inputs": ["c"], "outputs": ["p"],
       "attrs": {"kernel_shape": [2, 2], "dilations": [2, 3], "pads": [1, 0, 0, 2]}},
      {"name": "r", "op": "leaky_relu", "inputs": ["p"], "outputs": ["r"], "attrs": {"alpha": -0.4}}]})",
                             "variants");
}

ValueMap inputs() {
  core::Rng rng(17);
  core::Tensor x(core::DType::F64, {2, 3, 9, 10});
  for (int64_t i = 0; i < x.numel(); ++i) x.f64()[i] = rng.uniform(-2, 2);
  return {{"x", x.to(core::DType::F32)}};
}

void expect_close(const core::Tensor& a, const core::Tensor& b, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  for (int64_t i = 0; i < a.numel(); ++i)
    ASSERT_NEAR(a.get(i), b.get(i), 1e-5 * (1 + std::abs(b.get(i)))) << what << " element " << i;
}

// Forward (every node output) and one training step of the model on one worker.
struct RunResult {
  ValueMap values;
  TrainResult train;
};
RunResult run(const std::string& backend, const std::vector<std::string>& options, bool training) {
  worker::Worker w(backend, options, worker::Limits{});
  const ir::Graph g = model();
  RunResult r;
  worker::Outcome o = w.compile(g, CompileOptions{core::DType::F32, 1});
  EXPECT_TRUE(o.ok()) << o.str();
  o = w.forward(inputs(), true, r.values);
  EXPECT_TRUE(o.ok()) << o.str();
  if (training) {
    TrainRequest req;
    req.inputs = inputs();
    req.target = core::Tensor(core::DType::F32, r.values.at("r").shape());
    req.loss = "mse_loss";
    o = w.train(req, r.train);
    EXPECT_TRUE(o.ok()) << o.str();
  }
  return r;
}

TEST(Variants, TorchLayoutsAndThreadsGiveThePlainValues) {
  if (!built("torch")) GTEST_SKIP() << "torch backend not built";
  const RunResult plain = run("torch", {}, true);
  for (const std::vector<std::string>& v : std::vector<std::vector<std::string>>{
           {"channels_last"}, {"strided"}, {"threads=2"}, {"channels_last", "strided", "threads=3"}}) {
    const RunResult r = run("torch", v, true);
    SCOPED_TRACE((worker::BackendSpec{"torch", v}.str()));
    for (const auto& [name, t] : plain.values) expect_close(r.values.at(name), t, "value " + name);
    for (const auto& [name, t] : plain.train.grads) expect_close(r.train.grads.at(name), t, "gradient " + name);
  }
}

TEST(Variants, OnednnIsaLimitIsInEffectAndGivesThePlainValues) {
  if (!built("onednn")) GTEST_SKIP() << "onednn backend not built";
  const RunResult plain = run("onednn", {}, true);
  for (const std::string isa : {"sse41", "avx2"}) {
    worker::Worker w("onednn", {"isa=" + isa, "threads=2"}, worker::Limits{});
    worker::BackendInfo info;
    ASSERT_TRUE(w.hello(info).ok());
    EXPECT_NE(info.version.find("isa " + isa + ")"), std::string::npos) << info.version;
    const RunResult r = run("onednn", {"isa=" + isa, "threads=2"}, true);
    for (const auto& [name, t] : plain.values) expect_close(r.values.at(name), t, isa + " value " + name);
    for (const auto& [name, t] : plain.train.grads) expect_close(r.train.grads.at(name), t, isa + " gradient " + name);
  }
}

TEST(Variants, UnknownOptionsStopTheWorkerWithTheReason) {
  for (const auto& [backend, option] : std::vector<std::pair<std::string, std::string>>{
           {"torch", "channels_first"}, {"torch", "threads=0"}, {"onednn", "isa=avx9"}, {"opencv", "threads=x"},
           {"opencv", "opset=9"}, {"opencv", "form=gemm"}, {"opencv", "plain=1"}}) {
    if (!built(backend)) continue;
    worker::Worker w(backend, {option}, worker::Limits{});
    worker::BackendInfo info;
    const worker::Outcome o = w.hello(info);
    EXPECT_FALSE(o.ok()) << backend << ":" << option;
    EXPECT_NE(o.str().find(option), std::string::npos) << o.str();
  }
}

// A campaign whose backend spec carries an option its worker refuses stops before any model, with
// the worker's reason on one line and exit status 2.
TEST(Variants, ACampaignWithABadOptionIsBadInput) {
  const auto out = testing::scratch("variants_bad") / "campaign";
  const testing::Result r =
      testing::run_quorum("fuzz --generator unit --backends faulty:no-such-fault --models 3 --out " + out.string(),
                          "variants_bad");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--backends faulty:no-such-fault: faulty: unknown fault 'no-such-fault'"), std::string::npos)
      << r.err;
  if (built("torch")) {
    const testing::Result t = testing::run_quorum(
        "fuzz --generator unit --backends torch:channels_first --models 3 --out " + out.string() + "2", "variants_bad");
    EXPECT_EQ(t.code, 2) << t.err;
    EXPECT_NE(t.err.find("unknown option 'channels_first'"), std::string::npos) << t.err;
  }
}

TEST(Variants, SpecOptionsReadBackWhatASpecSays) {
  EXPECT_EQ(spec_options("torch"), std::vector<std::string>{});
  EXPECT_EQ(spec_options("onednn:isa=avx2+threads=2"), (std::vector<std::string>{"isa=avx2", "threads=2"}));
  EXPECT_EQ(count_option("x", "threads=12"), 12);
  EXPECT_THROW(count_option("x", "threads=0"), core::UserError);
  EXPECT_THROW(count_option("x", "threads="), core::UserError);
}

// A finding on a variant: libtorch's elu without expm1 (the ledger's torch-elu-no-expm1, a
// precision class) is found on torch:strided+threads=2, the bundle records that spec, replay runs
// it again on that variant, and the reproducer lays the inputs out the same way.
TEST(Variants, AFindingOnAVariantRecordsReplaysAndReproducesIt) {
  if (!built("torch")) GTEST_SKIP() << "torch backend not built";
  campaign::CampaignOptions opt;
  opt.generator = "elu";
  opt.setup.backends = worker::parse_backends("torch:strided+threads=2");
  opt.setup.mode = campaign::Mode::Infer;
  opt.models = 1;
  opt.seed = 1;
  opt.out = (fs::temp_directory_path() / ("quorum_variants_" + std::to_string(::getpid()))).string();
  opt.quiet = true;
  fs::remove_all(opt.out);
  std::ostringstream log;
  campaign::run_campaign(
      opt,
      [](int64_t, core::Rng&) {
        campaign::ModelCase m;
        m.graph = ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 2]}],
          "outputs": ["y"], "nodes": [{"name": "y", "op": "elu", "inputs": ["x"], "outputs": ["y"],
                                       "attrs": {"alpha": 1000000.0}}]})",
                                      "elu");
        m.inputs = {{"x", core::Tensor::f64({1, 2}, {-1e-8, -1e-40})}};
        return m;
      },
      log);
  const auto all = store::open_sqlite_store(opt.out)->findings();
  ASSERT_EQ(all.size(), 1u) << log.str();
  EXPECT_EQ(all[0].signature, "inconsistency|FC|torch:strided+threads=2|elu|{}");
  std::ifstream in(all[0].bundle + "/finding.json");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("\"backend\": \"torch:strided+threads=2\""), std::string::npos) << text.str();
  EXPECT_TRUE(campaign::replay(all[0].bundle).reproduced);
  const report::Repro rp = report::write_repro(all[0].bundle, opt.out + "/repro");
  ASSERT_TRUE(rp.written) << rp.reason;
  std::ifstream py(rp.dir + "/repro.py");
  std::stringstream src;
  src << py.rdbuf();
  EXPECT_NE(src.str().find("torch.set_num_threads(2)"), std::string::npos);
  EXPECT_NE(src.str().find("big[..., ::2]"), std::string::npos);
  fs::remove_all(opt.out);
}

}  // namespace
}  // namespace quorum::backends
