// GRIST's library target (docs/search.md): a search candidate runs as one model through the
// campaign's workers and oracles (evaluate()), and triggers when a library produces NaN/Inf where
// the float64 kernel on its own operands is finite (a finding of kind NaN: the per-node rule, so two
// libraries disagreeing about it count, and a NaN the reference has too does not).
#pragma once
#include <optional>

#include "campaign/evaluate.h"
#include "search/grist.h"

namespace quorum::campaign {

// The first triggering evaluation: the model case it ran and what the oracles found.
struct SearchHit {
  ModelCase model;
  Evaluation evaluation;
  oracle::Finding finding;  // the first NaN finding
};

// An Evaluate for search::grist and search::random_inputs over `g` (weights replaced by the
// candidate's) with the loss target `target`; the first triggering evaluation is kept in `hit`.
search::Evaluate library_evaluate(const ir::Graph& g, const core::Tensor& target, const Setup& setup,
                                  WorkerSet& workers, std::optional<SearchHit>& hit);

}  // namespace quorum::campaign
