// Random model structures.
#include "gen/dag.h"

#include <algorithm>
#include <set>

namespace quorum::gen {
namespace {

void link(Dag& d, int from, int to) {
  auto& p = d.preds[static_cast<size_t>(to)];
  if (std::find(p.begin(), p.end(), from) == p.end()) {
    p.push_back(from);
    std::sort(p.begin(), p.end());
  }
}

}  // namespace

int Dag::edge_count() const {
  int e = 0;
  for (const auto& p : preds) e += static_cast<int>(p.size());
  return e;
}

std::vector<int> Dag::sinks() const {
  std::vector<bool> used(preds.size(), false);
  for (const auto& p : preds)
    for (int u : p) used[static_cast<size_t>(u)] = true;
  std::vector<int> s;
  for (int v = 0; v < size(); ++v)
    if (!used[static_cast<size_t>(v)]) s.push_back(v);
  return s;
}

Dag chain_with_skips(core::Rng& rng, int n, double p, int max_in) {
  Dag d;
  d.preds.resize(static_cast<size_t>(std::max(n, 1)));
  for (int j = 1; j < d.size(); ++j) {
    link(d, j - 1, j);
    for (int i = 0; i < j - 1; ++i)
      if (static_cast<int>(d.preds[static_cast<size_t>(j)].size()) < max_in && rng.bernoulli(p)) link(d, i, j);
  }
  return d;
}

Dag cell_based(core::Rng& rng, int max_v, int max_c) {
  Dag d;
  d.preds.resize(1);
  int tail = 0;
  const int cells = static_cast<int>(rng.randint(1, std::max(max_c, 1)));
  for (int c = 0; c < cells; ++c) {
    const int room = max_v - d.size();
    if (room < 2) break;
    const int m = static_cast<int>(rng.randint(2, std::min(4, room)));
    const int first = d.size();
    d.preds.resize(static_cast<size_t>(first + m));
    // Inside a cell: each vertex reads one or two of the cell's earlier vertices (its entry included).
    for (int j = 0; j < m; ++j) {
      const int v = first + j;
      std::vector<int> pool{tail};
      for (int i = first; i < v; ++i) pool.push_back(i);
      link(d, pool[rng.index(pool.size())], v);
      if (pool.size() > 1 && rng.bernoulli(0.4)) link(d, pool[rng.index(pool.size())], v);
    }
    // Every vertex of the cell reaches its exit, so the cell has one sink.
    const int exit = first + m - 1;
    std::vector<bool> used(static_cast<size_t>(m), false);
    for (int j = 0; j < m; ++j)
      for (int u : d.preds[static_cast<size_t>(first + j)])
        if (u >= first) used[static_cast<size_t>(u - first)] = true;
    for (int j = 0; j < m - 1; ++j)
      if (!used[static_cast<size_t>(j)]) link(d, first + j, exit);
    tail = exit;
  }
  if (d.size() == 1) {  // max_v < 3: one layer after the input
    d.preds.push_back({0});
  }
  return d;
}

Dag watts_strogatz(core::Rng& rng, int n, int k, double p) {
  n = std::max(n, 2);
  k = std::max(2, std::min(k, n - 1 - (n - 1) % 2));
  std::set<std::pair<int, int>> edges;  // unordered pairs, stored (low, high)
  auto key = [](int a, int b) { return std::make_pair(std::min(a, b), std::max(a, b)); };
  for (int i = 0; i < n; ++i)
    for (int j = 1; j <= k / 2; ++j) edges.insert(key(i, (i + j) % n));
  // Rewire in a fixed order (the ring's), so the result depends on the seed alone.
  for (int i = 0; i < n; ++i)
    for (int j = 1; j <= k / 2; ++j) {
      const auto e = key(i, (i + j) % n);
      if (!edges.count(e) || !rng.bernoulli(p)) continue;
      std::vector<int> free;
      for (int w = 0; w < n; ++w)
        if (w != i && !edges.count(key(i, w))) free.push_back(w);
      if (free.empty()) continue;
      edges.erase(e);
      edges.insert(key(i, free[rng.index(free.size())]));
    }
  Dag d;
  d.preds.resize(static_cast<size_t>(n));
  for (const auto& [a, b] : edges) link(d, a, b);
  return d;
}

Dag residual_network(core::Rng& rng, int n, int k, double p) {
  n = std::max(n, 2);
  Dag d;
  d.preds.resize(static_cast<size_t>(n));
  std::vector<int> deg(static_cast<size_t>(n), 0);
  for (int i = 1; i < n; ++i) {
    link(d, i - 1, i);
    ++deg[static_cast<size_t>(i - 1)];
    ++deg[static_cast<size_t>(i)];
  }
  auto linked = [&](int a, int b) {
    const auto& pb = d.preds[static_cast<size_t>(b)];
    return std::find(pb.begin(), pb.end(), a) != pb.end();
  };
  for (int i = 0; i < n; ++i) {
    const int repeats = k - deg[static_cast<size_t>(i)];
    for (int t = 0; t < repeats; ++t) {
      if (deg[static_cast<size_t>(i)] >= k || !rng.bernoulli(p)) continue;
      std::vector<int> cand;
      for (int j = i + 2; j < n; ++j)
        if (deg[static_cast<size_t>(j)] < k && !linked(i, j)) cand.push_back(j);
      if (cand.empty()) break;
      const int j = cand[rng.index(cand.size())];
      link(d, i, j);
      ++deg[static_cast<size_t>(i)];
      ++deg[static_cast<size_t>(j)];
    }
  }
  return d;
}

}  // namespace quorum::gen
