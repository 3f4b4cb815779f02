// Quorum's shared optimizer arithmetic (backends/optimizer.h) on hand-computed steps, in float64 (the
// reference's) and float32 (a library's without an optimizer of its own), and the reference session's
// multi-step training through it.
#include "backends/optimizer.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "backends/ref/ref_backend.h"
#include "core/error.h"
#include "ir/build.h"
#include "ops/registry.h"

namespace quorum::backends {
namespace {

core::Tensor scalar(double v, core::DType d = core::DType::F64) {
  return core::Tensor::f64({1}, {v}).to(d);
}

TEST(Optimizer, SgdWithMomentumByHand) {
  // lr 0.1, momentum 0.9; w = 1; g = 0.5 then 0.2.
  // step 1: v = g = 0.5, w = 1 - 0.05 = 0.95; step 2: v = 0.9 * 0.5 + 0.2 = 0.65, w = 0.95 - 0.065 = 0.885.
  for (core::DType d : {core::DType::F64, core::DType::F32}) {
    Optimizer opt({"sgd", 0.1, 0.9});
    core::Tensor w = scalar(1.0, d);
    opt.step("w", w, scalar(0.5));
    EXPECT_NEAR(w.get(0), 0.95, d == core::DType::F64 ? 1e-15 : 1e-7);
    opt.step("w", w, scalar(0.2));
    EXPECT_NEAR(w.get(0), 0.885, d == core::DType::F64 ? 1e-15 : 1e-7);
    EXPECT_NEAR(opt.slots().at("w").first.get(0), 0.65, 1e-7);
    EXPECT_EQ(w.dtype(), d);  // the arithmetic is the weight's own dtype
  }
  Optimizer plain({"sgd", 0.1, 0.0});
  core::Tensor w = scalar(1.0);
  plain.step("w", w, scalar(0.5));
  plain.step("w", w, scalar(0.5));
  EXPECT_NEAR(w.get(0), 0.9, 1e-15);  // no momentum: w -= lr * g twice
}

TEST(Optimizer, AdamByHand) {
  // lr 0.1, betas 0.9/0.999, eps 1e-8; w = 1; g = 0.5 then -0.25.
  // step 1: m = 0.05, s = 0.00025; m^ = 0.5, s^ = 0.25: w = 1 - 0.1 * 0.5 / (0.5 + 1e-8) = 0.900000002.
  // step 2: m = 0.02, s = 0.00031225; m^ = 0.02 / 0.19, s^ = 0.00031225 / 0.001999: w = 0.8733662987078463.
  Optimizer opt({"adam", 0.1, 0, 0.9, 0.999, 1e-8});
  core::Tensor w = scalar(1.0);
  opt.step("w", w, scalar(0.5));
  EXPECT_NEAR(w.get(0), 0.900000002, 1e-15);
  opt.step("w", w, scalar(-0.25));
  EXPECT_NEAR(w.get(0), 0.8733662987078463, 1e-14);
  Optimizer f32({"adam", 0.1, 0, 0.9, 0.999, 1e-8});
  core::Tensor v = scalar(1.0, core::DType::F32);
  f32.step("w", v, scalar(0.5));
  f32.step("w", v, scalar(-0.25));
  EXPECT_NEAR(v.get(0), 0.8733662987078463, 1e-6);
}

TEST(Optimizer, RefusesBadSettings) {
  EXPECT_THROW(Optimizer({"rmsprop", 0.1}), core::UserError);
  EXPECT_THROW(Optimizer({"sgd", 0.0}), core::UserError);
  EXPECT_THROW(Optimizer({"sgd", 0.1, 1.0}), core::UserError);
  EXPECT_THROW(Optimizer({"adam", 0.1, 0, 0.9, 1.5}), core::UserError);
  Optimizer opt({"sgd", 0.1});
  core::Tensor w = scalar(1.0);
  EXPECT_THROW(opt.step("w", w, core::Tensor::f64({2}, {1, 2})), core::UserError);
}

// The reference session's multi-step training: one dense weight, mse loss, the shared arithmetic in
// float64, by hand. y = x W (no bias term in the loss's way: the bias gets its own gradient).
TEST(Optimizer, ReferenceSessionStepsKeepWeightsAndState) {
  core::Rng rng(1);
  ops::Case c{{core::TensorType{core::DType::F64, {1, 1}}}, {{"units", int64_t{1}}}, {}};
  ir::Graph g = ir::single_node_graph(ops::op("dense"), c, rng, core::DType::F64).graph;
  ASSERT_EQ(g.initializers.size(), 2u);
  ValueMap w0;
  for (auto& [name, t] : g.initializers) {
    t = core::Tensor(core::DType::F64, t.shape());
    w0.emplace(name, t);
  }
  std::unique_ptr<Session> s = make_ref_session(g);
  TrainRequest req;
  req.inputs = {{g.inputs[0].name, core::Tensor::f64({1, 1}, {2.0})}};
  req.target = core::Tensor::f64({1, 1}, {1.0});
  req.loss = "mse_loss";
  const OptimizerSpec spec{"sgd", 0.1, 0.9};
  // Weights 0: y = 0, dL/dy = 2 (y - t) = -2; dL/dW = x * -2 = -4, dL/db = -2.
  StepResult r1 = s->optimizer_step(req, spec);
  EXPECT_NEAR(r1.loss, 1.0, 1e-15);
  ValueMap w1 = s->weights();
  std::vector<double> after;
  for (const auto& [name, t] : w1) after.push_back(t.get(0));
  // W = 0.4, b = 0.2 (sorted by name, the bias and the kernel in some order: both present).
  std::sort(after.begin(), after.end());
  EXPECT_NEAR(after[0], 0.2, 1e-15);
  EXPECT_NEAR(after[1], 0.4, 1e-15);
  // Step 2: y = 2 * 0.4 + 0.2 = 1.0: the gradient is 0, the velocity alone moves: W = 0.4 + 0.9 * 0.4 = 0.76.
  StepResult r2 = s->optimizer_step(req, spec);
  EXPECT_NEAR(r2.loss, 0.0, 1e-15);
  std::vector<double> after2;
  for (const auto& [name, t] : s->weights()) after2.push_back(t.get(0));
  std::sort(after2.begin(), after2.end());
  EXPECT_NEAR(after2[0], 0.2 + 0.9 * 0.2, 1e-15);
  EXPECT_NEAR(after2[1], 0.4 + 0.9 * 0.4, 1e-15);
}

}  // namespace
}  // namespace quorum::backends
