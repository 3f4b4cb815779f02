// Slice with negative steps (ONNX Slice from opset 10): the kernel against hand-computed cases (clamping of a
// start past the end, an end before element 0 spelled -n-1, -100 or INT64_MIN, a start counted from the end),
// its gradient scattering back to the picked elements, the shape rule refusing step 0, the sampler drawing
// backward slices, and the ONNX export reading back the same slice.
#include <gtest/gtest.h>

#include <limits>

#include "core/rng.h"
#include "ir/graph.h"
#include "ir/onnx_io.h"
#include "ops/registry.h"
#include "ref/interpreter.h"

namespace quorum::ops {
namespace {

using V = std::vector<int64_t>;

Tensor iota(const core::Shape& s) {
  Tensor t(core::DType::F64, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.f64()[i] = static_cast<double>(i);
  return t;
}

std::vector<double> sliced(const Tensor& x, const V& starts, const V& ends, const V& axes, const V& steps) {
  const OpSpec& spec = op("slice");
  const core::Attrs a =
      canonical_attrs(spec, {{"starts", starts}, {"ends", ends}, {"axes", axes}, {"steps", steps}});
  const Tensor y = spec.forward({&x}, a)[0];
  return std::vector<double>(y.f64(), y.f64() + y.numel());
}

TEST(SliceSteps, BackwardsSlicesPickFromStartDown) {
  const Tensor x = iota({7});
  EXPECT_EQ(sliced(x, {5}, {1}, {0}, {-2}), (std::vector<double>{5, 3}));
  EXPECT_EQ(sliced(x, {5}, {-8}, {0}, {-1}), (std::vector<double>{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(sliced(x, {100}, {-100}, {0}, {-3}), (std::vector<double>{6, 3, 0})) << "start clamps to n - 1";
  EXPECT_EQ(sliced(x, {-1}, {std::numeric_limits<int64_t>::min()}, {0}, {-4}), (std::vector<double>{6, 2}));
  EXPECT_EQ(sliced(x, {-2}, {-4}, {0}, {-1}), (std::vector<double>{5, 4})) << "-4 counts from the end: 3";
}

TEST(SliceSteps, AnEmptyBackwardSliceAndStepZeroAreRefused) {
  const OpSpec& spec = op("slice");
  const core::TensorType t{core::DType::F32, {7}};
  EXPECT_THROW(spec.infer({t}, canonical_attrs(spec, {{"starts", V{6}}, {"ends", V{-1}}, {"steps", V{-1}}})),
               std::exception)
      << "-1 is element 6: nothing lies between";
  EXPECT_THROW(spec.infer({t}, canonical_attrs(spec, {{"starts", V{0}}, {"ends", V{7}}, {"steps", V{0}}})),
               std::exception);
}

TEST(SliceSteps, TwoAxesBackwardsAndTheGradientScattersBack) {
  const Tensor x = iota({3, 4});
  // Rows 2, 1, 0 and columns 3, 1: [[11, 9], [7, 5], [3, 1]].
  EXPECT_EQ(sliced(x, {-1, 3}, {-100, 0}, {0, 1}, {-1, -2}), (std::vector<double>{11, 9, 7, 5, 3, 1}));
  const OpSpec& spec = op("slice");
  ASSERT_TRUE(spec.vjp);
  const core::Attrs a =
      canonical_attrs(spec, {{"starts", V{-1, 3}}, {"ends", V{-100, 0}}, {"axes", V{0, 1}}, {"steps", V{-1, -2}}});
  const std::vector<Tensor> y = spec.forward({&x}, a);
  Tensor gy(core::DType::F64, y[0].shape());
  for (int64_t i = 0; i < gy.numel(); ++i) gy.f64()[i] = 10.0 * static_cast<double>(i + 1);
  const Tensor gx = spec.vjp({&x}, a, y, {gy})[0];
  // y[i] came from x at 11, 9, 7, 5, 3, 1: those receive 10, 20, ..., 60; every other element 0.
  const std::vector<double> want = {0, 60, 0, 50, 0, 40, 0, 30, 0, 20, 0, 10};
  EXPECT_EQ(std::vector<double>(gx.f64(), gx.f64() + gx.numel()), want);
}

TEST(SliceSteps, TheSamplerDrawsBackwardSlicesThatTheOnnxExportReadsBack) {
  const OpSpec& spec = op("slice");
  core::Rng rng(17);
  int backwards = 0;
  for (int k = 0; k < 200; ++k) {
    const Case c = spec.sample(rng);
    const V& steps = core::attr_ints(c.attrs, "steps");
    if (std::none_of(steps.begin(), steps.end(), [](int64_t s) { return s < 0; })) continue;
    ++backwards;
    ir::Graph g;
    g.inputs.push_back({"x", c.inputs[0]});
    g.nodes.push_back({"s", "slice", {"x"}, {"y"}, canonical_attrs(spec, c.attrs)});
    g.outputs = {"y"};
    ir::validate(g, "backward slice");
    for (int opset : {11, 13, 17}) {
      const ir::Graph back = ir::graph_from_onnx(ir::graph_to_onnx(g, ir::OnnxForm{opset, 0}).bytes, "round trip");
      ASSERT_EQ(back.nodes.size(), 1u);
      const Tensor x = iota(c.inputs[0].shape);
      const Tensor a = ref::forward(g, {{"x", x}}).at("y");
      const Tensor b = ref::forward(back, {{"x", x}}).at(back.outputs[0]);
      EXPECT_EQ(std::vector<double>(a.f64(), a.f64() + a.numel()), std::vector<double>(b.f64(), b.f64() + b.numel()))
          << "opset " << opset << ": " << core::to_string(core::AttrValue(steps));
    }
  }
  EXPECT_GT(backwards, 20);
}

}  // namespace
}  // namespace quorum::ops
