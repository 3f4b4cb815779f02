// Quantized operators on XNNPACK 2022-02's qs8/qu8 subgraph path (part of the lowering: no XNNPACK header).
// Values of Quorum's int8/uint8 type are qint8/quint8 tensors (xnn_define_quantized_tensor_value, per-tensor
// scale and zero point); an XNNPACK value has one quantization, so a value a node reads under another scale or
// zero point than its producer wrote it with crosses the host into a new segment (lower.cpp).
//  - quantize_linear / dequantize_linear: xnn_define_convert, float32 to qint8/quint8 and back;
//  - qlinear_conv2d: xnn_define_convolution_2d (depthwise: xnn_define_depthwise_convolution_2d) with a quantized
//    OHWI filter and the int32 bias as qint32 (scale x_scale * w_scale, zero point 0);
//  - qlinear_matmul: xnn_define_fully_connected with the [K, N] weight and XNN_FLAG_TRANSPOSE_WEIGHTS, no bias.
//  - the quantized twins (ops/qlinear.cpp), each data input under its own x_scales[i] / x_zero_points[i]:
//    qlinear_add / qlinear_mul as xnn_define_add2 / xnn_define_multiply2, qlinear_global_avg_pool as
//    xnn_define_global_average_pooling_2d, qlinear_sigmoid as xnn_define_sigmoid, qlinear_max_pool2d as the float
//    max pooling's xnn_define_max_pooling_2d (qs8/qu8; its input and output quantized alike). qlinear_avg_pool2d,
//    qlinear_leaky_relu and qlinear_concat have no quantized subgraph node in 2022-02 and are refused.
// What XNNPACK 2022-02 (google/XNNPACK ae108ef, the Debian package) cannot take is refused, each reason measured
// with standalone programs against the installed library:
//  - the input, filter and output must share one type (qs8: int8 throughout; qu8: uint8 throughout): the
//    definitions fail with mismatching datatypes otherwise;
//  - a qs8 (int8) filter has no zero point: xnn_define_convolution_2d / xnn_define_fully_connected log an error
//    for a nonzero one but go on, and the operator ignores it (x 10, w 3, w_zp 2 gives 30, not 10); qu8 filters
//    take their zero point;
//  - the requantization scale x_scale * w_scale / y_scale (float32, the reference's multiplier) must lie in
//    [2^-32, 256): at 256 and above xnn_create_runtime_v2 returns xnn_status_unsupported_parameter, below 2^-32
//    the parameter setup (xnn_init_qs8_conv_minmax_fp32_*_params) fails an assertion and aborts the process;
//  - every scale must be a normal positive float32 (xnn_define_quantized_tensor_value refuses others).
//  - the twins' scale ratios, formed in float32 as the operators' creation does (xnn_status_unsupported_parameter
//    outside, measured at both ends): add each x_scale / y_scale in [2^-10, 2^8); mul x_scale0 * x_scale1 /
//    y_scale in [2^-16, 2^8); global average pool x_scale / y_scale in [2^-8, 2^8); sigmoid writes only
//    y_scale 1/256 with zero point -128 (int8) or 0 (uint8).
// Rounding: the products requantize in float32 (acc converted to float, times the scale, rounded to nearest even,
// saturated), the reference's rule; the float32 to quantized convert multiplies by the reciprocal 1 / scale
// rather than dividing by the scale.
#include <cmath>

#include "backends/repro.h"
#include "backends/xnnpack/lower_ops.h"
#include "ops/quant_util.h"

namespace quorum::backends::xnnpack {
namespace {

QType qtype(core::DType t) {
  if (t == core::DType::I8) return QType::QInt8;
  if (t == core::DType::U8) return QType::QUInt8;
  throw std::logic_error("not a quantized type: " + core::to_string(t));
}

float scale_of(const core::Attrs& a, const std::string& name) { return static_cast<float>(ops::quant_scale(a, name)); }

Quant quant_of(core::DType t, const core::Attrs& a, const std::string& prefix) {
  return Quant{qtype(t), scale_of(a, prefix + "scale"), static_cast<int32_t>(core::attr_i(a, prefix + "zero_point"))};
}

// The prefix of a product's input scale and zero point attributes.
std::string input_prefix(const ir::Node& n) { return n.op == "qlinear_matmul" ? "a_" : "x_"; }

Quant product_quant(const ir::Graph& g, const ir::Node& n, bool output, size_t) {
  if (output) return quant_of(ops::quant_dtype(n.attrs, "to"), n.attrs, "y_");
  return quant_of(g.types.at(n.inputs.at(0)).dtype, n.attrs, input_prefix(n));
}

Quant filter_quant(const ir::Node& n) { return quant_of(ops::quant_dtype(n.attrs, "w_type"), n.attrs, "w_"); }

std::string str(float v) { return c_literal(v, true); }

Support normal_scale(const core::Attrs& a, const std::string& name) {
  const float s = scale_of(a, name);
  if (!(s > 0) || !std::isnormal(s))
    return Support::no(
        "XNNPACK quantized values need a normal positive float32 scale (xnn_define_quantized_tensor_value"
        " refuses others), " +
        name + " is " + str(s));
  return Support::yes();
}

// ---- quantize_linear, dequantize_linear ----

// Per axis (scales along axis): xnn_define_convert's quantized side is a qint8/quint8 value of one scale and
// zero point; XNNPACK's per-channel values (xnn_define_channelwise_quantized_tensor_value) are qcint8/qcint32
// static weights with scales and no zero points, not a convert's operand.
Support per_axis_refused(const ir::Node& n) {
  return Support::no("per-axis scales (scales along axis): XNNPACK's convert takes one scale and zero point (its "
                     "channelwise values are qcint8/qcint32 weights without zero points); " + n.op + " not lowered");
}

Support quantize_supports(const ir::Graph& g, const ir::Node& n) {
  if (ops::per_channel_weight(n.attrs, "")) return per_axis_refused(n);
  const core::DType x = g.types.at(n.inputs.at(0)).dtype;
  if (x != core::DType::F32)
    return Support::no("XNNPACK converts float32 to qint8/quint8, the input is " + core::to_string(x));
  return normal_scale(n.attrs, "scale");
}

Quant quantize_quant(const ir::Graph&, const ir::Node& n, bool output, size_t) {
  return output ? quant_of(ops::quant_dtype(n.attrs, "to"), n.attrs, "") : kFloat;
}

Support dequantize_supports(const ir::Graph& g, const ir::Node& n) {
  if (ops::per_channel_weight(n.attrs, "")) return per_axis_refused(n);
  const core::DType x = g.types.at(n.inputs.at(0)).dtype;
  if (!core::is_quantized(x)) return Support::no("dequantize_linear of a " + core::to_string(x) + " input");
  return normal_scale(n.attrs, "scale");
}

Quant dequantize_quant(const ir::Graph& g, const ir::Node& n, bool output, size_t) {
  return output ? kFloat : quant_of(g.types.at(n.inputs.at(0)).dtype, n.attrs, "");
}

void define_convert(NodeLowering& c) {
  const ValueId x = c.input(0);
  c.sink.convert(x, c.output());
}

// ---- the quantized products ----

constexpr float kMinRequantization = 0x1p-32f;  // assert(scale >= 0x1.0p-32f) in xnn_init_*_conv_minmax_*_params
constexpr float kMaxRequantization = 256.0f;    // xnn_create_*: requantization scale must be below 256

Support product_supports(const ir::Graph& g, const ir::Node& n) {
  const core::Attrs& a = n.attrs;
  if (ops::per_channel_weight(a))
    return Support::no("per-channel weight scales (w_scales) are not lowered to XNNPACK (its channelwise qc8 "
                       "filters are not wired here)");
  const std::string xp = input_prefix(n);
  const core::DType x = g.types.at(n.inputs.at(0)).dtype, w = ops::quant_dtype(a, "w_type");
  const core::DType y = ops::quant_dtype(a, "to");
  if (!core::is_quantized(x)) return Support::no(n.op + " of a " + core::to_string(x) + " input");
  if (w != x)
    return Support::no("XNNPACK 2022-02 has no quantized kernel for a " + core::to_string(x) + " input with " +
                       core::to_string(w) +
                       " weights (qs8 is int8 throughout, qu8 uint8 throughout: the definition "
                       "fails with mismatching datatypes)");
  if (y != x)
    return Support::no("XNNPACK 2022-02's quantized products write the input's type (" + core::to_string(x) +
                       "), not " + core::to_string(y) + " (the definition fails with mismatching datatypes)");
  const int64_t wzp = core::attr_i(a, "w_zero_point");
  if (w == core::DType::I8 && wzp != 0)
    return Support::no("XNNPACK 2022-02's int8 (qs8) filters have no zero point: the definition accepts w_zero_point " +
                       std::to_string(wzp) + " and the operator ignores it (measured: wrong sums), so only 0 maps");
  for (const std::string& s : {xp + "scale", std::string("w_scale"), std::string("y_scale")})
    if (Support ok = normal_scale(a, s); !ok.ok) return ok;
  const float xs = scale_of(a, xp + "scale"), ws = scale_of(a, "w_scale"), ys = scale_of(a, "y_scale");
  const float bias_scale = xs * ws;
  if (n.op == "qlinear_conv2d" && core::attr_i(a, "bias") == 1 && !std::isnormal(bias_scale))
    return Support::no("the int32 bias's scale x_scale * w_scale = " + str(bias_scale) +
                       " is not a normal float32 (xnn_define_quantized_tensor_value refuses it)");
  const float m = xs * ws / ys;  // as xnn_create_convolution2d_nhwc_q*8 / xnn_create_fully_connected_nc_q*8 form it
  if (!(m < kMaxRequantization))
    return Support::no("requantization scale " + xp + "scale * w_scale / y_scale = " + str(m) +
                       " is not below 256: xnn_create_runtime_v2 refuses it (xnn_status_unsupported_parameter)");
  if (m < kMinRequantization)
    return Support::no("requantization scale " + xp + "scale * w_scale / y_scale = " + str(m) +
                       " is below 2^-32: XNNPACK 2022-02's parameter setup asserts scale >= 2^-32 and aborts (the "
                       "Debian build keeps assertions)");
  return Support::yes();
}

void define_qlinear_conv(NodeLowering& c) {
  const core::Attrs& a = c.attrs();
  const Window2d w = conv_window(c.node, c.in_shape(0), c.out_shape());
  const core::Tensor& wt = c.weight(1);  // [OC, C/G, kH, kW]
  const size_t oc = static_cast<size_t>(wt.shape()[0]), cg = static_cast<size_t>(wt.shape()[1]);
  const size_t ch = static_cast<size_t>(c.in_shape(0)[1]);
  const size_t groups = static_cast<size_t>(core::attr_i(a, "group"));
  const size_t kh = w.kh, kw = w.kw;
  const bool depthwise = groups == ch && groups > 1;
  const ValueId x_id = c.input(0);
  const ValueId f_id = c.quantized_constant(
      xnn_filter(int_values(wt), oc, cg, kh * kw, depthwise), depthwise ? Dims{1, kh, kw, oc} : Dims{oc, kh, kw, cg},
      filter_quant(c.node), "filter '" + c.node.inputs[1] + "' " + (depthwise ? "[1, kH, kW, C*M]" : "OHWI"));
  ValueId b_id = kNoValue;
  if (core::attr_i(a, "bias") == 1) {
    const Quant bq{QType::QInt32, scale_of(a, "x_scale") * scale_of(a, "w_scale"), 0};
    b_id = c.quantized_constant(int_values(c.weight(2)), {oc}, bq, "bias '" + c.node.inputs[2] + "'");
  }
  const ValueId y_id = c.output();
  if (depthwise)
    c.sink.depthwise_convolution_2d(w, static_cast<uint32_t>(oc / ch), ch, x_id, f_id, b_id, y_id);
  else
    c.sink.convolution_2d(w, static_cast<uint32_t>(groups), cg, oc / groups, x_id, f_id, b_id, y_id);
}

Support qlinear_conv_supports(const ir::Graph& g, const ir::Node& n) {
  if (!g.is_initializer(n.inputs.at(1)))
    return Support::no("XNNPACK 2022-02 convolutions need a static filter, '" + n.inputs[1] + "' is computed");
  return product_supports(g, n);
}

void define_qlinear_matmul(NodeLowering& c) {
  const core::Tensor& wt = c.weight(1);  // [K, N]
  const Dims d{static_cast<size_t>(wt.shape()[0]), static_cast<size_t>(wt.shape()[1])};
  const ValueId x_id = c.input(0);
  const ValueId f_id = c.quantized_constant(int_values(wt), d, filter_quant(c.node),
                                            "filter '" + c.node.inputs[1] + "' [K, N] (transposed weights)");
  c.sink.fully_connected(x_id, f_id, kNoValue, c.output(), kTransposeWeights);
}

// ---- the quantized twins (ops/qlinear.cpp): each data input i under x_scales[i], x_zero_points[i] ----

Quant twin_quant(const ir::Graph&, const ir::Node& n, bool output, size_t i) {
  const core::DType t = ops::quant_dtype(n.attrs, "to");
  if (output) return quant_of(t, n.attrs, "y_");
  return Quant{qtype(t), static_cast<float>(core::attr_floats(n.attrs, "x_scales").at(i)),
               static_cast<int32_t>(core::attr_ints(n.attrs, "x_zero_points").at(i))};
}

// A float32 scale ratio XNNPACK's operator creation checks against [lo, hi) (xnn_create_runtime_v2 returns
// xnn_status_unsupported_parameter outside it; measured with standalone programs at both ends). The reason names
// the end, not the value, so the refusals of a campaign group by their cause.
Support ratio_in(float r, float lo, float hi, const std::string& what, const std::string& lo_text,
                 const std::string& hi_text) {
  if (r >= lo && r < hi) return Support::yes();
  return Support::no(what + (r < lo ? " is below " + lo_text : " is not below " + hi_text) +
                     ": XNNPACK 2022-02 takes [" + lo_text + ", " + hi_text +
                     ") (xnn_create_runtime_v2: xnn_status_unsupported_parameter)");
}

// What every twin needs: inputs of the output's type, normal positive float32 scales.
Support twin_common(const ir::Graph& g, const ir::Node& n) {
  const core::DType y = ops::quant_dtype(n.attrs, "to");
  for (const std::string& v : n.inputs) {
    const core::DType x = g.types.at(v).dtype;
    if (x != y)
      return Support::no(n.op + " of a " + core::to_string(x) + " input with a " + core::to_string(y) +
                         " output (XNNPACK's qs8/qu8 nodes take one type throughout)");
  }
  const std::vector<double>& xs = core::attr_floats(n.attrs, "x_scales");
  for (size_t i = 0; i < xs.size(); ++i) {
    const float s = static_cast<float>(xs[i]);
    if (!(s > 0) || !std::isnormal(s))
      return Support::no("XNNPACK quantized values need a normal positive float32 scale "
                         "(xnn_define_quantized_tensor_value refuses others), x_scales[" +
                         std::to_string(i) + "] is " + str(s));
  }
  return normal_scale(n.attrs, "y_scale");
}

float x_scale(const ir::Node& n, size_t i) { return static_cast<float>(core::attr_floats(n.attrs, "x_scales").at(i)); }

// qlinear_add: xnn_define_add2 (xnn_create_add_nd_qs8/qu8): each input's scale / y_scale in [2^-10, 2^8).
Support twin_add_supports(const ir::Graph& g, const ir::Node& n) {
  if (Support ok = twin_common(g, n); !ok.ok) return ok;
  const float ys = scale_of(n.attrs, "y_scale");
  for (size_t i = 0; i < 2; ++i) {
    const std::string what = "x_scales[" + std::to_string(i) + "] / y_scale";
    if (Support ok = ratio_in(x_scale(n, i) / ys, 0x1p-10f, 0x1p+8f, what, "2^-10", "2^8"); !ok.ok) return ok;
  }
  return Support::yes();
}

// qlinear_mul: xnn_define_multiply2 (xnn_create_multiply_nd_qs8/qu8): x_scales[0] * x_scales[1] / y_scale in
// [2^-16, 2^8), formed in float32 in that order.
Support twin_mul_supports(const ir::Graph& g, const ir::Node& n) {
  if (Support ok = twin_common(g, n); !ok.ok) return ok;
  const float r = x_scale(n, 0) * x_scale(n, 1) / scale_of(n.attrs, "y_scale");
  return ratio_in(r, 0x1p-16f, 0x1p+8f, "x_scales[0] * x_scales[1] / y_scale", "2^-16", "2^8");
}

// qlinear_global_avg_pool: xnn_define_global_average_pooling_2d (xnn_create_global_average_pooling_nwc_qs8/qu8):
// x_scale / y_scale in [2^-8, 2^8); 2-D pooling only, as the float operator.
Support twin_global_supports(const ir::Graph& g, const ir::Node& n) {
  if (Support ok = twin_common(g, n); !ok.ok) return ok;
  if (g.types.at(n.inputs.at(0)).shape.size() > 4)
    return Support::no("XNNPACK 2022-02 has only 2-D pooling (input rank " +
                       std::to_string(g.types.at(n.inputs[0]).shape.size()) + ")");
  return ratio_in(x_scale(n, 0) / scale_of(n.attrs, "y_scale"), 0x1p-8f, 0x1p+8f, "x_scales[0] / y_scale", "2^-8",
                  "2^8");
}

// qlinear_sigmoid: xnn_define_sigmoid (xnn_create_sigmoid_nc_qs8/qu8) writes only the output quantization 1/256
// with zero point -128 (int8) or 0 (uint8), [0, 1) in 256 steps; any other is xnn_status_unsupported_parameter.
Support twin_sigmoid_supports(const ir::Graph& g, const ir::Node& n) {
  if (Support ok = twin_common(g, n); !ok.ok) return ok;
  const bool s8 = ops::quant_dtype(n.attrs, "to") == core::DType::I8;
  const int64_t want_zp = s8 ? -128 : 0, zp = core::attr_i(n.attrs, "y_zero_point");
  const float ys = scale_of(n.attrs, "y_scale");
  if (ys != 0x1p-8f || zp != want_zp)
    return Support::no("XNNPACK 2022-02's quantized sigmoid writes only y_scale 1/256 with y_zero_point " +
                       std::to_string(want_zp) + " (xnn_create_runtime_v2: xnn_status_unsupported_parameter for " +
                       (ys != 0x1p-8f ? "another y_scale)" : "another y_zero_point)"));
  return Support::yes();
}

DefineFn define_arithmetic(Arithmetic op) {
  return [op](NodeLowering& c) {
    const ValueId a = c.input(0), b = c.input(1);
    c.sink.arithmetic(op, -INFINITY, INFINITY, a, b, c.output());
  };
}

void define_twin_global(NodeLowering& c) {
  const ValueId x = c.input(0);
  c.sink.global_average_pooling_2d(x, c.output());
}

void define_twin_sigmoid(NodeLowering& c) {
  const ValueId x = c.input(0);
  c.sink.unary(Unary::Sigmoid, x, c.output());
}

// A twin with no quantized XNNPACK 2022-02 node: refused whatever its attributes (its quant rule still says the
// integer inputs are its own, so the reason is this one, not the float operators' dtype rule).
OpEntry unmapped_twin(const std::string& why) {
  return OpEntry{[why](const ir::Graph&, const ir::Node&) { return Support::no(why); }, {}, {}, {}, twin_quant};
}

}  // namespace

void register_quantized(OpTable& t) {
  t["quantize_linear"] = OpEntry{quantize_supports, follow_layout, define_convert, {}, quantize_quant};
  t["dequantize_linear"] = OpEntry{dequantize_supports, follow_layout, define_convert, {}, dequantize_quant};
  t["qlinear_conv2d"] = OpEntry{qlinear_conv_supports, channels_last_layout, define_qlinear_conv, {}, product_quant};
  t["qlinear_matmul"] = OpEntry{product_supports, plain_layout, define_qlinear_matmul, {}, product_quant};
  t["qlinear_add"] = OpEntry{twin_add_supports, follow_layout, define_arithmetic(Arithmetic::Add), {}, twin_quant};
  t["qlinear_mul"] = OpEntry{twin_mul_supports, follow_layout, define_arithmetic(Arithmetic::Multiply), {}, twin_quant};
  t["qlinear_global_avg_pool"] =
      OpEntry{twin_global_supports, channels_last_layout, define_twin_global, {}, twin_quant};
  t["qlinear_sigmoid"] = OpEntry{twin_sigmoid_supports, follow_layout, define_twin_sigmoid, {}, twin_quant};
  // Measured: these definitions return xnn_status_invalid_parameter for qint8/quint8 values.
  t["qlinear_avg_pool2d"] = unmapped_twin(
      "XNNPACK 2022-02's subgraph average pooling is float32 only (xnn_define_average_pooling_2d returns "
      "xnn_status_invalid_parameter for qint8/quint8 values; the operator API's qu8 average pooling is not wired)");
  t["qlinear_leaky_relu"] = unmapped_twin(
      "XNNPACK 2022-02's subgraph leaky relu is float32 only (xnn_define_leaky_relu returns "
      "xnn_status_invalid_parameter for qint8/quint8 values; the operator API's qu8 leaky relu is not wired)");
  t["qlinear_concat"] = unmapped_twin(
      "XNNPACK 2022-02's subgraph API has no concatenation (xnn_define_concatenate* came later) and the host-side "
      "concat copies float32 rows without requantizing: the quantized concat is not mapped");
  // qlinear_max_pool2d: max_pool2d's own node and rules (register_conv_pool ran first) on qint8/quint8 values
  // (xnn_create_max_pooling2d_nhwc_s8/u8). Measured: xnn_define_max_pooling_2d returns xnn_status_invalid_parameter
  // when the output's scale or zero point differs from the input's, and runs dilation and padding otherwise.
  const OpEntry& max_pool = t.at("max_pool2d");
  t["qlinear_max_pool2d"] = OpEntry{
      [float_rules = max_pool.supports](const ir::Graph& g, const ir::Node& n) {
        if (Support ok = twin_common(g, n); !ok.ok) return ok;
        if (x_scale(n, 0) != scale_of(n.attrs, "y_scale") ||
            core::attr_ints(n.attrs, "x_zero_points").at(0) != core::attr_i(n.attrs, "y_zero_point"))
          return Support::no("XNNPACK 2022-02's quantized max pooling keeps its input's quantization "
                             "(xnn_define_max_pooling_2d: xnn_status_invalid_parameter for another output scale or "
                             "zero point)");
        return float_rules(g, n);
      },
      max_pool.layout, max_pool.define, {}, twin_quant};
}

}  // namespace quorum::backends::xnnpack
