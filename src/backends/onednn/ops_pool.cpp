// Window pools (max/avg, 1d/2d, ONNX pads, auto_pad, ceil_mode, count_include_pad) and global
// pools on oneDNN's pooling_v2 primitive. The geometry (explicit right padding for ceil_mode, the
// rescale of windows reaching into it) is the lowering's (lower.cpp: pool_geo), and the forward
// runs through it; max pooling in training mode keeps the primitive's workspace (the argmax) for
// backward, and the rescale y = pool(x) * factor sends gy * factor into the pool's backward.
#include "backends/onednn/onednn_sink.h"

namespace quorum::backends::onednn {
namespace {

class PoolKernel : public Kernel {
 public:
  PoolKernel(const ir::Graph& g, const ir::Node& n) : Kernel(g, n) {
    geo_ = lw::pool_geo(n.op, in_shape(0), out_shape(0), attrs());
    if (!geo_.factor.empty()) {
      factor_ = Buf(geo_.factor_shape);
      factor_.data = geo_.factor;
    }
    pool_fwd_pd(geo_, prop_kind::forward_inference);
  }

  void forward(Env& env, bool training) override {
    lowered_forward(env, node_, in_shapes_, out_shapes_, training, saved_);
  }

  void backward(Env& env) override {
    const auto& f = pool_fwd_pd(geo_, prop_kind::forward_training);
    const memory::desc src = plain_md(geo_.src), dst = plain_md(geo_.dst);
    const auto& b = cached<dnnl::pooling_v2_backward::primitive_desc>(pool_key(geo_), [&] {
      const Dims dil(geo_.kernel.size(), 0);
      dnnl::pooling_v2_backward::desc d(to_dnnl(geo_.alg), src, dst, geo_.strides, geo_.kernel, dil, geo_.pad_l,
                                        geo_.pad_r);
      return dnnl::pooling_v2_backward::primitive_desc(d, cpu_engine(), f.pd);
    });
    // The rescale is y = pool(x) * factor, so the pool sees gy * factor.
    const Buf gy = factor_.numel() > 0 ? binary(algorithm::binary_mul, *gout(env, 0), factor_) : *gout(env, 0);
    Buf gx(in_shape(0));
    std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, mem(dst, gy.ptr())},
                                         {DNNL_ARG_DIFF_SRC, mem(src, gx.ptr())}};
    if (b.pd.workspace_desc().get_size() > 0) args[DNNL_ARG_WORKSPACE] = saved_.workspace;
    run(b.prim, args);
    add_gin(env, 0, std::move(gx));
  }

 private:
  lw::PoolGeo geo_;
  Buf factor_;
  Saved saved_;
};

}  // namespace

void register_pool(OpTable& t) {
  for (const char* name :
       {"max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "global_max_pool", "global_avg_pool"})
    t[name] = OpEntry{maker<PoolKernel>(), {}, {}};
}

}  // namespace quorum::backends::onednn
