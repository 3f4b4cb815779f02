// The QDQ exchange form of a quantized operator, as quantization tools write it: DequantizeLinear on each
// quantized operand, the float operator, QuantizeLinear producing the node's value. An engine runs it in
// float32 as written or, when it optimizes, fuses it back into its quantized kernel; both must give the
// operator's result. The choice is the form `qlinear=operator|qdq` (ir::OnnxForm), per node.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "ops/onnx_map.h"

namespace quorum::ops {

// The node's form: true for QDQ. Offered only while float32 holds the QDQ form's values: every scale of the
// node in [2^-30, 2^30] (qdq_form.cpp).
bool choose_qdq(OnnxExport& e);

// A quantized operand as QDQ reads it: the value, its scale and its zero point (value names).
using QdqOperand = std::array<std::string, 3>;

// Writes DequantizeLinear on each operand (helper values "<node>/<what_i>_dequantized"), `float_type` on
// the results as the helper "<node>/float", and QuantizeLinear(float, y_scale, y_zero_point) as the node's
// final node. Returns the float node, for the float operator's attributes.
OnnxNode& qdq_node(OnnxExport& e, const std::string& float_type, const std::vector<QdqOperand>& operands,
                   const std::vector<std::string>& what, const std::string& y_scale, const std::string& y_zero_point);

// qlinear_conv2d's and qlinear_matmul's QDQ form, from their QLinear operands (x, x_scale, x_zero_point, w,
// w_scale, w_zero_point, y_scale, y_zero_point, then the int32 bias if any, which is dequantized with the scale
// x_scale * w_scale in float32 and zero point 0, as tools write it): the `float_type` node, or null for the
// operator form. Per-tensor weights only (a per-axis DequantizeLinear is not in the catalogue): per-channel
// weights have the operator form alone.
OnnxNode* qdq_product_node(OnnxExport& e, const std::string& float_type, const std::vector<std::string>& q);

}  // namespace quorum::ops
