// Batch normalization, layer normalization and LRN on their oneDNN primitives, with the library's
// backward kernels.
//  - batch_norm training=0 uses use_global_stats with the mean/var parameters; the reference also
//    differentiates with respect to mean and var, which oneDNN does not: those two gradients are
//    derived from the library's diff_scale / diff_shift with eltwise and binary primitives
//    (dmean = -scale*rstd*dshift, dvar = -0.5*scale*rstd^2*dscale). training=1 normalises with
//    batch statistics (biased variance, as in the reference) and mean/var get zero gradient.
//  - layer_norm normalises over axis..end: oneDNN normalises the last dim, so X is viewed as
//    [rows, prod(dims[axis:])] and scale/shift are flattened to match.
//  - lrn maps to lrn_across_channels, whose alpha is divided by the window size like ONNX's.
#include "backends/onednn/onednn_common.h"

namespace quorum::backends::onednn {
namespace {

using dnnl::normalization_flags;

class BatchNormKernel : public Kernel {
 public:
  BatchNormKernel(const ir::Graph& g, const ir::Node& n) : Kernel(g, n) {
    eps_ = static_cast<float>(core::attr_f(attrs(), "epsilon"));
    batch_stats_ = core::attr_i(attrs(), "training") == 1;
    data_ = plain_md(dims_of(in_shape(0)));
    chan_ = plain_md({in_shape(0)[1]});
    flags_ = normalization_flags::use_scale | normalization_flags::use_shift;
    if (!batch_stats_) flags_ = flags_ | normalization_flags::use_global_stats;
    key_ = Key() << data_ << eps_ << static_cast<unsigned>(flags_);
    fwd(prop_kind::forward_inference);
  }

  void forward(Env& env, bool training) override {
    const auto& f = fwd(training ? prop_kind::forward_training : prop_kind::forward_inference);
    Buf y(out_shape(0));
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(data_, in(env, 0).ptr())},
                                         {DNNL_ARG_DST, mem(data_, y.ptr())},
                                         {DNNL_ARG_SCALE, mem(chan_, in(env, 1).ptr())},
                                         {DNNL_ARG_SHIFT, mem(chan_, in(env, 2).ptr())}};
    if (batch_stats_) {
      mean_ = Buf(in_shape(1));
      var_ = Buf(in_shape(1));
      args[DNNL_ARG_MEAN] = mem(chan_, mean_.ptr());
      args[DNNL_ARG_VARIANCE] = mem(chan_, var_.ptr());
    } else {
      args[DNNL_ARG_MEAN] = mem(chan_, in(env, 3).ptr());
      args[DNNL_ARG_VARIANCE] = mem(chan_, in(env, 4).ptr());
    }
    run(f.prim, args);
    set_out(env, 0, std::move(y));
  }

  void backward(Env& env) override {
    const auto& f = fwd(prop_kind::forward_training);
    const auto& b = cached<dnnl::batch_normalization_backward::primitive_desc>(key_, [&] {
      dnnl::batch_normalization_backward::desc d(prop_kind::backward, data_, data_, eps_, flags_);
      return dnnl::batch_normalization_backward::primitive_desc(d, cpu_engine(), f.pd);
    });
    const Buf& mean = batch_stats_ ? mean_ : in(env, 3);
    const Buf& var = batch_stats_ ? var_ : in(env, 4);
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
  const Cached<dnnl::batch_normalization_forward::primitive_desc>& fwd(prop_kind prop) {
    return cached<dnnl::batch_normalization_forward::primitive_desc>(Key() << key_ << static_cast<int>(prop), [&] {
      dnnl::batch_normalization_forward::desc d(prop, data_, eps_, flags_);
      return dnnl::batch_normalization_forward::primitive_desc(d, cpu_engine());
    });
  }

  float eps_ = 0;
  bool batch_stats_ = false;
  memory::desc data_, chan_;
  normalization_flags flags_ = normalization_flags::none;
  std::string key_;
  Buf mean_, var_;
};

class LayerNormKernel : public Kernel {
 public:
  LayerNormKernel(const ir::Graph& g, const ir::Node& n) : Kernel(g, n) {
    const Shape& x = in_shape(0);
    const int axis = ops::norm_axis(core::attr_i(attrs(), "axis"), static_cast<int>(x.size()));
    int64_t rows = 1, k = 1;
    for (int d = 0; d < static_cast<int>(x.size()); ++d) (d < axis ? rows : k) *= x[static_cast<size_t>(d)];
    eps_ = static_cast<float>(core::attr_f(attrs(), "epsilon"));
    data_ = plain_md({rows, k});
    stat_ = plain_md({rows});
    param_ = plain_md({k});
    rows_ = rows;
    key_ = Key() << data_ << eps_;
    fwd(prop_kind::forward_training);
  }

  void forward(Env& env, bool) override {
    // Always the training flavour: backward needs the statistics and the reference has no
    // stored-statistics mode for layer norm.
    const auto& f = fwd(prop_kind::forward_training);
    Buf y(out_shape(0));
    mean_ = Buf({rows_});
    var_ = Buf({rows_});
    run(f.prim, {{DNNL_ARG_SRC, mem(data_, in(env, 0).ptr())},
                 {DNNL_ARG_DST, mem(data_, y.ptr())},
                 {DNNL_ARG_SCALE, mem(param_, in(env, 1).ptr())},
                 {DNNL_ARG_SHIFT, mem(param_, in(env, 2).ptr())},
                 {DNNL_ARG_MEAN, mem(stat_, mean_.ptr())},
                 {DNNL_ARG_VARIANCE, mem(stat_, var_.ptr())}});
    set_out(env, 0, std::move(y));
  }

  void backward(Env& env) override {
    const auto& f = fwd(prop_kind::forward_training);
    const auto& b = cached<dnnl::layer_normalization_backward::primitive_desc>(key_, [&] {
      dnnl::layer_normalization_backward::desc d(prop_kind::backward, data_, data_, stat_, eps_, flags());
      return dnnl::layer_normalization_backward::primitive_desc(d, cpu_engine(), f.pd);
    });
    Buf gx(in_shape(0)), gscale(in_shape(1)), gshift(in_shape(2));
    run(b.prim, {{DNNL_ARG_SRC, mem(data_, in(env, 0).ptr())},
                 {DNNL_ARG_MEAN, mem(stat_, mean_.ptr())},
                 {DNNL_ARG_VARIANCE, mem(stat_, var_.ptr())},
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

  const Cached<dnnl::layer_normalization_forward::primitive_desc>& fwd(prop_kind prop) {
    return cached<dnnl::layer_normalization_forward::primitive_desc>(Key() << key_ << static_cast<int>(prop), [&] {
      dnnl::layer_normalization_forward::desc d(prop, data_, stat_, eps_, flags());
      return dnnl::layer_normalization_forward::primitive_desc(d, cpu_engine());
    });
  }

  float eps_ = 0;
  int64_t rows_ = 1;
  memory::desc data_, stat_, param_;
  std::string key_;
  Buf mean_, var_;
};

class LrnKernel : public Kernel {
 public:
  LrnKernel(const ir::Graph& g, const ir::Node& n) : Kernel(g, n) {
    size_ = core::attr_i(attrs(), "size");
    alpha_ = static_cast<float>(core::attr_f(attrs(), "alpha"));
    beta_ = static_cast<float>(core::attr_f(attrs(), "beta"));
    bias_ = static_cast<float>(core::attr_f(attrs(), "bias"));
    data_ = plain_md(dims_of(in_shape(0)));
    key_ = Key() << data_ << size_ << alpha_ << beta_ << bias_;
    fwd(prop_kind::forward_inference);
  }

  void forward(Env& env, bool training) override {
    const auto& f = fwd(training ? prop_kind::forward_training : prop_kind::forward_inference);
    Buf y(out_shape(0));
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(data_, in(env, 0).ptr())},
                                         {DNNL_ARG_DST, mem(data_, y.ptr())}};
    workspace_ = memory();
    if (training && f.pd.workspace_desc().get_size() > 0) {
      workspace_ = memory(f.pd.workspace_desc(), cpu_engine());
      args[DNNL_ARG_WORKSPACE] = workspace_;
    }
    run(f.prim, args);
    set_out(env, 0, std::move(y));
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
    if (b.pd.workspace_desc().get_size() > 0) args[DNNL_ARG_WORKSPACE] = workspace_;
    run(b.prim, args);
    add_gin(env, 0, std::move(gx));
  }

 private:
  const Cached<dnnl::lrn_forward::primitive_desc>& fwd(prop_kind prop) {
    return cached<dnnl::lrn_forward::primitive_desc>(Key() << key_ << static_cast<int>(prop), [&] {
      dnnl::lrn_forward::desc d(prop, algorithm::lrn_across_channels, data_, size_, alpha_, beta_, bias_);
      return dnnl::lrn_forward::primitive_desc(d, cpu_engine());
    });
  }

  int64_t size_ = 1;
  float alpha_ = 0, beta_ = 0, bias_ = 1;
  memory::desc data_;
  std::string key_;
  memory workspace_;
};

}  // namespace

void register_norm(OpTable& t) {
  t["batch_norm"] = OpEntry{maker<BatchNormKernel>(), {}, {}};
  t["layer_norm"] = OpEntry{maker<LayerNormKernel>(), {}, {}};
  t["lrn"] = OpEntry{maker<LrnKernel>(), {}, {}};
}

}  // namespace quorum::backends::onednn
