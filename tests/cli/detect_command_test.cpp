// quorum detect as a user runs it: its figures and bundle on the trained LeNet-5, and bad input as
// one line with exit code 2.
#include <gtest/gtest.h>

#include <filesystem>

#include "run_quorum.h"

namespace {

namespace fs = std::filesystem;

using quorum::testing::Result;

Result quorum(const std::string& args) { return quorum::testing::run_quorum(args, "detect_cli"); }

const std::string kModel = std::string(QUORUM_SOURCE_DIR) + "/data/trained/lenet5/model.json";

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == s.size() - 1; }

TEST(DetectCommand, BadInputIsOneLineAndExitCodeTwo) {
  Result r = quorum("detect");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(one_line(r.err)) << r.err;
  EXPECT_NE(r.err.find("expected one MODEL"), std::string::npos) << r.err;
  r = quorum("detect " + kModel + " --backends faulty --images 20000");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(one_line(r.err)) << r.err;
  EXPECT_NE(r.err.find("the test split holds 10000"), std::string::npos) << r.err;
  r = quorum("detect " + kModel + " --backends faulty --dataset sine");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("detection runs on fashion-mnist"), std::string::npos) << r.err;
  r = quorum("detect " + kModel + " --backends faulty --mad_threshold 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(one_line(r.err)) << r.err;
  r = quorum("fuzz --generator muffin --trained " + kModel + " --backends faulty");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--generator zoo"), std::string::npos) << r.err;
}

TEST(DetectCommand, RenamedFlagsAreRefusedNamingTheNewOne) {
  // --batch is a training step's size; validation images per library call are --eval_batch, and fuzz
  // --trained's weight-mutant noise is --mutant_noise (--mutation_rate is the mutate generator's).
  for (const auto& [args, now] : std::vector<std::pair<std::string, std::string>>{
           {"detect " + kModel + " --backends faulty --batch 10", "is now '--eval_batch N'"},
           {"fuzz --generator zoo --trained " + kModel + " --backends faulty --batch 10", "is now '--eval_batch N'"},
           {"fuzz --generator zoo --trained " + kModel + " --backends faulty --mutation_rate 0.5",
            "'--mutation_rate' of 'fuzz --trained' is now '--mutant_noise'"}}) {
    const Result r = quorum(args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_TRUE(one_line(r.err)) << r.err;
    EXPECT_NE(r.err.find(now), std::string::npos) << args << "\n" << r.err;
  }
}

TEST(DetectCommand, PrintsThePairsAndWritesTheFindingsBundleAndReport) {
  const fs::path out = quorum::testing::scratch("detect_cli") / "detect_out";
  fs::remove_all(out);
  const Result r =
      quorum("detect " + kModel + " --backends faulty:floor=softmax@5e-7 --images 500 --seed 3 --out " + out.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("reference vs faulty:floor=softmax@5e-7: class 0, MAD "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("inconsistent pairs: 1 of 1; unique inconsistencies: 1; label changes: 0"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("per-node verdicts: none"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(out / "findings.db"));
  EXPECT_TRUE(fs::exists(out / "report.html"));
  const std::string mark = "replay: quorum replay ";
  const auto at = r.out.find(mark);
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string dir = r.out.substr(at + mark.size(), r.out.find('\n', at) - at - mark.size());
  EXPECT_TRUE(fs::exists(fs::path(dir) / "map.svg") || fs::exists(fs::path(dir) / "map.dot")) << dir;
  const Result again = quorum("replay " + dir);
  EXPECT_EQ(again.code, 0) << again.out << again.err;
  fs::remove_all(out);
}

}  // namespace
