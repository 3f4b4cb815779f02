// The ort backend through the real worker and real ONNX Runtime (onnxruntime-node from `make deps`):
// the pinned run (level disabled) and an optimizing level match the reference on a small network and
// name what ORT made of each node; a bad option is one line and exit status 2; a runner that dies
// mid-model is that model's crash and the next model runs; a short campaign reports nothing the ledger
// does not know.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "backends/backend.h"
#include "store/store.h"
#include "ir/build.h"
#include "ir/json_io.h"
#include "run_quorum.h"
#include "run_worker.h"
#include "worker/supervisor.h"

namespace quorum::worker {
namespace {

namespace fs = std::filesystem;

const std::string kOrtDir = std::string(QUORUM_SOURCE_DIR) + "/src/backends/ort";

bool ort_ready() {
  const auto& have = available_backends();
  return std::find(have.begin(), have.end(), "ort") != have.end() &&
         fs::exists(kOrtDir + "/node_modules/onnxruntime-node/package.json");
}

#define REQUIRE_ORT() \
  if (!ort_ready())   \
  GTEST_SKIP() << "ort backend not built, or onnxruntime-node not installed in " << kOrtDir << " (make deps)"

// x [2,4] -> dense(3) -> relu, sigmoid -> add; conv-free, with a value two nodes read.
ir::SingleNode small_network() {
  ir::SingleNode m;
  ir::Graph& g = m.graph;
  g.name = "small";
  g.inputs = {{"x", {core::DType::F32, {2, 4}}}};
  core::Rng rng(7);
  core::Tensor w(core::DType::F32, {3, 4}), b(core::DType::F32, {3});
  for (int64_t i = 0; i < w.numel(); ++i) w.f32()[i] = static_cast<float>(rng.uniform(-1, 1));
  for (int64_t i = 0; i < b.numel(); ++i) b.f32()[i] = static_cast<float>(rng.uniform(-1, 1));
  g.initializers["fc.weight"] = w;
  g.initializers["fc.bias"] = b;
  g.nodes = {
      {"fc", "dense", {"x", "fc.weight", "fc.bias"}, {"fc"}, {{"units", int64_t{3}}}},
      {"r", "relu", {"fc"}, {"r"}, {}},
      {"s", "sigmoid", {"fc"}, {"s"}, {}},
      {"a", "add", {"r", "s"}, {"a"}, {}},
  };
  g.outputs = {"a"};
  ir::validate(g, "small_network");
  m.inputs["x"] = core::Tensor::f64({2, 4}, {0.5, -1, 0.25, 2, -0.75, 1.5, 0, -2});
  return m;
}

void expect_reference(const backends::ValueMap& got, const ir::SingleNode& net, const std::string& what) {
  const backends::ValueMap want = backends::reference_forward(net.graph, net.inputs, core::DType::F32);
  for (const auto& n : net.graph.nodes) {
    ASSERT_TRUE(got.count(n.outputs[0])) << what << ": every node output, intermediates included: " << n.name;
    const core::Tensor& t = got.at(n.outputs[0]);
    ASSERT_EQ(t.shape(), want.at(n.outputs[0]).shape()) << what << " " << n.name;
    for (int64_t i = 0; i < t.numel(); ++i)
      EXPECT_NEAR(t.get(i), want.at(n.outputs[0]).get(i), 1e-5) << what << " " << n.name << "[" << i << "]";
  }
}

// What ORT made of each node, one "node: lowering" line per entry (empty, and a test failure, when it cannot say).
std::string lowering_text(Worker& w) {
  std::map<std::string, std::vector<std::string>> lowering;
  EXPECT_TRUE(w.lowering(lowering).ok());
  std::string all;
  for (const auto& [node, l] : lowering)
    for (const auto& s : l) all += node + ": " + s + "\n";
  return all;
}

TEST(OrtBackend, PinnedAndOptimizedRunsMatchTheReferenceAndNameWhatOrtMade) {
  REQUIRE_ORT();
  const ir::SingleNode net = small_network();
  for (const std::vector<std::string>& options : {std::vector<std::string>{}, {"level=all"}}) {
    const std::string what = options.empty() ? "ort" : "ort:" + options[0];
    Worker w("ort", options);
    backends::ValueMap got;
    const Outcome o = testing::run(w, net, &got);
    ASSERT_TRUE(o.ok()) << what << ": " << o.str();
    expect_reference(got, net, what);
    const BackendInfo* info = w.info();
    ASSERT_NE(info, nullptr);
    EXPECT_NE(info->version.find("ONNX Runtime 1.30.0"), std::string::npos) << info->version;
    // What ORT made of the dense node: its ONNX form at every level, and above disabled the node of
    // the optimized model that writes its output.
    std::map<std::string, std::vector<std::string>> lowering;
    ASSERT_TRUE(w.lowering(lowering).ok());
    const std::vector<std::string>& fc = lowering.at("fc");
    ASSERT_FALSE(fc.empty());
    EXPECT_EQ(fc[0].rfind("onnx opset ", 0), 0u) << fc[0];
    const bool names_ort_node =
        std::any_of(fc.begin(), fc.end(), [](const std::string& s) { return s.rfind("ort node ", 0) == 0; });
    EXPECT_EQ(names_ort_node, !options.empty()) << what;
    // A float64 model: ORT runs double kernels where it has them.
    const ir::SingleNode relu = testing::unit("relu");
    ASSERT_TRUE(w.compile(relu.graph, {core::DType::F64, 1}).ok());
    backends::ValueMap out;
    ASSERT_TRUE(w.forward(relu.inputs, true, out).ok());
    EXPECT_EQ(out.at("out").dtype(), core::DType::F64);
    EXPECT_EQ(w.restarts(), 0);
  }
}

TEST(OrtBackend, BadOptionIsOneLineNamingTheValues) {
  REQUIRE_ORT();
  const testing::Result r = testing::run_quorum("fuzz --generator unit --backends ort:level=fast --models 1 --out " +
                                                    (testing::scratch("ort_test") / "bad").string(),
                                                "ort_test");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("level= takes one of disabled, basic, extended, all"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// A runner that dies while serving a model: QUORUM_ORT_MODULES points at a stand-in onnxruntime-node
// (tests/backends/ort_fake/) that aborts on a model holding a node named crash_here and otherwise
// hands every call to the real package.
TEST(OrtBackend, RunnerDyingMidModelIsACrashAndTheNextModelRuns) {
  REQUIRE_ORT();
  ::setenv("QUORUM_ORT_MODULES", (std::string(QUORUM_SOURCE_DIR) + "/tests/backends/ort_fake").c_str(), 1);
  ::setenv("QUORUM_ORT_REAL_MODULES", (kOrtDir + "/node_modules").c_str(), 1);
  Worker w("ort");
  ir::SingleNode boom = testing::unit("tanh");
  boom.graph.nodes[0].name = "crash_here";
  const Outcome o = testing::run(w, boom);
  EXPECT_EQ(o.status, Status::Crash) << o.str();
  EXPECT_EQ(o.signal, SIGABRT) << o.str();
  EXPECT_NE(o.stderr_tail.find("stand-in onnxruntime-node: aborting on purpose"), std::string::npos) << o.str();
  const Outcome next = testing::run(w, testing::unit("relu"));
  EXPECT_TRUE(next.ok()) << next.str();
  EXPECT_EQ(w.restarts(), 0) << "the runner died, not the worker";
  ::unsetenv("QUORUM_ORT_MODULES");
  ::unsetenv("QUORUM_ORT_REAL_MODULES");
}

// A campaign on real ORT, pinned and at level all: every finding it records is a ledger entry's,
// a node that fails on the wrong shape an upstream node gave it (seed 7: a Reshape and a Sum after a
// dilated SAME max pool; seed 5 had a Sub before the catalogue grew) through its reduced case, which is
// the upstream node's entry.
TEST(OrtBackend, ShortCampaignReportsNothingTheLedgerDoesNotKnow) {
  REQUIRE_ORT();
  const fs::path out = testing::scratch("ort_test") / "campaign";
  fs::remove_all(out);
  const testing::Result r = testing::run_quorum(
      "fuzz --generator muffin --backends ort,ort:level=all --models 40 --mode infer --seed 7 --out " + out.string(),
      "ort_test");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto store = store::open_sqlite_store(out.string());
  EXPECT_EQ(store->models_done(), 40);
  const auto findings = store->findings();
  EXPECT_FALSE(findings.empty()) << "the seed's models reach ORT's known defects";
  bool through_reduced = false;
  for (const auto& f : findings) {
    EXPECT_FALSE(f.known.empty()) << "not in the ledger: " << f.signature << " (root cause " << f.root_cause << ")";
    through_reduced = through_reduced ||
                      (f.op.rfind("max_pool", 0) != 0 && f.known == "ort-maxpool-same-dilation-shape");
  }
  EXPECT_TRUE(through_reduced) << "a node that fails on the pool's shape is the pool's entry";
  fs::remove_all(out);
}

// Quantized models: ONNX Runtime's int8 kernels (QuantizeLinear, QLinearConv, QLinearMatMul, DequantizeLinear; in
// the optimized run its NHWC QLinearConv) agree exactly with the reference's integer arithmetic on every unit case
// it takes (on a CPU with VNNI: without, its U8S8 pair sums saturate, a ledger convention); the type
// combinations it has no kernel for are refused with the reason, not crashes. (Its contrib
// QLinearAdd and the other twins have bugs in its ledger: ort-qlinear-float-to-int-overflow.)
TEST(OrtBackend, QuantizedUnitModelsAgreeExactly) {
  REQUIRE_ORT();
  const fs::path out = testing::scratch("ort_test") / "int8";
  fs::remove_all(out);
  const testing::Result r = testing::run_quorum(
      "fuzz --generator unit --dtype int8 --backends ort --models 48 --seed 17 "
      "--ops quantize_linear,dequantize_linear,qlinear_conv2d,qlinear_matmul --out " +
          out.string(),
      "ort_test");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  // Exact on a CPU with VNNI; without it every finding is the U8S8 pair saturation the ledger records (an entry
  // that labels nothing on a VNNI CPU).
  int findings = 0;
  for (size_t at = r.out.find("\nnew "); at != std::string::npos; at = r.out.find("\nnew ", at + 1)) {
    ++findings;
    const std::string line = r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
    EXPECT_NE(line.find("(known: ort-int8-pair-saturation-on-cpus-without-vnni)"), std::string::npos) << line;
  }
  EXPECT_TRUE(findings > 0 || r.out.find("no findings") != std::string::npos) << r.out;
  EXPECT_NE(r.out.find("has no QLinearConv or QLinearMatMul kernel"), std::string::npos) << r.out;
  const auto store = store::open_sqlite_store(out.string());
  EXPECT_EQ(store->models_done(), 48);
  fs::remove_all(out);
}

// The QDQ exchange form (qlinear=qdq, forced): ONNX Runtime runs a quantized convolution and addition written as
// DequantizeLinear, Conv / Add, QuantizeLinear in float32 as written (level disabled) and fuses them back into
// its quantized kernels when it optimizes (level all); both give the reference's integers (within the one step
// a float32 rounding can move a value), and the optimized run names the fused node.
TEST(OrtBackend, TheQdqFormRunsAsWrittenAndFusedIntoQuantizedKernels) {
  REQUIRE_ORT();
  ir::SingleNode net;
  net.graph = ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 2, 3, 3]}],
    "outputs": ["y"], "initializers": [{"name": "w", "dtype": "int8", "shape": [2, 2, 1, 1], "data": [3, -5, 7, 1]}],
    "nodes": [
      {"name": "q", "op": "quantize_linear", "inputs": ["x"], "outputs": ["q"],
       "attrs": {"scale": 0.05, "zero_point": 3, "to": "int8"}},
      {"name": "c", "op": "qlinear_conv2d", "inputs": ["q", "w"], "outputs": ["c"],
       "attrs": {"kernel_shape": [1, 1], "out_channels": 2, "bias": 0, "x_scale": 0.05, "x_zero_point": 3,
                 "w_scale": 0.02, "w_zero_point": 0, "w_type": "int8", "y_scale": 0.01, "y_zero_point": -4,
                 "to": "int8"}},
      {"name": "a", "op": "qlinear_add", "inputs": ["c", "q"], "outputs": ["a"],
       "attrs": {"x_scales": [0.01, 0.05], "x_zero_points": [-4, 3], "y_scale": 0.03, "y_zero_point": 1,
                 "to": "int8"}},
      {"name": "y", "op": "dequantize_linear", "inputs": ["a"], "outputs": ["y"],
       "attrs": {"scale": 0.03, "zero_point": 1}}]})",
                                 "qdq");
  core::Tensor x(core::DType::F32, {1, 2, 3, 3});
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, -1.0 + 0.13 * static_cast<double>(i));
  net.inputs["x"] = x;
  const backends::ValueMap want = backends::reference_forward(net.graph, net.inputs, core::DType::F32);
  for (const std::vector<std::string>& options :
       {std::vector<std::string>{"form=qlinear=qdq"}, {"form=qlinear=qdq", "level=all"}}) {
    const std::string what = "ort:" + options.back();
    Worker w("ort", options);
    backends::ValueMap got;
    const Outcome o = testing::run(w, net, &got);
    ASSERT_TRUE(o.ok()) << what << ": " << o.str();
    const std::string out = options.size() == 1 ? "a" : "y";  // the optimized run fetches the graph's output only
    ASSERT_TRUE(got.count(out)) << what;
    for (int64_t i = 0; i < want.at(out).numel(); ++i)
      EXPECT_NEAR(got.at(out).get(i), want.at(out).get(i), out == "a" ? 1.0 : 0.03 + 1e-6) << what << " [" << i << "]";
    const std::string all = lowering_text(w);
    EXPECT_NE(all.find("qlinear=qdq"), std::string::npos) << what << "\n" << all;
    if (options.size() == 2) {
      EXPECT_NE(all.find("QLinear"), std::string::npos) << what << " fused nothing:\n" << all;
    }
  }
}

// The integer exchange form (qlinear=integer, forced): ONNX Runtime runs a quantized convolution (uint8 input, int8
// weights per output channel, an int32 bias) and a quantized matmul (int8 input, uint8 weights: no QLinearMatMul
// kernel of ORT 1.30 takes them, the integer form runs them) written as ConvInteger / MatMulInteger, Cast, Mul,
// QuantizeLinear, as written (level disabled) and optimized (level all); both give the reference's integers within
// the one step a float32 rounding can move a value. ORT's MatMulIntegerToFloat fusion does not fire on it: it wants
// the scale as a Mul(a_scale, b_scale) node (dynamic quantization's), and with constant scales constant folding
// has made that Mul a constant first (measured with the scale written either way).
TEST(OrtBackend, TheIntegerFormRunsAsWrittenAndOptimized) {
  REQUIRE_ORT();
  const std::string conv = R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 2, 3, 3]}],
    "outputs": ["y"], "initializers": [{"name": "w", "dtype": "int8", "shape": [2, 2, 1, 1], "data": [3, -5, 7, 127]},
      {"name": "b", "dtype": "int32", "shape": [2], "data": [-300, 4000]}],
    "nodes": [
      {"name": "q", "op": "quantize_linear", "inputs": ["x"], "outputs": ["q"],
       "attrs": {"scale": 0.05, "zero_point": 255, "to": "uint8"}},
      {"name": "c", "op": "qlinear_conv2d", "inputs": ["q", "w", "b"], "outputs": ["c"],
       "attrs": {"kernel_shape": [1, 1], "out_channels": 2, "bias": 1, "x_scale": 0.05, "x_zero_point": 255,
                 "w_scale": 0.02, "w_zero_point": -128, "w_scales": [0.02, 0.003], "w_type": "int8",
                 "y_scale": 0.01, "y_zero_point": -4, "to": "int8"}},
      {"name": "y", "op": "dequantize_linear", "inputs": ["c"], "outputs": ["y"],
       "attrs": {"scale": 0.01, "zero_point": -4}}]})";
  const std::string matmul = R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [2, 3, 3]}],
    "outputs": ["y"], "initializers": [{"name": "w", "dtype": "uint8", "shape": [3, 2], "data": [0, 255, 9, 7, 200, 1]}],
    "nodes": [
      {"name": "q", "op": "quantize_linear", "inputs": ["x"], "outputs": ["q"],
       "attrs": {"scale": 0.05, "zero_point": -128, "to": "int8"}},
      {"name": "c", "op": "qlinear_matmul", "inputs": ["q", "w"], "outputs": ["c"],
       "attrs": {"units": 2, "a_scale": 0.05, "a_zero_point": -128, "w_scale": 0.02, "w_zero_point": 255,
                 "w_scales": [0.02, 0.0071], "w_zero_points": [255, 3], "w_type": "uint8",
                 "y_scale": 0.3, "y_zero_point": 7, "to": "uint8"}},
      {"name": "y", "op": "dequantize_linear", "inputs": ["c"], "outputs": ["y"],
       "attrs": {"scale": 0.3, "zero_point": 7}}]})";
  for (const std::string* json : {&conv, &matmul}) {
    ir::SingleNode net;
    net.graph = ir::graph_from_json(*json, "integer");
    const core::Shape shape = net.graph.inputs[0].type.shape;
    core::Tensor x(core::DType::F32, shape);
    for (int64_t i = 0; i < x.numel(); ++i) x.set(i, -6.5 + 0.77 * static_cast<double>(i));
    net.inputs["x"] = x;
    const backends::ValueMap want = backends::reference_forward(net.graph, net.inputs, core::DType::F32);
    for (const std::vector<std::string>& options :
         {std::vector<std::string>{"form=qlinear=integer"}, {"form=qlinear=integer", "level=all"}}) {
      const std::string what = "ort:" + options.back() + " " + (json == &conv ? "conv" : "matmul");
      Worker w("ort", options);
      // The operator form's refusals (int8 input with uint8 weights, another output type) do not hold for it.
      std::vector<NodeSupport> sup;
      ASSERT_TRUE(w.supports(net.graph, false, sup).ok()) << what;
      for (const auto& s : sup) {
        EXPECT_TRUE(s.ok) << what << ": " << s.node << ": " << s.reason;
      }
      backends::ValueMap got;
      const Outcome o = testing::run(w, net, &got);
      ASSERT_TRUE(o.ok()) << what << ": " << o.str();
      const std::string out = options.size() == 1 ? "c" : "y";  // the optimized run fetches the graph's output only
      ASSERT_TRUE(got.count(out)) << what;
      const double step = out == "c" ? 1.0 : 0.3;
      for (int64_t i = 0; i < want.at(out).numel(); ++i)
        EXPECT_NEAR(got.at(out).get(i), want.at(out).get(i), step * 1.0001) << what << " [" << i << "]";
      const std::string all = lowering_text(w);
      EXPECT_NE(all.find("qlinear=integer"), std::string::npos) << what << "\n" << all;
    }
  }
}

// Per-channel weights in the QDQ form (forced): the weight dequantized along its output channels (axis 0) and the
// int32 bias with the scales f32(x_scale * w_scale[c]) along axis 0, then a per-axis DequantizeLinear of the result
// along its channels; ONNX Runtime runs it as written and optimized (level all), both giving the reference's values
// (within the step a float32 rounding can move a value).
TEST(OrtBackend, ThePerChannelQdqFormRunsAsWrittenAndOptimized) {
  REQUIRE_ORT();
  ir::SingleNode net;
  net.graph = ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 2, 3, 3]}],
    "outputs": ["y"], "initializers": [
      {"name": "w", "dtype": "int8", "shape": [3, 2, 1, 1], "data": [3, -5, 7, 1, -128, 127]},
      {"name": "b", "dtype": "int32", "shape": [3], "data": [100, -7, 3000]}],
    "nodes": [
      {"name": "q", "op": "quantize_linear", "inputs": ["x"], "outputs": ["q"],
       "attrs": {"scale": 0.05, "zero_point": 3, "to": "int8"}},
      {"name": "c", "op": "qlinear_conv2d", "inputs": ["q", "w", "b"], "outputs": ["c"],
       "attrs": {"kernel_shape": [1, 1], "out_channels": 3, "bias": 1, "x_scale": 0.05, "x_zero_point": 3,
                 "w_scale": 0.02, "w_scales": [0.02, 0.004, 0.001], "w_zero_point": 0, "w_type": "int8",
                 "y_scale": 0.01, "y_zero_point": -4, "to": "int8"}},
      {"name": "y", "op": "dequantize_linear", "inputs": ["c"], "outputs": ["y"],
       "attrs": {"scale": 0.01, "scales": [0.01, 0.02, 0.005], "zero_points": [-4, 0, 7], "zero_point": -4,
                 "axis": 1}}]})",
                                 "qdq per channel");
  core::Tensor x(core::DType::F32, {1, 2, 3, 3});
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, -1.0 + 0.13 * static_cast<double>(i));
  net.inputs["x"] = x;
  const backends::ValueMap want = backends::reference_forward(net.graph, net.inputs, core::DType::F32);
  for (const std::vector<std::string>& options :
       {std::vector<std::string>{"form=qlinear=qdq", "opset=13"}, {"form=qlinear=qdq", "opset=13", "level=all"}}) {
    const std::string what = "ort:" + options.back();
    Worker w("ort", options);
    backends::ValueMap got;
    const Outcome o = testing::run(w, net, &got);
    ASSERT_TRUE(o.ok()) << what << ": " << o.str();
    ASSERT_TRUE(got.count("y")) << what;
    for (int64_t i = 0; i < want.at("y").numel(); ++i)
      EXPECT_NEAR(got.at("y").get(i), want.at("y").get(i), 0.02 + 1e-6) << what << " [" << i << "]";
    if (options.size() == 2) {
      for (int64_t i = 0; i < want.at("c").numel(); ++i) EXPECT_NEAR(got.at("c").get(i), want.at("c").get(i), 1.0) << i;
    }
  }
}

}  // namespace
}  // namespace quorum::worker
