// Reducing a finding's bundle: the localize/ reducer and localize-fix, with the predicate "the
// same backends, run as the campaign ran them, still show the finding" (kind, stage, blamed
// backend, operator; for crashes the normalised message). The reduced case is written beside the
// original as BUNDLE/reduced/ (a full bundle: quorum replay works on it). A crash that names no node
// (or names one that runs right alone) is then localized to its culprit (localize::find_culprit on
// the reduced case, each node judged by the same backends on the reference's values).
#pragma once
#include <iosfwd>
#include <string>

#include "campaign/evaluate.h"
#include "localize/reduce.h"

namespace quorum::campaign {

struct BundleReduction {
  std::string bundle, reduced_dir;  // reduced_dir empty when the finding did not reproduce
  std::string signature;            // the original finding
  int nodes_before = 0, nodes_after = 0;
  localize::Reduced reduction;
  localize::FixReport fix;  // on one-node reductions
  localize::InputSearch inputs;  // one-node reductions without a parameter cause
  localize::Culprit culprit;     // a crash naming no node, or a node right alone: the node where it begins
  // The root cause's key, from the reduced case: kind, stage, backend, the operator (a crash
  // reduced to one node gets that node's; one with a culprit, the culprit's), and the
  // attributes localize-fix named (or, for a crash, the normalised message; with a culprit, what
  // the culprit alone shows). Findings with equal keys are one root cause.
  std::string root_cause;
  double seconds = 0;
};

// `workers`: the backends' workers to reuse (a campaign's job passes its own); null starts them.
// `hang_timeout_s` (> 0): the time limit of each run while reducing a hang (a timeout finding),
// instead of the bundle's: a campaign passes a multiple of the library's normal time per model, so
// that each of the reduction's runs that hangs again does not wait the full worker timeout.
BundleReduction reduce_bundle(const std::string& bundle_dir, int max_runs, std::ostream* log,
                              WorkerSet* workers = nullptr, double hang_timeout_s = 0);

}  // namespace quorum::campaign
