// The numeric faults. Each wraps the catalogue's own kernel and changes one thing.
#include "backends/faulty/numeric_faults.h"

#include <cmath>

#include "ops/kernel_util.h"
#include "ops/registry.h"

namespace quorum::backends::faulty {

namespace {

using core::Attrs;
using core::Tensor;
using ops::Inputs;

const std::vector<std::string> kConvs = {"conv1d", "conv2d", "conv3d"};
const std::vector<std::string> kAvgPools = {"avg_pool1d", "avg_pool2d"};
const std::vector<std::string> kMaxPools = {"max_pool1d", "max_pool2d"};

// SAME_UPPER put the odd padding cell at the beginning (the SAME_LOWER rule): off by one for odd totals.
Attrs same_pad_off_by_one(Attrs a) {
  if (core::attr_s(a, "auto_pad") == "SAME_UPPER") a["auto_pad"] = std::string("SAME_LOWER");
  return a;
}

Attrs count_padding(Attrs a) {
  a["count_include_pad"] = int64_t{1};
  return a;
}

void with_attrs(ref::Overrides& ov, const std::vector<std::string>& ops_, Attrs (*change)(Attrs)) {
  for (const auto& name : ops_) {
    const ops::OpSpec& spec = ops::op(name);
    ov.forward[name] = [&spec, change](const Inputs& in, const Attrs& a) { return spec.forward(in, change(a)); };
    ov.vjp[name] = [&spec, change](const Inputs& in, const Attrs& a, const std::vector<Tensor>& out,
                                   const std::vector<Tensor>& g) { return spec.vjp(in, change(a), out, g); };
  }
}

// batch_norm (inference statistics) computing (x - mean) / (sqrt(var) + eps): epsilon outside
// the square root. Done by feeding the real kernel var' = (sqrt(var) + eps)^2 and eps = 0.
void bn_eps_outside_sqrt(ref::Overrides& ov) {
  const ops::OpSpec& spec = ops::op("batch_norm");
  auto rewrite = [](const Inputs& in, const Attrs& a, Tensor& var2, Attrs& a2) {
    const double eps = core::attr_f(a, "epsilon");
    var2 = ops::map1(*in[4], [eps](double v) {
      const double s = std::sqrt(v) + eps;
      return s * s;
    });
    a2 = a;
    a2["epsilon"] = 0.0;
    Inputs changed = in;
    changed[4] = &var2;
    return changed;
  };
  ov.forward["batch_norm"] = [&spec, rewrite](const Inputs& in, const Attrs& a) {
    if (core::attr_i(a, "training") != 0) return spec.forward(in, a);
    Tensor var2;
    Attrs a2;
    return spec.forward(rewrite(in, a, var2, a2), a2);
  };
  ov.vjp["batch_norm"] = [&spec, rewrite](const Inputs& in, const Attrs& a, const std::vector<Tensor>& out,
                                          const std::vector<Tensor>& g) {
    if (core::attr_i(a, "training") != 0) return spec.vjp(in, a, out, g);
    Tensor var2;
    Attrs a2;
    return spec.vjp(rewrite(in, a, var2, a2), a2, out, g);  // (the var gradient is the fault's own)
  };
}

// relu's gradient passes through at x == 0 (x >= 0 instead of x > 0).
void relu_grad_at_zero(ref::Overrides& ov) {
  ov.vjp["relu"] = [](const Inputs& in, const Attrs&, const std::vector<Tensor>&, const std::vector<Tensor>& g) {
    Tensor gx(core::DType::F64, in[0]->shape());
    for (int64_t i = 0; i < gx.numel(); ++i) gx.f64()[i] = in[0]->f64()[i] >= 0 ? g[0].f64()[i] : 0.0;
    return std::vector<Tensor>{gx};
  };
}

// softmax without subtracting the maximum, with exp in float32: large logits overflow to inf and
// inf/inf gives NaN.
void softmax_no_max_sub(ref::Overrides& ov) {
  ov.forward["softmax"] = [](const Inputs& in, const Attrs& a) {
    const Tensor& x = *in[0];
    const int axis = ops::norm_axis(core::attr_i(a, "axis"), x.rank());
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= x.dim(d);
    for (int d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
    const int64_t n = x.dim(axis);
    Tensor y(core::DType::F64, x.shape());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        float sum = 0;
        for (int64_t k = 0; k < n; ++k) sum += std::exp(static_cast<float>(x.f64()[(o * n + k) * inner + i]));
        for (int64_t k = 0; k < n; ++k) {
          const int64_t idx = (o * n + k) * inner + i;
          y.f64()[idx] = static_cast<double>(std::exp(static_cast<float>(x.f64()[idx])) / sum);
        }
      }
    return std::vector<Tensor>{y};
  };
}

// max pool's gradient goes to every element equal to the window's maximum, not just the first.
void maxpool_grad_all_ties(ref::Overrides& ov) {
  for (const auto& name : kMaxPools) {
    ov.vjp[name] = [](const Inputs& in, const Attrs& a, const std::vector<Tensor>& out, const std::vector<Tensor>& g) {
      const Tensor& x = *in[0];
      const Tensor& y = out[0];
      const size_t sp = static_cast<size_t>(x.rank() - 2);
      const int64_t nc = x.dim(0) * x.dim(1);
      const int64_t ih = x.dim(2), iw = sp == 2 ? x.dim(3) : 1;
      const int64_t oh = y.dim(2), ow = sp == 2 ? y.dim(3) : 1;
      const auto& k = core::attr_ints(a, "kernel_shape");
      const auto& s = core::attr_ints(a, "strides");
      const int64_t kh = k[0], kw = sp == 2 ? k[1] : 1, sh = s[0], sw = sp == 2 ? s[1] : 1;
      // The begin padding of each spatial axis, as the pooling shape rule resolves it.
      const ops::Pads pads =
          ops::resolve_pads(core::attr_s(a, "auto_pad"), core::attr_ints(a, "pads"), x.shape(), k, s);
      const int64_t ph = pads.begin[0], pw = sp == 2 ? pads.begin[1] : 0;
      Tensor gx(core::DType::F64, x.shape());
      for (int64_t c = 0; c < nc; ++c)
        for (int64_t oy = 0; oy < oh; ++oy)
          for (int64_t ox = 0; ox < ow; ++ox) {
            const double m = y.f64()[(c * oh + oy) * ow + ox];
            const double gy = g[0].f64()[(c * oh + oy) * ow + ox];
            for (int64_t dy = 0; dy < kh; ++dy)
              for (int64_t dx = 0; dx < kw; ++dx) {
                const int64_t yy = oy * sh - ph + dy, xx = ox * sw - pw + dx;
                if (yy < 0 || yy >= ih || xx < 0 || xx >= iw) continue;
                const int64_t idx = (c * ih + yy) * iw + xx;
                if (x.f64()[idx] == m) gx.f64()[idx] += gy;
              }
          }
      return std::vector<Tensor>{gx};
    };
  }
}

// transpose's gradient is the incoming gradient's elements in their own order, reshaped to the input's
// shape, instead of transposed back (a reshape where the inverse permutation belongs).
void transpose_grad_as_reshape(ref::Overrides& ov) {
  ov.vjp["transpose"] = [](const Inputs& in, const Attrs&, const std::vector<Tensor>&, const std::vector<Tensor>& g) {
    Tensor gx(core::DType::F64, in[0]->shape());
    for (int64_t i = 0; i < gx.numel(); ++i) gx.f64()[i] = g[0].get(i);
    return std::vector<Tensor>{gx};
  };
}

// concat loses its last input: that part of the output is zero (and gets no gradient).
void concat_drops_last(ref::Overrides& ov) {
  const ops::OpSpec& spec = ops::op("concat");
  ov.forward["concat"] = [&spec](const Inputs& in, const Attrs& a) {
    std::vector<Tensor> y = spec.forward(in, a);
    const Tensor& last = *in.back();
    const int axis = ops::norm_axis(core::attr_i(a, "axis"), last.rank());
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= last.dim(d);
    for (int d = axis + 1; d < last.rank(); ++d) inner *= last.dim(d);
    const int64_t total = y[0].dim(axis), n = last.dim(axis);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = total - n; k < total; ++k)
        for (int64_t i = 0; i < inner; ++i) y[0].f64()[(o * total + k) * inner + i] = 0.0;
    return y;
  };
  ov.vjp["concat"] = [&spec](const Inputs& in, const Attrs& a, const std::vector<Tensor>& out,
                             const std::vector<Tensor>& g) {
    std::vector<Tensor> gin = spec.vjp(in, a, out, g);
    gin.back().fill(0.0);
    return gin;
  };
}

// Conditional faults: each fires for one value (or range) of one attribute, so that localize-fix has
// a parameter to name. Each rewrites the attribute before the catalogue's own kernel (and VJP) runs.
Attrs elu_alpha_ignored(Attrs a) {  // elu computes with alpha = 1 whatever alpha says
  a["alpha"] = 1.0;
  return a;
}
Attrs leaky_relu_big_alpha_halved(Attrs a) {  // leaky_relu halves alpha when alpha > 0.5
  if (core::attr_f(a, "alpha") > 0.5) a["alpha"] = core::attr_f(a, "alpha") / 2;
  return a;
}
Attrs softmax_axis0_on_last(Attrs a) {  // softmax over axis 0 computed over the last axis
  if (core::attr_i(a, "axis") == 0) a["axis"] = int64_t{-1};
  return a;
}
Attrs pad_reflect_as_edge(Attrs a) {  // pad mode reflect computed as edge
  if (core::attr_s(a, "mode") == "reflect") a["mode"] = std::string("edge");
  return a;
}
Attrs resize_align_corners_as_half_pixel(Attrs a) {  // bilinear align_corners computed as half_pixel
  if (core::attr_s(a, "coordinate_transformation_mode") == "align_corners")
    a["coordinate_transformation_mode"] = std::string("half_pixel");
  return a;
}
Attrs gelu_tanh_as_exact(Attrs a) {  // gelu approximate=tanh computed with the exact erf formula
  a["approximate"] = std::string("none");
  return a;
}

// relu turns a NaN into 0 (a comparison x > 0 ? x : 0): the NaN is swallowed.
void relu_nan_to_zero(ref::Overrides& ov) {
  const ops::OpSpec& spec = ops::op("relu");
  ov.forward["relu"] = [&spec](const Inputs& in, const Attrs& a) {
    std::vector<Tensor> y = spec.forward(in, a);
    for (int64_t i = 0; i < y[0].numel(); ++i)
      if (std::isnan(y[0].f64()[i])) y[0].f64()[i] = 0.0;
    return y;
  };
}

// exp with a wrong overflow threshold: +inf for operands in (20, 88.72], where float32's exp is still
// finite (it overflows past ln(FLT_MAX) = 88.7228). Random inputs rarely put an exp's operand there;
// GRIST's steps toward exp's valid-range bound go through it.
constexpr double kExpEarlyLo = 20.0, kExpEarlyHi = 88.72;
void exp_overflow_early(ref::Overrides& ov) {
  const ops::OpSpec& spec = ops::op("exp");
  ov.forward["exp"] = [&spec](const Inputs& in, const Attrs& a) {
    std::vector<Tensor> y = spec.forward(in, a);
    for (int64_t i = 0; i < y[0].numel(); ++i) {
      const double x = in[0]->f64()[i];
      if (x > kExpEarlyLo && x <= kExpEarlyHi) y[0].f64()[i] = INFINITY;
    }
    return y;
  };
}

// tanh computed as (e^2x - 1) / (e^2x + 1): inf / inf = NaN for an infinite operand, where tanh's
// limit is ±1 (the catalogue's kernel gives it). Finite operands keep the right result.
void tanh_inf_as_nan(ref::Overrides& ov) {
  const ops::OpSpec& spec = ops::op("tanh");
  ov.forward["tanh"] = [&spec](const Inputs& in, const Attrs& a) {
    std::vector<Tensor> y = spec.forward(in, a);
    for (int64_t i = 0; i < y[0].numel(); ++i)
      if (std::isinf(in[0]->f64()[i])) y[0].f64()[i] = std::nan("");
    return y;
  };
}

// A quantized product whose output zero point is added twice (once by the requantization, once more when
// storing), saturated to the output type.
void qlinear_zero_point_twice(ref::Overrides& ov) {
  for (const char* name : {"qlinear_conv2d", "qlinear_matmul"}) {
    const ops::OpSpec& spec = ops::op(name);
    ov.forward[name] = [&spec](const Inputs& in, const Attrs& a) {
      std::vector<Tensor> y = spec.forward(in, a);
      const auto [lo, hi] = core::dtype_range(core::attr_s(a, "to") == "uint8" ? core::DType::U8 : core::DType::I8);
      const auto zp = static_cast<double>(core::attr_i(a, "y_zero_point"));
      for (int64_t i = 0; i < y[0].numel(); ++i) y[0].f64()[i] = std::clamp(y[0].f64()[i] + zp, lo, hi);
      return y;
    };
  }
}

// Quantization that rounds ties half away from zero (ONNX rounds them half to even): the kernel runs on operands
// that move the real value it rounds away from zero by a relative 2^-30, so an exact tie k + 1/2 goes to the
// neighbour away from zero and no other value moves across an integer boundary. quantize_linear's x / scale
// moves with x; a quantized product's accumulator with its zero-point-shifted input (x - x_zp) and its bias.
void qlinear_round_half_away(ref::Overrides& ov) {
  constexpr double kAway = 1 + 0x1p-30;
  for (const char* name : {"quantize_linear", "qlinear_conv2d", "qlinear_matmul"}) {
    const ops::OpSpec& spec = ops::op(name);
    const std::string op = name;
    ov.forward[name] = [&spec, op](const Inputs& in, const Attrs& a) {
      std::vector<Tensor> moved;
      for (const Tensor* t : in) moved.push_back(t->to(core::DType::F64));
      const char* zp_name = op == "qlinear_conv2d" ? "x_zero_point" : "a_zero_point";
      const double zp = op == "quantize_linear" ? 0.0 : static_cast<double>(core::attr_i(a, zp_name));
      for (int64_t i = 0; i < moved[0].numel(); ++i) moved[0].f64()[i] = zp + (moved[0].f64()[i] - zp) * kAway;
      if (op == "qlinear_conv2d" && moved.size() > 2)
        for (int64_t i = 0; i < moved[2].numel(); ++i) moved[2].f64()[i] *= kAway;
      Inputs changed;
      for (const Tensor& t : moved) changed.push_back(&t);
      return spec.forward(changed, a);
    };
  }
}

}  // namespace

const std::vector<NumericFault>& numeric_faults() {
  static const std::vector<NumericFault> f = {
      {"same-pad-off-by-one", "SAME_UPPER convolution puts the odd padding cell first", "FC"},
      {"bn-eps-outside-sqrt", "batch norm divides by sqrt(var) + eps", "FC"},
      {"relu-grad-at-zero", "relu's gradient passes through at x == 0", "BC"},
      {"avgpool-counts-padding", "average pooling divides by the whole window, padding included", "FC"},
      {"softmax-no-max-sub", "softmax without max subtraction overflows to NaN", "FC"},
      {"maxpool-grad-all-ties", "max pooling's gradient goes to every tied element", "BC"},
      {"concat-drops-last", "concat loses its last input", "FC"},
      {"transpose-grad-as-reshape", "transpose's gradient is reshaped, not transposed back", "BC"},
      {"loss-grad-x2", "the loss gradient is twice what it should be", "LC"},
      {"relu-nan-to-zero", "relu turns a NaN input into 0 (the NaN is swallowed)", "FC"},
      {"elu-alpha-ignored", "elu computes with alpha = 1 whatever alpha is (fires when alpha != 1)", "FC"},
      {"leaky-relu-big-alpha-halved", "leaky_relu halves alpha when alpha > 0.5", "FC"},
      {"softmax-axis0-on-last", "softmax with axis = 0 normalises over the last axis", "FC"},
      {"pad-reflect-as-edge", "pad in reflect mode repeats the edge instead", "FC"},
      {"resize-align-corners-as-half-pixel", "bilinear resize with align_corners uses half_pixel coordinates", "FC"},
      {"gelu-tanh-as-exact", "gelu with approximate = tanh computes the exact erf form", "FC"},
      {"exp-overflow-early", "exp returns +inf for operands in (20, 88.72], where float32 is finite", "FC"},
      {"tanh-inf-as-nan", "tanh of an infinite operand is NaN (inf / inf), where the limit is ±1", "FC"},
      {"qlinear-zero-point-twice", "a quantized convolution or matmul adds its output zero point twice", "FC"},
      {"qlinear-round-half-away", "quantization rounds ties half away from zero (quantize, qlinear conv, matmul)",
       "FC"},
  };
  return f;
}

ref::Overrides numeric_overrides(const std::set<std::string>& names) {
  ref::Overrides ov;
  for (const auto& n : names) {
    if (n == "same-pad-off-by-one") with_attrs(ov, kConvs, same_pad_off_by_one);
    else if (n == "bn-eps-outside-sqrt") bn_eps_outside_sqrt(ov);
    else if (n == "relu-grad-at-zero") relu_grad_at_zero(ov);
    else if (n == "avgpool-counts-padding") with_attrs(ov, kAvgPools, count_padding);
    else if (n == "softmax-no-max-sub") softmax_no_max_sub(ov);
    else if (n == "maxpool-grad-all-ties") maxpool_grad_all_ties(ov);
    else if (n == "concat-drops-last") concat_drops_last(ov);
    else if (n == "transpose-grad-as-reshape") transpose_grad_as_reshape(ov);
    else if (n == "loss-grad-x2") ov.loss_grad_scale = 2.0;
    else if (n == "relu-nan-to-zero") relu_nan_to_zero(ov);
    else if (n == "qlinear-zero-point-twice") qlinear_zero_point_twice(ov);
    else if (n == "qlinear-round-half-away") qlinear_round_half_away(ov);
    else if (n == "elu-alpha-ignored") with_attrs(ov, {"elu"}, elu_alpha_ignored);
    else if (n == "leaky-relu-big-alpha-halved") with_attrs(ov, {"leaky_relu"}, leaky_relu_big_alpha_halved);
    else if (n == "softmax-axis0-on-last") with_attrs(ov, {"softmax"}, softmax_axis0_on_last);
    else if (n == "pad-reflect-as-edge") with_attrs(ov, {"pad"}, pad_reflect_as_edge);
    else if (n == "resize-align-corners-as-half-pixel")
      with_attrs(ov, {"resize_bilinear"}, resize_align_corners_as_half_pixel);
    else if (n == "gelu-tanh-as-exact") with_attrs(ov, {"gelu"}, gelu_tanh_as_exact);
    else if (n == "exp-overflow-early") exp_overflow_early(ov);
    else if (n == "tanh-inf-as-nan") tanh_inf_as_nan(ov);
  }
  return ov;
}

}  // namespace quorum::backends::faulty
