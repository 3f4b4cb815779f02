// The counts a campaign's jobs share while it runs (models, hits by kind and stage, root causes, time), the
// progress line they make and their part of the campaign's Summary.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "campaign/evaluate.h"
#include "campaign/summary.h"

namespace quorum::campaign {

struct RunCounts {
  std::mutex mu;                                 // every member below is read and written under it
  std::map<core::FindingKind, int64_t> by_kind;  // hits per finding kind
  int64_t optimized = 0;                         // hits of the optimized stage (OC), among them
  int64_t batched = 0;                           // hits of the batch relation (BR), among them
  int64_t widened = 0;                           // models the batch relation ran at a wider batch
  int64_t formed = 0;                            // hits of the form relation (FR), among them
  int64_t positioned = 0;                        // hits of the position relation (PR), among them
  int64_t placed = 0;                            // models the position relation ran with a wider axis
  int64_t models_run = 0, invalid = 0, errors = 0, new_findings = 0, hits = 0;
  int64_t recycled = 0;  // worker processes replaced by fresh ones (worker::Limits::recycle_*)
  std::string first_invalid;
  Timing timing;
  std::set<std::string> roots;                      // root causes of the findings new in this run
  int64_t searched = 0, search_found = 0;           // clean models searched (--search) / where it found a failure
  int64_t refused = 0, not_sent = 0;                // models a backend refused with a refusal it named / was not sent
  int64_t transfer_variants = 0, transfer_new = 0;  // ledger variants run, and their findings no entry explains

  // One evaluated model's share: its new findings and their root causes, its hits by kind, its time.
  void tally(const Evaluation& ev, int new_findings, const std::vector<std::string>& new_roots, const Timing& t);
  // The progress line after `elapsed_s` seconds: what `setup` runs, root causes when the run reduces
  // (`reducing`), "new" findings on a resumed run (`resumed`), the coverage's OLC and the learned refusals.
  void progress_line(std::ostream& log, double elapsed_s, const Setup& setup, bool reducing, bool resumed,
                     double olc) const;
  // The Summary's counts (its seed, models in the store, time and coverage are the caller's).
  Summary summary() const;
};

}  // namespace quorum::campaign
