// Quantized operators (ONNX's linear quantization): QuantizeLinear, DequantizeLinear and
// QLinearMatMul with a constant right operand. The quantized convolution (qlinear_conv2d) lives in
// conv.cpp beside the convolution it shares its geometry with; the requantization rule both use is
// in quant_util.h. Values are int8 or uint8 (the output's type is the `to` attribute, ONNX's zero
// point type); scales are float32 and zero points integers of the value's type, given as
// attributes and written to ONNX as constant inputs. The float64 kernels are exact: integer sums,
// one rounding half to even, saturation; a float32 implementation's division or multiplier is
// marked stored, so a library whose float32 arithmetic lands on the other side of a tie is inside
// the spread, except where every float32 formulation is exact (real_to_round, quant_util.h): a tie
// there is judged.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "ops/kernel_util.h"
#include "ops/onnx_map.h"
#include "ops/integer_form.h"
#include "ops/qdq_form.h"
#include "ops/quant_util.h"
#include "ops/registry.h"

namespace quorum::ops {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// Per axis (ONNX opset 13): the attribute `axis` (negative counts from the end; ONNX's default 1) says along which
// dimension the lists scales / zero_points (quant_util.h's per-channel attributes, prefix "") run; without
// scales, per tensor (scale, zero_point) and `axis` is unused, as ONNX ignores it for a scalar scale.
std::vector<AttrSpec> per_axis_attrs() {
  std::vector<AttrSpec> attrs = quant_attrs("");
  attrs.push_back(keyed_when_given(
      int_attr("axis", 1, -kInf, kInf, {}, "the dimension scales / zero_points run along; < 0 from the end")));
  for (auto& a : per_channel_weight_attrs("")) attrs.push_back(a);
  return attrs;
}

// Where a per-axis element's channel is: channel = (index / inner) % length.
struct AxisLayout {
  int64_t length = 1, inner = 1;
};

// Fails (OpError) on an axis outside [-rank, rank) or lists that do not fit it; per tensor, one channel.
AxisLayout axis_layout(const Shape& shape, const Attrs& a) {
  if (!per_channel_weight(a, "")) return {};
  const auto rank = static_cast<int64_t>(shape.size());
  const int64_t axis = core::attr_i(a, "axis");
  QUORUM_REQUIRE(axis >= -rank && axis < rank, "axis " + str(axis) + " is out of range for a rank-" + str(rank) +
                                                   " input " + core::to_string(shape) + " (per-axis scales)");
  const auto k = static_cast<size_t>(axis < 0 ? axis + rank : axis);
  AxisLayout l;
  l.length = shape[k];
  for (size_t d = k + 1; d < shape.size(); ++d) l.inner *= shape[d];
  return l;
}

int64_t channel_of(const AxisLayout& l, int64_t i) { return (i / l.inner) % l.length; }

// The sampler's per-axis share (draw_per_channel_weight): a drawn dimension of the input, given as a negative
// axis half of the time; `type` is the zero points'. Per tensor otherwise (also when the dimension has length 1).
void draw_per_axis(core::Rng& rng, const Shape& shape, Attrs& a, const std::string& type) {
  const auto rank = static_cast<int64_t>(shape.size());
  const int64_t axis = rng.randint(0, rank - 1);
  if (!draw_per_channel_weight(rng, a, shape[static_cast<size_t>(axis)], type, "")) return;
  a["axis"] = rng.bernoulli(0.5) ? axis - rank : axis;
}

// ONNX's per-axis QuantizeLinear / DequantizeLinear: 1-D scale and zero point, the axis attribute (opset 13).
OnnxNode& per_axis_node(OnnxExport& e, const std::string& type, DType zero_point_type) {
  const bool per_axis = per_channel_weight(e.attrs(), "");
  if (per_axis && e.opset() < 13) e.refuse(type + " per axis needs opset 13");
  OnnxNode& n = e.final_node(
      type, {e.in(0), weight_scale_constant(e, ""), weight_zero_point_constant(e, zero_point_type, "")});
  if (per_axis) n.set_i("axis", e.ai("axis"));
  return n;
}

// The scale and zero point read back, per tensor or per axis (then `axis`, ONNX's default 1); returns the zero
// point's type.
DType import_per_axis(OnnxImport& m, const std::string& what, Attrs& a) {
  const DType type = import_channel_params(m, 1, what, "", a);
  if (per_channel_weight(a, "")) a["axis"] = m.geti("axis", 1);
  return type;
}

// y = saturate(round(x / scale) + zero_point)
OpSpec make_quantize() {
  OpSpec s;
  s.name = "quantize_linear";
  s.doc = "ONNX QuantizeLinear, per tensor or per axis (scales, zero_points along axis): "
          "y = saturate(round_half_even(x / scale) + zero_point) in int8 or uint8";
  s.attrs = per_axis_attrs();
  s.attrs.push_back(quant_type_attr("to"));
  s.infer = [](const std::vector<TensorType>& in, const Attrs& a) {
    QUORUM_REQUIRE(core::is_float(in[0].dtype),
                   "quantize_linear quantizes a float input, got " + core::to_string(in[0].dtype));
    const DType to = quant_dtype(a, "to");
    check_weight_quant(a, to, axis_layout(in[0].shape, a).length, "");
    return Signature{{TensorType{to, in[0].shape}}, {}};
  };
  s.forward = [](const Inputs& in, const Attrs& a) {
    const DType to = quant_dtype(a, "to");
    const AxisLayout l = axis_layout(in[0]->shape(), a);
    const std::vector<double> scales = weight_scales(a, l.length, ""), zps = weight_zero_points(a, l.length, "");
    Tensor y(DType::F64, in[0]->shape());
    for (int64_t i = 0; i < y.numel(); ++i) {
      const auto c = static_cast<size_t>(channel_of(l, i));
      const double x = in[0]->f64()[i], scale = scales[c];
      y.f64()[i] = requantize(real_to_round({x}, {scale}, stored(x / scale)), zps[c], to);
    }
    return std::vector<Tensor>{y};
  };
  quantized_output(s);
  s.sample = [](core::Rng& rng) {
    Case c;
    const Shape shape = random_shape(rng, static_cast<int>(rng.randint(1, 4)), 1, 5);
    c.inputs = {f64t(shape)};
    const std::string to = rng.bernoulli(0.5) ? "int8" : "uint8";
    const double scale = draw_scale(rng);
    c.attrs = {{"scale", scale}, {"zero_point", draw_zero_point(rng, to)}, {"to", to}};
    draw_per_axis(rng, shape, c.attrs, to);
    // Wide enough to saturate at both ends, with ties (x / scale = k + 0.5: exact when scale is a power of two).
    // Per axis, for the largest scale within 2^3 of channel 0's (the extreme ones saturate or round to 0).
    double wide = scale;
    if (per_channel_weight(c.attrs, ""))
      for (double s : core::attr_floats(c.attrs, "scales"))
        if (s <= 8 * scale && s >= scale / 8) wide = std::max(wide, s);
    c.gen = {InputGen{-300 * wide, 300 * wide}};
    c.gen[0].tie_grid = core::attr_f(c.attrs, "scale");
    return c;
  };
  s.onnx_export = [](OnnxExport& e) {
    if (e.dtype() != DType::F32) e.refuse("QuantizeLinear quantizes float32 values");
    per_axis_node(e, "QuantizeLinear", quant_dtype(e.attrs(), "to"));
  };
  s.onnx_import = {{{"QuantizeLinear"}, [](OnnxImport& m) {
                      Attrs a;
                      const DType to = import_per_axis(m, "y", a);
                      if (!core::is_quantized(to)) m.fail("y_zero_point must be int8 or uint8");
                      a["to"] = core::to_string(to);
                      m.emit_final("quantize_linear", {m.in(0)}, a);
                    }}};
  return s;
}

// y = (x - zero_point) * scale, float32
OpSpec make_dequantize() {
  OpSpec s;
  s.name = "dequantize_linear";
  s.doc = "ONNX DequantizeLinear, per tensor or per axis (scales, zero_points along axis): "
          "y = (x - zero_point) * scale, from int8 or uint8 to float32";
  s.attrs = per_axis_attrs();
  s.infer = [](const std::vector<TensorType>& in, const Attrs& a) {
    // int32 with zero point 0: ONNX's form of a quantized bias (a QDQ convolution's, read back; its int32
    // initializer reads as int64), per tensor or per output channel (per-channel weights).
    const AxisLayout l = axis_layout(in[0].shape, a);
    const std::vector<double> zps = weight_zero_points(a, l.length, "");
    const bool bias = (in[0].dtype == DType::I32 || in[0].dtype == DType::I64) &&
                      std::all_of(zps.begin(), zps.end(), [](double z) { return z == 0; });
    QUORUM_REQUIRE(core::is_quantized(in[0].dtype) || bias,
                   "dequantize_linear takes an int8 or uint8 input (or int32 with zero point 0), got " +
                       core::to_string(in[0].dtype));
    check_weight_quant(a, in[0].dtype, l.length, "");
    return Signature{{TensorType{DType::F32, in[0].shape}}, {}};
  };
  s.forward = [](const Inputs& in, const Attrs& a) {
    const AxisLayout l = axis_layout(in[0]->shape(), a);
    const std::vector<double> scales = weight_scales(a, l.length, ""), zps = weight_zero_points(a, l.length, "");
    Tensor y(DType::F64, in[0]->shape());
    // (x - zp) * scale, exact; a float32 implementation may form x * scale - zp * scale (two roundings,
    // whose difference cancels when x is near zp): stored marks both.
    for (int64_t i = 0; i < y.numel(); ++i) {
      const auto c = static_cast<size_t>(channel_of(l, i));
      y.f64()[i] = stored(in[0]->f64()[i] * scales[c]) - stored(zps[c] * scales[c]);
    }
    return std::vector<Tensor>{y};
  };
  s.tol_f32 = {0, 1e-7};
  s.range = [](const std::vector<Interval>& in, const std::vector<TensorType>& types, const Attrs& a) {
    const AxisLayout l = axis_layout(types[0].shape, a);
    const std::vector<double> scales = weight_scales(a, l.length, ""), zps = weight_zero_points(a, l.length, "");
    Interval r{(in[0].lo - zps[0]) * scales[0], (in[0].hi - zps[0]) * scales[0]};
    for (size_t c = 1; c < scales.size(); ++c) {
      r.lo = std::min(r.lo, (in[0].lo - zps[c]) * scales[c]);
      r.hi = std::max(r.hi, (in[0].hi - zps[c]) * scales[c]);
    }
    return std::vector<Interval>{r};
  };
  quantized_operator(s);
  s.sample = [](core::Rng& rng) {
    Case c;
    const std::string type = rng.bernoulli(0.5) ? "int8" : "uint8";
    const Shape shape = random_shape(rng, static_cast<int>(rng.randint(1, 4)), 1, 5);
    c.inputs = {TensorType{type == "int8" ? DType::I8 : DType::U8, shape}};
    c.attrs = {{"scale", draw_scale(rng)}, {"zero_point", draw_zero_point(rng, type)}};
    draw_per_axis(rng, shape, c.attrs, type);
    return c;
  };
  s.onnx_export = [](OnnxExport& e) { per_axis_node(e, "DequantizeLinear", e.dtype()); };
  s.onnx_import = {{{"DequantizeLinear"}, [](OnnxImport& m) {
                      Attrs a;
                      if (import_per_axis(m, "x", a) != m.type_of(m.in(0)).dtype)
                        m.fail("the zero point's type differs from the input's");
                      m.emit_final("dequantize_linear", {m.in(0)}, a);
                    }}};
  return s;
}

// QLinearMatMul with a constant weight [K, units]: y = requantize(sum_k (a - a_zp)(w - w_zp), a_scale w_scale /
// y_scale)
OpSpec make_qlinear_matmul() {
  OpSpec s;
  s.name = "qlinear_matmul";
  s.doc =
      "ONNX QLinearMatMul of a quantized input [..., K] and a quantized constant weight [K, units], per tensor or "
      "per column (w_scales, w_zero_points: ONNX's 1-D b_scale, b_zero_point): "
      "y = saturate(round_half_even(sum (a - a_zp)(w - w_zp) * a_scale * w_scale / y_scale) + y_zp)";
  s.attrs = {int_attr("units", 1, 1, kInf, {AttrValue(int64_t{0})}, "output features (the weight's columns)")};
  for (const char* p : {"a_", "w_", "y_"})
    for (auto& a : quant_attrs(p)) s.attrs.push_back(a);
  for (auto& a : per_channel_weight_attrs()) s.attrs.push_back(a);
  s.attrs.push_back(quant_type_attr("w_type"));
  s.attrs.push_back(quant_type_attr("to"));
  s.infer = [](const std::vector<TensorType>& in, const Attrs& a) {
    const TensorType& x = in[0];
    QUORUM_REQUIRE(core::is_quantized(x.dtype),
                   "qlinear_matmul takes an int8 or uint8 input, got " + core::to_string(x.dtype));
    QUORUM_REQUIRE(x.shape.size() >= 2,
                   "qlinear_matmul expects an input of rank >= 2 [..., M, K], got " + core::to_string(x.shape));
    const DType w = quant_dtype(a, "w_type"), to = quant_dtype(a, "to");
    check_zero_point(a, "a_zero_point", x.dtype);
    check_zero_point(a, "y_zero_point", to);
    const int64_t units = core::attr_i(a, "units");
    QUORUM_REQUIRE(units >= 1, "units must be >= 1, got " + str(units));
    check_weight_quant(a, w, units);
    Shape y = x.shape;
    y.back() = units;
    Signature sig;
    sig.outputs = {TensorType{to, y}};
    sig.params = {ParamSpec{"weight", TensorType{w, {x.shape.back(), units}}, Init::Normal}};
    return sig;
  };
  s.forward = [](const Inputs& in, const Attrs& a) {
    const int64_t k = in[0]->shape().back(), units = core::attr_i(a, "units");
    const int64_t rows = in[0]->numel() / std::max<int64_t>(k, 1);
    Shape ys = in[0]->shape();
    ys.back() = units;
    Tensor y(DType::F64, ys);
    const double azp = static_cast<double>(core::attr_i(a, "a_zero_point"));
    // Per column (w_scales): column u has zero point wzp[u] and multiplier ms[u].
    const std::vector<double> wzp = weight_zero_points(a, units);
    const double yzp = static_cast<double>(core::attr_i(a, "y_zero_point"));
    const double as = quant_scale(a, "a_scale"), y_scale = quant_scale(a, "y_scale");
    const std::vector<double> ws = weight_scales(a, units);
    std::vector<double> ms;
    for (double s : ws) ms.push_back(requant_multiplier(as, s, y_scale));
    const DType to = quant_dtype(a, "to");
    const double* x = in[0]->f64();
    const double* w = in[1]->f64();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t u = 0; u < units; ++u) {
        const double m = ms[static_cast<size_t>(u)];
        double acc = 0;  // exact: |terms| <= 255^2, far fewer than 2^37 of them
        for (int64_t i = 0; i < k; ++i) acc += (x[r * k + i] - azp) * (w[i * units + u] - wzp[static_cast<size_t>(u)]);
        const double real = real_to_round({acc, as, ws[static_cast<size_t>(u)]}, {y_scale}, stored(stored(acc) * m));
        y.f64()[r * units + u] = requantize(real, yzp, to);
      }
    return std::vector<Tensor>{y};
  };
  quantized_output(s);
  s.sample = [](core::Rng& rng) {
    Case c;
    const std::string at = rng.bernoulli(0.5) ? "int8" : "uint8", wt = rng.bernoulli(0.7) ? "int8" : "uint8";
    const std::string to = rng.bernoulli(0.8) ? at : at == "int8" ? "uint8" : "int8";  // tools keep the type
    Shape x = random_shape(rng, static_cast<int>(rng.randint(1, 2)), 1, 3);
    x.push_back(rng.randint(1, 16));
    c.inputs = {TensorType{at == "int8" ? DType::I8 : DType::U8, x}};
    const double as = draw_scale(rng), ws = draw_scale(rng);
    // The output scale near the accumulator's typical size, so the result neither always saturates nor rounds to 0.
    const double ys = draw_output_scale(rng, as, ws, x.back());
    c.attrs = {{"units", rng.randint(1, 6)},
               {"a_scale", as},
               {"a_zero_point", draw_zero_point(rng, at)},
               {"w_scale", ws},
               {"w_zero_point", draw_zero_point(rng, wt)},
               {"w_type", wt},
               {"y_scale", ys},
               {"y_zero_point", draw_zero_point(rng, to)},
               {"to", to}};
    draw_per_channel_weight(rng, c.attrs, core::attr_i(c.attrs, "units"), wt);
    return c;
  };
  s.onnx_export = [](OnnxExport& e) {  // QLinearMatMul, its QDQ form or its integer form
    const std::vector<std::string> q = qlinear_operands(e, "a_");
    qlinear_product_node(e, "QLinearMatMul", "MatMul", "MatMulInteger", q, "a_", 1);
  };
  s.onnx_import = {{{"QLinearMatMul"}, [](OnnxImport& m) {
                      const Shape w = m.type_of(m.in(3)).shape;
                      if (w.size() != 2 || !m.constant(3))
                        m.fail("the right operand must be a constant matrix [K, N] (qlinear_matmul's weight)");
                      Attrs a = {{"units", w[1]}};
                      import_qlinear_params(m, "a_", "b", a);
                      m.emit_final("qlinear_matmul", {m.in(0), m.in(3)}, a);
                    }}};
  return s;
}

}  // namespace

void register_quant(Registry& r) {
  r.add(make_quantize());
  r.add(make_dequantize());
  r.add(make_qlinear_matmul());
}

}  // namespace quorum::ops
