// What a campaign reports when it ends: its seed, models, findings, time and coverage (run_campaign's result,
// the shared counts' part of it in run_counts.h).
#pragma once
#include <cstdint>
#include <string>

#include "campaign/evaluate.h"
#include "coverage/coverage.h"

namespace quorum::campaign {

struct Summary {
  uint64_t seed = 0;
  int64_t models_run = 0, models_total = 0, invalid_models = 0, errors = 0;
  std::string first_invalid;  // why the first invalid model was skipped
  int64_t new_findings = 0, hits = 0;
  int64_t searched = 0, search_found = 0;  // clean models searched (--search), and those it found a failure in
  int64_t workers_recycled = 0;  // library workers replaced by fresh processes (--worker_models/--worker_rss)
  double seconds = 0;
  Timing timing;
  // Models a backend refused (no finding; per backend and reason in the store's refusal rows), and models
  // not sent to a backend because of a refusal it named before (docs/findings.md, "Learned refusals").
  int64_t refused = 0, not_sent = 0;
  // Known-bug transfer (CampaignOptions::transfer): ledger variants run, and their findings no entry explains.
  int64_t transfer_variants = 0, transfer_new = 0;
  coverage::Parts coverage;  // operator-level coverage of the campaign's models so far (resumed runs too)
};

}  // namespace quorum::campaign
