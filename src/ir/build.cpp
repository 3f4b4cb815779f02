// Graph construction helpers.
#include "ir/build.h"

#include "ops/materialize.h"

namespace quorum::ir {

SingleNode single_node_graph(const ops::OpSpec& spec, ops::Case c, core::Rng& rng, core::DType dtype) {
  const ops::Materialized m = ops::materialize(spec, c, rng);
  SingleNode s;
  Graph& g = s.graph;
  g.name = spec.name;
  Node n;
  n.name = spec.name;
  n.op = spec.name;
  n.attrs = c.attrs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const std::string name = "in" + std::to_string(i);
    // Quantized inputs keep their integer type; the others take the run's.
    const core::DType t = core::is_float(c.inputs[i].dtype) ? dtype : c.inputs[i].dtype;
    g.inputs.push_back({name, {t, c.inputs[i].shape}});
    s.inputs.emplace(name, m.inputs[i].to(t).to(core::DType::F64));
    n.inputs.push_back(name);
  }
  for (size_t p = 0; p < m.sig.params.size(); ++p) {
    const std::string name = spec.name + "." + m.sig.params[p].name;
    const core::DType t = m.sig.params[p].type.dtype;
    g.initializers.emplace(name, m.inputs[c.inputs.size() + p].to(core::is_float(t) ? dtype : t));
    n.inputs.push_back(name);
  }
  for (size_t o = 0; o < m.sig.outputs.size(); ++o) {
    const std::string name = m.sig.outputs.size() == 1 ? std::string("out") : "out" + std::to_string(o);
    n.outputs.push_back(name);
    g.outputs.push_back(name);
  }
  g.nodes.push_back(std::move(n));
  validate(g, spec.name);
  return s;
}

void quantized_inputs_from_float(SingleNode& s) {
  Graph& g = s.graph;
  std::vector<Node> front;
  for (auto& in : g.inputs) {
    if (!core::is_quantized(in.type.dtype)) continue;
    const std::string q = in.name;  // the quantized value keeps its name; the float input is new
    in.name = q + "_float";
    front.push_back(Node{q + "_quantize", "quantize_linear", {in.name}, {q},
                         {{"scale", 1.0}, {"zero_point", int64_t{0}}, {"to", core::to_string(in.type.dtype)}}});
    in.type.dtype = core::DType::F32;
    auto it = s.inputs.find(q);
    Tensor v = it->second;
    s.inputs.erase(it);
    s.inputs.emplace(in.name, std::move(v));
  }
  if (front.empty()) return;
  g.nodes.insert(g.nodes.begin(), front.begin(), front.end());
  g.types.clear();
  validate(g, g.name);
}

}  // namespace quorum::ir
