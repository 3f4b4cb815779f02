// Static value ranges.
#include "ref/ranges.h"

#include <cmath>

#include "ops/registry.h"

namespace quorum::ref {

namespace {

double as_float32(double v) { return static_cast<double>(static_cast<float>(v)); }

bool in_range(const ops::ValidRange& r, double v) {
  const bool above = r.lo_inclusive ? v >= r.lo : v > r.lo;
  const bool below = r.hi_inclusive ? v <= r.hi : v < r.hi;
  return above && below;
}

Interval tensor_hull(const core::Tensor& t) {
  const core::Tensor d = t.to(core::DType::F64);
  Interval h{ops::kInf, -ops::kInf};
  for (int64_t i = 0; i < d.numel(); ++i) {
    const double v = d.f64()[i];
    if (std::isnan(v)) return Interval{};
    h.lo = std::min(h.lo, v);
    h.hi = std::max(h.hi, v);
  }
  return d.numel() == 0 ? Interval{0, 0} : h;
}

}  // namespace

bool invalid_value(const std::vector<ops::ValidRange>& valid, double v) {
  const double f = as_float32(v);
  if (std::isnan(f)) return true;
  for (const auto& r : valid)
    if (in_range(r, f)) return false;
  return true;
}

bool reaches_invalid(const std::vector<ops::ValidRange>& valid, const Interval& iv) {
  // The valid intervals are disjoint: a connected set in their union lies in one of them.
  const double lo = as_float32(iv.lo), hi = as_float32(iv.hi);
  for (const auto& r : valid)
    if (in_range(r, lo) && in_range(r, hi)) return false;
  return true;
}

BoundaryDistance boundary_distance(const std::vector<ops::ValidRange>& valid, double v) {
  BoundaryDistance best{ops::kInf, 0, 0};
  if (invalid_value(valid, v)) return BoundaryDistance{0, 0, v};
  for (const auto& r : valid) {
    if (!in_range(r, v)) continue;
    if (std::isfinite(r.lo) && v - r.lo < best.distance) best = {v - r.lo, -1, r.lo};
    if (std::isfinite(r.hi) && r.hi - v < best.distance) best = {r.hi - v, +1, r.hi};
  }
  return best;
}

std::vector<VulnerableSite> vulnerable_sites(const ir::Graph& g) {
  std::vector<VulnerableSite> out;
  for (const auto& n : g.nodes) {
    const ops::OpSpec& spec = ops::op(n.op);
    std::map<int, std::vector<ops::ValidRange>> by_input;
    for (const auto& r : spec.valid_ranges) by_input[r.input].push_back(r);
    for (const auto& [input, valid] : by_input) {
      if (input < 0 || static_cast<size_t>(input) >= n.inputs.size()) continue;
      VulnerableSite s;
      s.node = n.name;
      s.op = n.op;
      s.input = input;
      s.value = n.inputs[static_cast<size_t>(input)];
      s.valid = valid;
      out.push_back(std::move(s));
    }
  }
  return out;
}

RangeAnalysis analyze_ranges(const ir::Graph& g, const RangeMap& inputs, bool weights_unbounded) {
  RangeAnalysis a;
  for (const auto& in : g.inputs) {
    auto it = inputs.find(in.name);
    a.ranges[in.name] = it == inputs.end() ? Interval{} : it->second;
  }
  for (const auto& [name, t] : g.initializers) a.ranges[name] = weights_unbounded ? Interval{} : tensor_hull(t);
  for (const auto& n : g.nodes) {
    const ops::OpSpec& spec = ops::op(n.op);
    std::vector<Interval> in;
    std::vector<core::TensorType> types;
    for (const auto& v : n.inputs) {
      auto it = a.ranges.find(v);
      in.push_back(it == a.ranges.end() ? Interval{} : it->second);
      types.push_back(g.types.at(v));
    }
    std::vector<Interval> out;
    if (spec.range) {
      try {
        out = spec.range(in, types, n.attrs);
      } catch (const core::OpError&) {
        out.clear();  // attributes the rule cannot read: unbounded (the shape rule reports them)
      }
    }
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      Interval r = i < out.size() ? out[i] : Interval{};
      if (std::isnan(r.lo) || r.lo > r.hi) r.lo = -ops::kInf;
      if (std::isnan(r.hi) || r.lo > r.hi) r.hi = ops::kInf;
      a.ranges[n.outputs[i]] = r;
    }
  }
  a.sites = vulnerable_sites(g);
  for (auto& s : a.sites) {
    s.range = a.ranges.at(s.value);
    s.flagged = reaches_invalid(s.valid, s.range);
  }
  return a;
}

}  // namespace quorum::ref
