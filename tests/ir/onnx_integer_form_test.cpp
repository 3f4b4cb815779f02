// The integer exchange form of qlinear_conv2d and qlinear_matmul (ops/integer_form.h, qlinear=integer): the nodes
// ONNX Runtime's quantization tools write, read back as the QLinear node (x_scale 1, w_scale the float32 product
// the Mul holds) with the reference's numbers; not offered where the int32 accumulator could overflow.
#include <gtest/gtest.h>

#include "core/error.h"
#include "ir/json_io.h"
#include "ir/onnx_io.h"
#include "ref/interpreter.h"

namespace quorum::ir {
namespace {

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

OnnxForm integer_form(int opset = 13) {
  OnnxForm f(opset, 0);
  f.force = {"qlinear=integer"};
  return f;
}

// A uint8 convolution with int8 weights per output channel (scales and zero points at the type's ends), a bias.
Graph conv_graph() {
  return graph_from_json(R"({"name": "g", "inputs": [{"name": "x", "dtype": "uint8", "shape": [1, 2, 3, 3]}],
    "outputs": ["y"], "initializers": [
      {"name": "w", "dtype": "int8", "shape": [3, 2, 2, 2],
       "data": [127, -128, 5, 0, 1, -1, 100, -100, -128, -128, -128, -128, 127, 127, 127, 127,
                3, 4, 5, 6, 7, 8, 9, 10]},
      {"name": "b", "dtype": "int32", "shape": [3], "data": [1000, -70000, 3]}],
    "nodes": [{"name": "y", "op": "qlinear_conv2d", "inputs": ["x", "w", "b"], "outputs": ["y"],
      "attrs": {"kernel_shape": [2, 2], "out_channels": 3, "bias": 1, "pads": [1, 0, 0, 1],
                "x_scale": 0.037, "x_zero_point": 255, "w_scale": 0.011, "w_zero_point": -128,
                "w_scales": [0.011, 0.5, 0.0003], "w_zero_points": [-128, 127, 0], "w_type": "int8",
                "y_scale": 0.9, "y_zero_point": 0, "to": "uint8"}}]})",
                         "conv");
}

// An int8 matmul with uint8 weights, per tensor, to uint8.
Graph matmul_graph() {
  return graph_from_json(R"({"name": "g", "inputs": [{"name": "x", "dtype": "int8", "shape": [2, 3]}],
    "outputs": ["y"], "initializers": [
      {"name": "w", "dtype": "uint8", "shape": [3, 2], "data": [0, 255, 128, 7, 255, 0]}],
    "nodes": [{"name": "y", "op": "qlinear_matmul", "inputs": ["x", "w"], "outputs": ["y"],
      "attrs": {"units": 2, "a_scale": 0.125, "a_zero_point": -128, "w_scale": 0.25, "w_zero_point": 255,
                "w_type": "uint8", "y_scale": 16, "y_zero_point": 3, "to": "uint8"}}]})",
                         "matmul");
}

ref::ValueMap inputs_of(const Graph& g) {
  const TensorType& t = g.types.at(g.inputs[0].name);
  core::Tensor x(t.dtype, t.shape);
  const double lo = t.dtype == core::DType::U8 ? 0 : -128;
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, i % 3 == 0 ? lo : i % 3 == 1 ? lo + 255 : lo + 17 * i % 256);
  return {{g.inputs[0].name, x}};
}

TEST(OnnxIntegerForm, AConvolutionIsWrittenAsConvIntegerAndReadBackWithTheReferencesNumbers) {
  const Graph g = conv_graph();
  const OnnxExported x = graph_to_onnx(g, integer_form());
  EXPECT_NE(x.forms.at("y").find("qlinear=integer"), std::string::npos) << x.forms.at("y");
  EXPECT_EQ(joined(onnx_summary(x.bytes, "t").op_types), "ConvInteger Add Cast Mul QuantizeLinear");
  const Graph back = graph_from_onnx(x.bytes, "t");
  ASSERT_EQ(back.nodes.size(), 1u);
  const Node& n = back.nodes[0];
  EXPECT_EQ(n.op, "qlinear_conv2d");
  EXPECT_EQ(core::attr_f(n.attrs, "x_scale"), 1.0);
  // The form holds the float32 products x_scale * w_scale[c] and the zero points per channel.
  const auto& ws = core::attr_floats(n.attrs, "w_scales");
  ASSERT_EQ(ws.size(), 3u);
  EXPECT_EQ(ws[1], static_cast<double>(static_cast<float>(static_cast<float>(0.037) * 0.5)));
  EXPECT_EQ(core::attr_ints(n.attrs, "w_zero_points"), (std::vector<int64_t>{-128, 127, 0}));
  const ref::ValueMap in = inputs_of(g);
  const core::Tensor want = ref::forward(g, in).at("y"), got = ref::forward(back, in).at("y");
  ASSERT_EQ(want.shape(), got.shape());
  for (int64_t i = 0; i < want.numel(); ++i) EXPECT_EQ(got.get(i), want.get(i)) << i;
  // Written again from what was read: the same chain.
  EXPECT_EQ(joined(onnx_summary(graph_to_onnx(back, integer_form()).bytes, "t").op_types),
            "ConvInteger Add Cast Mul QuantizeLinear");
}

TEST(OnnxIntegerForm, AMatmulIsWrittenAsMatMulIntegerAndReadBackWithTheReferencesNumbers) {
  const Graph g = matmul_graph();
  for (int opset = kOnnxMinOpset; opset <= kOnnxMaxOpset; ++opset) {
    const OnnxExported x = graph_to_onnx(g, integer_form(opset));
    EXPECT_EQ(joined(onnx_summary(x.bytes, "t").op_types), "MatMulInteger Cast Mul QuantizeLinear") << opset;
    const Graph back = graph_from_onnx(x.bytes, "t");
    ASSERT_EQ(back.nodes.size(), 1u);
    EXPECT_EQ(back.nodes[0].op, "qlinear_matmul");
    EXPECT_EQ(core::attr_f(back.nodes[0].attrs, "w_scale"), 0.125 * 0.25);
    const ref::ValueMap in = inputs_of(g);
    const core::Tensor want = ref::forward(g, in).at("y"), got = ref::forward(back, in).at("y");
    for (int64_t i = 0; i < want.numel(); ++i) EXPECT_EQ(got.get(i), want.get(i)) << opset << " [" << i << "]";
  }
}

// ConvInteger's accumulator is int32: 600 * 8 * 8 terms of up to 255^2 could overflow it, so the form is not offered
// (the operator's form is written even where forced).
TEST(OnnxIntegerForm, IsNotOfferedWhereTheInt32AccumulatorCouldOverflow) {
  Graph g = conv_graph();
  Node& n = g.nodes[0];
  n.attrs["kernel_shape"] = std::vector<int64_t>{8, 8};
  n.attrs["pads"] = std::vector<int64_t>{0, 0, 0, 0};
  g.types["x"].shape = {1, 600, 8, 8};
  g.inputs[0].type.shape = {1, 600, 8, 8};
  core::Tensor w(core::DType::I8, {3, 600, 8, 8});
  g.initializers["w"] = w;
  g.types["w"].shape = w.shape();
  g.types["y"].shape = {1, 3, 1, 1};
  const OnnxExported x = graph_to_onnx(g, integer_form());
  EXPECT_EQ(joined(onnx_summary(x.bytes, "t").op_types), "QLinearConv");
}

}  // namespace
}  // namespace quorum::ir
