// A campaign's new findings: each one's bundle and the line the log shows for it, and their reduction,
// whose root causes go to the store.
#pragma once
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "campaign/evaluate.h"
#include "oracle/known.h"
#include "oracle/oracle.h"
#include "store/store.h"

namespace quorum::campaign {

// A new finding's bundle: its path, signature and ledger entry, and the line the log shows.
struct FreshFinding {
  std::string signature, bundle, known, line;
};

// The new finding `f`, bundled at `bundle`: `origin` names the ledger case a transfer variant came from,
// `method` the search that found its case (empty: none).
FreshFinding fresh_finding(const oracle::Finding& f, const std::string& bundle, const std::string& origin,
                           const std::string& method);

// The new findings a campaign's jobs hand to its background reducer, in order. Thread-safe.
class FreshQueue {
 public:
  // Appends `fresh` (emptied).
  void push(std::vector<FreshFinding>& fresh);
  // The next finding, waiting for one; nullopt once the queue is closed and empty.
  std::optional<FreshFinding> pop();
  // No more findings will be pushed.
  void close();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<FreshFinding> q_;
  bool closed_ = false;
};

// How a campaign reduces its new findings.
struct FreshReduction {
  int runs = 0;                           // each finding's bound on model runs (CampaignOptions::reduce_runs)
  const oracle::Ledger* known = nullptr;  // labels a finding through its reduced case
  double hang_timeout_s = 0;              // reduce_bundle's
};

// Each finding of `fresh` reduced on `workers`: its root cause (the key of its reduced case) and reduced
// case go to `store`, its line gets the reduction. Returns the root causes: a finding the ledger knows
// belongs to that entry's ("known:" and its id), one whose reduction failed to its signature. The time
// goes to t.reduce.
std::vector<std::string> reduce_fresh(std::vector<FreshFinding>& fresh, const FreshReduction& how, store::Store& store,
                                      WorkerSet& workers, Timing& t);

}  // namespace quorum::campaign
