// The findings store's tables, written once: each engine (store.cpp, SQLite; store_postgres.cpp,
// PostgreSQL) creates them from this list in its own column types, and adds to a store written before
// a column existed the columns marked as added later.
#pragma once
#include <string>
#include <vector>

namespace quorum::store {

enum class Engine { kSqlite, kPostgres };
enum class ColumnType { kText, kInteger, kReal };

struct Column {
  const char* name;
  ColumnType type;
  bool not_null = true;
  const char* default_value = nullptr;  // SQL text, or none
  bool added_later = false;             // older stores lack it: add_column adds it
};

struct Table {
  const char* name;
  std::vector<Column> columns;
  std::vector<const char*> key;  // the primary key's columns
};

// findings, models, settings, refusals, backend_models, coverage.
const std::vector<Table>& tables();

// "CREATE TABLE IF NOT EXISTS name (...)" with every column, in the engine's types.
std::string create_table(const Table& t, Engine e);
// "ALTER TABLE name ADD COLUMN ..." (PostgreSQL: IF NOT EXISTS; SQLite's caller asks the table first).
std::string add_column(const Table& t, const Column& c, Engine e);

}  // namespace quorum::store
