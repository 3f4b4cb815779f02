// Convolution operators: conv1d/conv2d/conv3d (ONNX Conv: NC<spatial> layout, groups, dilations,
// explicit pads in ONNX order or auto_pad) and conv_transpose2d (ONNX ConvTranspose).
// Both are the same "tap" relation: input position i, kernel position k and output position o are
// linked by o*stride = i + pad_begin - k*dilation (conv) or o = i*stride - pad_begin + k*dilation
// (transposed). The forward kernel and both gradients walk one list of taps, so the VJP is the
// exact transpose of the forward by construction.
#include <algorithm>
#include <tuple>
#include <type_traits>

#include "ops/kernel_util.h"
#include "ops/onnx_map.h"
#include "ops/integer_form.h"
#include "ops/quant_util.h"
#include "ops/registry.h"

// The kernels are written once for a scalar R (the float32 evaluation, ops::Float32Evaluation): a float widened
// to double unseen is an error.
#pragma GCC diagnostic error "-Wdouble-promotion"

namespace quorum::ops {
namespace {

const std::vector<std::string> kAutoPadModes = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};

// Everything a kernel needs, resolved from the input type and the attributes.
struct ConvGeom {
  int64_t batch = 0, in_ch = 0, out_ch = 0, group = 1;
  Shape in_sp, out_sp, kernel, strides, dilations, pad_begin;
  bool transposed = false;
  bool has_bias = true;

  int rank() const { return static_cast<int>(kernel.size()); }
  Shape weight_shape() const {
    // Conv: [OC, C/g, k...]; transposed (ONNX/PyTorch): [C, OC/g, k...].
    Shape w = transposed ? Shape{in_ch, out_ch / group} : Shape{out_ch, in_ch / group};
    w.insert(w.end(), kernel.begin(), kernel.end());
    return w;
  }
  Shape out_shape() const {
    Shape y{batch, out_ch};
    y.insert(y.end(), out_sp.begin(), out_sp.end());
    return y;
  }
};

std::string str(int64_t v) { return std::to_string(v); }

// The list attribute `name`, required to have `len` entries each >= lo.
Shape list_attr(const Attrs& a, const std::string& name, size_t len, int64_t lo, const std::string& why) {
  const auto& v = core::attr_ints(a, name);
  QUORUM_REQUIRE(v.size() == len, name + " must have " + str(static_cast<int64_t>(len)) + " entries (" + why +
                                      "), got " + str(static_cast<int64_t>(v.size())));
  for (int64_t e : v) QUORUM_REQUIRE(e >= lo, name + " entries must be >= " + str(lo) + ", got " + str(e));
  return v;
}

// Validates the input and attributes of a convolution of spatial rank `rank` and resolves the
// geometry. Every violated rule is a named reason.
ConvGeom conv_geometry(const std::string& op_name, const TensorType& x, const Attrs& a, int rank, bool transposed) {
  const auto r = static_cast<size_t>(rank);
  QUORUM_REQUIRE(x.shape.size() == r + 2, op_name + " expects a rank-" + str(rank + 2) +
                                              " input [N, C, spatial...], got " + core::to_string(x.shape));
  ConvGeom g;
  g.transposed = transposed;
  g.batch = x.shape[0];
  g.in_ch = x.shape[1];
  g.in_sp.assign(x.shape.begin() + 2, x.shape.end());
  g.out_ch = core::attr_i(a, "out_channels");
  g.group = core::attr_i(a, "group");
  const int64_t bias = core::attr_i(a, "bias");
  QUORUM_REQUIRE(bias == 0 || bias == 1, "bias must be 0 or 1, got " + str(bias));
  g.has_bias = bias == 1;
  QUORUM_REQUIRE(g.in_ch >= 1, "input must have at least one channel");
  QUORUM_REQUIRE(g.out_ch >= 1, "out_channels must be >= 1, got " + str(g.out_ch));
  QUORUM_REQUIRE(g.group >= 1, "group must be >= 1, got " + str(g.group));
  QUORUM_REQUIRE(g.in_ch % g.group == 0,
                 "input channels C=" + str(g.in_ch) + " must be divisible by group=" + str(g.group));
  QUORUM_REQUIRE(g.out_ch % g.group == 0,
                 "out_channels=" + str(g.out_ch) + " must be divisible by group=" + str(g.group));
  for (int64_t d : g.in_sp) QUORUM_REQUIRE(d >= 1, "spatial dimensions must be >= 1, got " + core::to_string(x.shape));

  g.kernel = list_attr(a, "kernel_shape", r, 1, "one per spatial dim");
  g.strides = list_attr(a, "strides", r, 1, "one per spatial dim");
  g.dilations = list_attr(a, "dilations", r, 1, "one per spatial dim");
  const Shape pads = list_attr(a, "pads", 2 * r, 0, "begins then ends, ONNX order");
  Shape output_padding(r, 0);
  std::string auto_pad = "NOTSET";
  if (transposed) {
    output_padding = list_attr(a, "output_padding", r, 0, "one per spatial dim");
  } else {
    auto_pad = core::attr_s(a, "auto_pad");
    QUORUM_REQUIRE(std::find(kAutoPadModes.begin(), kAutoPadModes.end(), auto_pad) != kAutoPadModes.end(),
                   "auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '" + auto_pad + "'");
  }

  g.pad_begin.assign(r, 0);
  g.out_sp.assign(r, 0);
  for (size_t i = 0; i < r; ++i) {
    const int64_t in = g.in_sp[i], k = g.kernel[i], s = g.strides[i], d = g.dilations[i];
    const int64_t eff_k = d * (k - 1) + 1;  // the dilated kernel's extent
    int64_t pb = pads[i], pe = pads[r + i];
    int64_t out = 0;
    if (transposed) {
      const int64_t op = output_padding[i];
      // PyTorch's rule: the extra output rows must not reach a position a stride or dilation step
      // would cover anyway.
      QUORUM_REQUIRE(op < s || op < d, "output_padding[" + str(static_cast<int64_t>(i)) + "]=" + str(op) +
                                           " must be smaller than stride (" + str(s) + ") or dilation (" + str(d) +
                                           ")");
      out = (in - 1) * s - pb - pe + eff_k + op;
    } else {
      if (auto_pad == "VALID") {
        pb = pe = 0;
      } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        std::tie(pb, pe) = same_pads(auto_pad, in, eff_k, s);  // explicit pads are ignored
      }
      const int64_t span = in + pb + pe - eff_k;
      out = span < 0 ? 0 : span / s + 1;  // floor division of a non-negative span
    }
    QUORUM_REQUIRE(out >= 1, op_name + " output spatial dim " + str(static_cast<int64_t>(i)) + " would be " + str(out) +
                                 " (< 1): input " + str(in) + ", kernel " + str(k) + ", dilation " + str(d) +
                                 ", pads " + str(pb) + "+" + str(pe) + ", stride " + str(s));
    g.pad_begin[i] = pb;
    g.out_sp[i] = out;
  }
  return g;
}

// All multi-indices of `dims` in row-major order.
std::vector<Shape> multi_indices(const Shape& dims) {
  std::vector<Shape> all;
  const int64_t n = core::numel(dims);
  Shape idx(dims.size(), 0);
  for (int64_t f = 0; f < n; ++f) {
    all.push_back(idx);
    for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
      const auto u = static_cast<size_t>(d);
      if (++idx[u] < dims[u]) break;
      idx[u] = 0;
    }
  }
  return all;
}

int64_t flat_index(const Shape& idx, const Shape& dims) {
  int64_t f = 0;
  for (size_t d = 0; d < dims.size(); ++d) f = f * dims[d] + idx[d];
  return f;
}

// One spatial tap: flat input position, flat kernel position, flat output position.
struct Tap {
  int64_t in, k, out;
};

// Every (input, kernel, output) spatial triple that contributes, independent of channels.
std::vector<Tap> spatial_taps(const ConvGeom& g) {
  const int r = g.rank();
  std::vector<Tap> taps;
  const auto kernel_positions = multi_indices(g.kernel);
  // Conv walks output positions and finds the input; transposed walks inputs and finds the output.
  const Shape& driver_dims = g.transposed ? g.in_sp : g.out_sp;
  const Shape& other_dims = g.transposed ? g.out_sp : g.in_sp;
  Shape other(static_cast<size_t>(r));
  for (const Shape& p : multi_indices(driver_dims)) {
    for (const Shape& k : kernel_positions) {
      bool inside = true;
      for (size_t d = 0; d < static_cast<size_t>(r) && inside; ++d) {
        other[d] = p[d] * g.strides[d] - g.pad_begin[d] + k[d] * g.dilations[d];
        inside = other[d] >= 0 && other[d] < other_dims[d];
      }
      if (!inside) continue;  // lands in the padding: contributes zero
      const int64_t pf = flat_index(p, driver_dims), of = flat_index(other, other_dims);
      const int64_t kf = flat_index(k, g.kernel);
      taps.push_back(g.transposed ? Tap{pf, kf, of} : Tap{of, kf, pf});
    }
  }
  return taps;
}

// Calls f(x_index, w_index, y_index) for every product term of the convolution.
template <class F>
void for_each_term(const ConvGeom& g, F f) {
  const auto taps = spatial_taps(g);
  const int64_t in_n = core::numel(g.in_sp), out_n = core::numel(g.out_sp), k_n = core::numel(g.kernel);
  const int64_t cg = g.in_ch / g.group, ocg = g.out_ch / g.group;
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t grp = 0; grp < g.group; ++grp)
      for (int64_t cl = 0; cl < cg; ++cl)
        for (int64_t ol = 0; ol < ocg; ++ol) {
          const int64_t ci = grp * cg + cl, co = grp * ocg + ol;
          const int64_t x0 = (n * g.in_ch + ci) * in_n, y0 = (n * g.out_ch + co) * out_n;
          const int64_t w0 = (g.transposed ? ci * ocg + ol : co * cg + cl) * k_n;
          for (const Tap& t : taps) f(x0 + t.in, w0 + t.k, y0 + t.out);
        }
}

// Written once for a scalar R: the float64 kernel (its sums' float32 range marked, SumRange: a partial sum
// overflows in some summation order) and its float32 evaluation (ops::Float32Evaluation: every product and
// running sum a float32, in the order of for_each_term, or fused).
template <class R>
std::vector<Tensor> conv_forward(const ConvGeom& g, const Inputs& in, bool fused) {
  const std::vector<R> x = values_as<R>(*in[0]), w = values_as<R>(*in[1]);
  std::vector<R> y(static_cast<size_t>(core::numel(g.out_shape())), R(0));
  SumRange range(static_cast<int64_t>(y.size()));
  for_each_term(g, [&](int64_t xi, int64_t wi, int64_t yi) {
    add_product(y[static_cast<size_t>(yi)], x[static_cast<size_t>(xi)], w[static_cast<size_t>(wi)], fused);
    range.add(yi, static_cast<double>(x[static_cast<size_t>(xi)] * w[static_cast<size_t>(wi)]));
  });
  if (g.has_bias) {
    const std::vector<R> b = values_as<R>(*in[2]);
    const int64_t out_n = core::numel(g.out_sp);
    for (size_t i = 0; i < y.size(); ++i) {
      const R bi = b[static_cast<size_t>((static_cast<int64_t>(i) / out_n) % g.out_ch)];
      y[i] += bi;
      range.add(static_cast<int64_t>(i), static_cast<double>(bi));
    }
  }
  Tensor out = widened(y, g.out_shape());
  if constexpr (std::is_same_v<R, double>) range.mark(out);
  return {out};
}

template <class R>
std::vector<Tensor> conv_vjp(const ConvGeom& g, const Inputs& in, const Tensor& gy, bool fused) {
  const std::vector<R> x = values_as<R>(*in[0]), w = values_as<R>(*in[1]), gyv = values_as<R>(gy);
  std::vector<R> gx(x.size(), R(0)), gw(w.size(), R(0)), gb(static_cast<size_t>(g.out_ch), R(0));
  // y[yi] += x[xi]*w[wi], so each term sends gy[yi]*w[wi] to x and gy[yi]*x[xi] to w.
  for_each_term(g, [&](int64_t xi, int64_t wi, int64_t yi) {
    const R d = gyv[static_cast<size_t>(yi)];
    add_product(gx[static_cast<size_t>(xi)], d, w[static_cast<size_t>(wi)], fused);
    add_product(gw[static_cast<size_t>(wi)], d, x[static_cast<size_t>(xi)], fused);
  });
  std::vector<Tensor> grads{widened(gx, in[0]->shape()), widened(gw, in[1]->shape())};
  if (g.has_bias) {
    const int64_t out_n = core::numel(g.out_sp);
    for (size_t i = 0; i < gyv.size(); ++i)
      gb[static_cast<size_t>((static_cast<int64_t>(i) / out_n) % g.out_ch)] += gyv[i];
    grads.push_back(widened(gb, {g.out_ch}));
  }
  return grads;
}

// The float64 kernel, or inside a Float32Evaluation scope its float32 evaluation.
std::vector<Tensor> conv_forward(const ConvGeom& g, const Inputs& in) {
  return in_evaluation_precision([&](auto zero, bool fused) { return conv_forward<decltype(zero)>(g, in, fused); });
}

std::vector<Tensor> conv_vjp(const ConvGeom& g, const Inputs& in, const Tensor& gy) {
  return in_evaluation_precision([&](auto zero, bool fused) { return conv_vjp<decltype(zero)>(g, in, gy, fused); });
}

Signature conv_signature(const ConvGeom& g, DType dtype) {
  Signature sig;
  sig.outputs = {TensorType{dtype, g.out_shape()}};
  sig.params = {ParamSpec{"weight", TensorType{dtype, g.weight_shape()}, Init::Normal}};
  if (g.has_bias) sig.params.push_back(ParamSpec{"bias", TensorType{dtype, {g.out_ch}}, Init::Zeros});
  return sig;
}

Shape filled(int n, int64_t v) { return Shape(static_cast<size_t>(n), v); }

// Channel counts for a sampled case: plain (group 1), grouped (group 2) or depthwise (group = C,
// channel multiplier 1 or 2).
struct Channels {
  int64_t in, out, group;
};
Channels sample_channels(core::Rng& rng, int64_t max_ch) {
  switch (rng.randint(0, 2)) {
    case 0:
      return {rng.randint(1, max_ch), rng.randint(1, max_ch), 1};
    case 1:
      return {2 * rng.randint(1, max_ch / 2), 2 * rng.randint(1, max_ch / 2), 2};
    default: {
      const int64_t c = rng.randint(1, max_ch);
      return {c, c * rng.randint(1, 2), c};
    }
  }
}

// The attributes shared by conv and conv_transpose.
std::vector<AttrSpec> common_attrs(int rank) {
  return {
      int_attr("out_channels", 1, 1, kInf, {AttrValue(int64_t{0}), AttrValue(int64_t{-1})},
               "number of output channels (divisible by group)"),
      ints_attr("kernel_shape", filled(rank, 3), 1, kInf, {AttrValue(filled(rank, 0)), AttrValue(filled(rank + 1, 3))},
                "kernel extent per spatial dim"),
      ints_attr("strides", filled(rank, 1), 1, kInf, {AttrValue(filled(rank, 0)), AttrValue(filled(rank, -1))},
                "stride per spatial dim"),
      ints_attr("dilations", filled(rank, 1), 1, kInf, {AttrValue(filled(rank, 0))}, "dilation per spatial dim"),
      ints_attr("pads", filled(2 * rank, 0), 0, kInf, {AttrValue(filled(2 * rank, -1))},
                "ONNX order [x1_begin, x2_begin, ..., x1_end, x2_end]; asymmetric allowed"),
      int_attr("group", 1, 1, kInf, {AttrValue(int64_t{0}), AttrValue(int64_t{-1})},
               "channel groups; C and out_channels divisible by it (depthwise: group = C)"),
      int_enum_attr("bias", 1, {0, 1}, {2, -1}, "1 adds a learned bias [out_channels]"),
  };
}

int64_t conv_reduction_length(const std::vector<TensorType>& in, const Attrs& a) {
  const int64_t group = std::max<int64_t>(1, core::attr_i(a, "group"));
  int64_t len = in[0].shape.size() > 1 ? in[0].shape[1] / group : 1;
  for (int64_t k : core::attr_ints(a, "kernel_shape")) len *= k;
  return std::max<int64_t>(1, len);
}

// Each element a sum of (at most) the reduction length's products x * w, padding cells giving 0,
// plus the bias.
std::vector<Interval> conv_range(const std::vector<Interval>& in, const std::vector<TensorType>& t, const Attrs& a) {
  const auto k = static_cast<double>(conv_reduction_length(t, a));
  Interval r = sum_of(mul(hull(in[0], Interval{0, 0}), in[1]), k);
  if (in.size() > 2) r = add(r, in[2]);
  return {r};
}

OpSpec make_conv(int rank) {
  const std::string name = "conv" + std::to_string(rank) + "d";
  OpSpec s;
  s.name = name;
  s.family = "conv";
  s.doc = "ONNX Conv over " + std::to_string(rank) + " spatial dim(s), layout NC" +
          (rank == 1   ? "L"
           : rank == 2 ? "HW"
                       : "DHW") +
          "; weight [out_channels, C/group, k...], optional bias [out_channels]; output = floor((in + pad_b + "
          "pad_e - dil*(k-1) - 1)/stride) + 1";
  s.attrs = common_attrs(rank);
  s.attrs.push_back(enum_attr("auto_pad", "NOTSET", kAutoPadModes, {"SAME", "same", ""},
                              "ONNX auto_pad: SAME_* ignore pads and give ceil(in/stride), the odd pad at the end "
                              "(UPPER) or beginning (LOWER); VALID means no padding"));
  s.infer = [name, rank](const std::vector<TensorType>& in, const Attrs& a) {
    const DType dt = common_float_dtype(in);
    return conv_signature(conv_geometry(name, in[0], a, rank, false), dt);
  };
  s.forward = [name, rank](const Inputs& in, const Attrs& a) {
    return conv_forward(conv_geometry(name, in[0]->type(), a, rank, false), in);
  };
  s.vjp = [name, rank](const Inputs& in, const Attrs& a, const std::vector<Tensor>&, const std::vector<Tensor>& g) {
    return conv_vjp(conv_geometry(name, in[0]->type(), a, rank, false), in, g[0]);
  };
  s.float32_orders = {Float32Order::kInOrder, Float32Order::kFused};
  s.tol_f32 = {1e-5, 1e-4};
  s.reduction_length = conv_reduction_length;
  s.range = conv_range;
  s.tags = {"conv"};
  // Smaller extents for higher ranks keep the finite-difference check fast.
  const int64_t sp_lo = rank == 3 ? 2 : 3, sp_hi = rank == 1 ? 7 : rank == 2 ? 6 : 4;
  const int64_t max_ch = rank == 3 ? 2 : 4, max_pad = rank == 3 ? 1 : 2;
  s.sample = [rank, sp_lo, sp_hi, max_ch, max_pad](core::Rng& rng) {
    const auto r = static_cast<size_t>(rank);
    const Channels ch = sample_channels(rng, max_ch);
    const std::string mode =
        rng.pick(std::vector<std::string>{"NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"});
    Shape x{rng.randint(1, 2), ch.in};
    Shape kernel(r), strides(r), dilations(r), pads(2 * r, 0);
    for (size_t i = 0; i < r; ++i) {
      kernel[i] = rng.randint(1, 3);
      strides[i] = rng.pick(std::vector<int64_t>{1, 1, 2, 3});
      dilations[i] = rng.pick(std::vector<int64_t>{1, 1, 2});
      if (mode == "NOTSET") {
        pads[i] = rng.randint(0, max_pad);
        pads[r + i] = rng.randint(0, max_pad);
      }
      // Grow the input until the (padded) input holds one dilated kernel; SAME always fits.
      const int64_t eff_k = dilations[i] * (kernel[i] - 1) + 1;
      const int64_t need = mode == "NOTSET" ? eff_k - pads[i] - pads[r + i] : mode == "VALID" ? eff_k : 1;
      x.push_back(std::max(rng.randint(sp_lo, sp_hi), need));
    }
    Case c;
    c.inputs = {f64t(x)};
    c.attrs = {{"out_channels", ch.out}, {"group", ch.group},
               {"kernel_shape", kernel}, {"strides", strides},
               {"dilations", dilations}, {"pads", pads},
               {"auto_pad", mode},       {"bias", int64_t{rng.bernoulli(0.5) ? 1 : 0}}};
    c.gen = {InputGen{}};
    return c;
  };
  return s;
}

OpSpec make_conv_transpose2d() {
  const std::string name = "conv_transpose2d";
  OpSpec s;
  s.name = name;
  s.family = "conv";
  s.doc =
      "ONNX ConvTranspose over NCHW; weight [C, out_channels/group, kH, kW], optional bias [out_channels]; "
      "output = (in-1)*stride - pad_b - pad_e + dil*(k-1) + output_padding + 1";
  s.attrs = common_attrs(2);
  s.attrs.push_back(ints_attr("output_padding", {0, 0}, 0, kInf, {AttrValue(Shape{-1, -1}), AttrValue(Shape{9, 9})},
                              "extra rows/cols at the end of the output; each < stride or < dilation"));
  s.infer = [name](const std::vector<TensorType>& in, const Attrs& a) {
    const DType dt = common_float_dtype(in);
    return conv_signature(conv_geometry(name, in[0], a, 2, true), dt);
  };
  s.forward = [name](const Inputs& in, const Attrs& a) {
    return conv_forward(conv_geometry(name, in[0]->type(), a, 2, true), in);
  };
  s.vjp = [name](const Inputs& in, const Attrs& a, const std::vector<Tensor>&, const std::vector<Tensor>& g) {
    return conv_vjp(conv_geometry(name, in[0]->type(), a, 2, true), in, g[0]);
  };
  s.float32_orders = {Float32Order::kInOrder, Float32Order::kFused};
  s.tol_f32 = {1e-5, 1e-4};
  s.reduction_length = conv_reduction_length;
  s.range = conv_range;
  s.tags = {"conv"};
  s.sample = [](core::Rng& rng) {
    const Channels ch = sample_channels(rng, 4);
    Shape x{rng.randint(1, 2), ch.in};
    Shape kernel(2), strides(2), dilations(2), pads(4), output_padding(2);
    for (size_t i = 0; i < 2; ++i) {
      const int64_t in = rng.randint(2, 5);
      x.push_back(in);
      kernel[i] = rng.randint(1, 3);
      strides[i] = rng.pick(std::vector<int64_t>{1, 2, 3});
      dilations[i] = rng.pick(std::vector<int64_t>{1, 1, 2});
      output_padding[i] = rng.randint(0, std::max(strides[i], dilations[i]) - 1);
      // Pads at most the dilated kernel overhang on each side (the portable range; PyTorch and TF
      // derive their implicit padding from it), then shrunk until the output is non-empty.
      const int64_t overhang = dilations[i] * (kernel[i] - 1);
      int64_t& pb = pads[i];
      int64_t& pe = pads[2 + i];
      pb = rng.randint(0, std::min<int64_t>(2, overhang));
      pe = rng.randint(0, std::min<int64_t>(2, overhang));
      while ((in - 1) * strides[i] - pb - pe + overhang + output_padding[i] + 1 < 1) (pb >= pe ? pb : pe) -= 1;
    }
    Case c;
    c.inputs = {f64t(x)};
    c.attrs = {{"out_channels", ch.out},           {"group", ch.group},
               {"kernel_shape", kernel},           {"strides", strides},
               {"dilations", dilations},           {"pads", pads},
               {"output_padding", output_padding}, {"bias", int64_t{rng.bernoulli(0.5) ? 1 : 0}}};
    c.gen = {InputGen{}};
    return c;
  };
  return s;
}

// ---- ONNX mapping

// ---- qlinear_conv2d: ONNX QLinearConv, per tensor ------------------------------------------------

// y = saturate(round_half_even((sum (x - x_zp)(w - w_zp) + bias) * x_scale w_scale / y_scale) + y_zp): the
// convolution of the zero-point-shifted operands (padding holds x_zp, so its shifted value is 0), an int32
// bias in units of x_scale * w_scale, one requantization.
OpSpec make_qlinear_conv2d() {
  OpSpec s;
  s.name = "qlinear_conv2d";
  s.doc = "ONNX QLinearConv over 2 spatial dims, per-tensor or per-output-channel weight scales (w_scales, "
          "w_zero_points): y = saturate(round_half_even((sum (x - x_zp)"
          "(w - w_zp) + bias) * x_scale * w_scale / y_scale) + y_zp); weight [out_channels, C/group, kH, kW] int8 "
          "or uint8, optional int32 bias";
  s.attrs = common_attrs(2);
  s.attrs.push_back(enum_attr("auto_pad", "NOTSET", kAutoPadModes, {"SAME", "same", ""}, "as conv2d's"));
  for (const char* p : {"x_", "w_", "y_"})
    for (auto& a : quant_attrs(p)) s.attrs.push_back(a);
  for (auto& a : per_channel_weight_attrs()) s.attrs.push_back(a);
  s.attrs.push_back(quant_type_attr("w_type"));
  s.attrs.push_back(quant_type_attr("to"));
  s.infer = [](const std::vector<TensorType>& in, const Attrs& a) {
    QUORUM_REQUIRE(core::is_quantized(in[0].dtype),
                   "qlinear_conv2d takes an int8 or uint8 input, got " + core::to_string(in[0].dtype));
    const DType w = quant_dtype(a, "w_type"), to = quant_dtype(a, "to");
    check_zero_point(a, "x_zero_point", in[0].dtype);
    check_zero_point(a, "y_zero_point", to);
    const ConvGeom g = conv_geometry("qlinear_conv2d", in[0], a, 2, false);
    check_weight_quant(a, w, g.out_ch);
    Signature sig;
    sig.outputs = {TensorType{to, g.out_shape()}};
    sig.params = {ParamSpec{"weight", TensorType{w, g.weight_shape()}, Init::Normal}};
    if (g.has_bias) sig.params.push_back(ParamSpec{"bias", TensorType{DType::I32, {g.out_ch}}, Init::Zeros});
    return sig;
  };
  s.forward = [](const Inputs& in, const Attrs& a) {
    const ConvGeom g = conv_geometry("qlinear_conv2d", in[0]->type(), a, 2, false);
    const double xzp = static_cast<double>(core::attr_i(a, "x_zero_point"));
    // Per channel (w_scales), output channel c's weights [c, ...] have zero point wzp[c] and scale ws[c].
    const std::vector<double> wzp = weight_zero_points(a, g.out_ch), ws = weight_scales(a, g.out_ch);
    const int64_t per_ch = in[1]->numel() / g.out_ch;
    Tensor x = map1(*in[0], [xzp](double v) { return v - xzp; }), w = *in[1];
    for (int64_t i = 0; i < w.numel(); ++i) w.f64()[i] -= wzp[static_cast<size_t>(i / per_ch)];
    Tensor acc(DType::F64, g.out_shape());  // exact: integer sums far below 2^53
    for_each_term(g, [&](int64_t xi, int64_t wi, int64_t yi) { acc.f64()[yi] += x.f64()[xi] * w.f64()[wi]; });
    const int64_t out_n = core::numel(g.out_sp);
    std::vector<double> ms;
    const double xs = quant_scale(a, "x_scale"), ys = quant_scale(a, "y_scale");
    for (double s : ws) ms.push_back(requant_multiplier(xs, s, ys));
    const double yzp = static_cast<double>(core::attr_i(a, "y_zero_point"));
    const DType to = quant_dtype(a, "to");
    for (int64_t i = 0; i < acc.numel(); ++i) {
      const auto c = static_cast<size_t>((i / out_n) % g.out_ch);
      const double sum = acc.f64()[i] + (g.has_bias ? in[2]->f64()[c] : 0.0);
      acc.f64()[i] = requantize(real_to_round({sum, xs, ws[c]}, {ys}, stored(stored(sum) * ms[c])), yzp, to);
    }
    return std::vector<Tensor>{acc};
  };
  quantized_output(s);
  s.sample = [conv = make_conv(2).sample](core::Rng& rng) {
    Case c = conv(rng);
    const std::string xt = rng.bernoulli(0.5) ? "int8" : "uint8", wt = rng.bernoulli(0.7) ? "int8" : "uint8";
    const std::string to = rng.bernoulli(0.8) ? xt : xt == "int8" ? "uint8" : "int8";  // tools keep the type
    c.inputs[0].dtype = xt == "int8" ? DType::I8 : DType::U8;
    const double xs = draw_scale(rng), ws = draw_scale(rng);
    int64_t terms = c.inputs[0].shape[1] / core::attr_i(c.attrs, "group");
    for (int64_t k : core::attr_ints(c.attrs, "kernel_shape")) terms *= k;
    // The output scale near the accumulator's typical size, so the result neither always saturates nor rounds to 0.
    const double ys = draw_output_scale(rng, xs, ws, terms);
    c.attrs["x_scale"] = xs, c.attrs["x_zero_point"] = draw_zero_point(rng, xt);
    c.attrs["w_scale"] = ws, c.attrs["w_zero_point"] = draw_zero_point(rng, wt), c.attrs["w_type"] = wt;
    c.attrs["y_scale"] = ys, c.attrs["y_zero_point"] = draw_zero_point(rng, to), c.attrs["to"] = to;
    draw_per_channel_weight(rng, c.attrs, core::attr_i(c.attrs, "out_channels"), wt);
    c.gen.clear();
    return c;
  };
  return s;
}

bool all_equal(const std::vector<int64_t>& v, int64_t x) {
  return std::all_of(v.begin(), v.end(), [x](int64_t y) { return y == x; });
}

// The list attribute `k`, unless the minimal form leaves it to its default (every entry `def`).
void put_list(OnnxExport& e, OnnxNode& p, bool minimal, const char* k, int64_t def) {
  if (!minimal || !all_equal(e.aints(k), def)) p.set_ints(k, e.aints(k));
}

// A convolution's window: kernel_shape (the minimal form leaves it to be inferred from the weight), strides,
// dilations and group.
void put_window(OnnxExport& e, OnnxNode& p, bool minimal) {
  if (!minimal) p.set_ints("kernel_shape", e.aints("kernel_shape"));
  put_list(e, p, minimal, "strides", 1);
  put_list(e, p, minimal, "dilations", 1);
  if (!minimal || e.ai("group") != 1) p.set_i("group", e.ai("group"));
}

// Forms: every attribute written | the minimal node (kernel_shape inferred from the weight, strides,
// dilations, group, pads and output_padding left to their defaults where they have them); zero
// pads as explicit pads or auto_pad=VALID.
void export_conv(OnnxExport& e) {
  const bool transpose = e.op() == "conv_transpose2d";
  std::vector<std::string> ins = {e.in(0), e.in(1)};
  if (e.ai("bias")) ins.push_back(e.in(2));
  const bool minimal = e.choose2("attrs", "all", "minimal");
  const bool explicit_pads = transpose || e.as("auto_pad") == "NOTSET";
  const bool valid = explicit_pads && !transpose && all_equal(e.aints("pads"), 0) &&
                     e.choose2("zero_pads", "pads", "auto_pad_valid");
  OnnxNode& p = e.final_node(transpose ? "ConvTranspose" : "Conv", ins);
  auto put = [&](const char* k, int64_t def) { put_list(e, p, minimal, k, def); };
  put_window(e, p, minimal);
  if (transpose) {
    put("pads", 0);
    put("output_padding", 0);
  } else if (valid) {
    p.set_s("auto_pad", "VALID");
  } else if (explicit_pads) {
    put("pads", 0);
  } else {
    p.set_s("auto_pad", e.as("auto_pad"));
  }
}

void conv_common(OnnxImport& m, Attrs& a) {
  for (const char* k : {"strides", "dilations", "pads", "kernel_shape"})
    if (m.has(k)) a[k] = m.getints(k);
  a["group"] = m.geti("group", 1);
}

// Conv of any rank: conv1d, conv2d or conv3d by the weight's rank.
void import_conv(OnnxImport& m) {
  const Shape w = m.type_of(m.in(1)).shape;
  if (w.size() < 3 || w.size() > 5) m.fail("weight of rank " + std::to_string(w.size()) + " (1 to 3 spatial dims)");
  Attrs a;
  conv_common(m, a);
  if (!m.has("kernel_shape")) a["kernel_shape"] = std::vector<int64_t>(w.begin() + 2, w.end());
  a["out_channels"] = w[0];
  a["bias"] = int64_t{m.present(2) ? 1 : 0};
  const std::string ap = m.gets("auto_pad", "NOTSET");
  a["auto_pad"] = ap;
  if (ap != "NOTSET") a.erase("pads");
  m.emit_final("conv" + std::to_string(w.size() - 2) + "d", m.inputs(), a);
}

void import_conv_transpose(OnnxImport& m) {
  const Shape w = m.type_of(m.in(1)).shape;
  if (w.size() != 4) m.fail("only 2 spatial dims are in the catalogue (conv_transpose2d)");
  if (m.has("output_shape")) m.fail("attribute output_shape is not supported (give pads and output_padding)");
  if (m.gets("auto_pad", "NOTSET") != "NOTSET") m.fail("auto_pad is not supported by conv_transpose2d");
  Attrs a;
  conv_common(m, a);
  if (m.has("output_padding")) a["output_padding"] = m.getints("output_padding");
  if (!m.has("kernel_shape")) a["kernel_shape"] = std::vector<int64_t>(w.begin() + 2, w.end());
  a["out_channels"] = w[1] * m.geti("group", 1);
  a["bias"] = int64_t{m.present(2) ? 1 : 0};
  m.emit_final("conv_transpose2d", m.inputs(), a);
}

// Forms as export_conv's; the scales and zero points are constant inputs; QLinearConv, its QDQ form or its
// integer form (ConvInteger: the window's attributes are ConvInteger's).
void export_qlinear_conv(OnnxExport& e) {
  std::vector<std::string> ins = qlinear_operands(e, "x_");
  if (e.ai("bias")) ins.push_back(e.in(2));
  const bool minimal = e.choose2("attrs", "all", "minimal");
  OnnxNode& p = qlinear_product_node(e, "QLinearConv", "Conv", "ConvInteger", ins, "x_", 0);
  put_window(e, p, minimal);
  if (e.as("auto_pad") == "NOTSET") put_list(e, p, minimal, "pads", 0);
  else p.set_s("auto_pad", e.as("auto_pad"));
}

void import_qlinear_conv(OnnxImport& m) {
  const Shape w = m.type_of(m.in(3)).shape;
  if (w.size() != 4) m.fail("only 2 spatial dims are in the catalogue (qlinear_conv2d)");
  Attrs a;
  conv_common(m, a);
  if (!m.has("kernel_shape")) a["kernel_shape"] = std::vector<int64_t>(w.begin() + 2, w.end());
  a["out_channels"] = w[0];
  a["auto_pad"] = m.gets("auto_pad", "NOTSET");
  if (core::attr_s(a, "auto_pad") != "NOTSET") a.erase("pads");
  import_qlinear_params(m, "x_", "w", a);
  std::vector<std::string> ins = {m.in(0), m.in(3)};
  a["bias"] = int64_t{m.present(8) ? 1 : 0};
  if (m.present(8)) {  // an int32 initializer reads as int64; the catalogue's bias is int32
    core::Tensor b = m.need_constant(8, "bias").to(DType::I32);
    ins.push_back(m.new_initializer("bias", b));
  }
  m.emit_final("qlinear_conv2d", ins, a);
}

}  // namespace

void register_conv(Registry& r) {
  for (int rank = 1; rank <= 3; ++rank) {
    OpSpec s = make_conv(rank);
    s.onnx_export = export_conv;
    if (rank == 2) s.onnx_import = {{{"Conv"}, import_conv}};  // every rank
    r.add(std::move(s));
  }
  OpSpec t = make_conv_transpose2d();
  t.onnx_export = export_conv;
  t.onnx_import = {{{"ConvTranspose"}, import_conv_transpose}};
  r.add(std::move(t));
  OpSpec q = make_qlinear_conv2d();
  q.onnx_export = export_qlinear_conv;
  q.onnx_import = {{{"QLinearConv"}, import_qlinear_conv}};
  r.add(std::move(q));
}

}  // namespace quorum::ops
