#include "core/finding_kind.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/error.h"

namespace quorum::core {
namespace {

TEST(FindingKind, EveryKindReadsBackFromItsOneTextForm) {
  std::set<std::string> names;
  for (const auto& k : finding_kinds()) {
    EXPECT_EQ(finding_kind_from_string(k.name), k.kind);
    EXPECT_EQ(std::string(to_string(k.kind)), k.name);
    EXPECT_TRUE(names.insert(k.name).second) << "two kinds named " << k.name;
    EXPECT_TRUE(k.kind == FindingKind::Crash || std::string(k.what).size() > 0) << k.name << " has no issue predicate";
  }
  EXPECT_EQ(names.size(), 5u);
  for (const Stage s : {Stage::Compile, Stage::Forward, Stage::Loss, Stage::Backward})
    EXPECT_EQ(stage_from_string(to_string(s)), s);
}

TEST(FindingKind, AnUnknownTextIsOneClearLine) {
  try {
    finding_kind_from_string("label-change");
    FAIL() << "accepted an unknown kind";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("'label-change'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nan-swallowed"), std::string::npos) << e.what();
  }
  EXPECT_THROW(stage_from_string("fc"), UserError);
}

TEST(FindingKind, OnlyTheTrainingStagesAreJudgedOnTheTrainingPass) {
  EXPECT_TRUE(training_stage(Stage::Loss));
  EXPECT_TRUE(training_stage(Stage::Backward));
  EXPECT_FALSE(training_stage(Stage::Forward));
  EXPECT_FALSE(training_stage(Stage::Compile));
}

}  // namespace
}  // namespace quorum::core
