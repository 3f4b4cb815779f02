// Resize with given scales (ONNX Resize's `scales` input, the catalogue's `scales` attribute): every mode but
// align_corners divides the output coordinate by the given scale, not by out / in, and out = floor(in * scale);
// and tf_crop_and_resize (roi, extrapolation_value). The kernel against a direct computation of ONNX's
// formulas, the shape rule, the sampler's draws, the ONNX round trip (scales and roi written and read back;
// exact scales read as sizes), and each backend lowering's decision where the scale moves a coordinate
// (ops::resize_scale_matters). The backends' runs and refusals of sampled cases: tests/backends/agreement_test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "core/rng.h"
#include "ir/graph.h"
#include "ir/onnx_io.h"
#include "ops/kernel_util.h"
#include "ops/registry.h"
#include "ref/interpreter.h"

namespace quorum::ops {
namespace {

Tensor ramp(const Shape& s) {
  Tensor x(core::DType::F64, s);
  for (int64_t i = 0; i < x.numel(); ++i) x.f64()[i] = std::sin(0.7 * static_cast<double>(i)) * 3.0;
  return x;
}

std::vector<double> run(const std::string& name, const Tensor& x, const core::Attrs& given) {
  const OpSpec& spec = op(name);
  const Tensor y = spec.forward({&x}, canonical_attrs(spec, given))[0];
  return std::vector<double>(y.f64(), y.f64() + y.numel());
}

// ONNX's source coordinate with the given scale s (Resize-13 and later, the formulas' `scale`).
double onnx_coord(const std::string& ctm, int64_t o, int64_t in, int64_t out, double s) {
  const auto od = static_cast<double>(o);
  if (ctm == "align_corners") return out == 1 ? 0.0 : od * static_cast<double>(in - 1) / static_cast<double>(out - 1);
  if (ctm == "asymmetric") return od / s;
  if (ctm == "pytorch_half_pixel" && out == 1) return 0.0;
  return (od + 0.5) / s - 0.5;
}

TEST(ResizeScales, BilinearDividesTheCoordinateByTheGivenScale) {
  // [1, 1, 3, 4] -> scales (1.7, 1.3): out floor(5.1) = 5, floor(5.2) = 5; out / in would be 5/3 and 5/4.
  const Tensor x = ramp({1, 1, 3, 4});
  const double sh = 1.7000000476837158, sw = 1.2999999523162842;  // float32 values
  for (const std::string ctm : {"half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners"}) {
    const auto y = run("resize_bilinear", x,
                       {{"sizes", std::vector<int64_t>{5, 5}},
                        {"scales", std::vector<double>{sh, sw}},
                        {"coordinate_transformation_mode", ctm}});
    auto lin = [](double c, int64_t in) {
      const double cl = std::clamp(c, 0.0, static_cast<double>(in - 1));
      const auto i0 = static_cast<int64_t>(std::floor(cl));
      return std::tuple<int64_t, int64_t, double>{i0, std::min(i0 + 1, in - 1), cl - static_cast<double>(i0)};
    };
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 5; ++j) {
        const auto [r0, r1, wr] = lin(onnx_coord(ctm, i, 3, 5, sh), 3);
        const auto [c0, c1, wc] = lin(onnx_coord(ctm, j, 4, 5, sw), 4);
        auto at = [&](int64_t r, int64_t c) { return x.f64()[r * 4 + c]; };
        const double top = at(r0, c0) * (1 - wc) + at(r0, c1) * wc, bottom = at(r1, c0) * (1 - wc) + at(r1, c1) * wc;
        EXPECT_NEAR(y[static_cast<size_t>(i * 5 + j)], top * (1 - wr) + bottom * wr, 1e-12)
            << ctm << " " << i << "," << j;
      }
  }
}

TEST(ResizeScales, NearestRoundsTheScaledCoordinate) {
  // 1 x 5 -> scale 1.1 keeps the length 5 but moves every coordinate: asymmetric floor reads o / 1.1.
  Tensor x(core::DType::F64, {1, 1, 1, 5});
  for (int64_t i = 0; i < 5; ++i) x.f64()[i] = static_cast<double>(10 * i);
  const auto y = run("resize_nearest", x,
                     {{"sizes", std::vector<int64_t>{1, 5}},
                      {"scales", std::vector<double>{1.0, 1.100000023841858}},
                      {"coordinate_transformation_mode", "asymmetric"},
                      {"nearest_mode", "floor"}});
  EXPECT_EQ(y, (std::vector<double>{0, 0, 10, 20, 30}));  // floor(0, 0.91, 1.82, 2.73, 3.64)
  // tf_half_pixel_for_nn: (o + 0.5) / 2.9 for 2 -> floor(2 * 2.9) = 5.
  Tensor z(core::DType::F64, {1, 1, 1, 2});
  z.f64()[0] = 1;
  z.f64()[1] = 2;
  const auto w = run("resize_nearest", z,
                     {{"sizes", std::vector<int64_t>{1, 5}},
                      {"scales", std::vector<double>{1.0, 2.9000000953674316}},
                      {"coordinate_transformation_mode", "tf_half_pixel_for_nn"},
                      {"nearest_mode", "floor"}});
  EXPECT_EQ(w, (std::vector<double>{1, 1, 1, 2, 2}));  // floor(0.17, 0.52, 0.86, 1.21, 1.55); out / in: 1, 1, 2, 2, 2
}

TEST(ResizeScales, CubicUsesTheScaledCoordinateAndItsExactZeroWeights) {
  // A constant stays constant under any coordinate; a ramp is reproduced where the taps are inside (a = -0.5
  // reproduces degree 2), at the coordinate the given scale makes.
  const int64_t in = 9;
  Tensor x(core::DType::F64, {1, 1, 1, in});
  for (int64_t i = 0; i < in; ++i) x.f64()[i] = 2.0 * static_cast<double>(i) - 1.0;
  const double s = 1.2999999523162842;  // floor(9 * 1.3) = 11
  const auto y = run("resize_bicubic", x,
                     {{"sizes", std::vector<int64_t>{1, 11}},
                      {"scales", std::vector<double>{1.0, s}},
                      {"coordinate_transformation_mode", "half_pixel"},
                      {"cubic_coeff_a", -0.5}});
  int inside = 0;
  for (int64_t o = 0; o < 11; ++o) {
    const double c = onnx_coord("half_pixel", o, in, 11, s);
    if (std::floor(c) - 1 < 0 || std::floor(c) + 2 > in - 1) continue;
    ++inside;
    EXPECT_NEAR(y[static_cast<size_t>(o)], 2.0 * c - 1.0, 1e-9) << "output " << o;
  }
  EXPECT_GE(inside, 6);
  // Integer coordinates read one cell: taps at distances 1 and 2 weigh exactly 0, so a NaN neighbour stays
  // out (align_corners on an unchanged length; a = -0.11 leaves a 2e-16 residue in the polynomial).
  Tensor n(core::DType::F64, {1, 1, 1, 3});
  n.f64()[0] = 1;
  n.f64()[1] = NAN;
  n.f64()[2] = 3;
  const auto m = run("resize_bicubic", n,
                     {{"sizes", std::vector<int64_t>{1, 3}},
                      {"coordinate_transformation_mode", "align_corners"},
                      {"cubic_coeff_a", -0.11},
                      {"exclude_outside", int64_t{1}}});
  EXPECT_EQ(m[0], 1.0);
  EXPECT_TRUE(std::isnan(m[1]));
  EXPECT_EQ(m[2], 3.0);
}

TEST(ResizeScales, TheShapeRuleNeedsSizesToBeFloorOfInTimesScale) {
  const OpSpec& spec = op("resize_bilinear");
  const std::vector<core::TensorType> in{{core::DType::F32, {1, 1, 3, 4}}};
  core::Attrs a =
      canonical_attrs(spec, {{"sizes", std::vector<int64_t>{5, 5}}, {"scales", std::vector<double>{1.7, 1.3}}});
  EXPECT_NO_THROW(spec.infer(in, a));
  a["sizes"] = std::vector<int64_t>{5, 6};
  EXPECT_THROW(spec.infer(in, a), core::OpError);
  a["scales"] = std::vector<double>{1.7};
  EXPECT_THROW(spec.infer(in, a), core::OpError);
  EXPECT_THROW(canonical_attrs(spec, {{"scales", std::vector<double>{0.0, 1.0}}}), core::OpError);
  // A mutated size drops the given scales (the generator's repair).
  a["scales"] = std::vector<double>{1.7, 1.3};
  ASSERT_TRUE(spec.repair_attrs);
  EXPECT_TRUE(spec.repair_attrs(a));
  EXPECT_TRUE(core::attr_floats(a, "scales").empty());
  EXPECT_NO_THROW(spec.infer(in, a));
}

TEST(ResizeScales, TheSamplerAndTheGeneratorDrawConsistentScales) {
  for (const std::string name : {"resize_nearest", "resize_bilinear", "resize_bicubic"}) {
    const OpSpec& spec = op(name);
    core::Rng rng(41);
    int given = 0, moved = 0;
    for (int k = 0; k < 200; ++k) {
      const Case c = spec.sample(rng);
      const core::Attrs a = canonical_attrs(spec, c.attrs);
      ASSERT_NO_THROW(spec.infer(c.inputs, a)) << core::to_string(a);
      if (core::attr_floats(a, "scales").empty()) continue;
      ++given;
      for (size_t i = 0; i < 2; ++i) {
        const double s = core::attr_floats(a, "scales")[i];
        EXPECT_EQ(s, static_cast<double>(static_cast<float>(s))) << "a float32 scale";
        if (resize_scale_matters(a, i, c.inputs[0].shape[2 + i], core::attr_ints(a, "sizes")[i])) ++moved;
      }
      core::Attrs fitted;
      spec.fit_attrs(c.inputs[0].shape, rng, 4, fitted);
      EXPECT_NO_THROW(spec.infer(c.inputs, canonical_attrs(spec, fitted))) << core::to_string(fitted);
    }
    EXPECT_GT(given, 30) << name;
    EXPECT_GT(moved, 20) << name;
  }
}

TEST(ResizeScales, TheOnnxExportWritesTheGivenScalesAndTheCropAndReadsThemBack) {
  for (const std::string name : {"resize_nearest", "resize_bilinear", "resize_bicubic"}) {
    const OpSpec& spec = op(name);
    core::Rng rng(43);
    int with_scales = 0, crops = 0;
    for (int k = 0; k < 60; ++k) {
      const Case c = spec.sample(rng);
      ir::Graph g;
      g.inputs.push_back({"x", c.inputs[0]});
      g.nodes.push_back({"r", name, {"x"}, {"y"}, canonical_attrs(spec, c.attrs)});
      g.outputs = {"y"};
      ir::validate(g, "resize");
      with_scales += !core::attr_floats(g.nodes[0].attrs, "scales").empty();
      crops += core::attr_s(g.nodes[0].attrs, "coordinate_transformation_mode") == "tf_crop_and_resize";
      const Tensor x = ramp(c.inputs[0].shape);
      for (int opset : {11, 13, 17}) {
        if (opset >= 13 && core::attr_s(g.nodes[0].attrs, "coordinate_transformation_mode") == "tf_half_pixel_for_nn")
          continue;
        const ir::Graph back = ir::graph_from_onnx(ir::graph_to_onnx(g, ir::OnnxForm{opset, 0}).bytes, "round trip");
        ASSERT_EQ(back.nodes.size(), 1u);
        EXPECT_EQ(back.nodes[0].op, name);
        // Given scales that are out / in exactly read back as sizes alone (the same coordinates).
        core::Attrs want = g.nodes[0].attrs;
        bool exact = true;
        for (size_t i = 0; i < core::attr_floats(want, "scales").size(); ++i)
          exact = exact && core::attr_floats(want, "scales")[i] ==
                               static_cast<double>(core::attr_ints(want, "sizes")[i]) /
                                   static_cast<double>(c.inputs[0].shape[2 + i]);
        if (exact) want["scales"] = std::vector<double>{};
        EXPECT_EQ(core::to_string(back.nodes[0].attrs), core::to_string(want)) << "opset " << opset;
        const Tensor a = ref::forward(g, {{"x", x}}).at("y");
        const Tensor b = ref::forward(back, {{"x", x}}).at(back.outputs[0]);
        EXPECT_EQ(std::vector<double>(a.f64(), a.f64() + a.numel()), std::vector<double>(b.f64(), b.f64() + b.numel()));
      }
    }
    EXPECT_GT(with_scales, 8) << name;
    EXPECT_GT(crops, 3) << name;
  }
}

TEST(ResizeCrop, CoordinatesFromTheRoiAndTheExtrapolationValueOutside) {
  // [1, 1, 3, 4] cropped to rows [0.125, 0.875] x columns [-0.25, 1.25] and resized to 4 x 5 (ONNX's
  // formula: start * (in - 1) + o * (end - start) * (in - 1) / (out - 1)); columns -0.75 and 3.75 lie outside.
  const Tensor x = ramp({1, 1, 3, 4});
  const std::vector<double> roi{0.125, -0.25, 0.875, 1.25};
  const auto y = run("resize_bilinear", x,
                     {{"sizes", std::vector<int64_t>{4, 5}},
                      {"coordinate_transformation_mode", "tf_crop_and_resize"},
                      {"roi", roi},
                      {"extrapolation_value", 1.5}});
  auto coord = [&](size_t axis, int64_t o, int64_t in, int64_t out) {
    const auto span = static_cast<double>(in - 1);
    const double step = (roi[axis + 2] - roi[axis]) * span / static_cast<double>(out - 1);
    return roi[axis] * span + static_cast<double>(o) * step;
  };
  int outside = 0;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      const double r = coord(0, i, 3, 4), c = coord(1, j, 4, 5);
      const double got = y[static_cast<size_t>(i * 5 + j)];
      if (r < 0 || r > 2 || c < 0 || c > 3) {
        ++outside;
        EXPECT_EQ(got, 1.5) << i << "," << j;
        continue;
      }
      const auto r0 = static_cast<int64_t>(std::floor(r)), c0 = static_cast<int64_t>(std::floor(c));
      const int64_t r1 = std::min<int64_t>(r0 + 1, 2), c1 = std::min<int64_t>(c0 + 1, 3);
      const double wr = r - static_cast<double>(r0), wc = c - static_cast<double>(c0);
      auto at = [&](int64_t a, int64_t b) { return x.f64()[a * 4 + b]; };
      const double top = at(r0, c0) * (1 - wc) + at(r0, c1) * wc, bottom = at(r1, c0) * (1 - wc) + at(r1, c1) * wc;
      const double want = top * (1 - wr) + bottom * wr;
      EXPECT_NEAR(got, want, 1e-12) << i << "," << j;
    }
  EXPECT_EQ(outside, 8);  // columns 0 and 4 of every row
  // The gradient of an extrapolated output is 0; the rest is the transpose of the taps.
  const OpSpec& spec = op("resize_bilinear");
  const core::Attrs a = canonical_attrs(spec, {{"sizes", std::vector<int64_t>{4, 5}},
                                               {"coordinate_transformation_mode", "tf_crop_and_resize"},
                                               {"roi", roi}});
  Tensor gy(core::DType::F64, {1, 1, 4, 5});
  for (int64_t k = 0; k < 20; ++k) gy.f64()[k] = k % 5 == 0 || k % 5 == 4 ? 1000.0 : 0.0;
  const Tensor gx = spec.vjp({&x}, a, spec.forward({&x}, a), {gy})[0];
  for (int64_t k = 0; k < gx.numel(); ++k) EXPECT_EQ(gx.f64()[k], 0.0) << k;
}

TEST(ResizeCrop, AReversedCropAndOneOutputRow) {
  // end before start reads the crop backwards; one output reads the crop's centre (start + end) / 2 * (in - 1).
  Tensor x(core::DType::F64, {1, 1, 1, 5});
  for (int64_t i = 0; i < 5; ++i) x.f64()[i] = static_cast<double>(10 * i);
  const auto y = run("resize_nearest", x,
                     {{"sizes", std::vector<int64_t>{1, 3}},
                      {"coordinate_transformation_mode", "tf_crop_and_resize"},
                      {"nearest_mode", "floor"},
                      {"roi", std::vector<double>{0.0, 1.0, 1.0, 0.25}}});
  EXPECT_EQ(y, (std::vector<double>{40, 20, 10}));  // columns 4, 2.5, 1
  const auto z = run("resize_nearest", x,
                     {{"sizes", std::vector<int64_t>{1, 1}},
                      {"coordinate_transformation_mode", "tf_crop_and_resize"},
                      {"nearest_mode", "floor"},
                      {"roi", std::vector<double>{0.0, 0.25, 1.0, 0.75}}});
  EXPECT_EQ(z, (std::vector<double>{20}));  // 0.5 * 4
  const OpSpec& spec = op("resize_bilinear");
  EXPECT_THROW(spec.infer({{core::DType::F32, {1, 1, 2, 2}}},
                          canonical_attrs(spec, {{"sizes", std::vector<int64_t>{4, 4}},
                                                 {"scales", std::vector<double>{2.0, 2.0}},
                                                 {"coordinate_transformation_mode", "tf_crop_and_resize"}})),
               core::OpError);
}

TEST(ResizeScales, AScaleMattersOnlyWhereItMovesACoordinate) {
  core::Attrs a{{"coordinate_transformation_mode", std::string("half_pixel")},
                {"scales", std::vector<double>{1.7000000476837158, 2.0}}};
  EXPECT_TRUE(resize_scale_matters(a, 0, 3, 5));    // 1.7 vs 5/3
  EXPECT_FALSE(resize_scale_matters(a, 1, 4, 8));   // 2 = 8/4
  EXPECT_FALSE(resize_scale_matters(a, 0, 1, 1));   // one input cell
  a["coordinate_transformation_mode"] = std::string("align_corners");
  EXPECT_FALSE(resize_scale_matters(a, 0, 3, 5));   // align_corners reads the lengths only
  a["scales"] = std::vector<double>{};
  a["coordinate_transformation_mode"] = std::string("half_pixel");
  EXPECT_FALSE(resize_scale_matters(a, 0, 3, 5));   // sizes alone
  EXPECT_EQ(resize_given_scale(a, 0), 0.0);
}

}  // namespace
}  // namespace quorum::ops
