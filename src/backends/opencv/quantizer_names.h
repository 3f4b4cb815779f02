// OpenCV's quantizer naming, shared by the backend and its reproducer (header-only: the reproducer is built
// without OpenCV).
#pragma once
#include <map>
#include <string>

#include "ir/graph.h"

namespace quorum::backends::opencv {

// OpenCV 4.6's ONNX importer finds a quantized value's scale and zero point by name (ONNX Runtime's
// quantizer's naming): the value "<base>quantized", its parameters the initializers "<base>scale" and
// "<base>zero_point"; under other names QLinearConv does not import and QuantizeLinear returns garbage
// (measured). Quorum's exporter names a node's constants "<node>/<what>", so a quantize_linear's output is
// renamed "<node>/quantized" (its constants "<node>/scale", "<node>/zero_point") and a qlinear_* node's
// "<node>/y_quantized" ("<node>/y_scale", ...). `back` maps the new names to the graph's.
inline ir::Graph quantizer_names(const ir::Graph& g, std::map<std::string, std::string>& back) {
  std::map<std::string, std::string> to;
  for (const auto& n : g.nodes) {
    if (n.op == "quantize_linear") to[n.outputs[0]] = n.name + "/quantized";
    else if (n.op.rfind("qlinear_", 0) == 0) to[n.outputs[0]] = n.name + "/y_quantized";
  }
  if (to.empty()) return g;
  ir::Graph r = g;
  auto rename = [&](std::string& v) {
    if (auto it = to.find(v); it != to.end()) v = it->second;
  };
  for (auto& n : r.nodes) {
    for (auto& v : n.inputs) rename(v);
    for (auto& v : n.outputs) rename(v);
  }
  for (auto& v : r.outputs) rename(v);
  for (const auto& [from, name] : to) {
    r.types[name] = r.types.at(from);
    r.types.erase(from);
    back[name] = from;
  }
  return r;
}

}  // namespace quorum::backends::opencv
