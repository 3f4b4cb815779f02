// A campaign keeps its coverage in its store: a campaign stopped and resumed ends with the coverage
// of one run straight through (every fact with the same first model); `quorum coverage` prints it,
// per operator with --ops, and refuses what is not a campaign with one line and exit code 2; an
// mcts campaign of one job is the same for the same seed.
#include <gtest/gtest.h>

#include <filesystem>

#include "store/store.h"
#include "run_quorum.h"

namespace quorum::campaign {
namespace {

namespace fs = std::filesystem;
using testing::run_quorum;

std::string facts_of(const std::string& dir) {
  std::string out;
  for (const auto& f : store::open_sqlite_store(dir)->coverage())
    out += f.subject + " " + coverage::to_string(f.kind) + " " + f.value + " " + std::to_string(f.model) + "\n";
  return out;
}

std::string fuzz(const std::string& generator, const std::string& dir, int models) {
  return "fuzz --generator " + generator + " --backends faulty:all-numeric --reduce 0 --seed 5 --models " +
         std::to_string(models) + " --out " + dir;
}

TEST(CampaignCoverage, AResumedCampaignHasTheCoverageOfAnUninterruptedOne) {
  const fs::path d = testing::scratch("cov_campaign");
  const std::string whole = (d / "whole").string(), split = (d / "split").string();
  auto r = run_quorum(fuzz("muffin", whole, 30), "cov_campaign");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("coverage: OLC "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("functionality faulty:all-numeric: "), std::string::npos) << r.out;
  ASSERT_EQ(run_quorum(fuzz("muffin", split, 12), "cov_campaign").code, 0);
  r = run_quorum(fuzz("muffin", split, 30), "cov_campaign");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("coverage: OLC "), std::string::npos);
  const std::string want = facts_of(whole);
  EXPECT_NE(want.find(" spc "), std::string::npos);
  EXPECT_NE(want.find("faulty:all-numeric maps "), std::string::npos);
  EXPECT_NE(want.find("faulty:all-numeric ran "), std::string::npos);
  EXPECT_EQ(facts_of(split), want);

  const auto a = run_quorum("coverage " + whole + " --ops relu,conv2d", "cov_campaign");
  const auto b = run_quorum("coverage " + split + " --ops relu,conv2d", "cov_campaign");
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out.substr(a.out.find('\n')), b.out.substr(b.out.find('\n')));  // all but the campaign's path
  for (const char* part : {"OTC", "IDC", "ODC", "SEC", "SPC", "OLC", "relu ", "conv2d ", "over models:"})
    EXPECT_NE(a.out.find(part), std::string::npos) << part << "\n" << a.out;
  const auto bad = run_quorum("coverage " + (d / "none").string(), "cov_campaign");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("no findings.db"), std::string::npos) << bad.err;
  EXPECT_EQ(run_quorum("coverage " + whole + " --ops nosuchop", "cov_campaign").code, 2);
}

// A backend that reads exported ONNX in seeded exchange forms (exec with `forms`) reports the opset
// and each node's form in its lowering: the campaign's coverage counts them per backend, the summary
// and `quorum coverage` print them, and the same campaign again reads the same forms.
TEST(CampaignCoverage, ExchangeFormsAndOpsetsAreCoveredPerBackend) {
  const fs::path d = testing::scratch("cov_forms");
  const std::string exec = "exec:forms+opset=13+persistent+/usr/bin/python3+" + std::string(QUORUM_SOURCE_DIR) +
                           "/examples/exec/numpy_onnx.py";
  auto cmd = [&](const std::string& dir) {
    return "fuzz --generator muffin --backends " + exec + " --mode infer --reduce 0 --seed 7 --models 6 --out " + dir;
  };
  const std::string a = (d / "a").string(), b = (d / "b").string();
  const auto r = run_quorum(cmd(a), "cov_forms");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("exchange forms " + exec + ": "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("forms read at opsets 13; opsets never read: 11, 12, 14, 15, 16, 17"), std::string::npos)
      << r.out;
  const std::string facts = facts_of(a);
  EXPECT_NE(facts.find(exec + " opset 13 "), std::string::npos) << facts;
  EXPECT_NE(facts.find(exec + " form "), std::string::npos) << facts;
  EXPECT_NE(facts.find("operands="), std::string::npos) << facts;
  const auto c = run_quorum("coverage " + a, "cov_forms");
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("ONNX read: opsets 13, "), std::string::npos) << c.out;
  ASSERT_EQ(run_quorum(cmd(b), "cov_forms").code, 0);
  EXPECT_EQ(facts_of(b), facts);
}

TEST(CampaignCoverage, AnMctsCampaignOfOneJobIsTheSameForASeed) {
  const fs::path d = testing::scratch("cov_mcts");
  const std::string a = (d / "a").string(), b = (d / "b").string();
  auto r = run_quorum(fuzz("mcts", a, 25), "cov_mcts");
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(run_quorum(fuzz("mcts", b, 25), "cov_mcts").code, 0);
  EXPECT_EQ(facts_of(a), facts_of(b));
  EXPECT_EQ(run_quorum("gen --generator mcts --seed 5 --index 3 --out " + (d / "g").string(), "cov_mcts").code, 2);
}

}  // namespace
}  // namespace quorum::campaign
