// Batch normalization, layer normalization and LRN on their oneDNN primitives, with the library's
// backward kernels. The geometry is the lowering's (lower.cpp), and the forward runs through it.
//  - batch_norm training=0 uses use_global_stats with the mean/var parameters; the reference also
//    differentiates with respect to mean and var, which oneDNN does not: those two gradients are
//    derived from the library's diff_scale / diff_shift with eltwise and binary primitives
//    (dmean = -scale*rstd*dshift, dvar = -0.5*scale*rstd^2*dscale). training=1 normalises with
//    batch statistics (biased variance, as in the reference) and mean/var get zero gradient.
//  - layer_norm normalises over axis..end: oneDNN normalises the last dim, so X is viewed as
//    [rows, prod(dims[axis:])] and scale/shift are flattened to match.
//  - lrn maps to lrn_across_channels, whose alpha is divided by the window size like ONNX's.
#include "backends/onednn/onednn_sink.h"

namespace quorum::backends::onednn {
namespace {

using dnnl::normalization_flags;

class BatchNormKernel : public Kernel {
 public:
  BatchNormKernel(const ir::Graph& g, const ir::Node& n) : Kernel(g, n) {
    geo_ = lw::bn_geo(in_shape(0), attrs());
    eps_ = geo_.eps;
    batch_stats_ = geo_.batch_stats;
    data_ = plain_md(geo_.src);
    chan_ = plain_md({in_shape(0)[1]});
    flags_ = bn_flags(geo_);
    key_ = bn_key(geo_);
    fwd(prop_kind::forward_inference);
  }

  void forward(Env& env, bool training) override {
    lowered_forward(env, node_, in_shapes_, out_shapes_, training, saved_);
  }

  void backward(Env& env) override {
    const auto& f = fwd(prop_kind::forward_training);
    const auto& b = cached<dnnl::batch_normalization_backward::primitive_desc>(key_, [&] {
      dnnl::batch_normalization_backward::desc d(prop_kind::backward, data_, data_, eps_, flags_);
      return dnnl::batch_normalization_backward::primitive_desc(d, cpu_engine(), f.pd);
    });
    const Buf& mean = batch_stats_ ? saved_.mean : in(env, 3);
    const Buf& var = batch_stats_ ? saved_.var : in(env, 4);
    Buf gx(in_shape(0)), gscale(in_shape(1)), gshift(in_shape(2));
    run(b.prim, {{DNNL_ARG_SRC, mem(data_, in(env, 0).ptr())},
                 {DNNL_ARG_MEAN, mem(chan_, mean.ptr())},
                 {DNNL_ARG_VARIANCE, mem(chan_, var.ptr())},
                 {DNNL_ARG_DIFF_DST, mem(data_, gout(env, 0)->ptr())},
                 {DNNL_ARG_SCALE, mem(chan_, in(env, 1).ptr())},
                 {DNNL_ARG_SHIFT, mem(chan_, in(env, 2).ptr())},  // unused by the math, required by 2.6
                 {DNNL_ARG_DIFF_SRC, mem(data_, gx.ptr())},
                 {DNNL_ARG_DIFF_SCALE, mem(chan_, gscale.ptr())},
                 {DNNL_ARG_DIFF_SHIFT, mem(chan_, gshift.ptr())}});
    Buf gmean(in_shape(3)), gvar(in_shape(4));
    if (!batch_stats_) {
      const Buf& scale = in(env, 1);
      const Buf t = linear(var, 1, eps_);
      const Buf rstd = eltwise(algorithm::eltwise_pow, 1, -0.5f, t);
      const Buf rstd2 = eltwise(algorithm::eltwise_pow, 1, -1, t);
      gmean = linear(binary(algorithm::binary_mul, binary(algorithm::binary_mul, scale, rstd), gshift), -1);
      gvar = linear(binary(algorithm::binary_mul, binary(algorithm::binary_mul, scale, rstd2), gscale), -0.5f);
    }
    add_gin(env, 0, std::move(gx));
    add_gin(env, 1, std::move(gscale));
    add_gin(env, 2, std::move(gshift));
    add_gin(env, 3, std::move(gmean));
    add_gin(env, 4, std::move(gvar));
  }

 private:
  const Cached<dnnl::batch_normalization_forward::primitive_desc>& fwd(prop_kind prop) { return bn_fwd_pd(geo_, prop); }

  lw::BnGeo geo_;
  Saved saved_;
  float eps_ = 0;
  bool batch_stats_ = false;
  memory::desc data_, chan_;
  normalization_flags flags_ = normalization_flags::none;
  std::string key_;
};

class LayerNormKernel : public Kernel {
 public:
  LayerNormKernel(const ir::Graph& g, const ir::Node& n) : Kernel(g, n) {
    geo_ = lw::ln_geo(in_shape(0), attrs());
    eps_ = geo_.eps;
    data_ = plain_md({geo_.rows, geo_.k});
    stat_ = plain_md({geo_.rows});
    param_ = plain_md({geo_.k});
    key_ = ln_key(geo_);
    fwd(prop_kind::forward_training);
  }

  void forward(Env& env, bool training) override {
    lowered_forward(env, node_, in_shapes_, out_shapes_, training, saved_);
  }

  void backward(Env& env) override {
    const auto& f = fwd(prop_kind::forward_training);
    const auto& b = cached<dnnl::layer_normalization_backward::primitive_desc>(key_, [&] {
      dnnl::layer_normalization_backward::desc d(prop_kind::backward, data_, data_, stat_, eps_, flags());
      return dnnl::layer_normalization_backward::primitive_desc(d, cpu_engine(), f.pd);
    });
    Buf gx(in_shape(0)), gscale(in_shape(1)), gshift(in_shape(2));
    run(b.prim, {{DNNL_ARG_SRC, mem(data_, in(env, 0).ptr())},
                 {DNNL_ARG_MEAN, mem(stat_, saved_.mean.ptr())},
                 {DNNL_ARG_VARIANCE, mem(stat_, saved_.var.ptr())},
                 {DNNL_ARG_DIFF_DST, mem(data_, gout(env, 0)->ptr())},
                 {DNNL_ARG_SCALE, mem(param_, in(env, 1).ptr())},
                 {DNNL_ARG_SHIFT, mem(param_, in(env, 2).ptr())},  // unused by the math, required by 2.6
                 {DNNL_ARG_DIFF_SRC, mem(data_, gx.ptr())},
                 {DNNL_ARG_DIFF_SCALE, mem(param_, gscale.ptr())},
                 {DNNL_ARG_DIFF_SHIFT, mem(param_, gshift.ptr())}});
    add_gin(env, 0, std::move(gx));
    add_gin(env, 1, std::move(gscale));
    add_gin(env, 2, std::move(gshift));
  }

 private:
  static normalization_flags flags() { return normalization_flags::use_scale | normalization_flags::use_shift; }

  const Cached<dnnl::layer_normalization_forward::primitive_desc>& fwd(prop_kind prop) { return ln_fwd_pd(geo_, prop); }

  lw::LnGeo geo_;
  Saved saved_;
  float eps_ = 0;
  memory::desc data_, stat_, param_;
  std::string key_;
};

class LrnKernel : public Kernel {
 public:
  LrnKernel(const ir::Graph& g, const ir::Node& n) : Kernel(g, n) {
    geo_ = lw::lrn_geo(in_shape(0), attrs());
    size_ = geo_.size;
    alpha_ = geo_.alpha;
    beta_ = geo_.beta;
    bias_ = geo_.bias;
    data_ = plain_md(geo_.src);
    key_ = lrn_key(geo_);
    fwd(prop_kind::forward_inference);
  }

  void forward(Env& env, bool training) override {
    lowered_forward(env, node_, in_shapes_, out_shapes_, training, saved_);
  }

  void backward(Env& env) override {
    const auto& f = fwd(prop_kind::forward_training);
    const auto& b = cached<dnnl::lrn_backward::primitive_desc>(key_, [&] {
      dnnl::lrn_backward::desc d(algorithm::lrn_across_channels, data_, data_, size_, alpha_, beta_, bias_);
      return dnnl::lrn_backward::primitive_desc(d, cpu_engine(), f.pd);
    });
    Buf gx(in_shape(0));
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(data_, in(env, 0).ptr())},
                                         {DNNL_ARG_DIFF_DST, mem(data_, gout(env, 0)->ptr())},
                                         {DNNL_ARG_DIFF_SRC, mem(data_, gx.ptr())}};
    if (b.pd.workspace_desc().get_size() > 0) args[DNNL_ARG_WORKSPACE] = saved_.workspace;
    run(b.prim, args);
    add_gin(env, 0, std::move(gx));
  }

 private:
  const Cached<dnnl::lrn_forward::primitive_desc>& fwd(prop_kind prop) { return lrn_fwd_pd(geo_, prop); }

  lw::LrnGeo geo_;
  Saved saved_;
  int64_t size_ = 1;
  float alpha_ = 0, beta_ = 0, bias_ = 1;
  memory::desc data_;
  std::string key_;
};

}  // namespace

void register_norm(OpTable& t) {
  t["batch_norm"] = OpEntry{maker<BatchNormKernel>(), {}, {}};
  t["layer_norm"] = OpEntry{maker<LayerNormKernel>(), {}, {}};
  t["lrn"] = OpEntry{maker<LrnKernel>(), {}, {}};
}

}  // namespace quorum::backends::onednn
