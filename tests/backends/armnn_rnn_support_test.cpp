// The ArmNN backend unrolls recurrent cells over time (ArmNN 20.08 has no GRU or Elman layer), and
// ArmNN's optimizer takes time growing faster than the square of the layer count: a GRU over 1 080 steps
// (about 20 000 layers) ran into the worker's 60 s limit and was reported as a timeout "crash" of
// ArmNN. The backend refuses what its own lowering makes that large, with a reason.
#include <gtest/gtest.h>

#include <algorithm>

#include "ir/json_io.h"
#include "worker/supervisor.h"

namespace quorum::backends {
namespace {

ir::Graph gru(int64_t steps) {
  const std::string T = std::to_string(steps);
  return ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [1, )" + T + R"(, 2]}],
    "outputs": ["r"],
    "initializers": [{"name": "w_ih", "dtype": "float32", "shape": [6, 2], "data": [1,2,3,4,5,6,7,8,9,10,11,12]},
                     {"name": "w_hh", "dtype": "float32", "shape": [6, 2], "data": [1,2,3,4,5,6,7,8,9,10,11,12]},
                     {"name": "b_ih", "dtype": "float32", "shape": [6], "data": [0,0,0,0,0,0]},
                     {"name": "b_hh", "dtype": "float32", "shape": [6], "data": [0,0,0,0,0,0]}],
    "nodes": [{"name": "r", "op": "gru", "inputs": ["x", "w_ih", "w_hh", "b_ih", "b_hh"], "outputs": ["r"],
               "attrs": {"hidden_size": 2, "return_sequences": 1}}]})",
                             "gru");
}

TEST(ArmNNRnn, ACellUnrolledIntoTooManyLayersIsRefusedWithAReason) {
  const auto& have = worker::available_backends();
  if (std::find(have.begin(), have.end(), "armnn") == have.end()) GTEST_SKIP() << "armnn backend not built";
  worker::Worker w("armnn", {}, worker::Limits{});
  std::vector<worker::NodeSupport> sup;
  ASSERT_TRUE(w.supports(gru(1080), false, sup).ok());
  ASSERT_EQ(sup.size(), 1u);
  EXPECT_FALSE(sup[0].ok);
  EXPECT_NE(sup[0].reason.find("over 1080 steps"), std::string::npos) << sup[0].reason;
  sup.clear();
  ASSERT_TRUE(w.supports(gru(60), false, sup).ok());
  ASSERT_EQ(sup.size(), 1u);
  EXPECT_TRUE(sup[0].ok) << sup[0].reason;
}

// The same budget for the other lowering that grows with the model: a transposed convolution runs
// one layer per sample (the campaign's conv_transpose2d over a batch of 2 310 timed out).
TEST(ArmNNRnn, ATransposedConvolutionOverAHugeBatchIsRefusedWithAReason) {
  const auto& have = worker::available_backends();
  if (std::find(have.begin(), have.end(), "armnn") == have.end()) GTEST_SKIP() << "armnn backend not built";
  auto model = [](int64_t n) {
    return ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [)" + std::to_string(n) +
                                   R"(, 1, 1, 1]}], "outputs": ["y"],
      "initializers": [{"name": "w", "dtype": "float32", "shape": [1, 2, 1, 1], "data": [1, 2]}],
      "nodes": [{"name": "y", "op": "conv_transpose2d", "inputs": ["x", "w"], "outputs": ["y"],
                 "attrs": {"out_channels": 2, "kernel_shape": [1, 1], "bias": 0}}]})",
                               "tconv");
  };
  worker::Worker w("armnn", {}, worker::Limits{});
  std::vector<worker::NodeSupport> sup;
  ASSERT_TRUE(w.supports(model(2310), false, sup).ok());
  ASSERT_EQ(sup.size(), 1u);
  EXPECT_FALSE(sup[0].ok);
  EXPECT_NE(sup[0].reason.find("batch of 2310"), std::string::npos) << sup[0].reason;
  sup.clear();
  ASSERT_TRUE(w.supports(model(4), false, sup).ok());
  EXPECT_TRUE(sup[0].ok) << sup[0].reason;
}

}  // namespace
}  // namespace quorum::backends
