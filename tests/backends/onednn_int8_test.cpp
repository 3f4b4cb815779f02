// oneDNN's int8 path (ops_quant.cpp, lower.cpp's lower_quantized): quantize_linear / dequantize_linear as
// reorders with an output scale and zero points, qlinear_conv2d / qlinear_matmul as int8 convolution and
// matmul primitives. Hand-built quantized models agree exactly with the float64 reference (integer sums,
// one rounding half to even, saturation; uint8 weights shifted into s8, int32 bias, padding holding the
// input's zero point); what oneDNN 2.6 cannot express exactly is one refusal with its measured reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/cpu.h"
#include "ir/json_io.h"
#include "ref/interpreter.h"
#include "support/one_node_graph.h"
#include "support/run_op.h"
#include "run_quorum.h"
#include "worker/supervisor.h"

namespace quorum::backends {
namespace {

bool have_onednn() {
  const auto& have = worker::available_backends();
  return std::find(have.begin(), have.end(), "onednn") != have.end();
}

// Without VNNI oneDNN's own int8 kernels sum u8 x s8 pairs in int16 (the ledger's
// onednn-int8-pair-saturation-on-cpus-without-vnni): exactness is a property of VNNI CPUs.
bool exact_int8_here() {
  return core::cpu_flags().count("avx512_vnni") > 0 || core::cpu_flags().count("avx_vnni") > 0;
}
#define REQUIRE_EXACT_INT8()                                                                                  \
  if (!exact_int8_here())                                                                                    \
  GTEST_SKIP() << "this CPU has no VNNI (" << core::cpu_model()                                              \
               << "): oneDNN's int8 pair sums saturate at int16 (onednn-int8-pair-saturation-on-cpus-without-vnni)"

// x (float) -> quantize_linear (uint8) -> qlinear_conv2d (int8 or uint8 weights, int32 bias, pads 1) ->
// dequantize_linear, and the quantized x through qlinear_matmul with a weight zero point.
std::string chain(const std::string& w_type, int w_zero_point, const std::string& bias) {
  const bool u8 = w_type == "uint8";
  const std::string w = u8 ? "[128,130,250,0,127,129,200,5,60,128,255,1,100,140,128,7]"
                           : "[1,-2,3,-4,5,-6,7,-8,127,-128,0,9,-10,11,-12,13]";
  const std::string mw = u8 ? "[0,255,128,3,200,17]" : "[1,-128,127,3,-50,17]";
  return R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 2, 3, 3]}],
    "outputs": ["dq", "mm"],
    "initializers": [
      {"name": "w", "dtype": ")" +
         w_type + R"(", "shape": [2, 2, 2, 2], "data": )" + w + R"(},
      {"name": "b", "dtype": "int32", "shape": [2], "data": )" +
         bias + R"(},
      {"name": "mw", "dtype": ")" +
         w_type + R"(", "shape": [3, 2], "data": )" + mw + R"(}],
    "nodes": [
      {"name": "q", "op": "quantize_linear", "inputs": ["x"], "outputs": ["q"],
       "attrs": {"scale": 0.0625, "zero_point": 37, "to": "uint8"}},
      {"name": "c", "op": "qlinear_conv2d", "inputs": ["q", "w", "b"], "outputs": ["c"],
       "attrs": {"out_channels": 2, "kernel_shape": [2, 2], "pads": [1, 1, 1, 1], "bias": 1,
                 "x_scale": 0.0625, "x_zero_point": 37, "w_scale": 0.0078125, "w_zero_point": )" +
         std::to_string(w_zero_point) + R"(, "w_type": ")" + w_type + R"(",
                 "y_scale": 0.04, "y_zero_point": -3, "to": "int8"}},
      {"name": "dq", "op": "dequantize_linear", "inputs": ["c"], "outputs": ["dq"],
       "attrs": {"scale": 0.04, "zero_point": -3}},
      {"name": "mm", "op": "qlinear_matmul", "inputs": ["q", "mw"], "outputs": ["mm"],
       "attrs": {"units": 2, "a_scale": 0.0625, "a_zero_point": 37, "w_scale": 0.01, "w_zero_point": )" +
         std::to_string(u8 ? 140 : -5) + R"(, "w_type": ")" + w_type + R"(",
                 "y_scale": 0.3, "y_zero_point": 128, "to": "uint8"}}]})";
}

ref::ValueMap chain_inputs() {
  std::vector<double> x;
  for (int i = 0; i < 18; ++i) x.push_back(-9.0 + 1.53 * i);  // both ends of uint8 saturate
  return {{"x", core::Tensor::f64({1, 2, 3, 3}, x).to(core::DType::F32)}};
}

// Every value of the model on oneDNN equals the reference's, and each keeps its type.
void expect_exact(const ir::Graph& g) {
  worker::Worker w("onednn", {}, worker::Limits{});
  ASSERT_TRUE(w.compile(g, CompileOptions{core::DType::F32, 1}).ok());
  ValueMap got;
  ASSERT_TRUE(w.forward(chain_inputs(), true, got).ok());
  const ref::ValueMap want = ref::forward(g, chain_inputs());
  for (const char* v : {"q", "c", "dq", "mm"}) {
    ASSERT_TRUE(got.count(v)) << v;
    const core::Tensor& t = got.at(v);
    EXPECT_EQ(t.dtype(), g.types.at(v).dtype) << v;
    ASSERT_EQ(t.numel(), want.at(v).numel()) << v;
    int saturated = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      // dequantize_linear's float32 result: (x - zp) * scale rounded once to float32.
      EXPECT_EQ(t.get(i), static_cast<double>(static_cast<float>(want.at(v).get(i)))) << v << " element " << i;
      saturated += t.dtype() == core::DType::U8 && (t.get(i) == 255 || t.get(i) == 0);
    }
    if (std::string(v) == "q") {
      EXPECT_GT(saturated, 0) << "the input should saturate";
    }
  }
}

TEST(OneDNNInt8, Int8WeightsAndAnInt32BiasAgreeExactly) {
  if (!have_onednn()) GTEST_SKIP() << "onednn backend not built";
  expect_exact(ir::graph_from_json(chain("int8", 0, "[1000, -77777]"), "int8"));
}

TEST(OneDNNInt8, Uint8WeightsWithZeroPoint128AreShiftedIntoS8Exactly) {
  if (!have_onednn()) GTEST_SKIP() << "onednn backend not built";
  REQUIRE_EXACT_INT8();
  expect_exact(ir::graph_from_json(chain("uint8", 128, "[-5, 123456]"), "uint8"));
}

// The unit generator's quantized models (each quantized operand a float input through quantize_linear, scales
// and zero points drawn, both ends of the types saturating) agree with the reference on oneDNN's full ISA.
TEST(OneDNNInt8, GeneratedUnitModelsAgree) {
  if (!have_onednn()) GTEST_SKIP() << "onednn backend not built";
  const auto out = testing::scratch("onednn_int8") / "campaign";
  const testing::Result r = testing::run_quorum(
      "fuzz --backends onednn --dtype int8 --generator unit --models 120 --jobs 1 --seed 12001 "
      "--ops quantize_linear,dequantize_linear,qlinear_conv2d,qlinear_matmul --out " +
          out.string(),
      "onednn_int8");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  // Every finding is a ledger entry (the quantizing reorder's tie convention,
  // onednn-quantize-zero-point-before-rounding).
  int findings = 0;
  for (size_t at = r.out.find("new "); at != std::string::npos; at = r.out.find("new ", at + 1)) {
    const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
    if (line.rfind("new inconsistency", 0) == 0 || line.rfind("new crash", 0) == 0 || line.rfind("new nan", 0) == 0) {
      ++findings;
      EXPECT_NE(line.find("(known: "), std::string::npos) << line;
    }
  }
  EXPECT_TRUE(findings > 0 || r.out.find("no findings") != std::string::npos) << r.out;
  const size_t ran = r.out.find("onednn: ran ");
  ASSERT_NE(ran, std::string::npos) << r.out;
  EXPECT_GT(std::stoi(r.out.substr(ran + 12)), 90) << r.out.substr(ran, 200);  // most run, convolutions refused
}

// Without VNNI (onednn:isa=avx2) the int8 kernels follow oneDNN's documented int16 pair sums and halved weights:
// the ledger's two conventions reproduce (their cases need AVX2).
TEST(OneDNNInt8, TheNonVnniConventionsReproduce) {
  if (!have_onednn()) GTEST_SKIP() << "onednn backend not built";
  for (const char* id : {"onednn-int8-non-vnni-pair-saturation", "onednn-int8-non-vnni-conv-weights-halved"}) {
    const testing::Result r = testing::run_quorum(std::string("known --check --filter ") + id, "onednn_int8");
    const bool skipped =
        r.out.find("not checked") != std::string::npos && r.out.find("0 not checked") == std::string::npos;
    if (!skipped) {
      EXPECT_NE(r.out.find("reproduces  onednn:isa=avx2  " + std::string(id)), std::string::npos) << r.out << r.err;
    }
  }
}

// What oneDNN 2.6 cannot express exactly is refused with the measured reason, node by node.
std::string conv_reason(const ir::Graph& g) {
  worker::Worker w("onednn", {}, worker::Limits{});
  std::vector<worker::NodeSupport> sup;
  EXPECT_TRUE(w.supports(g, false, sup).ok());
  for (const auto& s : sup)
    if (s.node == "c") return s.ok ? "" : s.reason;
  return "node c not reported";
}

TEST(OneDNNInt8, WhatTheConvolutionCannotTakeIsOneRefusalWithItsReason) {
  if (!have_onednn()) GTEST_SKIP() << "onednn backend not built";
  // A weights zero point: 2.6's convolution refuses set_zero_points on DNNL_ARG_WEIGHTS.
  EXPECT_NE(conv_reason(ir::graph_from_json(chain("int8", 3, "[0, 0]"), "wzp")).find("takes no weights zero point"),
            std::string::npos);
  // uint8 weights whose zero point does not shift them into s8.
  EXPECT_NE(conv_reason(ir::graph_from_json(chain("uint8", 100, "[0, 0]"), "u8w")).find("only with w_zero_point 128"),
            std::string::npos);
  // A bias that is no float32 integer: oneDNN adds it in float32.
  EXPECT_NE(conv_reason(ir::graph_from_json(chain("int8", 0, "[16777217, 0]"), "bias")).find("no float32 integer"),
            std::string::npos);
  // What maps is not refused.
  EXPECT_EQ(conv_reason(ir::graph_from_json(chain("int8", 0, "[16777216, 0]"), "ok")), "");
}

// Per-channel weights (w_scales, zero weight zero points): one output scale per output channel (mask 1 << 1) on the
// convolution and the matmul, int8 and uint8 (zero points 128) weights; each value at most one step from the
// reference (float32 requantization), most equal. A nonzero channel zero point is refused with its reason.
TEST(OneDNNInt8, PerChannelWeightsRunAsPerChannelOutputScales) {
  if (!have_onednn()) GTEST_SKIP() << "onednn backend not built";
  REQUIRE_EXACT_INT8();
  for (const std::string w_type : {"int8", "uint8"}) {
    const int zp = w_type == "uint8" ? 128 : 0;
    ir::Graph g = ir::graph_from_json(chain(w_type, zp, "[1000, -7777]"), "per_channel");
    for (auto& n : g.nodes) {
      if (n.op == "qlinear_conv2d") n.attrs["w_scales"] = std::vector<double>{0.0078125, 0.03};
      if (n.op == "qlinear_matmul") {
        n.attrs["w_scales"] = std::vector<double>{0.01, 0.0025};
        n.attrs["w_zero_point"] = int64_t{zp};
      }
      if (n.op == "qlinear_conv2d" || n.op == "qlinear_matmul")
        n.attrs["w_zero_points"] = std::vector<int64_t>{zp, zp};
    }
    worker::Worker w("onednn", {}, worker::Limits{});
    std::vector<worker::NodeSupport> sup;
    ASSERT_TRUE(w.supports(g, false, sup).ok());
    for (const auto& s : sup) EXPECT_TRUE(s.ok) << s.node << ": " << s.reason;
    ASSERT_TRUE(w.compile(g, CompileOptions{core::DType::F32, 1}).ok()) << w_type;
    ValueMap got;
    ASSERT_TRUE(w.forward(chain_inputs(), true, got).ok()) << w_type;
    const ref::ValueMap want = ref::forward(g, chain_inputs());
    for (const char* v : {"c", "mm"}) {
      const std::vector<double> a = got.at(v).values(), b = want.at(v).values();
      ASSERT_EQ(a.size(), b.size()) << v;
      size_t equal = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_LE(std::abs(a[i] - b[i]), 1.0) << w_type << " " << v << " [" << i << "]";
        equal += a[i] == b[i];
      }
      EXPECT_GE(equal * 10, a.size() * 9) << w_type << " " << v << ": " << equal << " of " << a.size();
    }
    // Channel 1's zero point off the shift: refused.
    for (auto& n : g.nodes)
      if (n.op == "qlinear_conv2d") n.attrs["w_zero_points"] = std::vector<int64_t>{zp, zp + 1};
    EXPECT_NE(conv_reason(g).find("no per-channel weights zero point"), std::string::npos) << conv_reason(g);
  }
}

// The quantized twins (ops/qlinear.cpp) on oneDNN's int8 primitives: a hand-built node per twin, int8 and uint8,
// against the twin's own float64 kernel. "Z" is a nonzero zero point (where oneDNN takes one), "S" the output scale:
// with power-of-two scales every float32 step is exact and the results equal the reference's; with others each is at
// most one step away (float32 requantization) and most are equal.
struct Twin {
  const char* op;
  std::vector<core::Shape> shapes;
  const char* attrs;
};

const std::vector<Twin>& twins() {
  static const std::vector<Twin> t = {
      {"qlinear_add", {{2, 3, 4}, {2, 3, 4}}, R"("x_scales": [0.05, 0.1], "x_zero_points": [Z, 5], "y_scale": S,
        "y_zero_point": Z)"},
      {"qlinear_add", {{1, 3, 1}, {2, 3, 4}}, R"("x_scales": [0.125, 0.5], "x_zero_points": [Z, 0], "y_scale": S,
        "y_zero_point": 2)"},
      {"qlinear_mul", {{2, 3, 4}, {3, 1}}, R"("x_scales": [0.05, 0.1], "x_zero_points": [0, 0], "y_scale": S,
        "y_zero_point": Z)"},
      {"qlinear_avg_pool2d", {{1, 3, 5, 5}}, R"("kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
        "count_include_pad": 0, "x_scales": [0.05], "x_zero_points": [Z], "y_scale": S, "y_zero_point": 4)"},
      {"qlinear_avg_pool2d", {{2, 2, 4, 4}}, R"("kernel_shape": [2, 2], "strides": [1, 1], "pads": [0, 0, 1, 1],
        "count_include_pad": 1, "x_scales": [0.05], "x_zero_points": [0], "y_scale": S, "y_zero_point": Z)"},
      {"qlinear_global_avg_pool", {{2, 3, 3, 4}}, R"("x_scales": [0.05], "x_zero_points": [Z], "y_scale": S,
        "y_zero_point": Z)"},
      {"qlinear_concat", {{2, 3, 2}, {2, 1, 2}}, R"("axis": 1, "x_scales": [S, S], "x_zero_points": [Z, Z],
        "y_scale": S, "y_zero_point": Z)"},
      {"qlinear_leaky_relu", {{2, 3, 4}}, R"("alpha": 0.1, "x_scales": [0.05], "x_zero_points": [0], "y_scale": S,
        "y_zero_point": Z)"},
      // Last (the refusal cases below index the others): padding (never a maximum), dilation, ceil_mode;
      // requantized where y_scale is not the input's.
      {"qlinear_max_pool2d", {{1, 2, 5, 6}}, R"("kernel_shape": [2, 3], "strides": [2, 1], "pads": [1, 0, 0, 1],
        "dilations": [1, 2], "ceil_mode": 1, "x_scales": [0.0625], "x_zero_points": [Z], "y_scale": S,
        "y_zero_point": Z)"},
  };
  return t;
}

ir::Graph twin_graph(const Twin& t, const std::string& type, const std::string& y_scale) {
  std::string attrs = t.attrs;
  const std::string zp = type == "int8" ? "-3" : "131";
  for (size_t at; (at = attrs.find('Z')) != std::string::npos;) attrs.replace(at, 1, zp);
  for (size_t at; (at = attrs.find('S')) != std::string::npos;) attrs.replace(at, 1, y_scale);
  return testing::one_node_graph(t.op, type, t.shapes, attrs + R"(, "to": ")" + type + "\"", t.op);
}

// Integers spread over the type's whole range, both ends included.
ValueMap twin_inputs(const ir::Graph& g) {
  ValueMap in = testing::spread_integer_inputs(g);
  for (auto& [name, t] : in) {
    const auto [lo, hi] = core::dtype_range(t.dtype());
    t.set(0, lo);
    t.set(t.numel() - 1, hi);
  }
  return in;
}

TEST(OneDNNInt8, QuantizedTwinsRunOnInt8PrimitivesAndAgreeWithTheReference) {
  if (!have_onednn()) GTEST_SKIP() << "onednn backend not built";
  for (const Twin& t : twins())
    for (const std::string type : {"int8", "uint8"})
      for (const std::string y_scale : {"0.0625", "0.07"}) {
        const bool exact = y_scale == "0.0625" && std::string(t.attrs).find("0.05") == std::string::npos &&
                           std::string(t.attrs).find("0.1,") == std::string::npos;
        const std::string where = std::string(t.op) + " " + type + " y_scale " + y_scale;
        const ir::Graph g = twin_graph(t, type, y_scale);
        const ir::Node& n = g.nodes.at(0);
        worker::Worker w("onednn", {}, worker::Limits{});
        std::vector<worker::NodeSupport> sup;
        ASSERT_TRUE(w.supports(g, false, sup).ok()) << where;
        ASSERT_TRUE(!sup.empty() && sup[0].ok) << where << ": " << (sup.empty() ? "" : sup[0].reason);
        const worker::Outcome compiled = w.compile(g, CompileOptions{core::DType::F32, 1});
        ASSERT_TRUE(compiled.ok()) << where << ": " << compiled.str();
        const ValueMap in = twin_inputs(g);
        ValueMap got;
        const worker::Outcome ran = w.forward(in, false, got);
        ASSERT_TRUE(ran.ok()) << where << ": " << ran.str();
        ASSERT_TRUE(got.count("y")) << where;
        EXPECT_EQ(got.at("y").dtype(), g.types.at("y").dtype) << where;
        std::vector<core::Tensor> operands;
        for (const auto& v : n.inputs) operands.push_back(in.at(v).to(core::DType::F64));
        const std::vector<double> want = testing::run_op(n.op, operands, n.attrs);
        const std::vector<double> a = got.at("y").values();
        ASSERT_EQ(a.size(), want.size()) << where;
        size_t equal = 0;
        for (size_t i = 0; i < a.size(); ++i) {
          EXPECT_LE(std::abs(a[i] - want[i]), exact ? 0.0 : 1.0) << where << " [" << i << "]";
          equal += a[i] == want[i];
        }
        EXPECT_GE(equal * 10, a.size() * 9) << where << ": " << equal << " of " << a.size() << " equal";
      }
}

// What oneDNN 2.6's int8 binary, pooling, eltwise and concat cannot take is one refusal with its measured reason.
TEST(OneDNNInt8, WhatTheTwinsCannotTakeIsRefusedWithItsReason) {
  if (!have_onednn()) GTEST_SKIP() << "onednn backend not built";
  struct Case {
    size_t twin;
    std::map<std::string, core::AttrValue> attrs;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {2, {{"x_zero_points", std::vector<int64_t>{1, 0}}}, "binary takes no zero points"},
      {4, {{"x_zero_points", std::vector<int64_t>{7}}}, "counts padding as the integer 0"},
      {6, {{"x_scales", std::vector<double>{0.0625, 0.125}}}, "concat takes no scales"},
      {7, {{"x_zero_points", std::vector<int64_t>{1}}}, "eltwise takes no zero points"},
      // alpha 0.0625 / 1e-8, beta 131 alpha: float32 cancels the integers near the zero point
      {8, {{"y_scale", 1e-8}}, "cancels against alpha * x beyond 2^22"},
  };
  for (const Case& c : cases) {
    ir::Graph g = twin_graph(twins().at(c.twin), "uint8", "0.0625");
    for (const auto& [k, v] : c.attrs) g.nodes.at(0).attrs[k] = v;
    worker::Worker w("onednn", {}, worker::Limits{});
    std::vector<worker::NodeSupport> sup;
    ASSERT_TRUE(w.supports(g, false, sup).ok());
    ASSERT_FALSE(sup.empty());
    EXPECT_FALSE(sup[0].ok) << twins().at(c.twin).op;
    EXPECT_NE(sup[0].reason.find(c.reason), std::string::npos) << twins().at(c.twin).op << ": " << sup[0].reason;
  }
  // qlinear_sigmoid: 2.6 has no int8 eltwise_logistic.
  const ir::Graph g = ir::graph_from_json(
      R"({"inputs": [{"name": "x0", "dtype": "int8", "shape": [4]}], "outputs": ["y"], "nodes": [{"name": "y",
      "op": "qlinear_sigmoid", "inputs": ["x0"], "outputs": ["y"], "attrs": {"x_scales": [0.05], "x_zero_points": [0],
      "y_scale": 0.00390625, "y_zero_point": -128, "to": "int8"}}]})",
      "sigmoid");
  worker::Worker w("onednn", {}, worker::Limits{});
  std::vector<worker::NodeSupport> sup;
  ASSERT_TRUE(w.supports(g, false, sup).ok());
  ASSERT_FALSE(sup.empty());
  EXPECT_NE(sup[0].reason.find("no int8 eltwise_logistic"), std::string::npos) << sup[0].reason;
}

}  // namespace
}  // namespace quorum::backends
