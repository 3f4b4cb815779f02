// The search methods on the campaign's workers.
#include "campaign/search_case.h"

#include "core/error.h"

namespace quorum::campaign {

SearchMethod search_method_from_string(const std::string& s) {
  if (s.empty() || s == "none") return SearchMethod::None;
  if (s == "ga") return SearchMethod::Ga;
  if (s == "diverge") return SearchMethod::Diverge;
  if (s == "random") return SearchMethod::Random;
  throw core::UserError("--method/--search: expected ga, diverge or random, got '" + s + "'");
}

const char* to_string(SearchMethod m) {
  switch (m) {
    case SearchMethod::None: return "none";
    case SearchMethod::Ga: return "ga";
    case SearchMethod::Diverge: return "diverge";
    case SearchMethod::Random: return "random";
  }
  return "?";
}

search::Candidate candidate_of(const ModelCase& m) {
  search::Candidate c;
  c.inputs = m.inputs;
  for (const auto& [name, w] : m.graph.initializers) c.weights.emplace(name, w);
  return c;
}

ModelCase case_of(const ModelCase& base, const search::Candidate& c) {
  ModelCase m = base;
  m.inputs = c.inputs;
  for (const auto& [name, w] : c.weights) {
    auto it = m.graph.initializers.find(name);
    if (it != m.graph.initializers.end()) it->second = w.to(it->second.dtype());
  }
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

Searched search_case(const ModelCase& m, const SearchOptions& o, const Setup& setup, WorkerSet& workers,
                     core::Rng& rng, Timing* timing) {
  WorkerEvaluator ev(m, setup, workers, timing);
  search::GaParams p = o.ga;
  if (o.method == SearchMethod::Diverge) p.fitness = search::Fitness::Diverge;
  const search::Candidate seed = candidate_of(m);
  Searched s;
  switch (o.method) {
    case SearchMethod::Ga:
    case SearchMethod::Diverge: s.result = search::genetic_search(m.graph, seed, p, ev, rng); break;
    case SearchMethod::Random: s.result = search::random_search(m.graph, seed, p, ev, rng); break;
    case SearchMethod::None: throw core::UserError("search: no method given");
  }
  s.model = case_of(m, s.result.candidate);
  s.evaluation.runs = s.result.trial.runs;
  s.evaluation.findings = s.result.trial.findings;
  return s;
}

}  // namespace quorum::campaign
