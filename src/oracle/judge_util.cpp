// Pieces both verdict rules use.
#include "oracle/judge_util.h"

#include <cmath>
#include <variant>

#include "ops/registry.h"

namespace quorum::oracle::detail {

bool has_nonfinite(const core::Tensor& t) {
  const int64_t n = t.numel();
  if (t.dtype() == core::DType::F32) {
    const float* p = t.f32();
    for (int64_t i = 0; i < n; ++i)
      if (!std::isfinite(p[i])) return true;
    return false;
  }
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(t.get(i))) return true;
  return false;
}

bool has_nan(const core::Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (std::isnan(t.get(i))) return true;
  return false;
}

std::string key_params(const ir::Node& n) {
  const ops::OpSpec& spec = ops::op(n.op);
  core::Attrs key;
  for (const auto& [name, v] : n.attrs) {
    const ops::AttrSpec* a = spec.attr(name);
    if (!a) continue;
    if (!a->keyed_when_given) {
      if (!a->choices.empty()) key[name] = v;
    } else if (!(v == a->default_value)) {
      key[name] = a->choices.empty() ? core::AttrValue(std::string("given")) : v;
    }
  }
  return core::to_string(key);
}

ops::Tolerance node_tolerance(const ir::Graph& g, const ir::Node& n, core::DType dtype, bool grad) {
  const ops::OpSpec& spec = ops::op(n.op);
  std::vector<core::TensorType> in;
  for (size_t i = 0; i < ir::data_input_count(n); ++i) in.push_back(g.types.at(n.inputs[i]));
  ops::Tolerance t = spec.tolerance(dtype, in, n.attrs);
  if (grad) t = ops::backward_tolerance(t);
  return t;
}

ops::Tolerance loss_tolerance(const ir::Graph& g, const std::string& loss_op, core::DType dtype, bool grad) {
  const ops::OpSpec& spec = ops::op(loss_op);
  const core::TensorType out = g.types.at(g.outputs[0]);
  ops::Tolerance t = spec.tolerance(dtype, {out, out}, ops::canonical_attrs(spec, {}));
  if (grad) t = ops::backward_tolerance(t);
  return t;
}

std::optional<core::Tensor> own_value(const ir::Graph& g, const backends::ValueMap& values, const std::string& name,
                                      const backends::ValueMap* inputs, core::DType dtype) {
  if (auto it = values.find(name); it != values.end()) return it->second.to(core::DType::F64);
  if (auto w = g.initializers.find(name); w != g.initializers.end())
    return rounded_to(w->second, dtype);
  if (inputs)
    if (auto in = inputs->find(name); in != inputs->end()) return rounded_to(in->second, dtype);
  return std::nullopt;
}

std::vector<core::Tensor> own_inputs(const ir::Graph& g, const ir::Node& n, const backends::ValueMap& values,
                                     const backends::ValueMap* inputs, core::DType dtype) {
  std::vector<core::Tensor> held;
  for (const auto& name : n.inputs) {
    auto v = own_value(g, values, name, inputs, dtype);
    if (!v) return {};
    held.push_back(std::move(*v));
  }
  return held;
}

core::Tensor rounded_to(const core::Tensor& t, core::DType dtype) {
  if (dtype != core::DType::F32 || t.dtype() == core::DType::F32) return t.to(core::DType::F64);
  core::Tensor out(core::DType::F64, t.shape());
  double* o = out.f64();
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(t.get(i));
  return out;
}

std::string crash_message(const worker::Outcome& o) {
  std::string last_line = o.stderr_tail;
  if (auto p = last_line.rfind('\n'); p != std::string::npos) last_line = last_line.substr(p + 1);
  return std::string(worker::to_string(o.status)) + ": " +
         normalize_message(o.message + (last_line.empty() ? "" : " | " + last_line));
}

}  // namespace quorum::oracle::detail
