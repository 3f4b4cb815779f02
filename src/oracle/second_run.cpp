// A second run of a model by the same library, judged end to end: the whole-graph envelope and the verdict
// on one value (oracle/second_run.h).
#include "oracle/second_run.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/rng.h"
#include "oracle/judge_util.h"
#include "oracle/node_kernel.h"
#include "oracle/spread.h"

namespace quorum::oracle::detail {

using core::DType;
using core::Tensor;

namespace {

// One whole-graph trial: every node's outputs, float64 values of a `dtype` evaluation. Empty when a kernel
// refuses its operands.
backends::ValueMap graph_trial(const ir::Graph& g, const backends::ValueMap& inputs, DType dtype, int t,
                               core::Rng& rng) {
  const double u = unit_roundoff(dtype);
  backends::ValueMap v;
  for (const auto& in : g.inputs)
    if (const auto it = inputs.find(in.name); it != inputs.end()) v.emplace(in.name, it->second.to(DType::F64));
  for (const auto& [name, w] : g.initializers) v.emplace(name, rounded_to(w.to(DType::F64), dtype));
  const int direction = t == 1 || t == 3 ? -1 : t == 2 || t == 4 ? 1 : 0;
  for (const auto& n : g.nodes) {
    std::vector<Tensor> operands;
    for (const auto& i : n.inputs) {
      const auto it = v.find(i);
      if (it == v.end()) return {};
      operands.push_back(it->second);
    }
    std::vector<Tensor> outs;
    try {
      ops::StoredPrecision stored(dtype == DType::F32, u, t > 0, t == 2 || t == 4 || t >= kExactOperandTrials, rng,
                                  direction, t == 3 || t == 4);
      outs = node_forward(n, operands);
    } catch (const std::exception&) {
      return {};
    }
    if (outs.size() != n.outputs.size()) return {};
    const ops::Tolerance tol = node_tolerance(g, n, dtype, false);
    for (size_t k = 0; k < outs.size(); ++k) {
      Tensor o = outs[k].to(DType::F64);
      if (t > 0)
        for (int64_t i = 0; i < o.numel(); ++i) {
          const double x = o.f64()[i];
          if (!std::isfinite(x)) continue;
          // kMargin tolerances, as the output's verdict allows: a node the verdict would accept anywhere in its
          // margin moves a saturating consumer (a softmax at its extremes) across its step in some trial too.
          const double e = kMargin * (tol.atol + tol.rtol * std::abs(x));
          const double sign = direction ? (t >= 3 && i % 2 ? -direction : direction) : rng.uniform(-1.0, 1.0);
          o.f64()[i] = x + sign * e;
        }
      v[n.outputs[k]] = rounded_to(o, dtype);
    }
  }
  return v;
}

}  // namespace

backends::ValueMap graph_envelope(const ir::Graph& g, const backends::ValueMap& inputs,
                                  const backends::ValueMap& reference, DType dtype,
                                  const std::vector<std::string>& values) {
  backends::ValueMap env;
  for (const auto& o : values)
    if (const auto it = reference.find(o); it != reference.end())
      env.emplace(o, Tensor(DType::F64, it->second.shape()));
  core::Rng rng(core::fnv1a("graph envelope"));
  for (int t = 0; t < kTrials; ++t) {
    const backends::ValueMap trial = graph_trial(g, inputs, dtype, t, rng);
    for (auto& [o, e] : env) {
      const Tensor& base = reference.at(o);
      const auto it = trial.find(o);
      const bool ok = it != trial.end() && it->second.shape() == base.shape();
      for (int64_t i = 0; i < e.numel(); ++i) {
        const double b = base.get(i);
        const double x = ok ? it->second.get(i) : NAN;
        double d;
        if (std::isfinite(b)) d = std::isfinite(x) ? std::abs(x - b) : INFINITY;
        else d = (std::isnan(b) ? std::isnan(x) : x == b) ? 0 : INFINITY;
        e.f64()[i] = std::max(e.f64()[i], d);
      }
    }
  }
  return env;
}

SecondRunVerdict judge_second_run(const Tensor& a, const Tensor& p, const Tensor& w, const ops::Tolerance& tol,
                                  const std::function<const Tensor*()>& envelope) {
  SecondRunVerdict v;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.get(i), y = p.get(i), z = w.get(i);
    const double plain = tol.atol + tol.rtol * std::abs(z);
    if (std::isfinite(x) && std::isfinite(y) && std::isfinite(z) &&
        (std::abs(x - y) <= plain || std::abs(x - z) <= plain))
      continue;
    const Tensor* e = envelope();
    const double env = e ? e->get(i) : INFINITY;
    if (env == INFINITY) continue;  // some float32 evaluation leaves the range, or could not be made
    const double allowed = plain + kMargin * env;
    // Judged only where the pinned run is right (as below): where it is not, the per-node stage has the finding
    // (seed 9941: ArmNN's folded pad read memory it does not own, other garbage, inf, in the batch run).
    if (std::isfinite(z) && !std::isfinite(x)) {
      if (std::isfinite(y) && std::abs(y - z) <= allowed) ++v.produced, v.first = v.first < 0 ? i : v.first;
    } else if (std::isnan(z) && !std::isnan(x)) {
      if (std::isnan(y)) ++v.swallowed, v.first = v.first < 0 ? i : v.first;
    } else if (std::isfinite(z) && std::isfinite(x) && std::isfinite(y) && std::abs(y - z) <= allowed) {
      // Judged only where the pinned run is right: where it is not, the per-node stage has the finding, and
      // a library that computes garbage there (memory it does not own) gives other garbage in a second run.
      const double d = std::min(std::abs(x - y), std::abs(x - z));
      if (d > allowed) {
        ++v.wrong;
        if (v.first < 0 || std::abs(x - z) > v.worst) v.first = i;
        v.worst = std::max(v.worst, std::abs(x - z));
      }
    }
  }
  return v;
}

std::string second_run_detail(const std::string& value, const SecondRunVerdict& v, const Tensor& a, const Tensor& p,
                              const Tensor& w, const std::string& what, const std::string& pinned) {
  char buf[320];
  std::snprintf(buf, sizeof buf, "; e.g. element %lld: %s %.9g, %s %.9g, float64 %.9g",
                static_cast<long long>(v.first), what.c_str(), a.get(v.first), pinned.c_str(), p.get(v.first),
                w.get(v.first));
  return "'" + value + "': " + std::to_string(v.count()) + " of " + std::to_string(a.numel()) + " elements of the " +
         what + " run " +
         (v.produced ? "NaN/Inf where the " + pinned + " run and the float64 result are finite"
          : v.wrong  ? "beyond the float32 envelope of the " + pinned + " run and of the float64 result"
                     : "numbers where the " + pinned + " run and the float64 result are NaN") +
         buf;
}

}  // namespace quorum::oracle::detail
