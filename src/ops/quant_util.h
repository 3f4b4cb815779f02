// What the quantized operators share (quant.cpp, and conv.cpp's qlinear_conv2d): their attributes,
// ONNX's requantization rule, the draws of scales and zero points, and the scale and zero-point
// constants of their ONNX nodes.
#pragma once
#include <string>
#include <tuple>
#include <vector>

#include "ops/op_spec.h"

namespace quorum::ops {

class OnnxExport;
class OnnxImport;

// The attributes <prefix>scale (float32, > 0) and <prefix>zero_point (an integer of the value's type).
std::vector<AttrSpec> quant_attrs(const std::string& prefix);
// An attribute naming a quantized type: "int8" or "uint8".
AttrSpec quant_type_attr(const std::string& name);
DType quant_dtype(const Attrs& a, const std::string& name);
// Fails (OpError) when the zero point `name` is not a value of `type`.
void check_zero_point(const Attrs& a, const std::string& name, DType type);
// The scale `name` as the float32 a library holds.
double quant_scale(const Attrs& a, const std::string& name);
// ONNX's requantization of a real value r (already divided by the output scale):
// saturate(round_half_even(r) + zero_point) in `type`; NaN stays NaN (undefined).
double requantize(double r, double zero_point, DType type);
// Whether every way a library may form prod(factors) / prod(divisors) in float32 is exact: in any order, any
// divisor applied as a division or as a product by its float32 reciprocal (libtorch's x * (1 / scale)), that is
// when every factor, every divisor and its reciprocal (so a power of two), and the product of every subset of
// the factors and reciprocals (each partial result of each order) are float32 values. Finite values only.
bool exact_in_float32(const std::vector<double>& factors, const std::vector<double>& divisors);
// The real value r = prod(factors) / prod(divisors) that a quantized operator rounds to its integer grid
// (already divided by the output scale: x / scale, acc * x_scale * w_scale / y_scale), as the spread holds it.
// Where exact_in_float32(factors, divisors), r itself, unmoved by the spread's trials: every float32 library
// forms exactly r, so a tie r = k + 1/2 is judged (ONNX rounds it half to even; half away from zero is a
// finding). Otherwise `stored_form`: the kernel's float32 formulation with its stored marks (e.g.
// stored(x / scale)), so the spread covers both sides of a tie float32 may land on. Quantized kernels call this
// instead of stored() for the value they round.
double real_to_round(const std::vector<double>& factors, const std::vector<double>& divisors, double stored_form);
// The multiplier of a quantized product, a_scale * b_scale / y_scale, as float32 implementations
// form it (two stored roundings).
double requant_multiplier(double a_scale, double b_scale, double y_scale);
// Draws: a float32 scale (a power of two a third of the time, so ties x / scale = k + 1/2 occur);
// a zero point of `type` ("int8"/"uint8"), at its ends a quarter of the time.
double draw_scale(core::Rng& rng);
int64_t draw_zero_point(core::Rng& rng, const std::string& type);
// What every quantized operator shares: family "quant", drawn only into quantized models, not differentiable.
void quantized_operator(OpSpec& s);
// ... and for one whose output is quantized to the type its attribute `to` names: judged exactly (tolerance 0;
// the float32 roundings a library may make are the spread's), every value in that type's range.
void quantized_output(OpSpec& s);
// Per-channel parameters (QLinearConv's w_scale / w_zero_point, QLinearMatMul's b_scale / b_zero_point as 1-D
// tensors, one value per output channel or column; QuantizeLinear's and DequantizeLinear's per-axis y_scale /
// y_zero_point, one value per index of `axis`), under a prefix p: "w_" for a weight (the default), "" for
// quantize_linear / dequantize_linear. The attributes <p>scales (float32 list) and <p>zero_points (integer
// list): <p>scales empty = per tensor (<p>scale); given, it holds one scale per channel, and <p>zero_points
// either one zero point per channel or empty (<p>zero_point for every channel). Both are keyed in a finding's
// signature when given (w_scales="given"), and <p>zero_points needs <p>scales.
std::vector<AttrSpec> per_channel_weight_attrs(const std::string& prefix = "w_");
bool per_channel_weight(const Attrs& a, const std::string& prefix = "w_");
// Fails (OpError) unless the lists fit `channels` channels and the zero points are values of `type`.
void check_weight_quant(const Attrs& a, DType type, int64_t channels, const std::string& prefix = "w_");
// Each channel's scale (as the float32 a library holds) and zero point; per tensor, <p>scale and <p>zero_point
// repeated.
std::vector<double> weight_scales(const Attrs& a, int64_t channels, const std::string& prefix = "w_");
std::vector<double> weight_zero_points(const Attrs& a, int64_t channels, const std::string& prefix = "w_");
// A sampler's per-channel share: three tenths of the time, <p>scales of `channels` distinct float32 scales around
// the drawn <p>scale (a tenth of them 2^6..2^14 times smaller or larger: those channels saturate or round to 0),
// and half of those times <p>zero_points (distinct, of `type`); <p>scale and <p>zero_point then hold channel 0's,
// as an ONNX import reads them back. Returns whether it drew per channel.
bool draw_per_channel_weight(core::Rng& rng, Attrs& a, int64_t channels, const std::string& type,
                             const std::string& prefix = "w_");
// ONNX constants "<p>scale" and "<p>zero_point": per channel 1-D of the channel count, per tensor scalars.
std::string weight_scale_constant(OnnxExport& e, const std::string& prefix);
std::string weight_zero_point_constant(OnnxExport& e, DType type, const std::string& prefix);
// Reads a scale (input i) and zero point (input i + 1, default uint8 0), per tensor or per channel (1-D, more
// than one value), into <p>scale, <p>zero_point and, per channel, <p>scales and <p>zero_points (unless every
// channel's is the same); returns the zero point's type (int64 for an int32 bias's zeros).
DType import_channel_params(OnnxImport& m, int i, const std::string& what, const std::string& prefix, Attrs& a);
// ONNX constants: a float32 scalar scale, and a zero point of `type`.
std::string scale_constant(OnnxExport& e, double scale, const std::string& what);
std::string zero_point_constant(OnnxExport& e, int64_t zp, DType type, const std::string& what);
// An output scale near a product's typical accumulator (x_scale * w_scale * 64 * sqrt(terms), times 2^k for a
// drawn k in [-3, 3], as float32), so a sampled case neither always saturates nor rounds to 0.
double draw_output_scale(core::Rng& rng, double x_scale, double w_scale, int64_t terms);
// QLinearConv's and QLinearMatMul's first eight operands in ONNX's order: the input, its scale and zero point
// (attributes <x>scale, <x>zero_point), the weight (input 1), w_scale, w_zero_point, y_scale, y_zero_point.
std::vector<std::string> qlinear_operands(OnnxExport& e, const std::string& x);
// The same read back into attributes: <x>scale, <x>zero_point, w_scale, w_zero_point, w_type, y_scale,
// y_zero_point, to; `w` names the weight in a failure (ONNX calls QLinearMatMul's "b").
void import_qlinear_params(OnnxImport& m, const std::string& x, const std::string& w, Attrs& a);
// The scale (input i) and zero point (input i + 1, default uint8 0) of an ONNX quantized node, per
// tensor; `what` names them in a failure.
std::tuple<double, int64_t, DType> import_quant_params(OnnxImport& m, int i, const std::string& what);

}  // namespace quorum::ops
