// Checked graph edits.
#include "ir/edit.h"

#include <algorithm>
#include <functional>

#include "core/error.h"

namespace quorum::ir {

Graph one_node(const Graph& g, const std::string& node) {
  const Node* n = g.find_node(node);
  if (!n) throw core::UserError("no node '" + node + "'");
  Graph out;
  out.name = g.name + "-" + node;
  std::set<std::string> seen;
  for (size_t i = 0; i < n->inputs.size(); ++i) {
    const std::string& v = n->inputs[i];
    if (auto w = g.initializers.find(v); w != g.initializers.end()) {
      out.initializers.emplace(v, w->second);
    } else if (seen.insert(v).second) {
      out.inputs.push_back({v, g.types.at(v)});
    }
  }
  out.nodes.push_back(*n);
  out.outputs = n->outputs;
  validate(out, "one-node model");
  return out;
}

Graph remove_unused(const Graph& g) {
  std::set<std::string> needed(g.outputs.begin(), g.outputs.end());
  std::vector<Node> kept;
  for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it) {
    const bool used =
        std::any_of(it->outputs.begin(), it->outputs.end(), [&](const std::string& o) { return needed.count(o); });
    if (!used) continue;
    kept.push_back(*it);
    needed.insert(it->inputs.begin(), it->inputs.end());
  }
  Graph out = g;
  out.nodes.assign(kept.rbegin(), kept.rend());
  for (auto it = out.initializers.begin(); it != out.initializers.end();)
    it = needed.count(it->first) ? std::next(it) : out.initializers.erase(it);
  out.inputs.erase(
      std::remove_if(out.inputs.begin(), out.inputs.end(), [&](const ValueInfo& v) { return !needed.count(v.name); }),
      out.inputs.end());
  out.types.clear();
  validate(out, "reduced model");
  return out;
}

Graph cut_at(const Graph& g, const std::string& v) {
  const Node* p = g.producer(v);
  if (!p) throw core::UserError("'" + v + "' is not a node output");
  Graph out = g;
  out.inputs.push_back({v, g.types.at(v)});
  // The producer no longer defines v: rename its output to a private name nothing uses.
  for (auto& n : out.nodes)
    for (auto& o : n.outputs)
      if (o == v) o = v + "#cut";
  if (std::find(out.outputs.begin(), out.outputs.end(), v + "#cut") != out.outputs.end())
    throw core::UserError("cannot cut a graph output");
  out.types.clear();
  return remove_unused(out);
}

std::set<std::string> ancestors(const Graph& g, const std::string& node) {
  std::set<std::string> out;
  std::function<void(const Node&)> visit = [&](const Node& n) {
    if (!out.insert(n.name).second) return;
    for (const auto& v : n.inputs)
      if (const Node* p = g.producer(v)) visit(*p);
  };
  if (const Node* n = g.find_node(node)) visit(*n);
  return out;
}

std::map<std::string, core::Tensor> graph_weights(const Graph& g) {
  std::map<std::string, core::Tensor> w;
  for (const auto& [name, t] : g.initializers) w.emplace(name, t.to(core::DType::F64));
  return w;
}

Graph with_weights(const Graph& g, const std::map<std::string, core::Tensor>& weights) {
  Graph out = g;
  for (const auto& [name, w] : weights) {
    auto it = out.initializers.find(name);
    if (it != out.initializers.end()) it->second = w.to(it->second.dtype());
  }
  return out;
}

}  // namespace quorum::ir
