// quorum search --method ga|diverge|random --model MODEL.json|ONNX|BUNDLE_DIR --backends ... --budget N:
// a search (src/search/) from one model's inputs and weights, on the backends' workers; the
// failure-inducing case is written as a bundle.
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "campaign/bundle.h"
#include "campaign/search_case.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/npy.h"
#include "ir/json_io.h"

namespace quorum::cli {

namespace fs = std::filesystem;
using core::UserError;

namespace {

// The model to search from: a bundle directory (its model, inputs and target) or a model file.
campaign::ModelCase load_case(const std::string& path, const std::string& loss, core::Rng& rng) {
  campaign::ModelCase m;
  if (fs::is_directory(path)) {
    const fs::path dir(path);
    if (!fs::exists(dir / "model.json")) throw UserError(path + ": not a bundle (no model.json)");
    m.graph = ir::load_graph((dir / "model.json").string());
    for (const auto& in : m.graph.inputs) {
      const fs::path npy = dir / "inputs" / (campaign::bundle_file_name(in.name) + ".npy");
      if (fs::exists(npy)) m.inputs.emplace(in.name, core::read_npy(npy.string()).to(core::DType::F64));
    }
    if (fs::exists(dir / "target.npy")) m.target = core::read_npy((dir / "target.npy").string());
  } else {
    if (!fs::exists(path)) throw UserError(path + ": no such model file or bundle directory");
    m.graph = ir::load_graph(path);
  }
  campaign::complete_case(m, loss, rng);
  return m;
}

std::string general(double v) {
  std::ostringstream os;
  os << std::setprecision(6) << v;
  return os.str();
}

}  // namespace

void print_met(const std::vector<search::Met>& met, const std::string& stop_at) {
  for (const auto& m : met)
    std::cout << "met: " << m.name() << " at evaluation " << m.evaluation
              << " (gone past: --stop_at " << stop_at << ")\n";
}

int cmd_search(const Options& o) {
  if (o.method == "grist") return cmd_grist(o);  // gradient-guided, on the reference's VJPs: grist_command.cpp
  const campaign::SearchOptions so = search_options_of(o, o.method, o.budget);  // an unknown method first
  if (so.method == campaign::SearchMethod::None) throw UserError("search: --method ga, diverge, grist or random");
  if (o.model.empty()) throw UserError("search: --model MODEL.json|MODEL.onnx|BUNDLE_DIR is required");
  if (o.backends.empty()) throw UserError("search: --backends is required (e.g. --backends torch,onednn)");
  const campaign::Setup setup = setup_of(o);
  const uint64_t seed = core::Rng::resolve_seed(o.seed);
  core::Rng rng(seed);
  core::Rng data_rng = rng.derive("case");
  const campaign::ModelCase m = load_case(o.model, setup.loss, data_rng);
  const search::GaParams& p = so.ga;
  const int64_t budget = p.budget > 0 ? p.budget : p.population + (p.max_ite - 1) * (p.population - p.elite);
  std::cout << "search " << campaign::to_string(so.method) << " on " << o.model << ": level "
            << search::to_string(p.level) << ", fitness "
            << (so.method == campaign::SearchMethod::Diverge ? "diverge" : search::to_string(p.fitness))
            << ", population " << p.population << ", elite " << p.elite << ", crossover " << p.crossover
            << ", mutation " << p.mutation << " (" << (p.float_moves ? "floats" : "audee") << " operators), max_ite "
            << p.max_ite << ", budget " << budget
            << " evaluations; seed " << seed << "\n";
  worker::Limits limits = setup.limits;
  campaign::WorkerSet workers(setup.backends, limits);
  core::Rng search_rng = rng.derive("search");
  campaign::Timing t;
  const campaign::Searched s = campaign::search_case(m, so, setup, workers, search_rng, &t);
  const search::Result& r = s.result;
  for (size_t i = 0; i < r.best_by_generation.size(); ++i)
    std::cout << "generation " << i + 1 << ": best fitness " << r.best_by_generation[i] << "\n";
  const double per_gen = r.generations > 0 ? r.seconds / static_cast<double>(r.generations) : 0.0;
  print_met(r.met, o.stop_at);
  std::cout << (r.found ? std::string("found: ") + search::to_string(r.failure.oracle) + " - " + r.failure.detail
                        : "no failure within the budget; best fitness " + general(r.best))
            << "\n"
            << r.evaluations << " evaluations in " << r.generations << " generations, " << std::fixed
            << std::setprecision(3) << r.seconds << " s (" << per_gen << " s per generation)\n";
  // The replay line: this search again, with the seed it used.
  std::cout << "replay search: " << o.command_line << (o.given.count("seed") ? "" : " --seed " + std::to_string(seed))
            << "\n";
  if (r.found) {
    const std::string out = o.out.empty() ? "search" : o.out;
    std::map<std::string, std::string> versions;
    for (size_t i = 0; i < workers.size(); ++i) {
      worker::BackendInfo info;
      if (workers.at(i).hello(info).ok()) versions[setup.backends[i].str()] = info.version;
    }
    const campaign::BundleContext ctx{s.model, s.evaluation, setup, seed, 0, o.command_line, versions,
                                      "",      campaign::to_string(so.method)};
    const std::string bundle = campaign::write_bundle(out, campaign::search_finding(s), ctx);
    std::cout << "bundle: " << bundle << "\nreplay: " << campaign::replay_command(bundle) << "\n";
  }
  std::cout << "result: method=" << campaign::to_string(so.method) << " found=" << (r.found ? 1 : 0)
            << " oracle=" << (r.found ? search::to_string(r.failure.oracle) : "none")
            << " known=" << (r.found && !r.failure.known.empty() ? r.failure.known : "none")
            << " evaluations=" << r.evaluations << " generations=" << r.generations << " best=" << general(r.best)
            << " seconds=" << r.seconds << " met=" << search::met_text(r.met) << "\n";
  return 0;
}

}  // namespace quorum::cli
