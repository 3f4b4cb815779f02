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
#include <cfloat>
#include <cmath>

#include "ops/kernel_util.h"
#include "ops/onnx_map.h"
#include "ops/qdq_form.h"
#include "ops/quant_util.h"
#include "ops/registry.h"

namespace quorum::ops {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// y = saturate(round(x / scale) + zero_point)
OpSpec make_quantize() {
  OpSpec s;
  s.name = "quantize_linear";
  s.doc = "ONNX QuantizeLinear, per tensor: y = saturate(round_half_even(x / scale) + zero_point) in int8 or uint8";
  s.attrs = quant_attrs("");
  s.attrs.push_back(quant_type_attr("to"));
  s.infer = [](const std::vector<TensorType>& in, const Attrs& a) {
    QUORUM_REQUIRE(core::is_float(in[0].dtype),
                   "quantize_linear quantizes a float input, got " + core::to_string(in[0].dtype));
    const DType to = quant_dtype(a, "to");
    check_zero_point(a, "zero_point", to);
    return Signature{{TensorType{to, in[0].shape}}, {}};
  };
  s.forward = [](const Inputs& in, const Attrs& a) {
    const DType to = quant_dtype(a, "to");
    const double scale = quant_scale(a, "scale"), zp = static_cast<double>(core::attr_i(a, "zero_point"));
    Tensor y(DType::F64, in[0]->shape());
    for (int64_t i = 0; i < y.numel(); ++i) {
      const double x = in[0]->f64()[i];
      y.f64()[i] = requantize(real_to_round({x}, {scale}, stored(x / scale)), zp, to);
    }
    return std::vector<Tensor>{y};
  };
  quantized_output(s);
  s.sample = [](core::Rng& rng) {
    Case c;
    c.inputs = {f64t(random_shape(rng, static_cast<int>(rng.randint(1, 4)), 1, 5))};
    const std::string to = rng.bernoulli(0.5) ? "int8" : "uint8";
    const double scale = draw_scale(rng);
    c.attrs = {{"scale", scale}, {"zero_point", draw_zero_point(rng, to)}, {"to", to}};
    // Wide enough to saturate at both ends, with ties (x / scale = k + 0.5: exact when scale is a power of two).
    c.gen = {InputGen{-300 * scale, 300 * scale}};
    c.gen[0].tie_grid = scale;
    return c;
  };
  s.onnx_export = [](OnnxExport& e) {
    if (e.dtype() != DType::F32) e.refuse("QuantizeLinear quantizes float32 values");
    const DType to = quant_dtype(e.attrs(), "to");
    e.final_node("QuantizeLinear", {e.in(0), scale_constant(e, e.af("scale"), "scale"),
                                    zero_point_constant(e, e.ai("zero_point"), to, "zero_point")});
  };
  s.onnx_import = {{{"QuantizeLinear"}, [](OnnxImport& m) {
                      const auto [scale, zp, to] = import_quant_params(m, 1, "y");
                      m.emit_final("quantize_linear", {m.in(0)},
                                   {{"scale", scale}, {"zero_point", zp}, {"to", core::to_string(to)}});
                    }}};
  return s;
}

// y = (x - zero_point) * scale, float32
OpSpec make_dequantize() {
  OpSpec s;
  s.name = "dequantize_linear";
  s.doc = "ONNX DequantizeLinear, per tensor: y = (x - zero_point) * scale, from int8 or uint8 to float32";
  s.attrs = quant_attrs("");
  s.infer = [](const std::vector<TensorType>& in, const Attrs& a) {
    // int32 with zero point 0: ONNX's form of a quantized bias (a QDQ convolution's, read back; its int32
    // initializer reads as int64).
    const bool bias =
        (in[0].dtype == DType::I32 || in[0].dtype == DType::I64) && core::attr_i(a, "zero_point") == 0;
    QUORUM_REQUIRE(core::is_quantized(in[0].dtype) || bias,
                   "dequantize_linear takes an int8 or uint8 input (or int32 with zero point 0), got " +
                       core::to_string(in[0].dtype));
    check_zero_point(a, "zero_point", in[0].dtype);
    return Signature{{TensorType{DType::F32, in[0].shape}}, {}};
  };
  s.forward = [](const Inputs& in, const Attrs& a) {
    const double scale = quant_scale(a, "scale"), zp = static_cast<double>(core::attr_i(a, "zero_point"));
    Tensor y(DType::F64, in[0]->shape());
    // (x - zp) * scale, exact; a float32 implementation may form x * scale - zp * scale (two roundings,
    // whose difference cancels when x is near zp): stored marks both.
    for (int64_t i = 0; i < y.numel(); ++i) y.f64()[i] = stored(in[0]->f64()[i] * scale) - stored(zp * scale);
    return std::vector<Tensor>{y};
  };
  s.tol_f32 = {0, 1e-7};
  s.range = [](const std::vector<Interval>& in, const std::vector<TensorType>&, const Attrs& a) {
    const double scale = quant_scale(a, "scale"), zp = static_cast<double>(core::attr_i(a, "zero_point"));
    return std::vector<Interval>{{(in[0].lo - zp) * scale, (in[0].hi - zp) * scale}};
  };
  quantized_operator(s);
  s.sample = [](core::Rng& rng) {
    Case c;
    const std::string type = rng.bernoulli(0.5) ? "int8" : "uint8";
    c.inputs = {TensorType{type == "int8" ? DType::I8 : DType::U8,
                           random_shape(rng, static_cast<int>(rng.randint(1, 4)), 1, 5)}};
    c.attrs = {{"scale", draw_scale(rng)}, {"zero_point", draw_zero_point(rng, type)}};
    return c;
  };
  s.onnx_export = [](OnnxExport& e) {
    e.final_node("DequantizeLinear", {e.in(0), scale_constant(e, e.af("scale"), "scale"),
                                      zero_point_constant(e, e.ai("zero_point"), e.dtype(), "zero_point")});
  };
  s.onnx_import = {{{"DequantizeLinear"}, [](OnnxImport& m) {
                      const auto [scale, zp, type] = import_quant_params(m, 1, "x");
                      if (type != m.type_of(m.in(0)).dtype) m.fail("the zero point's type differs from the input's");
                      m.emit_final("dequantize_linear", {m.in(0)}, {{"scale", scale}, {"zero_point", zp}});
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
  s.onnx_export = [](OnnxExport& e) {  // QLinearMatMul or its QDQ form
    const std::vector<std::string> q = qlinear_operands(e, "a_");
    if (!qdq_product_node(e, "MatMul", q)) e.final_node("QLinearMatMul", q);
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
