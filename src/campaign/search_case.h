// The search methods of src/search/ on the campaign's workers: an Evaluator that sends a whole
// generation to each backend's worker in one call (evaluate_batch) and judges every candidate as a
// campaign judges a model. Used by `quorum search` and by `quorum fuzz --search`.
#pragma once
#include <string>

#include "campaign/evaluate.h"
#include "search/genetic.h"

namespace quorum::campaign {

// ga (Audee's genetic search, the --fitness asked), diverge (the genetic search on the divergence
// fitness), grist (GRIST's gradient-guided NaN/Inf search, its library target: grist_library.h),
// random (the baseline: fresh random inputs, the same budget and oracles).
enum class SearchMethod { None, Ga, Diverge, Grist, Random };
SearchMethod search_method_from_string(const std::string& s);  // UserError for an unknown method
const char* to_string(SearchMethod m);

struct SearchOptions {
  SearchMethod method = SearchMethod::None;
  search::GaParams ga;  // grist takes its budget (ga.budget; 0: 200) and GRIST's defaults otherwise
};

// The case's inputs and weights (its graph's initializers), in float64.
search::Candidate candidate_of(const ModelCase& m);
// `base` with the candidate's inputs and weights.
ModelCase case_of(const ModelCase& base, const search::Candidate& c);

class WorkerEvaluator : public search::Evaluator {
 public:
  WorkerEvaluator(const ModelCase& base, const Setup& setup, WorkerSet& workers, Timing* timing = nullptr)
      : base_(base), setup_(setup), workers_(workers), timing_(timing) {}
  std::vector<search::Trial> evaluate(const std::vector<search::Candidate>& batch) override;
  int64_t calls() const { return calls_; }

 private:
  const ModelCase& base_;
  const Setup& setup_;
  WorkerSet& workers_;
  Timing* timing_;
  int64_t calls_ = 0;
};

struct Searched {
  search::Result result;
  ModelCase model;         // the failure-inducing case (or the fittest)
  Evaluation evaluation;   // its runs and findings
};

// The finding a search's failure is recorded as: the campaign's first verdict, or, for an oracle of the
// search's own (a top-1 label, a NaN/Inf or a crash the verdicts do not hold), one that says so at the
// model's output (kind NaN, Crash or Inconsistency; its detail "search oracle '...': ...").
oracle::Finding search_finding(const Searched& s);

// Runs the method from the case `m` (its inputs and weights are the search's centre).
Searched search_case(const ModelCase& m, const SearchOptions& o, const Setup& setup, WorkerSet& workers,
                     core::Rng& rng, Timing* timing = nullptr);

}  // namespace quorum::campaign
