// The integer exchange form of qlinear_conv2d and qlinear_matmul, as ONNX Runtime's quantization tools write
// integer models: ConvInteger / MatMulInteger(x, w, x_zero_point, w_zero_point) with an int32 output, the int32
// bias added in int32 (a convolution's), Cast to float32, Mul by the float32 constant x_scale * w_scale (one per
// output channel, broadcast over the channel axis, where the weights are per channel), QuantizeLinear(y_scale,
// y_zero_point) as the final node. The choice among the operator form, QDQ (qdq_form.h) and this one is the form
// `qlinear=operator|qdq|integer` (ir::OnnxForm), per node. ONNX import reads the chain back as the QLinear node
// (ir/onnx_io.cpp, beside the GELU pattern), with x_scale 1 and w_scale(s) the products: the form holds only those.
#pragma once
#include <string>
#include <vector>

#include "ops/onnx_map.h"

namespace quorum::ops {

// Whether the integer form computes the operator's values: float32 holds every scale (the QDQ rule,
// float32_holds) and the int32 accumulator cannot overflow: terms * 255^2 < 2^30 (terms: the weight's elements per
// output channel, its `channel_axis` being the channels), leaving 2^30 to the int32 bias. Independent of the
// weights' values, so a backend's supports() (before weights are drawn) sees the form its session writes.
bool integer_form_holds(const OnnxExport& e, int channel_axis);

// Writes the integer form from the QLinear operands q (x, x_scale, x_zero_point, w, w_scale, w_zero_point,
// y_scale, y_zero_point[, int32 bias]; x_scale and w_scale stay unused: the Mul's product replaces them); `x` the
// input's attribute prefix (qlinear_operands'); `channel_axis` is the output's channel axis from the end (a
// convolution's [N, C, H, W]: 3; a matmul's [..., N]: 1). Returns the ConvInteger / MatMulInteger node, for the
// convolution's attributes.
OnnxNode& integer_product_node(OnnxExport& e, const std::string& integer_type, const std::vector<std::string>& q,
                               const std::string& x, int channel_axis);

// qlinear_conv2d's and qlinear_matmul's node in the form chosen among those that hold its values (`qlinear`:
// operator, qdq where qdq_product_offered, integer where integer_form_holds): QLinearConv / QLinearMatMul, the
// float node of the QDQ form, or the integer node. `weight_channel_axis`: the weight's output-channel axis
// (Conv's [O, I, kh, kw]: 0; MatMul's [K, N]: 1).
OnnxNode& qlinear_product_node(OnnxExport& e, const std::string& qlinear_type, const std::string& float_type,
                               const std::string& integer_type, const std::vector<std::string>& q,
                               const std::string& x, int weight_channel_axis);

}  // namespace quorum::ops
