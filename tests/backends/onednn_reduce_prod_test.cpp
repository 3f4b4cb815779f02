// Quorum's oneDNN reduce_prod backward (oneDNN has no reduction backward; the glue is Quorum's):
// the product of the other elements must not be the slice's product divided by x_i, which is
// inf / x and then inf * 0 = NaN when the product overflows float32 and the slice holds a zero.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "ir/json_io.h"
#include "worker/supervisor.h"

namespace quorum::backends {
namespace {

TEST(OneDNNReduceProd, BackwardIsFiniteWhenTheProductOverflowsBesideAZero) {
  const auto& have = worker::available_backends();
  if (std::find(have.begin(), have.end(), "onednn") == have.end()) GTEST_SKIP() << "onednn backend not built";
  const ir::Graph g = ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 4]}],
    "outputs": ["p"],
    "nodes": [{"name": "n", "op": "neg", "inputs": ["x"], "outputs": ["n"]},
              {"name": "p", "op": "reduce_prod", "inputs": ["n"], "outputs": ["p"], "attrs": {"axes": [1], "keepdims": 1}}]})",
                                          "prod");
  worker::Worker w("onednn", {}, worker::Limits{});
  ASSERT_TRUE(w.compile(g, CompileOptions{core::DType::F32, 1}).ok());
  TrainRequest req;
  req.inputs = {{"x", core::Tensor::f64({1, 4}, {0, -1e20, -1e20, -1e-20}).to(core::DType::F32)}};
  req.target = core::Tensor::f64({1, 1}, {1}).to(core::DType::F32);
  req.loss = "mse_loss";
  TrainResult r;
  ASSERT_TRUE(w.train(req, r).ok());
  const core::Tensor& gn = r.grads.at("n");
  // d p / d n_0 = 1e20 * 1e20 * 1e-20 = 1e20 (times the loss gradient -2); the others are 0.
  for (int64_t i = 0; i < gn.numel(); ++i) EXPECT_TRUE(std::isfinite(gn.get(i))) << "element " << i << ": " << gn.get(i);
  EXPECT_NEAR(gn.get(0) / -2e20, 1.0, 1e-5);
  EXPECT_EQ(gn.get(1), 0.0);
}

}  // namespace
}  // namespace quorum::backends
