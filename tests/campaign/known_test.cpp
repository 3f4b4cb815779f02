// The known-issue ledger: loading (malformed files are one clear error), matching campaign
// signatures, and re-running entries (an entry that no longer reproduces is reported stale).
#include "campaign/known_check.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "oracle/known.h"

namespace quorum::campaign {
namespace {

namespace fs = std::filesystem;

// A ledger folder with one backend's file.
std::string ledger_dir(const std::string& name, const std::string& backend, const std::string& body) {
  const fs::path d = fs::temp_directory_path() / ("quorum_known_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d / backend);
  std::ofstream(d / backend / "known_differences.json") << body;
  return d.string();
}

// relu after log: log of a negative input is the model's own NaN, which relu must keep; the planted
// relu-nan-to-zero fault swallows it.
std::string entry(const std::string& backend) {
  return R"({"format": "quorum.known", "backend": "faulty", "entries": [
    {"id": "faulty-relu-nan", "backend": ")" + backend + R"(", "class": "bug",
     "signature": "nan-swallowed|FC|faulty|relu", "note": "relu turns NaN into 0",
     "case": {"mode": "infer",
              "model": {"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 2]}], "outputs": ["r"],
                        "nodes": [{"name": "l", "op": "log", "inputs": ["x"], "outputs": ["l"]},
                                  {"name": "r", "op": "relu", "inputs": ["l"], "outputs": ["r"]}]},
              "inputs": {"x": {"shape": [1, 2], "data": [-1, 2]}}},
     "agreement": [{"op": "relu", "case": 3, "stage": "FC"}]}]})";
}

TEST(Known, LoadsEntriesAndMatchesSignaturesWhateverTheBackendOptions) {
  const std::string dir = ledger_dir("load", "faulty", entry("faulty:relu-nan-to-zero"));
  const oracle::Ledger l = oracle::load_ledgers(dir);
  ASSERT_EQ(l.entries.size(), 1u);
  const auto& e = l.entries[0];
  EXPECT_EQ(e.id, "faulty-relu-nan");
  EXPECT_EQ(e.cls, "bug");
  EXPECT_TRUE(e.has_case);
  EXPECT_EQ(e.model.nodes.size(), 2u);
  ASSERT_EQ(e.agreement.size(), 1u);
  EXPECT_EQ(e.agreement[0].case_index, 3);
  EXPECT_EQ(l.match("nan-swallowed|FC|faulty:relu-nan-to-zero+concat-drops-last|relu"), &e);
  EXPECT_EQ(l.match("nan-swallowed|FC|faulty|relu6"), nullptr);
  EXPECT_EQ(oracle::base_signature("crash|compile|exec:timeout=2+/bin/x|op|msg: a|b"), "crash|compile|exec|op|msg: a|b");
  fs::remove_all(dir);
}

TEST(Known, AMalformedLedgerIsOneClearError) {
  const std::string dir = ledger_dir("bad", "faulty", R"({"format": "quorum.known", "backend": "faulty", "entries": [
    {"id": "x", "class": "feature", "signature": "s", "note": "n"}]})");
  try {
    oracle::load_ledgers(dir);
    FAIL() << "a bad class must be rejected";
  } catch (const core::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("entry 'x': class must be bug, convention or precision"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

TEST(Known, CheckReproducesAnEntryAndReportsAStaleOne) {
  // The same case on the planted fault reproduces; on the exact faulty backend it is stale (as an
  // entry becomes when a library version fixes the bug).
  const std::string dir = ledger_dir("check", "faulty", entry("faulty:relu-nan-to-zero"));
  const auto ok = check_known(oracle::load_ledgers(dir), campaign::KnownCheckOptions{});
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].status, KnownCheck::Status::Reproduces);
  const std::string stale_dir = ledger_dir("stale", "faulty", entry("faulty"));
  const auto stale = check_known(oracle::load_ledgers(stale_dir), campaign::KnownCheckOptions{});
  ASSERT_EQ(stale.size(), 1u);
  EXPECT_EQ(stale[0].status, KnownCheck::Status::Stale);
  fs::remove_all(dir);
  fs::remove_all(stale_dir);
}

}  // namespace
}  // namespace quorum::campaign
