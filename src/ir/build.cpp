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

}  // namespace quorum::ir
