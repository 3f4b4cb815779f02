// Test helper: a one-node graph from JSON, the operator over graph inputs x0, x1, ... of one type, and
// integer inputs spread over that type's range (the quantized twins' backend tests).
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "ir/json_io.h"

namespace quorum::testing {

// Node "y" of operator `op` over graph inputs x0, x1, ... of type `dtype` with shapes `shapes`, with the
// attributes `attrs` (JSON object members, without the braces), output "y"; `name` names the graph.
inline ir::Graph one_node_graph(const std::string& op, const std::string& dtype,
                                const std::vector<core::Shape>& shapes, const std::string& attrs,
                                const std::string& name) {
  std::string inputs, names;
  for (size_t k = 0; k < shapes.size(); ++k) {
    std::string shape;
    for (size_t d = 0; d < shapes[k].size(); ++d) shape += (d ? ", " : "") + std::to_string(shapes[k][d]);
    inputs += std::string(k ? ", " : "") + R"({"name": "x)" + std::to_string(k) + R"(", "dtype": ")" + dtype +
              R"(", "shape": [)" + shape + "]}";
    names += std::string(k ? ", " : "") + "\"x" + std::to_string(k) + "\"";
  }
  return ir::graph_from_json(R"({"inputs": [)" + inputs + R"(], "outputs": ["y"], "nodes": [{"name": "y", "op": ")" +
                                 op + R"(", "inputs": [)" + names + R"(], "outputs": ["y"], "attrs": {)" + attrs +
                                 "}}]}",
                             name);
}

// Each integer input of `g` spread over its type's range: lo + (37 i + 11 |name|) mod 256, at most hi.
inline backends::ValueMap spread_integer_inputs(const ir::Graph& g) {
  backends::ValueMap in;
  for (const auto& v : g.inputs) {
    const auto [lo, hi] = core::dtype_range(v.type.dtype);
    std::vector<double> x(static_cast<size_t>(core::numel(v.type.shape)));
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = std::min(hi, lo + static_cast<double>((i * 37 + 11 * v.name.size()) % 256));
    in.emplace(v.name, core::Tensor::f64(v.type.shape, x).to(v.type.dtype));
  }
  return in;
}

}  // namespace quorum::testing
