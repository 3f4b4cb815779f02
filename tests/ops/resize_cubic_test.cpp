// resize_bicubic (ONNX Resize mode cubic): the kernel against hand-computed Keys weights, a linear ramp
// reproduced wherever no tap reads past the edge, exclude_outside's renormalisation, an infinite edge cell
// read by several taps giving its limit, and the ONNX export reading back the same resize. The kernel is
// also checked against the ONNX suite's own expected outputs (docs/conformance.md: the cubic Resize tests).
#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.h"
#include "ir/graph.h"
#include "ir/onnx_io.h"
#include "ops/registry.h"
#include "ref/interpreter.h"

namespace quorum::ops {
namespace {

std::vector<double> resized(const std::vector<double>& row, int64_t out, const std::string& ctm, double a,
                            int64_t exclude) {
  const OpSpec& spec = op("resize_bicubic");
  Tensor x(core::DType::F64, {1, 1, 1, static_cast<int64_t>(row.size())});
  for (size_t i = 0; i < row.size(); ++i) x.f64()[i] = row[i];
  const core::Attrs at = canonical_attrs(spec, {{"sizes", std::vector<int64_t>{1, out}},
                                                {"coordinate_transformation_mode", ctm},
                                                {"cubic_coeff_a", a},
                                                {"exclude_outside", exclude}});
  const Tensor y = spec.forward({&x}, at)[0];
  return std::vector<double>(y.f64(), y.f64() + y.numel());
}

// Keys' weights for a = -0.75 at distances 0.5 and 1.5: (a+2)/8 - (a+3)/4 + 1 and a(27/8 - 45/4 + 12 - 4).
constexpr double kNear = 0.59375, kFar = -0.09375;

TEST(ResizeCubic, KeysWeightsAtAHalfWayCoordinate) {
  // asymmetric, 4 -> 8: output 5 sits at 2.5 and reads cells 1..4 (clamped: 1, 2, 3, 3).
  EXPECT_DOUBLE_EQ(resized({0, 1, 0, 0}, 8, "asymmetric", -0.75, 0)[5], kFar);
  EXPECT_DOUBLE_EQ(resized({0, 0, 1, 0}, 8, "asymmetric", -0.75, 0)[5], kNear);
  // Cell 3 is read by the taps at 3 and at 4 (clamped to 3): their weights add up.
  EXPECT_DOUBLE_EQ(resized({0, 0, 0, 1}, 8, "asymmetric", -0.75, 0)[5], kNear + kFar);
}

TEST(ResizeCubic, AQuadraticIsReproducedAwayFromTheEdgesAndAConstantEverywhere) {
  // Keys' kernel with a = -0.5 reproduces polynomials up to degree 2: where all four taps are inside, y is
  // the polynomial at the coordinate. Every a reproduces constants (the weights sum to 1).
  std::vector<double> quad(8);
  for (size_t i = 0; i < quad.size(); ++i) quad[i] = 0.5 * static_cast<double>(i * i) - 3.0 * static_cast<double>(i);
  const std::vector<double> y = resized(quad, 13, "half_pixel", -0.5, 0);
  int inside = 0;
  for (int64_t o = 0; o < 13; ++o) {
    const double c = (static_cast<double>(o) + 0.5) * 8.0 / 13.0 - 0.5;
    if (std::floor(c) - 1 < 0 || std::floor(c) + 2 > 7) continue;
    ++inside;
    EXPECT_NEAR(y[static_cast<size_t>(o)], 0.5 * c * c - 3.0 * c, 1e-12) << "output " << o;
  }
  EXPECT_GE(inside, 7);
  for (double a : {-0.75, -1.3})
    for (int64_t ex : {0, 1})
      for (double v : resized(std::vector<double>(5, 2.5), 9, "align_corners", a, ex)) EXPECT_NEAR(v, 2.5, 1e-12);
}

TEST(ResizeCubic, ExcludeOutsideRenormalisesTheTapsInside) {
  // asymmetric 4 -> 8, output 1 at 0.5: taps -1, 0, 1, 2 weigh kFar, kNear, kNear, kFar.
  EXPECT_DOUBLE_EQ(resized({1, 0, 0, 0}, 8, "asymmetric", -0.75, 0)[1], kFar + kNear) << "tap -1 reads cell 0";
  EXPECT_DOUBLE_EQ(resized({1, 0, 0, 0}, 8, "asymmetric", -0.75, 1)[1], kNear / (1.0 - kFar)) << "tap -1 dropped";
  EXPECT_DOUBLE_EQ(resized({0, 0, 1, 0}, 8, "asymmetric", -0.75, 1)[1], kFar / (1.0 - kFar));
}

TEST(ResizeCubic, AnInfiniteEdgeCellGivesItsLimit) {
  // The ledger case of torch-resize-bicubic-inf-nan and ort-resize-bicubic-inf-nan: cell 0 is read by up to
  // three taps of both signs; the limit is inf times the sign of their summed weight.
  const std::vector<double> y = resized({-INFINITY, 1}, 4, "half_pixel", -0.75, 0);
  EXPECT_EQ(y, (std::vector<double>{-INFINITY, -INFINITY, -INFINITY, INFINITY}));
}

TEST(ResizeCubic, TheGradientIsTheTransposeOfTheTaps) {
  const OpSpec& spec = op("resize_bicubic");
  const Tensor x = Tensor::f64({1, 1, 2, 3}, {1, -2, 3, 0.5, 4, -1});
  const core::Attrs at = canonical_attrs(spec, {{"sizes", std::vector<int64_t>{3, 5}},
                                                {"coordinate_transformation_mode", std::string("align_corners")},
                                                {"cubic_coeff_a", -0.5}});
  const std::vector<Tensor> y = spec.forward({&x}, at);
  Tensor gy(core::DType::F64, y[0].shape());
  for (int64_t i = 0; i < gy.numel(); ++i) gy.f64()[i] = 0.25 * static_cast<double>(i) - 1.0;
  const Tensor gx = spec.vjp({&x}, at, y, {gy})[0];
  // <gy, A x> = <A^T gy, x> for the linear map A.
  double lhs = 0, rhs = 0;
  for (int64_t i = 0; i < gy.numel(); ++i) lhs += gy.f64()[i] * y[0].f64()[i];
  for (int64_t i = 0; i < x.numel(); ++i) rhs += gx.f64()[i] * x.f64()[i];
  EXPECT_NEAR(lhs, rhs, 1e-12);
}

TEST(ResizeCubic, TheOnnxExportReadsBackTheSameResize) {
  const OpSpec& spec = op("resize_bicubic");
  core::Rng rng(29);
  for (int k = 0; k < 30; ++k) {
    const Case c = spec.sample(rng);
    ir::Graph g;
    g.inputs.push_back({"x", c.inputs[0]});
    g.nodes.push_back({"r", "resize_bicubic", {"x"}, {"y"}, canonical_attrs(spec, c.attrs)});
    g.outputs = {"y"};
    ir::validate(g, "cubic resize");
    Tensor x(core::DType::F64, c.inputs[0].shape);
    for (int64_t i = 0; i < x.numel(); ++i) x.f64()[i] = std::sin(static_cast<double>(i));
    for (int opset : {11, 13, 17}) {
      const ir::Graph back = ir::graph_from_onnx(ir::graph_to_onnx(g, ir::OnnxForm{opset, 0}).bytes, "round trip");
      ASSERT_EQ(back.nodes.size(), 1u);
      EXPECT_EQ(back.nodes[0].op, "resize_bicubic");
      EXPECT_EQ(core::to_string(back.nodes[0].attrs), core::to_string(g.nodes[0].attrs)) << "opset " << opset;
      const Tensor a = ref::forward(g, {{"x", x}}).at("y");
      const Tensor b = ref::forward(back, {{"x", x}}).at(back.outputs[0]);
      EXPECT_EQ(std::vector<double>(a.f64(), a.f64() + a.numel()), std::vector<double>(b.f64(), b.f64() + b.numel()));
    }
  }
}

}  // namespace
}  // namespace quorum::ops
