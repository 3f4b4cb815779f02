// oneDNN's lowering (see lower.h): the mapping decisions, the forward steps of every operator, and
// the recording sink. Header-free: built with quorum_backends, shared by the backend and the writer.
#include "backends/onednn/lower.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <map>
#include <sstream>
#include <tuple>

#include "core/attrs.h"
#include "ops/kernel_util.h"
#include "ops/quant_util.h"

namespace quorum::backends::onednn_lower {

const char* name(Alg a) {
  switch (a) {
#define QUORUM_ONEDNN_ALG_NAME(x) \
  case Alg::x:                    \
    return #x;
    QUORUM_ONEDNN_ALGS(QUORUM_ONEDNN_ALG_NAME)
#undef QUORUM_ONEDNN_ALG_NAME
  }
  return "?";
}

const char* name(Prop p) { return p == Prop::forward_training ? "forward_training" : "forward_inference"; }

Dims dims_of(const Shape& s) {
  if (s.empty()) return {1};
  return Dims(s.begin(), s.end());
}

Shape pad_rank(const Shape& s, size_t rank) {
  if (s.size() >= rank) return s;
  Shape out(rank - s.size(), 1);
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

// ---------------------------------------------------------------- tables

namespace {

constexpr float kSeluAlpha = 1.6732632423543772f;
constexpr float kSeluGamma = 1.0507009873554805f;

int norm_axis(int64_t a, size_t rank) { return ops::norm_axis(a, static_cast<int>(rank)); }

}  // namespace

std::optional<std::vector<Eltwise>> eltwise_chain(const std::string& op, const core::Attrs& a) {
  auto f = [&](const char* n) { return static_cast<float>(core::attr_f(a, n)); };
  using V = std::vector<Eltwise>;
  if (op == "relu") return V{{Alg::eltwise_relu, 0, 0}};
  if (op == "relu6") return V{{Alg::eltwise_clip_v2, 0, 6}};
  if (op == "leaky_relu") return V{{Alg::eltwise_relu, f("alpha"), 0}};
  if (op == "elu") return V{{Alg::eltwise_elu, f("alpha"), 0}};
  if (op == "selu") return V{{Alg::eltwise_elu, kSeluAlpha, 0}, {Alg::eltwise_linear, kSeluGamma, 0}};
  if (op == "gelu")
    return V{{core::attr_s(a, "approximate") == "tanh" ? Alg::eltwise_gelu_tanh : Alg::eltwise_gelu_erf, 0, 0}};
  if (op == "sigmoid") return V{{Alg::eltwise_logistic, 0, 0}};
  if (op == "tanh") return V{{Alg::eltwise_tanh, 0, 0}};
  if (op == "softplus") return V{{Alg::eltwise_soft_relu, 0, 0}};
  if (op == "hard_sigmoid") return V{{Alg::eltwise_linear, f("alpha"), f("beta")}, {Alg::eltwise_clip_v2, 0, 1}};
  if (op == "hardswish") return V{{Alg::eltwise_hardswish, 0, 0}};
  if (op == "exp") return V{{Alg::eltwise_exp, 0, 0}};
  if (op == "log") return V{{Alg::eltwise_log, 0, 0}};
  if (op == "sqrt") return V{{Alg::eltwise_sqrt, 0, 0}};
  // sqrt, then 1/x: pow(x, -0.5) gives +0 at -inf where rsqrt is NaN (a mapping of Quorum's own
  // that campaigns reported as oneDNN's).
  if (op == "rsqrt") return V{{Alg::eltwise_sqrt, 0, 0}, {Alg::eltwise_pow, 1, -1}};
  if (op == "reciprocal") return V{{Alg::eltwise_pow, 1, -1}};
  if (op == "abs") return V{{Alg::eltwise_abs, 0, 0}};
  if (op == "neg") return V{{Alg::eltwise_linear, -1, 0}};
  if (op == "square") return V{{Alg::eltwise_square, 0, 0}};
  if (op == "pow") return V{{Alg::eltwise_pow, 1, f("exponent")}};
  if (op == "clip") return V{{Alg::eltwise_clip_v2, f("min"), f("max")}};
  return std::nullopt;
}

const std::vector<std::string>& eltwise_ops() {
  static const std::vector<std::string> ops = {"relu", "relu6", "leaky_relu", "elu", "selu", "gelu", "sigmoid",
                                               "tanh", "softplus", "hard_sigmoid", "hardswish", "exp", "log", "sqrt",
                                               "rsqrt", "reciprocal", "abs", "neg", "square", "pow", "clip"};
  return ops;
}

std::optional<Alg> binary_alg(const std::string& op) {
  static const std::map<std::string, Alg> m = {{"add", Alg::binary_add}, {"sub", Alg::binary_sub},
                                               {"mul", Alg::binary_mul}, {"div", Alg::binary_div},
                                               {"maximum", Alg::binary_max}, {"minimum", Alg::binary_min}};
  const auto it = m.find(op);
  return it == m.end() ? std::nullopt : std::optional<Alg>(it->second);
}

std::optional<Alg> reduce_alg(const std::string& op) {
  static const std::map<std::string, Alg> m = {{"reduce_sum", Alg::reduction_sum},
                                               {"reduce_mean", Alg::reduction_mean},
                                               {"reduce_max", Alg::reduction_max},
                                               {"reduce_min", Alg::reduction_min},
                                               {"reduce_prod", Alg::reduction_mul}};
  const auto it = m.find(op);
  return it == m.end() ? std::nullopt : std::optional<Alg>(it->second);
}

bool is_reshape(const std::string& op) {
  return op == "reshape" || op == "flatten" || op == "squeeze" || op == "unsqueeze";
}
bool is_pool(const std::string& op) {
  return op == "max_pool1d" || op == "max_pool2d" || op == "avg_pool1d" || op == "avg_pool2d" ||
         op == "global_max_pool" || op == "global_avg_pool";
}
bool is_conv(const std::string& op) {
  return op == "conv1d" || op == "conv2d" || op == "conv3d" || op == "conv_transpose2d";
}
bool is_rnn(const std::string& op) { return op == "simple_rnn" || op == "lstm" || op == "gru"; }
bool is_resize(const std::string& op) { return op == "resize_bilinear" || op == "resize_nearest"; }

// ---------------------------------------------------------------- geometry

Shape reduce_keep(const Shape& x, const core::Attrs& a) {
  const auto& axes = core::attr_ints(a, "axes");
  Shape keep = x;
  for (size_t d = 0; d < x.size(); ++d) {
    bool reduced = axes.empty();
    for (int64_t ax : axes) reduced = reduced || norm_axis(ax, x.size()) == static_cast<int>(d);
    if (reduced) keep[d] = 1;
  }
  return keep;
}

PoolGeo pool_geo(const std::string& op, const Shape& x, const Shape& y, const core::Attrs& a) {
  PoolGeo g;
  const bool is_max = op.find("max") != std::string::npos;
  g.src = dims_of(x);
  g.dst = dims_of(y);
  if (op.rfind("global", 0) == 0) {
    g.kernel.assign(x.begin() + 2, x.end());
    g.strides.assign(x.size() - 2, 1);
    g.pad_l.assign(x.size() - 2, 0);
    g.pad_r.assign(x.size() - 2, 0);
    g.alg = is_max ? Alg::pooling_max : Alg::pooling_avg_exclude_padding;
    g.dil.assign(x.size() - 2, 0);
    return g;
  }
  const size_t d = x.size() - 2;
  const auto& pads = core::attr_ints(a, "pads");
  const std::string& auto_pad = core::attr_s(a, "auto_pad");
  g.kernel = core::attr_ints(a, "kernel_shape");
  g.strides = core::attr_ints(a, "strides");
  for (size_t i = 0; i < d; ++i)
    g.dil.push_back(is_max && a.count("dilations") ? core::attr_ints(a, "dilations")[i] - 1 : 0);
  bool rescale = false;
  std::vector<std::vector<float>> factor;  // per axis, per output position: k / cells counted by ONNX
  for (size_t i = 0; i < d; ++i) {
    // k: the window's extent (a dilated max pool's taps spread over (dil+1)*(kernel-1)+1 cells).
    const int64_t in = x[i + 2], out = y[i + 2], k = (g.dil[i] + 1) * (g.kernel[i] - 1) + 1, s = g.strides[i];
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
      if (counted != k) rescale = true;
    }
    factor.push_back(std::move(f));
  }
  const bool include = !is_max && core::attr_i(a, "count_include_pad") == 1;
  g.alg = is_max ? Alg::pooling_max : include ? Alg::pooling_avg_include_padding : Alg::pooling_avg_exclude_padding;
  if (include && rescale) {
    g.factor_shape.assign(y.size(), 1);
    for (size_t i = 2; i < y.size(); ++i) g.factor_shape[i] = y[i];
    g.factor.resize(static_cast<size_t>(core::numel(g.factor_shape)));
    for (size_t flat = 0; flat < g.factor.size(); ++flat) {
      float v = 1.0f;
      int64_t rest = static_cast<int64_t>(flat);
      for (size_t i = d; i-- > 0;) {
        const int64_t len = y[i + 2];
        v *= factor[i][static_cast<size_t>(rest % len)];
        rest /= len;
      }
      g.factor[flat] = v;
    }
  }
  return g;
}

ConvGeo conv_geo(const std::string& op, const Shape& x, const Shape& y, const core::Attrs& a) {
  ConvGeo g;
  g.transposed = op == "conv_transpose2d";
  const size_t r = x.size() - 2;
  const int64_t c = x[1], group = core::attr_i(a, "group");
  g.oc = core::attr_i(a, "out_channels");
  g.bias = core::attr_i(a, "bias") == 1;
  g.src = dims_of(x);
  g.out = dims_of(y);
  g.dst = Dims{x[0], g.oc};
  const auto& kernel = core::attr_ints(a, "kernel_shape");
  g.strides = core::attr_ints(a, "strides");
  const auto& dilations = core::attr_ints(a, "dilations");
  const auto& pads = core::attr_ints(a, "pads");
  const std::string auto_pad = g.transposed ? "NOTSET" : core::attr_s(a, "auto_pad");
  for (size_t i = 0; i < r; ++i) {
    g.dil.push_back(dilations[i] - 1);  // oneDNN: 0 means a dense kernel
    const int64_t eff_k = dilations[i] * (kernel[i] - 1) + 1;
    int64_t pb = pads[i], pe = pads[r + i];
    if (auto_pad == "VALID") {
      pb = pe = 0;
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      std::tie(pb, pe) = ops::same_pads(auto_pad, x[i + 2], eff_k, g.strides[i]);
    }
    g.pad_l.push_back(pb);
    // oneDNN checks dst = (src + pl + pr - eff_k) / s + 1 (conv) or dst = (src - 1) * s + eff_k - pl - pr
    // (deconv); ONNX's output_padding only grows the deconvolution output, so it comes off pr.
    int64_t pr = g.transposed ? pe - core::attr_ints(a, "output_padding")[i] : pe;
    int64_t computed = y[i + 2];
    if (g.transposed && pr <= -g.strides[i]) {
      // oneDNN requires pr > -stride, but ONNX allows output_padding up to the dilation. The rows
      // past (in - 1) * s + eff_k - pl receive no tap: compute without them (pr = 0).
      computed += pr;
      pr = 0;
      g.truncated = true;
    }
    g.pad_r.push_back(pr);
    g.dst.push_back(computed);
  }
  // Convolution weights [OC, C/G, k...] row-major are exactly the grouped layout; ONNX transposed
  // weights [C, OC/G, k...] are per group [C/G, OC/G, k...]: o and i swap roles, with strides.
  const int64_t ocg = g.oc / group, cg = c / group;
  g.w_dims = group == 1 ? Dims{g.oc, c} : Dims{group, ocg, cg};
  g.w_dims.insert(g.w_dims.end(), kernel.begin(), kernel.end());
  if (g.transposed) {
    int64_t kn = 1;
    for (auto k : kernel) kn *= k;
    Dims ks(kernel.size(), 1);
    for (size_t i = kernel.size(); i-- > 1;) ks[i - 1] = ks[i] * kernel[i];
    g.w_strides = group == 1 ? Dims{kn, g.oc * kn} : Dims{cg * ocg * kn, kn, ocg * kn};
    g.w_strides.insert(g.w_strides.end(), ks.begin(), ks.end());
  }
  return g;
}

DenseGeo dense_geo(const Shape& x, const core::Attrs& a) {
  DenseGeo g;
  g.in = x.back();
  g.units = core::attr_i(a, "units");
  g.rows = core::numel(x) / g.in;
  g.bias = core::attr_i(a, "bias") == 1;
  return g;
}

BnGeo bn_geo(const Shape& x, const core::Attrs& a) {
  return BnGeo{dims_of(x), static_cast<float>(core::attr_f(a, "epsilon")), core::attr_i(a, "training") == 1};
}

LnGeo ln_geo(const Shape& x, const core::Attrs& a) {
  LnGeo g;
  const int axis = norm_axis(core::attr_i(a, "axis"), x.size());
  for (int d = 0; d < static_cast<int>(x.size()); ++d) (d < axis ? g.rows : g.k) *= x[static_cast<size_t>(d)];
  g.eps = static_cast<float>(core::attr_f(a, "epsilon"));
  return g;
}

LrnGeo lrn_geo(const Shape& x, const core::Attrs& a) {
  return LrnGeo{dims_of(x), core::attr_i(a, "size"), static_cast<float>(core::attr_f(a, "alpha")),
                static_cast<float>(core::attr_f(a, "beta")), static_cast<float>(core::attr_f(a, "bias"))};
}

SoftmaxGeo softmax_geo(const std::string& op, const Shape& x, const core::Attrs& a) {
  return SoftmaxGeo{op == "log_softmax" ? Alg::softmax_log : Alg::softmax_accurate, dims_of(x),
                    norm_axis(core::attr_i(a, "axis"), x.size())};
}

ResampleGeo resample_geo(const std::string& op, const Shape& x, const Shape& y) {
  return ResampleGeo{op == "resize_bilinear" ? Alg::resampling_linear : Alg::resampling_nearest, dims_of(x),
                     dims_of(y)};
}

namespace {

// The first output position (along one axis) where ONNX and oneDNN pick different sources, or -1.
// oneDNN, with F = out/in: linear x = (o + 0.5) / F - 0.5 clamped (ONNX half_pixel); nearest
// floor((o + 0.5) / F). Its coordinates come from the dimensions alone, so a node's given scale (ONNX
// `scales`) that is not out / in shows as a mismatch here.
int64_t first_mismatch(bool linear, const core::Attrs& a, size_t axis, int64_t in, int64_t out) {
  for (int64_t o = 0; o < out; ++o) {
    const double source = ops::resize_coord(a, axis, o, in, out);
    if (ops::resize_extrapolates(a, source, in)) return o;  // oneDNN has no extrapolation_value
    if (linear) {
      const double hi = static_cast<double>(in - 1);
      const double want = std::clamp(source, 0.0, hi);
      const double got = std::clamp(ops::resize_source_coord("half_pixel", o, in, out), 0.0, hi);
      if (std::abs(want - got) > 1e-9) return o;
    } else {
      const int64_t want =
          std::clamp<int64_t>(ops::resize_round_nearest(core::attr_s(a, "nearest_mode"), source), 0, in - 1);
      const int64_t got = (2 * o + 1) * in / (2 * out);  // floor((o + 0.5) * in / out), exactly
      if (want != got) return o;
    }
  }
  return -1;
}

}  // namespace

Support resize_support(const ir::Node& n, const Shape& x, const Shape& y) {
  const bool linear = n.op == "resize_bilinear";
  for (size_t axis = 2; axis < 4; ++axis) {
    const int64_t o = first_mismatch(linear, n.attrs, axis - 2, x[axis], y[axis]);
    if (o < 0) continue;
    std::string mode = core::attr_s(n.attrs, "coordinate_transformation_mode");
    if (const double s = ops::resize_given_scale(n.attrs, axis - 2); s > 0)
      mode += " with the given scale " + core::to_string(core::AttrValue(s));
    if (!linear) mode += " with nearest_mode " + core::attr_s(n.attrs, "nearest_mode");
    return Support::no(std::string("oneDNN resampling_") + (linear ? "linear" : "nearest") +
                       " has one coordinate rule (" + (linear ? "half_pixel" : "floor((o + 0.5) * in / out)") + "); " +
                       mode + " picks a different " + "source for output " + std::to_string(o) + " of axis " +
                       std::to_string(axis) + " (" + std::to_string(x[axis]) + " -> " + std::to_string(y[axis]) + ")");
  }
  return Support::yes();
}

RnnGeo rnn_geo(const std::string& op, const Shape& x, const core::Attrs& a) {
  RnnGeo g;
  g.op = op;
  g.n = x[0];
  g.t = x[1];
  g.f = x[2];
  g.h = core::attr_i(a, "hidden_size");
  g.seq = core::attr_i(a, "return_sequences") == 1;
  g.gru = op == "gru";
  // linear_before_reset 1 is lbr_gru (a fourth bias block for b_hn), 0 the gru primitive.
  g.lbr = g.gru && core::attr_i(a, "linear_before_reset") == 1;
  g.peephole = op == "lstm" && core::attr_i(a, "peepholes") == 1;
  g.dirs = ops::rnn_directions(a);
  g.reverse = g.dirs == 1 && ops::rnn_walks_back(a, 0);
  g.h0 = ops::rnn_state_input(op, a, false);
  g.c0 = ops::rnn_state_input(op, a, true);
  // simple_rnn's activations (tanh, relu, sigmoid) are catalogue operators of one eltwise step each.
  if (op == "simple_rnn") g.activation = eltwise_chain(core::attr_s(a, "activation"), {})->front().alg;
  g.gates = op == "simple_rnn" ? 1 : op == "lstm" ? 4 : 3;
  g.bias_gates = g.lbr ? 4 : g.gates;
  // oneDNN's GRU order is (u, r, o) = PyTorch (z, r, n); vanilla and LSTM match PyTorch.
  g.perm = g.gru ? std::vector<int64_t>{1, 0, 2} : std::vector<int64_t>{0, 1, 2, 3};
  g.perm.resize(static_cast<size_t>(g.gates));
  return g;
}

Dims transpose_strides(const Shape& x, const core::Attrs& a) {
  const auto& perm = core::attr_ints(a, "perm");
  const Dims d = dims_of(x);
  Dims st(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) st[i - 1] = st[i] * d[i];
  const size_t r = x.size();
  Dims out;
  for (size_t i = 0; i < r; ++i) out.push_back(st[perm.empty() ? r - 1 - i : static_cast<size_t>(perm[i])]);
  return out;
}

Dims inverse_transpose_strides(const Shape& x, const core::Attrs& a) {
  const auto& perm = core::attr_ints(a, "perm");
  const size_t r = x.size();
  if (r == 0) return {1};
  Shape y(r);
  for (size_t i = 0; i < r; ++i) y[i] = x[perm.empty() ? r - 1 - i : static_cast<size_t>(perm[i])];
  const Dims d = dims_of(y);
  Dims st(r, 1);
  for (size_t i = r; i-- > 1;) st[i - 1] = st[i] * d[i];
  Dims out(r);
  for (size_t i = 0; i < r; ++i) out[perm.empty() ? r - 1 - i : static_cast<size_t>(perm[i])] = st[i];
  return out;
}

// ---------------------------------------------------------------- int8

const char* name(DataType t) {
  switch (t) {
    case DataType::f32:
      return "f32";
    case DataType::s8:
      return "s8";
    case DataType::u8:
      return "u8";
    case DataType::s32:
      return "s32";
  }
  return "?";
}

bool is_qlinear_twin(const std::string& op) {
  return op == "qlinear_add" || op == "qlinear_mul" || op == "qlinear_avg_pool2d" || op == "qlinear_global_avg_pool" ||
         op == "qlinear_max_pool2d" || op == "qlinear_concat" || op == "qlinear_leaky_relu" || op == "qlinear_sigmoid";
}

bool is_quantized_op(const std::string& op) {
  return op == "quantize_linear" || op == "dequantize_linear" || op == "qlinear_conv2d" || op == "qlinear_matmul" ||
         is_qlinear_twin(op);
}

namespace {

DataType data_type(core::DType t) {
  if (t == core::DType::I8) return DataType::s8;
  if (t == core::DType::U8) return DataType::u8;
  if (t == core::DType::I32) return DataType::s32;
  return DataType::f32;
}
DataType quant_type(const core::Attrs& a, const std::string& k) {
  return core::attr_s(a, k) == "uint8" ? DataType::u8 : DataType::s8;
}
float f32_attr(const core::Attrs& a, const std::string& k) { return static_cast<float>(core::attr_f(a, k)); }
int32_t zp_attr(const core::Attrs& a, const std::string& k) { return static_cast<int32_t>(core::attr_i(a, k)); }
std::string input_prefix(const std::string& op) { return op == "qlinear_conv2d" ? "x_" : "a_"; }

// oneDNN 2.6 adds an int32 bias to the accumulator in float32 (measured: float(acc) + float(bias), then the
// output scale): exact, and so ONNX's one rounding of the integer sum, when the bias is a float32 integer and
// the accumulator cannot reach 2^24.
constexpr double kFloatExact = 16777216.0;  // 2^24

Support qconv_support(const ir::Graph& g, const ir::Node& n) {
  const core::Attrs& a = n.attrs;
  const int64_t wzp = core::attr_i(a, "w_zero_point");
  const bool u8w = core::attr_s(a, "w_type") == "uint8";
  if (!u8w && wzp != 0)
    return Support::no("oneDNN 2.6's int8 convolution takes no weights zero point (set_zero_points on "
                       "DNNL_ARG_WEIGHTS is refused for convolution): int8 w_zero_point " +
                       std::to_string(wzp));
  if (u8w && wzp != 128)
    return Support::no("oneDNN 2.6's int8 convolution takes s8 weights without a zero point: uint8 weights map "
                       "exactly (shifted into s8) only with w_zero_point 128, got " +
                       std::to_string(wzp));
  if (core::attr_i(a, "bias") != 1) return Support::yes();
  const std::string& b = n.inputs.at(2);
  const auto it = g.initializers.find(b);
  if (it == g.initializers.end())
    return Support::no("the int32 bias of an int8 convolution is a constant here (oneDNN adds it in float32; "
                       "its exactness is checked on its values), '" + b + "' is not an initializer");
  bool nonzero = false;
  for (int64_t i = 0; i < it->second.numel(); ++i) {
    const double v = it->second.get(i);
    nonzero = nonzero || v != 0;
    if (static_cast<double>(static_cast<float>(v)) != v)
      return Support::no("oneDNN 2.6 adds the int32 bias in float32 (float(acc) + float(bias), measured); bias " +
                         std::to_string(static_cast<int64_t>(v)) + " is no float32 integer, which ONNX's exact "
                         "integer sum keeps");
  }
  if (!nonzero) return Support::yes();
  // The accumulator's bound: terms x - x_zp of the input type times w - w_zp.
  const auto [lo, hi] = core::dtype_range(g.types.at(n.inputs[0]).dtype);
  const double xzp = static_cast<double>(core::attr_i(a, "x_zero_point"));
  const double dx = std::max(xzp - lo, hi - xzp);
  const Shape& w = g.types.at(n.inputs[1]).shape;
  const double terms = static_cast<double>(core::numel(w) / w[0]);
  const double bound = terms * dx * 128.0;
  if (bound >= kFloatExact)
    return Support::no("oneDNN 2.6 adds the int32 bias to the accumulator in float32 (float(acc) + float(bias), "
                       "measured): with " + std::to_string(static_cast<int64_t>(terms)) +
                       " terms the accumulator can reach 2^24, two roundings where ONNX rounds the integer sum once");
  return Support::yes();
}

// A convolution's or matmul's output channels (the per-channel weights' count).
int64_t out_channels(const ir::Node& n) {
  return core::attr_i(n.attrs, n.op == "qlinear_conv2d" ? "out_channels" : "units");
}

// The float operator a twin quantizes (its geometry's name).
std::string twin_float_op(const std::string& op) { return op.substr(std::string("qlinear_").size()); }

// A twin's types, source scales and its one requantizing post-op (lower.h: QElemAttr), in float64 then float32.
QElemAttr twin_attr(const ir::Node& n) {
  const core::Attrs& a = n.attrs;
  std::vector<float> xs;  // float32, as ONNX Runtime stores them
  for (double v : core::attr_floats(a, "x_scales")) xs.push_back(static_cast<float>(v));
  const auto& zps = core::attr_ints(a, "x_zero_points");
  const double ys = static_cast<double>(f32_attr(a, "y_scale"));
  const double yzp = static_cast<double>(zp_attr(a, "y_zero_point"));
  QElemAttr q;
  q.type = quant_type(a, "to");
  if (n.op == "qlinear_concat") return q;
  if (n.op == "qlinear_add" || n.op == "qlinear_mul") {
    q.scales = xs;
    // The sources' zero points as one shift of the scaled sum (a product's are refused unless zero).
    double shift = 0;
    if (n.op == "qlinear_add")
      for (size_t i = 0; i < 2; ++i) shift += static_cast<double>(xs[i]) * static_cast<double>(zps[i]);
    q.linear.push_back({static_cast<float>(1.0 / ys), static_cast<float>(yzp - shift / ys)});
    return q;
  }
  const double ratio = static_cast<double>(xs[0]) / ys;
  q.linear.push_back({static_cast<float>(ratio), static_cast<float>(yzp - ratio * static_cast<double>(zps[0]))});
  if (q.linear[0] == std::pair<float, float>{1.0f, 0.0f}) q.linear.clear();  // the output quantized as the input
  return q;
}

Support twin_support(const ir::Node& n, const std::vector<Shape>& in, const Shape& y) {
  const core::Attrs& a = n.attrs;
  const auto& scales = core::attr_floats(a, "x_scales");
  const auto& zps = core::attr_ints(a, "x_zero_points");
  const bool zero_zps = std::all_of(zps.begin(), zps.end(), [](int64_t z) { return z == 0; });
  if (n.op == "qlinear_sigmoid")
    return Support::no("oneDNN 2.6 has no int8 eltwise_logistic (its eltwise descriptor on s8/u8 is refused, "
                       "measured), and its eltwise takes no scales to requantize");
  if (n.op == "qlinear_mul" && !zero_zps)
    return Support::no("oneDNN 2.6's binary takes no zero points (set_zero_points is refused, measured) and a "
                       "product's source zero points are no shift a post-op can carry: nonzero x_zero_points");
  if (n.op == "qlinear_leaky_relu" && !zero_zps)
    return Support::no("oneDNN 2.6's eltwise takes no zero points (set_zero_points is refused, measured) and "
                       "leaky_relu(x - zp) is no shift of leaky_relu(x): x_zero_point " + std::to_string(zps[0]));
  if (n.op == "qlinear_concat") {
    const float ys = f32_attr(a, "y_scale");
    const int64_t yzp = core::attr_i(a, "y_zero_point");
    for (size_t i = 0; i < scales.size(); ++i)
      if (static_cast<float>(scales[i]) != ys || zps[i] != yzp)
        return Support::no("oneDNN 2.6's concat takes no scales and no zero points (set_scales and set_zero_points "
                           "are refused, measured), so it only copies: input " + std::to_string(i) +
                           " is quantized unlike the output");
  }
  // One eltwise_linear post-op: two would meet onednn-postop-repeated-eltwise-params (the second eltwise of an
  // algorithm takes the first one's alpha and beta, measured on the int8 binary too).
  for (const auto& [alpha, beta] : twin_attr(n).linear)
    if (!std::isfinite(alpha) || !std::isfinite(beta) || (alpha != 0 && std::abs(alpha) < FLT_MIN))
      return Support::no("the requantization's one eltwise_linear post-op (alpha x_scale / y_scale, beta the zero "
                         "points' shift; a second linear post-op takes the first one's parameters in oneDNN 2.6) "
                         "has no finite normal float32 constants for these scales");
  // A single input's zero point folded into beta (-alpha * x_zero_point) cancels against alpha * x in float32:
  // beyond 2^22 the sum's ulp exceeds half a step and the integers near x_zero_point (y_zero_point there) are lost
  // (campaign seed 13601: qlinear_max_pool2d, y_scale FLT_MIN, x_zero_point 127, the maximum 127 gave 0 for -2).
  if (n.inputs.size() == 1 && zps[0] != 0)
    for (const auto& [alpha, beta] : twin_attr(n).linear)
      if (std::abs(static_cast<double>(alpha) * static_cast<double>(zps[0])) >= 0x1p22)
        return Support::no("the requantization's eltwise_linear post-op folds the zero point into beta = y_zero_point "
                           "- alpha * x_zero_point, which cancels against alpha * x beyond 2^22 in float32 (alpha "
                           "x_scale / y_scale); the integers near the zero point are not held");
  if (n.op == "qlinear_avg_pool2d") {
    const PoolGeo g = pool_geo(twin_float_op(n.op), in.at(0), y, a);
    if (!g.factor.empty())
      return Support::no("Quorum does not lower the rescale of an int8 average pool whose windows reach into "
                         "ceil_mode's extra padding with count_include_pad (a binary post-op it has no step for)");
    bool padded = false;
    for (size_t i = 0; i < g.pad_l.size(); ++i) padded = padded || g.pad_l[i] != 0 || g.pad_r[i] != 0;
    if (g.alg == Alg::pooling_avg_include_padding && padded && zps[0] != 0)
      return Support::no("oneDNN 2.6's int8 pooling_avg_include_padding counts padding as the integer 0 where "
                         "ONNX pads with the real 0 (the zero point " + std::to_string(zps[0]) + ")");
  }
  return Support::yes();
}

}  // namespace

Support quant_support(const ir::Graph& g, const ir::Node& n) {
  if ((n.op == "quantize_linear" || n.op == "dequantize_linear") && n.attrs.count("zero_points") &&
      !core::attr_ints(n.attrs, "zero_points").empty())
    return Support::no("per-axis zero points (zero_points along axis): oneDNN 2.6's reorder takes one common zero "
                       "point (set_zero_points with a per-dimension mask throws 'could not set zero points "
                       "primitive attribute'; per-axis scales alone are lowered)");
  if (is_qlinear_twin(n.op)) {
    std::vector<Shape> in;
    for (const auto& v : n.inputs) in.push_back(g.types.at(v).shape);
    return twin_support(n, in, g.types.at(n.outputs.at(0)).shape);
  }
  if ((n.op == "qlinear_conv2d" || n.op == "qlinear_matmul") && ops::per_channel_weight(n.attrs)) {
    const int64_t shift = quant_type(n.attrs, "w_type") == DataType::u8 ? 128 : 0;
    const std::vector<double> zps = ops::weight_zero_points(n.attrs, out_channels(n));
    for (size_t c = 0; c < zps.size(); ++c)
      if (static_cast<int64_t>(zps[c]) != shift)
        return Support::no("oneDNN 2.6 takes per-channel weight scales as per-channel output scales, but no "
                           "per-channel weights zero point (set_zero_points on the weights takes one common value, "
                           "and the convolution none): channel " + std::to_string(c) + "'s w_zero_point " +
                           std::to_string(static_cast<int64_t>(zps[c])) +
                           (shift ? " (uint8 weights map only with 128)" : ""));
  }
  if (n.op == "qlinear_conv2d") return qconv_support(g, n);
  return Support::yes();
}

std::vector<core::DType> in_types(const ir::Graph& g, const ir::Node& n) {
  std::vector<core::DType> t;
  for (const auto& v : n.inputs) t.push_back(g.types.count(v) ? g.types.at(v).dtype : core::DType::F32);
  return t;
}

QuantAttr quant_attr(const ir::Node& n, const std::vector<core::DType>& in_types) {
  if (in_types.empty()) throw ConversionError("the int8 lowering of '" + n.op + "' needs its operands' types");
  const core::Attrs& a = n.attrs;
  const std::string x = input_prefix(n.op);
  QuantAttr q;
  q.src = data_type(in_types[0]);
  q.dst = quant_type(a, "to");
  const float xs = f32_attr(a, x + "scale"), ws = f32_attr(a, "w_scale"), ys = f32_attr(a, "y_scale");
  const float xw = xs * ws;  // float32, rounded: the multiplier ONNX Runtime forms (the reference's stored one)
  q.scale = xw / ys;
  if (ops::per_channel_weight(a))
    for (double w : ops::weight_scales(a, out_channels(n))) q.scales.push_back(xs * static_cast<float>(w) / ys);
  q.src_zp = zp_attr(a, x + "zero_point");
  q.wei_zp = zp_attr(a, "w_zero_point") - (quant_type(a, "w_type") == DataType::u8 ? 128 : 0);
  q.dst_zp = zp_attr(a, "y_zero_point");
  return q;
}

QMatmulGeo qmatmul_geo(const Shape& x, const core::Attrs& a) {
  QMatmulGeo g;
  g.k = x.back();
  g.n = core::attr_i(a, "units");
  g.rows = core::numel(x) / std::max<int64_t>(g.k, 1);
  return g;
}

namespace {

// The quantized twins (lower.h: QElemAttr): the float operator's geometry, oneDNN's int8 primitive.
void lower_twin(const ir::Node& n, const std::vector<Shape>& in, const std::vector<Shape>& out, StepSink& sink) {
  const Support s = twin_support(n, in, out.at(0));
  if (!s.ok) throw ConversionError(s.reason);
  const core::Attrs& a = n.attrs;
  const std::string& y = n.outputs.at(0);
  const std::string& x0 = n.inputs.at(0);
  const Shape& ys = out.at(0);
  const QElemAttr q = twin_attr(n);
  if (n.op == "qlinear_add" || n.op == "qlinear_mul") {
    sink.qbinary(n.op == "qlinear_add" ? Alg::binary_add : Alg::binary_mul, q, dims_of(ys),
                 dims_of(pad_rank(in.at(0), ys.size())), x0, dims_of(pad_rank(in.at(1), ys.size())), n.inputs.at(1), y);
  } else if (n.op == "qlinear_concat") {
    std::vector<Dims> ds;
    for (const auto& sh : in) ds.push_back(dims_of(sh));
    sink.qconcat(q.type, dims_of(ys), norm_axis(core::attr_i(a, "axis"), ys.size()), ds, n.inputs, y);
  } else if (n.op == "qlinear_leaky_relu") {
    const auto chain = eltwise_chain(twin_float_op(n.op), a);
    if (!chain || chain->size() != 1) throw ConversionError("leaky_relu is no single eltwise step");
    sink.qeltwise(chain->front(), q, dims_of(in.at(0)), x0, y);
  } else {
    sink.qpool(pool_geo(twin_float_op(n.op), in.at(0), ys, a), q, x0, y);
  }
}

// quantize_linear and dequantize_linear as one reorder each; qlinear_conv2d and qlinear_matmul as one int8
// convolution or matmul, uint8 weights shifted into s8 first.
void lower_quantized(const ir::Node& n, const std::vector<Shape>& in, const std::vector<Shape>& out,
                     const std::vector<core::DType>& types, StepSink& sink) {
  if (types.empty()) throw ConversionError("the int8 lowering of '" + n.op + "' needs its operands' types");
  const core::Attrs& a = n.attrs;
  const std::string& y = n.outputs.at(0);
  const std::string& x0 = n.inputs.at(0);
  if (n.op == "quantize_linear" || n.op == "dequantize_linear") {
    // Per axis: one output scale per index of the axis (mask 1 << axis), the zero point common (quant_support).
    const bool quantize = n.op == "quantize_linear";
    const auto rank = static_cast<int64_t>(in[0].size());
    QReorderGeo q{dims_of(in[0]), quantize ? DataType::f32 : data_type(types[0]),
                  quantize ? quant_type(a, "to") : DataType::f32, 0, quantize ? 0 : zp_attr(a, "zero_point"),
                  quantize ? zp_attr(a, "zero_point") : 0};
    // oneDNN's reorder multiplies: a quantization is x * (1 / scale) in float32.
    auto factor = [&](double s) { return quantize ? 1.0f / static_cast<float>(s) : static_cast<float>(s); };
    q.scale = factor(f32_attr(a, "scale"));
    if (ops::per_channel_weight(a, "")) {
      const int64_t axis = core::attr_i(a, "axis") < 0 ? core::attr_i(a, "axis") + rank : core::attr_i(a, "axis");
      q.axis = static_cast<int>(axis);
      for (double s : ops::weight_scales(a, in[0][static_cast<size_t>(axis)], "")) q.scales.push_back(factor(s));
    }
    sink.qreorder(q, x0, y);
    return;
  }
  if (is_qlinear_twin(n.op)) {
    lower_twin(n, in, out, sink);
    return;
  }
  const QuantAttr q = quant_attr(n, types);
  std::string w = n.inputs.at(1);
  if (quant_type(a, "w_type") == DataType::u8) {
    sink.eltwise({Alg::eltwise_linear, 1, -128}, dims_of(in[1]), w, "%w_s8");  // exact: integers below 2^24
    w = "%w_s8";
  }
  if (n.op == "qlinear_conv2d") {
    const ConvGeo g = conv_geo(n.op, in[0], out[0], a);
    sink.qconv(g, q, x0, w, g.bias ? n.inputs.at(2) : std::string(), y);
  } else {
    sink.qmatmul(qmatmul_geo(in[0], a), q, x0, w, y);
  }
}

}  // namespace

Support node_support(const ir::Graph& g, const ir::Node& n) {
  if (is_quantized_op(n.op)) return quant_support(g, n);
  for (const auto& v : n.inputs)
    if (g.types.count(v) && !core::is_float(g.types.at(v).dtype))
      return Support::no("oneDNN primitives here take float32 tensors, input '" + v + "' is " +
                         core::to_string(g.types.at(v).dtype));
  if (is_resize(n.op)) return resize_support(n, g.types.at(n.inputs[0]).shape, g.types.at(n.outputs[0]).shape);
  if (is_rnn(n.op) && core::attr_f(n.attrs, "clip") > 0)
    return Support::no("oneDNN 2.6's RNN primitives have no cell clip (ONNX clip)");
  if (n.op == "lstm" && core::attr_i(n.attrs, "input_forget") == 1)
    return Support::no("oneDNN 2.6's lstm has no coupled input and forget gates (ONNX input_forget)");
  if ((n.op == "lstm" || n.op == "gru") && n.attrs.count("activation") && core::attr_s(n.attrs, "activation") != "tanh")
    return Support::no("oneDNN 2.6's " + n.op + " primitives fix their activations (sigmoid gates, tanh cell): "
                       "only the vanilla RNN takes an activation kind");
  return Support::yes();
}

// ---------------------------------------------------------------- the forward steps

bool forward_mapped(const std::string& op) {
  return is_reshape(op) || std::find(eltwise_ops().begin(), eltwise_ops().end(), op) != eltwise_ops().end() ||
         op == "softsign" || binary_alg(op) || op == "sum" || op == "concat" || op == "transpose" || reduce_alg(op) ||
         op == "softmax" || op == "log_softmax" || is_pool(op) || is_conv(op) || op == "dense" || op == "matmul" ||
         op == "batch_norm" || op == "lrn" || op == "layer_norm" || is_resize(op) || is_rnn(op) ||
         is_quantized_op(op);
}

void lower_forward(const ir::Node& n, const std::vector<Shape>& in, const std::vector<Shape>& out, Prop prop,
                   StepSink& sink, const std::vector<core::DType>& types) {
  sink.node(n);
  if (is_quantized_op(n.op)) {
    lower_quantized(n, in, out, types, sink);
    return;
  }
  const std::string& y = n.outputs.at(0);
  const Shape& x = in.at(0);
  const Shape& ys = out.at(0);
  const std::string& x0 = n.inputs.at(0);
  const core::Attrs& a = n.attrs;
  auto operand = [&](size_t i) { return i < n.inputs.size() ? n.inputs[i] : std::string(); };
  if (is_reshape(n.op)) {
    sink.alias(y, x0);
  } else if (n.op == "softsign") {
    // x / linear(1, 1)(abs(x)) with a binary division; d/dx = 1 / (1 + |x|)^2 from the kept denominator.
    const Dims d = dims_of(x);
    sink.eltwise({Alg::eltwise_abs, 0, 0}, d, x0, "%abs");
    sink.eltwise({Alg::eltwise_linear, 1, 1}, d, "%abs", y + "_den");
    sink.binary(Alg::binary_div, d, d, x0, d, y + "_den", y);
  } else if (is_pool(n.op)) {
    const PoolGeo g = pool_geo(n.op, x, ys, a);
    if (g.factor.empty()) {
      sink.pool(prop, g, x0, y);
    } else {
      const std::string f = "factor_" + n.name;
      sink.constant(f, "factor_" + n.name, g.factor_shape, g.factor, "avg-pool rescale factors of " + n.name);
      sink.pool(prop, g, x0, "%pool");
      sink.binary(Alg::binary_mul, g.dst, g.dst, "%pool", dims_of(g.factor_shape), f, y);
    }
  } else if (const auto chain = eltwise_chain(n.op, a)) {
    const Dims d = dims_of(x);
    std::string cur = x0;
    for (size_t i = 0; i < chain->size(); ++i) {
      const std::string next = i + 1 == chain->size() ? y : y + "_step" + std::to_string(i);
      sink.eltwise((*chain)[i], d, cur, next);
      cur = next;
    }
  } else if (const auto alg = binary_alg(n.op)) {
    sink.binary(*alg, dims_of(ys), dims_of(pad_rank(x, ys.size())), x0, dims_of(pad_rank(in.at(1), ys.size())),
                n.inputs.at(1), y);
  } else if (n.op == "sum") {
    const bool same = std::all_of(in.begin(), in.end(), [&](const Shape& s) { return s == ys; });
    if (same) {
      sink.sum(dims_of(ys), n.inputs, y);
    } else {
      // Shapes differ: a chain of broadcasting adds.
      sink.binary(Alg::binary_add, dims_of(ys), dims_of(pad_rank(x, ys.size())), x0,
                  dims_of(pad_rank(in.at(1), ys.size())), n.inputs.at(1), y);
      for (size_t i = 2; i < n.inputs.size(); ++i)
        sink.binary(Alg::binary_add, dims_of(ys), dims_of(ys), y, dims_of(pad_rank(in[i], ys.size())), n.inputs[i], y);
    }
  } else if (n.op == "concat") {
    std::vector<Dims> ds;
    for (const auto& s : in) ds.push_back(dims_of(s));
    sink.concat(dims_of(ys), norm_axis(core::attr_i(a, "axis"), ys.size()), ds, n.inputs, y);
  } else if (n.op == "transpose") {
    sink.transpose(dims_of(ys), transpose_strides(x, a), x0, y);
  } else if (const auto ralg = reduce_alg(n.op)) {
    sink.reduce(*ralg, dims_of(x), x0, dims_of(reduce_keep(x, a)), y);
  } else if (n.op == "softmax" || n.op == "log_softmax") {
    sink.softmax(prop, softmax_geo(n.op, x, a), x0, y);
  } else if (is_conv(n.op)) {
    const ConvGeo g = conv_geo(n.op, x, ys, a);
    sink.conv(prop, g, x0, n.inputs.at(1), g.prim_bias() ? operand(2) : std::string(), g.truncated ? "%conv" : y);
    if (g.truncated && g.bias) {
      // The rows no tap reaches hold only the bias: added to the whole output, [1, OC, 1...].
      Dims bd(ys.size(), 1);
      bd[1] = g.oc;
      sink.binary(Alg::binary_add, g.out, g.out, "%conv", bd, operand(2), y);
    } else if (g.truncated) {
      sink.alias(y, "%conv");
    }
  } else if (n.op == "dense") {
    const DenseGeo g = dense_geo(x, a);
    sink.dense(prop, g, x0, n.inputs.at(1), g.bias ? operand(2) : std::string(), y);
  } else if (n.op == "matmul") {
    sink.matmul(dims_of(pad_rank(x, ys.size())), x0, dims_of(pad_rank(in.at(1), ys.size())), n.inputs.at(1),
                dims_of(ys), y);
  } else if (n.op == "batch_norm") {
    sink.batch_norm(prop, bn_geo(x, a), n.inputs, y);
  } else if (n.op == "lrn") {
    sink.lrn(prop, lrn_geo(x, a), x0, y);
  } else if (n.op == "layer_norm") {
    sink.layer_norm(ln_geo(x, a), x0, n.inputs.at(1), n.inputs.at(2), y);
  } else if (is_resize(n.op)) {
    sink.resample(prop, resample_geo(n.op, x, ys), x0, y);
  } else if (is_rnn(n.op)) {
    sink.rnn(prop, rnn_geo(n.op, x, a), n.inputs, y);
  } else {
    throw ConversionError("the oneDNN lowering maps no forward steps for operator '" + n.op + "'");
  }
}

// ---------------------------------------------------------------- the backward steps

bool backward_mapped(const ir::Node& n) {
  const std::string& op = n.op;
  return is_reshape(op) || op == "transpose" || op == "concat" || op == "matmul" || eltwise_chain(op, n.attrs) ||
         op == "softsign" || binary_alg(op) || op == "sum" || reduce_alg(op) ||
         op == "softmax" || op == "log_softmax" || is_pool(op) || is_conv(op) || op == "dense" || op == "batch_norm" ||
         op == "layer_norm" || op == "lrn" || is_resize(op) || is_rnn(op);
}

void lower_backward(const ir::Node& n, const std::vector<Shape>& in, const std::vector<Shape>& out, StepSink& sink) {
  if (!backward_mapped(n)) throw ConversionError("the oneDNN lowering maps no backward steps for '" + n.op + "'");
  sink.node(n);
  const std::string& y = n.outputs.at(0);
  const std::string gy = grad(y);
  const Shape& x = in.at(0);
  const Shape& ys = out.at(0);
  const std::string& x0 = n.inputs.at(0);
  const core::Attrs& a = n.attrs;
  // The gradient `g` (dims of y) summed down to input i's shape (NumPy broadcasting), added to it.
  auto sum_to = [&](const std::string& g, size_t i) {
    const Dims keep = dims_of(pad_rank(in.at(i), ys.size()));
    if (keep == dims_of(ys)) {
      sink.alias(grad(n.inputs[i]), g);
    } else {
      sink.reduce(Alg::reduction_sum, dims_of(ys), g, keep, grad(n.inputs[i]));
    }
  };
  if (is_reshape(n.op)) {
    // The same elements in x's shape.
    sink.alias(grad(x0), gy);
  } else if (n.op == "transpose") {
    // The inverse transpose: gy read in x's axis order (x's axis perm[i] is y's axis i).
    sink.transpose(dims_of(x), inverse_transpose_strides(x, a), gy, grad(x0));
  } else if (n.op == "matmul") {
    // dA = dY @ B^T and dB = A^T @ dY over the output's batch dims (the transposed operand read in
    // place: last two dims and strides swapped), then summed down to each operand's shape.
    const Dims yd = dims_of(ys), ad = dims_of(pad_rank(x, ys.size())), bd = dims_of(pad_rank(in.at(1), ys.size()));
    const size_t r = yd.size();
    auto dense = [](const Dims& d) {
      Dims st(d.size(), 1);
      for (size_t i = d.size(); i-- > 1;) st[i - 1] = st[i] * d[i];
      return st;
    };
    auto transposed = [&](const Dims& d, Dims& td) {
      Dims st = dense(d);
      td = d;
      std::swap(td[r - 1], td[r - 2]);
      std::swap(st[r - 1], st[r - 2]);
      return st;
    };
    Dims bt, at;
    const Dims bts = transposed(bd, bt), ats = transposed(ad, at);
    Dims ga = yd, gb = yd;
    ga[r - 1] = ad[r - 1];
    gb[r - 2] = bd[r - 2];
    sink.matmul_strided(yd, {}, gy, bt, bts, n.inputs.at(1), ga, "@ga");
    if (ga == ad) sink.alias(grad(x0), "@ga");
    else sink.reduce(Alg::reduction_sum, ga, "@ga", ad, grad(x0));
    sink.matmul_strided(at, ats, x0, yd, {}, gy, gb, "@gb");
    if (gb == bd) sink.alias(grad(n.inputs[1]), "@gb");
    else sink.reduce(Alg::reduction_sum, gb, "@gb", bd, grad(n.inputs[1]));
  } else if (n.op == "concat") {
    // Each input's part of gy: a view at its offset along the axis, gy's dense strides.
    const int axis = norm_axis(core::attr_i(a, "axis"), ys.size());
    const Dims yd = dims_of(ys);
    Dims st(yd.size(), 1);
    for (size_t i = yd.size(); i-- > 1;) st[i - 1] = st[i] * yd[i];
    int64_t offset = 0;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      sink.view(dims_of(in.at(i)), st, offset * st[static_cast<size_t>(axis)], gy, grad(n.inputs[i]));
      offset += in[i][static_cast<size_t>(axis)];
    }
  } else if (const auto chain = eltwise_chain(n.op, a)) {
    // Each step's backward on the input that step saw, last step first.
    const Dims d = dims_of(x);
    for (size_t i = chain->size(); i-- > 0;)
      sink.eltwise_backward((*chain)[i], d, i == 0 ? x0 : y + "_step" + std::to_string(i - 1),
                            i + 1 == chain->size() ? gy : "@dx", "@dx");
    sink.alias(grad(x0), "@dx");
  } else if (n.op == "softsign") {
    // d/dx = 1 / (1 + |x|)^2 from the forward's denominator.
    const Dims d = dims_of(x);
    sink.eltwise({Alg::eltwise_square, 0, 0}, d, y + "_den", "%den2");
    sink.binary(Alg::binary_div, d, d, gy, d, "%den2", "@dx");
    sink.alias(grad(x0), "@dx");
  } else if (const auto alg = binary_alg(n.op)) {
    const Dims od = dims_of(ys), ad = dims_of(pad_rank(x, ys.size())), bd = dims_of(pad_rank(in.at(1), ys.size()));
    const std::string& x1 = n.inputs.at(1);
    switch (*alg) {
      case Alg::binary_add:
        sum_to(gy, 0);
        sum_to(gy, 1);
        break;
      case Alg::binary_sub:
        sum_to(gy, 0);
        sink.eltwise({Alg::eltwise_linear, -1, 0}, od, gy, "@db");
        sum_to("@db", 1);
        break;
      case Alg::binary_mul:
        sink.binary(Alg::binary_mul, od, od, gy, bd, x1, "@da");
        sink.binary(Alg::binary_mul, od, od, gy, ad, x0, "@db");
        sum_to("@da", 0);
        sum_to("@db", 1);
        break;
      case Alg::binary_div:
        // d(a/b)/db = -(a/b)/b, from the forward result y, as -gy * (y / b) (libtorch's order):
        // (gy / b) * y overflows where gy / b does (gy = -3.8e37, b = 0.1) although the gradient fits.
        sink.binary(Alg::binary_div, od, od, gy, bd, x1, "@da");
        sink.binary(Alg::binary_div, od, od, y, bd, x1, "%q");
        sink.binary(Alg::binary_mul, od, od, gy, od, "%q", "%p");
        sink.eltwise({Alg::eltwise_linear, -1, 0}, od, "%p", "@db");
        sum_to("@da", 0);
        sum_to("@db", 1);
        break;
      default:
        // maximum / minimum: a comparison mask sends ties to the first operand, as the reference does.
        // The second operand's gradient is gy times the complement mask, not gy - da: an infinite gy
        // gives da = inf * 0 = NaN where a is not selected, and gy - da would make b's NaN too.
        sink.binary(*alg == Alg::binary_max ? Alg::binary_ge : Alg::binary_le, od, ad, x0, bd, x1, "@mask");
        sink.binary(Alg::binary_mul, od, od, gy, od, "@mask", "@da");
        sink.eltwise({Alg::eltwise_linear, -1, 1}, od, "@mask", "%not_mask");
        sink.binary(Alg::binary_mul, od, od, gy, od, "%not_mask", "@db");
        sum_to("@da", 0);
        sum_to("@db", 1);
        break;
    }
  } else if (n.op == "sum") {
    for (size_t i = 0; i < n.inputs.size(); ++i) sum_to(gy, i);
  } else if (n.op == "reduce_prod") {
    const Dims xd = dims_of(x), kd = dims_of(reduce_keep(x, a));
    sink.prod_of_others(xd, x0, kd, "%others");
    sink.binary(Alg::binary_mul, xd, xd, "%others", kd, gy, grad(x0));
  } else if (n.op == "reduce_max" || n.op == "reduce_min") {
    // The elements equal to their slice's extreme; a NaN extreme (the slice holds a NaN) is matched
    // by the slice's NaNs, which equality misses (NaN != NaN): the first one gets the gradient, as
    // the catalogue's first NaN does. Of several matches only the first in row-major order: each
    // match scores numel - flat index (all distinct, > 0), the slice maximum is the first match, and
    // equality with it leaves exactly that one. A slice without a match (oneDNN's min of {inf, inf}
    // is FLT_MAX) keeps none: its score maximum 0 equals every non-match's score, multiplied out.
    const Dims xd = dims_of(x), kd = dims_of(reduce_keep(x, a));
    sink.binary(Alg::binary_ne, xd, xd, x0, xd, x0, "%nan_x");
    sink.binary(Alg::binary_ne, kd, kd, y, kd, y, "%nan_y");
    sink.binary(Alg::binary_eq, xd, xd, x0, kd, y, "%eq");
    sink.binary(Alg::binary_mul, xd, xd, "%nan_x", kd, "%nan_y", "%both_nan");
    sink.binary(Alg::binary_max, xd, xd, "%eq", xd, "%both_nan", "@match");
    const int64_t count = core::numel(x);
    std::vector<float> rank(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) rank[static_cast<size_t>(i)] = static_cast<float>(count - i);
    const std::string r = "rank_" + n.name;
    sink.constant(r, r, x, rank, "numel - flat index, scoring the first extreme of " + n.name);
    sink.binary(Alg::binary_mul, xd, xd, "@match", xd, r, "@score");
    sink.reduce(Alg::reduction_max, xd, "@score", kd, "%best");
    sink.binary(Alg::binary_eq, xd, xd, "@score", kd, "%best", "%first");
    sink.binary(Alg::binary_mul, xd, xd, "@match", xd, "%first", "%one");
    sink.binary(Alg::binary_mul, xd, xd, "%one", kd, gy, grad(x0));
  } else if (n.op == "reduce_sum" || n.op == "reduce_mean") {
    const Shape keep = reduce_keep(x, a);
    if (n.op == "reduce_sum") {
      sink.broadcast(keep, gy, x, grad(x0));
    } else {
      sink.broadcast(keep, gy, x, "%b");
      sink.eltwise({Alg::eltwise_linear, static_cast<float>(core::numel(keep)) / static_cast<float>(core::numel(x)), 0},
                   dims_of(x), "%b", grad(x0));
    }
  } else if (n.op == "softmax" || n.op == "log_softmax") {
    sink.softmax_backward(softmax_geo(n.op, x, a), x0, y, gy, grad(x0));
  } else if (is_pool(n.op)) {
    const PoolGeo g = pool_geo(n.op, x, ys, a);
    if (g.factor.empty()) {
      sink.pool_backward(g, x0, gy, grad(x0));
    } else {
      // The rescale is y = pool(x) * factor, so the pool sees gy * factor.
      const std::string f = "factor_" + n.name;
      sink.constant(f, "factor_" + n.name, g.factor_shape, g.factor, "avg-pool rescale factors of " + n.name);
      sink.binary(Alg::binary_mul, g.dst, g.dst, gy, dims_of(g.factor_shape), f, "%gy");
      sink.pool_backward(g, x0, "%gy", grad(x0));
    }
  } else if (is_conv(n.op)) {
    const ConvGeo g = conv_geo(n.op, x, ys, a);
    const std::string db = n.inputs.size() > 2 ? grad(n.inputs[2]) : std::string();
    sink.conv_backward(g, x0, n.inputs.at(1), gy, {grad(x0), grad(n.inputs.at(1)), g.prim_bias() ? db : ""});
    if (g.bias && !g.prim_bias()) {
      // Truncated: the bias reached the whole output, [1, OC, 1...].
      Dims bd(ys.size(), 1);
      bd[1] = g.oc;
      sink.reduce(Alg::reduction_sum, g.out, gy, bd, db);
    }
  } else if (n.op == "dense") {
    const DenseGeo g = dense_geo(x, a);
    sink.dense_backward(g, x0, n.inputs.at(1), gy,
                        {grad(x0), grad(n.inputs.at(1)), g.bias ? grad(n.inputs.at(2)) : std::string()});
  } else if (n.op == "batch_norm") {
    const BnGeo g = bn_geo(x, a);
    sink.batch_norm_backward(g, n.inputs, gy, {"@dx", "@dscale", "@dshift"});
    const Dims cd{x.at(1)};
    if (g.batch_stats) {
      // Normalised with batch statistics: mean/var do not reach the output.
      sink.zeros(cd, "@dmean");
      sink.zeros(cd, "@dvar");
    } else {
      // oneDNN has no gradient for the mean/var parameters: dmean = -scale*rstd*dshift,
      // dvar = -0.5*scale*rstd^2*dscale, rstd = (var + eps)^-0.5. The scale is multiplied last:
      // scale*rstd^2 first overflowed float32 where the gradient fits (scale 0.4*FLT_MAX, rstd^2 = 4,
      // dscale 0.12: dvar -inf where it is -3.3e37, tests/backends/stored_statistics_test.cpp).
      const std::string& scale = n.inputs.at(1);
      sink.eltwise({Alg::eltwise_linear, 1, g.eps}, cd, n.inputs.at(4), "@t");
      sink.eltwise({Alg::eltwise_pow, 1, -0.5f}, cd, "@t", "%rstd");
      sink.eltwise({Alg::eltwise_pow, 1, -1}, cd, "@t", "%rstd2");
      sink.binary(Alg::binary_mul, cd, cd, "%rstd", cd, "@dshift", "%m");
      sink.eltwise({Alg::eltwise_linear, -1, 0}, cd, "%m", "%mn");
      sink.binary(Alg::binary_mul, cd, cd, scale, cd, "%mn", "@dmean");
      sink.binary(Alg::binary_mul, cd, cd, "%rstd2", cd, "@dscale", "%v");
      sink.eltwise({Alg::eltwise_linear, -0.5f, 0}, cd, "%v", "%vh");
      sink.binary(Alg::binary_mul, cd, cd, scale, cd, "%vh", "@dvar");
    }
    const char* local[] = {"@dx", "@dscale", "@dshift", "@dmean", "@dvar"};
    for (size_t i = 0; i < 5 && i < n.inputs.size(); ++i) sink.alias(grad(n.inputs[i]), local[i]);
  } else if (n.op == "layer_norm") {
    sink.layer_norm_backward(ln_geo(x, a), {x0, n.inputs.at(1), n.inputs.at(2)}, gy,
                             {grad(x0), grad(n.inputs[1]), grad(n.inputs[2])});
  } else if (n.op == "lrn") {
    sink.lrn_backward(lrn_geo(x, a), x0, gy, grad(x0));
  } else if (is_resize(n.op)) {
    sink.resample_backward(resample_geo(n.op, x, ys), x0, gy, grad(x0));
  } else if (is_rnn(n.op)) {
    // One backward primitive gives every gradient: x, w_ih, w_hh and both biases (b_ih and b_hh
    // are the one combined oneDNN bias, so they receive the same per-gate blocks).
    std::vector<std::string> grads;
    for (const auto& i : n.inputs) grads.push_back(grad(i));
    sink.rnn_backward(rnn_geo(n.op, x, a), n.inputs, gy, grads);
  }
}

// ---------------------------------------------------------------- recording

namespace {

std::string fmt(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}
std::string fmt(const std::vector<std::string>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + v[i];
  return s + ")";
}
std::string fmt(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%a", static_cast<double>(v));
  return buf;
}
std::string fmt(const Eltwise& e) { return std::string(name(e.alg)) + "(" + fmt(e.alpha) + "," + fmt(e.beta) + ")"; }

}  // namespace

void RecordingSink::node(const ir::Node& n) {
  calls_.push_back("node " + n.name + " " + n.op);
  inner_.node(n);
}
void RecordingSink::alias(const std::string& y, const std::string& x) {
  calls_.push_back("alias " + y + " = " + x);
  inner_.alias(y, x);
}
void RecordingSink::constant(const std::string& v, const std::string& hint, const Shape& shape,
                             const std::vector<float>& data, const std::string& comment) {
  std::string s = "constant " + v + " " + hint + " " + fmt(Dims(shape.begin(), shape.end())) + " {";
  for (float f : data) s += fmt(f) + ",";
  calls_.push_back(s + "} " + comment);
  inner_.constant(v, hint, shape, data, comment);
}
void RecordingSink::eltwise(const Eltwise& e, const Dims& d, const std::string& x, const std::string& y) {
  calls_.push_back("eltwise " + fmt(e) + " " + fmt(d) + " " + y + " = f(" + x + ")");
  inner_.eltwise(e, d, x, y);
}
void RecordingSink::binary(Alg alg, const Dims& out, const Dims& ad, const std::string& a, const Dims& bd,
                           const std::string& b, const std::string& y) {
  calls_.push_back(std::string("binary ") + name(alg) + " " + fmt(out) + " " + y + " = " + a + fmt(ad) + ", " + b +
                   fmt(bd));
  inner_.binary(alg, out, ad, a, bd, b, y);
}
void RecordingSink::sum(const Dims& d, const std::vector<std::string>& xs, const std::string& y) {
  calls_.push_back("sum " + fmt(d) + " " + y + " = " + fmt(xs));
  inner_.sum(d, xs, y);
}
void RecordingSink::concat(const Dims& out, int axis, const std::vector<Dims>& ds, const std::vector<std::string>& xs,
                           const std::string& y) {
  std::string s = "concat " + fmt(out) + " axis " + std::to_string(axis) + " " + y + " = " + fmt(xs);
  for (const auto& d : ds) s += " " + fmt(d);
  calls_.push_back(s);
  inner_.concat(out, axis, ds, xs, y);
}
void RecordingSink::transpose(const Dims& yd, const Dims& st, const std::string& x, const std::string& y) {
  calls_.push_back("transpose " + fmt(yd) + " strides " + fmt(st) + " " + y + " = " + x);
  inner_.transpose(yd, st, x, y);
}
void RecordingSink::view(const Dims& yd, const Dims& st, int64_t offset, const std::string& x, const std::string& y) {
  calls_.push_back("view " + fmt(yd) + " strides " + fmt(st) + " offset " + std::to_string(offset) + " " + y + " = " +
                   x);
  inner_.view(yd, st, offset, x, y);
}
void RecordingSink::reduce(Alg alg, const Dims& xd, const std::string& x, const Dims& keep, const std::string& y) {
  calls_.push_back(std::string("reduce ") + name(alg) + " " + fmt(xd) + " -> " + fmt(keep) + " " + y + " = " + x);
  inner_.reduce(alg, xd, x, keep, y);
}
void RecordingSink::prod_of_others(const Dims& xd, const std::string& x, const Dims& keep, const std::string& y) {
  calls_.push_back("prod_of_others " + fmt(xd) + " -> " + fmt(keep) + " " + y + " = " + x);
  inner_.prod_of_others(xd, x, keep, y);
}
void RecordingSink::softmax(Prop p, const SoftmaxGeo& g, const std::string& x, const std::string& y) {
  calls_.push_back(std::string("softmax ") + name(p) + " " + name(g.alg) + " " + fmt(g.dims) + " axis " +
                   std::to_string(g.axis) + " " + y + " = " + x);
  inner_.softmax(p, g, x, y);
}
void RecordingSink::matmul(const Dims& ad, const std::string& a, const Dims& bd, const std::string& b, const Dims& yd,
                           const std::string& y) {
  calls_.push_back("matmul " + y + fmt(yd) + " = " + a + fmt(ad) + " @ " + b + fmt(bd));
  inner_.matmul(ad, a, bd, b, yd, y);
}
void RecordingSink::matmul_strided(const Dims& ad, const Dims& as, const std::string& a, const Dims& bd,
                                   const Dims& bs, const std::string& b, const Dims& yd, const std::string& y) {
  calls_.push_back("matmul_strided " + y + fmt(yd) + " = " + a + fmt(ad) + fmt(as) + " @ " + b + fmt(bd) + fmt(bs));
  inner_.matmul_strided(ad, as, a, bd, bs, b, yd, y);
}
void RecordingSink::pool(Prop p, const PoolGeo& g, const std::string& x, const std::string& y) {
  std::string s = std::string("pool ") + name(p) + " " + name(g.alg) + " " + fmt(g.src) + " -> " + fmt(g.dst) + " k" +
                  fmt(g.kernel) + " s" + fmt(g.strides) + " pl" + fmt(g.pad_l) + " pr" + fmt(g.pad_r) + " " + y +
                  " = " + x;
  calls_.push_back(s);
  inner_.pool(p, g, x, y);
}
void RecordingSink::conv(Prop p, const ConvGeo& g, const std::string& x, const std::string& w, const std::string& b,
                         const std::string& y) {
  calls_.push_back(std::string("conv ") + name(p) + (g.transposed ? " deconvolution " : " convolution ") + fmt(g.src) +
                   " -> " + fmt(g.dst) + " of " + fmt(g.out) + " s" + fmt(g.strides) + " d" + fmt(g.dil) + " pl" +
                   fmt(g.pad_l) + " pr" + fmt(g.pad_r) + " w" + fmt(g.w_dims) + fmt(g.w_strides) + " oc " +
                   std::to_string(g.oc) + " bias " + std::to_string(g.bias) + " truncated " +
                   std::to_string(g.truncated) + " " + y + " = " + fmt(std::vector<std::string>{x, w, b}));
  inner_.conv(p, g, x, w, b, y);
}
void RecordingSink::qreorder(const QReorderGeo& g, const std::string& x, const std::string& y) {
  std::string per_axis;
  for (float s : g.scales) per_axis += (per_axis.empty() ? "" : ",") + fmt(s);
  if (!g.scales.empty()) per_axis = " scales(axis " + std::to_string(g.axis) + ") [" + per_axis + "]";
  calls_.push_back(std::string("qreorder ") + fmt(g.dims) + " " + name(g.src) + " -> " + name(g.dst) + " scale " +
                   fmt(g.scale) + per_axis + " src_zp " + std::to_string(g.src_zp) + " dst_zp " +
                   std::to_string(g.dst_zp) + " " + y + " = " + x);
  inner_.qreorder(g, x, y);
}
namespace {
std::string fmt_q(const QuantAttr& q) {
  std::string s = std::string(name(q.src)) + " x s8 -> " + name(q.dst) + " scale " + fmt(q.scale) + " zp " +
                  std::to_string(q.src_zp) + "," + std::to_string(q.wei_zp) + "," + std::to_string(q.dst_zp);
  if (!q.scales.empty()) s += " per-channel";
  for (float v : q.scales) s += " " + fmt(v);
  return s;
}
}  // namespace
void RecordingSink::qconv(const ConvGeo& g, const QuantAttr& q, const std::string& x, const std::string& w,
                          const std::string& b, const std::string& y) {
  calls_.push_back("qconv " + fmt_q(q) + " " + fmt(g.src) + " -> " + fmt(g.dst) + " s" + fmt(g.strides) + " d" +
                   fmt(g.dil) + " pl" + fmt(g.pad_l) + " pr" + fmt(g.pad_r) + " w" + fmt(g.w_dims) + " oc " +
                   std::to_string(g.oc) + " bias " + std::to_string(g.bias) + " " + y + " = " +
                   fmt(std::vector<std::string>{x, w, b}));
  inner_.qconv(g, q, x, w, b, y);
}
void RecordingSink::qmatmul(const QMatmulGeo& g, const QuantAttr& q, const std::string& x, const std::string& w,
                            const std::string& y) {
  calls_.push_back("qmatmul " + fmt_q(q) + " rows " + std::to_string(g.rows) + " k " + std::to_string(g.k) + " n " +
                   std::to_string(g.n) + " " + y + " = " + x + " @ " + w);
  inner_.qmatmul(g, q, x, w, y);
}
namespace {
std::string fmt_e(const QElemAttr& q) {
  std::string s = std::string(name(q.type)) + " scales";
  for (float v : q.scales) s += " " + fmt(v);
  for (const auto& [alpha, beta] : q.linear) s += " linear(" + fmt(alpha) + "," + fmt(beta) + ")";
  return s;
}
}  // namespace
void RecordingSink::qbinary(Alg alg, const QElemAttr& q, const Dims& out, const Dims& ad, const std::string& a,
                            const Dims& bd, const std::string& b, const std::string& y) {
  calls_.push_back(std::string("qbinary ") + name(alg) + " " + fmt_e(q) + " " + fmt(out) + " " + y + " = " + a +
                   fmt(ad) + " , " + b + fmt(bd));
  inner_.qbinary(alg, q, out, ad, a, bd, b, y);
}
void RecordingSink::qpool(const PoolGeo& g, const QElemAttr& q, const std::string& x, const std::string& y) {
  calls_.push_back(std::string("qpool ") + name(g.alg) + " " + fmt_e(q) + " " + fmt(g.src) + " -> " + fmt(g.dst) +
                   " k" + fmt(g.kernel) + " s" + fmt(g.strides) + " pl" + fmt(g.pad_l) + " pr" + fmt(g.pad_r) + " " +
                   y + " = " + x);
  inner_.qpool(g, q, x, y);
}
void RecordingSink::qeltwise(const Eltwise& e, const QElemAttr& q, const Dims& d, const std::string& x,
                             const std::string& y) {
  calls_.push_back("qeltwise " + fmt(e) + " " + fmt_e(q) + " " + fmt(d) + " " + y + " = f(" + x + ")");
  inner_.qeltwise(e, q, d, x, y);
}
void RecordingSink::qconcat(DataType t, const Dims& out, int axis, const std::vector<Dims>& ds,
                            const std::vector<std::string>& xs, const std::string& y) {
  std::string s = std::string("qconcat ") + name(t) + " " + fmt(out) + " axis " + std::to_string(axis) + " " + y +
                  " = " + fmt(xs);
  for (const auto& d : ds) s += " " + fmt(d);
  calls_.push_back(s);
  inner_.qconcat(t, out, axis, ds, xs, y);
}
void RecordingSink::dense(Prop p, const DenseGeo& g, const std::string& x, const std::string& w, const std::string& b,
                          const std::string& y) {
  calls_.push_back(std::string("dense ") + name(p) + " rows " + std::to_string(g.rows) + " in " + std::to_string(g.in) +
                   " units " + std::to_string(g.units) + " bias " + std::to_string(g.bias) + " " + y + " = " +
                   fmt(std::vector<std::string>{x, w, b}));
  inner_.dense(p, g, x, w, b, y);
}
void RecordingSink::batch_norm(Prop p, const BnGeo& g, const std::vector<std::string>& in, const std::string& y) {
  calls_.push_back(std::string("batch_norm ") + name(p) + " " + fmt(g.src) + " eps " + fmt(g.eps) + " batch_stats " +
                   std::to_string(g.batch_stats) + " " + y + " = " + fmt(in));
  inner_.batch_norm(p, g, in, y);
}
void RecordingSink::layer_norm(const LnGeo& g, const std::string& x, const std::string& scale,
                               const std::string& shift, const std::string& y) {
  calls_.push_back("layer_norm rows " + std::to_string(g.rows) + " k " + std::to_string(g.k) + " eps " + fmt(g.eps) +
                   " " + y + " = " + fmt(std::vector<std::string>{x, scale, shift}));
  inner_.layer_norm(g, x, scale, shift, y);
}
void RecordingSink::lrn(Prop p, const LrnGeo& g, const std::string& x, const std::string& y) {
  calls_.push_back(std::string("lrn ") + name(p) + " " + fmt(g.src) + " size " + std::to_string(g.size) + " alpha " +
                   fmt(g.alpha) + " beta " + fmt(g.beta) + " bias " + fmt(g.bias) + " " + y + " = " + x);
  inner_.lrn(p, g, x, y);
}
void RecordingSink::resample(Prop p, const ResampleGeo& g, const std::string& x, const std::string& y) {
  calls_.push_back(std::string("resample ") + name(p) + " " + name(g.alg) + " " + fmt(g.src) + " -> " + fmt(g.dst) +
                   " " + y + " = " + x);
  inner_.resample(p, g, x, y);
}
void RecordingSink::rnn(Prop p, const RnnGeo& g, const std::vector<std::string>& in, const std::string& y) {
  calls_.push_back(std::string("rnn ") + name(p) + " " + g.op + " N" + std::to_string(g.n) + " T" +
                   std::to_string(g.t) + " F" + std::to_string(g.f) + " H" + std::to_string(g.h) + " G" +
                   std::to_string(g.gates) + " BG" + std::to_string(g.bias_gates) + " perm" + fmt(g.perm) + " seq " +
                   std::to_string(g.seq) + " gru " + std::to_string(g.gru) + (g.gru && !g.lbr ? " lbr0" : "") +
                   (g.peephole ? " peephole" : "") + (g.h0 >= 0 ? " initial_state" : "") +
                   (g.dirs == 2 ? " bidirectional" : "") + (g.reverse ? " reverse " : " ") +
                   (g.op == "simple_rnn" ? std::string(name(g.activation)) + " " : "") + y + " = " + fmt(in));
  inner_.rnn(p, g, in, y);
}

void RecordingSink::zeros(const Dims& d, const std::string& y) {
  calls_.push_back("zeros " + fmt(d) + " " + y);
  inner_.zeros(d, y);
}
void RecordingSink::broadcast(const Shape& from, const std::string& x, const Shape& to, const std::string& y) {
  calls_.push_back("broadcast " + y + fmt(Dims(to.begin(), to.end())) + " = " + x +
                   fmt(Dims(from.begin(), from.end())) + " rank " + std::to_string(from.size()) + "->" +
                   std::to_string(to.size()));
  inner_.broadcast(from, x, to, y);
}
void RecordingSink::eltwise_backward(const Eltwise& e, const Dims& d, const std::string& src, const std::string& dy,
                                     const std::string& dx) {
  calls_.push_back("eltwise_backward " + fmt(e) + " " + fmt(d) + " " + dx + " = f'(" + src + ") * " + dy);
  inner_.eltwise_backward(e, d, src, dy, dx);
}
void RecordingSink::softmax_backward(const SoftmaxGeo& g, const std::string& x, const std::string& y,
                                     const std::string& dy, const std::string& dx) {
  calls_.push_back(std::string("softmax_backward ") + name(g.alg) + " " + fmt(g.dims) + " axis " +
                   std::to_string(g.axis) + " " + dx + " = " + fmt(std::vector<std::string>{x, y, dy}));
  inner_.softmax_backward(g, x, y, dy, dx);
}
void RecordingSink::pool_backward(const PoolGeo& g, const std::string& x, const std::string& dy,
                                  const std::string& dx) {
  calls_.push_back(std::string("pool_backward ") + name(g.alg) + " " + fmt(g.src) + " -> " + fmt(g.dst) + " k" +
                   fmt(g.kernel) + " s" + fmt(g.strides) + " pl" + fmt(g.pad_l) + " pr" + fmt(g.pad_r) + " " + dx +
                   " = " + fmt(std::vector<std::string>{x, dy}));
  inner_.pool_backward(g, x, dy, dx);
}
void RecordingSink::conv_backward(const ConvGeo& g, const std::string& x, const std::string& w, const std::string& dy,
                                  const std::vector<std::string>& grads) {
  calls_.push_back(std::string("conv_backward") + (g.transposed ? " deconvolution " : " convolution ") + fmt(g.src) +
                   " -> " + fmt(g.dst) + " of " + fmt(g.out) + " s" + fmt(g.strides) + " d" + fmt(g.dil) + " pl" +
                   fmt(g.pad_l) + " pr" + fmt(g.pad_r) + " w" + fmt(g.w_dims) + fmt(g.w_strides) + " oc " +
                   std::to_string(g.oc) + " bias " + std::to_string(g.bias) + " truncated " +
                   std::to_string(g.truncated) + " " + fmt(grads) + " = " + fmt(std::vector<std::string>{x, w, dy}));
  inner_.conv_backward(g, x, w, dy, grads);
}
void RecordingSink::dense_backward(const DenseGeo& g, const std::string& x, const std::string& w,
                                   const std::string& dy, const std::vector<std::string>& grads) {
  calls_.push_back("dense_backward rows " + std::to_string(g.rows) + " in " + std::to_string(g.in) + " units " +
                   std::to_string(g.units) + " bias " + std::to_string(g.bias) + " " + fmt(grads) + " = " +
                   fmt(std::vector<std::string>{x, w, dy}));
  inner_.dense_backward(g, x, w, dy, grads);
}
void RecordingSink::batch_norm_backward(const BnGeo& g, const std::vector<std::string>& in, const std::string& dy,
                                        const std::vector<std::string>& grads) {
  calls_.push_back("batch_norm_backward " + fmt(g.src) + " eps " + fmt(g.eps) + " batch_stats " +
                   std::to_string(g.batch_stats) + " " + fmt(grads) + " = " + fmt(in) + " " + dy);
  inner_.batch_norm_backward(g, in, dy, grads);
}
void RecordingSink::layer_norm_backward(const LnGeo& g, const std::vector<std::string>& in, const std::string& dy,
                                        const std::vector<std::string>& grads) {
  calls_.push_back("layer_norm_backward rows " + std::to_string(g.rows) + " k " + std::to_string(g.k) + " eps " +
                   fmt(g.eps) + " " + fmt(grads) + " = " + fmt(in) + " " + dy);
  inner_.layer_norm_backward(g, in, dy, grads);
}
void RecordingSink::lrn_backward(const LrnGeo& g, const std::string& x, const std::string& dy,
                                 const std::string& dx) {
  calls_.push_back("lrn_backward " + fmt(g.src) + " size " + std::to_string(g.size) + " alpha " + fmt(g.alpha) +
                   " beta " + fmt(g.beta) + " bias " + fmt(g.bias) + " " + dx + " = " +
                   fmt(std::vector<std::string>{x, dy}));
  inner_.lrn_backward(g, x, dy, dx);
}
void RecordingSink::resample_backward(const ResampleGeo& g, const std::string& x, const std::string& dy,
                                      const std::string& dx) {
  calls_.push_back(std::string("resample_backward ") + name(g.alg) + " " + fmt(g.src) + " -> " + fmt(g.dst) + " " +
                   dx + " = " + fmt(std::vector<std::string>{x, dy}));
  inner_.resample_backward(g, x, dy, dx);
}
void RecordingSink::rnn_backward(const RnnGeo& g, const std::vector<std::string>& in, const std::string& dy,
                                 const std::vector<std::string>& grads) {
  calls_.push_back("rnn_backward " + g.op + " N" + std::to_string(g.n) + " T" + std::to_string(g.t) + " F" +
                   std::to_string(g.f) + " H" + std::to_string(g.h) + " G" + std::to_string(g.gates) + " BG" +
                   std::to_string(g.bias_gates) + " perm" + fmt(g.perm) + " seq " + std::to_string(g.seq) + " gru " +
                   std::to_string(g.gru) + (g.gru && !g.lbr ? " lbr0" : "") + (g.peephole ? " peephole" : "") +
                   (g.h0 >= 0 ? " initial_state" : "") + (g.dirs == 2 ? " bidirectional" : "") + " " +
                   fmt(grads) + " = " + fmt(in) + " " + dy);
  inner_.rnn_backward(g, in, dy, grads);
}

}  // namespace quorum::backends::onednn_lower
