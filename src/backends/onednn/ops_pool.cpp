// Window pools (max/avg, 1d/2d, ONNX pads, auto_pad, ceil_mode, count_include_pad) and global
// pools on oneDNN's pooling_v2 primitive.
// Quirks handled here:
//  - oneDNN takes an explicit right padding and checks out = (in + pl + pr - k) / s + 1, so ONNX's
//    ceil_mode becomes extra right padding, just enough for the last window.
//  - pooling_avg_include_padding divides every window by the full kernel size, also a window that
//    reaches into that extra ceil-mode padding; ONNX (and the reference) count only cells inside
//    [-pad_begin, in + pad_end). Those windows are rescaled by a per-position factor (binary mul).
//  - max pooling in training mode keeps the primitive's workspace (the argmax) for backward.
#include <tuple>

#include "backends/onednn/onednn_common.h"
#include "ops/kernel_util.h"

namespace quorum::backends::onednn {
namespace {

struct PoolGeo {
  Dims kernel, strides, pad_l, pad_r;
  std::vector<std::vector<float>> factor;  // per axis, per output position: k / cells counted by ONNX
  bool rescale = false;
};

PoolGeo window_geo(const Shape& x, const Shape& y, const core::Attrs& a) {
  PoolGeo g;
  const size_t d = x.size() - 2;
  const auto& pads = core::attr_ints(a, "pads");
  const std::string& auto_pad = core::attr_s(a, "auto_pad");
  g.kernel = core::attr_ints(a, "kernel_shape");
  g.strides = core::attr_ints(a, "strides");
  for (size_t i = 0; i < d; ++i) {
    const int64_t in = x[i + 2], out = y[i + 2], k = g.kernel[i], s = g.strides[i];
    int64_t pb = pads[i], pe = pads[i + d];
    if (auto_pad == "VALID") {
      pb = pe = 0;
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      std::tie(pb, pe) = ops::same_pads(auto_pad, in, k, s);
    }
    g.pad_l.push_back(pb);
    g.pad_r.push_back(std::max(pe, (out - 1) * s + k - in - pb));
    std::vector<float> f(static_cast<size_t>(out));
    for (int64_t o = 0; o < out; ++o) {
      const int64_t start = o * s - pb;
      const int64_t counted = std::min(start + k, in + pe) - start;
      f[static_cast<size_t>(o)] = static_cast<float>(k) / static_cast<float>(counted);
      if (counted != k) g.rescale = true;
    }
    g.factor.push_back(std::move(f));
  }
  return g;
}

class PoolKernel : public Kernel {
 public:
  PoolKernel(const ir::Graph& g, const ir::Node& n, bool is_max, bool global) : Kernel(g, n) {
    const Shape& x = in_shape(0);
    const Shape& y = out_shape(0);
    if (global) {
      geo_.kernel.assign(x.begin() + 2, x.end());
      geo_.strides.assign(x.size() - 2, 1);
      geo_.pad_l.assign(x.size() - 2, 0);
      geo_.pad_r.assign(x.size() - 2, 0);
      alg_ = is_max ? algorithm::pooling_max : algorithm::pooling_avg_exclude_padding;
    } else {
      geo_ = window_geo(x, y, attrs());
      const bool include = !is_max && core::attr_i(attrs(), "count_include_pad") == 1;
      alg_ = is_max    ? algorithm::pooling_max
             : include ? algorithm::pooling_avg_include_padding
                       : algorithm::pooling_avg_exclude_padding;
      if (include && geo_.rescale) factor_ = factor_buf(y);
    }
    src_ = plain_md(dims_of(x));
    dst_ = plain_md(dims_of(y));
    key_ = Key() << static_cast<int>(alg_) << src_ << dst_ << geo_.kernel << geo_.strides << geo_.pad_l << geo_.pad_r;
    fwd(prop_kind::forward_inference);
  }

  void forward(Env& env, bool training) override {
    const auto& f = fwd(training ? prop_kind::forward_training : prop_kind::forward_inference);
    Buf y(out_shape(0));
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(src_, in(env, 0).ptr())},
                                         {DNNL_ARG_DST, mem(dst_, y.ptr())}};
    workspace_ = memory();
    if (training && f.pd.workspace_desc().get_size() > 0) {
      workspace_ = memory(f.pd.workspace_desc(), cpu_engine());
      args[DNNL_ARG_WORKSPACE] = workspace_;
    }
    run(f.prim, args);
    if (factor_.numel() > 0) y = binary(algorithm::binary_mul, y, factor_);
    set_out(env, 0, std::move(y));
  }

  void backward(Env& env) override {
    const auto& f = fwd(prop_kind::forward_training);
    const auto& b = cached<dnnl::pooling_v2_backward::primitive_desc>(key_, [&] {
      const Dims dil(geo_.kernel.size(), 0);
      dnnl::pooling_v2_backward::desc d(alg_, src_, dst_, geo_.strides, geo_.kernel, dil, geo_.pad_l, geo_.pad_r);
      return dnnl::pooling_v2_backward::primitive_desc(d, cpu_engine(), f.pd);
    });
    // The rescale is y = pool(x) * factor, so the pool sees gy * factor.
    const Buf gy = factor_.numel() > 0 ? binary(algorithm::binary_mul, *gout(env, 0), factor_) : *gout(env, 0);
    Buf gx(in_shape(0));
    std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, mem(dst_, gy.ptr())},
                                         {DNNL_ARG_DIFF_SRC, mem(src_, gx.ptr())}};
    if (b.pd.workspace_desc().get_size() > 0) args[DNNL_ARG_WORKSPACE] = workspace_;
    run(b.prim, args);
    add_gin(env, 0, std::move(gx));
  }

 private:
  const Cached<dnnl::pooling_v2_forward::primitive_desc>& fwd(prop_kind prop) {
    return cached<dnnl::pooling_v2_forward::primitive_desc>(Key() << key_ << static_cast<int>(prop), [&] {
      const Dims dil(geo_.kernel.size(), 0);
      dnnl::pooling_v2_forward::desc d(prop, alg_, src_, dst_, geo_.strides, geo_.kernel, dil, geo_.pad_l, geo_.pad_r);
      return dnnl::pooling_v2_forward::primitive_desc(d, cpu_engine());
    });
  }

  // [1, 1, out...]: the product of the per-axis factors.
  Buf factor_buf(const Shape& y) const {
    Shape fs(y.size(), 1);
    for (size_t i = 2; i < y.size(); ++i) fs[i] = y[i];
    Buf f(fs);
    const size_t d = geo_.factor.size();
    for (int64_t flat = 0; flat < f.numel(); ++flat) {
      float v = 1.0f;
      int64_t rest = flat;
      for (size_t i = d; i-- > 0;) {
        const int64_t len = y[i + 2];
        v *= geo_.factor[i][static_cast<size_t>(rest % len)];
        rest /= len;
      }
      f.data[static_cast<size_t>(flat)] = v;
    }
    return f;
  }

  PoolGeo geo_;
  algorithm alg_ = algorithm::pooling_max;
  memory::desc src_, dst_;
  Buf factor_;
  std::string key_;
  memory workspace_;
};

template <bool IsMax, bool Global>
MakeFn pool_maker() {
  return [](const ir::Graph& g, const ir::Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<PoolKernel>(g, n, IsMax, Global);
  };
}

}  // namespace

void register_pool(OpTable& t) {
  t["max_pool1d"] = OpEntry{pool_maker<true, false>(), {}, {}};
  t["max_pool2d"] = OpEntry{pool_maker<true, false>(), {}, {}};
  t["avg_pool1d"] = OpEntry{pool_maker<false, false>(), {}, {}};
  t["avg_pool2d"] = OpEntry{pool_maker<false, false>(), {}, {}};
  t["global_max_pool"] = OpEntry{pool_maker<true, true>(), {}, {}};
  t["global_avg_pool"] = OpEntry{pool_maker<false, true>(), {}, {}};
}

}  // namespace quorum::backends::onednn
