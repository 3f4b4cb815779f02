// Per-axis quantize_linear / dequantize_linear (ONNX opset 13: 1-D y_scale / y_zero_point along `axis`) and the
// QDQ form of per-channel weights (a per-axis DequantizeLinear of the weight and of the int32 bias): the reference
// against hand-computed cases, the shape rule's checks, the range rule, the finding signature's key, the sampler's
// share, and the ONNX export read back.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/rng.h"
#include "ir/build.h"
#include "ir/graph.h"
#include "ir/json_io.h"
#include "ir/onnx_io.h"
#include "oracle/judge_util.h"
#include "ops/quant_util.h"
#include "ops/registry.h"
#include "ref/interpreter.h"
#include "support/run_op.h"

namespace quorum::ops {
namespace {

using core::DType;
using testing::run_op;

Attrs per_axis(std::vector<double> scales, std::vector<int64_t> zps, int64_t axis) {
  Attrs a = {{"scale", scales[0]}, {"scales", scales}, {"axis", axis}};
  if (!zps.empty()) a["zero_point"] = zps[0], a["zero_points"] = zps;
  return a;
}

TEST(QuantPerAxis, QuantizeRoundsEachIndexOfTheAxisWithItsScaleAndZeroPoint) {
  // x [2, 3], axis 1: column c has scale [0.5, 1, 2][c] and zero point [0, 3, -2][c].
  const Tensor x = Tensor::f64({2, 3}, {1.25, 2.5, 5, -100, 0.5, 1000});
  Attrs a = per_axis({0.5, 1, 2}, {0, 3, -2}, 1);
  a["to"] = std::string("int8");
  // 1.25 / 0.5 = 2.5 -> 2 (even); 2.5 -> 2 (even) + 3 = 5; 5 / 2 = 2.5 -> 2 - 2 = 0;
  // -100 / 0.5 = -200 saturates at -128; 0.5 -> 0 (even) + 3 = 3; 1000 / 2 = 500 saturates at 127.
  EXPECT_EQ(run_op("quantize_linear", {x}, a), (std::vector<double>{2, 5, 0, -128, 3, 127}));
  // The same along axis -2 = 0 (rows): row 0 scale 0.5 zp 0, row 1 scale 1 zp 3.
  a = per_axis({0.5, 1}, {0, 3}, -2);
  a["to"] = std::string("uint8");
  // 2.5, 5, 10 -> 2, 5, 10; -100 + 3 saturates at 0, 0.5 -> 0 + 3, 1000 saturates at 255.
  EXPECT_EQ(run_op("quantize_linear", {x}, a), (std::vector<double>{2, 5, 10, 0, 3, 255}));
}

TEST(QuantPerAxis, DequantizeScalesEachIndexOfTheAxis) {
  // x [2, 2, 2] int8, axis 1: scales [0.25, 4], zero points [1, -1] (one zero point: every index's).
  const Tensor x = Tensor::f64({2, 2, 2}, {1, 5, 0, 2, -128, 127, 127, -128});
  EXPECT_EQ(run_op("dequantize_linear", {x}, per_axis({0.25, 4}, {1, -1}, 1)),
            (std::vector<double>{0, 1, 4, 12, -32.25, 31.5, 512, -508}));
  Attrs a = per_axis({0.25, 4}, {}, -1);  // along the last axis, zero point 0
  EXPECT_EQ(run_op("dequantize_linear", {x}, a), (std::vector<double>{0.25, 20, 0, 8, -32, 508, 31.75, -512}));
}

TEST(QuantPerAxis, TheShapeRuleRefusesListsThatDoNotFitTheAxis) {
  const OpSpec& q = op("quantize_linear");
  const TensorType x{DType::F32, {2, 3, 4}};
  auto infer = [&](Attrs a) {
    a["to"] = std::string("int8");
    return q.infer({x}, canonical_attrs(q, a));
  };
  EXPECT_NO_THROW(infer(per_axis({1, 2, 4}, {0, 1, 2}, 1)));
  EXPECT_NO_THROW(infer(per_axis({1, 2, 4, 8}, {}, -1)));
  EXPECT_NO_THROW(infer(per_axis({1, 2}, {}, -3)));
  EXPECT_THROW(infer(per_axis({1, 2}, {}, 1)), core::OpError);         // 2 scales for axis 1 of length 3
  EXPECT_THROW(infer(per_axis({1, 2, 4}, {0, 1}, 1)), core::OpError);  // 2 zero points for 3
  EXPECT_THROW(infer(per_axis({1, 2, 4}, {0, 1, 200}, 1)), core::OpError);  // 200 is no int8
  EXPECT_THROW(infer(per_axis({1, 2, 4}, {}, 3)), core::OpError);   // axis out of range
  EXPECT_THROW(infer(per_axis({1, 2, 4}, {}, -4)), core::OpError);  // axis out of range
  try {
    infer(per_axis({1, 2}, {}, 1));
  } catch (const core::OpError& e) {
    EXPECT_NE(std::string(e.what()).find("scales has 2 scales for 3"), std::string::npos) << e.what();
  }
  try {
    infer(per_axis({1, 2, 4}, {}, 5));
  } catch (const core::OpError& e) {
    EXPECT_NE(std::string(e.what()).find("axis 5 is out of range"), std::string::npos) << e.what();
  }
  Attrs zps_alone = {{"zero_points", std::vector<int64_t>{0, 1, 2}}};
  EXPECT_THROW(infer(zps_alone), core::OpError);  // zero points per axis need scales per axis
  // Per tensor, the axis is unused (as ONNX ignores it for a scalar scale).
  EXPECT_NO_THROW(infer({{"axis", int64_t{7}}}));
  const OpSpec& d = op("dequantize_linear");
  EXPECT_THROW(d.infer({TensorType{DType::I8, {2, 3}}}, canonical_attrs(d, per_axis({1, 2}, {}, 1))), core::OpError);
  // An int32 bias dequantized per channel: zero points 0.
  EXPECT_NO_THROW(d.infer({TensorType{DType::I32, {3}}}, canonical_attrs(d, per_axis({1, 2, 4}, {}, 0))));
}

TEST(QuantPerAxis, TheRangeCoversEveryIndexsScale) {
  const OpSpec& d = op("dequantize_linear");
  const Attrs a = canonical_attrs(d, per_axis({0.5, 4}, {0, 10}, 0));
  const std::vector<Interval> r = d.range({Interval{-128, 127}}, {TensorType{DType::I8, {2, 3}}}, a);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].lo, -138 * 4.0);  // index 1: (-128 - 10) * 4
  EXPECT_EQ(r[0].hi, 127 * 0.5 > 117 * 4.0 ? 127 * 0.5 : 117 * 4.0);
}

TEST(QuantPerAxis, AFindingsSignatureSaysPerAxis) {
  const OpSpec& spec = op("dequantize_linear");
  ir::Node n{"d", "dequantize_linear", {"x"}, {"y"}, canonical_attrs(spec, {{"scale", 0.5}})};
  const std::string plain = oracle::detail::key_params(n);
  EXPECT_EQ(plain.find("scales"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("axis"), std::string::npos) << plain;
  n.attrs = canonical_attrs(spec, per_axis({0.5, 1}, {0, 3}, 0));
  const std::string key = oracle::detail::key_params(n);
  EXPECT_NE(key.find("scales=\"given\""), std::string::npos) << key;
  EXPECT_NE(key.find("zero_points=\"given\""), std::string::npos) << key;
  EXPECT_NE(key.find("axis"), std::string::npos) << key;
}

// The sampler's share: per axis with distinct scales (some 2^6..2^14 from the rest), zero points at the ends, a
// negative axis; every sampled case exports (opset 13) and reads back with the same attributes.
TEST(QuantPerAxis, SampledPerAxisCasesExportAndReadBack) {
  for (const std::string name : {"quantize_linear", "dequantize_linear"}) {
    const OpSpec& spec = op(name);
    core::Rng rng(13611);
    int per_axis_cases = 0, zero_points = 0, negative = 0, extreme = 0, ends = 0;
    for (int k = 0; k < 200; ++k) {
      const Case c = spec.sample(rng);
      const ir::SingleNode s = ir::single_node_graph(spec, c, rng, DType::F32);
      const ir::Graph& g = s.graph;
      const core::Attrs& want = g.nodes[0].attrs;
      if (!per_channel_weight(want, "")) continue;
      ++per_axis_cases;
      const std::vector<double>& sc = core::attr_floats(want, "scales");
      const std::vector<double> sorted = [&] {
        std::vector<double> v = sc;
        std::sort(v.begin(), v.end());
        return v;
      }();
      EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << name << ": equal scales";
      extreme += sorted.back() / sorted.front() >= 64;
      negative += core::attr_i(want, "axis") < 0;
      const std::vector<int64_t>& zps = core::attr_ints(want, "zero_points");
      zero_points += !zps.empty();
      for (int64_t z : zps) ends += z == -128 || z == 127 || z == 0 || z == 255;
      const ir::Graph back = ir::graph_from_onnx(ir::graph_to_onnx(g, ir::OnnxForm{13, 0}).bytes, "round trip");
      const ir::Node* node = nullptr;
      for (const auto& n : back.nodes)
        if (n.op == name) node = &n;
      ASSERT_NE(node, nullptr) << name;
      EXPECT_EQ(core::to_string(node->attrs), core::to_string(want)) << name;
    }
    EXPECT_GE(per_axis_cases, 20) << name;
    EXPECT_GE(zero_points, 5) << name;
    EXPECT_GE(negative, 5) << name;
    EXPECT_GE(extreme, 2) << name;
    EXPECT_GE(ends, 2) << name;
  }
}

TEST(QuantPerAxis, BeforeOpset13APerAxisNodeIsRefused) {
  ir::Graph g = ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [2, 3]}],
    "outputs": ["y"], "nodes": [{"name": "q", "op": "quantize_linear", "inputs": ["x"], "outputs": ["y"],
      "attrs": {"scale": 0.5, "scales": [0.5, 1, 2], "axis": 1, "to": "int8"}}]})",
                                    "per axis");
  EXPECT_THROW(ir::graph_to_onnx(g, ir::OnnxForm{12, 0}), core::UserError);
  const ir::OnnxSummary sum = ir::onnx_summary(ir::graph_to_onnx(g, ir::OnnxForm{13, 0}).bytes, "per axis");
  ASSERT_EQ(sum.op_types, (std::vector<std::string>{"QuantizeLinear"}));
  EXPECT_EQ(sum.attrs[0].at("axis"), "1");
}

// The QDQ form of per-channel weights: DequantizeLinear of the weight along its output channels (Conv's axis 0,
// MatMul's axis 1) and of the int32 bias with the scales f32(x_scale * w_scale[c]) along axis 0; read back, it
// gives the reference the operator's numbers.
TEST(QuantPerAxis, TheQdqFormOfPerChannelWeightsDequantizesAlongTheOutputChannels) {
  const ir::Graph g = ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "int8", "shape": [1, 2, 3, 3]},
      {"name": "a", "dtype": "uint8", "shape": [2, 3]}],
    "outputs": ["c", "m"], "initializers": [
      {"name": "w", "dtype": "int8", "shape": [3, 2, 1, 1], "data": [3, -5, 7, 1, -128, 127]},
      {"name": "b", "dtype": "int32", "shape": [3], "data": [100, -7, 3000]},
      {"name": "v", "dtype": "uint8", "shape": [3, 2], "data": [0, 255, 17, 128, 200, 3]}],
    "nodes": [
      {"name": "c", "op": "qlinear_conv2d", "inputs": ["x", "w", "b"], "outputs": ["c"],
       "attrs": {"kernel_shape": [1, 1], "out_channels": 3, "bias": 1, "x_scale": 0.05, "x_zero_point": 3,
                 "w_scale": 0.02, "w_scales": [0.02, 0.5, 0.0001], "w_zero_points": [0, -3, 5], "w_zero_point": 0,
                 "w_type": "int8", "y_scale": 0.01, "y_zero_point": -4, "to": "int8"}},
      {"name": "m", "op": "qlinear_matmul", "inputs": ["a", "v"], "outputs": ["m"],
       "attrs": {"units": 2, "a_scale": 0.25, "a_zero_point": 128, "w_scale": 0.125, "w_scales": [0.125, 0.003],
                 "w_zero_point": 128, "w_type": "uint8", "y_scale": 0.5, "y_zero_point": 10, "to": "uint8"}}]})",
                                          "qdq per channel");
  ir::OnnxForm form{13, 0};
  form.force = {"qlinear=qdq"};
  const ir::OnnxExported x = ir::graph_to_onnx(g, form);
  const ir::OnnxSummary sum = ir::onnx_summary(x.bytes, "qdq");
  EXPECT_EQ(sum.op_types,
            (std::vector<std::string>{"DequantizeLinear", "DequantizeLinear", "DequantizeLinear", "Conv",
                                      "QuantizeLinear", "DequantizeLinear", "DequantizeLinear", "MatMul",
                                      "QuantizeLinear"}));
  EXPECT_EQ(sum.attrs[0].count("axis"), 0u);  // x per tensor
  EXPECT_EQ(sum.attrs[1].at("axis"), "0");    // the conv weight [O, I, kh, kw]
  EXPECT_EQ(sum.attrs[2].at("axis"), "0");    // the bias [O]
  EXPECT_EQ(sum.attrs[6].at("axis"), "1");    // the matmul weight [K, units]
  const ir::Graph back = ir::graph_from_onnx(x.bytes, "qdq");
  ref::ValueMap in;
  core::Rng data(5);
  for (const auto& v : g.inputs) {
    core::Tensor t(DType::F64, v.type.shape);
    const bool u8 = v.type.dtype == DType::U8;
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, static_cast<double>(data.randint(u8 ? 0 : -128, u8 ? 255 : 127)));
    in[v.name] = t;
  }
  const ref::ValueMap want = ref::forward(g, in), got = ref::forward(back, in);
  for (const char* v : {"c", "m"})
    for (int64_t i = 0; i < want.at(v).numel(); ++i) EXPECT_EQ(want.at(v).get(i), got.at(v).get(i)) << v << i;
  // Before opset 13, the operator form.
  ir::OnnxForm old{12, 0};
  old.force = {"qlinear=qdq"};
  const ir::OnnxSummary o = ir::onnx_summary(ir::graph_to_onnx(g, old).bytes, "opset 12");
  EXPECT_EQ(o.op_types, (std::vector<std::string>{"QLinearConv", "QLinearMatMul"}));
}

}  // namespace
}  // namespace quorum::ops
