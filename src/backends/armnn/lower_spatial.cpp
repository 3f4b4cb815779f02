// ArmNN lowering, spatial operators on ArmNN 20.08 layers (NCHW): Convolution2d, DepthwiseConvolution2d,
// TransposeConvolution2d, Pooling2d, Mean (global average) and Resize. The quantized twins qlinear_avg_pool2d,
// qlinear_global_avg_pool and qlinear_max_pool2d are the same Pooling2d (Average, Max) on quantized TensorInfos
// (lower_quant.cpp).
// 1-D operators run as 2-D ones over [N, C, 1, L]. Grouped convolutions that are not depthwise are split into one
// convolution per group (Slice, Convolution2d, Concat). ONNX auto_pad is resolved here into
// ArmNN's explicit left/right/top/bottom pads.
#include <algorithm>
#include <cmath>

#include "backends/armnn/lower_builder.h"
#include "ops/kernel_util.h"

namespace quorum::backends::armnn_lower {
namespace {

using ops::Pads;

// Explicit pads after resolving ONNX auto_pad, for kernels of extent eff_kernel (dilated).
Pads resolve_pads(const ir::Node& n, const Shape& x, const Ints& eff_kernel, const Ints& strides) {
  return ops::resolve_pads(core::attr_s(n.attrs, "auto_pad"), core::attr_ints(n.attrs, "pads"), x, eff_kernel, strides);
}

// The 2-D view of a 1-D (NCL) or 2-D (NCHW) operator: shapes get a unit H, per-axis lists a
// leading (neutral) entry.
Shape as_4d(const Shape& s) { return s.size() == 3 ? Shape{s[0], s[1], 1, s[2]} : s; }
Ints as_2d(const Ints& v, int64_t neutral) { return v.size() == 1 ? Ints{neutral, v[0]} : v; }

Geometry geometry(const Ints& strides, const Pads& p) {
  return Geometry{strides[0], strides[1], p.begin[0], p.begin[1], p.end[0], p.end[1]};
}

// Weights [O, C/group, kH, kW] (ONNX, already 2-D) of output channels [o0, o0 + count).
std::vector<double> weight_rows(const std::vector<double>& w, const Shape& ws, int64_t o0, int64_t count) {
  const int64_t row = ws[1] * ws[2] * ws[3];
  return std::vector<double>(w.begin() + o0 * row, w.begin() + (o0 + count) * row);
}

// ---- convolution ---------------------------------------------------------------------------------

// conv1d, conv2d and qlinear_conv2d (the same layers on quantized tensors: its input read with x_scale and
// x_zero_point, quantized weights, an int32 bias, the output's TensorInfo quantized by y_scale and
// y_zero_point; CpuRef's padding is 0 in real terms, x_zero_point as ONNX pads).
void build_conv(Builder& b, const ir::Node& n) {
  const ir::Graph& g = b.graph();
  const Shape x_shape = in_shape(g, n, 0);
  const bool one_d = x_shape.size() == 3;
  const Ints strides = as_2d(core::attr_ints(n.attrs, "strides"), 1);
  const Ints dil = as_2d(core::attr_ints(n.attrs, "dilations"), 1);
  const Ints& k_raw = core::attr_ints(n.attrs, "kernel_shape");
  const Ints& d_raw = core::attr_ints(n.attrs, "dilations");
  Ints eff(k_raw.size());
  for (size_t i = 0; i < k_raw.size(); ++i) eff[i] = d_raw[i] * (k_raw[i] - 1) + 1;
  Pads p = resolve_pads(n, x_shape, eff, core::attr_ints(n.attrs, "strides"));
  if (one_d) p = Pads{{0, p.begin[0]}, {0, p.end[0]}};
  const int64_t group = core::attr_i(n.attrs, "group");
  const bool has_bias = core::attr_i(n.attrs, "bias") == 1;
  const ProductQuant q = n.op == "qlinear_conv2d" ? product_quant(g, n) : ProductQuant{};

  const Value x = b.reshape(b.value(n.inputs[0]), as_4d(x_shape), q.x);
  const Shape y4 = as_4d(out_shape(g, n));
  const Shape ws = as_4d(g.types.at(n.inputs[1]).shape);  // [O, C/group, kH, kW]
  const std::vector<double> w = b.elements(n.inputs[1]);
  const std::vector<double> bias = has_bias ? b.elements(n.inputs[2]) : std::vector<double>{};
  const int64_t C = x.shape[1], O = ws[0];
  if (n.op == "qlinear_conv2d") note_float32_range(b, q, ws[1] * ws[2] * ws[3]);

  Value y;
  if (group > 1 && group == C) {
    // Depthwise: ArmNN wants [M, C, kH, kW] with output channel c*M + m, ONNX gives [C*M, 1, kH, kW].
    b.comment("depthwise: weights rearranged from ONNX [C*M, 1, kH, kW] to ArmNN's [M, C, kH, kW]");
    const int64_t M = O / C, khw = ws[2] * ws[3];
    std::vector<double> wd(w.size());
    for (int64_t c = 0; c < C; ++c)
      for (int64_t m = 0; m < M; ++m)
        std::copy_n(w.begin() + (c * M + m) * khw, khw, wd.begin() + (m * C + c) * khw);
    ConvLayer d{ConvKind::DepthwiseConvolution2d, geometry(strides, p), dil[0], dil[1], has_bias,
                b.weights(n.inputs[1], wd, Shape{M, C, ws[2], ws[3]}, q.w), {}};
    if (has_bias) d.bias = b.weights(n.inputs[2], bias, Shape{O}, q.bias);
    y = b.add(d, {x}, y4, q.y, "depthwise");
  } else {
    // One Convolution2d per group over its slice of the input channels, joined along C. Fed straight
    // by a constant pad node's Pad layer (one group), ArmNN's optimizer folds the Pad into the
    // convolution's padding (FoldPadIntoConvolution2d): noted in the lowering, where the ledger's
    // entries about that pass find it.
    if (group == 1)
      if (const ir::Node* p = g.producer(n.inputs[0]);
          p && p->op == "pad" && core::attr_s(p->attrs, "mode") == "constant") {
        // What the pass gets wrong (the ledger's FoldPad entries): a pad value it drops, or a pad
        // of the batch or channel axes it folds as if it were spatial.
        const Ints& pads = core::attr_ints(p->attrs, "pads");
        const size_t rank = pads.size() / 2;
        bool outer = false;
        for (size_t d = 0; d < rank && d < 2; ++d) outer |= pads[d] != 0 || pads[rank + d] != 0;
        b.note("FoldPadIntoConvolution2d");
        if (core::attr_f(p->attrs, "value") != 0) b.note("FoldPadIntoConvolution2d (pad value)");
        if (outer) b.note("FoldPadIntoConvolution2d (channel axis)");
      }
    if (group > 1) b.comment("one Convolution2d per group over its slice of the input channels, joined along C");
    const int64_t cg = C / group, og = O / group;
    std::vector<Value> parts;
    for (int64_t gi = 0; gi < group; ++gi) {
      const Value xs = group == 1 ? x : b.slice(x, {0, gi * cg, 0, 0}, Shape{x.shape[0], cg, x.shape[2], x.shape[3]});
      ConvLayer d{ConvKind::Convolution2d, geometry(strides, p), dil[0], dil[1], has_bias,
                  b.weights(n.inputs[1], weight_rows(w, ws, gi * og, og), Shape{og, cg, ws[2], ws[3]}, q.w), {}};
      if (has_bias)
        d.bias = b.weights(n.inputs[2], std::vector<double>(bias.begin() + gi * og, bias.begin() + (gi + 1) * og),
                           Shape{og}, q.bias);
      parts.push_back(b.add(d, {xs}, Shape{y4[0], og, y4[2], y4[3]}, q.y, "conv"));
    }
    y = b.concat(parts, 1);
  }
  b.define(n.outputs[0], b.reshape(y, out_shape(g, n)));
}

Support conv_transpose_supports(const ir::Graph& g, const ir::Node& n) {
  const Ints& dil = core::attr_ints(n.attrs, "dilations");
  if (std::any_of(dil.begin(), dil.end(), [](int64_t d) { return d != 1; }))
    return Support::no("ArmNN 20.08 TransposeConvolution2d has no dilation; dilations " + str(dil));
  // One layer per sample (and per group: a slice and a layer), joined by Concats (build_conv_transpose).
  const int64_t N = g.types.at(n.inputs[0]).shape.at(0), group = core::attr_i(n.attrs, "group");
  return layer_budget(n, N * (2 * group + 3) + 1, "over a batch of " + std::to_string(N) + " (one layer per sample)");
}

Support conv_supports(const ir::Graph&, const ir::Node& n) {
  // A grouped (not depthwise) convolution is one Convolution2d and one Slice per group (build_conv).
  const int64_t group = core::attr_i(n.attrs, "group");
  return layer_budget(n, 2 * group + 3, "in " + std::to_string(group) + " groups (one layer per group)");
}

void build_conv_transpose(Builder& b, const ir::Node& n) {
  const ir::Graph& g = b.graph();
  const Value x = b.value(n.inputs[0]);
  const Ints& strides = core::attr_ints(n.attrs, "strides");
  const Ints& pads = core::attr_ints(n.attrs, "pads");
  const Ints& out_pad = core::attr_ints(n.attrs, "output_padding");
  const int64_t group = core::attr_i(n.attrs, "group");
  const bool has_bias = core::attr_i(n.attrs, "bias") == 1;
  const Shape ws = g.types.at(n.inputs[1]).shape;  // [C, O/group, kH, kW]
  const std::vector<float> w = b.floats(n.inputs[1]);
  const Shape y_shape = out_shape(g, n);
  const int64_t C = x.shape[1], cg = C / group, og = ws[1], khw = ws[2] * ws[3];

  // ArmNN's output is (in-1)*stride + k - pad_begin - pad_end; ONNX output_padding adds cells at the
  // end, which is less end padding, or (beyond the end padding) cells holding only the bias.
  Pads p{{pads[0], pads[1]}, {pads[2], pads[3]}};
  Ints extra(2, 0);
  for (size_t i = 0; i < 2; ++i) {
    const int64_t keep = std::min(out_pad[i], p.end[i]);
    p.end[i] -= keep;
    extra[i] = out_pad[i] - keep;
  }
  const bool bias_in_layer = has_bias && extra[0] == 0 && extra[1] == 0;
  const std::vector<float> bias = has_bias ? b.floats(n.inputs[2]) : std::vector<float>{};
  const Shape part{1, og, y_shape[2] - extra[0], y_shape[3] - extra[1]};

  // One sample [1, C, H, W] through one TransposeConvolution2d per group, joined along C.
  b.comment(
      "weights rearranged from ONNX [I, O/group, kH, kW] to ArmNN's [O, I, kH, kW]; one layer per sample and group");
  auto one_sample = [&](const Value& xn) {
    std::vector<Value> parts;
    for (int64_t gi = 0; gi < group; ++gi) {
      const Value xs = group == 1 ? xn : b.slice(xn, {0, gi * cg, 0, 0}, Shape{1, cg, x.shape[2], x.shape[3]});
      // ArmNN NCHW weights are [O, I, kH, kW]; ONNX gives [I, O/group, kH, kW].
      std::vector<float> wg(static_cast<size_t>(og * cg * khw));
      for (int64_t o = 0; o < og; ++o)
        for (int64_t i = 0; i < cg; ++i)
          std::copy_n(w.begin() + ((gi * cg + i) * og + o) * khw, khw, wg.begin() + (o * cg + i) * khw);
      ConvLayer d{ConvKind::TransposeConvolution2d, geometry(strides, p), 1, 1, bias_in_layer,
                  b.weights(n.inputs[1], wg, Shape{og, cg, ws[2], ws[3]}), {}};
      if (bias_in_layer)
        d.bias =
            b.weights(n.inputs[2], std::vector<float>(bias.begin() + gi * og, bias.begin() + (gi + 1) * og), Shape{og});
      parts.push_back(b.add(d, {xs}, part, "conv_transpose"));
    }
    return b.concat(parts, 1);
  };
  // ArmNN 20.08's TransposeConvolution2dLayer infers the output channels as O*I / (N*I), wrong for
  // a batch N > 1 (Optimize then rejects the correct TensorInfo): one layer per sample.
  const int64_t N = x.shape[0];
  std::vector<Value> samples;
  for (int64_t s = 0; s < N; ++s)
    samples.push_back(one_sample(N == 1 ? x : b.slice(x, {s, 0, 0, 0}, Shape{1, C, x.shape[2], x.shape[3]})));
  Value y = b.concat(samples, 0);
  if (!bias_in_layer && (extra[0] > 0 || extra[1] > 0)) {
    y = b.pad(y, {0, 0, 0, 0}, {0, 0, extra[0], extra[1]}, 0.0f);
    if (has_bias) y = b.binary(BinaryOp::Addition, y, b.constant(bias, Shape{1, y_shape[1], 1, 1}, n.inputs[2]));
  }
  b.define(n.outputs[0], y);
}

// ---- pooling -------------------------------------------------------------------------------------

struct PoolPlan {
  PoolLayer layer;
  Shape armnn_out;  // what ArmNN's shape rule gives (4-D)
};

// ArmNN's Pooling2dLayer output size: floor/ceil of (in + pads - k) / stride + 1, minus the last
// window when it would start inside the end padding.
int64_t armnn_pool_size(int64_t in, int64_t lo, int64_t hi, int64_t k, int64_t s, bool ceil_mode) {
  const double div = static_cast<double>(in + lo + hi - k) / static_cast<double>(s);
  int64_t size = static_cast<int64_t>(ceil_mode ? std::ceil(div) : std::floor(div)) + 1;
  if ((size - 1) * s >= in + lo) --size;
  return size;
}

PoolPlan pool_plan(const ir::Graph& g, const ir::Node& n) {
  const Shape x = in_shape(g, n, 0);
  const Ints& k_raw = core::attr_ints(n.attrs, "kernel_shape");
  const Ints& s_raw = core::attr_ints(n.attrs, "strides");
  Pads p = resolve_pads(n, x, k_raw, s_raw);
  if (x.size() == 3) p = Pads{{0, p.begin[0]}, {0, p.end[0]}};
  const Ints k = as_2d(k_raw, 1), s = as_2d(s_raw, 1);
  const bool ceil_mode = core::attr_s(n.attrs, "auto_pad") == "NOTSET" && core::attr_i(n.attrs, "ceil_mode") == 1;
  const bool is_max = n.op.rfind("max_pool", 0) == 0 || n.op == "qlinear_max_pool2d";
  PoolPlan plan;
  plan.layer = PoolLayer{is_max, k[0], k[1],
                         PoolLayer::Full{geometry(s, p), ceil_mode,
                                         !is_max && core::attr_i(n.attrs, "count_include_pad") == 1}};
  const Shape x4 = as_4d(x);
  plan.armnn_out = {x4[0], x4[1], armnn_pool_size(x4[2], p.begin[0], p.end[0], k[0], s[0], ceil_mode),
                    armnn_pool_size(x4[3], p.begin[1], p.end[1], k[1], s[1], ceil_mode)};
  return plan;
}

Support pool_supports(const ir::Graph& g, const ir::Node& n) {
  if (n.attrs.count("dilations"))
    for (int64_t d : core::attr_ints(n.attrs, "dilations"))
      if (d != 1)
        return Support::no("ArmNN 20.08's Pooling2dDescriptor has no dilation (MaxPool dilations " +
                           core::to_string(core::AttrValue(core::attr_ints(n.attrs, "dilations"))) + ")");
  const PoolPlan plan = pool_plan(g, n);
  if (plan.armnn_out != as_4d(out_shape(g, n)))
    return Support::no("ArmNN's Pooling2d drops a last window that starts in the end padding (also in floor mode), "
                       "giving " + core::to_string(plan.armnn_out) + " where ONNX gives " +
                       core::to_string(out_shape(g, n)));
  return Support::yes();
}

// The float pools, qlinear_avg_pool2d and qlinear_max_pool2d (the input read with x_scales[0] / x_zero_points[0],
// the output quantized by y_scale / y_zero_point; CpuRef's padding is 0 in real terms, as the twin's float pool
// pads, and never a maximum).
void build_pool(Builder& b, const ir::Node& n) {
  const ir::Graph& g = b.graph();
  const PoolPlan plan = pool_plan(g, n);
  const bool twin = n.op.rfind("qlinear_", 0) == 0;
  const TwinQuant q = twin ? twin_quant(n) : TwinQuant{{Quant{}}, Quant{}};
  const Value x = b.reshape(b.value(n.inputs[0]), as_4d(in_shape(g, n, 0)), q.x[0]);
  const Value y = b.add(plan.layer, {x}, plan.armnn_out, q.y, "pool", plan.layer.max ? "Max" : "Average");
  b.define(n.outputs[0], b.reshape(y, out_shape(g, n)));
}

void build_global_pool(Builder& b, const ir::Node& n) {
  const ir::Graph& g = b.graph();
  const Shape& x = in_shape(g, n, 0);
  const Value xv = b.value(n.inputs[0]);
  int64_t cells = 1;
  for (size_t d = 2; d < x.size(); ++d) cells *= x[d];
  if (n.op == "qlinear_global_avg_pool") {
    // One Pooling2d Average window over the whole plane ([N, C, H, W], or [N, C, 1, cells] for another rank),
    // with the quantized TensorInfos of qlinear_avg_pool2d.
    const TwinQuant q = twin_quant(n);
    const Shape x4 = x.size() == 4 ? x : Shape{x[0], x[1], 1, cells};
    b.comment("average over all spatial cells: one Pooling2d window over the whole plane");
    // Reshaped before the view: CpuRef's Slice takes rank <= 4 ("SliceQueueDescriptor: Input tensors with rank
    // greater than 4 are not supported", at LoadNetwork).
    const Value x4v = b.as_quant(b.reshape(xv, x4), q.x[0]);
    const Value y = b.add(PoolLayer{false, x4[2], x4[3], std::nullopt}, {x4v}, Shape{x[0], x[1], 1, 1}, q.y,
                          "global_avg", "Average");
    b.define(n.outputs[0], b.reshape(y, out_shape(g, n)));
    return;
  }
  if (n.op == "global_avg_pool") {
    // Mean over the flattened cells of [N, C, cells] (ArmNN 20.08's Mean takes rank <= 4).
    b.define(n.outputs[0], b.reshape(b.mean(b.reshape(xv, Shape{x[0], x[1], cells}), {2}, true), out_shape(g, n)));
    return;
  }
  b.comment("max over all spatial cells: one Pooling2d window over [N, C, 1, cells]");
  const Value flat = b.reshape(xv, Shape{x[0], x[1], 1, cells});
  const Value y = max_window(b, flat, cells, Shape{x[0], x[1], 1, 1}, "global_max");
  b.define(n.outputs[0], b.reshape(y, out_shape(g, n)));
}

// ---- resize --------------------------------------------------------------------------------------

// ArmNN's Resize coordinate rules (one for both axes): Default o*in/out, HalfPixel (o+0.5)*in/out
// (-0.5 for bilinear, clamped at 0), AlignCorners o*(in-1)/(out-1); nearest floors the coordinate
// (rounds half away from zero with AlignCorners).
enum Mode : unsigned { kDefault = 1, kHalfPixel = 2, kAlignCorners = 4, kAny = 7 };

struct AxisModes {
  unsigned modes = 0;
  std::string why;  // when modes == 0
};

// Whether the half-pixel coordinate (o+0.5)*in/out - 0.5 is exactly half-way for some o.
bool half_pixel_ties(int64_t in, int64_t out) {
  for (int64_t o = 0; o < out; ++o)
    if (((2 * o + 1) * in) % (2 * out) == 0) return true;
  return false;
}

// Whether o*(in-1)/(out-1) is exactly half-way for some o.
bool align_corners_ties(int64_t in, int64_t out) {
  for (int64_t o = 0; o < out; ++o)
    if ((2 * o * (in - 1)) % (2 * (out - 1)) == out - 1) return true;
  return false;
}

AxisModes nearest_axis(const std::string& ctm, const std::string& nm, int64_t in, int64_t out) {
  if (in == 1) return {kAny, ""};
  if (ctm == "tf_crop_and_resize")
    return {0, "ArmNN's Resize has no crop (tf_crop_and_resize: roi, extrapolation_value)"};
  if (ctm == "tf_half_pixel_for_nn") {
    if (nm == "floor" || (in == out && nm == "round_prefer_floor")) return {kHalfPixel, ""};
    return {0, "tf_half_pixel_for_nn with nearest_mode '" + nm + "' has no ArmNN Resize equivalent"};
  }
  if (in == out) return {kAny, ""};  // every other mode reads cell o
  const bool out1 = out == 1;
  if ((ctm == "align_corners" || ctm == "pytorch_half_pixel") && out1) return {kDefault | kAlignCorners, ""};
  if (ctm == "asymmetric") {
    if (nm == "floor") return {kDefault, ""};
    return {0, "ArmNN's nearest Resize floors the asymmetric coordinate; nearest_mode '" + nm + "' has no equivalent"};
  }
  const bool half = ctm == "half_pixel" || ctm == "pytorch_half_pixel";
  const Mode m = half ? kHalfPixel : kAlignCorners;
  const bool ties = half ? half_pixel_ties(in, out) : align_corners_ties(in, out);
  if (nm == "round_prefer_ceil") return {m, ""};
  if (nm == "round_prefer_floor" && !ties) return {m, ""};
  if (nm == "round_prefer_floor")
    return {0, ctm + " with round_prefer_floor hits exact half-way coordinates for " + std::to_string(in) + " -> " +
                   std::to_string(out) + "; ArmNN's nearest Resize rounds them up"};
  return {0, ctm + " with nearest_mode '" + nm + "' has no ArmNN Resize equivalent (ArmNN rounds this coordinate)"};
}

AxisModes bilinear_axis(const std::string& ctm, int64_t in, int64_t out) {
  if (in == 1) return {kAny, ""};
  if (ctm == "half_pixel") return {kHalfPixel, ""};
  if (ctm == "pytorch_half_pixel") return {out > 1 ? unsigned(kHalfPixel) : unsigned(kDefault | kAlignCorners), ""};
  if (ctm == "align_corners") return {out > 1 ? unsigned(kAlignCorners) : unsigned(kDefault | kAlignCorners), ""};
  if (ctm == "asymmetric") return {in == out ? unsigned(kAny) : unsigned(kDefault), ""};
  return {0, "ArmNN's bilinear Resize has no '" + ctm + "' coordinate mode"};
}

struct ResizePlan {
  unsigned modes = 0;
  std::string why;
};

ResizePlan resize_plan(const ir::Graph& g, const ir::Node& n) {
  const bool bilinear = n.op == "resize_bilinear";
  const std::string& ctm = core::attr_s(n.attrs, "coordinate_transformation_mode");
  const Shape& x = in_shape(g, n, 0);
  const Ints& sizes = core::attr_ints(n.attrs, "sizes");
  AxisModes axes[2];
  for (size_t i = 0; i < 2; ++i)
    if (ops::resize_scale_matters(n.attrs, i, x[i + 2], sizes[i]))
      return {0, "ArmNN's ResizeDescriptor takes the target size only (its coordinate scale is in/out); the given "
                 "scale " + core::to_string(core::AttrValue(ops::resize_given_scale(n.attrs, i))) + " is not " +
                 std::to_string(sizes[i]) + "/" + std::to_string(x[i + 2]) + (i == 0 ? " (height)" : " (width)")};
  for (size_t i = 0; i < 2; ++i)
    axes[i] = bilinear ? bilinear_axis(ctm, x[i + 2], sizes[i])
                       : nearest_axis(ctm, core::attr_s(n.attrs, "nearest_mode"), x[i + 2], sizes[i]);
  if (!axes[0].modes) return {0, axes[0].why + " (height)"};
  if (!axes[1].modes) return {0, axes[1].why + " (width)"};
  const unsigned both = axes[0].modes & axes[1].modes;
  if (!both) return {0, "height and width need different ArmNN Resize coordinate modes (one mode per layer)"};
  return {both, ""};
}

Support resize_supports(const ir::Graph& g, const ir::Node& n) {
  const ResizePlan p = resize_plan(g, n);
  return p.modes ? Support::yes() : Support::no(p.why);
}

void build_resize(Builder& b, const ir::Node& n) {
  const ir::Graph& g = b.graph();
  const ResizePlan p = resize_plan(g, n);
  const Shape& y = out_shape(g, n);
  const bool half_pixel = (p.modes & kHalfPixel) != 0;
  const ResizeLayer d{n.op == "resize_bilinear", y[2], y[3], half_pixel, !half_pixel && (p.modes & kAlignCorners) != 0};
  b.define(n.outputs[0], b.add(d, {b.value(n.inputs[0])}, y, "resize"));
}

}  // namespace

// One Pooling2d max window of 1 x `width` over [.., .., rows, width].
Value max_window(Builder& b, const Value& flat, int64_t width, const Shape& out, const std::string& what) {
  return b.add(PoolLayer{true, 1, width, std::nullopt}, {flat}, out, what, "Max");
}

void register_spatial(OpTable& t) {
  t["conv1d"] = OpEntry{conv_supports, build_conv};
  t["conv2d"] = OpEntry{conv_supports, build_conv};
  t["qlinear_conv2d"] = OpEntry{[](const ir::Graph& g, const ir::Node& n) {
                                  const Support s = product_supports(g, n);
                                  return s.ok ? conv_supports(g, n) : s;
                                },
                                build_conv};
  t["conv_transpose2d"] = OpEntry{conv_transpose_supports, build_conv_transpose};
  for (const char* name :
       {"max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "qlinear_avg_pool2d", "qlinear_max_pool2d"})
    t[name] = OpEntry{pool_supports, build_pool};
  t["global_avg_pool"] = OpEntry{{}, build_global_pool};
  t["global_max_pool"] = OpEntry{{}, build_global_pool};
  t["qlinear_global_avg_pool"] = OpEntry{{}, build_global_pool};
  t["resize_nearest"] = OpEntry{resize_supports, build_resize};
  t["resize_bilinear"] = OpEntry{resize_supports, build_resize};
}

}  // namespace quorum::backends::armnn_lower
