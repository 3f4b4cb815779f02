// Running one model on every backend and judging it.
#include "campaign/evaluate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>
#include <sstream>

#include "core/error.h"
#include "ir/graph.h"
#include "data/values.h"
#include "ops/materialize.h"
#include "ops/registry.h"
#include "oracle/node_kernel.h"
#include "ref/interpreter.h"
#include "ref/ranges.h"

namespace quorum::campaign {

using core::UserError;

namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

backends::ValueMap rounded(const backends::ValueMap& m, core::DType dtype) {
  backends::ValueMap out;
  for (const auto& [k, t] : m) out.emplace(k, t.to(dtype));
  return out;
}


// The float64 reference on the same rounded inputs and weights, in-process.
// `g` with its weights as the libraries hold them: rounded to the run's dtype, in float64 for the reference.
ir::Graph with_weights_rounded(ir::Graph g, core::DType dtype) {
  for (auto& [name, w] : g.initializers) w = w.to(dtype).to(core::DType::F64);
  return g;
}

oracle::BackendRun reference_run(const ModelCase& m, const Setup& setup, const backends::ValueMap& inputs,
                                 const core::Tensor& target) {
  const bool want_train = setup.mode != Mode::Infer;
  oracle::BackendRun r;
  r.backend = "ref";
  r.is_reference = true;
  const ir::Graph g = with_weights_rounded(m.graph, setup.dtype);
  if (want_train) {
    ref::TrainResult tr = ref::train(g, inputs, target, ref::LossSpec{setup.loss, {}});
    r.trained = true;
    r.loss = tr.loss;
    r.loss_grad = tr.loss_grad;
    r.grads = std::move(tr.grads);
    for (const auto& n : g.nodes)
      for (const auto& o : n.outputs) r.values.emplace(o, tr.values.at(o));
  } else {
    const auto all = ref::forward(g, inputs);
    for (const auto& n : g.nodes)
      for (const auto& o : n.outputs) r.values.emplace(o, all.at(o));
  }
  return r;
}

// Per backend, per node: what its library ran (backends::Session::lowering), asked once per backend from its
// worker's current session.
using Lowerings = std::map<std::string, std::map<std::string, std::vector<std::string>>>;
const std::map<std::string, std::vector<std::string>>* lowering_of(Lowerings& cache, const Setup& setup,
                                                                   WorkerSet& workers, const std::string& backend) {
  if (auto it = cache.find(backend); it != cache.end()) return &it->second;
  for (size_t i = 0; i < workers.size(); ++i) {
    if (setup.backends[i].str() != backend) continue;
    std::map<std::string, std::vector<std::string>> ops;
    if (!workers.at(i).lowering(ops).ok()) ops.clear();
    return &cache.emplace(backend, std::move(ops)).first->second;
  }
  return nullptr;
}

// Findings [from, end) of `fs`: the library operations behind each finding's node, and the ledgers' labels.
void attach_lowering(std::vector<oracle::Finding>& fs, size_t from, Lowerings& cache, const Setup& setup,
                     WorkerSet& workers) {
  for (size_t k = from; k < fs.size(); ++k) {
    oracle::Finding& f = fs[k];
    if (f.node.empty()) continue;
    // An optimized-stage finding holds what the optimizer did (its "fused ..." entries); the node's pinned
    // operations follow them, so the two lowerings show side by side and a ledger pattern may name either.
    if (const auto* ops = lowering_of(cache, setup, workers, f.backend))
      if (auto n = ops->find(f.node); n != ops->end()) {
        if (f.stage != oracle::Stage::Optimized) f.lowering.clear();
        f.lowering.insert(f.lowering.end(), n->second.begin(), n->second.end());
      }
    // Blamed on the reference: the ledgers match it per library, each with its own operations.
    if (f.blames_reference())
      for (const auto& library : f.against)
        if (const auto* ops = lowering_of(cache, setup, workers, library))
          if (auto n = ops->find(f.node); n != ops->end()) f.against_lowering[library] = n->second;
  }
  if (setup.known)
    for (size_t k = from; k < fs.size(); ++k)
      if (const oracle::KnownEntry* e = setup.known->match(fs[k])) fs[k].known = e->id;
}

oracle::Thresholds thresholds(const Setup& setup) {
  oracle::Thresholds th = setup.thresholds;
  th.loss_op = setup.loss;
  th.dtype = setup.dtype;
  return th;
}

// The oracles on the runs, the blamed backends' lowering, the ledgers' labels.
void judge_runs(const ModelCase& m, const Setup& setup, WorkerSet& workers, const backends::ValueMap& inputs,
                const core::Tensor& target, Evaluation& ev) {
  ev.findings = oracle::judge(m.graph, ev.runs, thresholds(setup), &inputs, &target);
  // The library operations behind each finding's node, asked once per backend with findings; and
  // once per backend that ran the model and reads an exchange form, the form it read (its "onnx ..." entries).
  Lowerings lowering;
  for (const auto& r : ev.runs) {
    if (r.is_reference || r.unsupported || !r.outcome.ok() || r.values.empty()) continue;
    for (size_t i = 0; i < workers.size(); ++i) {
      if (setup.backends[i].str() != r.backend) continue;
      const worker::BackendInfo* info = workers.at(i).info();
      if (!info || !info->reads_exchange_form || lowering.count(r.backend)) break;
      for (const auto& [node, list] : *lowering_of(lowering, setup, workers, r.backend))
        for (const auto& x : list)
          if (x.rfind("onnx ", 0) == 0) ev.exchange[r.backend][node].push_back(x);
    }
  }
  attach_lowering(ev.findings, 0, lowering, setup, workers);
}

using core::slab;

core::Tensor rows(const core::Tensor& t, int64_t from, int64_t n) { return slab(t, 0, from, n); }

bool same_bits(const core::Tensor& a, const core::Tensor& b) {
  if (a.shape() != b.shape()) return false;
  const core::Tensor x = a.to(core::DType::F64), y = b.to(core::DType::F64);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double u = x.f64()[i], v = y.f64()[i];
    if (!(u == v || (std::isnan(u) && std::isnan(v)))) return false;
  }
  return true;
}

// The batch sizes the relation draws from: around the vector widths and blockings libraries choose kernels by.
const std::vector<int64_t>& relation_batches() {
  static const std::vector<int64_t> sizes = {3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65};
  return sizes;
}

}  // namespace

namespace {

// `x` written into `v` (a tensor of its dtype and rank, longer along `axis`) at offset `position` of `axis`.
void place(core::Tensor& v, const core::Tensor& x, size_t axis, int64_t position) {
  const core::Shape& shape = x.shape();
  int64_t outer = 1;
  for (size_t i = 0; i < axis; ++i) outer *= shape[i];
  const size_t block = outer ? x.nbytes() / static_cast<size_t>(outer) : 0;  // one outer index's slab of x
  const size_t per = shape[axis] ? block / static_cast<size_t>(shape[axis]) : 0;  // one position of it
  const size_t wide = per * static_cast<size_t>(v.shape()[axis]);
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(static_cast<char*>(v.raw()) + o * wide + position * per,
                static_cast<const char*>(x.raw()) + o * block, block);
}

// A function of the case's input values: the relations' draws (replay and the campaign agree).
core::Rng drawn_for(const std::string& what, const backends::ValueMap& inputs) {
  std::string bytes;
  for (const auto& [name, v] : inputs) bytes += name + std::string(static_cast<const char*>(v.raw()), v.nbytes());
  return core::Rng(core::fnv1a(what + bytes));
}

// A wider length and an offset for `n0` positions: the first, the last (a vector loop's tail) or anywhere.
bool draw_wider(int64_t n0, core::Rng& rng, int64_t& size, int64_t& position) {
  std::vector<int64_t> wider;
  for (int64_t b : relation_batches())
    if (b > n0) wider.push_back(b);
  if (wider.empty()) return false;
  size = rng.pick(wider);
  const int64_t last = size - n0;
  const int64_t where = rng.randint(0, 2);
  position = where == 0 ? 0 : where == 1 ? last : rng.randint(0, last);
  return true;
}

// The longest run of `g`'s first nodes (in order) that is valid as the graph `g` holds them, every graph input
// still read, its values not read within it the outputs: nullopt where that is no node, or drops an input.
std::optional<ir::Graph> valid_prefix(const ir::Graph& g) {
  auto first = [&g](size_t k) {
    ir::Graph p = g;
    p.nodes.resize(k);
    p.outputs.clear();
    std::set<std::string> read;
    for (const auto& n : p.nodes) read.insert(n.inputs.begin(), n.inputs.end());
    for (const auto& n : p.nodes)
      for (const auto& o : n.outputs)
        if (!read.count(o)) p.outputs.push_back(o);
    for (auto it = p.initializers.begin(); it != p.initializers.end();)
      it = read.count(it->first) ? std::next(it) : p.initializers.erase(it);
    for (const auto& in : p.inputs)
      if (!read.count(in.name)) throw core::UserError("input '" + in.name + "' is no longer read");
    p.types.clear();
    ir::validate(p, "a relation's wider model");
    return p;
  };
  std::optional<ir::Graph> best;
  for (size_t k = 1; k < g.nodes.size(); ++k) {
    try {
      best = first(k);
    } catch (const core::UserError&) {
      break;
    }
  }
  return best;
}

// The model `g` with axis `axis` of the graph inputs of the first input's rank that have its length there
// widened to `size`, the model's values (`inputs`) at `position` and fresh ones (from `fresh`, edge values at
// `edge_rate`) around them;
// nullopt where a shape rule refuses, or with `prefix`, the longest valid run of its first nodes
// (valid_prefix: a convolution before the dense layer its flattened width feeds). Along the batch, the
// operators that spell it out follow (OpSpec::widen_batch).
std::optional<WideCase> widen(const ir::Graph& g, const backends::ValueMap& inputs, const Setup& setup,
                              size_t axis, int64_t size, int64_t position, core::Rng& fresh, bool prefix,
                              double edge_rate) {
  const core::Shape& first = g.inputs[0].type.shape;
  WideCase w;
  w.axis = static_cast<int>(axis);
  w.samples = first[axis];
  const int64_t n0 = w.samples;
  if (size <= n0) return std::nullopt;
  w.batch = size;
  w.position = std::clamp<int64_t>(position, 0, size - n0);
  w.graph = g;
  w.graph.form_batch = {size, n0, static_cast<int64_t>(axis)};  // read in the model's own exchange form
  for (auto& in : w.graph.inputs) {
    core::Shape& shape = in.type.shape;
    if ((axis == 0 ? !shape.empty() : shape.size() == first.size()) && shape[axis] == n0)
      shape[axis] = size, w.widened.insert(in.name);
  }
  if (axis == 0)
    for (auto& n : w.graph.nodes)
      if (const ops::OpSpec* spec = ops::catalogue().find(n.op); spec && spec->widen_batch)
        spec->widen_batch(n0, size, n.attrs);
  w.graph.types.clear();
  try {
    ir::validate(w.graph, "a relation's wider model");
  } catch (const core::UserError&) {
    // A shape rule ties the axis to another length (a reshape's fixed shape, a dense layer's features).
    std::optional<ir::Graph> p = prefix ? valid_prefix(w.graph) : std::nullopt;
    if (!p) return std::nullopt;
    w.graph = std::move(*p);
  }
  data::complete_inputs(w.graph, w.inputs, fresh, edge_rate);
  w.fresh = rounded(w.inputs, setup.dtype);
  for (auto& [name, v] : w.inputs) {
    const auto own = inputs.find(name);
    if (own == inputs.end()) continue;
    if (!w.widened.count(name)) {
      v = own->second;
      continue;
    }
    v = v.to(setup.dtype);
    place(v, own->second.to(setup.dtype), axis, w.position);
  }
  w.inputs = rounded(w.inputs, setup.dtype);
  return w;
}

}  // namespace

std::optional<WideCase> wide_case(const ir::Graph& g, const backends::ValueMap& inputs, const Setup& setup) {
  if (g.inputs.empty() || g.inputs[0].type.shape.empty()) return std::nullopt;
  // The fresh samples from a stream of their own, so a fixed draw gives the same ones.
  core::Rng rng = drawn_for("batch relation ", inputs);
  core::Rng fresh = rng.derive("fresh samples");
  int64_t size = setup.batch_relation.batch, position = setup.batch_relation.position;
  if (size <= 0 && !draw_wider(g.inputs[0].type.shape[0], rng, size, position)) return std::nullopt;
  return widen(g, inputs, setup, 0, size, position, fresh, false, data::kEdgeRate);
}

std::optional<WideCase> positioned_case(const ir::Graph& g, const backends::ValueMap& inputs, const Setup& setup) {
  if (g.inputs.empty() || g.inputs[0].type.shape.size() < 2) return std::nullopt;
  const core::Shape& first = g.inputs[0].type.shape;
  const Setup::PositionRelation& fixed = setup.position_relation;
  core::Rng rng = drawn_for("position relation ", inputs);
  core::Rng fresh = rng.derive("fresh values");
  if (fixed.length > 0) {
    if (fixed.axis < 1 || static_cast<size_t>(fixed.axis) >= first.size()) return std::nullopt;
    return widen(g, inputs, setup, static_cast<size_t>(fixed.axis), fixed.length, fixed.position, fresh, true, 0);
  }
  // The last axis half the time (the one vector loops run along), else any; the others in turn where the drawn
  // one is tied to its length.
  const size_t rank = first.size();
  const auto last = static_cast<int64_t>(rank - 1);
  const size_t start = static_cast<size_t>(rng.randint(0, 1) ? last : rng.randint(1, last));
  for (size_t k = 0; k + 1 < rank; ++k) {
    const size_t axis = 1 + (start - 1 + k) % (rank - 1);
    int64_t size = 0, position = 0;
    if (!draw_wider(first[axis], rng, size, position)) continue;
    if (auto w = widen(g, inputs, setup, axis, size, position, fresh, true, 0)) return w;
  }
  return std::nullopt;
}

namespace {

worker::Outcome infers(const ir::Graph& g, worker::Worker& w);  // below

// The run of backend `i` that a relation makes again (after judge_runs): one that ran the model, or null.
oracle::BackendRun* ran(Evaluation& ev, const Setup& setup, size_t i) {
  for (auto& run : ev.runs)
    if (!run.is_reference && run.backend == setup.backends[i].str())
      return run.outcome.ok() && !run.unsupported && !run.values.empty() ? &run : nullptr;
  return nullptr;
}

// A relation's second model `g` compiled on `backend`'s worker: what the backend refuses of it (its support
// rules, a learned refusal) it is not asked to run.
worker::Outcome compile_again(const ir::Graph& g, const std::string& backend, const Setup& setup,
                              worker::Worker& w) {
  if (setup.refusals)
    if (auto hit = setup.refusals->match(backend, g))
      return {worker::Status::Unsupported, "not sent: " + hit->refusal.str(), 0, ""};
  worker::Outcome o = infers(g, w);
  if (o.ok()) o = w.compile(g, backends::CompileOptions{setup.dtype, setup.threads});
  return o;
}

// A relation's second model `g` run on `w` (compile_again, then the pinned forward pass on `inputs`) into `run`;
// its values where it ran.
backends::ValueMap run_again(const ir::Graph& g, const backends::ValueMap& inputs, const std::string& backend,
                             const Setup& setup, worker::Worker& w, oracle::RelationRun& run) {
  run.ran = true;
  run.outcome = compile_again(g, backend, setup, w);
  backends::ValueMap values;
  if (run.outcome.ok()) run.outcome = w.forward(inputs, true, values);
  return values;
}

// The batch relation (Setup::batch_relation): the model at a wider batch on every library that ran it, its
// rows of the model's own samples judged (stage BR). Runs after judge_runs: each worker's session becomes the
// wide model's, whose lowering the relation's findings then carry.
void batch_relation(const ModelCase& m, const Setup& setup, WorkerSet& workers, const backends::ValueMap& inputs,
                    Evaluation& ev, Timing& t) {
  const ir::Graph& g = m.graph;
  const std::optional<WideCase> wc = wide_case(g, inputs, setup);
  if (!wc) return;
  const int64_t n0 = wc->samples, batch = wc->batch, position = wc->position;
  const ir::Graph& wide = wc->graph;
  const backends::ValueMap& wide_inputs = wc->inputs;
  // Which values are a function of their own sample alone: the reference's rows equal its run of the model.
  // And the other rows do not depend on the model's samples: they equal the reference's run with fresh samples
  // in the model's rows too (a NaN of the model's sample spread over the batch by a softmax over axis 0 makes
  // every row NaN, the model's rows then equal its run's NaN by chance).
  backends::ValueMap reference, without;
  try {
    const ir::Graph rg = with_weights_rounded(wide, setup.dtype);
    const auto t0 = std::chrono::steady_clock::now();
    reference = ref::forward(rg, wide_inputs);
    without = ref::forward(rg, wc->fresh);
    t.reference += since(t0);
  } catch (const std::exception&) {
    return;
  }
  // A node's outputs are judged only where every operand is (a graph input, a weight, or a judged value): a
  // value downstream of one that mixes the samples (a softmax over the batch axis) may equal the model's run
  // by chance (a clip's saturated bound), while the library's operands there legitimately differ.
  const backends::ValueMap& own = ev.runs[0].values;
  std::set<std::string> separable;
  for (const auto& in : g.inputs) separable.insert(in.name);
  for (const auto& [name, w] : g.initializers) separable.insert(name);
  for (const auto& n : g.nodes) {
    if (!std::all_of(n.inputs.begin(), n.inputs.end(), [&](const std::string& i) { return separable.count(i); }))
      continue;
    // A node that mixes the samples by its definition is not judged, whatever its values show (seed 10337: a
    // training-mode batch_norm of a constant input, its bias in every row, while OpenCV's statistics took a
    // NaN from another row).
    const ops::OpSpec& spec = ops::op(n.op);
    std::vector<core::TensorType> types;
    for (size_t i = 0; i < ir::data_input_count(n); ++i) types.push_back(g.types.at(n.inputs[i]));
    if (spec.mixes_batch && !types.empty() && spec.mixes_batch(types, n.attrs)) continue;
    for (const auto& o : n.outputs) {
      const auto a = reference.find(o);
      const auto b = own.find(o);
      if (a == reference.end() || b == own.end() || a->second.shape().empty() || b->second.shape().empty() ||
          a->second.shape()[0] != batch || b->second.shape()[0] != n0)
        continue;
      const auto c = without.find(o);
      if (c == without.end() || c->second.shape() != a->second.shape()) continue;
      const int64_t after = position + n0;
      if (same_bits(rows(a->second, position, n0), b->second) &&
          same_bits(rows(a->second, 0, position), rows(c->second, 0, position)) &&
          same_bits(rows(a->second, after, batch - after), rows(c->second, after, batch - after)))
        separable.insert(o);
    }
  }
  for (const auto& in : g.inputs) separable.erase(in.name);
  for (const auto& [name, w] : g.initializers) separable.erase(name);
  if (separable.empty()) return;
  ev.batch = batch;
  ev.position = position;
  for (size_t i = 0; i < workers.size(); ++i) {
    oracle::BackendRun* r = ran(ev, setup, i);
    if (!r) continue;
    worker::Worker& w = workers.at(i);
    const auto t0 = std::chrono::steady_clock::now();
    oracle::BatchRun& b = r->batched;
    b.batch = batch;
    b.position = position;
    const backends::ValueMap values = run_again(wide, wide_inputs, r->backend, setup, w, b);
    t.batched[setup.backends[i].name] += since(t0);
    if (!b.outcome.ok()) continue;
    for (const auto& o : separable) {
      const auto v = values.find(o);
      if (v != values.end() && !v->second.shape().empty() && v->second.shape()[0] == batch)
        b.values.emplace(o, rows(v->second, position, n0));
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  const size_t from = ev.findings.size();
  for (auto& f : oracle::judge_batch_relation(g, ev.runs, thresholds(setup), &inputs))
    ev.findings.push_back(std::move(f));
  Lowerings lowering;  // the wide model's sessions now
  attach_lowering(ev.findings, from, lowering, setup, workers);
  t.compare += since(t0);
}

// Per value the position relation judges: the axis that holds the widened one, and which of its elements the
// model's values decide.
struct Judged {
  size_t axis = 0;
  int64_t at = 0;  // the offset of the model's positions along it
  std::vector<bool> decided;
};

// The offset along `axis` that a node's operands put its positions at, for an output of length `here` there in
// the model's run and `length` in the wider one: that of every operand with those lengths on that axis (a
// widened graph input is at the case's position, a judged value at its own offset), -1 where no operand has
// them, -2 where two went to different offsets (the parts of a concatenation along the widened axis). `own` and
// `reference` hold the values of the model's run and of the wider one, `inputs` the model's own inputs.
int64_t operands_offset(const ir::Node& n, size_t axis, int64_t here, int64_t length,
                        const std::map<std::string, Judged>& judged, const backends::ValueMap& own,
                        const backends::ValueMap& reference, const backends::ValueMap& inputs, const WideCase& wc) {
  int64_t at = -1;
  for (const auto& i : n.inputs) {
    const core::Shape* mine = nullptr;
    const core::Shape* wide = nullptr;
    int64_t its = wc.position;
    if (const auto j = judged.find(i); j != judged.end()) {
      if (j->second.axis != axis) continue;
      mine = &own.at(i).shape();
      wide = &reference.at(i).shape();
      its = j->second.at;
    } else if (const auto w = wc.inputs.find(i); w != wc.inputs.end() && inputs.count(i)) {
      mine = &inputs.at(i).shape();
      wide = &w->second.shape();
    }
    if (!mine || axis >= mine->size() || axis >= wide->size() || (*mine)[axis] != here || (*wide)[axis] != length)
      continue;
    if (at >= 0 && at != its) return -2;
    at = its;
  }
  return at;
}

// The position relation (Setup::position_relation): the model with one more axis widened (positioned_case) on
// every library that ran it, its positions of the model's values judged (stage PR) wherever the float64
// reference shows them decided by those values alone: per value that keeps the widened axis (the one axis
// longer than in the model's run), at the offset where its operands put its positions (a value as long as an
// operand along that axis in both runs) or else where the most of its nonzero elements equal the model's run,
// per element, the reference's value there equals its run of the model bit for bit (not NaN) and no element of
// a judged operand that is not decided reaches it (max(1e4, x) is 1e4 in both runs while x, a convolution over
// fresh values, is not the model's: the node's float64 kernel on the wider reference's operands with every
// undecided element of a judged operand NaN gives NaN there). A node is judged only where every operand is a
// graph input, a weight or a judged value. Runs after the batch relation: each
// worker's session becomes the wider model's.
void position_relation(const ModelCase& m, const Setup& setup, WorkerSet& workers, const backends::ValueMap& inputs,
                       Evaluation& ev, Timing& t) {
  const ir::Graph& g = m.graph;
  const std::optional<WideCase> wc = positioned_case(g, inputs, setup);
  if (!wc) return;
  const int64_t n0 = wc->samples, length = wc->batch, position = wc->position;
  oracle::PositionCase wider{with_weights_rounded(wc->graph, setup.dtype), wc->inputs, {}, {}};
  backends::ValueMap& reference = wider.reference;
  try {
    const auto t0 = std::chrono::steady_clock::now();
    reference = ref::forward(wider.graph, wider.inputs);
    t.reference += since(t0);
  } catch (const std::exception&) {
    return;
  }
  std::map<std::string, Judged> judged;
  const backends::ValueMap& own = ev.runs[0].values;
  // The node's outputs on the wider reference's operands, every element of a judged operand it does not decide
  // NaN (empty where the kernel refuses them or an operand is missing).
  auto tainted = [&](const ir::Node& n) -> std::vector<core::Tensor> {
    std::vector<core::Tensor> ops;
    for (const auto& i : n.inputs) {
      const auto r = reference.find(i);
      const auto init = wider.graph.initializers.find(i);
      const auto in = wider.inputs.find(i);
      const core::Tensor* v = r != reference.end()                     ? &r->second
                              : init != wider.graph.initializers.end() ? &init->second
                              : in != wider.inputs.end()               ? &in->second
                                                                       : nullptr;
      if (!v) return {};
      core::Tensor t = v->to(core::DType::F64);
      if (const auto j = judged.find(i); j != judged.end()) {
        const Judged& ji = j->second;
        core::Tensor mine = slab(t, ji.axis, ji.at, own.at(i).shape()[ji.axis]);
        for (int64_t k = 0; k < mine.numel(); ++k)
          if (!ji.decided[static_cast<size_t>(k)]) mine.f64()[k] = NAN;
        for (int64_t k = 0; k < t.numel(); ++k) t.f64()[k] = NAN;
        place(t, mine, ji.axis, ji.at);
      }
      ops.push_back(std::move(t));
    }
    try {
      return oracle::node_forward(n, ops);
    } catch (const std::exception&) {
      return {};
    }
  };
  std::set<std::string> operands;
  for (const auto& in : g.inputs) operands.insert(in.name);
  for (const auto& [name, w] : g.initializers) operands.insert(name);
  for (const auto& n : g.nodes) {
    if (!std::all_of(n.inputs.begin(), n.inputs.end(), [&](const std::string& i) { return operands.count(i); }))
      continue;
    const bool reads_judged =
        std::any_of(n.inputs.begin(), n.inputs.end(), [&](const std::string& i) { return judged.count(i) > 0; });
    std::vector<core::Tensor> taint;  // computed once, for the first output judged
    for (size_t oi = 0; oi < n.outputs.size(); ++oi) {
      const std::string& o = n.outputs[oi];
      const auto a = reference.find(o);
      const auto b = own.find(o);
      if (a == reference.end() || b == own.end()) continue;
      const core::Shape& wide = a->second.shape();
      const core::Shape& mine = b->second.shape();
      if (wide.size() != mine.size()) continue;
      std::vector<size_t> differ;
      for (size_t k = 0; k < wide.size(); ++k)
        if (wide[k] != mine[k]) differ.push_back(k);
      if (differ.size() != 1 || wide[differ[0]] <= mine[differ[0]]) continue;
      // Where the model's positions went. A value as long as an operand along the same axis, in both runs, has
      // them where that operand's went (an elementwise node, a padded convolution); one whose operands went to
      // different offsets is not judged. Otherwise (a convolution without padding moves them, a stride divides
      // the offset): the offset of the value's own positions that the most nonzero elements match, the input's
      // own offset where that is one of them; a value that matches as well at two other offsets (x / -x is -1
      // wherever x is not 0) is not judged. (Seed 14501: concat(a, b, c) along the widened axis matched best
      // where b's part went, its gelu where a's went, -inf in b then met a position of c where both runs' gelu
      // was 0, and a library's gelu(-inf) = NaN was judged against the model's gelu(-92) = 0.)
      const core::Tensor y = b->second.to(core::DType::F64);
      const int64_t here = mine[differ[0]];
      const int64_t kept = operands_offset(n, differ[0], here, wide[differ[0]], judged, own, reference, inputs, *wc);
      if (kept == -2) continue;
      std::vector<int64_t> matches;  // per offset
      for (int64_t at = 0; at + here <= wide[differ[0]]; ++at) {
        const core::Tensor x = slab(a->second, differ[0], at, here);
        int64_t same = 0;
        for (int64_t i = 0; i < y.numel(); ++i) same += x.f64()[i] == y.f64()[i] && y.f64()[i] != 0;
        matches.push_back(same);
      }
      const int64_t most = *std::max_element(matches.begin(), matches.end());
      const auto offsets = static_cast<int64_t>(matches.size());
      int64_t best = kept >= 0 ? (kept < offsets ? kept : -1)
                     : position < offsets && matches[position] == most ? position
                                                                       : -1;
      if (best < 0 && kept < 0 && std::count(matches.begin(), matches.end(), most) == 1)
        best = std::max_element(matches.begin(), matches.end()) - matches.begin();
      if (best < 0 || matches[best] == 0) continue;
      const core::Tensor x = slab(a->second, differ[0], best, here);
      Judged j{differ[0], best, std::vector<bool>(static_cast<size_t>(y.numel()))};
      if (reads_judged && taint.empty()) taint = tainted(n);
      const core::Tensor reached_by = oi < taint.size() && taint[oi].shape() == wide
                                          ? slab(taint[oi], j.axis, best, here).to(core::DType::F64)
                                          : core::Tensor();
      for (int64_t i = 0; i < y.numel(); ++i) {
        const double u = x.f64()[i], v = y.f64()[i];
        const bool reached = reached_by.defined() && std::isnan(reached_by.f64()[i]);
        j.decided[static_cast<size_t>(i)] = u == v && !std::isnan(u) && !reached;
      }
      operands.insert(o);
      wider.placed.emplace(o, std::make_pair(j.axis, j.at));
      judged.emplace(o, std::move(j));
    }
  }
  if (judged.empty()) return;
  ev.positioned = {true, wc->axis, length, position};
  for (size_t i = 0; i < workers.size(); ++i) {
    oracle::BackendRun* r = ran(ev, setup, i);
    if (!r) continue;
    worker::Worker& w = workers.at(i);
    const auto t0 = std::chrono::steady_clock::now();
    oracle::PositionRun& p = r->positioned;
    p.axis = wc->axis;
    p.length = length;
    p.position = position;
    p.samples = n0;
    const backends::ValueMap values = run_again(wc->graph, wc->inputs, r->backend, setup, w, p);
    t.positioned[setup.backends[i].name] += since(t0);
    if (!p.outcome.ok()) continue;
    for (const auto& [o, j] : judged) {
      const auto v = values.find(o);
      const auto pin = r->values.find(o);
      if (v == values.end() || pin == r->values.end() || v->second.shape() != reference.at(o).shape()) continue;
      core::Tensor mine = slab(v->second, j.axis, j.at, pin->second.shape()[j.axis]);
      const core::Tensor pinned = pin->second.to(core::DType::F64);
      if (mine.shape() != pinned.shape()) continue;
      for (int64_t e = 0; e < mine.numel(); ++e)
        if (!j.decided[static_cast<size_t>(e)]) mine.f64()[e] = pinned.f64()[e];
      p.values.emplace(o, std::move(mine));
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  const size_t from = ev.findings.size();
  for (auto& f : oracle::judge_position_relation(g, ev.runs, thresholds(setup), &inputs, wider))
    ev.findings.push_back(std::move(f));
  Lowerings lowering;  // the wider model's sessions now
  attach_lowering(ev.findings, from, lowering, setup, workers);
  t.compare += since(t0);
}

// The exchange form a session's lowering says each node was read in ("opset 12, gemm=matmul_add"): its
// "onnx opset N" and "onnx form ..." entries.
std::map<std::string, std::string> read_forms(const std::map<std::string, std::vector<std::string>>& lowering) {
  std::map<std::string, std::string> out;
  for (const auto& [node, list] : lowering)
    for (const auto& x : list) {
      const std::string what = x.rfind("onnx opset ", 0) == 0 ? x.substr(5)
                               : x.rfind("onnx form ", 0) == 0 ? x.substr(10)
                                                               : std::string();
      if (!what.empty()) out[node] += (out[node].empty() ? "" : ", ") + what;
    }
  return out;
}

// The form relation (Setup::form_relation): the model read in another exchange form (ir::Graph::form_draw) on
// every library that read it as exported ONNX (Evaluation::exchange) and ran it, every node judged (stage FR).
// Where the other draw gives every node the form it had (the same opset and spellings), nothing is run.
void form_relation(const ModelCase& m, const Setup& setup, WorkerSet& workers, const backends::ValueMap& inputs,
                   Evaluation& ev, Timing& t) {
  if (ev.exchange.empty()) return;
  ir::Graph other = m.graph;
  other.form_draw = setup.form_relation.draw;
  Lowerings lowering;  // the other form's sessions
  bool any = false;
  for (size_t i = 0; i < workers.size(); ++i) {
    oracle::BackendRun* r = ran(ev, setup, i);
    if (!r || !ev.exchange.count(r->backend)) continue;
    worker::Worker& w = workers.at(i);
    const auto t0 = std::chrono::steady_clock::now();
    oracle::FormRun& f = r->formed;
    f.pinned = read_forms(ev.exchange.at(r->backend));
    f.outcome = compile_again(other, r->backend, setup, w);
    if (f.outcome.ok()) f.other = read_forms(*lowering_of(lowering, setup, workers, r->backend));
    // Read as it was (every node in the form it had): the same run again, not made.
    if (!f.outcome.ok() || f.other != f.pinned) {
      f.ran = any = true;
      if (f.outcome.ok()) f.outcome = w.forward(inputs, true, f.values);
    }
    t.formed[setup.backends[i].name] += since(t0);
  }
  if (!any) return;
  const auto t0 = std::chrono::steady_clock::now();
  const size_t from = ev.findings.size();
  for (auto& f : oracle::judge_form_relation(m.graph, ev.runs, thresholds(setup), &inputs))
    ev.findings.push_back(std::move(f));
  attach_lowering(ev.findings, from, lowering, setup, workers);
  t.compare += since(t0);
}

}  // namespace

Mode mode_from_string(const std::string& s) {
  if (s == "infer") return Mode::Infer;
  if (s == "train") return Mode::Train;
  if (s == "both") return Mode::Both;
  throw UserError("--mode: expected infer, train or both, got '" + s + "'");
}

const char* to_string(Mode m) {
  switch (m) {
    case Mode::Infer: return "infer";
    case Mode::Train: return "train";
    case Mode::Both: return "both";
  }
  return "?";
}

double Timing::libraries() const {
  double t = 0;
  for (const auto& [b, v] : compile) t += v;
  for (const auto& [b, v] : run) t += v;
  for (const auto& [b, v] : optimized) t += v;
  for (const auto& [b, v] : batched) t += v;
  for (const auto& [b, v] : formed) t += v;
  for (const auto& [b, v] : positioned) t += v;
  return t;
}

void Timing::add(const Timing& o) {
  generate += o.generate;
  generate_ahead += o.generate_ahead;
  compare += o.compare;
  store += o.store;
  reference += o.reference;
  reduce += o.reduce;
  for (const auto& [k, v] : o.compile) compile[k] += v;
  for (const auto& [k, v] : o.run) run[k] += v;
  for (const auto& [k, v] : o.optimized) optimized[k] += v;
  for (const auto& [k, v] : o.formed) formed[k] += v;
  for (const auto& [k, v] : o.batched) batched[k] += v;
  for (const auto& [k, v] : o.positioned) positioned[k] += v;
}

namespace {

void fail(oracle::BackendRun& r, const worker::Outcome& o, oracle::Stage stage) {
  r.outcome = o;
  r.failed_at = stage;
  r.unsupported = o.status == worker::Status::Unsupported;
}

// A training step's results in a backend's run.
void take_training(oracle::BackendRun& r, backends::TrainResult&& tr) {
  r.trained = true;
  r.loss = tr.loss;
  r.loss_grad = std::move(tr.loss_grad);
  r.grads = std::move(tr.grads);
  // Both passes kept: the forward is judged on the inference pass, the loss and gradients
  // on the training pass's own forward values.
  if (r.values.empty()) r.values = std::move(tr.values);
  else r.train_values = std::move(tr.values);
}

// Whether the backend's supports() takes every node of `g` for inference: ok, or unsupported naming the first
// node it refuses.
worker::Outcome infers(const ir::Graph& g, worker::Worker& w) {
  std::vector<worker::NodeSupport> sup;
  worker::Outcome o = w.supports(g, false, sup);
  if (o.ok())
    for (const auto& s : sup)
      if (!s.ok && o.ok()) o = {worker::Status::Unsupported, "node '" + s.node + "': " + s.reason, 0, ""};
  return o;
}

// Whether backend `i` runs the model: not when a learned refusal or its supports() says no (`r` then
// holds why). `trains`: whether it trains the model too.
bool admit(const ir::Graph& g, const Setup& setup, size_t i, worker::Worker& w, oracle::BackendRun& r,
           bool& trains, Evaluation& ev) {
  r.backend = setup.backends[i].str();
  trains = false;
  if (setup.refusals) {
    if (auto hit = setup.refusals->match(r.backend, g)) {
      // The backend declared this before: it abstains without being asked again.
      fail(r,
           {worker::Status::Unsupported,
            "not sent: the backend refused it before (" + hit->refusal.str() + ", node '" + hit->nodes[0] + "')", 0,
            ""},
           oracle::Stage::Compile);
      ev.not_sent.push_back({r.backend, hit->refusal, node_ops(g, hit->nodes)});
      return false;
    }
  }
  // Training where the backend can; inference elsewhere (and always, in both mode).
  worker::Outcome o = infers(g, w);
  // A library that does not train (its Hello says so) would answer no for every node: it is not asked.
  const worker::BackendInfo* info = o.ok() && setup.mode != Mode::Infer ? w.info() : nullptr;
  if (info && info->trains) {
    std::vector<worker::NodeSupport> tsup;
    trains = w.supports(g, true, tsup).ok();
    for (const auto& s : tsup) trains &= s.ok;
  }
  if (!o.ok()) {
    fail(r, o, oracle::Stage::Compile);
    return false;
  }
  return true;
}

// The optimized run, where the campaign makes it and the backend optimizes, after a pinned forward that ran.
void run_optimized(const ModelCase& m, const Setup& setup, const std::string& name, worker::Worker& w,
                   const backends::ValueMap& inputs, oracle::BackendRun& r, Timing& t) {
  if (!setup.optimized || !r.outcome.ok() || r.unsupported || r.values.empty()) return;
  const worker::BackendInfo* info = w.info();
  if (!info || !info->optimizes) return;
  const auto t0 = std::chrono::steady_clock::now();
  worker::OptimizedResult res;
  r.optimized.ran = true;
  r.optimized.outcome = w.optimized(m.graph, backends::CompileOptions{setup.dtype, setup.threads}, inputs, res);
  r.optimized.values = std::move(res.values);
  r.optimized.lowering = std::move(res.lowering);
  t.optimized[name] += since(t0);
}

// Compile, forward and (where it trains) one training step of one model on one backend.
void run_one(const ModelCase& m, const Setup& setup, const std::string& name, worker::Worker& w, bool trains,
             const backends::ValueMap& inputs, const core::Tensor& target, oracle::BackendRun& r, Timing& t) {
  auto t0 = std::chrono::steady_clock::now();
  worker::Outcome o = w.compile(m.graph, backends::CompileOptions{setup.dtype, setup.threads});
  t.compile[name] += since(t0);
  if (!o.ok()) {
    fail(r, o, oracle::Stage::Compile);
    return;
  }
  t0 = std::chrono::steady_clock::now();
  if (setup.mode != Mode::Train || !trains) {
    o = w.forward(inputs, true, r.values);
    if (!o.ok()) fail(r, o, oracle::Stage::Forward);
  }
  if (o.ok() && trains) {
    backends::TrainRequest req{inputs, target, setup.loss, {}, setup.learning_rate};
    backends::TrainResult tr;
    o = w.train(req, tr);
    if (o.ok()) take_training(r, std::move(tr));
    else fail(r, o, oracle::Stage::Backward);
  }
  t.run[name] += since(t0);
  run_optimized(m, setup, name, w, inputs, r, t);
}

bool same_values(const std::map<std::string, core::Tensor>& a, const std::map<std::string, core::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (auto i = a.begin(), k = b.begin(); i != a.end(); ++i, ++k)
    if (i->first != k->first || i->second.type() != k->second.type() || i->second.nbytes() != k->second.nbytes() ||
        std::memcmp(i->second.raw(), k->second.raw(), i->second.nbytes()) != 0)
      return false;
  return true;
}

}  // namespace

Evaluation evaluate(const ModelCase& m, const Setup& setup, WorkerSet& workers, Timing* timing) {
  Timing local;
  Timing& t = timing ? *timing : local;
  Evaluation ev;
  const backends::ValueMap inputs = rounded(m.inputs, setup.dtype);
  const core::Tensor target = m.target.to(setup.dtype);

  auto t0 = std::chrono::steady_clock::now();
  ev.runs.push_back(reference_run(m, setup, inputs, target));
  t.reference += since(t0);

  for (size_t i = 0; i < workers.size(); ++i) {
    oracle::BackendRun r;
    bool trains = false;
    if (admit(m.graph, setup, i, workers.at(i), r, trains, ev))
      run_one(m, setup, setup.backends[i].name, workers.at(i), trains, inputs, target, r, t);
    ev.runs.push_back(std::move(r));
  }

  t0 = std::chrono::steady_clock::now();
  judge_runs(m, setup, workers, inputs, target, ev);
  t.compare += since(t0);
  if (setup.batch_relation.on) batch_relation(m, setup, workers, inputs, ev, t);
  if (setup.form_relation.on) form_relation(m, setup, workers, inputs, ev, t);
  if (setup.position_relation.on) position_relation(m, setup, workers, inputs, ev, t);
  return ev;
}

std::vector<Evaluation> evaluate_batch(const std::vector<ModelCase>& ms, const Setup& setup, WorkerSet& workers,
                                       Timing* timing) {
  Timing local;
  Timing& t = timing ? *timing : local;
  std::vector<Evaluation> evs(ms.size());
  if (ms.empty()) return evs;
  std::vector<backends::ValueMap> inputs;
  std::vector<core::Tensor> targets;
  auto t0 = std::chrono::steady_clock::now();
  for (size_t k = 0; k < ms.size(); ++k) {
    inputs.push_back(rounded(ms[k].inputs, setup.dtype));
    targets.push_back(ms[k].target.to(setup.dtype));
    evs[k].runs.push_back(reference_run(ms[k], setup, inputs[k], targets[k]));
  }
  t.reference += since(t0);
  const ir::Graph& g = ms[0].graph;
  // Weights travel per case only when some case has its own.
  bool own_weights = false;
  for (const auto& m : ms) own_weights |= !same_values(m.graph.initializers, g.initializers);

  for (size_t i = 0; i < workers.size(); ++i) {
    worker::Worker& w = workers.at(i);
    const std::string& name = setup.backends[i].name;
    oracle::BackendRun first;
    bool trains = false;
    if (!admit(g, setup, i, w, first, trains, evs[0])) {
      for (size_t k = 0; k < ms.size(); ++k) {
        if (k > 0 && !evs[0].not_sent.empty() && evs[0].not_sent.back().backend == first.backend)
          evs[k].not_sent.push_back(evs[0].not_sent.back());
        evs[k].runs.push_back(first);
      }
      continue;
    }
    worker::BatchRequest req;
    req.options = backends::CompileOptions{setup.dtype, setup.threads};
    req.forward = setup.mode != Mode::Train || !trains;
    req.train = trains;
    req.loss = setup.loss;
    req.learning_rate = setup.learning_rate;
    for (size_t k = 0; k < ms.size(); ++k)
      req.cases.push_back({own_weights ? ms[k].graph.initializers : backends::ValueMap{}, inputs[k], targets[k]});
    std::vector<worker::BatchResult> res;
    t0 = std::chrono::steady_clock::now();
    const worker::Outcome o = w.batch(g, req, res);
    t.run[name] += since(t0);
    for (size_t k = 0; k < ms.size(); ++k) {
      oracle::BackendRun r;
      r.backend = first.backend;
      if (!o.ok()) {
        // The worker died or hung in the batch: which case did it is told by running each alone.
        run_one(ms[k], setup, name, w, trains, inputs[k], targets[k], r, t);
      } else if (!res[k].outcome.ok()) {
        fail(r, res[k].outcome,
             res[k].failed_at == 0   ? oracle::Stage::Compile
             : res[k].failed_at == 1 ? oracle::Stage::Forward
                                     : oracle::Stage::Backward);
        if (res[k].ran_forward) r.values = std::move(res[k].values);
      } else {
        r.values = std::move(res[k].values);
        if (res[k].trained) take_training(r, std::move(res[k].train));
      }
      evs[k].runs.push_back(std::move(r));
    }
  }

  t0 = std::chrono::steady_clock::now();
  for (size_t k = 0; k < ms.size(); ++k) judge_runs(ms[k], setup, workers, inputs[k], targets[k], evs[k]);
  t.compare += since(t0);
  return evs;
}

bool loss_takes(const std::string& loss, const ir::Graph& g) {
  try {
    const ops::OpSpec& spec = ops::op(loss);
    const core::TensorType& pred = g.types.at(g.outputs.at(0));
    spec.infer({pred, pred}, ops::canonical_attrs(spec, {}));
    return true;
  } catch (const std::exception&) {
    return false;  // the shape rule refuses this output as a prediction (or no such loss, no output)
  }
}

std::vector<std::string> losses_for(const ir::Graph& g) {
  std::vector<std::string> out;
  if (g.outputs.empty() || !g.types.count(g.outputs[0])) return out;
  const auto input_ranges = [](const ir::Graph& graph) {
    ref::RangeMap m;
    for (const auto& in : graph.inputs) m[in.name] = data::input_range();
    return m;
  };
  std::optional<ref::RangeAnalysis> ranges;
  for (const ops::OpSpec* s : ops::catalogue().all()) {
    if (!s->is_loss || !loss_takes(s->name, g)) continue;
    bool fits = true;
    for (const ops::ValidRange& v : s->valid_ranges) {
      if (v.input != 0) continue;
      if (!ranges) ranges = ref::analyze_ranges(g, input_ranges(g));
      const auto r = ranges->ranges.find(g.outputs[0]);
      fits = fits && r != ranges->ranges.end() && r->second.lo >= v.lo && r->second.hi <= v.hi;
    }
    if (fits) out.push_back(s->name);
  }
  return out;
}

std::string choose_loss(const ir::Graph& g, core::Rng rng) {
  const std::vector<std::string> fit = losses_for(g);
  if (fit.empty()) return Setup{}.loss;
  return rng.pick(fit);
}

void complete_case(ModelCase& m, const std::string& loss, core::Rng& rng) {
  data::complete_inputs(m.graph, m.inputs, rng);
  const core::Shape& out = m.graph.types.at(m.graph.outputs[0]).shape;
  if (m.target.defined() && m.target.shape() == out) return;
  m.target = data::loss_target(loss, out, rng);
}

}  // namespace quorum::campaign
