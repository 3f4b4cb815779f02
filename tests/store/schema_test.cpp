// The store's one schema: both engines create every table from it, each in its own types, and a SQLite store
// written before the later columns existed gets them when it is opened (its rows kept).
#include "store/schema.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <string>

#include "run_quorum.h"
#include "store/store.h"

namespace quorum::store {
namespace {

namespace fs = std::filesystem;

void exec(sqlite3* db, const std::string& sql) {
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db) << ": " << sql;
}

TEST(StoreSchema, EachEngineCreatesEveryTableInItsOwnTypes) {
  ASSERT_EQ(tables().size(), 6u);
  for (const Table& t : tables()) {
    const std::string lite = create_table(t, Engine::kSqlite), pg = create_table(t, Engine::kPostgres);
    EXPECT_EQ(lite.find("BIGINT"), std::string::npos) << lite;
    EXPECT_EQ(pg.find("INTEGER"), std::string::npos) << pg;
    EXPECT_EQ(pg.find(" REAL"), std::string::npos) << pg;
    EXPECT_NE(lite.find("PRIMARY KEY ("), std::string::npos) << lite;
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
  for (const Table& t : tables()) exec(db, create_table(t, Engine::kSqlite));
  exec(db, "INSERT INTO coverage (subject, kind, value, first_model) VALUES ('a', 'ran', 'x', 3)");
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT models FROM coverage", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int64(st, 0), 1) << "the column's default";
  sqlite3_finalize(st);
  sqlite3_close(db);
}

TEST(StoreSchema, AStoreWrittenBeforeTheLaterColumnsGetsThemAndKeepsItsRows) {
  const fs::path dir = testing::scratch("schema_old");
  fs::remove_all(dir);
  fs::create_directories(dir);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir / "findings.db").c_str(), &db), SQLITE_OK);
  // The first stores' findings and coverage tables.
  exec(db,
       "CREATE TABLE findings (signature TEXT PRIMARY KEY, kind TEXT NOT NULL, stage TEXT NOT NULL, backend TEXT NOT "
       "NULL, op TEXT, node TEXT, params TEXT, message TEXT, detail TEXT, distance REAL, rate REAL, hits INTEGER NOT "
       "NULL, first_model INTEGER NOT NULL, first_seen TEXT NOT NULL, last_seen TEXT NOT NULL, bundle TEXT NOT NULL)");
  exec(db,
       "CREATE TABLE coverage (subject TEXT NOT NULL, kind TEXT NOT NULL, value TEXT NOT NULL, first_model INTEGER NOT "
       "NULL, PRIMARY KEY (subject, kind, value))");
  exec(db,
       "INSERT INTO findings VALUES ('nan|FC|faulty|exp', 'nan', 'FC', 'faulty', 'exp', 'e', '', 'm', 'd', "
       "0, 0, 4, 7, 't0', 't1', 'bundles/x')");
  sqlite3_close(db);

  const auto store = open_sqlite_store(dir.string());
  const auto found = store->findings();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].signature, "nan|FC|faulty|exp");
  EXPECT_EQ(found[0].hits, 4);
  EXPECT_EQ(found[0].known, "");
  EXPECT_EQ(found[0].root_cause, "");
  ASSERT_EQ(sqlite3_open((dir / "findings.db").c_str(), &db), SQLITE_OK);
  for (const Table& t : tables())
    for (const Column& c : t.columns) {
      const std::string sql = std::string("SELECT ") + c.name + " FROM " + t.name;
      sqlite3_stmt* st = nullptr;
      EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sql << ": " << sqlite3_errmsg(db);
      sqlite3_finalize(st);
    }
  sqlite3_close(db);
}

}  // namespace
}  // namespace quorum::store
