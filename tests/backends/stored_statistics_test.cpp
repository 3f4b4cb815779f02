// The gradients of an inference batch_norm's stored mean and variance. libtorch cannot differentiate
// its running statistics, so Quorum's torch lowering carries their gradients on a term that is zero
// in value (src/backends/torch/lower.cpp, lower_batch_norm). That term must not drop an element's
// gradient because the normalised value times the scale overflows float32 (seed 2613: scale
// FLT_MAX, and 30 of a channel's 324 gradient terms lost, so the variance's gradient was -2.04e38
// where it is +1.98e42), nor turn gy * |scale| = inf times rstd^3 = 0 into NaN. oneDNN has no
// gradient for them either: its lowering derives them from diff_scale / diff_shift
// (src/backends/onednn/lower.cpp), the scale multiplied last so that scale * rstd^2 cannot overflow
// where the gradient fits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
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

TEST(StoredStatistics, TorchCarriesTheVariancesGradientWhereScaleTimesXhatOverflows) {
  if (!built("torch")) GTEST_SKIP() << "torch backend not built";
  // Channel 0: x = 1, var 0.81, scale FLT_MAX, so (x - mean) * rstd * scale = 1.11 * FLT_MAX
  // overflows float32 (the output is inf), while the variance's gradient gy * scale * (x - mean) *
  // -0.5 * rstd^3 = -0.686 * FLT_MAX fits. categorical_hinge gives the finite incoming gradient
  // {1, -1} even for the infinite prediction.
  const ir::Graph g = ir::graph_from_json(R"({
    "inputs": [{"name": "x", "dtype": "float32", "shape": [1, 2]}], "outputs": ["y"],
    "initializers": [{"name": "s", "dtype": "float32", "shape": [2], "data": [3.4028235e+38, 1]},
                     {"name": "b", "dtype": "float32", "shape": [2], "data": [0, 0]},
                     {"name": "m", "dtype": "float32", "shape": [2], "data": [0, 0]},
                     {"name": "v", "dtype": "float32", "shape": [2], "data": [0.81, 1]}],
    "nodes": [{"name": "y", "op": "batch_norm", "inputs": ["x", "s", "b", "m", "v"], "outputs": ["y"],
               "attrs": {"epsilon": 1e-5, "training": 0}}]})",
                                          "bn_stored_statistics");
  worker::Worker w("torch", {}, worker::Limits{});
  ASSERT_TRUE(w.compile(g, CompileOptions{core::DType::F32, 1}).ok());
  TrainRequest req;
  req.inputs = {{"x", core::Tensor::f64({1, 2}, {1, 1}).to(core::DType::F32)}};
  req.target = core::Tensor::f64({1, 2}, {0, 1}).to(core::DType::F32);
  req.loss = "categorical_hinge";
  TrainResult r;
  ASSERT_TRUE(w.train(req, r).ok());
  ASSERT_EQ(r.grads.at("y").get(0), 1.0);
  ASSERT_EQ(r.grads.at("y").get(1), -1.0);
  const core::Tensor& gv = r.grads.at("v");
  const double want0 = -0.5 * static_cast<double>(FLT_MAX) * std::pow(static_cast<double>(0.81f) + 1e-5, -1.5);
  const double want1 = 0.5 * std::pow(1 + 1e-5, -1.5);
  EXPECT_NEAR(gv.get(0), want0, 1e-5 * std::abs(want0));
  EXPECT_NEAR(gv.get(1), want1, 1e-5);
  // The mean's gradient -gy * scale * rstd = -1.11 * FLT_MAX overflows float32 exactly: -inf.
  EXPECT_EQ(r.grads.at("m").get(0), -INFINITY);
}

// One train step of an inference batch_norm over x [1, C] with the given per-channel parameters.
TrainResult train_bn(const std::string& backend, const std::string& scale, const std::string& var,
                     const std::vector<double>& x, const std::vector<double>& target, const std::string& loss) {
  const std::string c = std::to_string(x.size());
  const std::string zeros = x.size() == 1 ? "[0]" : "[0, 0]";
  const auto param = [&](const std::string& name, const std::string& data) {
    return R"({"name": ")" + name + R"(", "dtype": "float32", "shape": [)" + c + R"(], "data": )" + data + "}";
  };
  const ir::Graph g = ir::graph_from_json(
      R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [1, )" + c + R"(]}], "outputs": ["y"],
          "initializers": [)" +
          param("s", scale) + ", " + param("b", zeros) + ", " + param("m", zeros) + ", " + param("v", var) + R"(],
          "nodes": [{"name": "y", "op": "batch_norm", "inputs": ["x", "s", "b", "m", "v"], "outputs": ["y"],
                     "attrs": {"epsilon": 1e-5, "training": 0}}]})",
      "bn_stored_statistics");
  worker::Worker w(backend, {}, worker::Limits{});
  EXPECT_TRUE(w.compile(g, CompileOptions{core::DType::F32, 1}).ok());
  const int64_t n = static_cast<int64_t>(x.size());
  TrainRequest req;
  req.inputs = {{"x", core::Tensor::f64({1, n}, x).to(core::DType::F32)}};
  req.target = core::Tensor::f64({1, n}, target).to(core::DType::F32);
  req.loss = loss;
  TrainResult r;
  EXPECT_TRUE(w.train(req, r).ok());
  return r;
}

TEST(StoredStatistics, OnednnVariancesGradientMultipliesByTheScaleLast) {
  if (!built("onednn")) GTEST_SKIP() << "onednn backend not built";
  // Channel 0: scale 0.4 * FLT_MAX, var 0.25 (rstd = 2), x = 0.06: xhat = 0.12, y = 0.096 * FLT_MAX.
  // categorical_hinge gives the incoming gradient {1, -1}: dshift = 1, dscale = 0.12. The mean's
  // gradient -scale * rstd * dshift = -0.8 * FLT_MAX and the variance's -0.5 * scale * rstd^2 *
  // dscale = -0.096 * FLT_MAX = -3.3e37 fit float32; Quorum's composition multiplied scale * rstd^2
  // = 1.6 * FLT_MAX first: inf, so the variance's gradient was -inf.
  const float scale0 = 0.4f * FLT_MAX;
  char scale[64];
  std::snprintf(scale, sizeof scale, "[%.9g, 1]", static_cast<double>(scale0));
  const TrainResult r = train_bn("onednn", scale, "[0.25, 1]", {0.06, 0}, {0, 1}, "categorical_hinge");
  ASSERT_EQ(r.grads.at("y").get(0), 1.0);
  ASSERT_EQ(r.grads.at("y").get(1), -1.0);
  const double rstd0 = 1 / std::sqrt(static_cast<double>(0.25f) + 1e-5);
  const double s0 = static_cast<double>(scale0);
  const double want0 = -0.5 * s0 * rstd0 * rstd0 * (static_cast<double>(0.06f) * rstd0);
  const core::Tensor& gv = r.grads.at("v");
  EXPECT_NEAR(gv.get(0), want0, 1e-5 * std::abs(want0));
  EXPECT_EQ(gv.get(1), 0.0);  // x = mean: xhat 0, dscale 0
  const double want_m0 = -s0 * rstd0;
  EXPECT_NEAR(r.grads.at("m").get(0), want_m0, 1e-5 * std::abs(want_m0));
  EXPECT_NEAR(r.grads.at("m").get(1), 1 / std::sqrt(1 + 1e-5), 1e-6);  // -1 * rstd * -1
}

TEST(StoredStatistics, TorchVariancesGradientIsNotNanWhereGyTimesScaleOverflowsAndRstdCubedUnderflows) {
  if (!built("torch")) GTEST_SKIP() << "torch backend not built";
  // scale FLT_MAX, var 1e32: rstd = 1e-16 and rstd^3 = 1e-48 underflows float32 to 0; x = 1e6 gives
  // xhat = 1e-10 and y = 3.4e28, so mse_loss against 0 sends gy = 2 y = 6.8e28, and gy * |scale|
  // overflows to inf. The variance's gradient gy * scale * x * -0.5 * rstd^3 = -1.16e25 fits; the
  // zero-valued carrier multiplied gy by |scale| first and rsqrt's backward then by rstd^3 = 0:
  // inf * 0 = NaN.
  const TrainResult r = train_bn("torch", "[3.4028235e+38]", "[1e32]", {1e6}, {0}, "mse_loss");
  const double gy = r.grads.at("y").get(0);
  ASSERT_TRUE(std::isfinite(gy));
  ASSERT_GT(gy * static_cast<double>(FLT_MAX), static_cast<double>(FLT_MAX));
  const double rstd = 1 / std::sqrt(static_cast<double>(1e32f) + 1e-5);
  const double want = -0.5 * gy * static_cast<double>(FLT_MAX) * 1e6 * rstd * rstd * rstd;
  const core::Tensor& gv = r.grads.at("v");
  EXPECT_NEAR(gv.get(0), want, 1e-5 * std::abs(want));
  // The mean's gradient -gy * scale * rstd = -2.3e51 overflows float32 exactly: -inf.
  EXPECT_EQ(r.grads.at("m").get(0), -INFINITY);
}

TEST(StoredStatistics, TorchVariancesGradientIsNotNanWhereTheNormalisedValueOverflowsAndGyIsZero) {
  if (!built("torch")) GTEST_SKIP() << "torch backend not built";
  // Seed 10411: channel 0's stored mean is FLT_MAX, x = 0 and var 0.545, so xhat = -FLT_MAX * 1.35 is
  // -inf in float32 while the gradient reaching it is 0. The carrier's d/dvar was gy * xhat = 0 * -inf = NaN
  // where the exact gradient is 0.
  const ir::Graph g = ir::graph_from_json(R"({
    "inputs": [{"name": "x", "dtype": "float32", "shape": [1, 2]}], "outputs": ["y"],
    "initializers": [{"name": "s", "dtype": "float32", "shape": [2], "data": [1, 1]},
                     {"name": "b", "dtype": "float32", "shape": [2], "data": [0, 0]},
                     {"name": "m", "dtype": "float32", "shape": [2], "data": [3.4028235e+38, 0]},
                     {"name": "v", "dtype": "float32", "shape": [2], "data": [0.54486626, 1]}],
    "nodes": [{"name": "y", "op": "batch_norm", "inputs": ["x", "s", "b", "m", "v"], "outputs": ["y"],
               "attrs": {"epsilon": 1e-5, "training": 0}}]})",
                                          "bn_overflowed_xhat");
  worker::Worker w("torch", {}, worker::Limits{});
  ASSERT_TRUE(w.compile(g, CompileOptions{core::DType::F32, 1}).ok());
  TrainRequest req;
  req.inputs = {{"x", core::Tensor::f64({1, 2}, {0, 1}).to(core::DType::F32)}};
  req.target = core::Tensor::f64({1, 2}, {0, 1}).to(core::DType::F32);
  req.loss = "categorical_hinge";
  TrainResult r;
  ASSERT_TRUE(w.train(req, r).ok());
  ASSERT_EQ(r.grads.at("y").get(0), 0.0);
  for (const char* p : {"v", "m", "s"}) EXPECT_EQ(r.grads.at(p).get(0), 0.0) << p;
  EXPECT_TRUE(std::isfinite(r.grads.at("v").get(1)));
}

}  // namespace
}  // namespace quorum::backends
