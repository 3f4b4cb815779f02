// What a campaign's model adds to the store beside its findings: its new coverage facts, each backend's
// row (sent and run, crashed, failed; its time) and the refusals it counted (refused by, or not sent to,
// a backend); and the batched writing of the common case, a model that shows nothing new.
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "campaign/evaluate.h"
#include "coverage/coverage.h"
#include "store/store.h"

namespace quorum::campaign {

struct ModelRows {
  struct Refusal {
    std::string backend, key;
    int64_t model = 0, refused = 0, not_sent = 0;
    std::vector<std::string> ops;
  };
  std::vector<coverage::Fact> facts;
  std::vector<store::StoredBackend> backends;
  std::vector<Refusal> refusals;
};

// What each backend of `setup` did with model `index` (StoredBackend, StoredRefusal rows into `rows`): sent
// and run (crashed, failed otherwise), refused with a reason, or not sent because of a refusal learned
// before; its worker's time from `t`. A refusal that is a structured backends::Refusal is learned into
// setup.refusals, so that models holding it are no longer sent to that backend.
struct BackendRows {
  std::vector<std::string> learned;  // a line to show per refusal new to the campaign
  int64_t refused = 0;               // backends that refused the model
};
BackendRows backend_rows(const Setup& setup, const ModelCase& m, const Evaluation& ev, int64_t index, const Timing& t,
                         ModelRows& rows);

// A model's (or a batch's) rows besides its findings, written before the model itself.
void write_rows(store::Store& store, const ModelRows& rows);

// The common case batched: a model whose findings the store holds already (or that showed none) is kept in
// memory with its rows (coverage facts, backend rows, refusal counts summed) and written with the others
// every kHitBatch models or kHitBatchAge, and at flush(): the rows, then the models in one transaction
// (Store::record_known). Models still in memory when a run is killed are run again on resume, like a
// model interrupted before its record, and give their rows again. Thread-safe.
class HitBatch {
 public:
  static constexpr size_t kHitBatch = 16;
  static constexpr std::chrono::milliseconds kHitBatchAge{1000};

  explicit HitBatch(store::Store& store) : store_(store) {}
  // Signatures the store holds (recorded before, or by this run).
  void stored(const std::vector<oracle::Finding>& findings);
  void stored(const std::string& signature);
  // Batches model `index` and takes its rows; false (rows untouched) when it shows a signature the store
  // does not hold yet: the caller writes it at once.
  bool add(const Evaluation& ev, int64_t index, ModelRows& rows);
  // Writes the batched models.
  void flush();

 private:
  void flush_locked();

  store::Store& store_;
  std::mutex mu_;
  std::set<std::string> stored_;
  std::vector<store::KnownModel> pending_;
  ModelRows pending_rows_;  // the pending models' rows
  std::chrono::steady_clock::time_point pending_since_;
};

}  // namespace quorum::campaign
