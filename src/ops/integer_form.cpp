#include "ops/integer_form.h"

#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "ops/qdq_form.h"
#include "ops/quant_util.h"

namespace quorum::ops {

bool integer_form_holds(const OnnxExport& e, int channel_axis) {
  if (!float32_holds(e.attrs())) return false;
  const core::Shape& w = e.in_shape(1);
  const int64_t channels = w.at(static_cast<size_t>(channel_axis));
  const int64_t terms = core::numel(w) / std::max<int64_t>(channels, 1);
  // The accumulator ConvInteger / MatMulInteger return is int32, and so is the Add of the bias: the products
  // stay below 2^30, leaving 2^30 to the bias (a materialized one is a few thousand). Not the bias's values: the
  // choice must not depend on them (supports() asks before the weights are drawn).
  return static_cast<double>(terms) * 255 * 255 < std::ldexp(1.0, 30);
}

OnnxNode& integer_product_node(OnnxExport& e, const std::string& integer_type, const std::vector<std::string>& q,
                               const std::string& x, int channel_axis) {
  QUORUM_CHECK(q.size() == 8 || q.size() == 9, "integer_product_node: the QLinear operands");
  const bool per_channel = per_channel_weight(e.attrs());
  // One weight zero point for every channel: the scalar (ONNX Runtime's tools write it so, and its ConvInteger
  // takes no other), not q[5]'s per-channel copy of it.
  const bool zero_points = e.attrs().count("w_zero_points") && !e.aints("w_zero_points").empty();
  const std::string w_zero_point =
      zero_points ? q[5]
                  : zero_point_constant(e, e.ai("w_zero_point"), quant_dtype(e.attrs(), "w_type"), "w_zero_point");
  auto [node, acc] = e.helper(integer_type, {q[0], q[3], q[2], w_zero_point}, "integer");
  // A vector of `n` values along the output's channel axis: [n, 1, ..., 1] with channel_axis - 1 ones.
  auto channel_shape = [&](int64_t n) {
    core::Shape s = {n};
    for (int i = 1; i < channel_axis; ++i) s.push_back(1);
    return s;
  };
  if (q.size() == 9) {  // qlinear_conv2d's int32 bias [C], added to the int32 accumulator along the channels
    const core::Shape shape = channel_shape(e.in_shape(2).at(0));
    std::string bias;
    if (const core::Tensor* b = e.initializer(q[8])) {  // a constant [C, 1, 1], as tools write it
      core::Tensor t(core::DType::I32, shape);
      for (int64_t i = 0; i < b->numel(); ++i) t.set(i, b->get(i));
      bias = e.constant(t, "bias");
    } else {  // no values (a dry run): the same shape
      bias = e.h("Reshape", {q[8], e.ints(shape, "bias_shape")}, "bias");
    }
    acc = e.h("Add", {acc, bias}, "biased");
  }
  auto [cast, real] = e.helper("Cast", {acc}, "float");
  cast->set_i("to", 1);  // FLOAT
  // x_scale * w_scale[c] as the float32 every library multiplies by (the reference's stored(xs * ws)).
  const double xs = quant_scale(e.attrs(), x + "scale");
  std::string product;
  if (per_channel) {
    const std::vector<double> ws = weight_scales(e.attrs(), static_cast<int64_t>(e.afs("w_scales").size()));
    core::Tensor p(core::DType::F32, channel_shape(static_cast<int64_t>(ws.size())));
    for (size_t c = 0; c < ws.size(); ++c) p.set(static_cast<int64_t>(c), xs * ws[c]);
    product = e.constant(p, "scale_product");
  } else {
    product = scale_constant(e, xs * quant_scale(e.attrs(), "w_scale"), "scale_product");
  }
  e.final_node("QuantizeLinear", {e.h("Mul", {real, product}, "scaled"), q[6], q[7]});
  return *node;
}

OnnxNode& qlinear_product_node(OnnxExport& e, const std::string& qlinear_type, const std::string& float_type,
                               const std::string& integer_type, const std::vector<std::string>& q,
                               const std::string& x, int weight_channel_axis) {
  std::vector<std::string> forms = {"operator"};
  if (qdq_product_offered(e)) forms.push_back("qdq");
  if (integer_form_holds(e, weight_channel_axis)) forms.push_back("integer");
  const std::string form = forms.size() > 1 ? forms[e.choose("qlinear", forms)] : "operator";
  if (form == "qdq") return *qdq_product_node(e, float_type, q);
  if (form == "integer") return integer_product_node(e, integer_type, q, x, weight_channel_axis == 0 ? 3 : 1);
  return e.final_node(qlinear_type, q);
}

}  // namespace quorum::ops
