// The HTML campaign report as a person sees it: a short real campaign's page rendered by headless
// Chromium (Debian's chromium) shows the findings table and localization maps, and text from a
// model or message that looks like HTML stays text (no script from model data runs). Also the
// issue-ready Markdown of one finding.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/fileio.h"
#include "run_quorum.h"
#include "worker/supervisor.h"

namespace quorum::report {
namespace {

namespace fs = std::filesystem;
using testing::run_quorum;

const std::string kHostile =
    "<script>document.title='PWNED'</script><img src=x onerror=\"document.title='PWNED'\">";

// A campaign with planted faults (its bundles have maps and reduced cases).
fs::path campaign(const std::string& tag) {
  const fs::path out = testing::scratch("report") / tag;
  fs::remove_all(out);
  const auto r = run_quorum(
      "fuzz --generator muffin --backends faulty:elu-alpha-ignored+softmax-no-max-sub --mode infer "
      "--models 60 --seed 11 --out " +
          out.string(),
      "report_" + tag);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("report: "), std::string::npos) << "fuzz ends by writing the report";
  EXPECT_TRUE(fs::exists(out / "report.html"));
  return out;
}

// Puts HTML-looking text where a library message or a node name would be: the store's detail of
// every finding and each bundle's finding.json.
void plant_hostile_text(const fs::path& dir) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir / "findings.db").c_str(), &db), SQLITE_OK);
  const std::string sql = "UPDATE findings SET detail = '" + std::regex_replace(kHostile, std::regex("'"), "''") + "'";
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
  for (const auto& e : fs::recursive_directory_iterator(dir / "bundles")) {
    if (e.path().filename() != "finding.json") continue;
    auto j = nlohmann::ordered_json::parse(core::read_file(e.path().string()));
    j["detail"] = kHostile;
    core::write_file_atomic(e.path().string(), j.dump(1));
  }
}

std::string chromium_dom(const fs::path& html, const fs::path& profile) {
  const fs::path dom = profile / "dom.html";
  const std::string cmd = "chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --user-data-dir='" +
                          profile.string() + "' --dump-dom 'file://" + fs::absolute(html).string() + "' >'" +
                          dom.string() + "' 2>/dev/null </dev/null";
  const int status = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "chromium failed: " << cmd;
  return core::read_file(dom.string());
}

TEST(HtmlReport, ChromiumShowsFindingsAndMapsAndRunsNoModelText) {
  const fs::path dir = campaign("html");
  plant_hostile_text(dir);
  const fs::path html = dir / "page.html";
  const auto r = run_quorum("report " + dir.string() + " -o " + html.string(), "report_html");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string raw = core::read_file(html.string());
  EXPECT_EQ(raw.find("<script"), std::string::npos) << "the page holds no script, and model text is escaped";
  EXPECT_NE(raw.find("&lt;script&gt;document.title="), std::string::npos);

  const fs::path profile = testing::scratch("report") / "chromium";
  fs::create_directories(profile);
  const std::string dom = chromium_dom(html, profile);
  ASSERT_FALSE(dom.empty());
  // The page rendered, and nothing from the planted text ran (the title is still the report's).
  EXPECT_NE(dom.find("<title>Quorum campaign report"), std::string::npos) << dom.substr(0, 400);
  EXPECT_EQ(dom.find("<title>PWNED"), std::string::npos);
  EXPECT_EQ(std::regex_search(dom, std::regex("<script[ >]")), false);
  EXPECT_EQ(dom.find("<img src=\"x\""), std::string::npos) << "the planted <img> stayed text";
  EXPECT_NE(dom.find("&lt;script&gt;document.title="), std::string::npos) << "shown as text";
  // The findings table, with a row per root cause of the planted faults, and the maps.
  EXPECT_NE(dom.find("<table id=\"findings\">"), std::string::npos);
  EXPECT_NE(dom.find("faulty:elu-alpha-ignored+softmax-no-max-sub"), std::string::npos);
  EXPECT_NE(dom.find("<img class=\"map\""), std::string::npos);
  EXPECT_NE(dom.find("src=\"data:image/svg+xml;base64,"), std::string::npos);
  // The plots are inline SVG.
  const std::regex plot("<svg[^>]*class=\"plot\"");
  EXPECT_GE(std::distance(std::sregex_iterator(dom.begin(), dom.end(), plot), std::sregex_iterator()), 2);
}

TEST(HtmlReport, NotACampaignIsOneLineAndExitTwo) {
  const auto r = run_quorum("report /nonexistent/campaign", "report_bad");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("not a campaign directory"), std::string::npos) << r.err;
}

TEST(IssueText, ABundleBecomesMarkdownWithExpectedVersusActual) {
  const auto& built = worker::available_backends();
  if (std::find(built.begin(), built.end(), "opencv") == built.end()) GTEST_SKIP() << "backend opencv is not built";
  // A real library bug from a ledger case: OpenCV's softplus overflows to inf.
  const fs::path out = testing::scratch("report") / "issue";
  fs::remove_all(out);
  ASSERT_EQ(run_quorum("known --check --backends opencv --filter opencv-softplus-overflow --out " + out.string(),
                       "report_issue")
                .code,
            0);
  fs::path bundle;
  for (const auto& e : fs::directory_iterator(out / "bundles")) bundle = e.path();
  ASSERT_FALSE(bundle.empty());
  const auto r = run_quorum("report " + bundle.string() + " --issue", "report_issue");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string& md = r.out;
  EXPECT_EQ(
      md.rfind("# OpenCV DNN: softplus produces NaN/Inf where the float64 result is finite (forward, float32)", 0), 0u)
      << md;
  for (const char* section : {"## Environment", "## What happens", "## Expected versus actual", "## Classification",
                              "## Minimal reproducer", "## How it was found"})
    EXPECT_NE(md.find(section), std::string::npos) << section;
  EXPECT_NE(md.find("| `y` |"), std::string::npos) << md;
  EXPECT_NE(md.find("| inf |"), std::string::npos) << md;
  EXPECT_NE(md.find("**bug**"), std::string::npos);
  EXPECT_NE(md.find("```python\n#!/usr/bin/python3"), std::string::npos) << "the small reproducer is inline";
  EXPECT_NE(md.find("cv2.dnn.readNetFromONNX"), std::string::npos);
  // A bundle without --issue is a usage error.
  const auto bad = run_quorum("report " + bundle.string(), "report_issue");
  EXPECT_EQ(bad.code, 2);
}

}  // namespace
}  // namespace quorum::report
