// A full disk (ENOSPC) while a campaign writes a bundle or its store, while the report or a
// reproducer is written: one clear line, exit code 1, and every finding recorded before kept.
// The disk fills up through the failing-write shim (tests/support/fail_shim.cpp, LD_PRELOAD) on
// real quorum processes with the planted-fault backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "store/store.h"
#include "run_quorum.h"

namespace quorum::campaign {
namespace {

namespace fs = std::filesystem;
using testing::Result;
using testing::run_quorum;

// The shim's settings: writes to files whose path holds `match` fail with ENOSPC after `after`
// bytes. (An AddressSanitizer build lets the shim come first in the library list.)
std::string full_disk(const std::string& match, long after = 0) {
  const char* asan = std::getenv("ASAN_OPTIONS");
  return std::string("LD_PRELOAD=") + QUORUM_FAIL_SHIM + " QUORUM_SHIM_WRITE_MATCH=" + match +
         " QUORUM_SHIM_WRITE_AFTER=" + std::to_string(after) + " ASAN_OPTIONS=" + (asan ? asan : "") +
         (asan && *asan ? ":" : "") + "verify_asan_link_order=0";
}

const std::string kFuzz = "fuzz --generator unit --backends faulty:all-numeric --seed 11 --reduce 0 ";

// A campaign of `models` models into `out` that ends normally, and its findings.
std::vector<store::StoredFinding> campaign(const std::string& out, int models, const std::string& tag) {
  const Result r = run_quorum(kFuzz + "--models " + std::to_string(models) + " --out " + out, tag);
  EXPECT_EQ(r.code, 0) << r.err;
  return store::open_sqlite_store(out)->findings();
}

void expect_one_line(const Result& r, const std::string& what) {
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("quorum: no space left on device while writing ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
}

// Every finding recorded before is still in the store (same bundle, at least as many hits), every
// finding in the store has its complete bundle, and no partial bundle is left.
void expect_kept(const std::string& out, const std::vector<store::StoredFinding>& before) {
  const auto after = store::open_sqlite_store(out)->findings();
  for (const auto& b : before) {
    const auto it = std::find_if(after.begin(), after.end(),
                                 [&](const store::StoredFinding& a) { return a.signature == b.signature; });
    ASSERT_NE(it, after.end()) << "lost " << b.signature;
    EXPECT_EQ(it->bundle, b.bundle);
    EXPECT_GE(it->hits, b.hits);
  }
  for (const auto& a : after)
    for (const char* f : {"finding.json", "model.json", "target.npy"})
      EXPECT_TRUE(fs::exists(fs::path(a.bundle) / f)) << a.bundle << " lacks " << f;
  for (const auto& e : fs::directory_iterator(fs::path(out) / "bundles"))
    EXPECT_NE(e.path().filename().string().rfind(".tmp-", 0), 0u) << e.path();
}

TEST(FullDisk, WhileABundleIsWrittenTheCampaignStopsAndKeepsItsFindings) {
  const std::string out = (testing::scratch("full_disk") / "bundle").string();
  const auto before = campaign(out, 10, "full_disk");
  ASSERT_FALSE(before.empty());
  int64_t done_before;
  done_before = store::open_sqlite_store(out)->models_done();
  // The disk is full for bundles from the first byte: the next new finding cannot be bundled.
  const Result r = run_quorum(kFuzz + "--models 400 --out " + out, "full_disk", full_disk("/bundles/"));
  expect_one_line(r, out + "/bundles/");
  EXPECT_NE(r.err.find("the campaign stopped"), std::string::npos) << r.err;
  expect_kept(out, before);
  const auto store = store::open_sqlite_store(out);
  store::Store& s = *store;
  EXPECT_LT(s.models_done(), 400) << "the campaign went on after the disk was full";
  EXPECT_GE(s.models_done(), done_before);
  EXPECT_GT(s.findings().size(), 0u);
  // Resumed with room again, it records the finding it could not bundle.
  const auto resumed = campaign(out, 400, "full_disk");
  EXPECT_GT(resumed.size(), before.size());
  expect_kept(out, before);
  fs::remove_all(out);
}

TEST(FullDisk, WhileTheStoreIsWrittenTheCampaignStopsAndKeepsItsFindings) {
  const std::string out = (testing::scratch("full_disk") / "store").string();
  const auto before = campaign(out, 10, "full_disk");
  ASSERT_FALSE(before.empty());
  // The store's first write (the next model's commit) finds the disk full.
  const Result r = run_quorum(kFuzz + "--models 400 --out " + out, "full_disk", full_disk("findings.db"));
  expect_one_line(r, out + "/findings.db");
  expect_kept(out, before);
  fs::remove_all(out);
}

TEST(FullDisk, WhileTheReportOrAReproducerIsWritten) {
  const fs::path dir = testing::scratch("full_disk") / "report";
  const std::string out = (dir / "camp").string();
  const auto before = campaign(out, 10, "full_disk");
  ASSERT_FALSE(before.empty());
  const std::string html = (dir / "report.html").string();
  expect_one_line(run_quorum("report " + out + " -o " + html, "full_disk", full_disk("report.html")), html);
  EXPECT_FALSE(fs::exists(html));
  const std::string repro = (dir / "repro").string();
  expect_one_line(run_quorum("repro " + before[0].bundle + " -o " + repro, "full_disk", full_disk("/repro/")),
                  repro + "/");
  expect_kept(out, before);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace quorum::campaign
