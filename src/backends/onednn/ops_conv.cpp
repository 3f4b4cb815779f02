// Convolutions (conv1d/2d/3d) and transposed convolution (conv_transpose2d) on oneDNN's
// convolution and deconvolution primitives, forward, backward-data and backward-weights.
// Quirks handled here: oneDNN dilation counts from 0; right padding is explicit (so ONNX asymmetric
// and SAME_* pads map directly); ONNX output_padding becomes a smaller (possibly negative) right
// padding of the deconvolution, and where oneDNN's limit pr > -stride stops that, the trailing rows
// no tap reaches are left out of the primitive and get only the bias; ONNX's transposed weight
// [C, OC/g, k...] is described with strides.
// The primitives get format_tag::any so oneDNN picks its optimised (jit) layouts; reorders
// convert from and to the plain user buffers.
#include "backends/onednn/onednn_sink.h"

namespace quorum::backends::onednn {
namespace {

// Primitive types of one convolution flavour.
struct ConvTypes {
  using Fwd = dnnl::convolution_forward;
  using BwdData = dnnl::convolution_backward_data;
  using BwdWeights = dnnl::convolution_backward_weights;
  static constexpr algorithm alg = algorithm::convolution_direct;
  static constexpr bool transposed = false;
};
struct DeconvTypes {
  using Fwd = dnnl::deconvolution_forward;
  using BwdData = dnnl::deconvolution_backward_data;
  using BwdWeights = dnnl::deconvolution_backward_weights;
  static constexpr algorithm alg = algorithm::deconvolution_direct;
  static constexpr bool transposed = true;
};

template <class T>
class ConvKernel : public Kernel {
 public:
  ConvKernel(const ir::Graph& g, const ir::Node& n) : Kernel(g, n) {
    geo_ = lw::conv_geo(n.op, in_shape(0), out_shape(0), attrs());
    src_dims_ = geo_.src;
    dst_dims_ = geo_.dst;
    user_dst_md_ = conv_user_dst_md(geo_);
    prim_bias_ = geo_.prim_bias();
    weight_md_ = conv_weight_md(geo_);
    key_ = conv_key(geo_);
    fwd(prop_kind::forward_inference);  // builds the descriptor now: a refusal is a conversion error
  }

  void forward(Env& env, bool training) override {
    Saved saved;
    lowered_forward(env, node_, in_shapes_, out_shapes_, training, saved);
  }

  void backward(Env& env) override {
    const Buf* gy = gout(env, 0);
    const auto& f = fwd(prop_kind::forward_training);
    const memory user_gy = mem(user_dst_md_, gy->ptr());
    {
      const auto& bd = cached<typename T::BwdData::primitive_desc>(key_, [&] {
        typename T::BwdData::desc d(T::alg, any_md(src_dims_), any_md(weight_md_.dims()), any_md(dst_dims_),
                                    geo_.strides, geo_.dil, geo_.pad_l, geo_.pad_r);
        return typename T::BwdData::primitive_desc(d, cpu_engine(), f.pd);
      });
      Buf gx(in_shape(0));
      const memory user_gx = mem(plain_md(src_dims_), gx.ptr());
      const memory diff_src =
          bd.pd.diff_src_desc() == user_gx.get_desc() ? user_gx : memory(bd.pd.diff_src_desc(), cpu_engine());
      run(bd.prim, {{DNNL_ARG_DIFF_DST, to_layout(user_gy, bd.pd.diff_dst_desc())},
                    {DNNL_ARG_WEIGHTS, to_layout(mem(weight_md_, in(env, 1).ptr()), bd.pd.weights_desc())},
                    {DNNL_ARG_DIFF_SRC, diff_src}});
      if (diff_src != user_gx) reorder_into(diff_src, user_gx);
      add_gin(env, 0, std::move(gx));
    }
    const auto& bw = cached<typename T::BwdWeights::primitive_desc>(key_, [&] {
      const Dims wd = weight_md_.dims();
      auto d = prim_bias_
                   ? typename T::BwdWeights::desc(T::alg, any_md(src_dims_), any_md(wd), plain_md({geo_.oc}),
                                                  any_md(dst_dims_), geo_.strides, geo_.dil, geo_.pad_l, geo_.pad_r)
                   : typename T::BwdWeights::desc(T::alg, any_md(src_dims_), any_md(wd), any_md(dst_dims_),
                                                  geo_.strides, geo_.dil, geo_.pad_l, geo_.pad_r);
      return typename T::BwdWeights::primitive_desc(d, cpu_engine(), f.pd);
    });
    Buf gw(in_shape(1));
    const memory user_gw = mem(weight_md_, gw.ptr());
    const memory diff_w =
        bw.pd.diff_weights_desc() == user_gw.get_desc() ? user_gw : memory(bw.pd.diff_weights_desc(), cpu_engine());
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, to_layout(mem(plain_md(src_dims_), in(env, 0).ptr()), bw.pd.src_desc())},
        {DNNL_ARG_DIFF_DST, to_layout(user_gy, bw.pd.diff_dst_desc())},
        {DNNL_ARG_DIFF_WEIGHTS, diff_w}};
    Buf gb;
    if (prim_bias_) {
      gb = Buf(in_shape(2));
      args[DNNL_ARG_DIFF_BIAS] = mem(plain_md({geo_.oc}), gb.ptr());
    } else if (geo_.bias) {
      gb = sum_to(*gy, bias_shape()).reshaped(in_shape(2));
    }
    run(bw.prim, args);
    if (diff_w != user_gw) reorder_into(diff_w, user_gw);
    add_gin(env, 1, std::move(gw));
    if (geo_.bias) add_gin(env, 2, std::move(gb));
  }

 private:
  const Cached<typename T::Fwd::primitive_desc>& fwd(prop_kind prop) {
    return conv_fwd_pd<typename T::Fwd>(geo_, prop);
  }

  Shape bias_shape() const {
    Shape s(out_shape(0).size(), 1);
    s[1] = geo_.oc;
    return s;
  }

  lw::ConvGeo geo_;
  Dims src_dims_, dst_dims_;  // dst: the computed extent
  memory::desc user_dst_md_, weight_md_;
  bool prim_bias_ = true;
  std::string key_;
};

}  // namespace

void register_conv(OpTable& t) {
  for (const char* name : {"conv1d", "conv2d", "conv3d"}) t[name] = OpEntry{maker<ConvKernel<ConvTypes>>(), {}, {}};
  t["conv_transpose2d"] = OpEntry{maker<ConvKernel<DeconvTypes>>(), {}, {}};
}

}  // namespace quorum::backends::onednn
