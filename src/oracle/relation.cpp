// The relations inside one library: a second run of the model by the same library on the same numbers,
// computed another way, judged node by node against that library's own pinned run and the float64 reference
// (oracle.h). The batch relation (stage BR): the library's rows of the model's own samples inside a larger
// batch; inference engines choose kernels, blockings and vector tails by shape, and a result for a sample that
// depends on the batch around it, on its position or on the batch's size is wrong. The form relation (stage
// FR): the same model read in another exchange form (another opset, other choices among the ONNX spellings of
// a node); an importer that reads one spelling right and an equivalent one wrong is wrong. The position relation
// (stage PR): the model's values placed at an offset of a longer axis (a channel, a row, a column); a kernel whose
// result for a position depends on where it lies (a vector loop's tail, a blocked layout's last block) or on the
// axis's length is wrong. Each is wrong whenever it leaves what a correct float32 evaluation can give (the
// whole-graph envelope of oracle/second_run.h).
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <set>

#include "oracle/judge_util.h"
#include "oracle/second_run.h"

namespace quorum::oracle {

using core::Tensor;

namespace {

// Every element of the run `p` where the reference `w` is: within `tol`, NaN for NaN, the same infinity.
bool plainly_agrees(const Tensor& p, const Tensor& w, const ops::Tolerance& tol) {
  if (p.shape() != w.shape()) return false;
  for (int64_t i = 0; i < p.numel(); ++i) {
    const double y = p.get(i), z = w.get(i);
    const bool same = std::isnan(z)   ? std::isnan(y)
                      : std::isinf(z) ? y == z
                                      : std::abs(y - z) <= tol.atol + tol.rtol * std::abs(z);
    if (!same) return false;
  }
  return true;
}

// What tells one relation's second runs apart: which run of a backend it is, and how its findings name it.
struct Relation {
  Stage stage;
  std::function<const RelationRun&(const BackendRun&)> run;
  // The labels of the second run and of the pinned run at node `n` (nullptr: the whole run), and what the
  // detail adds after the value.
  std::function<std::string(const BackendRun&, const ir::Node* n)> other, mine;
  std::function<std::string(const BackendRun&)> where;
  // The envelope of value `o` at the second run's elements, where it is not the model's own (the position
  // relation's wider model); null: the model's.
  std::function<const Tensor*(const std::string& o)> envelope;
};

std::vector<Finding> judge_relation(const ir::Graph& g, const std::vector<BackendRun>& runs, const Thresholds& th,
                                    const backends::ValueMap* inputs, const Relation& rel) {
  std::vector<Finding> out;
  const BackendRun* ref = nullptr;
  for (const auto& r : runs)
    if (r.is_reference) ref = &r;
  std::vector<std::string> all;  // every node output, in order
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs) all.push_back(o);
  std::optional<backends::ValueMap> envelope;  // computed once, where a plain tolerance first fails
  for (const auto& r : runs) {
    if (r.is_reference) continue;
    const RelationRun& b = rel.run(r);
    if (!b.ran || !r.outcome.ok() || r.values.empty()) continue;
    Finding base;
    base.stage = rel.stage;
    base.backend = r.backend;
    const std::string where = rel.where(r);
    if (!b.outcome.ok()) {
      // Quorum's own failures are not the library's; a refusal of the second run is the library's answer.
      if (b.outcome.status == worker::Status::QuorumError || b.outcome.status == worker::Status::ProtocolError ||
          b.outcome.status == worker::Status::Unsupported)
        continue;
      Finding f = base;
      f.against = {"ref", r.backend + " (" + rel.mine(r, nullptr) + ")"};
      f.kind = Kind::Crash;
      f.message = detail::crash_message(b.outcome);
      f.detail = "the " + rel.other(r, nullptr) + " run failed where the " + rel.mine(r, nullptr) + " run ran" + where +
                 ": " + b.outcome.str();
      out.push_back(std::move(f));
      continue;
    }
    if (!ref || !inputs) continue;
    // A node is judged only where the library's pinned run agrees with the reference on every operand (within
    // the plain tolerance, NaN for NaN, the same infinity): downstream of where it departs (the per-node stage's
    // finding), its second run's NaN and the reference's may coincide for different causes, while its operands
    // differ.
    std::set<std::string> agrees;
    for (const auto& in : g.inputs) agrees.insert(in.name);
    for (const auto& [name, w] : g.initializers) agrees.insert(name);
    for (const auto& n : g.nodes) {
      if (!std::all_of(n.inputs.begin(), n.inputs.end(), [&](const std::string& i) { return agrees.count(i); }))
        continue;
      const ops::Tolerance plain = detail::node_tolerance(g, n, th.dtype, false);
      for (const auto& o : n.outputs) {
        const auto pin = r.values.find(o);
        const auto want = ref->values.find(o);
        if (pin != r.values.end() && want != ref->values.end() &&
            plainly_agrees(pin->second, detail::rounded_to(want->second, th.dtype), plain))
          agrees.insert(o);
      }
      bool found = false;
      for (const auto& o : n.outputs) {
        const auto got = b.values.find(o);
        const auto pin = r.values.find(o);
        const auto want = ref->values.find(o);
        if (got == b.values.end() || pin == r.values.end() || want == ref->values.end() ||
            got->second.shape() != pin->second.shape() || pin->second.shape() != want->second.shape())
          continue;
        const Tensor& a = got->second;
        const Tensor w = detail::rounded_to(want->second, th.dtype);
        const detail::SecondRunVerdict v = detail::judge_second_run(
            a, pin->second, w, detail::node_tolerance(g, n, th.dtype, false), [&]() -> const Tensor* {
              if (rel.envelope) return rel.envelope(o);
              if (!envelope) envelope = detail::graph_envelope(g, *inputs, ref->values, th.dtype, all);
              const auto ei = envelope->find(o);
              return ei == envelope->end() ? nullptr : &ei->second;
            });
        if (!v.any()) continue;
        const std::string mine = rel.mine(r, &n);
        Finding f = base;
        f.against = {"ref", r.backend + " (" + mine + ")"};
        f.node = n.name;
        f.op = n.op;
        f.params = detail::key_params(n);
        f.kind = v.kind();
        f.distance = v.produced ? INFINITY : v.worst;
        f.detail = "value " + detail::second_run_detail(o, v, a, pin->second, w, rel.other(r, &n), mine) + where;
        out.push_back(std::move(f));
        found = true;
        break;
      }
      if (found) break;  // what follows the first departing node departs with it
    }
  }
  return out;
}

// A node's exchange form in one run ("opset 12", "opset 12, gemm=matmul_add"), or `fallback` (no node: the
// whole run).
std::string form_of(const std::map<std::string, std::string>& forms, const ir::Node* node,
                    const std::string& fallback) {
  const auto it = node ? forms.find(node->name) : forms.end();
  return it == forms.end() || it->second.empty() ? fallback : it->second;
}

}  // namespace

std::vector<Finding> judge_batch_relation(const ir::Graph& g, const std::vector<BackendRun>& runs,
                                          const Thresholds& th, const backends::ValueMap* inputs) {
  const int64_t n0 = g.inputs.empty() || g.inputs[0].type.shape.empty() ? 0 : g.inputs[0].type.shape[0];
  Relation rel;
  rel.stage = Stage::Batch;
  rel.run = [](const BackendRun& r) -> const RelationRun& { return r.batched; };
  rel.other = [](const BackendRun& r, const ir::Node*) { return "batch-" + std::to_string(r.batched.batch); };
  rel.mine = [n0](const BackendRun&, const ir::Node*) { return "batch-" + std::to_string(n0); };
  rel.where = [n0](const BackendRun& r) {
    const BatchRun& b = r.batched;
    return " (rows " + std::to_string(b.position) + ".." + std::to_string(b.position + n0 - 1) + " of a batch of " +
           std::to_string(b.batch) + ")";
  };
  return judge_relation(g, runs, th, inputs, rel);
}

std::vector<Finding> judge_form_relation(const ir::Graph& g, const std::vector<BackendRun>& runs,
                                         const Thresholds& th, const backends::ValueMap* inputs) {
  Relation rel;
  rel.stage = Stage::Form;
  rel.run = [](const BackendRun& r) -> const RelationRun& { return r.formed; };
  rel.other = [](const BackendRun& r, const ir::Node* n) { return form_of(r.formed.other, n, "other form"); };
  rel.mine = [](const BackendRun& r, const ir::Node* n) { return form_of(r.formed.pinned, n, "own form"); };
  rel.where = [](const BackendRun&) { return std::string(" (the model read in another exchange form)"); };
  return judge_relation(g, runs, th, inputs, rel);
}

std::vector<Finding> judge_position_relation(const ir::Graph& g, const std::vector<BackendRun>& runs,
                                             const Thresholds& th, const backends::ValueMap* inputs,
                                             const PositionCase& wide) {
  Relation rel;
  std::optional<backends::ValueMap> whole;  // the wider model's envelope, made where first asked for
  std::map<std::string, Tensor> at;         // and at each value's positions of the model
  rel.envelope = [&](const std::string& o) -> const Tensor* {
    if (const auto it = at.find(o); it != at.end()) return &it->second;
    const auto p = wide.placed.find(o);
    const auto ref = std::find_if(runs.begin(), runs.end(), [](const BackendRun& r) { return r.is_reference; });
    if (p == wide.placed.end() || ref == runs.end() || !ref->values.count(o)) return nullptr;
    if (!whole) {
      std::vector<std::string> all;
      for (const auto& n : wide.graph.nodes) all.insert(all.end(), n.outputs.begin(), n.outputs.end());
      whole = detail::graph_envelope(wide.graph, wide.inputs, wide.reference, th.dtype, all);
    }
    const auto e = whole->find(o);
    if (e == whole->end()) return nullptr;
    const int64_t n = ref->values.at(o).shape()[p->second.first];
    return &at.emplace(o, core::slab(e->second, p->second.first, p->second.second, n)).first->second;
  };
  rel.stage = Stage::Position;
  rel.run = [](const BackendRun& r) -> const RelationRun& { return r.positioned; };
  const auto length = [](int64_t n) { return "length-" + std::to_string(n); };
  rel.other = [length](const BackendRun& r, const ir::Node*) { return length(r.positioned.length); };
  rel.mine = [length](const BackendRun& r, const ir::Node*) { return length(r.positioned.samples); };
  rel.where = [](const BackendRun& r) {
    const PositionRun& p = r.positioned;
    return " (positions " + std::to_string(p.position) + ".." + std::to_string(p.position + p.samples - 1) +
           " of input axis " + std::to_string(p.axis) + " widened to " + std::to_string(p.length) + ")";
  };
  return judge_relation(g, runs, th, inputs, rel);
}

}  // namespace quorum::oracle
