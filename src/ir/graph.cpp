// Graph helpers and validation against the operator catalogue.
#include "ir/graph.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "core/error.h"
#include "ops/registry.h"

namespace quorum::ir {

using core::UserError;

const Node* Graph::producer(const std::string& value) const {
  for (const auto& n : nodes)
    for (const auto& o : n.outputs)
      if (o == value) return &n;
  return nullptr;
}

const Node* Graph::find_node(const std::string& name) const {
  for (const auto& n : nodes)
    if (n.name == name) return &n;
  return nullptr;
}

size_t data_input_count(const Node& n) {
  const ops::OpSpec& s = ops::op(n.op);
  // Fixed-arity ops take exactly min_inputs data inputs; variadic ops take no parameters.
  if (s.min_inputs == s.max_inputs) return std::min(n.inputs.size(), static_cast<size_t>(s.min_inputs));
  return n.inputs.size();
}

namespace {

std::string node_where(const std::string& where, const Node& n) {
  return where + ": node '" + n.name + "' (" + n.op + "): ";
}

// Kahn's algorithm, stable with respect to the given order.
std::vector<Node> topo_sort(const std::vector<Node>& nodes, const std::set<std::string>& sources,
                            const std::string& where) {
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const auto& o : nodes[i].outputs) producer[o] = i;
  std::vector<int> pending(nodes.size(), 0);
  std::vector<std::vector<size_t>> users(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const auto& in : nodes[i].inputs) {
      if (sources.count(in)) continue;
      auto it = producer.find(in);
      if (it == producer.end())
        throw UserError(node_where(where, nodes[i]) + "input '" + in +
                        "' is not defined by any node, input or initializer");
      ++pending[i];
      users[it->second].push_back(i);
    }
  }
  std::vector<Node> out;
  std::vector<bool> done(nodes.size(), false);
  bool progress = true;
  while (out.size() < nodes.size() && progress) {
    progress = false;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (done[i] || pending[i] != 0) continue;
      done[i] = true;
      progress = true;
      out.push_back(nodes[i]);
      for (size_t u : users[i]) --pending[u];
      break;  // restart from the first ready node: keeps the order stable
    }
  }
  if (out.size() < nodes.size()) {
    for (size_t i = 0; i < nodes.size(); ++i)
      if (!done[i]) throw UserError(node_where(where, nodes[i]) + "is part of a cycle");
  }
  return out;
}

}  // namespace

namespace {

// A value no campaign, run or reproducer can hold (its elements in float64 would not fit a
// worker's default address space), refused before anything is allocated. The product is taken in
// double so that dimensions whose product overflows int64 are refused too.
// `prefix` ends with ": ".
void check_size(const std::string& prefix, const std::string& name, const TensorType& t) {
  double elements = 1;
  for (int64_t d : t.shape) elements *= static_cast<double>(d);
  if (elements <= static_cast<double>(kMaxElements)) return;
  char count[32];
  std::snprintf(count, sizeof count, "%.3g", elements);
  throw UserError(prefix + "value '" + name + "' " + core::to_string(t.shape) + " is too large (" + count +
                  " elements; Quorum takes at most " + std::to_string(kMaxElements) + " per tensor)");
}

}  // namespace

void validate(Graph& g, const std::string& where, const ValidateOptions& opt) {
  std::map<std::string, TensorType> types;
  std::set<std::string> node_names;
  auto define = [&](const std::string& name, const TensorType& t, const std::string& by) {
    if (name.empty()) throw UserError(where + ": " + by + " defines a value with an empty name");
    if (types.count(name)) throw UserError(where + ": value '" + name + "' is defined twice (again by " + by + ")");
    check_size(where + ": ", name, t);
    types[name] = t;
  };
  std::set<std::string> sources;
  for (const auto& in : g.inputs) {
    define(in.name, in.type, "graph input");
    sources.insert(in.name);
  }
  for (const auto& [name, t] : g.initializers) {
    define(name, t.type(), "initializer");
    sources.insert(name);
  }
  std::set<std::string> outputs_seen;
  for (const auto& n : g.nodes) {
    if (n.name.empty()) throw UserError(where + ": a node of operator '" + n.op + "' has no name");
    if (!node_names.insert(n.name).second) throw UserError(where + ": node name '" + n.name + "' is used twice");
    for (const auto& o : n.outputs)
      if (sources.count(o) || !outputs_seen.insert(o).second)
        throw UserError(where + ": value '" + o + "' is defined twice (again by node '" + n.name + "')");
  }
  g.nodes = topo_sort(g.nodes, sources, where);

  for (auto& n : g.nodes) {
    const ops::OpSpec* spec = ops::catalogue().find(n.op);
    if (!spec) throw UserError(node_where(where, n) + "unknown operator '" + n.op + "'");
    try {
      n.attrs = ops::canonical_attrs(*spec, n.attrs, opt.allow_invalid_attrs);
    } catch (const core::OpError& e) {
      throw UserError(node_where(where, n) + e.what());
    }
    const size_t nd = data_input_count(n);
    const bool arity_ok = static_cast<int>(nd) >= spec->min_inputs &&
                          (spec->max_inputs == ops::kUnbounded || static_cast<int>(nd) <= spec->max_inputs);
    if (!arity_ok) {
      const std::string want = spec->min_inputs == spec->max_inputs
                                   ? std::to_string(spec->min_inputs)
                                   : std::to_string(spec->min_inputs) + ".." +
                                         (spec->max_inputs == ops::kUnbounded ? "n" : std::to_string(spec->max_inputs));
      throw UserError(node_where(where, n) + "takes " + want + " data inputs, got " + std::to_string(nd));
    }
    std::vector<TensorType> data_types;
    for (size_t i = 0; i < nd; ++i) data_types.push_back(types.at(n.inputs[i]));
    ops::Signature sig;
    try {
      sig = spec->infer(data_types, n.attrs);
    } catch (const core::OpError& e) {
      std::string shapes;
      for (const auto& t : data_types) shapes += (shapes.empty() ? "" : ", ") + core::to_string(t);
      throw UserError(node_where(where, n) + e.what() + " (inputs " + shapes + ")");
    }
    if (n.inputs.size() - nd != sig.params.size()) {
      std::string names;
      for (const auto& p : sig.params) names += (names.empty() ? "" : ", ") + p.name;
      throw UserError(node_where(where, n) + "expects " + std::to_string(sig.params.size()) + " parameter inputs (" +
                      (names.empty() ? "none" : names) + "), got " + std::to_string(n.inputs.size() - nd));
    }
    for (size_t i = 0; i < sig.params.size(); ++i) {
      const auto& have = types.at(n.inputs[nd + i]);
      if (!(have == sig.params[i].type))
        throw UserError(node_where(where, n) + "parameter '" + sig.params[i].name + "' ('" + n.inputs[nd + i] +
                        "') is " + core::to_string(have) + ", expected " + core::to_string(sig.params[i].type));
    }
    if (n.outputs.size() != sig.outputs.size())
      throw UserError(node_where(where, n) + "has " + std::to_string(n.outputs.size()) +
                      " outputs, the operator makes " + std::to_string(sig.outputs.size()));
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      auto declared = g.types.find(n.outputs[i]);
      if (declared != g.types.end() && !(declared->second == sig.outputs[i]))
        throw UserError(node_where(where, n) + "output '" + n.outputs[i] + "' is declared " +
                        core::to_string(declared->second) + " but the shape rule gives " +
                        core::to_string(sig.outputs[i]));
      check_size(node_where(where, n), n.outputs[i], sig.outputs[i]);
      types[n.outputs[i]] = sig.outputs[i];
    }
  }
  if (g.outputs.empty()) throw UserError(where + ": the graph has no outputs");
  for (const auto& o : g.outputs)
    if (!types.count(o)) throw UserError(where + ": graph output '" + o + "' is not defined");
  for (const auto& [name, t] : g.types)
    if (!types.count(name)) throw UserError(where + ": a type is declared for '" + name + "', which no node defines");
  g.types = std::move(types);
}

}  // namespace quorum::ir
