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
  for (int64_t i = 0; i < gn.numel(); ++i)
    EXPECT_TRUE(std::isfinite(gn.get(i))) << "element " << i << ": " << gn.get(i);
  EXPECT_NEAR(gn.get(0) / -2e20, 1.0, 1e-5);
  EXPECT_EQ(gn.get(1), 0.0);
}

}  // namespace
}  // namespace quorum::backends

namespace quorum::backends {
namespace {

// Quorum's oneDNN reduce_max backward routes the gradient through a mask of the elements equal to
// the slice's maximum; NaN equals nothing, so a slice whose maximum is NaN got no gradient at all
// (the campaign's reduce_max BC finding, seed 5550123: 208 slices of NaN). The first NaN gets it,
// as in the catalogue.
TEST(OneDNNReduceMax, ANaNMaximumsGradientGoesToTheFirstNaN) {
  const auto& have = worker::available_backends();
  if (std::find(have.begin(), have.end(), "onednn") == have.end()) GTEST_SKIP() << "onednn backend not built";
  // relu (oneDNN's turns NaN into 0) keeps the loss and the incoming gradient finite.
  const ir::Graph g = ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [2, 3]}],
    "outputs": ["r"],
    "nodes": [{"name": "n", "op": "neg", "inputs": ["x"], "outputs": ["n"]},
              {"name": "m", "op": "reduce_max", "inputs": ["n"], "outputs": ["m"], "attrs": {"axes": [1], "keepdims": 1}},
              {"name": "r", "op": "relu", "inputs": ["m"], "outputs": ["r"]}]})",
                                          "max_nan");
  worker::Worker w("onednn", {}, worker::Limits{});
  ASSERT_TRUE(w.compile(g, CompileOptions{core::DType::F32, 1}).ok());
  TrainRequest req;
  req.inputs = {{"x", core::Tensor::f64({2, 3}, {NAN, NAN, NAN, -1, -3, -2}).to(core::DType::F32)}};
  req.target = core::Tensor::f64({2, 1}, {1, 1}).to(core::DType::F32);  // relu(NaN) = 0 on oneDNN: gradient -1
  req.loss = "mse_loss";
  TrainResult r;
  ASSERT_TRUE(w.train(req, r).ok());
  const core::Tensor& gn = r.grads.at("n");
  const double gy0 = r.grads.at("m").get(0), gy1 = r.grads.at("m").get(1);
  ASSERT_TRUE(std::isfinite(gy0));
  // Row 0 is all NaN: its gradient lands on the first element only.
  EXPECT_EQ(gn.get(0), gy0);
  EXPECT_EQ(gn.get(1), 0.0);
  EXPECT_EQ(gn.get(2), 0.0);
  // Row 1's maximum is 3 (of -x): element 1.
  EXPECT_EQ(gn.get(3), 0.0);
  EXPECT_EQ(gn.get(4), gy1);
  EXPECT_EQ(gn.get(5), 0.0);
}

}  // namespace
}  // namespace quorum::backends
