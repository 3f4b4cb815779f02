// The optimized stage (OC): a library's optimized run (only the graph outputs asked for, its optimizer free
// to fuse and fold) judged end to end, against the float64 reference's outputs and against the library's
// own pinned run, within an envelope that every correct float32 evaluation of the graph can reach.
//
// The envelope is the spread (oracle/spread.h) run over the whole graph: the graph is evaluated again
// kTrials times, each node's kernel in the trial's float32 model (its stored intermediates rounded and
// moved, as the spread's trials do) on the operands the trial's upstream nodes gave, and each node's
// result moved within kMargin times its operator's tolerance (what the per-node verdict accepts of every library:
// fixed directions in the deterministic trials, random fractions in the others) and rounded to the
// run's precision. Per output element the envelope is the largest distance of a trial from the
// reference; a value is wrong where it lies beyond the output operator's tolerance plus kMargin
// envelopes from both the reference and the pinned run, where the pinned run itself lies within them (elsewhere
// the per-node stage judges the library). It is computed only where that plain tolerance
// fails, as the spread is.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>

#include "core/rng.h"
#include "oracle/judge_util.h"
#include "oracle/node_kernel.h"
#include "oracle/spread.h"
#include "ops/op_spec.h"
#include "ops/registry.h"

namespace quorum::oracle::detail {

using core::DType;
using core::Tensor;

namespace {

// What the optimizer did, from its lowering: the "fused ..." entries of every node, sorted, once each.
std::string fusion_key(const std::map<std::string, std::vector<std::string>>& lowering) {
  std::set<std::string> fused;
  for (const auto& [node, ops] : lowering)
    for (const auto& op : ops)
      if (const std::string f = backends::fused_entry(op); !f.empty()) fused.insert(f);
  std::string s;
  for (const auto& f : fused) s += (s.empty() ? "" : ", ") + f;
  return "fused={" + s + "}";
}

// The graph's outputs, each once, in order.
std::vector<std::string> output_values(const ir::Graph& g) {
  std::vector<std::string> out;
  for (const auto& o : g.outputs)
    if (std::find(out.begin(), out.end(), o) == out.end()) out.push_back(o);
  return out;
}

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

// Per graph output, per element: the envelope (above). Infinite where a trial is non-finite and the
// reference finite, or where a trial could not run.
backends::ValueMap graph_envelope(const ir::Graph& g, const backends::ValueMap& inputs,
                                  const backends::ValueMap& reference, DType dtype) {
  backends::ValueMap env;
  const std::vector<std::string> outs = output_values(g);
  for (const auto& o : outs)
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

}  // namespace

std::vector<Finding> judge_optimized(const ir::Graph& g, const std::vector<BackendRun>& runs, const Thresholds& th,
                                     const backends::ValueMap* inputs) {
  std::vector<Finding> out;
  const BackendRun* ref = nullptr;
  for (const auto& r : runs)
    if (r.is_reference) ref = &r;
  std::optional<backends::ValueMap> envelope;  // computed once, where a plain tolerance first fails
  for (const auto& r : runs) {
    const OptimizedRun& opt = r.optimized;
    if (r.is_reference || !opt.ran || !r.outcome.ok() || r.values.empty()) continue;
    Finding base;
    base.stage = Stage::Optimized;
    base.backend = r.backend;
    base.params = fusion_key(opt.lowering);
    for (const auto& [node, ops] : opt.lowering)
      for (const auto& op : ops)
        if (!backends::fused_entry(op).empty() &&
            std::find(base.lowering.begin(), base.lowering.end(), op) == base.lowering.end())
          base.lowering.push_back(op);
    if (!opt.outcome.ok()) {
      // Quorum's own failures (its exporter) are not the library's; a refusal only the optimized compile
      // makes is the optimizer's.
      if (opt.outcome.status == worker::Status::QuorumError || opt.outcome.status == worker::Status::ProtocolError)
        continue;
      Finding f = base;
      f.kind = Kind::Crash;
      f.message = crash_message(opt.outcome);
      f.detail = "the optimized run failed where the pinned run ran: " + opt.outcome.str();
      out.push_back(std::move(f));
      continue;
    }
    if (!ref || !inputs) continue;
    for (const auto& o : output_values(g)) {
      const ir::Node* n = g.producer(o);
      const auto pin = r.values.find(o);
      const auto want = ref->values.find(o);
      if (!n || pin == r.values.end() || want == ref->values.end()) continue;
      Finding f = base;
      f.node = n->name;
      f.op = n->op;
      f.against = {"ref", r.backend + " (pinned)"};
      const auto got = opt.values.find(o);
      if (got == opt.values.end() || got->second.shape() != want->second.shape()) {
        f.kind = Kind::Inconsistency;
        f.distance = INFINITY;
        f.detail = "the optimized run returned output '" + o + "' " +
                   (got == opt.values.end() ? std::string("not at all")
                                            : "with shape " + core::to_string(got->second.shape())) +
                   ", the model's shape is " + core::to_string(want->second.shape());
        out.push_back(std::move(f));
        continue;
      }
      const Tensor& a = got->second;
      const Tensor& p = pin->second;
      const Tensor w = rounded_to(want->second, th.dtype);
      const ops::Tolerance tol = node_tolerance(g, *n, th.dtype, false);
      int64_t produced = 0, swallowed = 0, wrong = 0, first = -1;
      double worst = 0;
      for (int64_t i = 0; i < a.numel(); ++i) {
        const double x = a.get(i), y = p.get(i), z = w.get(i);
        const double plain = tol.atol + tol.rtol * std::abs(z);
        if (std::isfinite(x) && std::isfinite(y) && std::isfinite(z) &&
            (std::abs(x - y) <= plain || std::abs(x - z) <= plain))
          continue;
        if (!envelope) envelope = graph_envelope(g, *inputs, ref->values, th.dtype);
        const auto ei = envelope->find(o);
        const double env = ei == envelope->end() ? INFINITY : ei->second.get(i);
        if (env == INFINITY) continue;  // some float32 evaluation leaves the range, or could not be made
        const double allowed = plain + kMargin * env;
        if (std::isfinite(z) && !std::isfinite(x)) {
          if (std::isfinite(y)) ++produced, first = first < 0 ? i : first;
        } else if (std::isnan(z) && !std::isnan(x)) {
          if (std::isnan(y)) ++swallowed, first = first < 0 ? i : first;
        } else if (std::isfinite(z) && std::isfinite(x) && std::isfinite(y) && std::abs(y - z) <= allowed) {
          // Judged only where the pinned run is right: where it is not, the per-node stage has the finding, and
          // a library that computes garbage there (memory it does not own) gives other garbage when optimized.
          const double d = std::min(std::abs(x - y), std::abs(x - z));
          if (d > allowed) {
            ++wrong;
            if (first < 0 || std::abs(x - z) > worst) first = i;
            worst = std::max(worst, std::abs(x - z));
          }
        }
      }
      if (!produced && !swallowed && !wrong) continue;
      f.kind = produced ? Kind::NaN : wrong ? Kind::Inconsistency : Kind::NaNSwallowed;
      f.distance = produced ? INFINITY : worst;
      const int64_t count = produced ? produced : wrong ? wrong : swallowed;
      char buf[256];
      std::snprintf(buf, sizeof buf, "; e.g. element %lld: optimized %.9g, pinned %.9g, float64 %.9g",
                    static_cast<long long>(first), a.get(first), p.get(first), w.get(first));
      f.detail = "output '" + o + "': " + std::to_string(count) + " of " + std::to_string(a.numel()) +
                 " elements of the optimized run " +
                 (produced ? "NaN/Inf where the pinned run and the float64 result are finite"
                  : wrong  ? "beyond the float32 envelope of the pinned run and of the float64 result"
                           : "numbers where the pinned run and the float64 result are NaN") +
                 buf;
      out.push_back(std::move(f));
    }
  }
  return out;
}

}  // namespace quorum::oracle::detail
