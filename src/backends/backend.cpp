// Shared backend helpers.
#include "backends/backend.h"

#include <algorithm>

#include "core/error.h"
#include "ir/onnx_io.h"
#include "ref/interpreter.h"

namespace quorum::backends {

TrainResult Session::train_step(const TrainRequest&) {
  throw std::logic_error("this backend does not train");
}

StepResult Session::optimizer_step(const TrainRequest& req, const OptimizerSpec& spec) {
  if (!optimizer_ || !(optimizer_->spec() == spec)) optimizer_ = std::make_unique<Optimizer>(spec);
  TrainResult r = train_step(req);
  ValueMap w = weights();
  StepResult out;
  out.loss = r.loss;
  for (auto& [name, t] : w) {
    auto g = r.grads.find(name);
    if (g == r.grads.end()) throw std::logic_error("the training step gave no gradient for weight '" + name + "'");
    optimizer_->step(name, t, g->second);
    out.grads.emplace(name, std::move(g->second));
  }
  set_weights(w);
  return out;
}

ValueMap Session::weights() const { throw std::logic_error("this backend does not keep weights"); }

void Session::set_weights(const ValueMap&) { throw std::logic_error("this backend does not take new weights"); }

void replace_weights(ir::Graph& g, const ValueMap& w) {
  for (const auto& [name, t] : w) {
    auto it = g.initializers.find(name);
    if (it == g.initializers.end()) throw core::UserError("the model has no weight '" + name + "'");
    if (it->second.shape() != t.shape())
      throw core::UserError("weight '" + name + "' has shape " + core::to_string(it->second.shape()) + ", given " +
                            core::to_string(t.shape()));
    it->second = t;
  }
}

void LoweringLog::note(const std::string& node, const std::string& op) {
  std::vector<std::string>& ops = ops_[node];
  if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
}

std::vector<GraphInput> bind_graph_inputs(const ir::Graph& g, const ValueMap& inputs) {
  std::vector<GraphInput> out;
  out.reserve(g.inputs.size());
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const ir::ValueInfo& in = g.inputs[i];
    auto it = inputs.find(in.name);
    if (it == inputs.end()) throw core::UserError("missing value for graph input '" + in.name + "'");
    if (it->second.shape() != in.type.shape)
      throw core::UserError("graph input '" + in.name + "' has shape " + core::to_string(it->second.shape()) +
                            ", the model wants " + core::to_string(in.type.shape));
    out.push_back(GraphInput{i, in, it->second});
  }
  return out;
}

Support constant_weights(const ir::Graph& g, const ir::Node& n, const std::string& library) {
  for (size_t i = ir::data_input_count(n); i < n.inputs.size(); ++i)
    if (!g.initializers.count(n.inputs[i]))
      return Support::no(library + " takes weights as constants when it builds the model: '" + n.inputs[i] +
                         "' is a graph input or computed here");
  return Support::yes();
}

std::set<std::string> multi_consumer_values(const ir::Graph& g) {
  std::map<std::string, int> uses;
  for (const auto& n : g.nodes)
    for (const auto& v : n.inputs) ++uses[v];
  std::set<std::string> out;
  for (const auto& [v, k] : uses)
    if (k > 1) out.insert(v);
  return out;
}

std::vector<Support> Backend::supports_nodes(const ir::Graph& g, bool training) const {
  std::vector<Support> out;
  out.reserve(g.nodes.size());
  for (const auto& n : g.nodes) {
    Support s = supports(g, n);
    if (s.ok && training) s = trains() ? supports_training(g, n) : Support::no("backend does not train");
    out.push_back(std::move(s));
  }
  return out;
}

Support supports_graph(const Backend& b, const ir::Graph& g, bool training) {
  if (training && !b.trains()) return Support::no("backend does not train");
  const std::vector<Support> answers = b.supports_nodes(g, training);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!answers[i].ok)
      return Support::no("node '" + g.nodes[i].name + "' (" + g.nodes[i].op + "): " + answers[i].reason);
  return Support::yes();
}

ValueMap reference_forward(const ir::Graph& g, const ValueMap& inputs, core::DType dtype) {
  ir::Graph rounded = g;
  for (auto& [name, t] : rounded.initializers) t = t.to(dtype).to(core::DType::F64);
  ValueMap in;
  for (const auto& [name, t] : inputs) in.emplace(name, t.to(dtype).to(core::DType::F64));
  return ref::forward(rounded, in);
}

std::string onnx_for_library(const ir::Graph& g, int opset) { return onnx_for_library(g, ir::OnnxForm{opset, 0}); }

std::string onnx_for_library(const ir::Graph& g, const ir::OnnxForm& form) {
  try {
    return ir::graph_to_onnx(g, form).bytes;
  } catch (const core::UserError& e) {
    throw UnsupportedError(std::string("Quorum's ONNX exporter has no form for it: ") + e.what());
  } catch (const std::exception& e) {
    throw QuorumError(std::string("Quorum's ONNX exporter failed: ") + e.what());
  }
}

std::vector<std::string> spec_options(const std::string& spec) {
  std::vector<std::string> out;
  const auto colon = spec.find(':');
  if (colon == std::string::npos) return out;
  size_t at = colon + 1;
  while (at <= spec.size()) {
    const auto plus = spec.find('+', at);
    const std::string opt = spec.substr(at, plus == std::string::npos ? std::string::npos : plus - at);
    if (!opt.empty()) out.push_back(opt);
    if (plus == std::string::npos) break;
    at = plus + 1;
  }
  return out;
}

int count_option(const std::string& backend, const std::string& option) {
  const auto eq = option.find('=');
  const std::string n = eq == std::string::npos ? "" : option.substr(eq + 1);
  if (n.empty() || n.size() > 3 || n.find_first_not_of("0123456789") != std::string::npos || std::stoi(n) < 1)
    throw core::UserError("backend '" + backend + "': " + option.substr(0, eq) +
                          "=N takes a count from 1 to 999, got '" + option + "'");
  return std::stoi(n);
}

std::string form_option(const std::string& backend, const std::string& option) {
  const std::string f = option.rfind("form=", 0) == 0 ? option.substr(5) : "";
  const auto eq = f.find('=');
  if (eq == 0 || eq == std::string::npos || eq + 1 == f.size())
    throw core::UserError("backend '" + backend + "': form= takes WHAT=FORM (an exchange form, as a lowering's "
                          "'onnx form' names it: form=gemm=gemm_pretransposed), got '" + option + "'");
  return f;
}

}  // namespace quorum::backends
