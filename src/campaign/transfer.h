// Known-bug transfer: bugs come in families. Every known-issue ledger entry's minimal case is run
// (a) on every other library and (b) with its operator replaced by each catalogue sibling (same
// family, the entry's attributes kept where the sibling has them), on every library, and judged as a
// campaign judges. A finding no ledger entry explains is new, recorded with the entry it came from.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "campaign/evaluate.h"
#include "oracle/known.h"

namespace quorum::campaign {

struct TransferOptions {
  std::vector<BackendSpec> backends;  // the libraries every variant runs on
  std::string filter;                 // only entries whose id contains this
  bool siblings = true;               // (b): also the operator's siblings
  worker::Limits limits;
  uint64_t seed = 1;  // draws the weights a sibling needs that the entry's operator had not
};

// One variant: an entry's case as it is, or with one node's operator replaced.
struct TransferVariant {
  const oracle::KnownEntry* entry = nullptr;
  std::string from_op;  // the entry's operator
  std::string op;       // the operator run in its place (== from_op: the entry's case as it is)
  std::string skipped;  // why the variant did not run (a sibling the shape rule refuses), else empty
  ModelCase model;
  Setup setup;
  Evaluation evaluation;                // every finding, labelled with the ledger where one matches
  std::vector<oracle::Finding> fresh;   // the findings no ledger entry explains
  std::string origin() const;           // "transfer from ledger entry ID (op in place of from_op)"
};

// The operators a ledger case's operator is replaced by: the catalogue operators of its family, with
// an arity that admits the node's data inputs, itself excluded; losses are never siblings.
std::vector<std::string> sibling_ops(const std::string& op, size_t data_inputs);

// The entry's model with node `node`'s operator replaced by `op`: attributes of the same name kept
// where valid for `op` (else its defaults), parameters `op` needs drawn from `rng` where the node's
// do not fit. UserError when the shape rule refuses the result.
ir::Graph replace_op(const ir::Graph& g, const std::string& node, const std::string& op, core::Rng& rng);

// Runs every variant of every entry with a case (entries whose id contains `filter`) on `workers`
// (one per backend of opt.backends, in that order); calls `each` after each variant (progress,
// recording).
std::vector<TransferVariant> transfer_known(const oracle::Ledger& ledger, const TransferOptions& opt,
                                            WorkerSet& workers,
                                            const std::function<void(const TransferVariant&)>& each = nullptr);

}  // namespace quorum::campaign
