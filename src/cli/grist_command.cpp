// quorum search --method grist: GRIST's gradient-guided NaN/Inf exposure (docs/search.md), on the
// libraries (--expose library: a library's NaN/Inf where the float64 reference is finite, through
// the campaign's workers and oracles; a bundle and its replay) or on the model itself (--expose
// model: inputs, and with --weights reachable weights, that make the model produce NaN/Inf, for a
// person to harden it). The static value-range analysis (DEBAR) is printed beside it.
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "campaign/bundle.h"
#include "campaign/grist_library.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/fileio.h"
#include "core/npy.h"
#include "data/values.h"
#include "ir/edit.h"
#include "ir/json_io.h"
#include "ops/registry.h"
#include "ref/ranges.h"
#include "search/grist.h"

namespace quorum::cli {

namespace {

namespace fs = std::filesystem;
using core::UserError;

std::string num(double v) {
  std::ostringstream os;
  os << std::setprecision(6) << v;
  return os.str();
}

std::string interval_text(const ops::Interval& i) { return "[" + num(i.lo) + ", " + num(i.hi) + "]"; }

ops::Interval parse_data_range(const std::string& s) {
  if (s.empty()) return data::input_range(-1.0, 1.0, 0.0);
  const auto comma = s.find(',');
  try {
    if (comma == std::string::npos) throw std::invalid_argument(s);
    size_t used = 0;
    const double lo = std::stod(s.substr(0, comma), &used);
    if (used != comma) throw std::invalid_argument(s);
    const std::string rest = s.substr(comma + 1);
    const double hi = std::stod(rest, &used);
    if (used != rest.size() || !std::isfinite(lo) || !std::isfinite(hi) || lo > hi) throw std::invalid_argument(s);
    return ops::Interval{lo, hi};
  } catch (const std::exception&) {
    throw UserError("--data_range: expected LO,HI with finite LO <= HI, got '" + s + "'");
  }
}

// The model and, from a bundle, its recorded inputs and loss target.
struct Loaded {
  ir::Graph graph;
  ref::ValueMap inputs;
  std::optional<core::Tensor> target;
};

Loaded load(const std::string& path) {
  Loaded l;
  if (fs::is_directory(path)) {
    const fs::path model = fs::path(path) / "model.json";
    if (!fs::exists(model)) throw UserError(path + ": not a model file or a finding bundle (no model.json)");
    l.graph = ir::load_graph(model.string());
    const backends::ValueMap recorded = campaign::read_recorded((fs::path(path) / "inputs").string(), l.graph);
    for (const auto& in : l.graph.inputs)
      if (recorded.count(in.name)) l.inputs.emplace(in.name, recorded.at(in.name));
    const fs::path target = fs::path(path) / "target.npy";
    if (fs::exists(target)) l.target = core::read_npy(target.string());
    return l;
  }
  l.graph = ir::load_graph(path);
  return l;
}

// The static analysis's flags, and the dynamic search's verdict on each.
void print_static(const ref::RangeAnalysis& a, const search::GristResult* r, bool weights_anywhere) {
  std::cout << "static value ranges (inputs in the data range, weights "
            << (weights_anywhere ? "anywhere" : "as initialised") << "):\n";
  if (a.sites.empty()) std::cout << "  no vulnerable operation\n";
  for (const auto& s : a.sites) {
    std::cout << "  " << s.node << " (" << s.op << ") operand " << s.input << " in " << interval_text(s.range) << ": "
              << (s.flagged ? "FLAGGED, may reach its invalid region" : "safe");
    if (r)
      for (const auto& t : r->targets)
        if (t.site.node == s.node && t.site.input == s.input)
          std::cout << (t.triggered ? "; the search triggers it" : "; not triggered by the search");
    std::cout << "\n";
  }
}

void write_model_case(const std::string& dir, const ir::Graph& g, const search::Candidate& c) {
  fs::create_directories(fs::path(dir) / "inputs");
  ir::save_graph((fs::path(dir) / "model.json").string(), ir::with_weights(g, c.weights));
  for (const auto& [name, t] : c.inputs) core::write_npy((fs::path(dir) / "inputs" / (name + ".npy")).string(), t);
}

}  // namespace

int cmd_grist(const Options& o) {
  if (o.model.empty()) throw UserError("search: --model MODEL.json|MODEL.onnx|BUNDLE is required");
  const std::string target_mode = o.expose;
  if (target_mode != "library" && target_mode != "model")
    throw UserError("--expose: expected library or model for search --method grist, got '" + o.expose + "'");
  const bool library = target_mode == "library";
  if (library && o.backends.empty())
    throw UserError("search --expose library: --backends is required (the libraries to expose)");
  if (o.delta <= 0) throw UserError("--delta: the sign step must be above 0");

  Loaded l = load(o.model);
  const ir::Graph& g = l.graph;
  const uint64_t seed = core::Rng::resolve_seed(o.seed);
  core::Rng rng(seed);
  const ops::Interval range = parse_data_range(o.data_range);
  // Inputs a bundle does not give: drawn as the campaign draws them (uniform in the data range, with its edge
  // values). The search's steps keep every element inside the data range or, one that starts outside it,
  // no farther out than it started.
  for (const auto& in : g.inputs)
    if (!l.inputs.count(in.name))
      l.inputs.emplace(in.name, data::random_with_edges(in.type.shape, rng, range.lo, range.hi));
  search::Candidate start{l.inputs, ir::graph_weights(g)};
  const std::string out = o.out.empty() ? "search" : o.out;

  search::GristOptions opt;
  opt.seed = seed;
  opt.budget = static_cast<int64_t>(o.budget ? o.budget : 200);  // 0: the method's default
  opt.time_limit = o.time;
  opt.delta = o.delta;
  opt.switch_rate = o.switch_rate;
  opt.data_range = range;
  opt.weights = library || o.weights;
  opt.aim = library ? 0.05 : -0.01;
  opt.stop_at_first = library;

  std::cout << "seed: " << seed << "\nmodel: " << o.model << " (" << g.nodes.size() << " nodes)\n"
            << "target: " << target_mode << ", data range " << interval_text(range) << ", budget " << opt.budget
            << (o.baseline ? " (random inputs: the baseline)" : "") << "\n";
  const ref::RangeMap in_ranges = [&] {
    ref::RangeMap m;
    for (const auto& in : g.inputs) m[in.name] = range;
    return m;
  }();
  const ref::RangeAnalysis analysis = ref::analyze_ranges(g, in_ranges, opt.weights);
  if (analysis.sites.empty()) {
    print_static(analysis, nullptr, opt.weights);
    std::cout << "nothing to search: the model holds no vulnerable operation\n";
    return 0;
  }

  search::GristResult r;
  campaign::LibraryHits hits;
  hits.stop = search::stop_rule_from_string(o.stop_at);
  campaign::Setup setup;
  if (library) {
    setup.backends = campaign::parse_backends(o.backends);
    setup.mode = o.given.count("mode") ? campaign::mode_from_string(o.mode) : campaign::Mode::Infer;
    setup.dtype = compute_dtype(o);
    setup.thresholds.dtype = setup.dtype;
    setup.limits = limits_of(o);
    setup.known = std::make_shared<const oracle::Ledger>(oracle::load_ledgers(oracle::default_ledger_dir()));
    const core::Tensor target =
        l.target ? *l.target : data::loss_target(setup.loss, g.types.at(g.outputs[0]).shape, rng);
    campaign::WorkerSet workers(setup.backends, setup.limits);
    const search::Evaluate eval = campaign::library_evaluate(g, target, setup, workers, hits);
    r = o.baseline ? search::random_inputs(g, start, opt.budget, seed, range, eval)
                   : search::grist(g, start, opt, eval);
  } else {
    const search::Evaluate eval = [&g](const search::Candidate& c, const ref::VulnerableSite* site) {
      return search::model_verdict(g, c, site);
    };
    r = o.baseline ? search::random_inputs(g, start, opt.budget, seed, range, eval)
                   : search::grist(g, start, opt, eval);
  }

  print_static(analysis, o.baseline ? nullptr : &r, opt.weights);
  std::cout << "search: " << r.evaluations << " evaluations, " << r.iterations << " iterations, " << num(r.seconds)
            << " s (" << num(r.iterations ? r.seconds / r.iterations : 0) << " s per iteration)\n";
  if (!o.baseline)
    for (const auto& t : r.targets)
      std::cout << "  target " << t.site.node << " (" << t.site.op << ") operand " << t.site.input << ": loss "
                << num(t.first_loss) << " -> " << num(t.best_loss) << " in " << t.evaluations << " evaluations"
                << (t.triggered ? ", TRIGGERED: " + t.what : "") << "\n";
  print_met(hits.met, o.stop_at);
  std::optional<campaign::SearchHit>& hit = hits.result();
  const bool found = library ? hit.has_value() : r.triggered();
  // The line bench/ledger_rediscovery.py reads, as `quorum search` prints it for the other methods.
  std::cout << "result: method=" << (o.baseline ? "random-grist" : "grist") << " found=" << (found ? 1 : 0)
            << " known=" << (hit && !hit->finding.known.empty() ? hit->finding.known : "none") << " evaluations="
            << (r.triggered() ? r.first_trigger : !hits.met.empty() ? hits.met[0].evaluation : r.evaluations)
            << " met=" << search::met_text(hits.met) << "\n";
  if (!found) {
    std::cout << "no NaN/Inf found within the budget\n";
    return 0;
  }
  if (library && !r.triggered()) std::cout << "kept: the first known NaN/Inf met\n";
  if (r.triggered()) {
    const search::TargetOutcome& t = r.targets[static_cast<size_t>(r.trigger)];
    std::cout << "first trigger after " << r.first_trigger << " evaluations\n";
    if (!o.baseline) std::cout << "vulnerable operation: " << t.site.node << " (" << t.site.op << ")\n";
  }
  if (library) {
    const campaign::BundleContext ctx{
        hit->model, hit->evaluation, setup, seed, 0, o.command_line, {}, {}, o.baseline ? "random" : "grist"};
    const std::string bundle = campaign::write_bundle(out, hit->finding, ctx);
    std::cout << "finding: " << hit->finding.signature() << "\n  " << hit->finding.detail << "\nbundle: " << bundle
              << "\nreplay: " << campaign::replay_command(bundle) << "\n";
    return 0;
  }
  const search::TargetOutcome& t = r.targets[static_cast<size_t>(r.trigger)];
  write_model_case(out, g, t.candidate);
  const std::string bad =
      search::first_nonfinite_node(g, ref::forward(ir::with_weights(g, t.candidate.weights), t.candidate.inputs));
  std::cout << "model: " << t.what << "\n";
  if (!bad.empty()) std::cout << "first NaN/Inf on the float64 reference: node '" << bad << "'\n";
  std::cout << "failure-inducing case: " << out << "/model.json, " << out << "/inputs/\nreplay: quorum run " << out
            << "/model.json --inputs " << out << "/inputs\n";
  return 0;
}

// `quorum search`: the methods are dispatched here (grist in this file).

}  // namespace quorum::cli
