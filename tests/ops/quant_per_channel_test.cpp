// Per-channel weight quantization (w_scales, w_zero_points) of qlinear_conv2d and qlinear_matmul: the
// reference against hand-computed cases, the shape rule's checks, the finding signature's key, and the
// ONNX export (1-D w_scale / w_zero_point) read back.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/rng.h"
#include "ir/build.h"
#include "ir/graph.h"
#include "ir/onnx_io.h"
#include "oracle/judge_util.h"
#include "ops/quant_util.h"
#include "ops/registry.h"
#include "support/run_op.h"

namespace quorum::ops {
namespace {

using core::DType;

using testing::run_op;

Attrs matmul_attrs() {
  return {{"units", int64_t{2}},        {"a_scale", 1.0}, {"a_zero_point", int64_t{0}},  {"w_scale", 1.0},
          {"w_zero_point", int64_t{0}}, {"w_type", std::string("int8")}, {"y_scale", 4.0},
          {"y_zero_point", int64_t{0}}, {"to", std::string("int8")}};
}

TEST(QuantPerChannel, AMatmulRequantizesEachColumnWithItsOwnScaleAndZeroPoint) {
  // a [1, 2] = [3, 5]; w [2, 2] = [[2, 10], [4, 20]]: column sums (w_zp 0) 3*2 + 5*4 = 26, 3*10 + 5*20 = 130.
  const Tensor a = Tensor::f64({1, 2}, {3, 5});
  const Tensor w = Tensor::f64({2, 2}, {2, 10, 4, 20});
  Attrs at = matmul_attrs();
  // Per tensor: 26 / 4 = 6.5 -> 6 (even), 130 / 4 = 32.5 -> 32.
  EXPECT_EQ(run_op("qlinear_matmul", {a, w}, at), (std::vector<double>{6, 32}));
  // Per column, scales [1, 0.25]: 26 * 1 / 4 = 6.5 -> 6; 130 * 0.25 / 4 = 8.125 -> 8.
  at["w_scales"] = std::vector<double>{1.0, 0.25};
  EXPECT_EQ(run_op("qlinear_matmul", {a, w}, at), (std::vector<double>{6, 8}));
  // Zero points [0, 10]: column 1 sums 3*(10-10) + 5*(20-10) = 50, * 0.25 / 4 = 3.125 -> 3.
  at["w_zero_points"] = std::vector<int64_t>{0, 10};
  EXPECT_EQ(run_op("qlinear_matmul", {a, w}, at), (std::vector<double>{6, 3}));
  // Column 1's scale 16 saturates it: 50 * 16 / 4 = 200 -> 127; column 0's stays.
  at["w_scales"] = std::vector<double>{1.0, 16.0};
  EXPECT_EQ(run_op("qlinear_matmul", {a, w}, at), (std::vector<double>{6, 127}));
}

TEST(QuantPerChannel, AConvolutionRequantizesEachOutputChannelWithItsBias) {
  // x [1, 1, 1, 2] = [1, 2] (zp 0), w [2, 1, 1, 2] = [[3, 4], [5, 6]], bias [1, -1], kernel 1x2: channel sums
  // 1*3 + 2*4 + 1 = 12 and 1*5 + 2*6 - 1 = 16.
  const Tensor x = Tensor::f64({1, 1, 1, 2}, {1, 2});
  const Tensor w = Tensor::f64({2, 1, 1, 2}, {3, 4, 5, 6});
  const Tensor b = Tensor::f64({2}, {1, -1});
  Attrs at = {{"out_channels", int64_t{2}},     {"kernel_shape", std::vector<int64_t>{1, 2}},
              {"bias", int64_t{1}},             {"x_scale", 0.5},
              {"x_zero_point", int64_t{0}},     {"w_scale", 1.0},
              {"w_zero_point", int64_t{0}},     {"w_type", std::string("int8")},
              {"y_scale", 1.0},                 {"y_zero_point", int64_t{-3}},
              {"to", std::string("int8")},      {"w_scales", std::vector<double>{0.25, 2.0}}};
  // Channel 0: 12 * 0.5 * 0.25 = 1.5 -> 2 (even) - 3 = -1; channel 1: 16 * 0.5 * 2 = 16 - 3 = 13.
  EXPECT_EQ(run_op("qlinear_conv2d", {x, w, b}, at), (std::vector<double>{-1, 13}));
  // Channel 1's zero point 5: 1*0 + 2*1 - 1 = 1, * 1 = 1 - 3 = -2.
  at["w_zero_points"] = std::vector<int64_t>{0, 5};
  EXPECT_EQ(run_op("qlinear_conv2d", {x, w, b}, at), (std::vector<double>{-1, -2}));
}

TEST(QuantPerChannel, TheShapeRuleChecksTheListsAgainstTheChannels) {
  const OpSpec& spec = ops::op("qlinear_matmul");
  const TensorType a{DType::I8, {1, 4}};
  auto infer = [&](Attrs at) { return spec.infer({a}, canonical_attrs(spec, at)); };
  Attrs at = matmul_attrs();
  at["w_scales"] = std::vector<double>{1.0, 0.5};
  EXPECT_NO_THROW(infer(at));
  at["w_scales"] = std::vector<double>{1.0, 0.5, 0.25};
  EXPECT_THROW(infer(at), core::OpError);  // 3 scales for 2 columns
  at["w_scales"] = std::vector<double>{1.0, 0.5};
  at["w_zero_points"] = std::vector<int64_t>{0, 200};
  EXPECT_THROW(infer(at), core::OpError);  // 200 is no int8
  at["w_zero_points"] = std::vector<int64_t>{0};
  EXPECT_THROW(infer(at), core::OpError);  // one zero point for two columns
  at["w_scales"] = std::vector<double>{};
  at["w_zero_points"] = std::vector<int64_t>{0, 1};
  EXPECT_THROW(infer(at), core::OpError);  // zero points per channel need scales per channel
  EXPECT_THROW(canonical_attrs(spec, {{"w_scales", std::vector<double>{0.0, 1.0}}}), core::OpError);
}

TEST(QuantPerChannel, AFindingsSignatureSaysTheWeightsWerePerChannel) {
  const OpSpec& spec = ops::op("qlinear_matmul");
  ir::Node n{"q", "qlinear_matmul", {"a", "w"}, {"y"}, canonical_attrs(spec, matmul_attrs())};
  EXPECT_EQ(oracle::detail::key_params(n).find("w_scales"), std::string::npos) << oracle::detail::key_params(n);
  n.attrs["w_scales"] = std::vector<double>{1.0, 0.5};
  const std::string key = oracle::detail::key_params(n);
  EXPECT_NE(key.find("w_scales=\"given\""), std::string::npos) << key;
  EXPECT_EQ(oracle::detail::key_params(n).find("w_zero_points"), std::string::npos) << oracle::detail::key_params(n);
  n.attrs["w_zero_points"] = std::vector<int64_t>{0, 3};
  const std::string key2 = oracle::detail::key_params(n);
  EXPECT_NE(key2.find("w_zero_points=\"given\""), std::string::npos) << key2;
}

TEST(QuantPerChannel, SampledPerChannelCasesExportAs1DTensorsAndReadBack) {
  for (const std::string name : {"qlinear_conv2d", "qlinear_matmul"}) {
    const OpSpec& spec = op(name);
    core::Rng rng(4401);
    int per_channel = 0, zero_points = 0;
    for (int k = 0; k < 40; ++k) {
      const Case c = spec.sample(rng);
      const ir::SingleNode s = ir::single_node_graph(spec, c, rng, DType::F32);
      const ir::Graph& g = s.graph;
      const core::Attrs& want = g.nodes[0].attrs;
      if (!per_channel_weight(want)) continue;
      ++per_channel;
      zero_points += !core::attr_ints(want, "w_zero_points").empty();
      const ir::Graph back = ir::graph_from_onnx(ir::graph_to_onnx(g, ir::OnnxForm{13, 0}).bytes, "round trip");
      ASSERT_EQ(back.nodes.size(), 1u);
      EXPECT_EQ(back.nodes[0].op, name);
      EXPECT_EQ(core::to_string(back.nodes[0].attrs), core::to_string(want));
    }
    EXPECT_GE(per_channel, 5) << name;
    EXPECT_GE(zero_points, 2) << name;
  }
}

}  // namespace
}  // namespace quorum::ops
