// The batched writing of a campaign's models that show nothing new (campaign/model_rows.h), on a real
// SQLite store.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "campaign/model_rows.h"

namespace quorum::campaign {
namespace {

namespace fs = std::filesystem;

std::string scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("quorum_model_rows_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

oracle::Finding nan_finding() {
  oracle::Finding f;
  f.kind = oracle::Kind::NaN;
  f.stage = oracle::Stage::Forward;
  f.backend = "faulty";
  f.op = "relu";
  return f;
}

ModelRows rows_of(int64_t model, const std::string& refusal) {
  ModelRows rows;
  store::StoredBackend b;
  b.backend = "faulty";
  b.model = model;
  b.ran = 1;
  rows.backends.push_back(b);
  rows.refusals.push_back({"faulty", refusal, model, 1, 0, {"relu"}});
  return rows;
}

// A model that shows nothing, or only signatures the store holds, waits in the batch; one with a signature
// the store lacks is handed back to be written at once; the batch's refusal counts are summed per refusal
// and written with its models.
TEST(HitBatch, HoldsModelsWithNothingNewAndWritesThemWithTheirSummedRows) {
  const std::string dir = scratch("batch");
  const auto store = store::open_sqlite_store(dir);
  HitBatch batch(*store);
  Evaluation clean, nan;
  nan.findings.push_back(nan_finding());

  ModelRows r0 = rows_of(0, "reason: x"), r1 = rows_of(1, "reason: x"), r2 = rows_of(2, "reason: x");
  EXPECT_TRUE(batch.add(clean, 0, r0));
  EXPECT_FALSE(batch.add(nan, 1, r1)) << "a signature the store lacks is written at once";
  EXPECT_EQ(r1.backends.size(), 1u) << "rows of a model not batched stay with the caller";
  batch.stored(nan.findings);
  EXPECT_TRUE(batch.add(nan, 2, r2));
  EXPECT_FALSE(store->model_done(0)) << "batched models wait for the flush";

  batch.flush();
  EXPECT_TRUE(store->model_done(0));
  EXPECT_FALSE(store->model_done(1));
  EXPECT_TRUE(store->model_done(2));
  EXPECT_EQ(store->backend_models().size(), 2u);
  const std::vector<store::StoredRefusal> refusals = store->refusals();
  ASSERT_EQ(refusals.size(), 1u);
  EXPECT_EQ(refusals[0].refused, 2) << "models 0 and 2, summed in the batch";
  EXPECT_EQ(refusals[0].first_model, 0);
  fs::remove_all(dir);
}

// The batch writes itself once it holds kHitBatch models (or its first is kHitBatchAge old), without a
// flush: after twice kHitBatch models, fewer than kHitBatch can be waiting.
TEST(HitBatch, WritesItselfWhenFull) {
  const std::string dir = scratch("full");
  const auto store = store::open_sqlite_store(dir);
  HitBatch batch(*store);
  const Evaluation clean;
  const auto n = static_cast<int64_t>(2 * HitBatch::kHitBatch);
  for (int64_t i = 0; i < n; ++i) {
    ModelRows rows;
    EXPECT_TRUE(batch.add(clean, i, rows));
  }
  EXPECT_GE(store->models_done(), n - static_cast<int64_t>(HitBatch::kHitBatch) + 1);
  batch.flush();
  EXPECT_EQ(store->models_done(), n);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace quorum::campaign
