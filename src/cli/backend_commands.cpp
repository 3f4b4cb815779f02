// quorum backends / quorum worker / quorum run --backends.
#include <unistd.h>

#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "backends/backend.h"
#include "campaign/evaluate.h"
#include "cli/commands.h"
#include "core/error.h"
#include "ir/build.h"
#include "ops/registry.h"
#include "oracle/compare.h"
#include "worker/supervisor.h"

namespace quorum::cli {

using core::UserError;

namespace {

worker::Limits limits_of(const Options& o) {
  return worker::Limits{static_cast<double>(o.timeout), o.memory};
}

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
    int supported = 0;
    std::vector<std::pair<std::string, std::string>> refused;
    for (const ops::OpSpec* spec : all) {
      std::string reason;
      bool ok = false;
      for (uint64_t k = 0; k < 4 && !ok; ++k) {
        core::Rng rng(k + 1);
        const ir::SingleNode sn = ir::single_node_graph(*spec, spec->sample(rng), rng);
        std::vector<worker::NodeSupport> s;
        const worker::Outcome out = w.supports(sn.graph, false, s);
        if (!out.ok()) {
          reason = out.str();
          break;
        }
        ok = s.at(0).ok;
        if (!ok && reason.empty()) reason = s.at(0).reason;
      }
      if (ok) ++supported;
      else refused.emplace_back(spec->name, reason);
    }
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

int run_on_backends(const ir::Graph& g, const ref::ValueMap& inputs, const Options& o) {
  const auto specs = campaign::parse_backends(o.backends);
  const core::DType dtype = core::dtype_from_string(o.dtype);
  if (dtype == core::DType::I64) throw UserError("--dtype: libraries compute in float32 or float64");
  const ref::ValueMap want = backends::reference_forward(g, inputs, dtype);
  // Every library receives the inputs already in its dtype, exactly the values the reference used.
  backends::ValueMap typed;
  for (const auto& [name, t] : inputs) typed.emplace(name, t.to(dtype));
  std::cout << "reference: float64 on inputs and weights rounded to " << core::to_string(dtype) << "\n";
  struct Column {
    std::string label;
    worker::Outcome outcome;
    ref::ValueMap values;
  };
  std::vector<Column> cols;
  for (const auto& s : specs) {
    Column c;
    worker::Worker w(s.name, s.options, limits_of(o));
    worker::BackendInfo info;
    c.label = s.name;
    c.outcome = w.hello(info);
    if (c.outcome.ok()) std::cout << "backend " << s.name << ": " << info.version << "\n";
    std::vector<worker::NodeSupport> sup;
    if (c.outcome.ok()) c.outcome = w.supports(g, false, sup);
    for (const auto& ns : sup)
      if (c.outcome.ok() && !ns.ok) c.outcome = {worker::Status::Unsupported, "node '" + ns.node + "': " + ns.reason, 0, ""};
    if (c.outcome.ok()) c.outcome = w.compile(g, backends::CompileOptions{dtype, static_cast<int>(o.threads)});
    if (c.outcome.ok()) c.outcome = w.forward(typed, true, c.values);
    cols.push_back(std::move(c));
  }
  std::cout << "per node: max abs / max rel difference from the reference ('!' = beyond the operator's tolerance)\n  "
            << std::left << std::setw(18) << "node" << std::setw(16) << "op";
  for (const auto& c : cols) std::cout << std::setw(24) << c.label;
  std::cout << "\n";
  std::vector<int> beyond(cols.size(), 0);
  for (const auto& n : g.nodes) {
    const ops::OpSpec& spec = ops::op(n.op);
    std::vector<core::TensorType> in_types;
    for (size_t i = 0; i < ir::data_input_count(n); ++i) in_types.push_back(g.types.at(n.inputs[i]));
    const ops::Tolerance tol = spec.tolerance(dtype, in_types, n.attrs);
    for (const auto& out : n.outputs) {
      std::cout << "  " << std::setw(18) << out << std::setw(16) << n.op;
      for (size_t i = 0; i < cols.size(); ++i) {
        std::string cell = "-";
        auto it = cols[i].values.find(out);
        if (cols[i].outcome.ok() && it != cols[i].values.end()) {
          const oracle::Diff d = oracle::compare(it->second, want.at(out), tol);
          cell = d.shape_mismatch ? "shape mismatch" : sci(d.max_abs) + " / " + sci(d.max_rel);
          if (d.nonfinite_mismatch) cell += " nan/inf";
          if (!d.ok) {
            cell += " !";
            ++beyond[i];
          }
        }
        std::cout << std::setw(24) << cell;
      }
      std::cout << "\n";
    }
  }
  std::cout << "outcomes:\n";
  for (size_t i = 0; i < cols.size(); ++i) {
    std::cout << "  " << cols[i].label << ": ";
    if (!cols[i].outcome.ok()) std::cout << cols[i].outcome.str() << "\n";
    else if (beyond[i]) std::cout << beyond[i] << " node outputs beyond tolerance\n";
    else std::cout << "ok, every node within tolerance\n";
  }
  return 0;
}

}  // namespace quorum::cli
