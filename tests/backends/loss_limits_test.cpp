// The losses Quorum composes itself from a library's operations (oneDNN has no loss primitive: all
// four are Quorum's; libtorch's categorical hinge is Quorum's Keras formula) give the limits the
// catalogue's kernels give (ops/loss.cpp) where a term's coefficient is 0: the term is absent, not
// 0 * log 0 or 0 * inf = NaN (issue 23's extreme values: such NaN were Quorum's own findings).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ir/json_io.h"
#include "worker/supervisor.h"

namespace quorum::backends {
namespace {

bool built(const std::string& backend) {
  const auto& have = worker::available_backends();
  return std::find(have.begin(), have.end(), backend) != have.end();
}

// One train step of y = reshape(x) (the prediction is x itself) with `loss` against `t`.
TrainResult train(const std::string& backend, const std::string& loss, const std::vector<double>& x,
                  const std::vector<double>& t, int64_t cols) {
  const int64_t rows = static_cast<int64_t>(x.size()) / cols;
  const std::string shape = "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
  const ir::Graph g = ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": )" + shape +
                                              R"(}], "outputs": ["y"],
    "nodes": [{"name": "y", "op": "reshape", "inputs": ["x"], "outputs": ["y"], "attrs": {"shape": )" +
                                              shape + "}}]}",
                                          "loss");
  worker::Worker w(backend, {}, worker::Limits{});
  EXPECT_TRUE(w.compile(g, CompileOptions{core::DType::F32, 1}).ok());
  TrainRequest req;
  req.inputs = {{"x", core::Tensor::f64({rows, cols}, x).to(core::DType::F32)}};
  req.target = core::Tensor::f64({rows, cols}, t).to(core::DType::F32);
  req.loss = loss;
  TrainResult r;
  EXPECT_TRUE(w.train(req, r).ok());
  return r;
}

class LossLimits : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!built(GetParam())) GTEST_SKIP() << GetParam() << " backend not built";
  }
};

TEST_P(LossLimits, CategoricalHingeIgnoresAnInfiniteLogitWhoseCoefficientIsZero) {
  if (GetParam() != "onednn" && GetParam() != "torch") GTEST_SKIP();
  // pos = 1 * inf (the +inf is the target's class); neg = max(0 * inf -> 0, 1, 2) = 2: margin -inf,
  // loss 0, gradient 0. As 0 * inf = NaN the loss was NaN.
  const TrainResult r = train(GetParam(), "categorical_hinge", {INFINITY, 1, 2}, {1, 0, 0}, 3);
  EXPECT_EQ(r.loss, 0.0);
  ASSERT_EQ(r.loss_grad.numel(), 3);
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(r.loss_grad.get(i), 0.0) << i;
}

TEST_P(LossLimits, CategoricalHingeSendsTheGradientToTheFirstOfTiedMaxima) {
  if (GetParam() != "onednn" && GetParam() != "torch") GTEST_SKIP();
  // (1 - t) * p = {0, inf, inf}: neg = inf at [1] and [2]; the first gets (1 - t) (the catalogue's
  // kernel), not half each (at::amax's even split).
  const TrainResult r = train(GetParam(), "categorical_hinge", {1, INFINITY, INFINITY}, {1, 0, 0}, 3);
  EXPECT_EQ(r.loss, INFINITY);
  ASSERT_EQ(r.loss_grad.numel(), 3);
  EXPECT_EQ(r.loss_grad.get(0), -1.0);
  EXPECT_EQ(r.loss_grad.get(1), 1.0);
  EXPECT_EQ(r.loss_grad.get(2), 0.0);
}

TEST_P(LossLimits, SoftmaxCrossEntropyIgnoresAMinusInfiniteLogitOfTargetZero) {
  if (GetParam() != "onednn") GTEST_SKIP();  // libtorch's own cross_entropy gives NaN (ledger)
  // log_softmax(-inf) = -inf with target 0: the term is absent; the loss is log(1 + e^-1).
  const TrainResult r = train(GetParam(), "softmax_cross_entropy", {-INFINITY, 1, 2}, {0, 0, 1}, 3);
  EXPECT_NEAR(r.loss, std::log1p(std::exp(-1.0)), 1e-5);
  ASSERT_EQ(r.loss_grad.numel(), 3);
  EXPECT_EQ(r.loss_grad.get(0), 0.0);
  EXPECT_NEAR(r.loss_grad.get(1), 1 / (1 + std::exp(1.0)), 1e-5);
}

TEST_P(LossLimits, BinaryCrossEntropyAtTheDomainsEdges) {
  if (GetParam() != "onednn") GTEST_SKIP();  // libtorch clamps log at -100 and p (1 - p) at 1e-12 (ledger)
  // p = t = 0 and p = t = 1: both terms absent in the loss (0, not 0 * log 0), gradients 1 / n and
  // -1 / n (the limits 1 / (1 - p) and -1 / p, not 0 / 0); p = 0.25, t = 0.5 as before.
  const TrainResult r = train(GetParam(), "binary_cross_entropy", {0, 1, 0.25}, {0, 1, 0.5}, 3);
  const double third = -(0.5 * std::log(0.25) + 0.5 * std::log(0.75)) / 3;
  EXPECT_NEAR(r.loss, third, 1e-5);
  ASSERT_EQ(r.loss_grad.numel(), 3);
  EXPECT_NEAR(r.loss_grad.get(0), 1.0 / 3, 1e-6);
  EXPECT_NEAR(r.loss_grad.get(1), -1.0 / 3, 1e-6);
  EXPECT_NEAR(r.loss_grad.get(2), (0.25 - 0.5) / (0.25 * 0.75) / 3, 1e-6);
}

TEST_P(LossLimits, BinaryCrossEntropyGradientAtASubnormalPredictionFitsFloat32) {
  if (GetParam() != "onednn") GTEST_SKIP();  // libtorch clamps p (1 - p) at 1e-12 (ledger)
  // p = 1e-40 (subnormal), t = 0.269, n = 16: (p - t) / (p (1 - p)) / n = -1.68e38 fits float32, but
  // (p - t) / (p (1 - p)) = -2.69e39 does not: Quorum's composition divided before scaling by 1 / n
  // and gave -inf. The other 15 elements are p = t = 0.5 (gradient 0).
  std::vector<double> p(16, 0.5), t(16, 0.5);
  p[0] = 1e-40;
  t[0] = 0.269;
  const TrainResult r = train(GetParam(), "binary_cross_entropy", p, t, 8);
  ASSERT_EQ(r.loss_grad.numel(), 16);
  const double p0 = static_cast<double>(static_cast<float>(p[0])), t0 = static_cast<double>(static_cast<float>(t[0]));
  ASSERT_GT(p0, 0.0);  // the subnormal survived the conversion
  const double want = (p0 - t0) / (p0 * (1 - p0)) / 16;
  EXPECT_NEAR(r.loss_grad.get(0), want, 1e-5 * std::abs(want));
  for (int64_t i = 1; i < 16; ++i) EXPECT_EQ(r.loss_grad.get(i), 0.0) << i;
}

INSTANTIATE_TEST_SUITE_P(Backends, LossLimits, testing::Values("onednn", "torch"));

}  // namespace
}  // namespace quorum::backends
