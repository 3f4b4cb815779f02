// The exec backend through the real worker: a NumPy runner (tests/backends/exec_runners/) must match
// the reference, and every way a program can fail — a signal, a hang, exit status 3 or 1, missing or
// malformed output files — must come back as its outcome, leave no process behind and leave the
// worker able to serve the next model. Ends with a short `quorum fuzz` campaign on the exec backend.
#include <signal.h>
#include <stdlib.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/backend.h"
#include "backends/refusal.h"
#include "store/store.h"
#include "ir/build.h"
#include "ops/registry.h"
#include "run_quorum.h"
#include "run_worker.h"
#include "worker/supervisor.h"

namespace quorum::worker {
namespace {

namespace fs = std::filesystem;

const std::string kPython = "/usr/bin/python3";

std::string runner() { return std::string(QUORUM_SOURCE_DIR) + "/tests/backends/exec_runners/numpy_runner.py"; }

// The exec backend's options: `options` (timeout=...), then python, the runner and `runner_args`.
std::vector<std::string> exec_args(std::vector<std::string> options, const std::vector<std::string>& runner_args = {}) {
  options.push_back(kPython);
  options.push_back(runner());
  options.insert(options.end(), runner_args.begin(), runner_args.end());
  return options;
}

bool python_ready() {
  static const bool ok = std::system((kPython + " -c 'import numpy, onnx' 2>/dev/null").c_str()) == 0;
  return ok;
}

#define REQUIRE_PYTHON()                                                                          \
  if (!python_ready()) GTEST_SKIP() << kPython << " cannot import numpy and onnx (python3-numpy, " \
                                                  "python3-onnx from deps/debian.txt)"

using testing::unit;

// x [2,4] -> dense(3) -> relu, sigmoid -> add -> mul(x @ W2) -> tanh; outputs t and r (two real
// outputs, in that order), every other node output an intermediate.
ir::SingleNode small_network() {
  ir::SingleNode m;
  ir::Graph& g = m.graph;
  g.name = "small";
  g.inputs = {{"x", {core::DType::F32, {2, 4}}}};
  core::Rng rng(7);
  auto weights = [&](core::Shape shape) {
    core::Tensor t(core::DType::F32, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = static_cast<float>(rng.uniform(-1, 1));
    return t;
  };
  g.initializers["fc.weight"] = weights({3, 4});
  g.initializers["fc.bias"] = weights({3});
  g.initializers["w2"] = weights({4, 3});
  g.nodes = {
      {"fc", "dense", {"x", "fc.weight", "fc.bias"}, {"fc"}, {{"units", int64_t{3}}}},
      {"r", "relu", {"fc"}, {"r"}, {}},
      {"s", "sigmoid", {"fc"}, {"s"}, {}},
      {"a", "add", {"r", "s"}, {"a"}, {}},
      {"xw", "matmul", {"x", "w2"}, {"xw"}, {}},
      {"m", "mul", {"a", "xw"}, {"m"}, {}},
      {"t", "tanh", {"m"}, {"t"}, {}},
  };
  g.outputs = {"t", "r"};
  ir::validate(g, "small_network");
  m.inputs["x"] = core::Tensor::f64({2, 4}, {0.5, -1, 0.25, 2, -0.75, 1.5, 0, -2});
  return m;
}

using testing::run;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Whether a process runs (a zombie waiting for its parent's wait() does not).
bool running(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return false;
  const auto p = line.rfind(')');
  return p != std::string::npos && p + 2 < line.size() && line[p + 2] != 'Z' && line[p + 2] != 'X';
}

bool gone_within(pid_t pid, double s) {
  const auto t0 = std::chrono::steady_clock::now();
  while (running(pid))
    if (seconds_since(t0) > s) return false;
    else ::usleep(10000);
  return true;
}

std::vector<pid_t> read_pids(const fs::path& file) {
  std::ifstream in(file);
  std::vector<pid_t> pids;
  for (pid_t p; in >> p;) pids.push_back(p);
  return pids;
}

// A private $TMPDIR for the workers started in this scope, so the tests can see that the exec
// backend removes its directories.
class TmpDir {
 public:
  TmpDir() : dir_(quorum::testing::scratch("exec_test") / "tmp") {
    fs::create_directories(dir_);
    const char* old = std::getenv("TMPDIR");
    if (old) old_ = old;
    had_ = old != nullptr;
    ::setenv("TMPDIR", dir_.c_str(), 1);
  }
  ~TmpDir() {
    if (had_) ::setenv("TMPDIR", old_.c_str(), 1);
    else ::unsetenv("TMPDIR");
    fs::remove_all(dir_);
  }
  size_t entries() const { return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), {})); }
  const fs::path& path() const { return dir_; }

 private:
  fs::path dir_;
  std::string old_;
  bool had_ = false;
};

TEST(ExecBackend, WithoutAProgramSupportsNothing) {
  Worker w("exec");
  BackendInfo info;
  ASSERT_TRUE(w.hello(info).ok());
  EXPECT_EQ(info.name, "exec");
  EXPECT_FALSE(info.trains);
  std::vector<NodeSupport> s;
  ASSERT_TRUE(w.supports(unit("relu").graph, false, s).ok());
  ASSERT_EQ(s.size(), 1u);
  EXPECT_FALSE(s[0].ok);
  EXPECT_EQ(s[0].reason, "exec needs a program: --backends exec:PROGRAM+ARG...");
}

TEST(ExecBackend, OptionsLabelAndBadOptions) {
  REQUIRE_PYTHON();
  Worker w("exec", exec_args({"timeout=7.5", "opset=17", "name=numpy-runner"}));
  BackendInfo info;
  ASSERT_TRUE(w.hello(info).ok());
  EXPECT_EQ(info.version, "numpy-runner (exec: ONNX opset 17, time limit 7.5 s)");
  // Losses are not exported: the exporter's reason comes back.
  core::Rng rng(1);
  const ir::SingleNode loss = ir::single_node_graph(ops::op("mse_loss"), ops::op("mse_loss").sample(rng), rng);
  std::vector<NodeSupport> s;
  ASSERT_TRUE(w.supports(loss.graph, false, s).ok());
  EXPECT_FALSE(s.at(0).ok);
  EXPECT_NE(s.at(0).reason.find("not exported to ONNX"), std::string::npos) << s.at(0).reason;

  for (const std::vector<std::string>& bad : {std::vector<std::string>{"timeout=soon", kPython},
                                              std::vector<std::string>{"opset=10", kPython},
                                              std::vector<std::string>{"/no/such/runner"}}) {
    Worker b("exec", bad);
    const Outcome o = b.hello(info);
    EXPECT_EQ(o.status, Status::Crash) << "a bad option stops the worker like any backend's";
    EXPECT_NE(o.stderr_tail.find("exec: "), std::string::npos) << o.str();
  }
}

TEST(ExecBackend, NumpyRunnerMatchesTheReference) {
  REQUIRE_PYTHON();
  TmpDir tmp;
  Worker w("exec", exec_args({}));
  const ir::SingleNode net = small_network();
  backends::ValueMap got;
  const Outcome o = run(w, net, &got);
  ASSERT_TRUE(o.ok()) << o.str();
  const backends::ValueMap want = backends::reference_forward(net.graph, net.inputs, core::DType::F32);
  ASSERT_EQ(got.size(), 7u) << "every node output, intermediates included";
  for (const auto& [name, t] : got) {
    ASSERT_EQ(t.dtype(), core::DType::F32) << name;
    ASSERT_EQ(t.shape(), want.at(name).shape()) << name;
    for (int64_t i = 0; i < t.numel(); ++i)
      EXPECT_NEAR(t.get(i), want.at(name).get(i), 1e-5) << name << "[" << i << "]";
  }
  // Without intermediates: exactly the graph outputs.
  got.clear();
  ASSERT_TRUE(w.forward(net.inputs, false, got).ok());
  EXPECT_EQ(got.size(), 2u);
  EXPECT_TRUE(got.count("t") && got.count("r"));
  // Single operators, and float64 models.
  for (const char* op : {"relu", "sigmoid", "tanh", "abs", "exp", "sub", "div", "matmul", "dense"}) {
    const ir::SingleNode sn = unit(op);
    for (core::DType dtype : {core::DType::F32, core::DType::F64}) {
      ASSERT_TRUE(w.compile(sn.graph, {dtype, 1}).ok()) << op;
      backends::ValueMap out;
      const Outcome r = w.forward(sn.inputs, true, out);
      ASSERT_TRUE(r.ok()) << op << ": " << r.str();
      const core::Tensor& y = out.at("out");
      const core::Tensor ref = backends::reference_forward(sn.graph, sn.inputs, dtype).at("out");
      EXPECT_EQ(y.dtype(), dtype) << op;
      for (int64_t i = 0; i < y.numel(); ++i)
        EXPECT_NEAR(y.get(i), ref.get(i), 1e-5 * (1 + std::abs(ref.get(i)))) << op << "[" << i << "]";
    }
  }
  EXPECT_EQ(w.restarts(), 0);
  EXPECT_EQ(tmp.entries(), 0u) << "every model directory is removed";
}

TEST(ExecBackend, CrashIsACrashWithItsSignalAndTheNextModelRuns) {
  REQUIRE_PYTHON();
  TmpDir tmp;
  Worker w("exec", exec_args({}, {"fault=crash:Sigmoid"}));
  const Outcome o = run(w, unit("sigmoid"));
  EXPECT_EQ(o.status, Status::Crash);
  EXPECT_EQ(o.signal, SIGSEGV);
  EXPECT_EQ(o.message, "SIGSEGV");
  EXPECT_NE(o.stderr_tail.find("numpy runner: crashing on purpose"), std::string::npos) << o.str();
  const Outcome next = run(w, unit("relu"));
  EXPECT_TRUE(next.ok()) << next.str();
  EXPECT_EQ(w.restarts(), 0) << "the program died, not the worker";
  EXPECT_EQ(tmp.entries(), 0u);
}

TEST(ExecBackend, HangIsCutAtTheExecTimeLimitWithNoProcessLeft) {
  REQUIRE_PYTHON();
  TmpDir tmp;
  const fs::path pidfile = tmp.path().parent_path() / "hang.pids";
  Worker w("exec", exec_args({"timeout=2"}, {"fault=hang:Tanh", "pidfile=" + pidfile.string()}));
  const auto t0 = std::chrono::steady_clock::now();
  const Outcome o = run(w, unit("tanh"));
  const double took = seconds_since(t0);
  EXPECT_EQ(o.status, Status::Timeout) << o.str();
  EXPECT_EQ(o.message, "no answer within 2 s (the exec time limit); program killed");
  EXPECT_NE(o.stderr_tail.find("hanging on purpose"), std::string::npos) << o.str();
  EXPECT_GE(took, 2.0);
  EXPECT_LT(took, 5.0);
  const std::vector<pid_t> pids = read_pids(pidfile);
  ASSERT_EQ(pids.size(), 2u) << "the runner and its grandchild";
  for (pid_t p : pids) EXPECT_TRUE(gone_within(p, 1.0)) << "process " << p << " survived the time limit";
  const Outcome next = run(w, unit("relu"));
  EXPECT_TRUE(next.ok()) << next.str();
  EXPECT_EQ(w.restarts(), 0);
  EXPECT_EQ(tmp.entries(), 0u);
}

TEST(ExecBackend, ProgramDiesWithAKilledWorker) {
  REQUIRE_PYTHON();
  TmpDir tmp;
  const fs::path pidfile = tmp.path().parent_path() / "orphan.pids";
  // The supervisor's limit (1 s) below the exec limit (30 s): the worker is killed first.
  Worker w("exec", exec_args({"timeout=30"}, {"fault=hang", "pidfile=" + pidfile.string()}), Limits{1.0, 16384});
  const Outcome o = run(w, unit("relu"));
  EXPECT_EQ(o.status, Status::Timeout) << o.str();
  const std::vector<pid_t> pids = read_pids(pidfile);
  ASSERT_EQ(pids.size(), 2u);
  EXPECT_TRUE(gone_within(pids[0], 2.0)) << "the program outlived its worker (PR_SET_PDEATHSIG)";
  // A process the program started itself is out of reach once the worker is gone
  // (docs/exec-backend.md): clean it up here.
  ::kill(pids[1], SIGKILL);
}

TEST(ExecBackend, ExitStatusesAreOutcomes) {
  REQUIRE_PYTHON();
  {
    Worker w("exec", exec_args({}, {"fault=exit3"}));
    const Outcome o = run(w, unit("relu"));
    EXPECT_EQ(o.status, Status::ConversionFailure);
    EXPECT_EQ(o.message,
              "the program could not load the model (exit status 3): numpy runner: refusing the model on purpose");
  }
  {
    Worker w("exec", exec_args({}, {"fault=exit1"}));
    const Outcome o = run(w, unit("relu"));
    EXPECT_EQ(o.status, Status::LibraryError);
    EXPECT_EQ(o.message, "the program exited with status 1");
    EXPECT_EQ(o.signal, 0);
    EXPECT_NE(o.stderr_tail.find("RuntimeError: numpy runner: failing on purpose"), std::string::npos) << o.str();
    EXPECT_NE(o.stderr_tail.find("Traceback"), std::string::npos) << o.str();
  }
  {
    // An operator the runner does not have: its own exit status 3.
    Worker w("exec", exec_args({}));
    const Outcome o = run(w, unit("softmax"));
    EXPECT_EQ(o.status, Status::ConversionFailure);
    EXPECT_NE(o.message.find("no operator Softmax"), std::string::npos) << o.str();
  }
}

TEST(ExecBackend, MissingOrMalformedOutputsAreLibraryErrors) {
  REQUIRE_PYTHON();
  const std::pair<const char*, const char*> cases[] = {
      {"missing", "the program wrote no output_0.npy (value 'out'), a graph output"},
      {"garbage", "output_0.npy (value 'out'): not a .npy file (bad magic)"},
      {"shape", "output_0.npy (value 'out'): shape [7], the model's is [2,3]"},
      {"dtype", "output_0.npy (value 'out'): dtype float64, the model's is float32"},
  };
  core::Rng rng(1);
  ops::Case c;
  c.inputs = {{core::DType::F32, {2, 3}}};
  const ir::SingleNode sn = ir::single_node_graph(ops::op("relu"), c, rng);
  for (const auto& [fault, message] : cases) {
    Worker w("exec", exec_args({}, {std::string("fault=") + fault}));
    const Outcome o = run(w, sn);
    EXPECT_EQ(o.status, Status::LibraryError) << fault;
    EXPECT_EQ(o.message, message) << fault;
  }
}

TEST(ExecBackend, FuzzCampaignRecordsTheRunnersCrashes) {
  REQUIRE_PYTHON();
  const fs::path out = quorum::testing::scratch("exec_test") / "campaign";
  fs::remove_all(out);
  const std::string spec = "exec:" + kPython + "+" + runner() + "+fault=crash";
  const quorum::testing::Result r = quorum::testing::run_quorum(
      "fuzz --generator unit --backends " + spec + " --models 5 --mode infer --seed 3 --out " + out.string(),
      "exec_test");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto store = store::open_sqlite_store(out.string());
  EXPECT_EQ(store->models_done(), 5);
  const auto findings = store->findings();
  ASSERT_EQ(findings.size(), 1u) << "one crash, deduplicated";
  EXPECT_EQ(findings[0].kind, core::FindingKind::Crash);
  EXPECT_EQ(findings[0].backend, spec);
  EXPECT_EQ(findings[0].message, "crash: SIGSEGV | numpy runner: crashing on purpose");
  EXPECT_GE(findings[0].hits, 1);
  fs::remove_all(out);
}

// Exit status 4 with "unsupported: OpType" names an operator the program does not run: an abstention
// carrying the refusal (the operator at the backend's opset), not a failure, in both modes.
TEST(ExecBackend, DeclaredUnsupportedOperatorIsAnAbstentionNamingIt) {
  REQUIRE_PYTHON();
  TmpDir tmp;
  for (const bool persistent : {false, true}) {
    std::vector<std::string> options = {"opset=14"};
    if (persistent) options.push_back("persistent");
    Worker w("exec", exec_args(options, {"unsupported=4"}));
    const Outcome o = run(w, unit("softmax"));
    EXPECT_EQ(o.status, Status::Unsupported) << o.str();
    EXPECT_EQ(o.message, "unsupported: Softmax (ONNX opset 14)") << persistent;
    const std::optional<backends::Refusal> r = backends::parse_refusal(o.message);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->op, "Softmax");
    EXPECT_EQ(r->onnx_opset, 14);
    EXPECT_FALSE(r->nodes_in(unit("softmax").graph).empty());
    EXPECT_TRUE(r->nodes_in(unit("relu").graph).empty());
    EXPECT_TRUE(run(w, unit("relu")).ok());
    EXPECT_EQ(w.restarts(), 0);
  }
  // refuse= declares an operator the runner has; a refusal naming nothing the model holds is the
  // program's error, not an abstention.
  Worker w("exec", exec_args({}, {"unsupported=4", "refuse=Relu"}));
  EXPECT_EQ(run(w, unit("relu")).message, "unsupported: Relu (ONNX opset 13)");
  Worker lie("exec", exec_args({}, {"unsupported=4", "claim=LSTM"}));
  const Outcome o = run(lie, unit("softmax"));
  EXPECT_EQ(o.status, Status::LibraryError) << o.str();
  EXPECT_NE(o.message.find("named LSTM, which the model does not hold"), std::string::npos) << o.str();
  EXPECT_EQ(tmp.entries(), 0u);
}

// Refusals of one attribute value, as a program words them, match the exported attribute.
TEST(ExecBackend, RefusalsParseAndMatchAttributeValues) {
  const auto r = backends::parse_refusal("unsupported: Conv auto_pad=SAME_UPPER (ONNX opset 13)");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->attr, "auto_pad");
  EXPECT_EQ(r->value, "SAME_UPPER");
  EXPECT_EQ(r->str(), "unsupported: Conv auto_pad=SAME_UPPER (ONNX opset 13)");
  EXPECT_FALSE(backends::parse_refusal("node 'x': not supported"));
  EXPECT_FALSE(backends::parse_refusal("unsupported: Conv auto_pad"));
  EXPECT_TRUE(backends::same_attr_value("[1, 2]", "1,2"));
  EXPECT_TRUE(backends::same_attr_value("b'SAME_UPPER'", "SAME_UPPER"));
  EXPECT_TRUE(backends::same_attr_value("0.2", "0.20000000298023224"));
  EXPECT_FALSE(backends::same_attr_value("1", "2"));
  ir::SingleNode same = unit("conv2d");
  same.graph.nodes[0].attrs["auto_pad"] = std::string("SAME_UPPER");
  ir::validate(same.graph, "same");
  EXPECT_EQ(r->nodes_in(same.graph), std::vector<std::string>{same.graph.nodes[0].name});
  EXPECT_TRUE(r->nodes_in(unit("conv2d").graph).empty()) << "auto_pad NOTSET is not refused";
  const backends::Refusal catalogue{"conv2d", "", "", 0};
  EXPECT_EQ(catalogue.nodes_in(same.graph).size(), 1u);
}

// A campaign records a declared refusal as no finding, learns it, stops sending models holding the
// operator to that backend, and keeps what it learned when it resumes.
TEST(ExecBackend, FuzzCampaignLearnsRefusalsAndStopsSendingThem) {
  REQUIRE_PYTHON();
  const fs::path out = quorum::testing::scratch("exec_test") / "refusals";
  fs::remove_all(out);
  const std::string spec = "exec:" + kPython + "+" + runner() + "+unsupported=4";
  const std::string base = "fuzz --generator unit --ops relu,sigmoid,softmax --backends " + spec +
                           " --mode infer --seed 3 --reduce 5 --out " + out.string();
  const quorum::testing::Result r = quorum::testing::run_quorum(base + " --models 9", "exec_test");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("learned: " + spec + " does not run Softmax (ONNX opset 13)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--skip_ops softmax"), std::string::npos) << r.out;
  {
    const auto opened = store::open_sqlite_store(out.string());
    store::Store& store = *opened;
    EXPECT_EQ(store.models_done(), 9);
    EXPECT_TRUE(store.findings().empty()) << "a refusal is not a finding";
    const auto refusals = store.refusals();
    ASSERT_EQ(refusals.size(), 1u);
    EXPECT_EQ(refusals[0].backend, spec);
    EXPECT_EQ(refusals[0].refusal, "Softmax (ONNX opset 13)");
    EXPECT_EQ(refusals[0].refused, 1) << "the first softmax model is refused";
    EXPECT_EQ(refusals[0].not_sent, 2) << "the other two are not sent";
    EXPECT_EQ(refusals[0].ops, "softmax");
  }
  // Resumed: the refusal is still known, so the next softmax model is not sent either.
  const quorum::testing::Result again = quorum::testing::run_quorum(base + " --models 12", "exec_test");
  ASSERT_EQ(again.code, 0) << again.out << again.err;
  const auto opened = store::open_sqlite_store(out.string());
  store::Store& store = *opened;
  EXPECT_EQ(store.models_done(), 12);
  EXPECT_TRUE(store.findings().empty());
  ASSERT_EQ(store.refusals().size(), 1u);
  EXPECT_EQ(store.refusals()[0].refused, 1);
  EXPECT_EQ(store.refusals()[0].not_sent, 3);
  fs::remove_all(out);
}

// The persistent mode: one program serves many models; a hang is cut at the time limit and a crash
// ends only that model, the next request starting the program again.
TEST(ExecBackend, PersistentProgramSurvivesHangsAndCrashes) {
  REQUIRE_PYTHON();
  TmpDir tmp;
  Worker w("exec", exec_args({"timeout=2", "persistent"}, {"fault=hang:Tanh"}));
  BackendInfo info;
  ASSERT_TRUE(w.hello(info).ok());
  EXPECT_NE(info.version.find("persistent"), std::string::npos) << info.version;
  const ir::SingleNode net = small_network();
  backends::ValueMap got;
  ASSERT_TRUE(run(w, unit("relu"), &got).ok());
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(run(w, unit("sigmoid")).ok());
  const Outcome hang = run(w, unit("tanh"));
  EXPECT_EQ(hang.status, Status::Timeout) << hang.str();
  EXPECT_TRUE(run(w, unit("relu")).ok()) << "started again after the hang";
  Worker c("exec", exec_args({"persistent"}, {"fault=crash:Sigmoid"}));
  EXPECT_TRUE(run(c, unit("relu")).ok());
  const Outcome crash = run(c, unit("sigmoid"));
  EXPECT_EQ(crash.status, Status::Crash) << crash.str();
  EXPECT_EQ(crash.message, "SIGSEGV");
  EXPECT_NE(crash.stderr_tail.find("numpy runner: crashing on purpose"), std::string::npos) << crash.str();
  const Outcome next = run(c, unit("relu"));
  EXPECT_TRUE(next.ok()) << next.str();
  EXPECT_EQ(w.restarts() + c.restarts(), 0) << "the program died, not the worker";
}

// A campaign on a persistent runner that crashes on one operator: one crash finding, and the
// campaign runs every model.
TEST(ExecBackend, PersistentRunnerCrashIsOneFindingAndTheCampaignGoesOn) {
  REQUIRE_PYTHON();
  const fs::path out = quorum::testing::scratch("exec_test") / "persistent";
  fs::remove_all(out);
  const std::string spec = "exec:persistent+" + kPython + "+" + runner() + "+fault=crash:Sigmoid";
  const quorum::testing::Result r = quorum::testing::run_quorum(
      "fuzz --generator unit --ops relu,sigmoid,tanh --backends " + spec +
          " --models 9 --mode infer --seed 3 --reduce 0 --out " + out.string(),
      "exec_test");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto opened = store::open_sqlite_store(out.string());
  store::Store& store = *opened;
  EXPECT_EQ(store.models_done(), 9);
  const auto findings = store.findings();
  ASSERT_EQ(findings.size(), 1u) << r.out;
  EXPECT_EQ(findings[0].kind, core::FindingKind::Crash);
  EXPECT_EQ(findings[0].backend, spec);
  EXPECT_EQ(findings[0].hits, 3) << "each sigmoid model";
  EXPECT_EQ(findings[0].message, "crash: SIGSEGV | numpy runner: crashing on purpose");
  fs::remove_all(out);
}

}  // namespace
}  // namespace quorum::worker
