// libtorch mappings of the spatial families: convolutions (conv), window and global pooling (pool)
// and resizing (resize). ATen takes one symmetric pad per axis and a pooling pad of at most half the
// kernel; ONNX allows asymmetric pads, pads up to kernel-1 and SAME_* auto_pad. Those cases pad the
// input explicitly (zeros for conv and average, -inf for max) and call ATen with zero padding, then
// crop any window ATen adds that ONNX drops. Resize maps ONNX coordinate modes onto ATen's three
// kernels per axis and refuses the modes ATen cannot express.
#include <ATen/ops/adaptive_avg_pool1d.h>
#include <ATen/ops/adaptive_avg_pool2d.h>
#include <ATen/ops/adaptive_avg_pool3d.h>
#include <ATen/ops/adaptive_max_pool1d.h>
#include <ATen/ops/adaptive_max_pool2d.h>
#include <ATen/ops/adaptive_max_pool3d.h>
#include <ATen/ops/avg_pool1d.h>
#include <ATen/ops/avg_pool2d.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/div.h>
#include <ATen/ops/max_pool1d.h>
#include <ATen/ops/max_pool2d.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/_upsample_nearest_exact2d.h>
#include <ATen/ops/upsample_bilinear2d.h>
#include <ATen/ops/upsample_nearest2d.h>

#include <algorithm>
#include <limits>

#include "backends/torch/torch_ops.h"
#include "ops/kernel_util.h"

namespace quorum::backends::torch {
namespace {

using Ints = std::vector<int64_t>;

// Begin/end pads per spatial axis after resolving ONNX auto_pad. `eff_kernel` is the dilated
// kernel extent per axis.
using ops::Pads;

Pads resolve_pads(const NodeContext& c, const Ints& eff_kernel, const Ints& strides) {
  return ops::resolve_pads(c.s("auto_pad"), c.ints("pads"), c.input_shape(0), eff_kernel, strides);
}

// Crops the spatial axes of y (from axis 2) to the graph's output shape: ATen keeps ceil-mode
// windows that start in explicitly added right padding, ONNX drops them.
at::Tensor crop_to(const at::Tensor& y, const core::Shape& want) {
  at::Tensor out = y;
  for (int64_t d = 2; d < y.dim(); ++d) {
    const int64_t w = want[static_cast<size_t>(d)];
    if (out.size(d) < w)
      throw std::runtime_error("libtorch produced " + std::to_string(out.size(d)) + " cells along axis " +
                               std::to_string(d) + ", expected " + std::to_string(w));
    if (out.size(d) > w) out = out.narrow(d, 0, w);
  }
  return out;
}

// ---- conv ----------------------------------------------------------------------------------------

at::Tensor optional_bias(const NodeContext& c, const TensorList& in) {
  return c.i("bias") == 1 ? in.at(2) : at::Tensor();
}

TensorList run_conv(const NodeContext& c, const TensorList& in) {
  const Ints& k = c.ints("kernel_shape");
  const Ints& strides = c.ints("strides");
  const Ints& dilations = c.ints("dilations");
  Ints eff(k.size());
  for (size_t i = 0; i < k.size(); ++i) eff[i] = dilations[i] * (k[i] - 1) + 1;
  const Pads p = resolve_pads(c, eff, strides);
  at::Tensor x = in[0];
  Ints padding = p.begin;
  if (!p.symmetric()) {
    // ATen pads both sides alike: pad asymmetric inputs with zeros first.
    x = at::constant_pad_nd(x, torch_pad_order(p.begin, p.end), 0.0);
    padding.assign(k.size(), 0);
  }
  const Ints no_output_padding(k.size(), 0);
  return {at::convolution(x, in[1], optional_bias(c, in), strides, padding, dilations, false, no_output_padding,
                          c.i("group"))};
}

TensorList run_conv_transpose(const NodeContext& c, const TensorList& in) {
  const Ints& pads = c.ints("pads");
  const Ints begin{pads[0], pads[1]}, end{pads[2], pads[3]};
  // ATen's transposed convolution removes `padding` from both ends; an asymmetric pair removes
  // the smaller one there and crops the rest from the larger side afterwards.
  const Ints common{std::min(begin[0], end[0]), std::min(begin[1], end[1])};
  at::Tensor y = at::convolution(in[0], in[1], optional_bias(c, in), c.ints("strides"), common, c.ints("dilations"),
                                 true, c.ints("output_padding"), c.i("group"));
  for (int64_t d = 0; d < 2; ++d) {
    const auto ud = static_cast<size_t>(d);
    const int64_t crop_begin = begin[ud] - common[ud], crop_end = end[ud] - common[ud];
    if (crop_begin + crop_end > 0) y = y.narrow(d + 2, crop_begin, y.size(d + 2) - crop_begin - crop_end);
  }
  return {y};
}

// ---- window pools --------------------------------------------------------------------------------

struct PoolGeom {
  Ints kernel, strides;
  Pads pads;
  bool ceil_mode = false;
  // ATen's own padding handles the pads: symmetric and at most half the kernel on every axis.
  bool native_pads() const {
    if (!pads.symmetric()) return false;
    for (size_t i = 0; i < kernel.size(); ++i)
      if (pads.begin[i] > kernel[i] / 2) return false;
    return true;
  }
};

PoolGeom pool_geometry(const NodeContext& c) {
  PoolGeom g;
  g.kernel = c.ints("kernel_shape");
  g.strides = c.ints("strides");
  g.pads = resolve_pads(c, g.kernel, g.strides);
  // ONNX: ceil_mode has no effect unless the pads are explicit.
  g.ceil_mode = c.s("auto_pad") == "NOTSET" && c.i("ceil_mode") == 1;
  return g;
}

TensorList run_max_pool(const NodeContext& c, const TensorList& in) {
  const PoolGeom g = pool_geometry(c);
  const bool one_d = g.kernel.size() == 1;
  at::Tensor x = in[0];
  Ints padding = g.pads.begin;
  if (!g.native_pads()) {
    // Padded cells must never win: pad with -inf and let ATen pool the padded input.
    x = at::constant_pad_nd(x, torch_pad_order(g.pads.begin, g.pads.end), -std::numeric_limits<double>::infinity());
    padding.assign(g.kernel.size(), 0);
  }
  const Ints dilation(g.kernel.size(), 1);
  at::Tensor y = one_d ? at::max_pool1d(x, g.kernel, g.strides, padding, dilation, g.ceil_mode)
                       : at::max_pool2d(x, g.kernel, g.strides, padding, dilation, g.ceil_mode);
  return {crop_to(y, c.output_shape())};
}

TensorList run_avg_pool(const NodeContext& c, const TensorList& in) {
  const PoolGeom g = pool_geometry(c);
  const bool one_d = g.kernel.size() == 1;
  const bool include_pad = c.i("count_include_pad") == 1;
  if (g.native_pads()) {
    at::Tensor y = one_d ? at::avg_pool1d(in[0], g.kernel, g.strides, g.pads.begin, g.ceil_mode, include_pad)
                         : at::avg_pool2d(in[0], g.kernel, g.strides, g.pads.begin, g.ceil_mode, include_pad);
    return {crop_to(y, c.output_shape())};
  }
  const Ints torch_pads = torch_pad_order(g.pads.begin, g.pads.end);
  const Ints zero(g.kernel.size(), 0);
  if (include_pad) {
    // Zero cells added explicitly are counted like ATen counts its own padding; the divisor still
    // stops at the padded input's end, as in ONNX.
    at::Tensor xp = at::constant_pad_nd(in[0], torch_pads, 0.0);
    at::Tensor y = one_d ? at::avg_pool1d(xp, g.kernel, g.strides, zero, g.ceil_mode, true)
                         : at::avg_pool2d(xp, g.kernel, g.strides, zero, g.ceil_mode, true);
    return {crop_to(y, c.output_shape())};
  }
  // Excluding asymmetric pads from the divisor: window sums of the zero-padded input divided by
  // window sums of a zero-padded mask of ones (avg_pool2d with divisor 1 gives both sums). The
  // 1-D case runs as a 2-D pool over [N, C, 1, L].
  at::Tensor x = one_d ? in[0].unsqueeze(2) : in[0];
  Ints k2 = g.kernel, s2 = g.strides, p2 = torch_pads;
  if (one_d) {
    k2.insert(k2.begin(), 1);
    s2.insert(s2.begin(), 1);
    p2.insert(p2.end(), {0, 0});
  }
  const Ints zero2(2, 0);
  std::vector<int64_t> plane{1, 1};
  for (int64_t d = 2; d < x.dim(); ++d) plane.push_back(x.size(d));
  const at::Tensor mask = at::ones(plane, x.options());
  const at::Tensor sums = at::avg_pool2d(at::constant_pad_nd(x, p2, 0.0), k2, s2, zero2, g.ceil_mode, true, 1);
  const at::Tensor counts = at::avg_pool2d(at::constant_pad_nd(mask, p2, 0.0), k2, s2, zero2, g.ceil_mode, true, 1);
  // Windows that start in the right padding hold no input cell (count 0); they are cropped below,
  // but a 0/0 there would send NaN back through the division, so those counts become 1.
  at::Tensor y = at::div(sums, counts.clamp_min(1.0));
  if (one_d) y = y.squeeze(2);
  return {crop_to(y, c.output_shape())};
}

// ---- global pools --------------------------------------------------------------------------------

TensorList run_global_pool(const NodeContext&, const TensorList& in, bool is_max) {
  const at::Tensor& x = in[0];
  const int64_t spatial = x.dim() - 2;
  const Ints ones(static_cast<size_t>(spatial), 1);
  if (is_max) {
    if (spatial == 1) return {std::get<0>(at::adaptive_max_pool1d(x, ones))};
    if (spatial == 2) return {std::get<0>(at::adaptive_max_pool2d(x, ones))};
    return {std::get<0>(at::adaptive_max_pool3d(x, ones))};
  }
  if (spatial == 1) return {at::adaptive_avg_pool1d(x, ones)};
  if (spatial == 2) return {at::adaptive_avg_pool2d(x, ones)};
  return {at::adaptive_avg_pool3d(x, ones)};
}

// ---- resize --------------------------------------------------------------------------------------

// ATen's resize kernels per axis: upsample_nearest2d ("nearest": floor(o * in/out)),
// _upsample_nearest_exact2d ("nearest-exact": floor((o + 0.5) * in/out)) and upsample_bilinear2d
// with align_corners false (half-pixel) or true.
enum class Kernel { None, Nearest, NearestExact, BilinearHalfPixel, BilinearAlignCorners, Any };

struct AxisChoice {
  Kernel kernel = Kernel::None;
  std::string why;  // when None
};

// Whether half_pixel's source coordinate (o + 0.5) * in/out - 0.5 lands exactly half-way between
// two cells for some output o (where ONNX's round_prefer_floor and ATen's round-half-up differ).
bool half_pixel_has_ties(int64_t in, int64_t out) {
  for (int64_t o = 0; o < out; ++o)
    if (((2 * o + 1) * in) % (2 * out) == 0) return true;
  return false;
}

AxisChoice nearest_axis(const std::string& ctm, const std::string& nm, int64_t in, int64_t out) {
  // One input cell, or an unchanged length with an integral coordinate: every mode picks cell o.
  if (in == 1 || (in == out && ctm != "tf_half_pixel_for_nn")) return {Kernel::Any, ""};
  if ((ctm == "align_corners" || ctm == "pytorch_half_pixel") && out == 1) return {Kernel::Nearest, ""};  // x = 0
  if (ctm == "asymmetric") {
    if (nm == "floor") return {Kernel::Nearest, ""};
    return {Kernel::None, "libtorch's nearest upsampling rounds the asymmetric coordinate down only; nearest_mode '" +
                              nm + "' has no libtorch equivalent"};
  }
  if (ctm == "tf_half_pixel_for_nn") {
    if (nm == "floor") return {Kernel::NearestExact, ""};  // floor((o + 0.5) * in/out)
    return {Kernel::None, "tf_half_pixel_for_nn with nearest_mode '" + nm + "' has no libtorch equivalent"};
  }
  if (ctm == "half_pixel" || ctm == "pytorch_half_pixel") {
    // nearest-exact rounds the half-pixel coordinate half-up, i.e. round_prefer_ceil.
    if (nm == "round_prefer_ceil") return {Kernel::NearestExact, ""};
    if (nm == "round_prefer_floor" && !half_pixel_has_ties(in, out)) return {Kernel::NearestExact, ""};
    if (nm == "round_prefer_floor")
      return {Kernel::None, "half_pixel with round_prefer_floor hits exact half-way coordinates for " + std::to_string(in) +
                                " -> " + std::to_string(out) + "; libtorch's nearest-exact rounds them up"};
    return {Kernel::None, ctm + " with nearest_mode '" + nm + "' has no libtorch equivalent (nearest-exact rounds)"};
  }
  return {Kernel::None, "libtorch's nearest upsampling has no '" + ctm + "' coordinate mode"};
}

AxisChoice bilinear_axis(const std::string& ctm, int64_t in, int64_t out) {
  if (in == 1) return {Kernel::Any, ""};
  if (ctm == "align_corners") return {Kernel::BilinearAlignCorners, ""};  // and 0 when out = 1, like ONNX
  if (ctm == "half_pixel") return {Kernel::BilinearHalfPixel, ""};
  if (ctm == "pytorch_half_pixel")
    return {out > 1 ? Kernel::BilinearHalfPixel : Kernel::BilinearAlignCorners, ""};  // out = 1 reads cell 0
  if (ctm == "asymmetric") {
    if (in == out) return {Kernel::Any, ""};
    if (out == 1) return {Kernel::BilinearAlignCorners, ""};
    return {Kernel::None, "libtorch's bilinear upsampling has no asymmetric (x / scale) coordinate mode"};
  }
  return {Kernel::None, "libtorch's bilinear upsampling has no '" + ctm + "' coordinate mode"};
}

// The kernel per axis (H, W) of a resize node.
std::pair<AxisChoice, AxisChoice> resize_plan(const NodeContext& c, bool bilinear) {
  const std::string& ctm = c.s("coordinate_transformation_mode");
  const core::Shape& x = c.input_shape(0);
  const Ints& sizes = c.ints("sizes");
  auto axis = [&](size_t i) {
    return bilinear ? bilinear_axis(ctm, x[i + 2], sizes[i]) : nearest_axis(ctm, c.s("nearest_mode"), x[i + 2], sizes[i]);
  };
  AxisChoice h = axis(0), w = axis(1);
  // "Any" follows the other axis, so one ATen call covers both where possible.
  const Kernel fallback = bilinear ? Kernel::BilinearHalfPixel : Kernel::Nearest;
  if (h.kernel == Kernel::Any) h.kernel = w.kernel == Kernel::Any || w.kernel == Kernel::None ? fallback : w.kernel;
  if (w.kernel == Kernel::Any) w.kernel = h.kernel == Kernel::None ? fallback : h.kernel;
  return {h, w};
}

Support resize_support(const NodeContext& c, bool bilinear) {
  const auto [h, w] = resize_plan(c, bilinear);
  if (h.kernel == Kernel::None) return Support::no(h.why + " (height)");
  if (w.kernel == Kernel::None) return Support::no(w.why + " (width)");
  return Support::yes();
}

at::Tensor resize_with(Kernel k, const at::Tensor& x, const Ints& size) {
  const at::IntArrayRef out(size);
  switch (k) {
    case Kernel::Nearest: return at::upsample_nearest2d(x, out);
    case Kernel::NearestExact: return at::_upsample_nearest_exact2d(x, out);
    case Kernel::BilinearAlignCorners: return at::upsample_bilinear2d(x, out, true);
    default: return at::upsample_bilinear2d(x, out, false);
  }
}

TensorList run_resize(const NodeContext& c, const TensorList& in, bool bilinear) {
  const auto [h, w] = resize_plan(c, bilinear);
  const Ints& sizes = c.ints("sizes");
  if (h.kernel == w.kernel) return {resize_with(h.kernel, in[0], sizes)};
  // Different kernels per axis: resizing is separable, so resize the height, then the width
  // (a length kept unchanged is the identity in every ATen kernel).
  const at::Tensor tall = resize_with(h.kernel, in[0], {sizes[0], in[0].size(3)});
  return {resize_with(w.kernel, tall, sizes)};
}

}  // namespace

void add_spatial_ops(OpTable& t) {
  for (const char* name : {"conv1d", "conv2d", "conv3d"}) t[name] = OpImpl{nullptr, run_conv};
  t["conv_transpose2d"] = OpImpl{nullptr, run_conv_transpose};
  for (const char* name : {"max_pool1d", "max_pool2d"}) t[name] = OpImpl{nullptr, run_max_pool};
  for (const char* name : {"avg_pool1d", "avg_pool2d"}) t[name] = OpImpl{nullptr, run_avg_pool};
  t["global_max_pool"] = OpImpl{nullptr, [](const NodeContext& c, const TensorList& in) {
                                  return run_global_pool(c, in, true);
                                }};
  t["global_avg_pool"] = OpImpl{nullptr, [](const NodeContext& c, const TensorList& in) {
                                  return run_global_pool(c, in, false);
                                }};
  for (bool bilinear : {false, true}) {
    t[bilinear ? "resize_bilinear" : "resize_nearest"] =
        OpImpl{[bilinear](const NodeContext& c) { return resize_support(c, bilinear); },
               [bilinear](const NodeContext& c, const TensorList& in) { return run_resize(c, in, bilinear); }};
  }
}

}  // namespace quorum::backends::torch
