// The findings store: one row per unique finding (by signature) with hit counts, first/last seen
// and its bundle, the models already done (so a campaign resumes where it stopped) and the
// campaign's settings. Two engines behind one interface, chosen by open_store(): SQLite (WAL) in
// the campaign directory, the embedded default, and PostgreSQL through libpq (`--store
// postgresql://...`), which shards of one campaign on many machines write to at once. Both keep
// the same schema and semantics: docs/findings.md.
//
// Adding a method: declare it pure virtual here, implement it in SqliteStore (store.cpp) and in
// PostgresStore (store_postgres.cpp); a method computable from the others (root_causes,
// models_per_second) is written once, here, on top of them.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "coverage/coverage.h"
#include "oracle/oracle.h"

namespace quorum::store {

struct StoredFinding {
  std::string signature;
  core::FindingKind kind = core::FindingKind::Inconsistency;
  core::Stage stage = core::Stage::Forward;
  std::string backend, op, node, params, message, detail, bundle;
  double distance = 0, rate = 0;
  int64_t hits = 0, first_model = 0;
  std::string first_seen, last_seen;
  std::string known;                // the known-issue ledger entry this finding matches, or empty
  std::string root_cause, reduced;  // the reduced case's key and directory (empty: not reduced yet)
};

// One finished model: its index, how many findings it showed, when (ISO time, UTC).
struct ModelRecord {
  int64_t index = 0, findings = 0;
  std::string done_at;
};

// A finished model whose findings the store holds already: their signatures, one per hit.
struct KnownModel {
  int64_t index = 0;
  std::vector<std::string> signatures;
};

// The current time as the stores stamp rows with it (ISO 8601, UTC, seconds).
std::string now_utc();
// `list` (comma-separated) with the operators of `ops` it lacks appended: a refusal's operator list.
std::string add_ops(const std::string& list, const std::vector<std::string>& ops);

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

// What one backend did with one model (or, summed, with a campaign's models), beside its refusals
// (StoredRefusal rows): sent and not refused (`ran`), of those the ones its worker crashed, hung or ran
// out of memory on (`crashed`) and the ones it failed otherwise (a conversion failure, a library error:
// `failed`), and its worker's compile and run time.
struct StoredBackend {
  std::string backend;  // the backend spec
  int64_t model = 0;
  int64_t ran = 0, crashed = 0, failed = 0;
  double seconds = 0;
};

// One backend's share of a campaign: its StoredBackend rows summed (model: how many), with its refusal
// rows (the reasons it refused models for, and the learned refusals models were not sent to it for).
struct BackendCounts {
  StoredBackend models;
  int64_t refused = 0, not_sent = 0;
  std::vector<StoredRefusal> refusals;  // by first model
};

class Store {
 public:
  virtual ~Store() = default;
  Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Where the store is, for messages (DIR/findings.db, or the URL without its password).
  virtual std::string where() const = 0;

  // Campaign settings: the first run writes them; a resumed run (or another shard) must match
  // (UserError otherwise).
  virtual void check_settings(const std::map<std::string, std::string>& settings) = 0;
  virtual std::optional<std::string> setting(const std::string& key) = 0;
  virtual std::map<std::string, std::string> settings() = 0;

  virtual bool model_done(int64_t index) = 0;
  virtual int64_t models_done() = 0;
  virtual std::vector<ModelRecord> models() = 0;  // in index order
  // Records a finished model and its findings atomically. For a signature seen for the first
  // time `bundle_for` is called (it writes the bundle and returns its path) before the commit;
  // hits of a known signature are incremented. Returns how many of the findings were new.
  virtual int record(int64_t index, const std::vector<oracle::Finding>& findings,
                     const std::function<std::string(const oracle::Finding&)>& bundle_for) = 0;

  // Records finished models whose findings the store holds already, in one transaction: each
  // signature's hits incremented (a signature not in the store is skipped), each model done. A
  // campaign batches its common case here (models that showed nothing new).
  virtual void record_known(const std::vector<KnownModel>& models) = 0;

  virtual std::vector<StoredFinding> findings() = 0;  // by first model, then signature
  // The finding's root cause (the key of its reduced case) and reduced bundle; `known`, when not
  // empty, the ledger entry its reduced case matches, which becomes the finding's own label (the campaign
  // passes one where its signature matched no entry, since a node failing on the wrong shape an upstream
  // node gave it is the upstream node's entry, or where the finding is a crash naming no node).
  virtual void set_root_cause(const std::string& signature, const std::string& root_cause, const std::string& reduced,
                              const std::string& known = "") = 0;
  // Adds complete rows as they are, in one transaction (quorum merge builds them). UserError when
  // a signature or a model index is already in the store.
  virtual void insert(const std::vector<StoredFinding>& findings, const std::vector<ModelRecord>& models) = 0;

  // Findings grouped by root cause: a ledger entry ("known:ID"), else the reduced case's key, else
  // the signature; ordered by their first model.
  std::vector<RootCause> root_causes();
  // Models finished per second of wall-clock time (ISO time, count), in time order: the campaign's
  // throughput over time for reports.
  std::vector<std::pair<std::string, int64_t>> models_per_second();
  // Per backend (by name): backend_models() with its refusal rows and their totals; a backend with
  // only refusals is listed too.
  std::vector<BackendCounts> backend_counts();

  // Learned refusals (docs/findings.md): adds `refused` and `not_sent` models to the refusal's counts
  // (creating it, first seen in model `model`), and the catalogue operators `ops` to its list.
  virtual void record_refusal(const std::string& backend, const std::string& refusal, int64_t model,
                              int64_t refused, int64_t not_sent, const std::vector<std::string>& ops) = 0;
  virtual std::vector<StoredRefusal> refusals() = 0;  // by backend, first model, refusal
  // Per-backend counts, one row per model and backend (in one transaction): a row already stored for
  // that model and backend is replaced, so a model redone after an interruption counts once.
  virtual void record_backend_models(const std::vector<StoredBackend>& rows) = 0;
  virtual std::vector<StoredBackend> backend_models() = 0;  // by model, then backend

  // Coverage facts (coverage/coverage.h): added in one transaction; a fact already stored keeps the
  // earlier of its two first models. A campaign records a model's new facts before the model itself,
  // so a model interrupted between the two is redone and its facts stay.
  virtual void record_coverage(const std::vector<coverage::Fact>& facts) = 0;
  virtual std::vector<coverage::Fact> coverage() = 0;  // by first model, then subject, kind, value
};

// True for a PostgreSQL connection URL (postgresql://... or postgres://...).
bool is_postgres_url(const std::string& spec);

// The store a campaign names with --store: empty, the SQLite store DIR/findings.db of the campaign
// directory (created); a postgresql:// or postgres:// URL, that PostgreSQL database (its tables
// created when missing); any other value, the SQLite store in that directory. UserError when it
// cannot be opened.
std::unique_ptr<Store> open_store(const std::string& spec, const std::string& campaign_dir);

// The SQLite store DIR/findings.db (created).
std::unique_ptr<Store> open_sqlite_store(const std::string& dir);
// The PostgreSQL store at a libpq connection URL.
std::unique_ptr<Store> open_postgres_store(const std::string& url);

}  // namespace quorum::store
