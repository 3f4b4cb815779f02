// OpSpec::mixes_batch: the operators whose output for one sample depends on the other samples of the batch
// by definition, which the batch relation never judges (src/campaign/evaluate.cpp), and the same operators
// where they keep each sample to itself.
#include <gtest/gtest.h>

#include "ops/registry.h"

namespace quorum::ops {
namespace {

bool mixes(const std::string& name, const core::Shape& x, const core::Attrs& given) {
  const OpSpec& spec = op(name);
  if (!spec.mixes_batch) return false;
  return spec.mixes_batch({{core::DType::F32, x}}, canonical_attrs(spec, given));
}

TEST(MixesBatch, StatisticsSoftmaxNormalisationAndReductionOverTheBatchAxis) {
  EXPECT_TRUE(mixes("batch_norm", {4, 3, 2, 2}, {{"training", int64_t{1}}}));
  EXPECT_FALSE(mixes("batch_norm", {4, 3, 2, 2}, {{"training", int64_t{0}}}));
  EXPECT_TRUE(mixes("softmax", {4, 3}, {{"axis", int64_t{0}}}));
  EXPECT_TRUE(mixes("log_softmax", {4, 3}, {{"axis", int64_t{-2}}}));
  EXPECT_FALSE(mixes("softmax", {4, 3}, {{"axis", int64_t{1}}}));
  EXPECT_TRUE(mixes("layer_norm", {4, 3}, {{"axis", int64_t{0}}}));
  EXPECT_FALSE(mixes("layer_norm", {4, 3}, {{"axis", int64_t{1}}}));
  EXPECT_TRUE(mixes("reduce_sum", {4, 3}, {{"axes", std::vector<int64_t>{}}}));  // every axis
  EXPECT_TRUE(mixes("reduce_max", {4, 3}, {{"axes", std::vector<int64_t>{-2}}}));
  EXPECT_FALSE(mixes("reduce_mean", {4, 3}, {{"axes", std::vector<int64_t>{1}}}));
  EXPECT_FALSE(mixes("relu", {4, 3}, {}));
}

}  // namespace
}  // namespace quorum::ops
