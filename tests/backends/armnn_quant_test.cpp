// ArmNN's quantized path (lower_quant.cpp): quantize_linear, dequantize_linear, qlinear_conv2d and
// qlinear_matmul on ArmNN 20.08's Quantize, Dequantize, Convolution2d and FullyConnected layers with
// QAsymmU8/QAsymmS8 TensorInfos. The lowering (what each layer gets, the views that give a consumer its
// own scale and zero point, the refusals CpuRef's layer support gives), then the real library through
// its worker: exact agreement with the reference where no rounding tie occurs, and ArmNN's rounding of
// a tie away from zero (the ledger's entry armnn-quantize-rounds-half-away-from-zero). The quantized twins
// (qlinear_add, ..., qlinear_sigmoid) on Addition, Multiplication, Concat, Activation and Pooling2d, int8 and
// uint8, against the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "backends/armnn/lower.h"
#include "ir/json_io.h"
#include "ref/interpreter.h"
#include "support/one_node_graph.h"
#include "worker/supervisor.h"

namespace quorum::backends::armnn_lower {
namespace {

class NullSink : public LayerSink {
 public:
  int input(size_t, const std::string&, const Shape&, const Quant&) override { return next_++; }
  int layer(const Layer&, const std::vector<Value>&, const Shape&, const Quant&, const std::string&) override {
    return next_++;
  }
  void output(size_t, const std::string&, const Value&) override {}

 private:
  int next_ = 0;
};

// x (float) -> quantize_linear (uint8, scale 0.5, zero point 3) -> qlinear_conv2d (read with x_scale 0.5,
// x_zero_point 1: a view) -> dequantize_linear. Scales are powers of two and the output scale divides every
// accumulator exactly, so no rounding tie occurs anywhere.
ir::Graph conv_model(const std::string& w_type, const std::string& to) {
  const bool w_u8 = w_type == "uint8";
  return ir::graph_from_json(
      R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 2, 3, 3]}],
    "outputs": ["d"],
    "initializers": [{"name": "w", "dtype": ")" +
          w_type + R"(", "shape": [2, 2, 2, 2],
                      "data": )" +
          (w_u8 ? "[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,255]" : "[-8,-7,-6,-5,-4,-3,-2,-1,0,1,2,3,4,5,6,127]") + R"(},
                     {"name": "b", "dtype": "int32", "shape": [2], "data": [100, -40000]}],
    "nodes": [{"name": "q", "op": "quantize_linear", "inputs": ["x"], "outputs": ["q"],
               "attrs": {"scale": 0.5, "zero_point": 3, "to": "uint8"}},
              {"name": "c", "op": "qlinear_conv2d", "inputs": ["q", "w", "b"], "outputs": ["c"],
               "attrs": {"out_channels": 2, "kernel_shape": [2, 2], "pads": [1, 0, 0, 1], "bias": 1,
                         "x_scale": 0.5, "x_zero_point": 1, "w_scale": 0.25, "w_zero_point": )" +
          (w_u8 ? "7" : "0") + R"(, "w_type": ")" + w_type + R"(",
                         "y_scale": 0.125, "y_zero_point": 10, "to": ")" +
          to + R"("}},
              {"name": "d", "op": "dequantize_linear", "inputs": ["c"], "outputs": ["d"],
               "attrs": {"scale": 0.125, "zero_point": 10}}]})",
      "armnn_quant_conv");
}

// quantize_linear (int8) -> qlinear_matmul of a rank-3 input [2, 2, 3] by a constant [3, 2].
ir::Graph matmul_model(const std::string& w_type) {
  return ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [2, 2, 3]}],
    "outputs": ["m"],
    "initializers": [{"name": "w", "dtype": ")" +
                                 w_type + R"(", "shape": [3, 2], "data": )" +
                                 (w_type == "uint8" ? "[1, 2, 3, 4, 5, 60]" : "[1, -2, 3, 4, -5, 60]") + R"(}],
    "nodes": [{"name": "q", "op": "quantize_linear", "inputs": ["x"], "outputs": ["q"],
               "attrs": {"scale": 0.25, "zero_point": -4, "to": "int8"}},
              {"name": "m", "op": "qlinear_matmul", "inputs": ["q", "w"], "outputs": ["m"],
               "attrs": {"units": 2, "a_scale": 0.25, "a_zero_point": -4, "w_scale": 2.0, "w_zero_point": 0,
                         "w_type": ")" +
                                 w_type + R"(", "y_scale": 0.5, "y_zero_point": 5, "to": "int8"}}]})",
                             "armnn_quant_matmul");
}

// graph_from_json validates: every value typed.
ir::Graph typed(const ir::Graph& g) { return g; }

TEST(ArmnnQuant, TheLoweringGivesQuantizedTensorInfosAndViews) {
  const ir::Graph g = typed(conv_model("int8", "uint8"));
  NullSink null;
  RecordingSink rec(null);
  lower(rec, g);
  const std::vector<std::string>& calls = rec.calls();
  auto has = [&](const std::string& part) {
    return std::any_of(calls.begin(), calls.end(),
                       [&](const std::string& c) { return c.find(part) != std::string::npos; });
  };
  EXPECT_TRUE(has("Quantize 'q/quantize#")) << ::testing::PrintToString(calls);
  EXPECT_TRUE(has("QAsymmU8(0.5,3)"));
  // The convolution reads q with its own zero point: a view (a Slice of the whole tensor).
  EXPECT_TRUE(has("Slice [0,0,0,0] [1,2,3,3] 'c/view#"));
  EXPECT_TRUE(has("QAsymmU8(0.5,1)"));
  // Weights QAsymmS8 with w_scale, the bias Signed32 with x_scale * w_scale, the output y_scale / y_zero_point.
  EXPECT_TRUE(has("QAsymmS8(0.25,0)"));
  EXPECT_TRUE(has("Signed32(0.125,0)"));
  EXPECT_TRUE(has("QAsymmU8(0.125,10)"));
  EXPECT_TRUE(has("Dequantize 'd/dequantize#"));
}

TEST(ArmnnQuant, WhatCpuRefRefusesIsRefusedWithItsReason) {
  const ir::Graph conv = typed(conv_model("int8", "int8"));  // uint8 input, int8 output
  const Support s = supports(conv, conv.nodes[1]);
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("Reference Convolution2d: input and output types mismatched."), std::string::npos)
      << s.reason;
  const ir::Graph mm = typed(matmul_model("uint8"));  // int8 input, uint8 weights
  const Support m = supports(mm, mm.nodes[1]);
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.reason.find("Reference Fully Connected: input and weights types mismatched."), std::string::npos)
      << m.reason;
  // Mixed weights are fine for the convolution; same types for the product.
  EXPECT_TRUE(supports(typed(conv_model("int8", "uint8")), typed(conv_model("int8", "uint8")).nodes[1]).ok);
  EXPECT_TRUE(supports(typed(matmul_model("int8")), typed(matmul_model("int8")).nodes[1]).ok);
}

// Runs `g` on ArmNN (pinned: every node output) and the reference; every output of every node must agree
// (within `tolerance` steps: a float32 evaluation of a function with no exact quantized result).
void expect_exact(const ir::Graph& g, const ValueMap& inputs, double tolerance = 0) {
  const auto& have = worker::available_backends();
  if (std::find(have.begin(), have.end(), "armnn") == have.end()) GTEST_SKIP() << "armnn backend not built";
  worker::Worker w("armnn", {}, worker::Limits{});
  worker::BackendInfo info;
  ASSERT_TRUE(w.hello(info).ok());
  ASSERT_TRUE(w.compile(g, CompileOptions{}).ok());
  ValueMap got;
  ASSERT_TRUE(w.forward(inputs, true, got).ok());
  const ValueMap want = ref::forward(g, inputs);
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs) {
      ASSERT_TRUE(got.count(o)) << o;
      const core::Tensor& a = got.at(o);
      const core::Tensor& b = want.at(o);
      ASSERT_EQ(a.numel(), b.numel()) << o;
      EXPECT_EQ(a.dtype(), g.types.at(o).dtype) << o;
      for (int64_t i = 0; i < a.numel(); ++i) EXPECT_NEAR(a.get(i), b.get(i), tolerance) << o << " element " << i;
    }
}

core::Tensor ramp(const Shape& s, double start, double step) {
  core::Tensor t(core::DType::F32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, start + step * static_cast<double>(i));
  return t;
}

TEST(ArmnnQuant, AConvolutionWithoutTiesAgreesExactly) {
  for (const char* w : {"int8", "uint8"}) {
    const ir::Graph g = typed(conv_model(w, "uint8"));
    // Steps of 1 over scale 0.5: x / scale is an integer (no tie); the ends saturate (-8 -> 0, 9 -> 21).
    expect_exact(g, {{"x", ramp({1, 2, 3, 3}, -8, 1)}});
  }
}

TEST(ArmnnQuant, AMatmulOfARank3InputAgreesExactly) {
  const ir::Graph g = typed(matmul_model("int8"));
  expect_exact(g, {{"x", ramp({2, 2, 3}, -40, 6.75)}});  // multiples of 0.25: no tie
}

// A quantized graph input (as a reduced model has): the integers as given, read through a view.
TEST(ArmnnQuant, AQuantizedGraphInputIsReadWithItsConsumersParameters) {
  const ir::Graph g = typed(ir::graph_from_json(R"({"inputs": [{"name": "q", "dtype": "int8", "shape": [5]}],
    "outputs": ["d"],
    "nodes": [{"name": "d", "op": "dequantize_linear", "inputs": ["q"], "outputs": ["d"],
               "attrs": {"scale": 0.5, "zero_point": -3}}]})",
                                                "armnn_quant_input"));
  core::Tensor q(core::DType::I8, {5});
  for (int64_t i = 0; i < 5; ++i) q.set(i, static_cast<double>(i * 60 - 128));
  expect_exact(g, {{"q", q}});
}

// Two consumers reading one value with different scales and zero points: two views ArmNN's optimizer must not
// take as equal (two Reshapes of one value to one shape were squashed, SquashEqualReshapeSiblings, and both
// consumers read the second's parameters).
TEST(ArmnnQuant, TwoConsumersReadOneValueWithTheirOwnParameters) {
  const ir::Graph g = typed(ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [4]}],
    "outputs": ["a", "b"],
    "nodes": [{"name": "q", "op": "quantize_linear", "inputs": ["x"], "outputs": ["q"],
               "attrs": {"scale": 1.0, "zero_point": 0, "to": "uint8"}},
              {"name": "a", "op": "dequantize_linear", "inputs": ["q"], "outputs": ["a"],
               "attrs": {"scale": 0.5, "zero_point": 1}},
              {"name": "b", "op": "dequantize_linear", "inputs": ["q"], "outputs": ["b"],
               "attrs": {"scale": 0.25, "zero_point": 2}}]})",
                                                "armnn_quant_siblings"));
  expect_exact(g, {{"x", ramp({4}, 0, 3)}});
}

// ArmNN's Quantize rounds x / scale with std::round (ties away from zero); ONNX rounds half to even.
TEST(ArmnnQuant, QuantizeRoundsATieAwayFromZero) {
  const auto& have = worker::available_backends();
  if (std::find(have.begin(), have.end(), "armnn") == have.end()) GTEST_SKIP() << "armnn backend not built";
  const ir::Graph g = typed(ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [4]}],
    "outputs": ["q"],
    "nodes": [{"name": "q", "op": "quantize_linear", "inputs": ["x"], "outputs": ["q"],
               "attrs": {"scale": 0.5, "zero_point": 0, "to": "int8"}}]})",
                                                "armnn_quant_tie"));
  core::Tensor x(core::DType::F32, {4});
  const double xs[] = {0.25, 1.25, -0.25, 0.75};  // x / scale = 0.5, 2.5, -0.5, 1.5
  for (int64_t i = 0; i < 4; ++i) x.set(i, xs[i]);
  worker::Worker w("armnn", {}, worker::Limits{});
  worker::BackendInfo info;
  ASSERT_TRUE(w.hello(info).ok());
  ASSERT_TRUE(w.compile(g, CompileOptions{}).ok());
  ValueMap got;
  ASSERT_TRUE(w.forward({{"x", x}}, true, got).ok());
  const core::Tensor& q = got.at("q");
  EXPECT_EQ(q.get(0), 1);   // ONNX: 0
  EXPECT_EQ(q.get(1), 3);   // ONNX: 2
  EXPECT_EQ(q.get(2), -1);  // ONNX: 0
  EXPECT_EQ(q.get(3), 2);   // ONNX: 2 (the same either way)
}

// ---- the quantized twins ------------------------------------------------------------------------

// One twin node `op` of type `to` over quantized graph inputs x0, x1, ... (shapes `shapes`), each read with its
// own scale and zero point (views), with the float operator's attributes `attrs` (JSON members, may be empty).
ir::Graph twin_model(const std::string& op, const std::string& to, const std::vector<Shape>& shapes,
                     const std::string& scales, const std::string& zero_points, double y_scale, int y_zero_point,
                     const std::string& attrs) {
  std::ostringstream ys;
  ys.precision(17);
  ys << y_scale;
  return testing::one_node_graph(op, to, shapes,
                                 (attrs.empty() ? "" : attrs + ", ") + R"("x_scales": )" + scales +
                                     R"(, "x_zero_points": )" + zero_points + R"(, "y_scale": )" + ys.str() +
                                     R"(, "y_zero_point": )" + std::to_string(y_zero_point) + R"(, "to": ")" + to +
                                     "\"",
                                 "armnn_twin_" + op);
}

// Every value of the type once (then repeated), in an order that mixes signs along each axis.
core::Tensor all_values(const std::string& to, const Shape& s, int64_t seed) {
  const bool u8 = to == "uint8";
  core::Tensor t(u8 ? core::DType::U8 : core::DType::I8, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, static_cast<double>((i * 37 + seed * 11) % 256 - (u8 ? 0 : 128)));
  return t;
}

ValueMap twin_inputs(const ir::Graph& g) {
  ValueMap in;
  for (size_t i = 0; i < g.inputs.size(); ++i)
    in[g.inputs[i].name] = all_values(core::to_string(g.inputs[i].type.dtype), g.inputs[i].type.shape,
                                      static_cast<int64_t>(i));
  return in;
}

// Scales are powers of two and y_scale divides every exact result, so no rounding tie occurs (ArmNN rounds ties
// away from zero: the ledger's armnn-quantize-tie-half-away-from-zero) and the results agree exactly.
const char* const kTypes[] = {"int8", "uint8"};
int zp(const std::string& to, int v) { return to == "uint8" ? v + 128 : v; }

TEST(ArmnnQuantTwins, AddWithBroadcastingAgreesExactly) {
  for (const std::string to : kTypes) {
    const std::string zps = "[" + std::to_string(zp(to, 3)) + ", " + std::to_string(zp(to, -5)) + "]";
    const ir::Graph g = twin_model("qlinear_add", to, {{1, 2, 3, 4}, {1, 1, 1, 4}}, "[0.5, 0.25]", zps, 0.25,
                                   zp(to, 1), "");
    expect_exact(g, twin_inputs(g));
  }
}

TEST(ArmnnQuantTwins, MulAgreesExactly) {
  for (const std::string to : kTypes) {
    const std::string zps = "[" + std::to_string(zp(to, -7)) + ", " + std::to_string(zp(to, 2)) + "]";
    const ir::Graph g = twin_model("qlinear_mul", to, {{2, 3, 5}, {2, 3, 5}}, "[0.125, 0.0625]", zps,
                                   0.0078125, zp(to, -3), "");
    expect_exact(g, twin_inputs(g));
  }
}

TEST(ArmnnQuantTwins, AvgPoolWithPadsAgreesExactlyEitherPaddingMethod) {
  for (const std::string to : kTypes)
    for (const char* include : {"0", "1"}) {
      // Windows of 1, 2 or 4 cells (Exclude) or 4 (IgnoreValue): every mean a multiple of 0.5 / 4.
      const ir::Graph g = twin_model("qlinear_avg_pool2d", to, {{1, 2, 4, 5}}, "[0.5]",
                                     "[" + std::to_string(zp(to, 9)) + "]",
                                     0.125, zp(to, -2),
                                     R"("kernel_shape": [2, 2], "strides": [1, 2], "pads": [1, 1, 1, 1],
                                        "count_include_pad": )" + std::string(include));
      expect_exact(g, twin_inputs(g));
    }
}

// Pooling2d Max on quantized TensorInfos: padding never wins (a window of the type's lowest integer and padding);
// quantized as the input, and requantized to another scale and zero point (exactly: x_scale / y_scale = 2).
TEST(ArmnnQuantTwins, MaxPoolWithPadsAgreesExactly) {
  for (const std::string to : kTypes)
    for (const double y_scale : {0.5, 0.25}) {
      const int64_t y_zp = y_scale == 0.5 ? zp(to, 9) : zp(to, -2);
      const ir::Graph g = twin_model("qlinear_max_pool2d", to, {{1, 2, 4, 5}}, "[0.5]",
                                     "[" + std::to_string(zp(to, 9)) + "]", y_scale, y_zp,
                                     R"("kernel_shape": [2, 3], "strides": [1, 2], "pads": [1, 1, 1, 1])");
      expect_exact(g, twin_inputs(g));
    }
}

TEST(ArmnnQuantTwins, GlobalAvgPoolAgreesExactly) {
  for (const std::string to : kTypes)
    for (const Shape& s : {Shape{2, 3, 2, 4}, Shape{1, 2, 8}}) {  // 8 cells: means are multiples of 0.5 / 8
      const ir::Graph g = twin_model("qlinear_global_avg_pool", to, {s}, "[0.5]", "[" + std::to_string(zp(to, 4)) + "]",
                                     0.0625, zp(to, 0), "");
      expect_exact(g, twin_inputs(g));
    }
}

TEST(ArmnnQuantTwins, ConcatRequantizesEachPartExactly) {
  for (const std::string to : kTypes) {
    const std::string zps = "[" + std::to_string(zp(to, 3)) + ", " + std::to_string(zp(to, -1)) + ", " +
                            std::to_string(zp(to, 0)) + "]";
    const ir::Graph g = twin_model("qlinear_concat", to, {{1, 2, 3}, {1, 1, 3}, {1, 3, 3}}, "[0.5, 0.25, 1.0]", zps,
                                   0.25, zp(to, 6), R"("axis": 1)");
    expect_exact(g, twin_inputs(g));
  }
}

TEST(ArmnnQuantTwins, LeakyReluAgreesExactly) {
  for (const std::string to : kTypes) {
    const ir::Graph g = twin_model("qlinear_leaky_relu", to, {{1, 4, 8, 8}}, "[0.5]",
                                   "[" + std::to_string(zp(to, 5)) + "]",
                                   0.125, zp(to, -9), R"("alpha": 0.25)");
    expect_exact(g, twin_inputs(g));
  }
}

// The sigmoid has no exact quantized result: float32's evaluation is within one step.
TEST(ArmnnQuantTwins, SigmoidAgreesWithinOneStep) {
  for (const std::string to : kTypes) {
    const ir::Graph g = twin_model("qlinear_sigmoid", to, {{1, 4, 8, 8}}, "[0.0625]",
                                   "[" + std::to_string(zp(to, 5)) + "]",
                                   0.00390625, zp(to, -128), "");
    expect_exact(g, twin_inputs(g), 1);
  }
}

// The twins quantize their float32 result with armnn::Quantize too: an exact tie rounds away from zero (the
// ledger's armnn-quantize-tie-half-away-from-zero): windows {0, 1} and {-1, 0} average to 0.5 and -0.5.
TEST(ArmnnQuantTwins, AvgPoolRoundsATieAwayFromZero) {
  const auto& have = worker::available_backends();
  if (std::find(have.begin(), have.end(), "armnn") == have.end()) GTEST_SKIP() << "armnn backend not built";
  const ir::Graph g = twin_model("qlinear_avg_pool2d", "int8", {{1, 1, 1, 4}}, "[0.5]", "[0]", 0.5, 0,
                                 R"("kernel_shape": [1, 2], "strides": [1, 2])");
  core::Tensor x(core::DType::I8, {1, 1, 1, 4});
  const double xs[] = {0, 1, -1, 0};
  for (int64_t i = 0; i < 4; ++i) x.set(i, xs[i]);
  worker::Worker w("armnn", {}, worker::Limits{});
  worker::BackendInfo info;
  ASSERT_TRUE(w.hello(info).ok());
  ASSERT_TRUE(w.compile(g, CompileOptions{}).ok());
  ValueMap got;
  ASSERT_TRUE(w.forward({{"x0", x}}, true, got).ok());
  EXPECT_EQ(got.at("y").get(0), 1);   // ONNX: 0
  EXPECT_EQ(got.at("y").get(1), -1);  // ONNX: 0
}

// The lowering: each input read through a view with its own parameters, the layer's output quantized by y.
TEST(ArmnnQuantTwins, TheLoweringGivesQuantizedTensorInfos) {
  const ir::Graph g = twin_model("qlinear_add", "uint8", {{1, 4}, {1, 4}}, "[0.5, 0.25]", "[3, 1]", 0.125, 2, "");
  NullSink null;
  RecordingSink rec(null);
  lower(rec, g);
  const std::vector<std::string>& calls = rec.calls();
  auto has = [&](const std::string& part) {
    return std::any_of(calls.begin(), calls.end(),
                       [&](const std::string& c) { return c.find(part) != std::string::npos; });
  };
  EXPECT_TRUE(has("Slice [0,0] [1,4] 'y/view#")) << ::testing::PrintToString(calls);
  EXPECT_TRUE(has("QAsymmU8(0.5,3)"));
  EXPECT_TRUE(has("QAsymmU8(0.25,1)"));
  EXPECT_TRUE(has("Addition 'y/add#"));
  EXPECT_TRUE(has("QAsymmU8(0.125,2)"));
}

}  // namespace
}  // namespace quorum::backends::armnn_lower
