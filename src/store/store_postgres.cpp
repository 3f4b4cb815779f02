// The PostgreSQL findings store (libpq): the SQLite store's schema and semantics in a server that
// shards of one campaign on many machines write to at once (docs/findings.md).
//
// What makes concurrent shards safe: record() is one transaction; a finding is an INSERT ... ON
// CONFLICT DO UPDATE SET hits = hits + 1, so hits are counted by the server; the row of a new
// signature is inserted before its bundle is written, so a second shard finding the same
// signature at the same time waits on that row and, once the first commits, only increments its
// hits (it never writes a second bundle; if the first rolls back, the second inserts and writes
// it). Signatures are taken in sorted order, so two transactions never wait on each other in a
// cycle.
#include <libpq-fe.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <numeric>

#include "store/store.h"
#include "core/error.h"
#include "store/schema.h"

namespace quorum::store {

namespace {

std::string num(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// The URL without its password, for messages.
std::string redact(const std::string& url) {
  const size_t scheme = url.find("://");
  const size_t at = url.find('@', scheme + 3);
  const size_t slash = url.find('/', scheme + 3);
  if (scheme == std::string::npos || at == std::string::npos || (slash != std::string::npos && slash < at)) return url;
  const size_t colon = url.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at) return url;
  return url.substr(0, colon) + ":***" + url.substr(at);
}

// One query's result; throws with the server's message when it failed.
class Result {
 public:
  Result(PGresult* r, PGconn* conn, const std::string& where) : r_(r) {
    const ExecStatusType st = PQresultStatus(r_);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
      std::string msg = r_ ? PQresultErrorMessage(r_) : "";
      if (msg.empty()) msg = PQerrorMessage(conn);
      while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
      PQclear(r_);
      throw std::runtime_error(where + ": " + msg);
    }
  }
  ~Result() { PQclear(r_); }
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;
  int rows() const { return PQntuples(r_); }
  std::string text(int row, int col) const { return PQgetvalue(r_, row, col); }
  int64_t i64(int row, int col) const { return std::stoll(PQgetvalue(r_, row, col)); }
  double f64(int row, int col) const {
    if (PQgetisnull(r_, row, col)) return 0;
    return std::strtod(PQgetvalue(r_, row, col), nullptr);  // "NaN", "Infinity" too
  }

 private:
  PGresult* r_;
};

class PostgresStore final : public Store {
 public:
  explicit PostgresStore(const std::string& url) : where_(redact(url)) {
    conn_ = PQconnectdb(url.c_str());
    if (PQstatus(conn_) != CONNECTION_OK) {
      std::string msg = PQerrorMessage(conn_);
      while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
      PQfinish(conn_);
      throw core::UserError(where_ + ": cannot connect to the findings store: " + msg);
    }
    PQsetNoticeProcessor(
        conn_, [](void*, const char*) {}, nullptr);  // "relation exists, skipping"
    // Shards starting together: CREATE TABLE IF NOT EXISTS is not safe against itself, so the
    // schema is created under a transaction-wide advisory lock.
    try {
      create_tables();
    } catch (const std::runtime_error& e) {
      PQfinish(conn_);
      throw core::UserError(std::string("cannot create the findings tables: ") + e.what());
    }
  }
  ~PostgresStore() override { PQfinish(conn_); }

  void create_tables() {
    tx([&] {
      q("SELECT pg_advisory_xact_lock(7020826)");
      for (const Table& t : tables()) {
        q(create_table(t, Engine::kPostgres));
        for (const Column& c : t.columns)
          if (c.added_later) q(add_column(t, c, Engine::kPostgres));
      }
    });
  }

  std::string where() const override { return where_; }

  void check_settings(const std::map<std::string, std::string>& settings) override {
    std::lock_guard<std::mutex> lock(mu_);
    tx([&] {
      for (const auto& [k, v] : settings) {
        // The first shard's insert wins; every other waits for it, then compares.
        q("INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING", {k, v});
        const Result r = q("SELECT value FROM settings WHERE key = $1", {k});
        const std::string have = r.text(0, 0);
        if (have != v)
          throw core::UserError(where_ + ": this campaign ran with " + k + " = " + have + ", not " + v +
                                " (use another --store to start a new campaign)");
      }
    });
  }

  std::optional<std::string> setting(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    const Result r = q("SELECT value FROM settings WHERE key = $1", {key});
    if (r.rows() == 0) return std::nullopt;
    return r.text(0, 0);
  }

  std::map<std::string, std::string> settings() override {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<std::string, std::string> out;
    const Result r = q("SELECT key, value FROM settings");
    for (int i = 0; i < r.rows(); ++i) out[r.text(i, 0)] = r.text(i, 1);
    return out;
  }

  bool model_done(int64_t index) override {
    std::lock_guard<std::mutex> lock(mu_);
    return q("SELECT 1 FROM models WHERE idx = $1", {std::to_string(index)}).rows() > 0;
  }

  int64_t models_done() override {
    std::lock_guard<std::mutex> lock(mu_);
    return q("SELECT COUNT(*) FROM models").i64(0, 0);
  }

  std::vector<ModelRecord> models() override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<ModelRecord> out;
    const Result r = q("SELECT idx, findings, done_at FROM models ORDER BY idx");
    for (int i = 0; i < r.rows(); ++i) out.push_back({r.i64(i, 0), r.i64(i, 1), r.text(i, 2)});
    return out;
  }

  int record(int64_t index, const std::vector<oracle::Finding>& findings,
             const std::function<std::string(const oracle::Finding&)>& bundle_for) override {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string now = now_utc();
    const std::string idx = std::to_string(index);
    // Row locks taken in signature order: no two shards' transactions wait on each other in a cycle.
    std::vector<size_t> order(findings.size());
    std::iota(order.begin(), order.end(), 0);
    std::vector<std::string> sigs;
    for (const auto& f : findings) sigs.push_back(f.signature());
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sigs[a] < sigs[b]; });
    int fresh = 0;
    tx([&] {
      for (const size_t i : order) {
        const oracle::Finding& f = findings[i];
        // xmax = 0: this transaction inserted the row (a conflict updates it instead).
        const Result r =
            q("INSERT INTO findings (signature, kind, stage, backend, op, node, params, message, detail, distance,"
              " rate, hits, first_model, first_seen, last_seen, bundle, known)"
              " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 1, $12, $13, $13, '', $14)"
              " ON CONFLICT (signature) DO UPDATE SET hits = findings.hits + 1, last_seen = EXCLUDED.last_seen"
              " RETURNING (xmax = 0)",
              {sigs[i], std::string(oracle::to_string(f.kind)), std::string(oracle::to_string(f.stage)), f.backend,
               f.op, f.node, f.params, f.message, f.detail, num(f.distance), num(f.rate), idx, now, f.known});
        if (r.text(0, 0) != "t") continue;
        const std::string bundle = bundle_for(f);  // written and renamed into place before the commit
        q("UPDATE findings SET bundle = $1 WHERE signature = $2", {bundle, sigs[i]});
        ++fresh;
      }
      q("INSERT INTO models (idx, findings, done_at) VALUES ($1, $2, $3)"
        " ON CONFLICT (idx) DO UPDATE SET findings = EXCLUDED.findings, done_at = EXCLUDED.done_at",
        {idx, std::to_string(findings.size()), now});
    });
    return fresh;
  }

  void record_known(const std::vector<KnownModel>& models) override {
    if (models.empty()) return;
    std::map<std::string, int64_t> hits;  // in signature order: row locks taken as record() takes them
    for (const KnownModel& m : models)
      for (const std::string& sig : m.signatures) ++hits[sig];
    std::lock_guard<std::mutex> lock(mu_);
    const std::string now = now_utc();
    tx([&] {
      for (const auto& [sig, n] : hits)
        q("UPDATE findings SET hits = hits + $1, last_seen = $2 WHERE signature = $3", {std::to_string(n), now, sig});
      for (const KnownModel& m : models)
        q("INSERT INTO models (idx, findings, done_at) VALUES ($1, $2, $3)"
          " ON CONFLICT (idx) DO UPDATE SET findings = EXCLUDED.findings, done_at = EXCLUDED.done_at",
          {std::to_string(m.index), std::to_string(m.signatures.size()), now});
    });
  }

  std::vector<StoredFinding> findings() override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<StoredFinding> out;
    const Result r =
        q("SELECT signature, kind, stage, backend, op, node, params, message, detail, bundle, distance, rate, hits,"
          " first_model, first_seen, last_seen, known, root_cause, reduced FROM findings"
          " ORDER BY first_model, signature COLLATE \"C\"");
    for (int i = 0; i < r.rows(); ++i) {
      StoredFinding f;
      f.signature = r.text(i, 0);
      f.kind = core::finding_kind_from_string(r.text(i, 1));
      f.stage = core::stage_from_string(r.text(i, 2));
      f.backend = r.text(i, 3);
      f.op = r.text(i, 4);
      f.node = r.text(i, 5);
      f.params = r.text(i, 6);
      f.message = r.text(i, 7);
      f.detail = r.text(i, 8);
      f.bundle = r.text(i, 9);
      f.distance = r.f64(i, 10);
      f.rate = r.f64(i, 11);
      f.hits = r.i64(i, 12);
      f.first_model = r.i64(i, 13);
      f.first_seen = r.text(i, 14);
      f.last_seen = r.text(i, 15);
      f.known = r.text(i, 16);
      f.root_cause = r.text(i, 17);
      f.reduced = r.text(i, 18);
      out.push_back(std::move(f));
    }
    return out;
  }

  void set_root_cause(const std::string& signature, const std::string& root_cause, const std::string& reduced,
                      const std::string& known) override {
    std::lock_guard<std::mutex> lock(mu_);
    q("UPDATE findings SET root_cause = $1, reduced = $2, known = COALESCE(NULLIF($3, ''), known) WHERE signature = $4",
      {root_cause, reduced, known, signature});
  }

  void insert(const std::vector<StoredFinding>& findings, const std::vector<ModelRecord>& models) override {
    std::lock_guard<std::mutex> lock(mu_);
    tx([&] {
      for (const StoredFinding& f : findings) {
        const Result r =
            q("INSERT INTO findings (signature, kind, stage, backend, op, node, params, message, detail, distance,"
              " rate, hits, first_model, first_seen, last_seen, bundle, known, root_cause, reduced)"
              " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)"
              " ON CONFLICT (signature) DO NOTHING RETURNING 1",
              {f.signature, std::string(core::to_string(f.kind)), std::string(core::to_string(f.stage)), f.backend,
               f.op, f.node, f.params, f.message, f.detail, num(f.distance), num(f.rate), std::to_string(f.hits),
               std::to_string(f.first_model), f.first_seen, f.last_seen, f.bundle, f.known, f.root_cause, f.reduced});
        if (r.rows() == 0) throw core::UserError(where_ + ": already holds the finding " + f.signature);
      }
      for (const ModelRecord& m : models) {
        const Result r =
            q("INSERT INTO models (idx, findings, done_at) VALUES ($1, $2, $3)"
              " ON CONFLICT (idx) DO NOTHING RETURNING 1",
              {std::to_string(m.index), std::to_string(m.findings), m.done_at});
        if (r.rows() == 0) throw core::UserError(where_ + ": already holds model " + std::to_string(m.index));
      }
    });
  }

  void record_refusal(const std::string& backend, const std::string& refusal, int64_t model, int64_t refused,
                      int64_t not_sent, const std::vector<std::string>& ops) override {
    std::lock_guard<std::mutex> lock(mu_);
    tx([&] {
      // Shards learning the same refusal at once: the row is created once, then locked while its
      // operator list is extended.
      q("INSERT INTO refusals (backend, refusal, first_model, refused, not_sent, ops) VALUES ($1, $2, $3, 0, 0, '')"
        " ON CONFLICT (backend, refusal) DO NOTHING",
        {backend, refusal, std::to_string(model)});
      const Result r =
          q("SELECT ops FROM refusals WHERE backend = $1 AND refusal = $2 FOR UPDATE", {backend, refusal});
      q("UPDATE refusals SET refused = refused + $3, not_sent = not_sent + $4, first_model = LEAST(first_model, $5),"
        " ops = $6 WHERE backend = $1 AND refusal = $2",
        {backend, refusal, std::to_string(refused), std::to_string(not_sent), std::to_string(model),
         add_ops(r.text(0, 0), ops)});
    });
  }

  std::vector<StoredRefusal> refusals() override {
    std::lock_guard<std::mutex> lock(mu_);
    const Result r = q(
        "SELECT backend, refusal, first_model, refused, not_sent, ops FROM refusals ORDER BY backend, first_model,"
        " refusal");
    std::vector<StoredRefusal> out;
    for (int i = 0; i < r.rows(); ++i)
      out.push_back({r.text(i, 0), r.text(i, 1), r.i64(i, 2), r.i64(i, 3), r.i64(i, 4), r.text(i, 5)});
    return out;
  }

  void record_backend_models(const std::vector<StoredBackend>& rows) override {
    if (rows.empty()) return;
    std::lock_guard<std::mutex> lock(mu_);
    tx([&] {
      for (const auto& b : rows) {
        char seconds[64];
        std::snprintf(seconds, sizeof seconds, "%.17g", b.seconds);
        q("INSERT INTO backend_models (model, backend, ran, crashed, failed, seconds) VALUES ($1, $2, $3, $4, $5, $6)"
          " ON CONFLICT (model, backend) DO UPDATE SET ran = excluded.ran, crashed = excluded.crashed,"
          " failed = excluded.failed, seconds = excluded.seconds",
          {std::to_string(b.model), b.backend, std::to_string(b.ran), std::to_string(b.crashed),
           std::to_string(b.failed), seconds});
      }
    });
  }

  std::vector<StoredBackend> backend_models() override {
    std::lock_guard<std::mutex> lock(mu_);
    const Result r =
        q("SELECT backend, model, ran, crashed, failed, seconds FROM backend_models"
          " ORDER BY model, backend COLLATE \"C\"");
    std::vector<StoredBackend> out;
    for (int i = 0; i < r.rows(); ++i)
      out.push_back({r.text(i, 0), r.i64(i, 1), r.i64(i, 2), r.i64(i, 3), r.i64(i, 4), r.f64(i, 5)});
    return out;
  }

  void record_coverage(const std::vector<coverage::Fact>& facts) override {
    if (facts.empty()) return;
    std::lock_guard<std::mutex> lock(mu_);
    tx([&] {
      for (const auto& f : facts)
        q("INSERT INTO coverage (subject, kind, value, first_model, models) VALUES ($1, $2, $3, $4, $5)"
          " ON CONFLICT (subject, kind, value) DO UPDATE SET first_model = LEAST(coverage.first_model,"
          " excluded.first_model), models = coverage.models + excluded.models",
          {f.subject, coverage::to_string(f.kind), f.value, std::to_string(f.model), std::to_string(f.models)});
    });
  }

  std::vector<coverage::Fact> coverage() override {
    std::lock_guard<std::mutex> lock(mu_);
    const Result r = q(
        "SELECT subject, kind, value, first_model, models FROM coverage"
        " ORDER BY first_model, subject COLLATE \"C\", kind COLLATE \"C\", value COLLATE \"C\"");
    std::vector<coverage::Fact> out;
    for (int i = 0; i < r.rows(); ++i)  // a kind this version does not know (a later version's row) is skipped
      if (const auto kind = coverage::fact_kind_from_string(r.text(i, 1)))
        out.push_back({r.text(i, 0), *kind, r.text(i, 2), r.i64(i, 3), r.i64(i, 4)});
    return out;
  }

 private:
  Result q(const std::string& sql, const std::vector<std::string>& params = {}) {
    // A connection lost (a server restart) is opened again before the next transaction or
    // single statement; inside a transaction the failed statement has already thrown.
    if (!in_tx_ && (lost_ || PQstatus(conn_) != CONNECTION_OK)) {
      PQreset(conn_);
      lost_ = false;
    }
    std::vector<const char*> values;
    for (const auto& p : params) values.push_back(p.c_str());
    PGresult* r = PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                               values.empty() ? nullptr : values.data(), nullptr, nullptr, 0);
    // An error without an SQLSTATE is the client's own: the connection failed.
    const ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && (!r || !PQresultErrorField(r, PG_DIAG_SQLSTATE)))
      lost_ = true;
    return Result(r, conn_, where_);
  }

  // `body` in one transaction: committed when it returns, rolled back when it throws.
  template <class F>
  void tx(F&& body) {
    q("BEGIN");
    in_tx_ = true;
    try {
      body();
      q("COMMIT");
    } catch (...) {
      PQclear(PQexec(conn_, "ROLLBACK"));
      in_tx_ = false;
      throw;
    }
    in_tx_ = false;
  }

  PGconn* conn_ = nullptr;
  bool in_tx_ = false, lost_ = false;
  const std::string where_;
  std::mutex mu_;
};

}  // namespace

std::unique_ptr<Store> open_postgres_store(const std::string& url) { return std::make_unique<PostgresStore>(url); }

}  // namespace quorum::store
