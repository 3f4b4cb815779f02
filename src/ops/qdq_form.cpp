#include "ops/qdq_form.h"

#include <cmath>

#include "core/error.h"
#include "ops/quant_util.h"

namespace quorum::ops {

// Every scale of the node (x_scale, w_scale, y_scale, the list x_scales, ...) in [2^-30, 2^30]: the QDQ form's
// float32 values (dequantized operands, products, sums of up to 2^20 terms, the result over y_scale) then
// stay normal and finite, so it computes the operator's result up to float32 rounding. Beyond, the QDQ form
// is another computation (a dequantized value overflows to infinity, a product to 0), not this operator.
bool float32_holds(const core::Attrs& attrs) {
  auto in_range = [](double s) { return s >= std::ldexp(1.0, -30) && s <= std::ldexp(1.0, 30); };
  for (const auto& [name, value] : attrs) {
    const bool scale = name.size() >= 5 && name.compare(name.size() - 5, 5, "scale") == 0;
    const bool scales = name.size() >= 6 && name.compare(name.size() - 6, 6, "scales") == 0;
    if (scale && !in_range(core::attr_f(attrs, name))) return false;
    if (scales)
      for (double s : core::attr_floats(attrs, name))
        if (!in_range(s)) return false;
  }
  return true;
}

bool qdq_product_offered(const OnnxExport& e) {  // per-axis DequantizeLinear: opset 13
  return !(per_channel_weight(e.attrs()) && e.opset() < 13) && float32_holds(e.attrs());
}

bool choose_qdq(OnnxExport& e, bool operator_form) {
  if (!float32_holds(e.attrs())) return false;
  return operator_form ? e.choose2("qlinear", "operator", "qdq") : e.choose("qlinear", {"qdq"}) == 0;
}

OnnxNode& qdq_node(OnnxExport& e, const std::string& float_type, const std::vector<QdqOperand>& operands,
                   const std::vector<std::string>& what, const std::string& y_scale, const std::string& y_zero_point,
                   const std::vector<int64_t>& axes) {
  QUORUM_CHECK(operands.size() == what.size(), "qdq_node: one name per operand");
  QUORUM_CHECK(axes.empty() || axes.size() == operands.size(), "qdq_node: one axis per operand");
  std::vector<std::string> deq;
  for (size_t i = 0; i < operands.size(); ++i) {
    auto [d, out] =
        e.helper("DequantizeLinear", {operands[i][0], operands[i][1], operands[i][2]}, what[i] + "_dequantized");
    if (!axes.empty() && axes[i] >= 0) d->set_i("axis", axes[i]);
    deq.push_back(out);
  }
  auto [f, out] = e.helper(float_type, deq, "float");
  e.final_node("QuantizeLinear", {out, y_scale, y_zero_point});
  return *f;
}

OnnxNode* qdq_product_node(OnnxExport& e, const std::string& float_type, const std::vector<std::string>& q) {
  QUORUM_CHECK(q.size() == 8 || q.size() == 9, "qdq_product_node: the QLinear operands");
  const bool per_channel = per_channel_weight(e.attrs());
  QUORUM_CHECK(qdq_product_offered(e), "qdq_product_node: the QDQ form does not hold the node's values");
  std::vector<QdqOperand> operands = {{q[0], q[1], q[2]}, {q[3], q[4], q[5]}};
  std::vector<std::string> what = {"x", "w"};
  // The weight's output channels: Conv's [O, I, kh, kw] along axis 0, MatMul's [K, units] along axis 1.
  std::vector<int64_t> axes = {-1, per_channel ? (float_type == "MatMul" ? 1 : 0) : -1};
  if (q.size() == 9) {  // a bias: qlinear_conv2d's (qlinear_matmul has none)
    const double x_scale = quant_scale(e.attrs(), "x_scale");
    if (!per_channel) {
      const double bias_scale = static_cast<double>(static_cast<float>(x_scale * quant_scale(e.attrs(), "w_scale")));
      operands.push_back({q[8], scale_constant(e, bias_scale, "bias_scale"),
                          zero_point_constant(e, 0, core::DType::I32, "bias_zero_point")});
    } else {  // per channel: f32(x_scale * w_scale[c]), zero points 0
      const std::vector<double> ws = weight_scales(e.attrs(), static_cast<int64_t>(e.afs("w_scales").size()));
      const auto n = static_cast<int64_t>(ws.size());
      core::Tensor scales(core::DType::F32, {n}), zeros(core::DType::I32, {n});
      for (int64_t c = 0; c < n; ++c) {
        scales.set(c, static_cast<double>(static_cast<float>(x_scale * ws[static_cast<size_t>(c)])));
        zeros.set(c, 0);
      }
      operands.push_back({q[8], e.constant(scales, "bias_scale"), e.constant(zeros, "bias_zero_point")});
    }
    what.push_back("bias");
    axes.push_back(per_channel ? 0 : -1);
  }
  return &qdq_node(e, float_type, operands, what, q[6], q[7], axes);
}

}  // namespace quorum::ops
