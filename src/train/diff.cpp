// quorum train-diff: multi-step training divergence (diff.h).
#include "train/diff.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backends/ref/ref_backend.h"
#include "core/error.h"
#include "core/fileio.h"
#include "core/npy.h"
#include "ir/edit.h"
#include "ir/json_io.h"

namespace quorum::train {

namespace {

using backends::ValueMap;

double norm(const core::Tensor& a) {
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += a.get(i) * a.get(i);
  return std::sqrt(s);
}

double diff_norm(const core::Tensor& a, const core::Tensor& b) {
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += (a.get(i) - b.get(i)) * (a.get(i) - b.get(i));
  return std::sqrt(s);
}

// ||a - ref|| / ||ref|| (the absolute distance where the reference is all zero).
double rel(const core::Tensor& a, const core::Tensor& ref) {
  const double n = norm(ref), d = diff_norm(a, ref);
  return n > 0 ? d / n : d;
}

// The least step error float32 explains: a float32 gradient summed over n terms is off by about
// sqrt(n) 2^-24 relative; 1e-5 is that for n up to ~3e4 (the flag's bound is --f32_factor times this).
constexpr double kStepFloor = 1e-5;

// An update error above this: the library's update does not follow its own gradients (the optimizer).
constexpr double kOptimizerFault = 1e-3;

// a / b, or a where b is 0 (no update: the error is absolute).
double ratio(double a, double b) { return b > 0 ? a / b : a; }

struct Lib {
  worker::BackendSpec spec;
  std::unique_ptr<worker::Worker> w;
  ValueMap prev;  // weights before the next step
  std::unique_ptr<backends::Optimizer> shadow;  // the reference arithmetic on the library's gradients
  bool alive = true;
};

}  // namespace

DiffResult train_diff(const Trainable& t, const BatchOf& batch_of, const DiffOptions& o,
                      const std::function<void(int64_t)>& progress) {
  o.optimizer.check();
  if (o.steps < 1) throw core::UserError("--steps must be at least 1");
  if (o.backends.empty()) throw core::UserError("--backends: name at least one training backend");
  DiffResult r;
  r.model = t.name;
  for (const auto& n : t.trained.nodes)
    for (size_t i = ir::data_input_count(n); i < n.inputs.size(); ++i)
      if (t.trained.initializers.count(n.inputs[i])) r.node_of.emplace(n.inputs[i], n.name);
  const ValueMap initial = [&] {
    ValueMap m;
    for (const auto& [name, w] : t.trained.initializers) m.emplace(name, w.to(core::DType::F64));
    return m;
  }();

  std::vector<Lib> libs(o.backends.size());
  for (size_t i = 0; i < o.backends.size(); ++i) {
    Lib& l = libs[i];
    l.spec = o.backends[i];
    LibraryCurves c;
    c.spec = l.spec.str();
    l.w = std::make_unique<worker::Worker>(l.spec.name, l.spec.options, o.limits);
    worker::BackendInfo info;
    worker::Outcome out = l.w->hello(info);
    std::vector<worker::NodeSupport> sup;
    if (out.ok()) c.library = info.name + " (" + info.version + ")";
    if (out.ok() && !info.trains) out = {worker::Status::Unsupported, "the backend does not train", 0, ""};
    if (out.ok()) out = l.w->supports(t.trained, true, sup);
    for (const auto& n : sup)
      if (out.ok() && !n.ok) out = {worker::Status::Unsupported, "node '" + n.node + "': " + n.reason, 0, ""};
    if (out.ok()) out = l.w->compile(t.trained, {core::DType::F32, o.threads});
    if (!out.ok()) {
      c.failure = out.str();
      l.alive = false;
    }
    l.prev = initial;
    l.shadow = std::make_unique<backends::Optimizer>(o.optimizer);
    r.libs.push_back(std::move(c));
  }

  std::unique_ptr<backends::Session> ref = backends::make_ref_session(t.trained);
  std::unique_ptr<backends::Session> twin = backends::make_ref_session(t.trained);
  std::unique_ptr<backends::Session> probe = backends::make_ref_session(t.trained);  // at a library's weights
  ValueMap twin_prev = initial;
  const std::string in_name = t.trained.inputs.at(0).name;
  for (int64_t k = 0; k < o.steps; ++k) {
    const data::Batch b = batch_of(k);
    backends::TrainRequest req;
    req.inputs = {{in_name, b.input}};
    req.target = b.target;
    req.loss = t.loss;
    const backends::StepResult rs = ref->optimizer_step(req, o.optimizer);
    const ValueMap ref_w = ref->weights();
    r.ref_loss.push_back(rs.loss);
    const backends::StepResult ts = twin->optimizer_step(req, o.optimizer);
    const ValueMap twin_exact = twin->weights();
    ValueMap twin_w = twin_exact;
    for (auto& [name, w] : twin_w) w = w.to(core::DType::F32).to(core::DType::F64);
    twin->set_weights(twin_w);
    r.twin_loss.push_back(ts.loss);
    for (const auto& [name, w] : ref_w) {
      r.twin_drift[name].push_back(rel(twin_w.at(name), w));
      r.twin_step_error[name].push_back(ratio(diff_norm(twin_w.at(name), twin_exact.at(name)),
                                              diff_norm(twin_exact.at(name), twin_prev.at(name))));
    }
    twin_prev = twin_w;

    for (size_t i = 0; i < libs.size(); ++i) {
      Lib& l = libs[i];
      LibraryCurves& c = r.libs[i];
      if (!l.alive) continue;
      worker::StepsRequest sr;
      sr.optimizer = o.optimizer;
      sr.loss = t.loss;
      sr.detail = true;
      sr.steps.emplace_back(req.inputs, req.target);
      std::vector<worker::StepOutput> out;
      const worker::Outcome so = l.w->steps(sr, out);
      if (!so.ok()) {
        c.failure = "step " + std::to_string(k + 1) + ": " + so.str();
        l.alive = false;
        continue;
      }
      const worker::StepOutput& s = out.at(0);
      c.loss.push_back(s.loss);
      // The reference's step from the library's own weights and optimizer state: its float64
      // gradients there, the reference arithmetic on the shadow state (which follows the library's
      // gradients, so it is the library's state up to rounding).
      probe->set_weights(l.prev);
      const backends::TrainResult own = probe->train_step(req);
      backends::Optimizer phi = *l.shadow;
      double dmax = 0;
      std::string worst;
      double worst_ratio = 0;
      for (const auto& [name, w] : ref_w) {
        const core::Tensor& lw = s.weights.at(name);
        const core::Tensor before = l.prev.at(name).to(core::DType::F64);
        const double d = rel(lw, w);
        c.drift[name].push_back(d);
        c.grad[name].push_back(rel(s.grads.at(name), rs.grads.at(name)));
        c.grad_own[name].push_back(rel(s.grads.at(name), own.grads.at(name)));
        core::Tensor ref_step = before;
        phi.step(name, ref_step, own.grads.at(name));
        const double e = ratio(diff_norm(lw, ref_step), diff_norm(ref_step, before));
        c.step_error[name].push_back(e);
        // The shadow: the reference's arithmetic (float64) on the library's own gradients.
        core::Tensor pred = before;
        l.shadow->step(name, pred, s.grads.at(name));
        c.update_error[name].push_back(ratio(diff_norm(lw, pred), diff_norm(pred, before)));
        dmax = std::max(dmax, d);
        const double bound = o.factor * std::max(r.twin_step_error[name].back(), kStepFloor);
        if (c.step == 0 && e > bound && e / bound > worst_ratio) {
          worst_ratio = e / bound;
          worst = name;
        }
      }
      c.drift_max.push_back(dmax);
      if (c.step == 0 && !worst.empty() && c.update_error[worst].back() <= kOptimizerFault && o.confirm) {
        c.findings = o.confirm(c.spec, ir::with_weights(t.trained, l.prev), b);
        if (c.findings.empty()) {
          c.explained.push_back(k + 1);
          worst.clear();
        }
      }
      if (c.step == 0 && !worst.empty()) {
        c.step = k + 1;
        c.weight = worst;
        c.node = r.node_of.count(worst) ? r.node_of.at(worst) : "";
        c.drift_at = c.drift[worst].back();
        c.step_error_at = c.step_error[worst].back();
        c.bound_at = o.factor * std::max(r.twin_step_error[worst].back(), kStepFloor);
        c.grad_own_at = c.grad_own[worst].back();
        c.update_error_at = c.update_error[worst].back();
        c.before = l.prev;
        c.after = s.weights;
        c.grads = s.grads;
      }
      l.prev = s.weights;
    }
    if (progress) progress(k + 1);
  }
  return r;
}

namespace {

nlohmann::json spec_json(const backends::OptimizerSpec& s) {
  return {{"name", s.name}, {"lr", s.lr}, {"momentum", s.momentum}, {"beta1", s.beta1}, {"beta2", s.beta2},
          {"eps", s.eps}};
}

std::string safe(const std::string& s) {
  std::string out;
  for (char ch : s) out += std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' ? ch : '-';
  return out;
}

void write_values(const std::string& dir, const ValueMap& m) {
  core::make_directories(dir);
  for (const auto& [name, t] : m) core::write_npy(dir + "/" + safe(name) + ".npy", t);
}

}  // namespace

std::string bundle_name(const std::string& spec) { return safe(spec); }

void write_diff(const std::string& dir, const Trainable& t, const BatchOf& batch_of, const DiffOptions& o,
                const DiffResult& r) {
  core::make_directories(dir);
  nlohmann::json j;
  j["format"] = "quorum.train-diff";
  j["model"] = r.model;
  j["optimizer"] = spec_json(o.optimizer);
  j["loss"] = t.loss;
  j["steps"] = o.steps;
  j["f32_factor"] = o.factor;
  j["reference"] = {{"loss", r.ref_loss}};
  j["twin"] = {{"loss", r.twin_loss}, {"drift", r.twin_drift}, {"step_error", r.twin_step_error}};
  j["node_of"] = r.node_of;
  for (const auto& c : r.libs) {
    nlohmann::json l = {{"spec", c.spec},   {"library", c.library}, {"failure", c.failure},
                        {"loss", c.loss},   {"drift", c.drift},     {"grad", c.grad},
                        {"update_error", c.update_error},           {"drift_max", c.drift_max},
                        {"step_error", c.step_error},               {"grad_own", c.grad_own},
                        {"explained", c.explained},
                        {"flag_step", c.step}};
    if (c.step > 0)
      l["flag"] = {{"step", c.step},
                   {"weight", c.weight},
                   {"node", c.node},
                   {"step_error", c.step_error_at},
                   {"bound", c.bound_at},
                   {"drift", c.drift_at},
                   {"gradient_distance_at_own_weights", c.grad_own_at},
                   {"update_error", c.update_error_at},
                   {"bundle", safe(c.spec)}};
    j["libraries"].push_back(l);
  }
  core::write_file_atomic(dir + "/curves.json", j.dump(1) + "\n");

  for (const auto& c : r.libs) {
    if (c.step == 0) continue;
    const std::string b = dir + "/" + safe(c.spec);
    core::make_directories(b + "/batches");
    ir::save_graph(b + "/model.json", t.trained);
    for (int64_t k = 0; k < c.step; ++k) {
      const data::Batch batch = batch_of(k);
      core::write_npy(b + "/batches/input-" + std::to_string(k + 1) + ".npy", batch.input);
      core::write_npy(b + "/batches/target-" + std::to_string(k + 1) + ".npy", batch.target);
    }
    // The reduced case: the one step. The reference's gradients at the library's own weights before
    // it tell a wrong gradient from a wrong update.
    write_values(b + "/reduced/weights_before", c.before);
    write_values(b + "/reduced/weights_after", c.after);
    write_values(b + "/reduced/grads", c.grads);
    const data::Batch batch = batch_of(c.step - 1);
    // The step as a model of its own: the graph at the library's weights before it, its batch and
    // target, for `quorum run` to judge node by node (docs/trained.md).
    const ir::Graph at = ir::with_weights(t.trained, c.before);
    ir::save_graph(b + "/reduced/model.json", at);
    core::write_npy(b + "/reduced/" + t.trained.inputs.at(0).name + ".npy", batch.input);
    core::write_npy(b + "/reduced/target.npy", batch.target);
    std::unique_ptr<backends::Session> ref = backends::make_ref_session(at);
    backends::TrainRequest req;
    req.inputs = {{t.trained.inputs.at(0).name, batch.input}};
    req.target = batch.target;
    req.loss = t.loss;
    const backends::TrainResult tr = ref->train_step(req);
    ValueMap ref_grads;
    double worst_grad = 0;
    for (const auto& [name, g] : c.grads) {
      ref_grads.emplace(name, tr.grads.at(name));
      worst_grad = std::max(worst_grad, rel(g, tr.grads.at(name)));
    }
    write_values(b + "/reduced/reference_grads", ref_grads);
    nlohmann::json cj = {
        {"format", "quorum.train-diff-case"},
        {"backend", c.spec},
        {"library", c.library},
        {"model", "model.json"},
        {"loss", t.loss},
        {"optimizer", spec_json(o.optimizer)},
        {"steps", c.step},
        {"f32_factor", o.factor},
        {"flag",
         {{"step", c.step},
          {"weight", c.weight},
          {"node", c.node},
          {"step_error", c.step_error_at},
          {"bound", c.bound_at},
          {"drift", c.drift_at},
          {"update_error", c.update_error_at}}},
        {"reduced",
         {{"step", c.step},
          {"run", "quorum run reduced/model.json --inputs reduced --target reduced/target.npy --loss " + t.loss +
                      " --backends " + c.spec},
          {"gradient_distance_at_own_weights", worst_grad},
          {"update_error", c.update_error_at},
          {"findings", c.findings},
          {"verdict", c.update_error_at > kOptimizerFault
                          ? "the optimizer's update differs from the reference arithmetic on the library's own "
                            "gradients"
                          : "the update follows the library's gradients: the step's gradients differ (findings: the "
                            "per-node oracle's)"}}}};
    core::write_file_atomic(b + "/case.json", cj.dump(1) + "\n");
  }
}

}  // namespace quorum::train
