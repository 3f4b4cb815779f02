// The quantized twins of float operators (ops/qlinear.cpp) against hand-computed cases: each input's own
// scale and zero point, one rounding half to even, saturation; their ONNX form in ONNX Runtime's contrib
// domain, read back; and the generator's quantization of a float model's additions and pools.
#include <gtest/gtest.h>

#include "gen/quantize.h"
#include "ir/onnx_io.h"
#include "ops/registry.h"
#include "support/run_op.h"
#include "ref/interpreter.h"

namespace quorum::ops {
namespace {

using testing::run_op;

ir::Graph graph(const std::string& name, std::vector<ir::ValueInfo> inputs, std::vector<ir::Node> nodes) {
  ir::Graph g;
  g.name = name;
  g.inputs = std::move(inputs);
  g.outputs = {nodes.back().outputs[0]};
  g.nodes = std::move(nodes);
  ir::validate(g, name);
  return g;
}

Attrs q(std::vector<double> scales, std::vector<int64_t> zps, double ys, int64_t yzp, const std::string& to) {
  return {{"x_scales", scales}, {"x_zero_points", zps}, {"y_scale", ys}, {"y_zero_point", yzp}, {"to", to}};
}

TEST(QLinear, AddDequantizesEachInputWithItsOwnScaleAndRoundsHalfToEven) {
  // (10 - 0) * 0.5 + (4 - 1) * 0.25 = 5.75, / 0.5 = 11.5 -> 12 (even), + 3 = 15;
  // -3 * 0.5 + 126 * 0.25 = 30, / 0.5 = 60, + 3 = 63; 127 * 0.5 + 126 * 0.25 = 95 -> 190 + 3 saturates at 127
  EXPECT_EQ(run_op("qlinear_add", {Tensor::f64({3}, {10, -3, 127}), Tensor::f64({3}, {4, 127, 127})},
                q({0.5, 0.25}, {0, 1}, 0.5, 3, "int8")),
            (std::vector<double>{15, 63, 127}));
  // a product: (3 - 1) * (5 - 0) * 0.5 * 0.25 = 1.25, / 0.5 = 2.5 -> 2 (even)
  EXPECT_EQ(
      run_op("qlinear_mul", {Tensor::f64({1}, {3}), Tensor::f64({1}, {5})}, q({0.5, 0.25}, {1, 0}, 0.5, 0, "uint8")),
      (std::vector<double>{2}));
}

TEST(QLinear, PoolsAndConcatRequantizeTheFloatOperatorsResult) {
  // uint8 [10, 20, 30, 41], zero point 10: the mean of 0, 10, 20, 31 is 15.25, / 0.5 = 30.5 -> 30 (even)
  const Tensor x = Tensor::f64({1, 1, 2, 2}, {10, 20, 30, 41});
  EXPECT_EQ(run_op("qlinear_global_avg_pool", {x}, q({1}, {10}, 0.5, 0, "uint8")), (std::vector<double>{30}));
  Attrs pool = q({1}, {10}, 0.5, 0, "uint8");
  pool["kernel_shape"] = std::vector<int64_t>{2, 2};
  EXPECT_EQ(run_op("qlinear_avg_pool2d", {x}, pool), (std::vector<double>{30}));
  // padded cells are not counted (count_include_pad 0): the 2x2 window over [pad, 0; pad, 20] averages two cells,
  // 10, / 0.5 = 20
  pool["pads"] = std::vector<int64_t>{0, 1, 0, 0};
  pool["strides"] = std::vector<int64_t>{1, 2};
  EXPECT_EQ(run_op("qlinear_avg_pool2d", {x}, pool), (std::vector<double>{20}));
  // concat: each input requantized from its own scale to the output's
  Attrs c = q({1, 0.5}, {0, 1}, 1, 0, "int8");
  c["axis"] = int64_t{0};
  EXPECT_EQ(run_op("qlinear_concat", {Tensor::f64({1}, {2}), Tensor::f64({2}, {3, -128})}, c),
            (std::vector<double>{2, 1, -64}));  // (3-1)*0.5 = 1; (-128-1)*0.5 = -64.5 -> -64 (even)
}

TEST(QLinear, ActivationsSaturateAtBothEnds) {
  // sigmoid(0) = 0.5 at scale 1/256: 128; a large positive input 255 steps of 1: sigmoid ~ 1 -> 256 -> 255
  EXPECT_EQ(run_op("qlinear_sigmoid", {Tensor::f64({3}, {128, 255, 0})}, q({1}, {128}, 1.0 / 256, 0, "uint8")),
            (std::vector<double>{128, 255, 0}));
  Attrs l = q({1}, {0}, 1, 0, "int8");
  l["alpha"] = 0.5;
  EXPECT_EQ(run_op("qlinear_leaky_relu", {Tensor::f64({4}, {-3, -128, 5, 127})}, l),
            (std::vector<double>{-2, -64, 5, 127}));  // -1.5 -> -2 (even)
  // a y_scale far below the values' size saturates (ONNX's rule), it does not wrap
  EXPECT_EQ(run_op("qlinear_leaky_relu", {Tensor::f64({2}, {100, -100})}, q({1}, {0}, 1e-9, 0, "int8")),
            (std::vector<double>{127, -128}));
}

TEST(QLinear, TheOnnxFormIsOnnxRuntimesContribOperatorAndReadsBack) {
  Attrs pa = q({0.125}, {7}, 0.25, 0, "int8");
  pa["kernel_shape"] = std::vector<int64_t>{2, 2};
  const ir::Graph g = graph("qadd", {{"x", {core::DType::I8, {1, 2, 3, 3}}}, {"y", {core::DType::I8, {1, 2, 3, 3}}}},
                            {{"s", "qlinear_add", {"x", "y"}, {"s"}, q({0.5, 0.25}, {1, -2}, 0.125, 7, "int8")},
                             {"p", "qlinear_avg_pool2d", {"s"}, {"p"}, pa}});
  const std::string bytes = ir::graph_to_onnx(g, 13);
  const ir::OnnxSummary sum = ir::onnx_summary(bytes, "qadd");
  ASSERT_EQ(sum.op_types, (std::vector<std::string>{"QLinearAdd", "QLinearAveragePool"}));
  EXPECT_EQ(sum.domains, (std::vector<std::string>{"com.microsoft", "com.microsoft"}));
  const ir::Graph back = ir::graph_from_onnx(bytes, "qadd");
  ASSERT_EQ(back.nodes.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back.nodes[i].op, g.nodes[i].op);
    for (const char* k : {"x_scales", "x_zero_points", "y_scale", "y_zero_point", "to"})
      EXPECT_EQ(core::to_string(back.nodes[i].attrs.at(k)), core::to_string(g.nodes[i].attrs.at(k))) << k;
  }
  EXPECT_EQ(core::attr_ints(back.nodes[1].attrs, "kernel_shape"), (std::vector<int64_t>{2, 2}));
}

// One value given twice with two scales is written with each position's own scale and zero point (both forms).
TEST(QLinear, AValueGivenTwiceKeepsEachPositionsScale) {
  const ir::Graph g = graph("twice", {{"x", {core::DType::I8, {1, 4}}}},
                            {{"s", "qlinear_add", {"x", "x"}, {"s"}, q({0.5, 0.25}, {1, -2}, 0.125, 7, "int8")}});
  for (const char* form : {"qlinear=operator", "qlinear=qdq"}) {
    ir::OnnxForm f{13, 0};
    f.force = {form};
    const ir::Graph back = ir::graph_from_onnx(ir::graph_to_onnx(g, f).bytes, "twice");
    ref::ValueMap in;
    core::Tensor t(core::DType::F64, {1, 4});
    for (int64_t i = 0; i < 4; ++i) t.set(i, static_cast<double>(10 * i - 17));
    in["x"] = t;
    const ref::ValueMap want = ref::forward(g, in), got = ref::forward(back, in);
    for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(want.at("s").get(i), got.at("s").get(i)) << form << " [" << i << "]";
  }
}

// The QDQ form (qlinear=qdq): DequantizeLinear on each input, the float operator, QuantizeLinear carrying the
// node's name and value; it reads back as those three operators and gives the reference the same numbers.
TEST(QLinear, TheQdqFormIsDequantizeFloatQuantizeAndGivesTheSameNumbers) {
  Attrs pa = q({0.3}, {5}, 0.2, -3, "int8");
  pa["kernel_shape"] = std::vector<int64_t>{2, 2};
  const ir::Graph g = graph("qdq", {{"x", {core::DType::I8, {1, 2, 3, 3}}}, {"y", {core::DType::I8, {1, 2, 3, 3}}}},
                            {{"s", "qlinear_add", {"x", "y"}, {"s"}, q({0.5, 0.25}, {1, -2}, 0.125, 7, "int8")},
                             {"p", "qlinear_avg_pool2d", {"s"}, {"p"}, pa}});
  ir::OnnxForm form{13, 0};
  form.force = {"qlinear=qdq"};
  const ir::OnnxExported x = ir::graph_to_onnx(g, form);
  EXPECT_EQ(x.forms.at("s").find("qlinear=qdq") != std::string::npos, true) << x.str();
  const ir::OnnxSummary sum = ir::onnx_summary(x.bytes, "qdq");
  EXPECT_EQ(sum.op_types, (std::vector<std::string>{"DequantizeLinear", "DequantizeLinear", "Add", "QuantizeLinear",
                                                    "DequantizeLinear", "AveragePool", "QuantizeLinear"}));
  ASSERT_EQ(sum.outputs.at(3), (std::vector<std::string>{"s"}));  // the node's own value, from QuantizeLinear
  const ir::Graph back = ir::graph_from_onnx(x.bytes, "qdq");
  std::vector<std::string> ops;
  for (const auto& n : back.nodes) ops.push_back(n.op);
  EXPECT_EQ(ops, (std::vector<std::string>{"dequantize_linear", "dequantize_linear", "add", "quantize_linear",
                                           "dequantize_linear", "avg_pool2d", "quantize_linear"}));
  ref::ValueMap in;
  core::Rng data(11);
  for (const auto& v : g.inputs) {
    core::Tensor t(core::DType::F64, v.type.shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, static_cast<double>(data.randint(-128, 127)));
    in[v.name] = t;
  }
  const ref::ValueMap want = ref::forward(g, in), got = ref::forward(back, in);
  for (const char* v : {"s", "p"})
    for (int64_t i = 0; i < want.at(v).numel(); ++i) EXPECT_EQ(want.at(v).get(i), got.at(v).get(i)) << v << i;
}

// qlinear_max_pool2d: ONNX MaxPool on the quantized tensor. Quantized as its input, the output is the window's
// largest integer (no requantization, whatever the scale); padding never wins, not even over the type's lowest
// value; ceil_mode keeps a last window that starts inside the input.
TEST(QLinear, MaxPoolIsTheLargestIntegerOfEachWindow) {
  Attrs m = q({0.3}, {-7}, 0.3, -7, "int8");  // a negative zero point, equal quantization
  m["kernel_shape"] = std::vector<int64_t>{2, 2};
  // [[-128, 5, 5], [-3, 5, -128], [-128, -128, 0]]: every window ties at 5 (the centre and a neighbour)
  const Tensor x = Tensor::f64({1, 1, 3, 3}, {-128, 5, 5, -3, 5, -128, -128, -128, 0});
  EXPECT_EQ(run_op("qlinear_max_pool2d", {x}, m), (std::vector<double>{5, 5, 5, 5}));
  // pads [1, 1, 1, 1] stride 2: the first window holds one cell, -128, and padding: -128 (padding is not a 0)
  m["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  m["strides"] = std::vector<int64_t>{2, 2};
  EXPECT_EQ(run_op("qlinear_max_pool2d", {x}, m), (std::vector<double>{-128, 5, -3, 5}));
  // ceil_mode on width 3, kernel 2, stride 2, no pads: a second window [col 2] is kept
  m["pads"] = std::vector<int64_t>{0, 0, 0, 0};
  m["ceil_mode"] = int64_t{1};
  EXPECT_EQ(run_op("qlinear_max_pool2d", {x}, m), (std::vector<double>{5, 5, -128, 0}));
  // dilation 2: the four corners
  Attrs d = q({0.3}, {-7}, 0.3, -7, "int8");
  d["kernel_shape"] = std::vector<int64_t>{2, 2};
  d["dilations"] = std::vector<int64_t>{2, 2};
  EXPECT_EQ(run_op("qlinear_max_pool2d", {x}, d), (std::vector<double>{5}));
  // another output quantization: requantized once, (127 - 3) * 0.5 / 1 = 62 + 1 = 63; uint8, zero points 3 and 1
  Attrs r = q({0.5}, {3}, 1, 1, "uint8");
  r["kernel_shape"] = std::vector<int64_t>{1, 2};
  EXPECT_EQ(run_op("qlinear_max_pool2d", {Tensor::f64({1, 1, 1, 4}, {0, 127, 6, 2})}, r),
            (std::vector<double>{63, 63, 3}));  // (6 - 3) * 0.5 = 1.5 -> 2 (even) + 1
}

// Its ONNX form: a plain MaxPool on the int8 tensor where the output is quantized as the input (read back as the
// twin with scale 1 and zero point 0, the same integers), the QDQ form otherwise; opset 11 has no int8 MaxPool.
TEST(QLinear, MaxPoolIsOnnxMaxPoolOnTheQuantizedTensorOrItsQdqForm) {
  Attrs m = q({0.3}, {-7}, 0.3, -7, "int8");
  m["kernel_shape"] = std::vector<int64_t>{2, 2};
  m["pads"] = std::vector<int64_t>{0, 1, 1, 0};
  ir::Graph g = graph("qmax", {{"x", {core::DType::I8, {1, 2, 3, 3}}}}, {{"p", "qlinear_max_pool2d", {"x"}, {"p"}, m}});
  ref::ValueMap in;
  core::Tensor t(core::DType::F64, {1, 2, 3, 3});
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, static_cast<double>((i * 37) % 256 - 128));
  in["x"] = t;
  const ref::ValueMap want = ref::forward(g, in);
  for (const char* form : {"qlinear=operator", "qlinear=qdq"}) {
    ir::OnnxForm f{13, 0};
    f.force = {form};
    const std::string bytes = ir::graph_to_onnx(g, f).bytes;
    const ir::OnnxSummary sum = ir::onnx_summary(bytes, "qmax");
    const bool qdq = std::string(form) == "qlinear=qdq";
    const std::vector<std::string> want_types = qdq ? std::vector<std::string>{"DequantizeLinear", "MaxPool",
                                                                               "QuantizeLinear"}
                                                    : std::vector<std::string>{"MaxPool"};
    EXPECT_EQ(sum.op_types, want_types) << form;
    const ir::Graph back = ir::graph_from_onnx(bytes, "qmax");
    if (!qdq) {
      ASSERT_EQ(back.nodes.size(), 1u);
      EXPECT_EQ(back.nodes[0].op, "qlinear_max_pool2d");
      EXPECT_EQ(core::attr_f(back.nodes[0].attrs, "y_scale"), 1.0);
      EXPECT_EQ(core::attr_i(back.nodes[0].attrs, "y_zero_point"), 0);
      EXPECT_EQ(core::attr_ints(back.nodes[0].attrs, "pads"), (std::vector<int64_t>{0, 1, 1, 0}));
    }
    const ref::ValueMap got = ref::forward(back, in);
    for (int64_t i = 0; i < want.at("p").numel(); ++i) EXPECT_EQ(want.at("p").get(i), got.at("p").get(i)) << form;
  }
  // another output quantization: the QDQ form only, even where the operator form is asked for
  g.nodes[0].attrs["y_zero_point"] = int64_t{2};
  ir::OnnxForm f{13, 0};
  f.force = {"qlinear=operator"};
  const ir::OnnxExported x = ir::graph_to_onnx(g, f);
  EXPECT_NE(x.forms.at("p").find("qlinear=qdq"), std::string::npos) << x.str();
  EXPECT_EQ(ir::onnx_summary(x.bytes, "qmax").op_types,
            (std::vector<std::string>{"DequantizeLinear", "MaxPool", "QuantizeLinear"}));
  // opset 11 (MaxPool takes no int8): the QDQ form as well
  g.nodes[0].attrs["y_zero_point"] = int64_t{-7};
  EXPECT_EQ(ir::onnx_summary(ir::graph_to_onnx(g, ir::OnnxForm{11, 0}).bytes, "qmax").op_types,
            (std::vector<std::string>{"DequantizeLinear", "MaxPool", "QuantizeLinear"}));
}

// The sampler draws the output quantized as the input most of the time, otherwise sometimes.
TEST(QLinear, MaxPoolSamplesMostlyKeepTheInputsQuantization) {
  const OpSpec& s = op("qlinear_max_pool2d");
  core::Rng rng(5);
  int same = 0;
  for (int i = 0; i < 200; ++i) {
    const Case c = s.sample(rng);
    same += core::attr_i(c.attrs, "y_zero_point") == core::attr_ints(c.attrs, "x_zero_points").at(0) &&
            static_cast<float>(core::attr_f(c.attrs, "y_scale")) ==
                static_cast<float>(core::attr_floats(c.attrs, "x_scales").at(0));
  }
  EXPECT_GT(same, 120);
  EXPECT_LT(same, 195);
}

TEST(QLinear, TheGeneratorQuantizesAdditionsAndPoolsBetweenQuantizeAndDequantize) {
  ir::Graph g = graph("float", {{"x", {core::DType::F32, {2, 3, 4, 4}}}},
                      {{"r", "relu", {"x"}, {"r"}, {}}, {"a", "add", {"x", "r"}, {"a"}, {}},
                       {"p", "global_avg_pool", {"a"}, {"p"}, {}}});
  ref::ValueMap in;
  core::Rng data(7);
  Tensor t(core::DType::F32, {2, 3, 4, 4});
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, data.uniform(-2, 2));
  in["x"] = t;
  const ref::ValueMap before = ref::forward(g, in);
  core::Rng rng(17);
  EXPECT_EQ(gen::quantize_model(g, in, rng), 2);
  std::vector<std::string> ops;
  for (const auto& n : g.nodes) ops.push_back(n.op);
  EXPECT_EQ(ops, (std::vector<std::string>{"relu", "quantize_linear", "quantize_linear", "qlinear_add",
                                           "dequantize_linear", "quantize_linear", "qlinear_global_avg_pool",
                                           "dequantize_linear"}));
  const ref::ValueMap after = ref::forward(g, in);
  EXPECT_EQ(after.at(g.outputs[0]).numel(), before.at(g.outputs[0]).numel());
}

}  // namespace
}  // namespace quorum::ops
