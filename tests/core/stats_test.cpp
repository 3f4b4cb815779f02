// How far apart two outputs are (core::mean_abs_difference): one NaN and infinity policy for its users.
#include "core/stats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace quorum::core {
namespace {

TEST(MeanAbsDifference, IsTheMeanDistanceWithNaNOrAnInfinityAgainstANumberFarAndEqualValuesNothing) {
  const double a[] = {1, 2, 3, 4};
  const double b[] = {1, 4, 2, 4};
  EXPECT_DOUBLE_EQ(mean_abs_difference(a, b, 4), 0.75);
  EXPECT_EQ(mean_abs_difference(a, b, 0), 0);
  const double inf = INFINITY, nan = NAN;
  const double x[] = {nan, inf, -inf, 5};
  const double same[] = {nan, inf, -inf, 5};
  EXPECT_EQ(mean_abs_difference(x, same, 4), 0) << "NaN against NaN, an infinity against itself";
  const double nan_one_side[] = {1, inf, -inf, 5};
  EXPECT_DOUBLE_EQ(mean_abs_difference(x, nan_one_side, 4), kFar / 4);
  const double inf_against_number[] = {nan, 1, -inf, 5};
  EXPECT_DOUBLE_EQ(mean_abs_difference(x, inf_against_number, 4), kFar / 4);
  const double opposite[] = {nan, -inf, inf, 5};
  EXPECT_DOUBLE_EQ(mean_abs_difference(x, opposite, 4), kFar / 2) << "+inf against -inf";
  EXPECT_GT(mean_abs_difference(x, nan_one_side, 4), mean_abs_difference(a, b, 4))
      << "an output with NaN is farther than any finite one";
}

}  // namespace
}  // namespace quorum::core
