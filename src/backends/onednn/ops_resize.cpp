// resize_nearest / resize_bilinear on oneDNN's resampling primitive (forward and backward).
// oneDNN has one coordinate rule per algorithm, with F = out/in:
//   linear:  source x = (o + 0.5) / F - 0.5, clamped to [0, in - 1]  (ONNX half_pixel)
//   nearest: source index = floor((o + 0.5) / F)          (ONNX tf_half_pixel_for_nn + floor, or
//                                                          half_pixel + round_prefer_ceil)
// Every other ONNX coordinate_transformation_mode / nearest_mode pair is supported exactly when, for
// the node's sizes, it selects the same source coordinates on both axes; supports() checks that
// and otherwise refuses, naming the first position where the rules part.
#include <algorithm>
#include <cmath>

#include "backends/onednn/onednn_common.h"

namespace quorum::backends::onednn {
namespace {

// ONNX source coordinate of output position o.
double onnx_coord(const std::string& mode, int64_t o, int64_t in, int64_t out) {
  const auto od = static_cast<double>(o), ind = static_cast<double>(in), outd = static_cast<double>(out);
  if (mode == "asymmetric") return od * ind / outd;
  if (mode == "align_corners") return out == 1 ? 0.0 : od * (ind - 1.0) / (outd - 1.0);
  if (mode == "tf_half_pixel_for_nn") return (2.0 * od + 1.0) * ind / (2.0 * outd);
  if (mode == "pytorch_half_pixel" && out == 1) return 0.0;
  return (2.0 * od + 1.0) * ind / (2.0 * outd) - 0.5;
}

int64_t onnx_round(const std::string& mode, double x) {
  if (mode == "floor") return static_cast<int64_t>(std::floor(x));
  if (mode == "ceil") return static_cast<int64_t>(std::ceil(x));
  const double fl = std::floor(x);
  if (x - fl == 0.5) return static_cast<int64_t>(mode == "round_prefer_ceil" ? fl + 1.0 : fl);
  return static_cast<int64_t>(std::round(x));
}

// The first output position (along one axis) where ONNX and oneDNN pick different sources, or -1.
int64_t first_mismatch(bool linear, const core::Attrs& a, int64_t in, int64_t out) {
  const std::string& ctm = core::attr_s(a, "coordinate_transformation_mode");
  for (int64_t o = 0; o < out; ++o) {
    if (linear) {
      const double hi = static_cast<double>(in - 1);
      const double want = std::clamp(onnx_coord(ctm, o, in, out), 0.0, hi);
      const double got = std::clamp(onnx_coord("half_pixel", o, in, out), 0.0, hi);
      if (std::abs(want - got) > 1e-9) return o;
    } else {
      const int64_t want =
          std::clamp<int64_t>(onnx_round(core::attr_s(a, "nearest_mode"), onnx_coord(ctm, o, in, out)), 0, in - 1);
      const int64_t got = (2 * o + 1) * in / (2 * out);  // floor((o + 0.5) * in / out), exactly
      if (want != got) return o;
    }
  }
  return -1;
}

Support resize_support(const ir::Graph& g, const ir::Node& n) {
  const bool linear = n.op == "resize_bilinear";
  const Shape& x = g.types.at(n.inputs[0]).shape;
  const Shape& y = g.types.at(n.outputs[0]).shape;
  for (size_t axis = 2; axis < 4; ++axis) {
    const int64_t o = first_mismatch(linear, n.attrs, x[axis], y[axis]);
    if (o < 0) continue;
    std::string mode = core::attr_s(n.attrs, "coordinate_transformation_mode");
    if (!linear) mode += " with nearest_mode " + core::attr_s(n.attrs, "nearest_mode");
    return Support::no(std::string("oneDNN resampling_") + (linear ? "linear" : "nearest") +
                       " has one coordinate rule (" + (linear ? "half_pixel" : "floor((o + 0.5) * in / out)") + "); " +
                       mode + " picks a different " + "source for output " + std::to_string(o) + " of axis " +
                       std::to_string(axis) + " (" + std::to_string(x[axis]) + " -> " + std::to_string(y[axis]) + ")");
  }
  return Support::yes();
}

class ResizeKernel : public Kernel {
 public:
  ResizeKernel(const ir::Graph& g, const ir::Node& n) : Kernel(g, n) {
    alg_ = n.op == "resize_bilinear" ? algorithm::resampling_linear : algorithm::resampling_nearest;
    src_ = plain_md(dims_of(in_shape(0)));
    dst_ = plain_md(dims_of(out_shape(0)));
    key_ = Key() << static_cast<int>(alg_) << src_ << dst_;
    fwd(prop_kind::forward_inference);
  }

  void forward(Env& env, bool training) override {
    const auto& f = fwd(training ? prop_kind::forward_training : prop_kind::forward_inference);
    Buf y(out_shape(0));
    run(f.prim, {{DNNL_ARG_SRC, mem(src_, in(env, 0).ptr())}, {DNNL_ARG_DST, mem(dst_, y.ptr())}});
    set_out(env, 0, std::move(y));
  }

  void backward(Env& env) override {
    const auto& f = fwd(prop_kind::forward_training);
    const auto& b = cached<dnnl::resampling_backward::primitive_desc>(key_, [&] {
      dnnl::resampling_backward::desc d(alg_, src_, dst_);
      return dnnl::resampling_backward::primitive_desc(d, cpu_engine(), f.pd);
    });
    Buf gx(in_shape(0));
    run(b.prim, {{DNNL_ARG_DIFF_DST, mem(dst_, gout(env, 0)->ptr())}, {DNNL_ARG_DIFF_SRC, mem(src_, gx.ptr())}});
    add_gin(env, 0, std::move(gx));
  }

 private:
  const Cached<dnnl::resampling_forward::primitive_desc>& fwd(prop_kind prop) {
    return cached<dnnl::resampling_forward::primitive_desc>(Key() << key_ << static_cast<int>(prop), [&] {
      dnnl::resampling_forward::desc d(prop, alg_, src_, dst_);
      return dnnl::resampling_forward::primitive_desc(d, cpu_engine());
    });
  }

  algorithm alg_;
  memory::desc src_, dst_;
  std::string key_;
};

}  // namespace

void register_resize(OpTable& t) {
  t["resize_nearest"] = OpEntry{maker<ResizeKernel>(), resize_support, {}};
  t["resize_bilinear"] = OpEntry{maker<ResizeKernel>(), resize_support, {}};
}

}  // namespace quorum::backends::onednn
