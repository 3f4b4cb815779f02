// The JSON model format (docs/model-format.md): read, write, exact round-trip.
#pragma once
#include <string>

#include "ir/graph.h"

namespace quorum::ir {

// Parses and validates. Throws UserError naming `where` (usually the file path), the node and the
// problem on malformed JSON, missing fields, wrong kinds, or any validation failure.
Graph graph_from_json(const std::string& text, const std::string& where, const ValidateOptions& opt = {});
std::string graph_to_json(const Graph& g);

Graph load_graph(const std::string& path, const ValidateOptions& opt = {});  // .json (and later .onnx)
void save_graph(const std::string& path, const Graph& g);                   // atomic

}  // namespace quorum::ir
