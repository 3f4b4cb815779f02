#include "ops/qdq_form.h"

#include <cmath>

#include "core/error.h"
#include "ops/quant_util.h"

namespace quorum::ops {

namespace {

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

}  // namespace

bool choose_qdq(OnnxExport& e) { return float32_holds(e.attrs()) && e.choose2("qlinear", "operator", "qdq"); }

OnnxNode& qdq_node(OnnxExport& e, const std::string& float_type, const std::vector<QdqOperand>& operands,
                   const std::vector<std::string>& what, const std::string& y_scale, const std::string& y_zero_point) {
  QUORUM_CHECK(operands.size() == what.size(), "qdq_node: one name per operand");
  std::vector<std::string> deq;
  for (size_t i = 0; i < operands.size(); ++i)
    deq.push_back(e.h("DequantizeLinear", {operands[i][0], operands[i][1], operands[i][2]}, what[i] + "_dequantized"));
  auto [f, out] = e.helper(float_type, deq, "float");
  e.final_node("QuantizeLinear", {out, y_scale, y_zero_point});
  return *f;
}

OnnxNode* qdq_product_node(OnnxExport& e, const std::string& float_type, const std::vector<std::string>& q) {
  QUORUM_CHECK(q.size() == 8 || q.size() == 9, "qdq_product_node: the QLinear operands");
  if (per_channel_weight(e.attrs()) || !choose_qdq(e)) return nullptr;
  std::vector<QdqOperand> operands = {{q[0], q[1], q[2]}, {q[3], q[4], q[5]}};
  std::vector<std::string> what = {"x", "w"};
  if (q.size() == 9) {  // a bias: qlinear_conv2d's (qlinear_matmul has none)
    const double product = quant_scale(e.attrs(), "x_scale") * quant_scale(e.attrs(), "w_scale");
    const double bias_scale = static_cast<double>(static_cast<float>(product));
    operands.push_back({q[8], scale_constant(e, bias_scale, "bias_scale"),
                        zero_point_constant(e, 0, core::DType::I32, "bias_zero_point")});
    what.push_back("bias");
  }
  return &qdq_node(e, float_type, operands, what, q[6], q[7]);
}

}  // namespace quorum::ops
