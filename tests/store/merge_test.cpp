// Shards of one campaign (--shard I/N, each into its own SQLite store) merged with `quorum merge`
// equal the single run of the same seed and models: the same findings with the same hits, first
// models and root causes, every bundle copied; the merged store is a campaign `quorum report`
// reads. Stores that overlap or ran with other settings are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "store/store.h"
#include "run_quorum.h"

namespace quorum::store {
namespace {

namespace fs = std::filesystem;
using testing::run_quorum;

std::string fuzz(const std::string& out, const std::string& more = "") {
  return "fuzz --generator unit --backends faulty:all-numeric --models 90 --seed 13 --reduce 10 --out " + out +
         (more.empty() ? "" : " " + more);
}

// What a finding is, its bundle's place aside.
std::string row(const StoredFinding& f) {
  return f.signature + " | " + core::to_string(f.kind) + " " + core::to_string(f.stage) + " " + f.backend + " " + f.op +
         " " + f.node + " " + f.params + " " + f.message + " " + f.detail + " | hits " + std::to_string(f.hits) +
         " first " + std::to_string(f.first_model) + " known " + f.known + " root " + f.root_cause +
         (f.reduced.empty() ? "" : " reduced");
}

std::vector<std::string> rows(Store& s) {
  std::vector<std::string> out;
  for (const auto& f : s.findings()) out.push_back(row(f));
  for (const auto& r : s.root_causes())
    out.push_back("root cause " + r.signature + " " + std::to_string(r.findings) + " " + std::to_string(r.hits));
  for (const auto& m : s.models()) out.push_back("model " + std::to_string(m.index) + " " + std::to_string(m.findings));
  return out;
}

TEST(Merge, ShardsMergedEqualTheSingleRun) {
  const fs::path tmp = testing::scratch("merge");
  const std::string base = (tmp / "single").string();
  testing::Result r = run_quorum(fuzz(base), "merge");
  ASSERT_EQ(r.code, 0) << r.err;
  std::string shards;
  for (int i = 0; i < 3; ++i) {
    const std::string dir = (tmp / ("shard" + std::to_string(i))).string();
    r = run_quorum(fuzz(dir, "--shard " + std::to_string(i) + "/3"), "merge");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("shard " + std::to_string(i) + "/3: model indices i with i % 3 == " + std::to_string(i)),
              std::string::npos)
        << r.out;
    EXPECT_EQ(open_sqlite_store(dir)->models_done(), 30);
    for (const auto& m : open_sqlite_store(dir)->models()) EXPECT_EQ(m.index % 3, i);
    shards += " " + dir;
  }
  const std::string merged = (tmp / "merged").string();
  r = run_quorum("merge" + shards + " -o " + merged, "merge");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("90 models"), std::string::npos) << r.out;

  const auto want = open_sqlite_store(base), got = open_sqlite_store(merged);
  ASSERT_GE(want->findings().size(), 3u);
  EXPECT_EQ(rows(*got), rows(*want));
  EXPECT_EQ(got->settings(), want->settings());
  for (const auto& f : got->findings()) {
    EXPECT_EQ(fs::path(f.bundle).parent_path(), fs::path(merged) / "bundles") << f.bundle;
    EXPECT_TRUE(fs::exists(fs::path(f.bundle) / "finding.json")) << f.bundle;
    if (!f.reduced.empty()) {
      EXPECT_EQ(f.reduced, f.bundle + "/reduced");
      EXPECT_TRUE(fs::exists(fs::path(f.reduced) / "finding.json")) << f.reduced;
    }
  }
  r = run_quorum("report " + merged, "merge");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(fs::path(merged) / "report.html"));

  // Refused, one line and exit 2: the output exists; two stores hold one model; other settings.
  r = run_quorum("merge" + shards + " -o " + merged, "merge");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("already holds a findings store"), std::string::npos) << r.err;
  r = run_quorum("merge " + base + " " + (tmp / "shard1").string() + " -o " + (tmp / "x").string(), "merge");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("both hold model 1"), std::string::npos) << r.err;
  r = run_quorum("fuzz --generator unit --backends faulty:all-numeric --models 2 --seed 99 --reduce 0 --out " +
                     (tmp / "other").string(),
                 "merge");
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_quorum("merge " + (tmp / "shard1").string() + " " + (tmp / "other").string() + " -o " + (tmp / "y").string(),
                 "merge");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("ran with seed = 13"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp / "y" / "findings.db"));
  fs::remove_all(tmp);
}

TEST(Shard, BadShardsAreOneLineAndExitTwo) {
  const fs::path tmp = testing::scratch("shardflag");
  for (const char* bad : {"3/3", "1", "a/2", "-1/2", "1/0"}) {
    const testing::Result r = run_quorum(fuzz((tmp / "c").string(), "--shard " + std::string(bad)), "shardflag");
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_NE(r.err.find("--shard: expected I/N"), std::string::npos) << r.err;
  }
  // Shards must share a seed: without --seed a new campaign's shard would choose its own.
  const testing::Result r = run_quorum(
      "fuzz --generator unit --backends faulty:all-numeric --models 4 --shard 0/2 --out " + (tmp / "c").string(),
      "shardflag");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("same --seed"), std::string::npos) << r.err;
  const testing::Result h = run_quorum("--help", "shardflag");
  EXPECT_NE(h.out.find("merge A B ... -o C"), std::string::npos) << h.out;
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace quorum::store
