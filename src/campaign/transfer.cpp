// Known-bug transfer (docs/findings.md, "Known-bug transfer").
#include "campaign/transfer.h"

#include <algorithm>

#include "core/error.h"
#include "ir/edit.h"
#include "ops/materialize.h"
#include "ops/registry.h"

namespace quorum::campaign {
std::string TransferVariant::origin() const {
  const std::string id = entry ? entry->id : "?";
  if (op == from_op) return "transfer from ledger entry " + id + " (its case as it is, on every library)";
  return "transfer from ledger entry " + id + " (" + op + " in place of " + from_op + ")";
}

std::vector<std::string> sibling_ops(const std::string& op, size_t data_inputs) {
  const ops::OpSpec* self = ops::catalogue().find(op);
  std::vector<std::string> out;
  if (!self || self->is_loss) return out;
  for (const ops::OpSpec* s : ops::catalogue().all()) {
    if (s->name == op || s->family != self->family || s->is_loss) continue;
    const size_t lo = static_cast<size_t>(s->min_inputs);
    const bool unbounded = s->max_inputs == ops::kUnbounded;
    if (data_inputs < lo || (!unbounded && data_inputs > static_cast<size_t>(s->max_inputs))) continue;
    out.push_back(s->name);
  }
  return out;
}

ir::Graph replace_op(const ir::Graph& original, const std::string& node, const std::string& op, core::Rng& rng) {
  ir::Graph g = original;
  auto it = std::find_if(g.nodes.begin(), g.nodes.end(), [&](const ir::Node& n) { return n.name == node; });
  if (it == g.nodes.end()) throw core::UserError("transfer: no node '" + node + "'");
  const ops::OpSpec& spec = ops::op(op);
  const size_t k = ir::data_input_count(*it);
  std::vector<std::string> data(it->inputs.begin(), it->inputs.begin() + static_cast<std::ptrdiff_t>(k));
  std::vector<core::TensorType> types;
  for (const auto& d : data) types.push_back(g.types.at(d));
  // The entry's attributes where the sibling has them and they are valid there, else its defaults.
  core::Attrs kept;
  for (const auto& a : spec.attrs)
    if (auto v = it->attrs.find(a.name); v != it->attrs.end()) kept[a.name] = v->second;
  core::Attrs attrs;
  ops::Signature sig;
  bool fitted = false;
  for (const core::Attrs& tried : {kept, core::Attrs{}}) {
    try {
      attrs = ops::canonical_attrs(spec, tried);
      sig = spec.infer(types, attrs);
      fitted = true;
      break;
    } catch (const core::OpError&) {
    } catch (const core::UserError&) {
    }
  }
  if (!fitted) throw core::UserError("transfer: " + op + " refuses the inputs of node '" + node + "'");
  if (sig.outputs.size() != it->outputs.size())
    throw core::UserError("transfer: " + op + " has " + std::to_string(sig.outputs.size()) + " outputs, node '" +
                          node + "' " + std::to_string(it->outputs.size()));
  std::vector<std::string> inputs = data;
  for (const auto& p : sig.params) {
    std::string name = node + "." + p.name;
    const auto w = g.initializers.find(name);
    if (w != g.initializers.end() && w->second.type() == p.type) {
      inputs.push_back(name);
      continue;
    }
    while (g.initializers.count(name) || g.types.count(name)) name += "_";
    g.initializers[name] = ops::init_param(p, rng).to(p.type.dtype);
    inputs.push_back(name);
  }
  it->op = op;
  it->attrs = attrs;
  it->inputs = inputs;
  // Types are inferred again: the sibling's outputs may differ, and so may everything after it.
  g.types.clear();
  g = ir::remove_unused(g);
  ir::validate(g, "transfer (" + op + " in place of " + original.find_node(node)->op + ")");
  return g;
}

std::vector<TransferVariant> transfer_known(const oracle::Ledger& ledger, const TransferOptions& opt,
                                            WorkerSet& workers,
                                            const std::function<void(const TransferVariant&)>& each) {
  auto known = std::make_shared<const oracle::Ledger>(ledger);
  std::vector<TransferVariant> out;
  for (const auto& e : known->entries) {
    if (!e.has_case) continue;
    if (!opt.filter.empty() && e.id.find(opt.filter) == std::string::npos) continue;
    const std::string from_op = oracle::signature_op(e.signature);
    // The entry's node: the first that runs its operator (none for a crash no node was blamed for).
    const ir::Node* blamed = nullptr;
    for (const auto& n : e.model.nodes)
      if (!from_op.empty() && n.op == from_op) {
        blamed = &n;
        break;
      }
    std::vector<std::string> ops_to_run = {from_op};
    if (opt.siblings && blamed)
      for (const auto& s : sibling_ops(from_op, ir::data_input_count(*blamed))) ops_to_run.push_back(s);
    for (const auto& op : ops_to_run) {
      TransferVariant v;
      v.entry = &e;
      v.from_op = from_op;
      v.op = op;
      v.setup.backends = opt.backends;
      v.setup.mode = e.mode == "train" ? Mode::Both : Mode::Infer;
      if (!e.loss.empty()) v.setup.loss = e.loss;
      v.setup.limits = opt.limits;
      v.setup.known = known;
      core::Rng rng = core::Rng(opt.seed).derive(e.id + "/" + op);
      try {
        v.model = ModelCase{op == from_op ? e.model : replace_op(e.model, blamed->name, op, rng), e.inputs, {}};
        // A target only where its shape still fits the (possibly changed) output.
        if (e.target.numel() > 0 && v.model.graph.types.at(v.model.graph.outputs.at(0)) == e.target.type())
          v.model.target = e.target;
        complete_case(v.model, v.setup.loss, rng);
      } catch (const core::UserError& err) {
        v.skipped = err.what();
        if (each) each(v);
        out.push_back(std::move(v));
        continue;
      }
      v.evaluation = evaluate(v.model, v.setup, workers);
      for (const auto& f : v.evaluation.findings)
        if (f.known.empty()) v.fresh.push_back(f);
      if (each) each(v);
      out.push_back(std::move(v));
    }
  }
  return out;
}

}  // namespace quorum::campaign
