// Random model structures (DAGs) generated before any layer type is chosen: Muffin's two templates
// (chain with skips, cell-based) and the random-graph models of graph-based fuzzing (Watts–Strogatz,
// Residual Network). Vertices are numbered in topological order: every edge goes from a lower
// number to a higher one.
#pragma once
#include <vector>

#include "core/rng.h"

namespace quorum::gen {

struct Dag {
  std::vector<std::vector<int>> preds;  // preds[v]: the vertices feeding v, ascending
  int size() const { return static_cast<int>(preds.size()); }
  int edge_count() const;
  std::vector<int> sinks() const;  // vertices nothing consumes, ascending
};

// n vertices in a line, plus forward skip edges (each pair i < j-1 with probability p; in-degree at
// most max_in). Vertex 0 is the only source and n-1 the only sink.
Dag chain_with_skips(core::Rng& rng, int n, double p, int max_in = 4);

// randint(1, max_c) cells chained one after the other, each a small random DAG of 2..4 vertices
// (its own shape: cells need not share one), within max_v vertices in all (vertex 0 included).
// One source (vertex 0), one sink, no isolated vertex.
Dag cell_based(core::Rng& rng, int max_v, int max_c);

// Watts–Strogatz WS(n, k, p): a ring where each vertex links to its k nearest neighbours (k even),
// each link rewired with probability p, then every link oriented from the lower vertex to the
// higher. Vertices left without a predecessor are sources (they read the model input).
Dag watts_strogatz(core::Rng& rng, int n, int k, double p);

// Residual Network RN(k, p, n) of graph-based fuzzing: n vertices in a line; each vertex i with
// fewer than k neighbours repeats k - k_i times: with probability p, link i to a random later
// vertex j (not yet linked, itself with fewer than k neighbours).
Dag residual_network(core::Rng& rng, int n, int k, double p);

}  // namespace quorum::gen
