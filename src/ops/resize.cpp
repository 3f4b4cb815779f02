// Spatial resizing of [N, C, H, W] to [N, C, oH, oW] (ONNX Resize with `sizes`, nearest, linear and
// cubic modes). Both axes are separable: each output row/column maps to source taps (one for
// nearest, two weighted ones for bilinear, four for cubic) computed once per axis, and the forward
// pass and its VJP walk the same taps, so the gradient is exactly the transpose of the forward map.
#include <algorithm>
#include <cmath>

#include "ops/kernel_util.h"
#include "ops/onnx_map.h"
#include "ops/registry.h"

namespace quorum::ops {
namespace {

enum class Interp { Nearest, Linear, Cubic };

// One output index's source taps along an axis: value = sum of w[k] * x[i[k]] for k < n.
struct Tap {
  int n = 1;
  int64_t i[4] = {0, 0, 0, 0};
  double w[4] = {1.0, 0.0, 0.0, 0.0};
  double gain = 1.0;  // cubic: the sum of |w| over the four taps before same-cell taps merge
  bool outside = false;  // tf_crop_and_resize: the coordinate is outside the input (extrapolation_value)
};

// ONNX's cubic convolution kernel (Keys) at distance s from the coordinate, coefficient a.
// The kernel is 0 at distances 1 and 2 for every a; the polynomials, evaluated in floating point, leave a
// rounding residue there ((a + 2) - (a + 3) + 1 is 2e-16 for a = -0.11), through which a NaN or infinite
// cell the exact interpolation does not read would leak in. Those distances give the exact 0.
double cubic_weight(double a, double s) {
  s = std::abs(s);
  if (s == 1.0 || s >= 2.0) return 0.0;
  if (s < 1.0) return ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0;
  return ((a * s - 5.0 * a) * s + 8.0 * a) * s - 4.0 * a;
}

// The largest term of the kernel's polynomial at distance s: a float32 evaluation of it (ONNX Runtime's
// GetCubicCoeffs, four roundings) is off by a few units of that term, not of the weight; at distance 2 the
// exact weight is 0 and ONNX Runtime's float32 one 2^-20 for a = -1.51, which times a large edge cell moves
// the output visibly (seed 10337). Each weight is therefore a stored sum of that magnitude.
double cubic_terms(double a, double s) {
  s = std::abs(s);
  if (s < 1.0) return std::max({std::abs(a + 2.0), std::abs(a + 3.0), 1.0});
  if (s > 2.0) return 0.0;
  return std::abs(a) * std::max({s * s * s, 5.0 * s * s, 8.0 * s, 4.0});  // a s^3, 5a s^2, 8a s, 4a
}

// The cubic taps at source coordinate c (not clamped: ONNX reads the edge cell for an index
// outside the axis): cells floor(c)-1 .. floor(c)+2 at distances 1+t, t, 1-t, 2-t (t = c - floor(c)),
// as ONNX Runtime and ATen place them. exclude_outside: taps outside [0, in-1] weigh 0 and the
// others are renormalised to sum 1. The weights, a few float32 operations in a library, are stored.
Tap cubic_taps(double c, int64_t in, double a, bool exclude_outside) {
  Tap t;
  t.n = 4;
  const double fl = std::floor(c), r = c - fl;
  const double dist[4] = {1.0 + r, r, 1.0 - r, 2.0 - r};
  double sum = 0;
  for (int k = 0; k < 4; ++k) {
    const auto idx = static_cast<int64_t>(fl) - 1 + k;
    const bool outside = idx < 0 || idx > in - 1;
    t.i[k] = std::clamp<int64_t>(idx, 0, in - 1);
    t.w[k] = exclude_outside && outside ? 0.0 : stored_sum(cubic_weight(a, dist[k]), cubic_terms(a, dist[k]), 4);
    sum += t.w[k];
  }
  if (exclude_outside && sum != 0)
    for (double& w : t.w) w = stored(w / sum);
  t.gain = std::abs(t.w[0]) + std::abs(t.w[1]) + std::abs(t.w[2]) + std::abs(t.w[3]);
  // Taps that read the same edge cell read it once with their summed weight, as the exact
  // interpolation does: an infinite edge cell then gives its limit, not inf - inf.
  for (int k = 1; k < 4; ++k)
    for (int j = 0; j < k; ++j)
      if (t.w[k] != 0 && t.i[j] == t.i[k]) {
        t.w[j] += t.w[k];
        t.w[k] = 0;
      }
  return t;
}

// `lane`: the axis (0 height, 1 width), so the spread's trials round the two axes' coordinates to
// opposite sides too (ops::stored_sum).
std::vector<Tap> axis_taps(Interp kind, const Attrs& a, int64_t in, int64_t out, int lane) {
  const bool crop = core::attr_s(a, "coordinate_transformation_mode") == "tf_crop_and_resize";
  std::vector<Tap> taps(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    const double x = resize_coord(a, static_cast<size_t>(lane), o, in, out);
    Tap& t = taps[static_cast<size_t>(o)];
    // The coordinate, a few float32 operations on the output index in a float32 implementation,
    // is marked stored (ops::stored_sum); the crop's formula has more, with terms up to the input's length.
    const double c = crop ? stored_sum(x, std::abs(x) + 2.0 * static_cast<double>(in - 1) + 0.5, 5, lane)
                          : stored_sum(x, std::abs(x) + 0.5, 3, lane);
    if (resize_extrapolates(a, c, in)) {
      t.n = 0;
      t.outside = true;
    } else if (kind == Interp::Linear) {
      // ONNX linear: clamp the coordinate into the input, then interpolate its two neighbours; the
      // result is continuous in the coordinate.
      const double cl = std::clamp(c, 0.0, static_cast<double>(in - 1));
      t.n = 2;
      t.i[0] = static_cast<int64_t>(std::floor(cl));
      t.i[1] = std::min(t.i[0] + 1, in - 1);
      t.w[1] = cl - static_cast<double>(t.i[0]);
      t.w[0] = 1.0 - t.w[1];
    } else if (kind == Interp::Cubic) {
      t = cubic_taps(c, in, core::attr_f(a, "cubic_coeff_a"), core::attr_i(a, "exclude_outside") != 0);
    } else {
      // On an exact integer (floor, ceil) or half-way point (the round modes), a float32
      // implementation's coordinate (o * float(in / out)) may land on either side, and so may a
      // float64 one whose scale was rounded (libtorch's upsample_nearest).
      t.i[0] = std::clamp<int64_t>(resize_round_nearest(core::attr_s(a, "nearest_mode"), c), 0, in - 1);
    }
  }
  return taps;
}

// ONNX Resize's output length for a given scale: floor(in * scale).
int64_t scales_output(int64_t in, double scale) {
  return static_cast<int64_t>(std::floor(static_cast<double>(in) * scale));
}

Shape resized_shape(const std::string& op, const Shape& x, const Attrs& a) {
  QUORUM_REQUIRE(x.size() == 4, op + " expects input of rank 4 [N, C, H, W], got rank " + std::to_string(x.size()));
  QUORUM_REQUIRE(x[2] >= 1 && x[3] >= 1, op + " requires a non-empty input plane, got " + core::to_string(x));
  const auto& sizes = core::attr_ints(a, "sizes");
  QUORUM_REQUIRE(sizes.size() == 2, "sizes " + core::to_string(AttrValue(sizes)) + " must have 2 entries [oH, oW]");
  QUORUM_REQUIRE(sizes[0] >= 1 && sizes[1] >= 1,
                 "sizes entries must be >= 1, got " + core::to_string(AttrValue(sizes)));
  const auto& scales = core::attr_floats(a, "scales");
  QUORUM_REQUIRE(scales.empty() || scales.size() == 2,
                 "scales " + core::to_string(AttrValue(scales)) + " must be empty or have 2 entries [sH, sW]");
  const auto& roi = core::attr_floats(a, "roi");
  QUORUM_REQUIRE(roi.empty() || roi.size() == 4,
                 "roi " + core::to_string(AttrValue(roi)) + " must be empty or [h_start, w_start, h_end, w_end]");
  QUORUM_REQUIRE(scales.empty() || core::attr_s(a, "coordinate_transformation_mode") != "tf_crop_and_resize",
                 "tf_crop_and_resize takes sizes: a given scale only sets its output length floor(in * (end - "
                 "start) * scale), which sizes spell");
  for (size_t i = 0; i < scales.size(); ++i)
    QUORUM_REQUIRE(scales_output(x[2 + i], scales[i]) == sizes[i],
                   "scales " + core::to_string(AttrValue(scales)) + " give output floor(" + std::to_string(x[2 + i]) +
                       " * " + core::to_string(AttrValue(scales[i])) + ") = " +
                       std::to_string(scales_output(x[2 + i], scales[i])) + ", not sizes[" + std::to_string(i) +
                       "] = " + std::to_string(sizes[i]));
  return Shape{x[0], x[1], sizes[0], sizes[1]};
}

// A scale for `in` -> `out` that the coordinate rule reads as given: (out + f) / in with f drawn in
// [0.1, 0.9] (away from out and out + 1, where floor(in * scale) in float32 could land on the other
// integer), rounded to float32 as an ONNX `scales` input holds it; 2 in 10 draws an exact power-of-two
// scale where one gives `out` (2, 0.5: the libraries' integer-factor paths with the scale given).
double draw_scale(int64_t in, int64_t out, core::Rng& rng) {
  for (const double p : {0.25, 0.5, 2.0, 4.0})
    if (static_cast<double>(in) * p == static_cast<double>(out) && rng.bernoulli(0.2)) return p;
  const double f = rng.uniform(0.1, 0.9);
  return static_cast<double>(static_cast<float>((static_cast<double>(out) + f) / static_cast<double>(in)));
}

// A crop [h_start, w_start, h_end, w_end] in steps of 1/32 (exact in float32, as ONNX's roi input holds
// it): starts in [-0.25, 0.625], spans in [0.125, 1.25], so a share of the outputs falls outside the input
// (extrapolation_value); 1 in 5 axes reversed (end before start, ONNX allows it: the crop read backwards).
std::vector<double> draw_roi(core::Rng& rng) {
  std::vector<double> roi(4);
  for (size_t i = 0; i < 2; ++i) {
    const double start = static_cast<double>(rng.randint(-8, 20)) / 32.0;
    const double end = start + static_cast<double>(rng.randint(4, 40)) / 32.0;
    const bool reversed = rng.bernoulli(0.2);
    roi[i] = reversed ? end : start;
    roi[i + 2] = reversed ? start : end;
  }
  return roi;
}

// Draws `sizes` for input [N, C, H, W] (half to twice each axis) and, 3 in 10 times, `scales` that give them.
void fit_sizes(const Shape& x, core::Rng& rng, int, Attrs& a) {
  if (x.size() != 4) return;
  std::vector<int64_t> sizes;
  for (size_t i = 2; i < 4; ++i)
    sizes.push_back(rng.randint(std::max<int64_t>(1, (x[i] + 1) / 2), std::max<int64_t>(2 * x[i], 1)));
  std::vector<double> scales;
  const auto ctm = a.find("coordinate_transformation_mode");
  const bool crop = ctm != a.end() && std::get<std::string>(ctm->second) == "tf_crop_and_resize";
  if (rng.bernoulli(0.3) && !crop)
    for (size_t i = 0; i < 2; ++i) scales.push_back(draw_scale(x[2 + i], sizes[i], rng));
  a["sizes"] = sizes;
  a["scales"] = scales;
}

// Sum of |w| over one axis's taps for any coordinate, an upper bound (each cubic weight is at most
// |a+2| + |a+3| + 1 within distance 1 and 48|a| beyond): the range rule's gain per axis.
double cubic_gain_bound(double a) { return 2.0 * (std::abs(a + 2.0) + std::abs(a + 3.0) + 1.0) + 96.0 * std::abs(a); }

const char* interp_name(Interp k) {
  return k == Interp::Linear ? "resize_bilinear" : k == Interp::Cubic ? "resize_bicubic" : "resize_nearest";
}

OpSpec make_resize(Interp kind) {
  OpSpec s;
  s.name = interp_name(kind);
  s.family = "resize";
  const std::string how =
      kind == Interp::Linear
          ? "linear: source coordinate clamped to [0, in-1], then linear interpolation"
          : kind == Interp::Cubic
                ? "cubic: the four cells floor(x)-1 .. floor(x)+2 (edge cells for indices outside the axis) "
                  "weighted by Keys' cubic kernel with coefficient cubic_coeff_a; exclude_outside drops the "
                  "cells outside and renormalises"
                : "nearest: source index rounded per nearest_mode, then clamped to [0, in-1]";
  s.doc = "Resize [N, C, H, W] to [N, C, sizes[0], sizes[1]] (ONNX Resize, mode " + how +
          "); scale = out/in per axis, or the given scales (sizes = floor(in * scale))";
  const std::vector<std::string> modes =
      kind != Interp::Nearest
          ? std::vector<std::string>{"half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"}
          : std::vector<std::string>{"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                                     "tf_half_pixel_for_nn"};
  const AttrSpec scales = keyed_when_given(
      AttrSpec{"scales", core::AttrKind::Floats, AttrValue(std::vector<double>{}),
               "[] (scale = out/in) or [sH, sW] > 0 with sizes = floor(in * scale): the scale every mode but "
               "align_corners divides the output coordinate by (ONNX Resize's scales input)",
               {}, 0x1p-20, 1e6, {AttrValue(std::vector<double>{0.0, 1.0}), AttrValue(std::vector<double>{1.0})}});
  std::vector<std::string> choices = modes;  // the sampler draws the crop mode apart (its roi with it)
  choices.push_back("tf_crop_and_resize");
  s.attrs = {
      ints_attr("sizes", {2, 2}, 1, kInf,
                {AttrValue(std::vector<int64_t>{0, 0}), AttrValue(std::vector<int64_t>{-1, 4}),
                 AttrValue(std::vector<int64_t>{4})},
                "output [oH, oW]"),
      scales,
      enum_attr("coordinate_transformation_mode", "half_pixel", choices, {"", "half-pixel"},
                "ONNX: half_pixel (x+0.5)/scale-0.5; asymmetric x/scale; align_corners x*(in-1)/(out-1) (0 if "
                "out=1); pytorch_half_pixel like half_pixel but 0 if out=1; tf_crop_and_resize start*(in-1) + "
                "x*(end-start)*(in-1)/(out-1) from roi, extrapolation_value outside [0, in-1]" +
                    std::string(kind == Interp::Nearest ? "; tf_half_pixel_for_nn (x+0.5)/scale" : "")),
      AttrSpec{"roi", core::AttrKind::Floats, AttrValue(std::vector<double>{}),
               "tf_crop_and_resize's crop [h_start, w_start, h_end, w_end] in normalised coordinates ([]: [0, 0, "
               "1, 1]); ignored by the other modes (ONNX Resize's roi input)",
               {}, -16.0, 16.0, {AttrValue(std::vector<double>{0.0, 1.0})}},
      float_attr("extrapolation_value", 0.0, -kInf, kInf, {AttrValue(std::nan(""))},
                 "tf_crop_and_resize: the output where a coordinate falls outside the input (ONNX)"),
  };
  if (kind == Interp::Nearest)
    s.attrs.push_back(enum_attr("nearest_mode", "round_prefer_floor",
                                {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}, {"round", ""},
                                "how the source coordinate is rounded to an index (ONNX)"));
  if (kind == Interp::Cubic) {
    s.attrs.push_back(float_attr("cubic_coeff_a", -0.75, -kInf, kInf, {AttrValue(std::nan(""))},
                                 "the cubic kernel's coefficient a (any float, ONNX; -0.75 PyTorch's, -0.5 "
                                 "TensorFlow's)"));
    s.attrs.push_back(int_enum_attr("exclude_outside", 0, {0, 1}, {2, -1},
                                    "1: cells outside the input weigh 0 and the rest are renormalised (ONNX)"));
  }
  s.tags = {"resize"};
  // Nearest copies elements, bilinear takes convex combinations; cubic weights go negative: each output is
  // within gain^2 times the largest input magnitude (unbounded with exclude_outside, whose renormalisation
  // divides by the in-range weights' sum). tf_crop_and_resize adds its extrapolation_value.
  s.range = [kind](const std::vector<Interval>& in, const std::vector<TensorType>& types, const Attrs& a) {
    std::vector<Interval> r = hull_of_inputs(in, types, a);
    if (kind == Interp::Cubic) {
      if (core::attr_i(a, "exclude_outside") != 0 || in.empty()) return std::vector<Interval>{Interval{}};
      const double g = cubic_gain_bound(core::attr_f(a, "cubic_coeff_a"));
      r = {mul(in[0], Interval{-g * g, g * g})};
    }
    if (core::attr_s(a, "coordinate_transformation_mode") == "tf_crop_and_resize") {
      const double e = core::attr_f(a, "extrapolation_value");
      r[0] = hull(r[0], Interval{e, e});
    }
    return r;
  };
  const std::string name = s.name;
  s.infer = [name](const std::vector<TensorType>& in, const Attrs& a) {
    const DType dt = common_float_dtype(in);
    return Signature{{TensorType{dt, resized_shape(name, in[0].shape, a)}}, {}};
  };
  s.forward = [name, kind](const Inputs& in, const Attrs& a) {
    const Tensor& x = *in[0];
    const Shape ys = resized_shape(name, x.shape(), a);
    const int64_t h = ys[2], w = ys[3], ih = x.dim(2), iw = x.dim(3);
    const auto ty = axis_taps(kind, a, ih, h, 0), tx = axis_taps(kind, a, iw, w, 1);
    Tensor y(DType::F64, ys);
    for (int64_t p = 0; p < ys[0] * ys[1]; ++p) {
      const double* xp = x.f64() + p * ih * iw;
      double* yp = y.f64() + p * h * w;
      for (int64_t i = 0; i < h; ++i) {
        const Tap& r = ty[static_cast<size_t>(i)];
        for (int64_t j = 0; j < w; ++j) {
          const Tap& c = tx[static_cast<size_t>(j)];
          // Zero-weight taps are skipped, not multiplied: a NaN or Inf in a cell the output does
          // not read must not reach it (0 * NaN), as the exact interpolation does not read it.
          // Each row of taps is interpolated along the width, then the rows along the height.
          // Cubic's weights go negative and sum to 1 with |w| summing to more: a float32
          // implementation's weighted sum of one large cell read by several taps may overflow
          // where the exact value fits, so each cubic pass is a stored sum of that magnitude.
          if (r.outside || c.outside) {
            yp[i * w + j] = core::attr_f(a, "extrapolation_value");
            continue;
          }
          auto dot = [kind](const Tap& t, auto&& value) {
            double acc = 0, largest = 0;
            bool first = true;
            for (int k = 0; k < t.n; ++k) {
              if (t.w[k] == 0) continue;
              const double x = value(t.i[k]);
              const double v = t.w[k] * x;
              acc = first ? v : acc + v;
              if (std::isfinite(x)) largest = std::max(largest, std::abs(x));  // an infinite cell is no overflow
              first = false;
            }
            return kind == Interp::Cubic ? stored_sum(acc, t.gain * largest, 4) : acc;
          };
          yp[i * w + j] = dot(r, [&](int64_t ri) { return dot(c, [&](int64_t ci) { return xp[ri * iw + ci]; }); });
        }
      }
    }
    return std::vector<Tensor>{y};
  };
  s.vjp = [name, kind](const Inputs& in, const Attrs& a, const std::vector<Tensor>&,
                       const std::vector<Tensor>& grad) {
    const Tensor& x = *in[0];
    const Shape ys = resized_shape(name, x.shape(), a);
    const int64_t h = ys[2], w = ys[3], ih = x.dim(2), iw = x.dim(3);
    const auto ty = axis_taps(kind, a, ih, h, 0), tx = axis_taps(kind, a, iw, w, 1);
    Tensor gx(DType::F64, x.shape());
    for (int64_t p = 0; p < ys[0] * ys[1]; ++p) {
      const double* gy = grad[0].f64() + p * h * w;
      double* gp = gx.f64() + p * ih * iw;
      for (int64_t i = 0; i < h; ++i) {
        const Tap& r = ty[static_cast<size_t>(i)];
        for (int64_t j = 0; j < w; ++j) {
          const Tap& c = tx[static_cast<size_t>(j)];
          const double g = gy[i * w + j];
          for (int ka = 0; ka < r.n; ++ka)
            for (int kb = 0; kb < c.n; ++kb)
              if (r.w[ka] * c.w[kb] != 0) gp[r.i[ka] * iw + c.i[kb]] += g * r.w[ka] * c.w[kb];
        }
      }
    }
    return std::vector<Tensor>{gx};
  };
  s.fit_attrs = fit_sizes;
  // A mutated size no longer matches its given scale: the node resizes to its sizes instead.
  s.repair_attrs = [](Attrs& a) {
    if (core::attr_floats(a, "scales").empty()) return false;
    a["scales"] = std::vector<double>{};
    return true;
  };
  s.sample = [kind, modes](core::Rng& rng) {
    Case c;
    c.inputs = {f64t(Shape{rng.randint(1, 2), rng.randint(1, 3), rng.randint(1, 6), rng.randint(1, 6)})};
    // Outputs from 1 (the align_corners / pytorch_half_pixel special case) through up- and downsampling.
    const std::vector<int64_t> sizes{rng.randint(1, 9), rng.randint(1, 9)};
    c.attrs["sizes"] = sizes;
    c.attrs["coordinate_transformation_mode"] = rng.pick(modes);
    if (kind == Interp::Nearest)
      c.attrs["nearest_mode"] =
          rng.pick(std::vector<std::string>{"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"});
    if (kind == Interp::Cubic) {
      // PyTorch's and TensorFlow's coefficients most often, else a two-decimal value in [-2, 0] (an
      // ONNX attribute is float32; a short decimal reads back as itself).
      const double a = rng.bernoulli(0.6) ? rng.pick(std::vector<double>{-0.75, -0.5})
                                          : std::round(rng.uniform(-200.0, 0.0)) / 100.0;
      c.attrs["cubic_coeff_a"] = a;
      c.attrs["exclude_outside"] = int64_t{rng.bernoulli(0.3) ? 1 : 0};
    }
    // Given scales last, so the draws above are those of the sizes-only sampler.
    if (rng.bernoulli(0.3)) {
      const Shape& x = c.inputs[0].shape;
      c.attrs["scales"] = std::vector<double>{draw_scale(x[2], sizes[0], rng), draw_scale(x[3], sizes[1], rng)};
    }
    // tf_crop_and_resize 15 in 100 (drawn apart, so the draws above stay those of the other modes).
    if (rng.bernoulli(0.15)) {
      c.attrs["coordinate_transformation_mode"] = std::string("tf_crop_and_resize");
      c.attrs["roi"] = draw_roi(rng);
      c.attrs["extrapolation_value"] = rng.pick(std::vector<double>{0.0, 0.0, 1.5, -2.0, 100.0});
      c.attrs.erase("scales");
    }
    c.gen = {InputGen{}};
    return c;
  };
  return s;
}

// ---- ONNX mapping: Resize with `sizes` [N, C, oH, oW].

// A node with given scales writes them (floor(in * scale) = sizes by the shape rule). Otherwise the forms
// are sizes | scales, where every scale out/in is exact in float32 and floor(in * scale) = out (an integer
// factor, or a power-of-two divisor). Before opset 13 roi and scales are required inputs (empty when unused).
void export_resize(OnnxExport& e) {
  // Resize-13 dropped this mode (its successors list half_pixel, pytorch_half_pixel, align_corners,
  // asymmetric, tf_crop_and_resize); an engine that still reads it there reads an out-of-spec model.
  if (e.opset() >= 13 && e.as("coordinate_transformation_mode") == "tf_half_pixel_for_nn")
    e.refuse("coordinate_transformation_mode tf_half_pixel_for_nn is Resize-11's only (removed at opset 13)");
  const Shape& x = e.in_shape();
  const auto& sizes = e.aints("sizes");
  auto exact = [](int64_t in, int64_t out) {
    if (out % in == 0) return true;
    if (in % out != 0) return false;
    const int64_t q = in / out;
    return (q & (q - 1)) == 0;
  };
  const std::vector<double> given = e.afs("scales");
  // tf_crop_and_resize: the roi input over all four axes [starts..., ends...]; its output length is
  // floor(in * (end - start) * scale) with scales, so it is written with sizes.
  const bool crop = e.as("coordinate_transformation_mode") == "tf_crop_and_resize";
  const bool can_scale = !crop && exact(x[2], sizes[0]) && exact(x[3], sizes[1]);
  const bool scales = !given.empty() || (can_scale && e.choose2("resize", "sizes", "scales"));
  std::vector<std::string> ins = {e.in(0)};
  const bool old = e.opset() < 13;
  auto empty = [&](core::DType dt, const std::string& what) { return e.constant(Tensor(dt, {0}), what); };
  if (crop) {
    std::vector<double> roi = e.afs("roi");
    if (roi.empty()) roi = {0.0, 0.0, 1.0, 1.0};
    Tensor r(e.dtype(), {8});
    for (int64_t i = 0; i < 8; ++i) r.set(i, i % 4 < 2 ? static_cast<double>(i / 4) : roi[(i / 4) * 2 + i % 4 - 2]);
    ins.push_back(e.constant(r, "roi"));
  } else {
    ins.push_back(old ? empty(e.dtype(), "roi") : "");
  }
  if (scales) {
    Tensor sc(core::DType::F32, {4});
    sc.set(0, 1.0);
    sc.set(1, 1.0);
    for (size_t i = 0; i < 2; ++i)
      sc.set(static_cast<int64_t>(2 + i),
             given.empty() ? static_cast<double>(sizes[i]) / static_cast<double>(x[2 + i]) : given[i]);
    ins.push_back(e.constant(sc, "scales"));
  } else {
    ins.push_back(old ? empty(core::DType::F32, "scales") : "");
    ins.push_back(e.ints({x[0], x[1], sizes[0], sizes[1]}, "sizes"));
  }
  OnnxNode& p = e.final_node("Resize", ins);
  p.set_s("coordinate_transformation_mode", e.as("coordinate_transformation_mode"));
  if (crop) p.set_f("extrapolation_value", e.af("extrapolation_value"));
  if (e.op() == "resize_nearest") {
    p.set_s("mode", "nearest");
    p.set_s("nearest_mode", e.as("nearest_mode"));
  } else if (e.op() == "resize_bicubic") {
    p.set_s("mode", "cubic");
    p.set_f("cubic_coeff_a", e.af("cubic_coeff_a"));
    p.set_i("exclude_outside", e.ai("exclude_outside"));
  } else {
    p.set_s("mode", "linear");
  }
}

// Resize → resize_nearest, resize_bilinear or resize_bicubic by its mode; scales become sizes (floor(in *
// scale)), and the node keeps them as its `scales` where a scale is not out/in.
void import_resize(OnnxImport& m) {
  if (m.opset() < 11) m.fail("Resize before opset 11 is not supported");
  const Shape x = m.type_of(m.in(0)).shape;
  if (x.size() != 4) m.fail("only [N, C, H, W] inputs are in the catalogue");
  std::vector<int64_t> sizes;
  std::vector<double> given;
  const std::string ctm = m.gets("coordinate_transformation_mode", "half_pixel");
  // tf_crop_and_resize's roi [starts..., ends...] over the four axes: N and C must be whole.
  std::vector<double> span(4, 1.0), roi;
  if (ctm == "tf_crop_and_resize") {
    if (!m.present(1)) m.fail("tf_crop_and_resize needs its roi input");
    const Tensor& r = m.need_constant(1, "roi");
    if (r.numel() != 8) m.fail("roi must have 8 entries for an input of rank 4");
    for (int i = 0; i < 2; ++i)
      if (r.get(i) != 0.0 || r.get(4 + i) != 1.0) m.fail("only H and W can be cropped");
    roi = {r.get(2), r.get(3), r.get(6), r.get(7)};
    span = {1.0, 1.0, roi[2] - roi[0], roi[3] - roi[1]};
  }
  if (m.present(3) && m.need_constant(3, "sizes").numel() > 0) {
    sizes = m.const_ints(3, "sizes");
  } else if (m.present(2) && m.need_constant(2, "scales").numel() > 0) {
    const Tensor& s = m.need_constant(2, "scales");
    if (s.numel() != 4) m.fail("scales must have 4 entries");
    bool exact = true;
    for (int i = 0; i < 4; ++i) {
      const double sc = s.get(i);
      const auto in = x[static_cast<size_t>(i)];
      // With a crop, floor(in * (end - start) * scale): the scale only sets the length (the coordinate
      // comes from the roi), so the node keeps sizes alone.
      const double f = sc * span[static_cast<size_t>(i)];
      const int64_t o = std::isfinite(f) && f > 0 ? scales_output(in, f) : 0;
      if (o < 1)
        m.fail("scale " + std::to_string(sc) + " gives an empty output for an input of size " + std::to_string(in));
      sizes.push_back(o);
      if (i >= 2) given.push_back(sc);
      exact = exact && static_cast<double>(o) / static_cast<double>(in) == sc;
    }
    if (exact || !roi.empty()) given.clear();
  } else {
    m.fail("needs scales or sizes");
  }
  if (sizes.size() != 4 || sizes[0] != x[0] || sizes[1] != x[1]) m.fail("only H and W can be resized");
  const std::string mode = m.gets("mode", "nearest");
  Attrs a;
  a["sizes"] = std::vector<int64_t>{sizes[2], sizes[3]};
  a["scales"] = given;
  a["coordinate_transformation_mode"] = ctm;
  if (!roi.empty()) {
    a["roi"] = roi;
    a["extrapolation_value"] = m.getf("extrapolation_value", 0.0);
  }
  if (mode == "nearest") {
    a["nearest_mode"] = m.gets("nearest_mode", "round_prefer_floor");
    m.emit_final("resize_nearest", {m.in(0)}, a);
    return;
  }
  if (mode == "linear") {
    m.emit_final("resize_bilinear", {m.in(0)}, a);
    return;
  }
  if (mode == "cubic") {
    a["cubic_coeff_a"] = m.getf("cubic_coeff_a", -0.75);
    a["exclude_outside"] = m.geti("exclude_outside", 0);
    m.emit_final("resize_bicubic", {m.in(0)}, a);
    return;
  }
  m.fail("mode '" + mode + "' is not in the catalogue");
}

}  // namespace

void register_resize(Registry& r) {
  OpSpec nearest = make_resize(Interp::Nearest);
  nearest.onnx_export = export_resize;
  nearest.onnx_import = {{{"Resize"}, import_resize}};  // both modes
  r.add(std::move(nearest));
  OpSpec bilinear = make_resize(Interp::Linear);
  bilinear.onnx_export = export_resize;
  r.add(std::move(bilinear));
  OpSpec bicubic = make_resize(Interp::Cubic);
  bicubic.onnx_export = export_resize;
  r.add(std::move(bicubic));
}

}  // namespace quorum::ops
