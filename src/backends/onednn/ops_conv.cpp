// Convolutions (conv1d/2d/3d) and transposed convolution (conv_transpose2d) on oneDNN's
// convolution and deconvolution primitives, forward, backward-data and backward-weights.
// Quirks handled here: oneDNN dilation counts from 0; right padding is explicit (so ONNX asymmetric
// and SAME_* pads map directly); ONNX output_padding becomes a smaller (possibly negative) right
// padding of the deconvolution, and where oneDNN's limit pr > -stride stops that, the trailing rows
// no tap reaches are left out of the primitive and get only the bias; ONNX's transposed weight
// [C, OC/g, k...] is described with strides.
// The primitives get format_tag::any so oneDNN picks its optimised (jit) layouts; reorders
// convert from and to the plain user buffers.
#include <tuple>

#include "backends/onednn/onednn_common.h"
#include "ops/kernel_util.h"

namespace quorum::backends::onednn {
namespace {

struct ConvGeo {
  int64_t n = 0, c = 0, oc = 0, group = 1;
  Dims in_sp, out_sp, kernel, strides, dil, pad_l, pad_r;
  Dims computed_sp;  // output extent the primitive computes (< out_sp: see truncated)
  bool bias = true;
  bool truncated = false;  // trailing output rows no kernel tap reaches, left to the bias alone
};

ConvGeo conv_geo(const Shape& x, const Shape& y, const core::Attrs& a, bool transposed) {
  ConvGeo g;
  const size_t r = x.size() - 2;
  g.n = x[0];
  g.c = x[1];
  g.oc = core::attr_i(a, "out_channels");
  g.group = core::attr_i(a, "group");
  g.bias = core::attr_i(a, "bias") == 1;
  g.in_sp.assign(x.begin() + 2, x.end());
  g.out_sp.assign(y.begin() + 2, y.end());
  g.kernel = core::attr_ints(a, "kernel_shape");
  g.strides = core::attr_ints(a, "strides");
  const auto& dilations = core::attr_ints(a, "dilations");
  const auto& pads = core::attr_ints(a, "pads");
  const std::string auto_pad = transposed ? "NOTSET" : core::attr_s(a, "auto_pad");
  for (size_t i = 0; i < r; ++i) {
    g.dil.push_back(dilations[i] - 1);  // oneDNN: 0 means a dense kernel
    const int64_t eff_k = dilations[i] * (g.kernel[i] - 1) + 1;
    int64_t pb = pads[i], pe = pads[r + i];
    if (auto_pad == "VALID") {
      pb = pe = 0;
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      std::tie(pb, pe) = ops::same_pads(auto_pad, g.in_sp[i], eff_k, g.strides[i]);
    }
    g.pad_l.push_back(pb);
    // oneDNN checks dst = (src + pl + pr - eff_k) / s + 1 (conv) or dst = (src - 1) * s + eff_k - pl - pr
    // (deconv); ONNX's output_padding only grows the deconvolution output, so it comes off pr.
    int64_t pr = transposed ? pe - core::attr_ints(a, "output_padding")[i] : pe;
    int64_t computed = g.out_sp[i];
    if (transposed && pr <= -g.strides[i]) {
      // oneDNN requires pr > -stride, but ONNX allows output_padding up to the dilation. The rows
      // past (in - 1) * s + eff_k - pl receive no tap: compute without them (pr = 0); they hold
      // only the bias.
      computed += pr;
      pr = 0;
      g.truncated = true;
    }
    g.pad_r.push_back(pr);
    g.computed_sp.push_back(computed);
  }
  return g;
}

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

memory::desc any_md(const Dims& d) { return memory::desc(d, memory::data_type::f32, memory::format_tag::any); }

template <class T>
class ConvKernel : public Kernel {
 public:
  ConvKernel(const ir::Graph& g, const ir::Node& n) : Kernel(g, n) {
    geo_ = conv_geo(in_shape(0), out_shape(0), attrs(), T::transposed);
    src_dims_ = dims_of(in_shape(0));
    dst_dims_ = Dims{geo_.n, geo_.oc};
    dst_dims_.insert(dst_dims_.end(), geo_.computed_sp.begin(), geo_.computed_sp.end());
    // The computed window of the output buffer (all of it unless truncated).
    user_dst_md_ = strided_md(dst_dims_, dense_strides(dims_of(out_shape(0))));
    prim_bias_ = geo_.bias && !geo_.truncated;
    weight_md_ = weight_desc();
    key_ = Key() << src_dims_ << dst_dims_ << weight_md_ << geo_.strides << geo_.dil << geo_.pad_l << geo_.pad_r
                 << prim_bias_;
    fwd(prop_kind::forward_inference);  // builds the descriptor now: a refusal is a conversion error
  }

  void forward(Env& env, bool training) override {
    const auto& f = fwd(training ? prop_kind::forward_training : prop_kind::forward_inference);
    const memory x = to_layout(mem(plain_md(src_dims_), in(env, 0).ptr()), f.pd.src_desc());
    const memory w = to_layout(mem(weight_md_, in(env, 1).ptr()), f.pd.weights_desc());
    Buf y(out_shape(0));
    const memory user_y = mem(user_dst_md_, y.ptr());
    const memory dst = f.pd.dst_desc() == user_y.get_desc() ? user_y : memory(f.pd.dst_desc(), cpu_engine());
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, dst}};
    if (prim_bias_) args[DNNL_ARG_BIAS] = mem(plain_md({geo_.oc}), in(env, 2).ptr());
    run(f.prim, args);
    if (dst != user_y) reorder_into(dst, user_y);
    if (geo_.bias && !prim_bias_) y = binary(algorithm::binary_add, y, in(env, 2).reshaped(bias_shape()));
    set_out(env, 0, std::move(y));
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
    return cached<typename T::Fwd::primitive_desc>(Key() << key_ << static_cast<int>(prop), [&] {
      const Dims wd = weight_md_.dims();
      auto d = prim_bias_ ? typename T::Fwd::desc(prop, T::alg, any_md(src_dims_), any_md(wd), plain_md({geo_.oc}),
                                                  any_md(dst_dims_), geo_.strides, geo_.dil, geo_.pad_l, geo_.pad_r)
                          : typename T::Fwd::desc(prop, T::alg, any_md(src_dims_), any_md(wd), any_md(dst_dims_),
                                                  geo_.strides, geo_.dil, geo_.pad_l, geo_.pad_r);
      return typename T::Fwd::primitive_desc(d, cpu_engine());
    });
  }

  // The user's weight buffer as oneDNN sees it: [OC, C, k...] or grouped [G, OC/G, C/G, k...].
  // Convolution weights are [OC, C/G, k...] row-major, which is exactly the grouped layout;
  // ONNX transposed weights are [C, OC/G, k...], i.e. per group [C/G, OC/G, k...]: the o and i
  // axes swap roles, expressed with strides.
  memory::desc weight_desc() const {
    const int64_t g = geo_.group, ocg = geo_.oc / g, cg = geo_.c / g;
    Dims dims = g == 1 ? Dims{geo_.oc, geo_.c} : Dims{g, ocg, cg};
    dims.insert(dims.end(), geo_.kernel.begin(), geo_.kernel.end());
    if (!T::transposed) return plain_md(dims);
    const Dims ks = dense_strides(geo_.kernel);
    int64_t kn = 1;
    for (auto k : geo_.kernel) kn *= k;
    Dims strides = g == 1 ? Dims{kn, geo_.oc * kn} : Dims{cg * ocg * kn, kn, ocg * kn};
    strides.insert(strides.end(), ks.begin(), ks.end());
    return strided_md(dims, strides);
  }

  Shape bias_shape() const {
    Shape s(out_shape(0).size(), 1);
    s[1] = geo_.oc;
    return s;
  }

  ConvGeo geo_;
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
