// Spatial resizing of [N, C, H, W] to [N, C, oH, oW] (ONNX Resize with `sizes`, nearest and linear
// modes). Both axes are separable: each output row/column maps to source taps (one for nearest, two
// weighted ones for bilinear) computed once per axis, and the forward pass and its VJP walk the
// same taps, so the gradient is exactly the transpose of the forward map.
#include <algorithm>
#include <cmath>

#include "ops/kernel_util.h"
#include "ops/onnx_map.h"
#include "ops/registry.h"

namespace quorum::ops {
namespace {

// One output index's source taps along an axis: value = w0 * x[i0] + w1 * x[i1].
struct Tap {
  int64_t i0 = 0, i1 = 0;
  double w0 = 1.0, w1 = 0.0;
};

// `lane`: the axis (0 height, 1 width), so the spread's trials round the two axes' coordinates to
// opposite sides too (ops::stored_sum).
std::vector<Tap> axis_taps(bool bilinear, const Attrs& a, int64_t in, int64_t out, int lane) {
  const std::string& ctm = core::attr_s(a, "coordinate_transformation_mode");
  std::vector<Tap> taps(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    const double x = resize_source_coord(ctm, o, in, out);
    Tap& t = taps[static_cast<size_t>(o)];
    if (bilinear) {
      // ONNX linear: clamp the coordinate into the input, then interpolate its two neighbours.
      // The coordinate, a few float32 operations on the output index in a float32 implementation,
      // is marked stored (ops::stored_sum); the result is continuous in it.
      const double c = std::clamp(stored_sum(x, std::abs(x) + 0.5, 3, lane), 0.0, static_cast<double>(in - 1));
      t.i0 = static_cast<int64_t>(std::floor(c));
      t.i1 = std::min(t.i0 + 1, in - 1);
      t.w1 = c - static_cast<double>(t.i0);
      t.w0 = 1.0 - t.w1;
    } else {
      // The same stored coordinate: on an exact integer (floor, ceil) or half-way point (the round
      // modes), a float32 implementation's coordinate (o * float(in / out)) may land on either
      // side, and so may a float64 one whose scale was rounded (libtorch's upsample_nearest).
      const double c = stored_sum(x, std::abs(x) + 0.5, 3, lane);
      t.i0 = t.i1 = std::clamp<int64_t>(resize_round_nearest(core::attr_s(a, "nearest_mode"), c), 0, in - 1);
    }
  }
  return taps;
}

Shape resized_shape(const std::string& op, const Shape& x, const Attrs& a) {
  QUORUM_REQUIRE(x.size() == 4, op + " expects input of rank 4 [N, C, H, W], got rank " + std::to_string(x.size()));
  QUORUM_REQUIRE(x[2] >= 1 && x[3] >= 1, op + " requires a non-empty input plane, got " + core::to_string(x));
  const auto& sizes = core::attr_ints(a, "sizes");
  QUORUM_REQUIRE(sizes.size() == 2, "sizes " + core::to_string(AttrValue(sizes)) + " must have 2 entries [oH, oW]");
  QUORUM_REQUIRE(sizes[0] >= 1 && sizes[1] >= 1,
                 "sizes entries must be >= 1, got " + core::to_string(AttrValue(sizes)));
  return Shape{x[0], x[1], sizes[0], sizes[1]};
}

OpSpec make_resize(bool bilinear) {
  OpSpec s;
  s.name = bilinear ? "resize_bilinear" : "resize_nearest";
  s.family = "resize";
  s.doc = std::string("Resize [N, C, H, W] to [N, C, sizes[0], sizes[1]] (ONNX Resize, mode ") +
          (bilinear ? "linear: source coordinate clamped to [0, in-1], then linear interpolation"
                    : "nearest: source index rounded per nearest_mode, then clamped to [0, in-1]") +
          "; scale = out/in per axis";
  const std::vector<std::string> modes =
      bilinear ? std::vector<std::string>{"half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"}
               : std::vector<std::string>{"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                                          "tf_half_pixel_for_nn"};
  s.attrs = {
      ints_attr("sizes", {2, 2}, 1, kInf,
                {AttrValue(std::vector<int64_t>{0, 0}), AttrValue(std::vector<int64_t>{-1, 4}),
                 AttrValue(std::vector<int64_t>{4})},
                "output [oH, oW]"),
      enum_attr("coordinate_transformation_mode", "half_pixel", modes, {"", "half-pixel"},
                "ONNX: half_pixel (x+0.5)/scale-0.5; asymmetric x/scale; align_corners x*(in-1)/(out-1) (0 if "
                "out=1); pytorch_half_pixel like half_pixel but 0 if out=1" +
                    std::string(bilinear ? "" : "; tf_half_pixel_for_nn (x+0.5)/scale")),
  };
  if (!bilinear)
    s.attrs.push_back(enum_attr("nearest_mode", "round_prefer_floor",
                                {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}, {"round", ""},
                                "how the source coordinate is rounded to an index (ONNX)"));
  s.tags = {"resize"};
  s.range = hull_of_inputs;  // nearest copies elements, bilinear takes convex combinations
  const std::string name = s.name;
  s.infer = [name](const std::vector<TensorType>& in, const Attrs& a) {
    const DType dt = common_float_dtype(in);
    return Signature{{TensorType{dt, resized_shape(name, in[0].shape, a)}}, {}};
  };
  s.forward = [name, bilinear](const Inputs& in, const Attrs& a) {
    const Tensor& x = *in[0];
    const Shape ys = resized_shape(name, x.shape(), a);
    const int64_t h = ys[2], w = ys[3], ih = x.dim(2), iw = x.dim(3);
    const auto ty = axis_taps(bilinear, a, ih, h, 0), tx = axis_taps(bilinear, a, iw, w, 1);
    Tensor y(DType::F64, ys);
    for (int64_t p = 0; p < ys[0] * ys[1]; ++p) {
      const double* xp = x.f64() + p * ih * iw;
      double* yp = y.f64() + p * h * w;
      for (int64_t i = 0; i < h; ++i) {
        const Tap& r = ty[static_cast<size_t>(i)];
        for (int64_t j = 0; j < w; ++j) {
          const Tap& c = tx[static_cast<size_t>(j)];
          // Zero-weight taps are skipped, not multiplied: a NaN or Inf in a cell the output does
          // not read must not reach it (0 * NaN), as it reaches no library's result.
          auto tap = [](double wt, double v) { return wt == 0 ? 0.0 : wt * v; };
          const double top = tap(c.w0, xp[r.i0 * iw + c.i0]) + tap(c.w1, xp[r.i0 * iw + c.i1]);
          const double bottom = tap(c.w0, xp[r.i1 * iw + c.i0]) + tap(c.w1, xp[r.i1 * iw + c.i1]);
          yp[i * w + j] = tap(r.w0, top) + tap(r.w1, bottom);
        }
      }
    }
    return std::vector<Tensor>{y};
  };
  s.vjp = [name, bilinear](const Inputs& in, const Attrs& a, const std::vector<Tensor>&,
                           const std::vector<Tensor>& grad) {
    const Tensor& x = *in[0];
    const Shape ys = resized_shape(name, x.shape(), a);
    const int64_t h = ys[2], w = ys[3], ih = x.dim(2), iw = x.dim(3);
    const auto ty = axis_taps(bilinear, a, ih, h, 0), tx = axis_taps(bilinear, a, iw, w, 1);
    Tensor gx(DType::F64, x.shape());
    for (int64_t p = 0; p < ys[0] * ys[1]; ++p) {
      const double* gy = grad[0].f64() + p * h * w;
      double* gp = gx.f64() + p * ih * iw;
      for (int64_t i = 0; i < h; ++i) {
        const Tap& r = ty[static_cast<size_t>(i)];
        for (int64_t j = 0; j < w; ++j) {
          const Tap& c = tx[static_cast<size_t>(j)];
          const double g = gy[i * w + j];
          // For nearest every tap has i0 == i1 with weights (1, 0): the zero-weight taps add nothing.
          if (r.w0 * c.w0 != 0) gp[r.i0 * iw + c.i0] += g * r.w0 * c.w0;
          if (r.w0 * c.w1 != 0) gp[r.i0 * iw + c.i1] += g * r.w0 * c.w1;
          if (r.w1 * c.w0 != 0) gp[r.i1 * iw + c.i0] += g * r.w1 * c.w0;
          if (r.w1 * c.w1 != 0) gp[r.i1 * iw + c.i1] += g * r.w1 * c.w1;
        }
      }
    }
    return std::vector<Tensor>{gx};
  };
  s.sample = [bilinear, modes](core::Rng& rng) {
    Case c;
    c.inputs = {f64t(Shape{rng.randint(1, 2), rng.randint(1, 3), rng.randint(1, 6), rng.randint(1, 6)})};
    // Outputs from 1 (the align_corners / pytorch_half_pixel special case) through up- and downsampling.
    c.attrs["sizes"] = std::vector<int64_t>{rng.randint(1, 9), rng.randint(1, 9)};
    c.attrs["coordinate_transformation_mode"] = rng.pick(modes);
    if (!bilinear)
      c.attrs["nearest_mode"] =
          rng.pick(std::vector<std::string>{"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"});
    c.gen = {InputGen{}};
    return c;
  };
  return s;
}

// ---- ONNX mapping: Resize with `sizes` [N, C, oH, oW].

// Forms: sizes | scales, where every scale out/in is exact in float32 and floor(in * scale) = out
// (an integer factor, or a power-of-two divisor). Before opset 13 roi and scales are required
// inputs (empty when unused).
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
  const bool can_scale = exact(x[2], sizes[0]) && exact(x[3], sizes[1]);
  const bool scales = can_scale && e.choose2("resize", "sizes", "scales");
  std::vector<std::string> ins = {e.in(0)};
  const bool old = e.opset() < 13;
  auto empty = [&](core::DType dt, const std::string& what) { return e.constant(Tensor(dt, {0}), what); };
  ins.push_back(old ? empty(e.dtype(), "roi") : "");
  if (scales) {
    Tensor sc(core::DType::F32, {4});
    sc.set(0, 1.0);
    sc.set(1, 1.0);
    for (size_t i = 0; i < 2; ++i)
      sc.set(static_cast<int64_t>(2 + i), static_cast<double>(sizes[i]) / static_cast<double>(x[2 + i]));
    ins.push_back(e.constant(sc, "scales"));
  } else {
    ins.push_back(old ? empty(core::DType::F32, "scales") : "");
    ins.push_back(e.ints({x[0], x[1], sizes[0], sizes[1]}, "sizes"));
  }
  OnnxNode& p = e.final_node("Resize", ins);
  p.set_s("coordinate_transformation_mode", e.as("coordinate_transformation_mode"));
  if (e.op() == "resize_nearest") {
    p.set_s("mode", "nearest");
    p.set_s("nearest_mode", e.as("nearest_mode"));
  } else {
    p.set_s("mode", "linear");
  }
}

// Resize → resize_nearest or resize_bilinear by its mode; scales become sizes when exact.
void import_resize(OnnxImport& m) {
  if (m.opset() < 11) m.fail("Resize before opset 11 is not supported");
  const Shape x = m.type_of(m.in(0)).shape;
  if (x.size() != 4) m.fail("only [N, C, H, W] inputs are in the catalogue");
  std::vector<int64_t> sizes;
  if (m.present(3) && m.need_constant(3, "sizes").numel() > 0) {
    sizes = m.const_ints(3, "sizes");
  } else if (m.present(2) && m.need_constant(2, "scales").numel() > 0) {
    const Tensor& s = m.need_constant(2, "scales");
    if (s.numel() != 4) m.fail("scales must have 4 entries");
    for (int i = 0; i < 4; ++i) {
      const double sc = s.get(i);
      const auto o = static_cast<int64_t>(std::floor(static_cast<double>(x[static_cast<size_t>(i)]) * sc));
      if (o < 1 || std::abs(static_cast<double>(o) / static_cast<double>(x[static_cast<size_t>(i)]) - sc) > 1e-6 * sc)
        m.fail("scale " + std::to_string(sc) + " is not output/input for an input of size " +
               std::to_string(x[static_cast<size_t>(i)]) + " (the catalogue resizes to sizes)");
      sizes.push_back(o);
    }
  } else {
    m.fail("needs scales or sizes");
  }
  if (sizes.size() != 4 || sizes[0] != x[0] || sizes[1] != x[1]) m.fail("only H and W can be resized");
  const std::string mode = m.gets("mode", "nearest");
  Attrs a;
  a["sizes"] = std::vector<int64_t>{sizes[2], sizes[3]};
  a["coordinate_transformation_mode"] = m.gets("coordinate_transformation_mode", "half_pixel");
  if (mode == "nearest") {
    a["nearest_mode"] = m.gets("nearest_mode", "round_prefer_floor");
    m.emit_final("resize_nearest", {m.in(0)}, a);
    return;
  }
  if (mode == "linear") {
    m.emit_final("resize_bilinear", {m.in(0)}, a);
    return;
  }
  m.fail("mode '" + mode + "' is not in the catalogue");
}

}  // namespace

void register_resize(Registry& r) {
  OpSpec nearest = make_resize(false);
  nearest.onnx_export = export_resize;
  nearest.onnx_import = {{{"Resize"}, import_resize}};  // both modes
  r.add(std::move(nearest));
  OpSpec bilinear = make_resize(true);
  bilinear.onnx_export = export_resize;
  r.add(std::move(bilinear));
}

}  // namespace quorum::ops
