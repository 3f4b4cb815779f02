// The gradients of an inference batch_norm's stored mean and variance. libtorch cannot differentiate
// its running statistics, so Quorum's torch lowering carries their gradients on a term that is zero
// in value (src/backends/torch/lower.cpp, lower_batch_norm). That term must not drop an element's
// gradient because the normalised value times the scale overflows float32 (seed 2613: scale
// FLT_MAX, and 30 of a channel's 324 gradient terms lost, so the variance's gradient was -2.04e38
// where it is +1.98e42).
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>

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

}  // namespace
}  // namespace quorum::backends
