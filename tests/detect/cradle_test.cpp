// CRADLE's distances, triggering, patterns and unique inconsistencies on hand-computed vectors.
#include "detect/cradle.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/stats.h"

namespace quorum::detect {
namespace {

Outputs rows(int64_t classes, std::vector<double> v) {
  Outputs o;
  o.classes = classes;
  o.n = static_cast<int64_t>(v.size()) / classes;
  o.v = std::move(v);
  return o;
}

TEST(Cradle, ClassScoreIsTwoToTheKMinusRankWithinTheTopK) {
  // Scores of 6 classes; the true class 2 ranks 1st, 3rd, 5th, 6th.
  const double first[] = {0.1, 0.2, 0.4, 0.05, 0.15, 0.1};
  const double third[] = {0.3, 0.25, 0.2, 0.1, 0.1, 0.05};
  const double fifth[] = {0.3, 0.25, 0.08, 0.2, 0.1, 0.07};
  const double sixth[] = {0.3, 0.25, 0.01, 0.2, 0.14, 0.1};
  EXPECT_EQ(rank_of(first, 6, 2), 1);
  EXPECT_EQ(class_score(first, 6, 2, 5), 16);  // 2^(5-1)
  EXPECT_EQ(rank_of(third, 6, 2), 3);
  EXPECT_EQ(class_score(third, 6, 2, 5), 4);   // 2^(5-3)
  EXPECT_EQ(rank_of(fifth, 6, 2), 5);
  EXPECT_EQ(class_score(fifth, 6, 2, 5), 1);   // 2^0
  EXPECT_EQ(rank_of(sixth, 6, 2), 6);
  EXPECT_EQ(class_score(sixth, 6, 2, 5), 0);   // outside the top 5
  EXPECT_EQ(class_distance(first, third, 6, 2, 5), 12);
  EXPECT_EQ(class_distance(third, fifth, 6, 2, 5), 3);
  EXPECT_EQ(class_distance(first, sixth, 6, 2, 5), 16);  // the largest D_class with k = 5
  // A tie ranks the true class first.
  const double tie[] = {0.5, 0.5};
  EXPECT_EQ(rank_of(tie, 2, 1), 1);
}

TEST(Cradle, MadDistanceIsTheRelativeDifferenceOfMeanAbsoluteDeviations) {
  // Ground truth class 0 of 4: δ(y) = (|0.7-1| + 0.1 + 0.1 + 0.1) / 4 = 0.15,
  // δ(y') = (|0.9-1| + 0.05 + 0.05 + 0) / 4 = 0.05; D = 0.1 / 0.2 = 0.5.
  const double y[] = {0.7, 0.1, 0.1, 0.1};
  const double y2[] = {0.9, 0.05, 0.05, 0.0};
  EXPECT_NEAR(mad(y, 4, 0), 0.15, 1e-15);
  EXPECT_NEAR(mad(y2, 4, 0), 0.05, 1e-15);
  EXPECT_NEAR(mad_distance(y, y2, 4, 0), 0.5, 1e-15);
  EXPECT_NEAR(mad_distance(y2, y, 4, 0), 0.5, 1e-15);
  // Both exact: 0, not 0/0.
  const double exact[] = {1, 0, 0, 0};
  EXPECT_EQ(mad_distance(exact, exact, 4, 0), 0);
  // One exact, the other not: 1.
  EXPECT_EQ(mad_distance(exact, y, 4, 0), 1);
  // A NaN on one side only: the largest distance.
  const double nan[] = {NAN, 0, 0, 0};
  EXPECT_EQ(mad_distance(nan, y, 4, 0), 1);
  EXPECT_EQ(core::top1(nan, 4), 1);  // NaN never wins; the first of the tied zeros
  EXPECT_EQ(core::top1(y, 4), 0);
}

TEST(Cradle, APairTriggersAboveTheThresholdsAndIsInconsistentAboveShareP) {
  // Three inputs of 3 classes, labels 0, 1, 2.
  //  input 0: same rows                         -> D_class 0,  D_MAD 0
  //  input 1: label 1 rank 1 vs rank 3 (k = 3)  -> σ 4 vs 1: D_class 3;
  //           δ (0.1+0.4+0.3)/3 vs (0.5+0.9+0.4)/3 -> D_MAD 1.0/2.6
  //  input 2: label 2 ranks 1st in both (b's tie 0.4 = 0.4 ranks it first) -> D_class 0;
  //           δ 0.2 vs 0.4 -> D_MAD 0.2/0.6 = 1/3
  const Outputs a = rows(3, {0.8, 0.1, 0.1, 0.1, 0.6, 0.3, 0.1, 0.2, 0.7});
  const Outputs b = rows(3, {0.8, 0.1, 0.1, 0.5, 0.1, 0.4, 0.2, 0.4, 0.4});
  const std::vector<int64_t> labels = {0, 1, 2};
  Thresholds th;
  th.k = 3;
  th.class_t = 2;
  th.mad_t = 0.2;
  const PairResult p = compare_pair("a", a, "b", b, labels, th);
  ASSERT_EQ(p.by_class.distance.size(), 3u);
  EXPECT_EQ(p.by_class.distance[0], 0);
  EXPECT_EQ(p.by_class.distance[1], 3);
  EXPECT_EQ(p.by_class.distance[2], 0);
  EXPECT_EQ(p.by_class.triggering, 1);
  EXPECT_TRUE(p.by_class.inconsistent);
  EXPECT_EQ(p.by_class.worst, 1);
  EXPECT_NEAR(p.by_mad.distance[2], 1.0 / 3, 1e-12);
  EXPECT_EQ(p.by_mad.worst, 1);
  EXPECT_NEAR(p.by_mad.distance[1], 1.0 / 2.6, 1e-12);
  EXPECT_EQ(p.by_mad.triggering, 2);
  // Label changes: input 1 (1 vs 0) and input 2 (2 vs 1: b's tie 0.4/0.4 goes to the first).
  EXPECT_EQ(p.label_changes, 2);
  // p: inconsistent only when MORE than p of the inputs trigger.
  th.p = 2.0 / 3;
  const PairResult q = compare_pair("a", a, "b", b, labels, th);
  EXPECT_FALSE(q.by_mad.inconsistent);  // 2 of 3 is not more than 2/3
  EXPECT_FALSE(q.by_class.inconsistent);
  th.p = 0.5;
  EXPECT_TRUE(compare_pair("a", a, "b", b, labels, th).by_mad.inconsistent);
}

TEST(Cradle, PatternsAreHistogramsAndEqualPatternsAreOneUniqueInconsistency) {
  const Pattern c = class_pattern({0, 0, 12, 8, 12});
  EXPECT_EQ(c.key(), "class{0:2,8:1,12:2}");
  const Pattern m = mad_pattern({0.0, 0.05, 0.1, 0.25, 0.99, 1.0, NAN});
  EXPECT_EQ(m.key(), "MAD{0:2,0.1:1,0.2:1,0.3:0,0.4:0,0.5:0,0.6:0,0.7:0,0.8:0,0.9:3}");
  // Three pairs: the first two show the same class pattern, the third another one.
  const Outputs x = rows(2, {0.9, 0.1, 0.9, 0.1});
  const Outputs y = rows(2, {0.1, 0.9, 0.9, 0.1});  // input 0's label 0 drops from rank 1 to 2
  const Outputs z = rows(2, {0.1, 0.9, 0.1, 0.9});  // both inputs drop
  Thresholds th;
  th.k = 5;
  th.class_t = 7;
  th.mad_t = 2;  // MAD never triggers here
  const std::vector<int64_t> labels = {0, 0};
  std::vector<PairResult> pairs = {compare_pair("x", x, "y", y, labels, th),
                                   compare_pair("y", y, "x", x, labels, th),
                                   compare_pair("x", x, "z", z, labels, th)};
  const std::vector<Unique> u = unique_inconsistencies(pairs);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].pattern.key(), "class{0:1,8:1}");
  EXPECT_EQ(u[0].pairs, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(u[1].pattern.key(), "class{8:2}");
  EXPECT_EQ(u[1].pairs, (std::vector<size_t>{2}));
}

}  // namespace
}  // namespace quorum::detect
