// The findings store's shared part (root causes, throughput, the choice of engine) and its SQLite
// engine. PostgreSQL: store_postgres.cpp.
#include "store/store.h"

#include <sqlite3.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <mutex>

#include "core/error.h"
#include "store/schema.h"

namespace quorum::store {

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string add_ops(const std::string& list, const std::vector<std::string>& ops) {
  std::string out = list;
  for (const auto& op : ops)
    if (("," + out + ",").find("," + op + ",") == std::string::npos) out += (out.empty() ? "" : ",") + op;
  return out;
}

std::vector<BackendCounts> Store::backend_counts() {
  std::map<std::string, BackendCounts> by;
  for (const StoredBackend& b : backend_models()) {
    StoredBackend& sum = by[b.backend].models;
    sum.backend = b.backend;
    ++sum.model;
    sum.ran += b.ran;
    sum.crashed += b.crashed;
    sum.failed += b.failed;
    sum.seconds += b.seconds;
  }
  for (const StoredRefusal& r : refusals()) {
    BackendCounts& c = by[r.backend];
    c.models.backend = r.backend;
    c.refused += r.refused;
    c.not_sent += r.not_sent;
    c.refusals.push_back(r);
  }
  std::vector<BackendCounts> out;
  for (auto& [name, c] : by) {
    std::stable_sort(c.refusals.begin(), c.refusals.end(),
                     [](const StoredRefusal& a, const StoredRefusal& b) { return a.first_model < b.first_model; });
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<RootCause> Store::root_causes() {
  struct Acc {
    RootCause rc;
    int64_t first = 0;
  };
  std::map<std::string, Acc> by_key;
  for (const StoredFinding& f : findings()) {
    const std::string key =
        !f.known.empty() ? "known:" + f.known : (!f.root_cause.empty() ? f.root_cause : f.signature);
    auto [it, fresh] = by_key.try_emplace(key);
    Acc& a = it->second;
    if (fresh) {
      a.rc.signature = key;
      a.first = f.first_model;
    }
    ++a.rc.findings;
    a.rc.hits += f.hits;
    a.first = std::min(a.first, f.first_model);
    a.rc.reduced = std::max(a.rc.reduced, f.reduced);
  }
  std::vector<Acc> all;
  for (auto& [k, a] : by_key) all.push_back(std::move(a));
  std::stable_sort(all.begin(), all.end(), [](const Acc& a, const Acc& b) { return a.first < b.first; });
  std::vector<RootCause> out;
  for (auto& a : all) out.push_back(std::move(a.rc));
  return out;
}

std::vector<std::pair<std::string, int64_t>> Store::models_per_second() {
  std::map<std::string, int64_t> per;
  for (const ModelRecord& m : models()) ++per[m.done_at];
  return {per.begin(), per.end()};
}

bool is_postgres_url(const std::string& spec) {
  return spec.rfind("postgresql://", 0) == 0 || spec.rfind("postgres://", 0) == 0;
}

std::unique_ptr<Store> open_store(const std::string& spec, const std::string& campaign_dir) {
  if (spec.empty()) return open_sqlite_store(campaign_dir);
  if (is_postgres_url(spec)) return open_postgres_store(spec);
  if (spec.find("://") != std::string::npos)
    throw core::UserError("--store: expected a directory or a postgresql:// URL, got '" + spec + "'");
  return open_sqlite_store(spec);
}

namespace {


// SQLite's error `rc` on `db` as Quorum's: a full disk is a SystemError (the campaign stops, what
// was committed stays), a file that is no findings store a UserError, anything else internal.
[[noreturn]] void sqlite_failed(sqlite3* db, int rc, const std::string& what = "") {
  const char* file = sqlite3_db_filename(db, "main");
  const std::string path = file && *file ? file : "findings.db";
  const std::string msg = what.empty() ? sqlite3_errmsg(db) : what;
  const int sys = sqlite3_system_errno(db);  // the failed system call's errno, for I/O errors
  switch (rc & 0xff) {
    case SQLITE_FULL: throw core::SystemError("no space left on device while writing " + path);
    case SQLITE_IOERR:
      if (sys == ENOSPC || sys == EDQUOT) throw core::SystemError("no space left on device while writing " + path);
      throw core::SystemError("cannot write " + path + ": " + msg +
                              (sys ? std::string(" (") + std::strerror(sys) + ")" : ""));
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT: throw core::UserError(path + ": not a Quorum findings store: " + msg);
    default: throw std::runtime_error(path + ": sqlite: " + msg);
  }
}

class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) {
    const int rc = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr);
    if (rc != SQLITE_OK) sqlite_failed(db, rc);
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt& bind(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.c_str(), -1, SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& bind(int i, double v) {
    sqlite3_bind_double(s_, i, v);
    return *this;
  }
  void reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  bool step() {
    const int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    sqlite_failed(sqlite3_db_handle(s_), rc);
  }
  std::string text(int c) {
    const unsigned char* t = sqlite3_column_text(s_, c);
    return t ? reinterpret_cast<const char*>(t) : "";
  }
  int64_t i64(int c) { return sqlite3_column_int64(s_, c); }
  double f64(int c) { return sqlite3_column_double(s_, c); }

 private:
  sqlite3_stmt* s_ = nullptr;
};

class SqliteStore final : public Store {
 public:
  explicit SqliteStore(const std::string& dir);
  ~SqliteStore() override { sqlite3_close(db_); }
  std::string where() const override { return path_; }
  void check_settings(const std::map<std::string, std::string>& settings) override;
  std::optional<std::string> setting(const std::string& key) override;
  std::map<std::string, std::string> settings() override;
  bool model_done(int64_t index) override;
  int64_t models_done() override;
  std::vector<ModelRecord> models() override;
  int record(int64_t index, const std::vector<oracle::Finding>& findings,
             const std::function<std::string(const oracle::Finding&)>& bundle_for) override;
  void record_known(const std::vector<KnownModel>& models) override;
  std::vector<StoredFinding> findings() override;
  void set_root_cause(const std::string& signature, const std::string& root_cause, const std::string& reduced,
                      const std::string& known) override;
  void insert(const std::vector<StoredFinding>& findings, const std::vector<ModelRecord>& models) override;
  void record_refusal(const std::string& backend, const std::string& refusal, int64_t model, int64_t refused,
                      int64_t not_sent, const std::vector<std::string>& ops) override;
  std::vector<StoredRefusal> refusals() override;
  void record_backend_models(const std::vector<StoredBackend>& rows) override;
  std::vector<StoredBackend> backend_models() override;
  void record_coverage(const std::vector<coverage::Fact>& facts) override;
  std::vector<coverage::Fact> coverage() override;

 private:
  void exec(const std::string& sql);
  // `body` in one IMMEDIATE transaction: committed, or rolled back and its exception rethrown (what
  // was committed before stays). The caller holds mu_.
  template <class Body>
  void tx(Body&& body) {
    exec("BEGIN IMMEDIATE");
    try {
      body();
      exec("COMMIT");
    } catch (...) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }
  // One complete findings row (record() for a new signature, insert() for merged rows). Caller holds mu_.
  void insert_row(const StoredFinding& f);
  sqlite3* db_ = nullptr;
  std::string path_;
  std::mutex mu_;
};

SqliteStore::SqliteStore(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw core::UserError(dir + ": cannot create the campaign directory: " + ec.message());
  path_ = dir + "/findings.db";
  const int opened = sqlite3_open(path_.c_str(), &db_);
  // A constructor that throws runs no destructor: the handle (allocated even when the open fails)
  // is closed here.
  try {
    if (opened != SQLITE_OK)
      throw core::UserError(path_ + ": cannot open the findings store: " + sqlite3_errmsg(db_));
    sqlite3_busy_timeout(db_, 10000);
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA synchronous=NORMAL");
    // Every table (schema.h); a store written before a column existed gets it.
    auto has_column = [&](const std::string& table, const std::string& name) {
      Stmt cols(db_, ("PRAGMA table_info(" + table + ")").c_str());
      while (cols.step())
        if (cols.text(1) == name) return true;
      return false;
    };
    for (const Table& t : tables()) {
      exec(create_table(t, Engine::kSqlite));
      for (const Column& c : t.columns)
        if (c.added_later && !has_column(t.name, c.name)) exec(add_column(t, c, Engine::kSqlite));
    }
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

void SqliteStore::insert_row(const StoredFinding& f) {
  Stmt ins(db_,
           "INSERT INTO findings (signature, kind, stage, backend, op, node, params, message, detail, distance,"
           " rate, hits, first_model, first_seen, last_seen, bundle, known, root_cause, reduced)"
           " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  ins.bind(1, f.signature)
      .bind(2, std::string(core::to_string(f.kind)))
      .bind(3, std::string(core::to_string(f.stage)))
      .bind(4, f.backend)
      .bind(5, f.op)
      .bind(6, f.node)
      .bind(7, f.params)
      .bind(8, f.message)
      .bind(9, f.detail)
      .bind(10, f.distance)
      .bind(11, f.rate)
      .bind(12, f.hits)
      .bind(13, f.first_model)
      .bind(14, f.first_seen)
      .bind(15, f.last_seen)
      .bind(16, f.bundle)
      .bind(17, f.known)
      .bind(18, f.root_cause)
      .bind(19, f.reduced);
  ins.step();
}

void SqliteStore::exec(const std::string& sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    sqlite_failed(db_, rc, msg);
  }
}

void SqliteStore::check_settings(const std::map<std::string, std::string>& settings) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [k, v] : settings) {
    Stmt get(db_, "SELECT value FROM settings WHERE key = ?");
    get.bind(1, k);
    if (get.step()) {
      const std::string have = get.text(0);
      if (have != v)
        throw core::UserError(path_ + ": this campaign ran with " + k + " = " + have + ", not " + v +
                              " (use another --out to start a new campaign)");
    } else {
      Stmt put(db_, "INSERT INTO settings (key, value) VALUES (?, ?)");
      put.bind(1, k).bind(2, v).step();
    }
  }
}

std::optional<std::string> SqliteStore::setting(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt get(db_, "SELECT value FROM settings WHERE key = ?");
  get.bind(1, key);
  if (get.step()) return get.text(0);
  return std::nullopt;
}

std::map<std::string, std::string> SqliteStore::settings() {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, std::string> out;
  Stmt get(db_, "SELECT key, value FROM settings");
  while (get.step()) out[get.text(0)] = get.text(1);
  return out;
}

std::vector<ModelRecord> SqliteStore::models() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ModelRecord> out;
  Stmt s(db_, "SELECT idx, findings, done_at FROM models ORDER BY idx");
  while (s.step()) out.push_back({s.i64(0), s.i64(1), s.text(2)});
  return out;
}

void SqliteStore::insert(const std::vector<StoredFinding>& findings, const std::vector<ModelRecord>& models) {
  std::lock_guard<std::mutex> lock(mu_);
  tx([&] {
    for (const StoredFinding& f : findings) {
      Stmt has(db_, "SELECT 1 FROM findings WHERE signature = ?");
      has.bind(1, f.signature);
      if (has.step()) throw core::UserError(path_ + ": already holds the finding " + f.signature);
      insert_row(f);
    }
    for (const ModelRecord& m : models) {
      Stmt has(db_, "SELECT 1 FROM models WHERE idx = ?");
      has.bind(1, m.index);
      if (has.step()) throw core::UserError(path_ + ": already holds model " + std::to_string(m.index));
      Stmt ins(db_, "INSERT INTO models (idx, findings, done_at) VALUES (?, ?, ?)");
      ins.bind(1, m.index).bind(2, m.findings).bind(3, m.done_at).step();
    }
  });
}

bool SqliteStore::model_done(int64_t index) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "SELECT 1 FROM models WHERE idx = ?");
  s.bind(1, index);
  return s.step();
}

int64_t SqliteStore::models_done() {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "SELECT COUNT(*) FROM models");
  s.step();
  return s.i64(0);
}

int SqliteStore::record(int64_t index, const std::vector<oracle::Finding>& findings,
                  const std::function<std::string(const oracle::Finding&)>& bundle_for) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string now = now_utc();
  int fresh = 0;
  // The findings committed before stay; this model's are undone on failure (it is run again on resume).
  tx([&] {
    for (const auto& f : findings) {
      const std::string sig = f.signature();
      Stmt get(db_, "SELECT hits FROM findings WHERE signature = ?");
      get.bind(1, sig);
      if (get.step()) {
        Stmt up(db_, "UPDATE findings SET hits = hits + 1, last_seen = ? WHERE signature = ?");
        up.bind(1, now).bind(2, sig).step();
        continue;
      }
      const std::string bundle = bundle_for(f);  // written and renamed into place before the commit
      StoredFinding row;
      row.signature = sig;
      row.kind = f.kind;
      row.stage = f.stage;
      row.backend = f.backend;
      row.op = f.op;
      row.node = f.node;
      row.params = f.params;
      row.message = f.message;
      row.detail = f.detail;
      row.distance = f.distance;
      row.rate = f.rate;
      row.hits = 1;
      row.first_model = index;
      row.first_seen = row.last_seen = now;
      row.bundle = bundle;
      row.known = f.known;
      insert_row(row);
      ++fresh;
    }
    Stmt done(db_, "INSERT OR REPLACE INTO models (idx, findings, done_at) VALUES (?, ?, ?)");
    done.bind(1, index).bind(2, static_cast<int64_t>(findings.size())).bind(3, now).step();
  });
  return fresh;
}

void SqliteStore::record_known(const std::vector<KnownModel>& models) {
  if (models.empty()) return;
  std::map<std::string, int64_t> hits;
  for (const KnownModel& m : models)
    for (const std::string& sig : m.signatures) ++hits[sig];
  std::lock_guard<std::mutex> lock(mu_);
  const std::string now = now_utc();
  // Undone together on failure: the models are run again on resume.
  tx([&] {
    Stmt up(db_, "UPDATE findings SET hits = hits + ?, last_seen = ? WHERE signature = ?");
    for (const auto& [sig, n] : hits) {
      up.bind(1, n).bind(2, now).bind(3, sig).step();
      up.reset();
    }
    Stmt done(db_, "INSERT OR REPLACE INTO models (idx, findings, done_at) VALUES (?, ?, ?)");
    for (const KnownModel& m : models) {
      done.bind(1, m.index).bind(2, static_cast<int64_t>(m.signatures.size())).bind(3, now).step();
      done.reset();
    }
  });
}

void SqliteStore::set_root_cause(const std::string& signature, const std::string& root_cause,
                                 const std::string& reduced, const std::string& known) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt up(db_,
          "UPDATE findings SET root_cause = ?, reduced = ?, known = COALESCE(NULLIF(?, ''), known) "
          "WHERE signature = ?");
  up.bind(1, root_cause).bind(2, reduced).bind(3, known).bind(4, signature).step();
}

void SqliteStore::record_refusal(const std::string& backend, const std::string& refusal, int64_t model, int64_t refused,
                           int64_t not_sent, const std::vector<std::string>& ops) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string known;
  {
    Stmt q(db_, "SELECT ops FROM refusals WHERE backend = ? AND refusal = ?");
    q.bind(1, backend).bind(2, refusal);
    if (q.step()) known = q.text(0);
  }
  const std::string list = add_ops(known, ops);
  Stmt up(db_,
          "INSERT INTO refusals (backend, refusal, first_model, refused, not_sent, ops) VALUES (?, ?, ?, ?, ?, ?)"
          " ON CONFLICT (backend, refusal) DO UPDATE SET refused = refused + excluded.refused,"
          " not_sent = not_sent + excluded.not_sent, first_model = MIN(first_model, excluded.first_model),"
          " ops = excluded.ops");
  up.bind(1, backend).bind(2, refusal).bind(3, model).bind(4, refused).bind(5, not_sent).bind(6, list).step();
}

std::vector<StoredRefusal> SqliteStore::refusals() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<StoredRefusal> out;
  Stmt s(db_,
         "SELECT backend, refusal, first_model, refused, not_sent, ops FROM refusals ORDER BY backend, first_model,"
         " refusal");
  while (s.step()) out.push_back({s.text(0), s.text(1), s.i64(2), s.i64(3), s.i64(4), s.text(5)});
  return out;
}

void SqliteStore::record_backend_models(const std::vector<StoredBackend>& rows) {
  if (rows.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  tx([&] {
    Stmt up(db_,
            "INSERT INTO backend_models (model, backend, ran, crashed, failed, seconds) VALUES (?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (model, backend) DO UPDATE SET ran = excluded.ran, crashed = excluded.crashed,"
            " failed = excluded.failed, seconds = excluded.seconds");
    for (const auto& b : rows) {
      up.bind(1, b.model).bind(2, b.backend).bind(3, b.ran).bind(4, b.crashed).bind(5, b.failed).bind(6, b.seconds);
      up.step();
      up.reset();
    }
  });
}

std::vector<StoredBackend> SqliteStore::backend_models() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<StoredBackend> out;
  Stmt s(db_, "SELECT backend, model, ran, crashed, failed, seconds FROM backend_models ORDER BY model, backend");
  while (s.step()) out.push_back({s.text(0), s.i64(1), s.i64(2), s.i64(3), s.i64(4), s.f64(5)});
  return out;
}

void SqliteStore::record_coverage(const std::vector<coverage::Fact>& facts) {
  if (facts.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  tx([&] {
    Stmt up(db_,
            "INSERT INTO coverage (subject, kind, value, first_model, models) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (subject, kind, value) DO UPDATE SET first_model = MIN(first_model, excluded.first_model),"
            " models = models + excluded.models");
    for (const auto& f : facts) {
      up.bind(1, f.subject).bind(2, std::string(coverage::to_string(f.kind))).bind(3, f.value);
      up.bind(4, f.model).bind(5, f.models).step();
      up.reset();
    }
  });
}

std::vector<coverage::Fact> SqliteStore::coverage() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<coverage::Fact> out;
  Stmt s(db_,
         "SELECT subject, kind, value, first_model, models FROM coverage ORDER BY first_model, subject, kind, value");
  while (s.step())  // a kind this version does not know (a later version's row) is skipped
    if (const auto kind = coverage::fact_kind_from_string(s.text(1)))
      out.push_back({s.text(0), *kind, s.text(2), s.i64(3), s.i64(4)});
  return out;
}

std::vector<StoredFinding> SqliteStore::findings() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<StoredFinding> out;
  Stmt s(
      db_,
      "SELECT signature, kind, stage, backend, op, node, params, message, detail, bundle, distance, rate, hits,"
      " first_model, first_seen, last_seen, known, root_cause, reduced FROM findings ORDER BY first_model, signature");
  while (s.step()) {
    StoredFinding f;
    f.signature = s.text(0);
    f.kind = core::finding_kind_from_string(s.text(1));
    f.stage = core::stage_from_string(s.text(2));
    f.backend = s.text(3);
    f.op = s.text(4);
    f.node = s.text(5);
    f.params = s.text(6);
    f.message = s.text(7);
    f.detail = s.text(8);
    f.bundle = s.text(9);
    f.distance = s.f64(10);
    f.rate = s.f64(11);
    f.hits = s.i64(12);
    f.first_model = s.i64(13);
    f.first_seen = s.text(14);
    f.last_seen = s.text(15);
    f.known = s.text(16);
    f.root_cause = s.text(17);
    f.reduced = s.text(18);
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace

std::unique_ptr<Store> open_sqlite_store(const std::string& dir) { return std::make_unique<SqliteStore>(dir); }

}  // namespace quorum::store
