// quorum train MODEL: a zoo model trained on Fashion-MNIST (or sine) through a library's worker;
// quorum train-diff MODEL|BUNDLE: multi-step training divergence between libraries and the float64
// reference (docs/trained.md).
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "campaign/evaluate.h"
#include "core/error.h"
#include "core/fileio.h"
#include "core/npy.h"
#include "core/rng.h"
#include "ir/json_io.h"
#include "ir/onnx_io.h"
#include "report/train_report.h"
#include "train/diff.h"
#include "train/train.h"

namespace quorum::cli {

using core::UserError;

namespace {

backends::OptimizerSpec optimizer_of(const Options& o) {
  backends::OptimizerSpec s;
  s.name = o.optimizer;
  if (s.name != "sgd" && s.name != "adam")
    throw UserError("--optimizer " + o.optimizer + ": choose sgd or adam");
  s.lr = o.given.count("learning_rate") ? o.learning_rate : s.name == "adam" ? 0.001 : 0.01;
  s.momentum = s.name == "sgd" ? o.momentum : 0;
  s.beta1 = o.beta1;
  s.beta2 = o.beta2;
  s.eps = o.adam_eps;
  s.check();
  return s;
}

std::string describe(const backends::OptimizerSpec& s) {
  std::ostringstream os;
  os << s.name << " (lr " << s.lr;
  if (s.name == "sgd") os << ", momentum " << s.momentum;
  else os << ", betas " << s.beta1 << "/" << s.beta2 << ", eps " << s.eps;
  os << ")";
  return os.str();
}

// "[#####.....]" of done/total, `width` characters inside.
std::string bar(int64_t done, int64_t total, int width = 30) {
  const int full = total > 0 ? static_cast<int>(width * done / total) : width;
  return "[" + std::string(static_cast<size_t>(full), '#') + std::string(static_cast<size_t>(width - full), '.') + "]";
}

}  // namespace

int cmd_train(const Options& o) {
  if (o.positional.size() != 1) {
    std::string all;
    for (const auto& a : gen::zoo_architectures()) all += (all.empty() ? "" : ", ") + a;
    throw UserError("train: expected one zoo MODEL (" + all + ")");
  }
  const std::string arch = o.positional[0];
  train::TrainOptions t;
  t.optimizer = optimizer_of(o);
  t.backend = o.backend.empty() ? "torch" : o.backend;
  t.epochs = static_cast<int64_t>(o.epochs);
  t.limit = static_cast<int64_t>(o.limit);
  t.threads = static_cast<int>(o.threads);
  t.limits = limits_of(o);
  t.dataset = o.given.count("dataset") ? o.dataset : "fashion-mnist";
  if (t.epochs < 1) throw UserError("--epochs must be at least 1");
  if (o.batch > 4096) throw UserError("--batch must lie in 1..4096");
  const uint64_t batch = o.batch ? o.batch : 50;
  t.seed = core::Rng::resolve_seed(o.seed);
  const std::string out = o.out.empty() ? "trained/" + arch : o.out;
  const train::Trainable model = train::zoo_trainable(arch, t.dataset, static_cast<int64_t>(batch), t.seed);
  std::cout << "train " << arch << " on " << t.dataset << " through " << t.backend << ": " << describe(t.optimizer)
            << ", batch " << batch << ", " << t.epochs << " epoch(s), seed " << t.seed << "\n"
            << std::flush;
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  const train::TrainOutcome res = train::train_model(
      model, t,
      [&](const train::Progress& p) {
        if (!tty && p.step != p.steps) return;
        std::cerr << "\r  epoch " << p.epoch << "/" << p.epochs << " " << bar(p.step, p.steps) << " " << p.step << "/"
                  << p.steps << " loss " << std::fixed << std::setprecision(4) << p.loss << std::defaultfloat
                  << (p.step == p.steps ? "\n" : "") << std::flush;
      },
      [&](const train::EpochResult& e) {
        std::cout << "epoch " << e.epoch << "/" << t.epochs << ": train loss " << std::fixed << std::setprecision(4)
                  << e.train_loss << ", test " << (t.dataset == "sine" ? "mse " : "accuracy ")
                  << std::setprecision(t.dataset == "sine" ? 6 : 2) << (t.dataset == "sine" ? e.metric : 100 * e.metric)
                  << (t.dataset == "sine" ? "" : " %") << std::setprecision(1) << " (" << e.seconds << " s)"
                  << std::defaultfloat << "\n"
                  << std::flush;
      });
  core::make_directories(out);
  ir::save_graph(out + "/model.json", res.model);
  core::write_file_atomic(out + "/model.onnx", ir::graph_to_onnx(res.model, 13));
  nlohmann::json j = {{"format", "quorum.trained"},
                      {"model", arch},
                      {"dataset", t.dataset},
                      {"library", res.library},
                      {"optimizer", describe(t.optimizer)},
                      {"batch", batch},
                      {"epochs", t.epochs},
                      {"limit", t.limit},
                      {"seed", t.seed},
                      {"metric", res.metric},
                      {"command", o.command_line}};
  for (const auto& e : res.epochs)
    j["history"].push_back({{"epoch", e.epoch}, {"train_loss", e.train_loss}, {res.metric, e.metric},
                            {"seconds", e.seconds}});
  j["test_" + res.metric] = res.epochs.back().metric;
  j["seconds"] = res.epochs.back().seconds;
  core::write_file_atomic(out + "/train.json", j.dump(1) + "\n");
  std::cout << "wrote " << out << "/model.json, model.onnx, train.json\n";
  return 0;
}

namespace {

// A train-diff bundle (DIR/case.json): its model, batches and settings, to run again.
struct Replay {
  train::Trainable t;
  std::vector<data::Batch> batches;
  train::DiffOptions o;
  int64_t step = 0;
  std::string weight;
};

Replay load_replay(const std::string& dir) {
  Replay r;
  nlohmann::json c;
  try {
    c = nlohmann::json::parse(core::read_file(dir + "/case.json"));
  } catch (const nlohmann::json::exception& e) {
    throw UserError(dir + "/case.json: not a train-diff case: " + e.what());
  }
  if (c.value("format", "") != "quorum.train-diff-case") throw UserError(dir + "/case.json: not a train-diff case");
  try {
    r.t = train::file_trainable(dir + "/model.json");
    r.t.trained = r.t.model;  // the bundle keeps the graph trained (its logits)
    r.t.loss = c.at("loss").get<std::string>();
    const auto& op = c.at("optimizer");
    r.o.optimizer.name = op.at("name").get<std::string>();
    r.o.optimizer.lr = op.at("lr").get<double>();
    r.o.optimizer.momentum = op.at("momentum").get<double>();
    r.o.optimizer.beta1 = op.at("beta1").get<double>();
    r.o.optimizer.beta2 = op.at("beta2").get<double>();
    r.o.optimizer.eps = op.at("eps").get<double>();
    r.o.steps = c.at("steps").get<int64_t>();
    r.o.factor = c.at("f32_factor").get<double>();
    r.o.backends = worker::parse_backends(c.at("backend").get<std::string>());
    r.step = c.at("flag").at("step").get<int64_t>();
    r.weight = c.at("flag").at("weight").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw UserError(dir + "/case.json: " + e.what());
  }
  for (int64_t k = 1; k <= r.o.steps; ++k)
    r.batches.push_back({core::read_npy(dir + "/batches/input-" + std::to_string(k) + ".npy"),
                         core::read_npy(dir + "/batches/target-" + std::to_string(k) + ".npy")});
  return r;
}

// DiffOptions::confirm through the campaign's evaluation: the per-node oracle on one step as a model.
train::Confirm per_node_confirm(const std::string& loss, const worker::Limits& limits, int threads) {
  return [loss, limits, threads](const std::string& spec, const ir::Graph& g, const data::Batch& b) {
    campaign::Setup setup;
    setup.backends = campaign::parse_backends(spec);
    setup.mode = campaign::Mode::Both;
    setup.loss = loss;
    setup.limits = limits;
    setup.threads = threads;
    campaign::WorkerSet workers(setup.backends, setup.limits);
    const campaign::ModelCase m{g, {{g.inputs.at(0).name, b.input}}, b.target};
    std::vector<std::string> out;
    for (const oracle::Finding& f : campaign::evaluate(m, setup, workers).findings)
      out.push_back(std::string(core::to_string(f.kind)) + " " + core::to_string(f.stage) + " at node '" + f.node +
                    "' (" + f.op + ") on " + f.backend + (f.detail.empty() ? "" : ": " + f.detail));
    return out;
  };
}

void print_summary(const train::DiffResult& r) {
  std::cout << "  " << std::left << std::setw(28) << "library" << std::setw(12) << "final loss" << std::setw(14)
            << "max drift" << "flagged\n";
  std::cout << "  " << std::setw(28) << "reference (float64)" << std::setw(12) << r.ref_loss.back() << std::setw(14)
            << 0 << "-\n";
  for (const auto& c : r.libs) {
    std::cout << "  " << std::setw(28) << c.spec;
    if (!c.failure.empty()) {
      std::cout << "failed: " << c.failure << "\n";
      continue;
    }
    std::cout << std::setw(12) << c.loss.back() << std::setw(14) << c.drift_max.back();
    if (c.step > 0)
      std::cout << "step " << c.step << ", weight " << c.weight << " (node " << c.node << "): step error "
                << c.step_error_at << " > " << c.bound_at << ", update error " << c.update_error_at;
    else
      std::cout << "no";
    std::cout << "\n";
    for (const auto& f : c.findings) std::cout << "    per-node oracle: " << f << "\n";
    if (!c.explained.empty()) {
      std::cout << "    beyond the bound but explained by the per-node oracle (no node at fault) at step(s)";
      for (int64_t k : c.explained) std::cout << " " << k;
      std::cout << "\n";
    }
  }
  std::cout << std::right;
}

}  // namespace

int cmd_train_diff(const Options& o) {
  if (o.positional.size() != 1)
    throw UserError("train-diff: expected one MODEL (a zoo model name, MODEL.json or MODEL.onnx) or a BUNDLE");
  const std::string& arg = o.positional[0];
  const worker::Limits limits = limits_of(o);
  if (std::filesystem::is_directory(arg)) {
    const Replay r = [&] {
      Replay x = load_replay(arg);
      x.o.limits = limits;
      x.o.confirm = per_node_confirm(x.t.loss, limits, 1);
      return x;
    }();
    std::cout << "replay " << arg << ": " << r.o.steps << " steps of " << r.o.backends[0].str() << " against the "
              << "reference, " << describe(r.o.optimizer) << "\n";
    const train::DiffResult res = train::train_diff(
        r.t, [&](int64_t k) { return r.batches.at(static_cast<size_t>(k)); }, r.o, {});
    print_summary(res);
    const train::LibraryCurves& c = res.libs.at(0);
    if (!c.failure.empty()) throw std::runtime_error("the backend failed: " + c.failure);
    const bool same = c.step == r.step;
    std::cout << (same ? "reproduces: " : "does not reproduce: ") << "flagged at step " << c.step << " (recorded "
              << r.step << ")\n";
    return same ? 0 : 1;
  }
  if (o.backends.empty()) throw UserError("train-diff: --backends LIST is required (e.g. torch,onednn)");
  train::DiffOptions d;
  d.backends = worker::parse_backends(o.backends);
  d.optimizer = optimizer_of(o);
  d.steps = static_cast<int64_t>(o.steps);
  d.factor = o.f32_factor;
  d.threads = static_cast<int>(o.threads);
  d.limits = limits;
  if (d.steps < 1) throw UserError("--steps must be at least 1");
  if (!(d.factor >= 1)) throw UserError("--f32_factor must be at least 1");
  if (o.batch > 4096) throw UserError("--batch must lie in 1..4096");
  const uint64_t batch = o.batch ? o.batch : 50;
  const uint64_t seed = core::Rng::resolve_seed(o.seed);
  const bool file = arg.size() > 5 && (arg.ends_with(".json") || arg.ends_with(".onnx"));
  const train::Trainable t = file ? train::file_trainable(arg)
                                  : train::zoo_trainable(arg, "fashion-mnist", static_cast<int64_t>(batch), seed);
  const train::TrainData data(t, "fashion-mnist", seed);
  d.confirm = per_node_confirm(t.loss, limits, d.threads);
  const std::string out = o.out.empty() ? "train-diff" : o.out;
  std::cout << "train-diff " << t.name << ": " << d.steps << " steps of " << describe(d.optimizer) << ", batch "
            << t.data.input[0] << ", seed " << seed << ", on " << o.backends << " and the float64 reference\n"
            << std::flush;
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  const int64_t per_epoch = data.steps_per_epoch();
  const train::DiffResult res = train::train_diff(
      t, [&](int64_t k) { return data.train_batch(k / per_epoch, k % per_epoch); }, d,
      [&](int64_t k) {
        if (tty || k == d.steps) std::cerr << "\r  " << bar(k, d.steps) << " step " << k << "/" << d.steps
                                           << (k == d.steps ? "\n" : "") << std::flush;
      });
  train::write_diff(out, t, [&](int64_t k) { return data.train_batch(k / per_epoch, k % per_epoch); }, d, res);
  core::write_file_atomic(out + "/report.html", report::train_diff_html(res, d));
  print_summary(res);
  for (const auto& c : res.libs)
    if (c.step > 0)
      std::cout << "bundle: " << out << "/" << train::bundle_name(c.spec) << " (replay: quorum train-diff BUNDLE)\n";
  std::cout << "wrote " << out << "/curves.json, report.html\n";
  return 0;
}

}  // namespace quorum::cli
