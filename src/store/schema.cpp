#include "store/schema.h"

namespace quorum::store {
namespace {

std::string type_name(ColumnType t, Engine e) {
  switch (t) {
    case ColumnType::kText:
      return "TEXT";
    case ColumnType::kInteger:
      return e == Engine::kSqlite ? "INTEGER" : "BIGINT";
    case ColumnType::kReal:
      return e == Engine::kSqlite ? "REAL" : "DOUBLE PRECISION";
  }
  return "TEXT";
}

std::string definition(const Column& c, Engine e) {
  std::string s = std::string(c.name) + " " + type_name(c.type, e);
  if (c.not_null) s += " NOT NULL";
  if (c.default_value) s += std::string(" DEFAULT ") + c.default_value;
  return s;
}

constexpr ColumnType kText = ColumnType::kText, kInteger = ColumnType::kInteger, kReal = ColumnType::kReal;

Column nullable(const char* name, ColumnType t) { return Column{name, t, false}; }
Column later(const char* name) { return Column{name, kText, false, nullptr, true}; }

}  // namespace

const std::vector<Table>& tables() {
  static const std::vector<Table> t = {
      {"findings",
       {{"signature", kText},
        {"kind", kText},
        {"stage", kText},
        {"backend", kText},
        nullable("op", kText),
        nullable("node", kText),
        nullable("params", kText),
        nullable("message", kText),
        nullable("detail", kText),
        nullable("distance", kReal),
        nullable("rate", kReal),
        {"hits", kInteger},
        {"first_model", kInteger},
        {"first_seen", kText},
        {"last_seen", kText},
        {"bundle", kText},
        later("known"),  // the ledger entry's id
        later("root_cause"),
        later("reduced")},
       {"signature"}},
      {"models", {{"idx", kInteger}, {"findings", kInteger}, {"done_at", kText}}, {"idx"}},
      {"settings", {{"key", kText}, {"value", kText}}, {"key"}},
      {"refusals",
       {{"backend", kText},
        {"refusal", kText},
        {"first_model", kInteger},
        {"refused", kInteger},
        {"not_sent", kInteger},
        {"ops", kText}},
       {"backend", "refusal"}},
      {"backend_models",
       {{"model", kInteger},
        {"backend", kText},
        {"ran", kInteger},
        {"crashed", kInteger},
        {"failed", kInteger},
        {"seconds", kReal}},
       {"model", "backend"}},
      {"coverage",
       {{"subject", kText},
        {"kind", kText},
        {"value", kText},
        {"first_model", kInteger},
        {"models", kInteger, true, "1", true}},
       {"subject", "kind", "value"}},
  };
  return t;
}

std::string create_table(const Table& t, Engine e) {
  std::string s = std::string("CREATE TABLE IF NOT EXISTS ") + t.name + " (";
  for (const Column& c : t.columns) s += definition(c, e) + ", ";
  s += "PRIMARY KEY (";
  for (size_t i = 0; i < t.key.size(); ++i) s += std::string(i ? ", " : "") + t.key[i];
  return s + "))";
}

std::string add_column(const Table& t, const Column& c, Engine e) {
  return std::string("ALTER TABLE ") + t.name + " ADD COLUMN " + (e == Engine::kPostgres ? "IF NOT EXISTS " : "") +
         definition(c, e);
}

}  // namespace quorum::store
