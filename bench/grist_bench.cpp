// GRIST against random inputs of the same budget, and the static value ranges against both
// (docs/search.md, "Measured"). On a fixed seeded set of generated models that hold vulnerable
// operations: the share of models where GRIST makes a library produce NaN/Inf where the float64
// reference is finite (a NaN finding through the campaign's workers and oracles), versus random
// inputs of the same evaluation budget and seed; the median evaluations to the first trigger; the
// time per search iteration; the static analysis's precision and recall against the dynamic search
// in model mode (inputs in the data range, weights as initialised: the domain the analysis assumes).
//
//   grist_bench [--models N] [--budget B] [--seed S] [--backends LIST] [--generator G] [--require OP]
// Defaults: 100 models, budget 40, seed 1, faulty:exp-overflow-early, muffin, any vulnerable
// operation (--require exp: only models holding an exp, the planted fault's operator). Not run by
// `make test`.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "campaign/campaign.h"
#include "campaign/grist_library.h"
#include "campaign/model_source.h"
#include "gen/generator.h"
#include "ir/edit.h"
#include "ref/ranges.h"
#include "search/grist.h"

namespace {

using namespace quorum;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string arg(int argc, char** argv, const std::string& name, const std::string& def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == "--" + name) return argv[i + 1];
  return def;
}

}  // namespace

int main(int argc, char** argv) {
  const int models = std::stoi(arg(argc, argv, "models", "100"));
  const int64_t budget = std::stoll(arg(argc, argv, "budget", "40"));
  const uint64_t seed = std::stoull(arg(argc, argv, "seed", "1"));
  const std::string backends = arg(argc, argv, "backends", "faulty:exp-overflow-early");
  const std::string require = arg(argc, argv, "require", "");  // only models holding this operator
  gen::GenOptions gopt;
  gopt.generator = arg(argc, argv, "generator", "muffin");
  gopt.seed = seed;
  const campaign::ModelFactory factory = campaign::generator_factory(gopt, "random");

  campaign::Setup setup;
  setup.backends = campaign::parse_backends(backends);
  setup.mode = campaign::Mode::Infer;
  campaign::WorkerSet workers(setup.backends, setup.limits);
  const ops::Interval range{-1, 1};

  int taken = 0, grist_hits = 0, random_hits = 0, random_first = 0, both = 0, with_exp = 0;
  std::vector<double> grist_evals, random_evals, per_iteration;
  int64_t tp = 0, fp = 0, fn = 0, tn = 0;
  double grist_seconds = 0;
  int64_t grist_iterations = 0;
  for (int64_t index = 0; taken < models && index < 100 * models; ++index) {
    campaign::ModelCase m;
    try {
      m = campaign::draw_case(factory, seed, index, setup.loss);
    } catch (const std::exception&) {
      continue;  // an invalid model
    }
    const std::vector<ref::VulnerableSite> sites = ref::vulnerable_sites(m.graph);
    if (sites.empty()) continue;
    if (!require.empty() &&
        std::none_of(m.graph.nodes.begin(), m.graph.nodes.end(), [&](const ir::Node& n) { return n.op == require; }))
      continue;
    ++taken;
    bool has_exp = false;
    for (const auto& s : sites) has_exp = has_exp || s.op == "exp";
    with_exp += has_exp;
    search::Candidate start{m.inputs, ir::graph_weights(m.graph)};
    for (auto& [name, t] : start.inputs)  // the search starts inside the data range
      for (int64_t i = 0; i < t.numel(); ++i) t.f64()[i] = std::clamp(t.f64()[i], range.lo, range.hi);

    // Library target: random inputs (the campaign's policy, edge values included) and GRIST.
    campaign::LibraryHits rh, gh;
    search::Candidate random_start{m.inputs, start.weights};
    const search::GristResult r = search::random_inputs(
        m.graph, random_start, budget, seed, range, campaign::library_evaluate(m.graph, m.target, setup, workers, rh));
    search::GristOptions opt;
    opt.seed = seed;
    opt.budget = budget;
    opt.data_range = range;
    const search::GristResult g =
        search::grist(m.graph, start, opt, campaign::library_evaluate(m.graph, m.target, setup, workers, gh));
    grist_hits += g.triggered();
    random_hits += r.triggered();
    random_first += r.triggered() && r.first_trigger == 1;
    both += g.triggered() && r.triggered();
    if (g.triggered()) grist_evals.push_back(static_cast<double>(g.first_trigger));
    if (r.triggered()) random_evals.push_back(static_cast<double>(r.first_trigger));
    grist_seconds += g.seconds;
    grist_iterations += g.iterations;
    if (g.iterations > 0) per_iteration.push_back(g.seconds / g.iterations);

    // Static ranges against GRIST in model mode (inputs only, weights fixed).
    ref::RangeMap in;
    for (const auto& gi : m.graph.inputs) in[gi.name] = range;
    const ref::RangeAnalysis a = ref::analyze_ranges(m.graph, in);
    search::GristOptions mopt = opt;
    mopt.weights = false;
    mopt.aim = -0.01;
    mopt.stop_at_first = false;
    const ir::Graph& graph = m.graph;
    const search::GristResult d =
        search::grist(graph, start, mopt, [&graph](const search::Candidate& c, const ref::VulnerableSite* s) {
          // The site's own operand in its invalid region (a NaN elsewhere is another site's).
          ref::ValueMap v;
          try {
            v = ref::forward(graph, c.inputs);
          } catch (const std::exception&) {
            return search::Verdict{};
          }
          return search::Verdict{search::suspect_loss(*s, v.at(s->value)).invalid, ""};
        });
    for (const auto& site : a.sites) {
      bool dyn = false;
      for (const auto& t : d.targets)
        if (t.site.node == site.node && t.site.input == site.input) dyn = t.triggered;
      tp += site.flagged && dyn;
      fp += site.flagged && !dyn;
      fn += !site.flagged && dyn;
      tn += !site.flagged && !dyn;
    }
    for (const auto& t : g.targets)
      std::fprintf(stderr, "  target %s (%s): loss %g -> %g, %lld evaluations, %d iterations%s\n", t.site.node.c_str(),
                   t.site.op.c_str(), t.first_loss, t.best_loss, static_cast<long long>(t.evaluations), t.iterations,
                   t.triggered ? ", triggered" : "");
    std::fprintf(stderr, "model %lld: %zu vulnerable, grist %s (%lld evals), random %s (%lld)\n",
                 static_cast<long long>(index), sites.size(), g.triggered() ? "HIT" : "-",
                 static_cast<long long>(g.first_trigger), r.triggered() ? "HIT" : "-",
                 static_cast<long long>(r.first_trigger));
  }
  const auto pct = [&](int k) { return taken ? 100.0 * k / taken : 0.0; };
  std::printf(
      "models: %d with vulnerable operations (%d with exp; required: %s), seed %llu, budget %lld, "
      "backends %s, generator %s\n",
      taken, with_exp, require.empty() ? "none" : require.c_str(), static_cast<unsigned long long>(seed),
      static_cast<long long>(budget), backends.c_str(), gopt.generator.c_str());
  std::printf("library NaN/Inf where the reference is finite:\n");
  std::printf("  GRIST:  %d models (%.1f %%), median evaluations to the first trigger %.1f\n", grist_hits,
              pct(grist_hits), median(grist_evals));
  std::printf(
      "  random: %d models (%.1f %%), median evaluations to the first trigger %.1f; at the first draw "
      "(a campaign's one evaluation): %d (%.1f %%)\n",
      random_hits, pct(random_hits), median(random_evals), random_first, pct(random_first));
  std::printf("  both: %d\n", both);
  std::printf("GRIST time per iteration: median %.4f s, mean %.4f s (%lld iterations)\n", median(per_iteration),
              grist_iterations ? grist_seconds / static_cast<double>(grist_iterations) : 0.0,
              static_cast<long long>(grist_iterations));
  std::printf(
      "static ranges vs GRIST model mode (per vulnerable operand): flagged and triggered %lld, flagged only "
      "%lld, triggered only %lld, neither %lld\n",
      static_cast<long long>(tp), static_cast<long long>(fp), static_cast<long long>(fn), static_cast<long long>(tn));
  std::printf("  precision %.3f, recall %.3f\n", tp + fp ? static_cast<double>(tp) / static_cast<double>(tp + fp) : 0.0,
              tp + fn ? static_cast<double>(tp) / static_cast<double>(tp + fn) : 0.0);
  return 0;
}
