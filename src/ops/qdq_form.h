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
// node in [2^-30, 2^30] (qdq_form.cpp). Without an operator form (`operator_form` false: MaxPool on int8 whose
// output is quantized otherwise than its input) the QDQ form is the only choice, recorded as such.
bool choose_qdq(OnnxExport& e, bool operator_form = true);
// Every scale of the node (attributes *scale, *scales) in [2^-30, 2^30]: the rule above (also the integer form's).
bool float32_holds(const core::Attrs& attrs);

// A quantized operand as QDQ reads it: the value, its scale and its zero point (value names).
using QdqOperand = std::array<std::string, 3>;

// Writes DequantizeLinear on each operand (helper values "<node>/<what_i>_dequantized"), `float_type` on
// the results as the helper "<node>/float", and QuantizeLinear(float, y_scale, y_zero_point) as the node's
// final node. Returns the float node, for the float operator's attributes. `axes` (empty, or one per operand):
// an operand whose entry is >= 0 is dequantized per axis along it (1-D scale and zero point, opset 13).
OnnxNode& qdq_node(OnnxExport& e, const std::string& float_type, const std::vector<QdqOperand>& operands,
                   const std::vector<std::string>& what, const std::string& y_scale, const std::string& y_zero_point,
                   const std::vector<int64_t>& axes = {});

// qlinear_conv2d's and qlinear_matmul's QDQ form, from their QLinear operands (x, x_scale, x_zero_point, w,
// w_scale, w_zero_point, y_scale, y_zero_point, then the int32 bias if any, which is dequantized with the scale
// x_scale * w_scale in float32 and zero point 0, as tools write it): the `float_type` node, written where
// qdq_product_offered (the caller chooses the form: integer_form.h's qlinear_product_node). Per-channel weights
// (opset 13 on) are dequantized per axis, along the weight's output channels (axis 0 of Conv's [O, I, kh, kw],
// axis 1 of MatMul's [K, units]), and the bias with the per-channel scales f32(x_scale * w_scale[c]) along its
// axis 0, as tools write it.
bool qdq_product_offered(const OnnxExport& e);
OnnxNode* qdq_product_node(OnnxExport& e, const std::string& float_type, const std::vector<std::string>& q);

}  // namespace quorum::ops
