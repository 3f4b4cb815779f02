// Checked graph edits for the reducer: every edit returns a new graph that passed validate().
#pragma once
#include <map>
#include <set>
#include <string>

#include "ir/graph.h"

namespace quorum::ir {

// Node `node` alone: its data inputs become graph inputs (same names and types), its weights stay
// initializers, its outputs are the graph's outputs.
Graph one_node(const Graph& g, const std::string& node);

// Value `v` (a node output) becomes a graph input of the same type; its producer loses that output's
// consumers and, once nothing uses it, the node itself (remove_unused).
Graph cut_at(const Graph& g, const std::string& v);

// Drops nodes none of whose outputs reach a graph output, initializers and graph inputs nothing uses.
Graph remove_unused(const Graph& g);

// The nodes `node` depends on (transitively), itself included.
std::set<std::string> ancestors(const Graph& g, const std::string& node);

// The graph's weights (its initializers) in float64, and the graph with `weights` in place of its
// initializers of those names, each converted to the initializer's dtype (other names ignored): what
// the searches and training hold and give back.
std::map<std::string, core::Tensor> graph_weights(const Graph& g);
Graph with_weights(const Graph& g, const std::map<std::string, core::Tensor>& weights);

}  // namespace quorum::ir
