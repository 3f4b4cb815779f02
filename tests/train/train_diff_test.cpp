// quorum train-diff's rule on real workers: the faulty backend's planted optimizer fault
// (momentum-twice: SGD's velocity decays twice per step) is flagged at step 2, the first step its
// velocity matters, and not at step 1; the same backend without the fault (the reference's kernels
// and the shared arithmetic) is never flagged; the bundle replays.
#include "train/diff.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "../run_quorum.h"
#include "core/rng.h"

namespace quorum::train {
namespace {

// LeNet-5 at batch 2 and seeded random images with one-hot targets: no data set read.
struct Fixture {
  Trainable t = zoo_trainable("lenet5", "fashion-mnist", 2, 7);
  BatchOf batch_of = [this](int64_t k) {
    core::Rng rng = core::Rng(11).derive("batch:" + std::to_string(k));
    data::Batch b;
    b.input = core::Tensor(core::DType::F64, t.data.input);
    for (int64_t i = 0; i < b.input.numel(); ++i)
      b.input.f64()[i] = static_cast<double>(static_cast<float>(rng.uniform(0.0, 1.0)));
    b.target = core::Tensor(core::DType::F64, t.data.target);
    for (int64_t r = 0; r < t.data.target[0]; ++r) b.target.f64()[r * 10 + rng.randint(0, 9)] = 1.0;
    return b;
  };
};

DiffOptions options(const std::string& backends, const std::string& optimizer, int64_t steps) {
  DiffOptions o;
  o.backends = worker::parse_backends(backends);
  o.optimizer.name = optimizer;
  o.optimizer.lr = optimizer == "sgd" ? 0.1 : 0.001;
  o.optimizer.momentum = optimizer == "sgd" ? 0.9 : 0;
  o.steps = steps;
  return o;
}

TEST(TrainDiff, MomentumTwiceIsFlaggedAtStepTwo) {
  Fixture f;
  const DiffOptions o = options("faulty:momentum-twice,faulty", "sgd", 4);
  const DiffResult r = train_diff(f.t, f.batch_of, o, {});
  ASSERT_EQ(r.libs.size(), 2u);
  const LibraryCurves& bad = r.libs[0];
  const LibraryCurves& good = r.libs[1];
  ASSERT_TRUE(bad.failure.empty()) << bad.failure;
  ASSERT_TRUE(good.failure.empty()) << good.failure;
  EXPECT_EQ(bad.step, 2);
  EXPECT_EQ(bad.drift_max.at(0), 0.0);  // step 1 is right: the velocity starts as the gradient
  EXPECT_GT(bad.step_error_at, bad.bound_at);
  EXPECT_EQ(bad.grad_own_at, 0.0);  // its gradients are the reference's
  EXPECT_GT(bad.update_error_at, 1e-3);  // the update, not the gradient, is wrong
  EXPECT_FALSE(bad.node.empty());
  EXPECT_EQ(good.step, 0);  // the reference's kernels and arithmetic: no drift at all
  for (double d : good.drift_max) EXPECT_EQ(d, 0.0);
  for (size_t k = 0; k < r.ref_loss.size(); ++k) EXPECT_EQ(good.loss.at(k), r.ref_loss[k]);

  // The bundle: model, batches of steps 1..2, the reduced one-step case; it replays.
  const auto dir = quorum::testing::scratch("train_diff") / "diff";
  write_diff(dir.string(), f.t, f.batch_of, o, r);
  const auto b = dir / bundle_name(bad.spec);
  EXPECT_TRUE(std::filesystem::exists(b / "case.json"));
  EXPECT_TRUE(std::filesystem::exists(b / "batches" / "input-2.npy"));
  EXPECT_FALSE(std::filesystem::exists(b / "batches" / "input-3.npy"));
  EXPECT_TRUE(std::filesystem::exists(b / "reduced" / "weights_before"));
  EXPECT_TRUE(std::filesystem::exists(dir / "curves.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / bundle_name(good.spec)));
  const quorum::testing::Result rep = quorum::testing::run_quorum("train-diff " + b.string(), "train_diff");
  EXPECT_EQ(rep.code, 0) << rep.out << rep.err;
  EXPECT_NE(rep.out.find("reproduces: flagged at step 2"), std::string::npos) << rep.out;
}

TEST(TrainDiff, MomentumTwiceLeavesAdamAlone) {
  Fixture f;
  const DiffResult r = train_diff(f.t, f.batch_of, options("faulty:momentum-twice", "adam", 3), {});
  ASSERT_TRUE(r.libs.at(0).failure.empty()) << r.libs.at(0).failure;
  EXPECT_EQ(r.libs.at(0).step, 0);
}

TEST(TrainDiff, ABackendThatDoesNotTrainIsReportedNotFlagged) {
  Fixture f;
  const DiffResult r = train_diff(f.t, f.batch_of, options("exec", "sgd", 1), {});
  EXPECT_FALSE(r.libs.at(0).failure.empty());
  EXPECT_EQ(r.libs.at(0).step, 0);
}

}  // namespace
}  // namespace quorum::train
