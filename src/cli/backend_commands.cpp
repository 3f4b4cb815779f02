// quorum backends / quorum worker / quorum run --backends.
#include <unistd.h>

#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "backends/backend.h"
#include "campaign/coverage.h"
#include "campaign/evaluate.h"
#include "cli/commands.h"
#include "core/error.h"
#include "ir/build.h"
#include "ops/registry.h"
#include "oracle/compare.h"
#include "worker/supervisor.h"

namespace quorum::cli {

using core::UserError;

worker::Limits limits_of(const Options& o) {
  return worker::Limits{static_cast<double>(o.timeout), o.memory, o.worker_models, o.worker_rss};
}

namespace {

std::string sci(double v) {
  std::ostringstream os;
  os << std::scientific << std::setprecision(1) << v;
  return os.str();
}

}  // namespace

int cmd_backends(const Options& o) {
  const auto all = ops::catalogue().all();
  std::cout << std::left << std::setw(10) << "backend" << std::setw(8) << "trains" << std::setw(12) << "operators"
            << "version\n";
  for (const auto& name : worker::available_backends()) {
    worker::Worker w(name, {}, limits_of(o));
    worker::BackendInfo info;
    const worker::Outcome hello = w.hello(info);
    if (!hello.ok()) {
      std::cout << std::setw(10) << name << "unavailable: " << hello.str() << "\n";
      continue;
    }
    // An operator counts as supported when the backend accepts any of a few cases drawn from its domain.
    std::vector<std::pair<std::string, std::string>> refused;
    const size_t supported = campaign::mapped_operators(w, &refused).size();
    std::cout << std::setw(10) << info.name << std::setw(8) << (info.trains ? "yes" : "no") << std::setw(12)
              << (std::to_string(supported) + "/" + std::to_string(all.size())) << info.version << "\n";
    if (o.verbose)
      for (const auto& [op, why] : refused) std::cout << "    no " << std::setw(22) << op << " " << why << "\n";
  }
  return 0;
}

int cmd_worker(const Options& o) {
  if (o.backend.empty()) throw UserError("worker: --backend NAME is required");
  const std::string path = worker::worker_path(o.backend);
  std::vector<std::string> args{path};
  args.insert(args.end(), o.positional.begin(), o.positional.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(path.c_str(), argv.data());
  throw UserError(path + ": cannot execute the worker");
}

int run_on_backends(const ir::Graph& g, const ref::ValueMap& inputs, const core::Tensor* target, const Options& o) {
  campaign::Setup setup;
  setup.backends = campaign::parse_backends(o.backends);
  setup.dtype = compute_dtype(o);
  setup.threads = static_cast<int>(o.threads);
  setup.limits = limits_of(o);
  setup.mode = target ? campaign::Mode::Both : campaign::Mode::Infer;
  if (target) setup.loss = o.loss;
  campaign::ModelCase m{g, inputs, target ? *target : core::Tensor()};
  campaign::WorkerSet workers(setup.backends, setup.limits);
  for (size_t i = 0; i < workers.size(); ++i) {
    worker::BackendInfo info;
    const worker::Outcome hello = workers.at(i).hello(info);
    std::cout << "backend " << setup.backends[i].str() << ": " << (hello.ok() ? info.version : hello.str()) << "\n";
  }
  std::cout << "reference: float64 on inputs and weights rounded to " << core::to_string(setup.dtype) << "\n";
  const campaign::Evaluation ev = campaign::evaluate(m, setup, workers);
  const oracle::BackendRun& want = ev.runs.at(0);
  const std::vector<oracle::BackendRun> libs(ev.runs.begin() + 1, ev.runs.end());

  // One table: per value, each library's max abs / max rel difference from the reference.
  auto table = [&](const std::string& title, const std::vector<std::pair<std::string, const ir::Node*>>& rows,
                   bool grads) {
    std::cout << title << " ('!' = beyond the operator's tolerance)\n  " << std::left << std::setw(20) << "value"
              << std::setw(16) << "op";
    for (const auto& r : libs) std::cout << std::setw(24) << r.backend;
    std::cout << "\n";
    std::vector<int> beyond(libs.size(), 0);
    for (const auto& [value, n] : rows) {
      std::vector<core::TensorType> in_types;
      for (size_t i = 0; i < ir::data_input_count(*n); ++i) in_types.push_back(g.types.at(n->inputs[i]));
      ops::Tolerance tol = ops::op(n->op).tolerance(setup.dtype, in_types, n->attrs);
      if (grads) tol = ops::backward_tolerance(tol);
      const backends::ValueMap& ref_map = grads ? want.grads : want.values;
      std::cout << "  " << std::setw(20) << value << std::setw(16) << n->op;
      for (size_t i = 0; i < libs.size(); ++i) {
        const backends::ValueMap& mine = grads ? libs[i].grads : libs[i].values;
        std::string cell = "-";
        auto it = mine.find(value);
        if (it != mine.end() && ref_map.count(value)) {
          const oracle::Diff d = oracle::compare(it->second, ref_map.at(value), tol);
          cell = d.shape_mismatch ? "shape mismatch" : sci(d.max_abs) + " / " + sci(d.max_rel);
          if (d.nonfinite_mismatch) cell += " nan/inf";
          if (!d.ok) cell += " !";
        }
        std::cout << std::setw(24) << cell;
      }
      std::cout << "\n";
    }
  };
  std::vector<std::pair<std::string, const ir::Node*>> rows;
  for (const auto& n : g.nodes)
    for (const auto& out : n.outputs) rows.emplace_back(out, &n);
  table("forward: max abs / max rel difference from the reference", rows, false);
  if (target) {
    std::cout << "loss (" << setup.loss << "): reference " << std::setprecision(8) << want.loss;
    for (const auto& r : libs)
      if (r.trained) std::cout << ", " << r.backend << " " << r.loss;
    std::cout << "\n";
    std::vector<std::pair<std::string, const ir::Node*>> grad_rows;
    for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it) {
      for (const auto& out : it->outputs) grad_rows.emplace_back(out, &*it);
      for (size_t i = ir::data_input_count(*it); i < it->inputs.size(); ++i)
        grad_rows.emplace_back(it->inputs[i], &*it);
    }
    table("gradients of the loss: max abs / max rel difference from the reference", grad_rows, true);
  }
  std::cout << "outcomes:\n";
  for (const auto& r : libs)
    std::cout << "  " << r.backend << ": " << (r.outcome.ok() ? (r.trained ? "ok (trained)" : "ok") : r.outcome.str())
              << "\n";
  if (ev.findings.empty()) {
    std::cout << "findings: none\n";
  } else {
    std::cout << "findings:\n";
    for (const auto& f : ev.findings) std::cout << "  " << f.signature() << "\n    " << f.detail << "\n";
  }
  return 0;
}

}  // namespace quorum::cli
