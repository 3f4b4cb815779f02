// Quorum's oneDNN div backward (composed from binary primitives; the glue is Quorum's): the
// divisor's gradient -gy * a / b^2 must be computed as -gy * ((a / b) / b), as libtorch does, not
// as -(gy / b) * (a / b), whose first factor overflows float32 (gy = -3.76e37, b = 0.1) where the
// gradient itself fits (-1.6e38 in the 50-minute campaign's oneDNN div BC finding).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "ir/json_io.h"
#include "worker/supervisor.h"

namespace quorum::backends {
namespace {

TEST(OneDNNDiv, TheDivisorsGradientIsFiniteWhereGyOverBOverflows) {
  const auto& have = worker::available_backends();
  if (std::find(have.begin(), have.end(), "onednn") == have.end()) GTEST_SKIP() << "onednn backend not built";
  const ir::Graph g = ir::graph_from_json(R"({"inputs": [{"name": "a", "dtype": "float32", "shape": [1, 2]},
                                                         {"name": "b", "dtype": "float32", "shape": [1, 2]}],
    "outputs": ["q"],
    "nodes": [{"name": "q", "op": "div", "inputs": ["a", "b"], "outputs": ["q"]}]})",
                                          "div");
  worker::Worker w("onednn", {}, worker::Limits{});
  ASSERT_TRUE(w.compile(g, CompileOptions{core::DType::F32, 1}).ok());
  TrainRequest req;
  req.inputs = {{"a", core::Tensor::f64({1, 2}, {0.04, 1}).to(core::DType::F32)},
                {"b", core::Tensor::f64({1, 2}, {0.1, 2}).to(core::DType::F32)}};
  // mse_loss's gradient 2 (q - t) / 2 = q - t: about 3.76e37 at element 0.
  req.target = core::Tensor::f64({1, 2}, {-3.76e37, 0}).to(core::DType::F32);
  req.loss = "mse_loss";
  TrainResult r;
  ASSERT_TRUE(w.train(req, r).ok());
  const double gq = r.grads.at("q").get(0);
  ASSERT_GT(gq, 3e37);
  const core::Tensor& gb = r.grads.at("b");
  const double a = static_cast<float>(0.04), b = static_cast<float>(0.1);
  const double want = -gq * (a / b) / b;  // about -1.5e38: fits float32
  ASSERT_LT(std::abs(want), 3.4e38);
  EXPECT_TRUE(std::isfinite(gb.get(0))) << gb.get(0);
  EXPECT_NEAR(gb.get(0) / want, 1.0, 1e-5);
}

}  // namespace
}  // namespace quorum::backends
