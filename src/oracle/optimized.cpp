// The optimized stage (OC): a library's optimized run (only the graph outputs asked for, its optimizer free
// to fuse and fold) judged end to end, against the float64 reference's outputs and against the library's
// own pinned run, within the whole-graph float32 envelope (oracle/second_run.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>

#include "core/rng.h"
#include "oracle/judge_util.h"
#include "oracle/node_kernel.h"
#include "oracle/second_run.h"
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
      const Tensor w = rounded_to(want->second, th.dtype);
      const SecondRunVerdict v =
          judge_second_run(a, pin->second, w, node_tolerance(g, *n, th.dtype, false), [&]() -> const Tensor* {
            if (!envelope) envelope = graph_envelope(g, *inputs, ref->values, th.dtype, output_values(g));
            const auto ei = envelope->find(o);
            return ei == envelope->end() ? nullptr : &ei->second;
          });
      if (!v.any()) continue;
      f.kind = v.kind();
      f.distance = v.produced ? INFINITY : v.worst;
      f.detail = "output " + second_run_detail(o, v, a, pin->second, w, "optimized", "pinned");
      out.push_back(std::move(f));
    }
  }
  return out;
}

}  // namespace quorum::oracle::detail
