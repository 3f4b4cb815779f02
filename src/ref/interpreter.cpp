// Reference interpreter.
#include "ref/interpreter.h"

#include "core/error.h"
#include "ops/registry.h"

namespace quorum::ref {

using core::UserError;

namespace {

ops::Inputs gather(const ir::Node& n, const ValueMap& values) {
  ops::Inputs in;
  for (const auto& name : n.inputs) in.push_back(&values.at(name));
  return in;
}

void accumulate(ValueMap& grads, const std::string& name, const Tensor& g) {
  auto it = grads.find(name);
  if (it == grads.end()) {
    grads.emplace(name, g);
    return;
  }
  double* dst = it->second.f64();
  const double* src = g.f64();
  for (int64_t i = 0; i < g.numel(); ++i) dst[i] += src[i];
}

// The override for `op` if there is one, else the catalogue's kernel.
template <class Fn>
const Fn& pick(const std::map<std::string, Fn>* table, const std::string& op, const Fn& own) {
  if (table) {
    auto it = table->find(op);
    if (it != table->end()) return it->second;
  }
  return own;
}

}  // namespace

ValueMap forward(const ir::Graph& g, const ValueMap& inputs, const Overrides* ov) {
  ValueMap values;
  for (const auto& in : g.inputs) {
    auto it = inputs.find(in.name);
    if (it == inputs.end()) throw UserError("missing value for graph input '" + in.name + "'");
    if (it->second.shape() != in.type.shape)
      throw UserError("graph input '" + in.name + "' has shape " + core::to_string(it->second.shape()) +
                      ", the model wants " + core::to_string(in.type.shape));
    values.emplace(in.name, it->second.to(core::DType::F64));
  }
  for (const auto& [name, t] : g.initializers) values.emplace(name, t.to(core::DType::F64));
  for (const auto& n : g.nodes) {
    const ops::OpSpec& spec = ops::op(n.op);
    std::vector<Tensor> outs = pick(ov ? &ov->forward : nullptr, n.op, spec.forward)(gather(n, values), n.attrs);
    QUORUM_CHECK(outs.size() == n.outputs.size(), "operator '" + n.op + "' returned the wrong number of outputs");
    for (size_t i = 0; i < outs.size(); ++i) {
      QUORUM_CHECK(outs[i].shape() == g.types.at(n.outputs[i]).shape,
                   "operator '" + n.op + "' kernel shape disagrees with its shape rule");
      values.insert_or_assign(n.outputs[i], std::move(outs[i]));
    }
  }
  return values;
}

ValueMap backward(const ir::Graph& g, const ValueMap& values, const ValueMap& seeds, const Overrides* ov) {
  ValueMap grads;
  for (const auto& [name, t] : seeds) accumulate(grads, name, t.to(core::DType::F64));
  std::map<std::string, int> uses;
  for (const auto& n : g.nodes)
    for (const auto& v : n.inputs) ++uses[v];
  for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it) {
    const ir::Node& n = *it;
    const ops::OpSpec& spec = ops::op(n.op);
    std::vector<Tensor> outs, gouts;
    bool any = false;
    for (const auto& o : n.outputs) {
      outs.push_back(values.at(o));
      auto git = grads.find(o);
      if (git != grads.end()) {
        gouts.push_back(git->second);
        any = true;
      } else {
        gouts.emplace_back(core::DType::F64, values.at(o).shape());
      }
    }
    if (!any) continue;  // the scalar does not depend on this node
    const ops::VjpFn& vjp = pick(ov ? &ov->vjp : nullptr, n.op, spec.vjp);
    if (!vjp) throw UserError("node '" + n.name + "' (" + n.op + ") is not differentiable");
    std::vector<Tensor> gin = vjp(gather(n, values), n.attrs, outs, gouts);
    QUORUM_CHECK(gin.size() == n.inputs.size(), "operator '" + n.op + "' VJP returned the wrong number of gradients");
    for (size_t i = 0; i < gin.size(); ++i)
      if (gin[i].defined()) {
        accumulate(grads, n.inputs[i], gin[i]);
        // Each consumer's share too, for values several nodes consume (ir::contribution_key).
        if (uses.at(n.inputs[i]) > 1) accumulate(grads, ir::contribution_key(n.inputs[i], n.name), gin[i]);
      }
  }
  return grads;
}

TrainResult train(const ir::Graph& g, const ValueMap& inputs, const Tensor& target, const LossSpec& loss,
                  const Overrides* ov) {
  const ops::OpSpec& lspec = ops::op(loss.op);
  if (!lspec.is_loss) throw UserError("operator '" + loss.op + "' is not a loss");
  TrainResult r;
  r.values = forward(g, inputs, ov);
  const Tensor& pred = r.values.at(g.outputs[0]);
  const Tensor tgt = target.to(core::DType::F64);
  core::Attrs la;
  try {
    la = ops::canonical_attrs(lspec, loss.attrs);
    lspec.infer({pred.type(), tgt.type()}, la);
  } catch (const core::OpError& e) {
    throw UserError("loss '" + loss.op + "': " + e.what());
  }
  const ops::Inputs lin{&pred, &tgt};
  std::vector<Tensor> lout = lspec.forward(lin, la);
  r.loss = lout[0].get(0);
  std::vector<Tensor> seed{Tensor::f64({}, {1.0})};
  r.loss_grad = lspec.vjp(lin, la, lout, seed)[0];
  if (ov && ov->loss_grad_scale != 1.0)
    for (int64_t i = 0; i < r.loss_grad.numel(); ++i) r.loss_grad.f64()[i] *= ov->loss_grad_scale;
  r.grads = backward(g, r.values, {{g.outputs[0], r.loss_grad}}, ov);
  return r;
}

}  // namespace quorum::ref
