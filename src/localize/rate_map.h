// CRADLE's localization map (METHODS.md §2): per node the hidden-state distance δ_L between the
// blamed backend and the one it disagrees with (mean absolute difference), the same against the
// float64 reference, the introduction rate R_L = (δ_L − δ_pre)/(δ_pre + ε) with δ_pre the largest
// δ among the node's predecessors, nodes whose R_L exceeds the third quartile highlighted, the
// first highlighted node the prime suspect. Forward (node outputs; predecessors are the producers
// of its inputs) and backward (the gradients a node sends to its inputs and weights; its
// predecessors are its outputs' incoming gradients) alike.
#pragma once
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/finding_kind.h"
#include "ir/graph.h"

namespace quorum::localize {

struct MapNode {
  std::string node, op;
  double delta = 0;      // δ_L: blamed vs other
  double delta_ref = 0;  // blamed vs the float64 reference
  double delta_pre = 0;  // max δ over the predecessors
  double rate = 0;       // R_L
  bool highlighted = false;
  bool judged = false;   // both backends held the node's state
};

struct RateMap {
  core::Stage stage = core::Stage::Forward;  // Forward or Backward
  std::string blamed, other;
  double epsilon = 1e-7;
  double q3 = 0;          // the third quartile of the rates
  std::string first;      // the first highlighted node (topological order; reverse for BC)
  std::vector<MapNode> nodes;  // in the graph's topological order
};

// `blamed`, `other`, `ref`: the values (FC) or gradients (BC) of each backend. Non-finite
// differences count as 1e30.
RateMap rate_map(const ir::Graph& g, bool backward, const std::string& blamed_name, const backends::ValueMap& blamed,
                 const std::string& other_name, const backends::ValueMap& other, const backends::ValueMap& ref);

std::string to_json(const RateMap& m);
// The model graph in Graphviz DOT: nodes coloured by R_L, highlighted ones outlined, δ and R printed.
std::string to_dot(const ir::Graph& g, const RateMap& m);
// Lays the DOT out with Graphviz (`dot -Tsvg`); empty when Graphviz is not installed or fails.
std::string render_svg(const std::string& dot);

}  // namespace quorum::localize
