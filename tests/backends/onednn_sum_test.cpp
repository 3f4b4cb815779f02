// Quorum's oneDNN sum over inputs of different shapes: a chain of broadcasting adds whose first
// result has the output's dims, as the lowering declares it (the campaign of seed 2026 caught the
// backend's sink computing the first add at the first two inputs' smaller broadcast and reading the
// next add's operand past its end: garbage up to -3.6e34 and NaN, where the sum is 9.6).
#include <gtest/gtest.h>

#include <algorithm>

#include "ir/json_io.h"
#include "worker/supervisor.h"

namespace quorum::backends {
namespace {

TEST(OneDNNSum, BroadcastingInputsAddElementwise) {
  const auto& have = worker::available_backends();
  if (std::find(have.begin(), have.end(), "onednn") == have.end()) GTEST_SKIP() << "onednn backend not built";
  const ir::Graph g = ir::graph_from_json(R"({"inputs": [{"name": "a", "dtype": "float32", "shape": [1, 3]},
                                                         {"name": "b", "dtype": "float32", "shape": [1]},
                                                         {"name": "c", "dtype": "float32", "shape": [2, 3]}],
    "outputs": ["s"],
    "nodes": [{"name": "s", "op": "sum", "inputs": ["a", "b", "c"], "outputs": ["s"]}]})",
                                          "sum");
  worker::Worker w("onednn", {}, worker::Limits{});
  ASSERT_TRUE(w.compile(g, CompileOptions{core::DType::F32, 1}).ok());
  const ValueMap in{{"a", core::Tensor::f64({1, 3}, {1, 2, 3}).to(core::DType::F32)},
                    {"b", core::Tensor::f64({1}, {10}).to(core::DType::F32)},
                    {"c", core::Tensor::f64({2, 3}, {100, 200, 300, 400, 500, 600}).to(core::DType::F32)}};
  ValueMap out;
  ASSERT_TRUE(w.forward(in, false, out).ok());
  const core::Tensor& s = out.at("s");
  ASSERT_EQ(s.shape(), (core::Shape{2, 3}));
  const double want[] = {111, 212, 313, 411, 512, 613};
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(s.get(i), want[i]) << "element " << i;
}

}  // namespace
}  // namespace quorum::backends
