// The counts a campaign's jobs share and the progress line they make (campaign/run_counts.h).
#include "campaign/run_counts.h"

#include <gtest/gtest.h>

#include <memory>
#include <sstream>

namespace quorum::campaign {
namespace {

oracle::Finding finding(core::FindingKind kind, core::Stage stage) {
  oracle::Finding f;
  f.kind = kind;
  f.stage = stage;
  f.backend = "faulty";
  return f;
}

// Each model's hits are counted by kind and by the stage that found them; the line shows what the setup
// runs, the root causes of a reducing run, and "new" on a resumed one.
TEST(RunCounts, TalliesHitsByKindAndStageIntoTheProgressLine) {
  RunCounts c;
  Evaluation ev;
  ev.findings = {finding(core::FindingKind::NaN, core::Stage::Optimized),
                 finding(core::FindingKind::Inconsistency, core::Stage::Batch),
                 finding(core::FindingKind::Inconsistency, core::Stage::Forward)};
  ev.batch = 4;
  Timing t;
  t.generate = 0.5;
  c.tally(ev, 2, {"root-a", "root-b"}, t);
  c.tally(ev, 0, {"root-a"}, t);
  c.models_run = 2;
  EXPECT_EQ(c.hits, 6);
  EXPECT_EQ(c.new_findings, 2);
  EXPECT_EQ(c.roots.size(), 2u);
  EXPECT_EQ(c.by_kind[core::FindingKind::Inconsistency], 4);
  EXPECT_DOUBLE_EQ(c.summary().timing.generate, 1.0);

  campaign::Setup setup;
  setup.refusals = std::make_shared<LearnedRefusals>();
  setup.optimized = true;
  setup.batch_relation.on = true;
  std::ostringstream line;
  c.progress_line(line, 4, setup, true, true, 0.5);
  const std::string s = line.str();
  EXPECT_NE(s.find("[4s] models 2 (0.5/s)"), std::string::npos) << s;
  EXPECT_NE(s.find(" nan 2 "), std::string::npos) << s;
  EXPECT_NE(s.find("(optimized stage 2)"), std::string::npos) << s;
  EXPECT_NE(s.find("(batch relation 2, on 2 models widened)"), std::string::npos) << s;
  EXPECT_NE(s.find("| unique 2 new | root causes 2 | OLC 50.0%"), std::string::npos) << s;
  EXPECT_EQ(s.find("form relation"), std::string::npos) << "the form relation is off: " << s;

  std::ostringstream fresh;
  c.progress_line(fresh, 4, setup, false, false, 0.5);
  EXPECT_EQ(fresh.str().find("root causes"), std::string::npos) << "a run that does not reduce: " << fresh.str();
  EXPECT_EQ(fresh.str().find(" new"), std::string::npos) << fresh.str();
}

}  // namespace
}  // namespace quorum::campaign
