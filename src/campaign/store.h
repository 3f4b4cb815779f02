// The findings store: SQLite (WAL) in the campaign directory, one row per unique finding (by
// signature) with hit counts, first/last seen and its bundle, plus the models already done, so
// the same --out resumes where it stopped. Schema: docs/findings.md.
#pragma once
#include <map>
#include <mutex>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "oracle/oracle.h"

struct sqlite3;

namespace quorum::campaign {

struct StoredFinding {
  std::string signature;
  core::FindingKind kind = core::FindingKind::Inconsistency;
  core::Stage stage = core::Stage::Forward;
  std::string backend, op, node, params, message, detail, bundle;
  double distance = 0, rate = 0;
  int64_t hits = 0, first_model = 0;
  std::string first_seen, last_seen;
  std::string known;  // the known-issue ledger entry this finding matches, or empty
  std::string root_cause, reduced;  // the reduced case's key and directory (empty: not reduced yet)
};

// Findings merged by the key of their reduced case (a finding not reduced is its own root cause).
struct RootCause {
  std::string signature;
  int64_t findings = 0, hits = 0;
  std::string reduced;  // one reduced bundle of it
};

// A refusal a backend declared (backends::Refusal, its key) and what the campaign did with it.
struct StoredRefusal {
  std::string backend, refusal;  // the backend spec and the refusal's key ("Erf (ONNX opset 13)")
  int64_t first_model = 0;
  int64_t refused = 0;   // models the backend refused with it
  int64_t not_sent = 0;  // models the campaign kept from the backend because of it
  std::string ops;       // the catalogue operators of the nodes it covered, comma-separated
};

class Store {
 public:
  // Opens (creating) DIR/findings.db. UserError when DIR cannot hold it.
  explicit Store(const std::string& dir);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Campaign settings: the first run writes them; a resumed run must match (UserError otherwise).
  void check_settings(const std::map<std::string, std::string>& settings);
  std::optional<std::string> setting(const std::string& key);

  bool model_done(int64_t index);
  int64_t models_done();
  // Records a finished model and its findings atomically. For a signature seen for the first
  // time `bundle_for` is called (it writes the bundle and returns its path) before the commit.
  // Returns how many of the findings were new.
  int record(int64_t index, const std::vector<oracle::Finding>& findings,
             const std::function<std::string(const oracle::Finding&)>& bundle_for);

  std::vector<StoredFinding> findings();
  void set_root_cause(const std::string& signature, const std::string& root_cause, const std::string& reduced);
  std::vector<RootCause> root_causes();
  // Models finished per second of wall-clock time (ISO time, count), in time order: the campaign's
  // throughput over time for reports.
  std::vector<std::pair<std::string, int64_t>> models_per_second();

  // Learned refusals (docs/findings.md): adds `refused` and `not_sent` models to the refusal's counts
  // (creating it, first seen in model `model`), and the catalogue operators `ops` to its list.
  void record_refusal(const std::string& backend, const std::string& refusal, int64_t model, int64_t refused,
                      int64_t not_sent, const std::vector<std::string>& ops);
  std::vector<StoredRefusal> refusals();

 private:
  void exec(const std::string& sql);
  sqlite3* db_ = nullptr;
  std::string path_;
  std::mutex mu_;
};

}  // namespace quorum::campaign
