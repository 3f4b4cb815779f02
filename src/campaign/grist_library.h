// GRIST's library target (docs/search.md): a search candidate runs as one model through the
// campaign's workers and oracles (evaluate()), and triggers when a library produces NaN/Inf where
// the float64 kernel on its own operands is finite (a finding of kind NaN: the per-node rule, so two
// libraries disagreeing about it count, and a NaN the reference has too does not).
#pragma once
#include <optional>
#include <vector>

#include "campaign/evaluate.h"
#include "search/genetic.h"
#include "search/grist.h"

namespace quorum::campaign {

// The first triggering evaluation: the model case it ran and what the oracles found.
struct SearchHit {
  ModelCase model;
  Evaluation evaluation;
  oracle::Finding finding;  // the first NaN finding
};

// What the library target met. A NaN finding the stop rule goes past (one a ledger knows, by default) does
// not trigger: it is listed in `met` and the first is kept in `first_known`.
struct LibraryHits {
  search::StopRule stop;
  std::optional<SearchHit> hit;  // the first triggering evaluation
  std::optional<SearchHit> first_known;
  std::vector<search::Met> met;
  int64_t evaluations = 0;
  // The hit, or else the first known one met (std::nullopt: neither).
  std::optional<SearchHit>& result() { return hit ? hit : first_known; }
};

// An Evaluate for search::grist and search::random_inputs over `g` (weights replaced by the
// candidate's) with the loss target `target`; what it meets goes into `hits`.
search::Evaluate library_evaluate(const ir::Graph& g, const core::Tensor& target, const Setup& setup,
                                  WorkerSet& workers, LibraryHits& hits);

}  // namespace quorum::campaign
