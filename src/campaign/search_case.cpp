// The search methods on the campaign's workers.
#include "campaign/search_case.h"

#include "campaign/grist_library.h"
#include "core/error.h"
#include "ir/edit.h"

namespace quorum::campaign {

SearchMethod search_method_from_string(const std::string& s) {
  if (s.empty() || s == "none") return SearchMethod::None;
  if (s == "ga") return SearchMethod::Ga;
  if (s == "diverge") return SearchMethod::Diverge;
  if (s == "grist") return SearchMethod::Grist;
  if (s == "random") return SearchMethod::Random;
  throw core::UserError("--method/--search: expected ga, diverge, grist or random, got '" + s + "'");
}

const char* to_string(SearchMethod m) {
  switch (m) {
    case SearchMethod::None: return "none";
    case SearchMethod::Ga: return "ga";
    case SearchMethod::Diverge: return "diverge";
    case SearchMethod::Grist: return "grist";
    case SearchMethod::Random: return "random";
  }
  return "?";
}

search::Candidate candidate_of(const ModelCase& m) {
  search::Candidate c{{}, ir::graph_weights(m.graph)};  // every value in float64, as the searches hold them
  for (const auto& [name, t] : m.inputs) c.inputs.emplace(name, t.to(core::DType::F64));
  return c;
}

ModelCase case_of(const ModelCase& base, const search::Candidate& c) {
  ModelCase m = base;
  m.inputs = c.inputs;
  m.graph = ir::with_weights(base.graph, c.weights);
  return m;
}

std::vector<search::Trial> WorkerEvaluator::evaluate(const std::vector<search::Candidate>& batch) {
  std::vector<ModelCase> cases;
  cases.reserve(batch.size());
  for (const auto& c : batch) cases.push_back(case_of(base_, c));
  ++calls_;
  std::vector<Evaluation> evs = evaluate_batch(cases, setup_, workers_, timing_);
  std::vector<search::Trial> out;
  out.reserve(evs.size());
  for (auto& e : evs) out.push_back({std::move(e.runs), std::move(e.findings)});
  return out;
}

oracle::Finding search_finding(const Searched& s) {
  if (!s.evaluation.findings.empty()) return s.evaluation.findings[0];
  oracle::Finding f;
  const search::Oracle oracle = s.result.failure.oracle;
  f.kind = oracle == search::Oracle::Nan     ? oracle::Kind::NaN
           : oracle == search::Oracle::Crash ? oracle::Kind::Crash
                                             : oracle::Kind::Inconsistency;
  f.backend = s.result.failure.backend;
  for (const auto& r : s.evaluation.runs)
    if (!r.is_reference && f.backend.empty()) f.backend = r.backend;
  const ir::Graph& g = s.model.graph;
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs)
      if (!g.outputs.empty() && o == g.outputs[0]) {
        f.node = n.name;
        f.op = n.op;
      }
  f.detail = std::string("search oracle '") + search::to_string(oracle) + "': " + s.result.failure.detail;
  return f;
}

Searched search_case(const ModelCase& m, const SearchOptions& o, const Setup& setup, WorkerSet& workers,
                     core::Rng& rng, Timing* timing) {
  WorkerEvaluator ev(m, setup, workers, timing);
  search::GaParams p = o.ga;
  if (o.method == SearchMethod::Diverge) p.fitness = search::Fitness::Diverge;
  const search::Candidate seed = candidate_of(m);
  Searched s;
  if (o.method == SearchMethod::Grist) {
    // GRIST's library target from the case's inputs and weights: the first NaN/Inf a library produces
    // where the float64 kernel on its operands is finite (grist_library.h), with GRIST's defaults.
    search::GristOptions g;
    g.seed = rng.next_u64();
    g.budget = p.budget > 0 ? p.budget : 200;
    LibraryHits hits;
    hits.stop = p.stop;
    const search::Evaluate eval = library_evaluate(m.graph, m.target, setup, workers, hits);
    const search::GristResult r = search::grist(m.graph, seed, g, eval);
    s.result.evaluations = r.evaluations;
    s.result.seconds = r.seconds;
    s.result.generations = r.iterations;
    s.result.met = hits.met;
    s.model = m;
    if (auto& hit = hits.result()) {
      s.result.found = true;
      s.result.failure = {search::Oracle::Nan, hit->finding.detail, hit->finding.known, hit->finding.backend};
      s.model = std::move(hit->model);
      s.evaluation = std::move(hit->evaluation);
    }
    return s;
  }
  switch (o.method) {
    case SearchMethod::Ga:
    case SearchMethod::Diverge: s.result = search::genetic_search(m.graph, seed, p, ev, rng); break;
    case SearchMethod::Random: s.result = search::random_search(m.graph, seed, p, ev, rng); break;
    case SearchMethod::Grist:  // above
    case SearchMethod::None: throw core::UserError("search: no method given");
  }
  s.model = case_of(m, s.result.candidate);
  s.evaluation.runs = s.result.trial.runs;
  s.evaluation.findings = s.result.trial.findings;
  return s;
}

}  // namespace quorum::campaign
