// OpenCV's quantizer naming, shared by the backend and its reproducer (header-only: the reproducer is built
// without OpenCV).
#pragma once
#include <map>
#include <string>
#include <string_view>

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

// The ONNX bytes for 4.6's importer: Quorum's QDQ exchange form (ops/qdq_form.cpp) names each DequantizeLinear's
// float output "<node>/<what>_dequantized", and 4.6 takes every node output named "...quantized" for an int8 value
// (handleQuantizedNode gives the layer depth CV_8S), so the float layer after it fails on an int8 input
// (pooling_layer.cpp:666 'src.type() == 5', elementwise_layers.cpp 'src.type() == CV_32F', eltwise_layer.cpp
// 'srcs[i].type() == dst.type()'; measured in cv2: the same models with other names run right). Renamed to
// "_dequant_out", of the same length, so the serialized model's length prefixes stay valid.
inline std::string dequantized_names(std::string bytes) {
  constexpr std::string_view from = "_dequantized", to = "_dequant_out";
  static_assert(from.size() == to.size());
  for (size_t at = bytes.find(from); at != std::string::npos; at = bytes.find(from, at + to.size()))
    bytes.replace(at, to.size(), to);
  return bytes;
}

}  // namespace quorum::backends::opencv
