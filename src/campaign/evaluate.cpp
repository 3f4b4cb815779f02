// Running one model on every backend and judging it.
#include "campaign/evaluate.h"

#include <chrono>
#include <sstream>

#include "core/error.h"
#include "data/values.h"
#include "ops/materialize.h"
#include "ops/registry.h"
#include "ref/interpreter.h"

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

void Timing::add(const Timing& o) {
  generate += o.generate;
  compare += o.compare;
  store += o.store;
  reference += o.reference;
  reduce += o.reduce;
  for (const auto& [k, v] : o.compile) compile[k] += v;
  for (const auto& [k, v] : o.run) run[k] += v;
}

Evaluation evaluate(const ModelCase& m, const Setup& setup, WorkerSet& workers, Timing* timing) {
  Timing local;
  Timing& t = timing ? *timing : local;
  Evaluation ev;
  const bool want_train = setup.mode != Mode::Infer;
  const bool want_forward = setup.mode != Mode::Train;
  const backends::ValueMap inputs = rounded(m.inputs, setup.dtype);
  const core::Tensor target = m.target.to(setup.dtype);

  // The reference: float64 on the same rounded inputs and weights, in-process.
  auto t0 = std::chrono::steady_clock::now();
  {
    oracle::BackendRun r;
    r.backend = "ref";
    r.is_reference = true;
    ir::Graph g = m.graph;
    for (auto& [name, w] : g.initializers) w = w.to(setup.dtype).to(core::DType::F64);
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
    ev.runs.push_back(std::move(r));
  }
  t.reference += since(t0);

  for (size_t i = 0; i < workers.size(); ++i) {
    worker::Worker& w = workers.at(i);
    const std::string& name = setup.backends[i].name;
    oracle::BackendRun r;
    r.backend = setup.backends[i].str();
    auto fail = [&](const worker::Outcome& o, oracle::Stage stage) {
      r.outcome = o;
      r.failed_at = stage;
      r.unsupported = o.status == worker::Status::Unsupported;
    };
    if (setup.refusals) {
      if (auto hit = setup.refusals->match(r.backend, m.graph)) {
        // The backend declared this before: it abstains without being asked again.
        fail({worker::Status::Unsupported,
              "not sent: the backend refused it before (" + hit->refusal.str() + ", node '" + hit->nodes[0] + "')",
              0, ""},
             oracle::Stage::Compile);
        ev.not_sent.push_back({r.backend, hit->refusal, node_ops(m.graph, hit->nodes)});
        ev.runs.push_back(std::move(r));
        continue;
      }
    }
    // Training where the backend can; inference elsewhere (and always, in both mode).
    std::vector<worker::NodeSupport> sup;
    bool trains = false;
    worker::Outcome o = w.supports(m.graph, false, sup);
    if (o.ok()) {
      for (const auto& s : sup)
        if (!s.ok && o.ok()) o = {worker::Status::Unsupported, "node '" + s.node + "': " + s.reason, 0, ""};
    }
    if (o.ok() && want_train) {
      std::vector<worker::NodeSupport> tsup;
      trains = w.supports(m.graph, true, tsup).ok();
      for (const auto& s : tsup) trains &= s.ok;
    }
    if (!o.ok()) {
      fail(o, oracle::Stage::Compile);
      ev.runs.push_back(std::move(r));
      continue;
    }
    t0 = std::chrono::steady_clock::now();
    o = w.compile(m.graph, backends::CompileOptions{setup.dtype, setup.threads});
    t.compile[name] += since(t0);
    if (!o.ok()) {
      fail(o, oracle::Stage::Compile);
      ev.runs.push_back(std::move(r));
      continue;
    }
    t0 = std::chrono::steady_clock::now();
    if (want_forward || !trains) {
      o = w.forward(inputs, true, r.values);
      if (!o.ok()) fail(o, oracle::Stage::Forward);
    }
    if (o.ok() && trains) {
      backends::TrainRequest req{inputs, target, setup.loss, {}, setup.learning_rate};
      backends::TrainResult tr;
      o = w.train(req, tr);
      if (o.ok()) {
        r.trained = true;
        r.loss = tr.loss;
        r.loss_grad = std::move(tr.loss_grad);
        r.grads = std::move(tr.grads);
        // Both passes kept: the forward is judged on the inference pass, the loss and gradients
        // on the training pass's own forward values.
        if (r.values.empty()) r.values = std::move(tr.values);
        else r.train_values = std::move(tr.values);
      } else {
        fail(o, oracle::Stage::Backward);
      }
    }
    t.run[name] += since(t0);
    ev.runs.push_back(std::move(r));
  }

  t0 = std::chrono::steady_clock::now();
  oracle::Thresholds th = setup.thresholds;
  th.loss_op = setup.loss;
  th.dtype = setup.dtype;
  ev.findings = oracle::judge(m.graph, ev.runs, th, &inputs, &target);
  // The library operations behind each finding's node, asked once per backend with findings.
  std::map<std::string, std::map<std::string, std::vector<std::string>>> lowering;
  for (auto& f : ev.findings) {
    if (f.node.empty()) continue;
    for (size_t i = 0; i < workers.size(); ++i) {
      if (setup.backends[i].str() != f.backend) continue;
      auto it = lowering.find(f.backend);
      if (it == lowering.end()) {
        std::map<std::string, std::vector<std::string>> ops;
        if (!workers.at(i).lowering(ops).ok()) ops.clear();
        it = lowering.emplace(f.backend, std::move(ops)).first;
      }
      if (auto n = it->second.find(f.node); n != it->second.end()) f.lowering = n->second;
    }
  }
  if (setup.known)
    for (auto& f : ev.findings)
      if (const oracle::KnownEntry* e = setup.known->match(f)) f.known = e->id;
  t.compare += since(t0);
  return ev;
}

void complete_case(ModelCase& m, const std::string& loss, core::Rng& rng) {
  data::complete_inputs(m.graph, m.inputs, rng);
  const core::Shape& out = m.graph.types.at(m.graph.outputs[0]).shape;
  if (m.target.defined() && m.target.shape() == out) return;
  m.target = data::loss_target(loss, out, rng);
}

}  // namespace quorum::campaign
