// resize_nearest / resize_bilinear on oneDNN's resampling primitive (forward and backward).
// oneDNN has one coordinate rule per algorithm, with F = out/in:
//   linear:  source x = (o + 0.5) / F - 0.5, clamped to [0, in - 1]  (ONNX half_pixel)
//   nearest: source index = floor((o + 0.5) / F)          (ONNX tf_half_pixel_for_nn + floor, or
//                                                          half_pixel + round_prefer_ceil)
// Every other ONNX coordinate_transformation_mode / nearest_mode pair is supported exactly when, for
// the node's sizes, it selects the same source coordinates on both axes; the lowering's
// resize_support (lower.cpp, through node_support) checks that, for supports() and the reproducer
// writer alike.
#include "backends/onednn/onednn_sink.h"

namespace quorum::backends::onednn {
namespace {

class ResizeKernel : public Kernel {
 public:
  ResizeKernel(const ir::Graph& g, const ir::Node& n) : Kernel(g, n) {
    geo_ = lw::resample_geo(n.op, in_shape(0), out_shape(0));
    alg_ = to_dnnl(geo_.alg);
    src_ = plain_md(geo_.src);
    dst_ = plain_md(geo_.dst);
    key_ = resample_key(geo_);
    fwd(prop_kind::forward_inference);
  }

  void forward(Env& env, bool training) override {
    Saved saved;
    lowered_forward(env, node_, in_shapes_, out_shapes_, training, saved);
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
  const Cached<dnnl::resampling_forward::primitive_desc>& fwd(prop_kind prop) { return resample_fwd_pd(geo_, prop); }

  lw::ResampleGeo geo_;
  algorithm alg_;
  memory::desc src_, dst_;
  std::string key_;
};

}  // namespace

void register_resize(OpTable& t) {
  t["resize_nearest"] = OpEntry{maker<ResizeKernel>(), {}, {}};
  t["resize_bilinear"] = OpEntry{maker<ResizeKernel>(), {}, {}};
}

}  // namespace quorum::backends::onednn
