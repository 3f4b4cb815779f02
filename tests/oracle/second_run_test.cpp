// The whole-graph envelope of a second run (optimized, batch relation): what every correct float32 evaluation
// of the graph can reach.
#include "oracle/second_run.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ir/json_io.h"
#include "oracle/spread.h"
#include "ref/interpreter.h"

namespace quorum::oracle {
namespace {

// A float32 sum of `x` in the order `order`, divided by its length.
double float32_mean(const std::vector<double>& x, const std::vector<size_t>& order) {
  float s = 0;
  for (size_t i : order) s += static_cast<float>(x[i]);
  return static_cast<double>(s / static_cast<float>(x.size()));
}

// A row holding -1e6 and 1e6 beside small values: its float32 sum is as good as one rounding at 1e6, and
// two orders give means 1e-3 apart where the mean is 0.05. ONNX Runtime's ReduceMean sums in an order set
// by the row's alignment, so a sample's mean moved with its position in a batch (seed 6271); the envelope
// holds both orders, and not a mean off by far more than a rounding of the sum.
TEST(SecondRun, TheEnvelopeOfAReductionHoldsItsSumsRoundingAtItsTermsMagnitude) {
  const ir::Graph g = ir::graph_from_json(R"({
    "inputs": [{"name": "x", "dtype": "float32", "shape": [1, 16]}], "outputs": ["y"],
    "nodes": [{"name": "y", "op": "reduce_mean", "inputs": ["x"], "outputs": ["y"],
               "attrs": {"axes": [1], "keepdims": 0}}]})",
                                          "cancel");
  std::vector<double> x = {-1e6, 1e6};
  for (int i = 0; i < 14; ++i) x.push_back(static_cast<double>(static_cast<float>(0.05 + 0.06 * i)));
  const backends::ValueMap in = {{"x", core::Tensor::f64({1, 16}, x)}};
  const backends::ValueMap ref = ref::forward(g, in);
  const double want = ref.at("y").get(0);
  const double envelope = detail::graph_envelope(g, in, ref, core::DType::F32, {"y"}).at("y").get(0);
  std::vector<size_t> in_order(16), big_first_apart(16);
  for (size_t i = 0; i < 16; ++i) in_order[i] = i;
  big_first_apart = {0, 2, 3, 4, 5, 6, 7, 8, 1, 9, 10, 11, 12, 13, 14, 15};
  const double a = float32_mean(x, in_order), b = float32_mean(x, big_first_apart);
  ASSERT_GT(std::abs(a - b), 1e-3);  // the two orders differ by far more than the mean's own tolerance
  EXPECT_LE(std::abs(a - want), kMargin * envelope) << a << " vs " << want << ", envelope " << envelope;
  EXPECT_LE(std::abs(b - want), kMargin * envelope) << b << " vs " << want << ", envelope " << envelope;
  EXPECT_GT(1.0, kMargin * envelope);  // a mean off by 1 is not a rounding of this sum
}

}  // namespace
}  // namespace quorum::oracle
