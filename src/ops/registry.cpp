// The catalogue, built once from every family's register function.
#include "ops/registry.h"

#include <algorithm>

namespace quorum::ops {

void Registry::add(OpSpec spec) {
  QUORUM_CHECK(!by_name_.count(spec.name), "operator '" + spec.name + "' registered twice");
  QUORUM_CHECK(spec.infer && spec.forward && spec.sample, "operator '" + spec.name + "' lacks infer/forward/sample");
  for (const auto& a : spec.attrs)
    QUORUM_CHECK(core::kind_of(a.default_value) == a.kind,
                 "operator '" + spec.name + "' attribute '" + a.name + "' default has the wrong kind");
  specs_.push_back(std::move(spec));
  const OpSpec& s = specs_.back();
  by_name_[s.name] = &s;
  for (const auto& e : s.onnx_import) {
    QUORUM_CHECK(static_cast<bool>(e.hook), "operator '" + s.name + "' has an ONNX import entry without a hook");
    for (const auto& t : e.op_types) {
      auto [it, fresh] = onnx_import_.emplace(t, &e.hook);
      QUORUM_CHECK(fresh, "ONNX operator type '" + t + "' imported by two operators (the second: '" + s.name + "')");
    }
  }
}

const std::function<void(OnnxImport&)>* Registry::onnx_importer(const std::string& onnx_type) const {
  auto it = onnx_import_.find(onnx_type);
  return it == onnx_import_.end() ? nullptr : it->second;
}

const OpSpec* Registry::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<const OpSpec*> Registry::all() const {
  std::vector<const OpSpec*> v;
  for (const auto& s : specs_) v.push_back(&s);
  std::sort(v.begin(), v.end(), [](const OpSpec* a, const OpSpec* b) {
    return a->family != b->family ? a->family < b->family : a->name < b->name;
  });
  return v;
}

const Registry& catalogue() {
  static const Registry reg = [] {
    Registry r;
    register_eltwise(r);
    register_binary(r);
    register_conv(r);
    register_pool(r);
    register_dense(r);
    register_norm(r);
    register_softmax(r);
    register_reduce(r);
    register_shape(r);
    register_resize(r);
    register_rnn(r);
    register_loss(r);
    register_quant(r);
    register_qlinear(r);
    return r;
  }();
  return reg;
}

const OpSpec& op(const std::string& name) {
  const OpSpec* s = catalogue().find(name);
  if (!s) throw core::UserError("unknown operator '" + name + "'");
  return *s;
}

}  // namespace quorum::ops
