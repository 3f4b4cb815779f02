// Re-running the known-issue ledger: every entry's minimal case on its backend, judged as a
// campaign judges, and whether the entry's signature still appears.
#pragma once
#include <string>
#include <vector>

#include "campaign/evaluate.h"
#include "oracle/known.h"

namespace quorum::campaign {

struct KnownCheck {
  const oracle::KnownEntry* entry = nullptr;
  enum class Status { Reproduces, Stale, Differs, NoCase, Skipped, NotHere } status = Status::NoCase;
  std::vector<std::string> found;  // the signatures the case produced on the entry's backend
  std::string why;                 // Skipped: the reason; NotHere: what the case needs and what this CPU has
  std::string bundle;              // the finding's bundle, when asked for (KnownCheckOptions::out)
};
// "reproduces", "STALE", "DIFFERS", "no case", "skipped", "not here"
const char* to_string(KnownCheck::Status s);

// Runs every entry with a case (only those whose backend is in `backends`, when given). An
// entry whose backend was not built is skipped with the reason; one whose case needs a CPU feature
// this machine lacks, or one it has not (KnownEntry::cpu_unmet), is run and, where it does not reproduce, is
// NotHere, not Stale: the library picked another implementation here.
struct KnownCheckOptions {
  std::vector<std::string> backends;  // only entries of these backends (empty: all)
  std::string filter;                 // only entries whose id contains this
  worker::Limits limits;
  std::string out;                    // when set: the bundle of each reproducing entry in OUT/bundles/
};
std::vector<KnownCheck> check_known(const oracle::Ledger& ledger, const KnownCheckOptions& opt);

}  // namespace quorum::campaign
