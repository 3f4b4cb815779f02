// The static value-range analysis: interval arithmetic and operators' range rules on hand-computed
// cases, flags of vulnerable operations, and soundness (every forward value inside its interval)
// on sampled cases of every operator with a rule.
#include "ref/ranges.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ir/build.h"
#include "ir/json_io.h"
#include "ops/registry.h"
#include "ref/interpreter.h"

namespace quorum::ref {
namespace {

using ops::Interval;
using ops::kInf;

void expect_interval(const Interval& got, double lo, double hi) {
  EXPECT_DOUBLE_EQ(got.lo, lo);
  EXPECT_DOUBLE_EQ(got.hi, hi);
}

TEST(Ranges, IntervalArithmeticByHand) {
  expect_interval(ops::add({1, 2}, {3, 5}), 4, 7);
  expect_interval(ops::sub({1, 2}, {3, 5}), -4, -1);
  expect_interval(ops::mul({-1, 2}, {3, 4}), -4, 8);
  expect_interval(ops::mul({-1, 2}, {-3, 4}), -6, 8);
  expect_interval(ops::div({1, 2}, {2, 4}), 0.25, 1);
  expect_interval(ops::div({1, 2}, {-1, 1}), -kInf, kInf);  // the divisor holds 0
  expect_interval(ops::sum_of({-1, 2}, 3), -3, 6);
  expect_interval(ops::add({-kInf, 0}, {1, kInf}), -kInf, kInf);  // -inf + inf widens
  expect_interval(ops::mul({0, 0}, {-kInf, kInf}), 0, 0);         // 0 * inf is 0
  expect_interval(ops::hull({0, 1}, {3, 4}), 0, 4);
}

// The rule of a one-input operator `op` with `attrs` on the interval x.
Interval unary(const std::string& op, Interval x, core::Attrs attrs = {}) {
  const ops::OpSpec& s = ops::op(op);
  const core::Attrs a = ops::canonical_attrs(s, attrs);
  return s.range({x}, {core::TensorType{core::DType::F64, {4}}}, a)[0];
}

TEST(Ranges, UnaryRulesByHand) {
  expect_interval(unary("relu", {-2, 3}), 0, 3);
  expect_interval(unary("exp", {0, 1}), 1, std::exp(1.0));
  expect_interval(unary("neg", {-2, 3}), -3, 2);
  expect_interval(unary("square", {-2, 3}), 0, 9);
  expect_interval(unary("square", {1, 3}), 1, 9);
  expect_interval(unary("abs", {-5, -1}), 1, 5);
  expect_interval(unary("sigmoid", {-kInf, kInf}), 0, 1);
  expect_interval(unary("tanh", {0, kInf}), 0, 1);
  expect_interval(unary("clip", {-5, 5}, {{"min", -1.0}, {"max", 2.0}}), -1, 2);
  expect_interval(unary("reciprocal", {2, 4}), 0.25, 0.5);
  expect_interval(unary("reciprocal", {-1, 4}), -kInf, kInf);
  expect_interval(unary("hardswish", {-3, 3}), -0.375, 3);
  // log of an interval reaching 0 or below is unbounded below (NaN is no element).
  expect_interval(unary("log", {-1, std::exp(2.0)}), -kInf, 2);
  expect_interval(unary("sqrt", {4, 9}), 2, 3);
  expect_interval(unary("pow", {-2, 3}, {{"exponent", 2.0}}), 0, 9);
  expect_interval(unary("pow", {-2, 4}, {{"exponent", 0.5}}), 0, 2);  // negatives give NaN
  expect_interval(unary("pow", {1, 4}, {{"exponent", -1.0}}), 0.25, 1);
}

ir::Graph graph(const std::string& nodes, const std::string& inits = "[]") {
  return ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 2]}], "outputs": ["y"],
    "initializers": )" + inits + R"(, "nodes": )" +
                                 nodes + "}",
                             "test");
}

TEST(Ranges, DenseThenExpByHand) {
  // y = exp(x W^T + b), W = [[1, -2], [0.5, 0.5]], b = [0, 1]: the weights' hull is [-2, 1], the
  // bias's [0, 1]; with x in [-1, 1] each of the 2 products lies in [-2, 2], the sum in [-4, 4], plus
  // the bias [-4, 5]; exp's operand stays below 88.72: safe. With x in [-30, 30]: [-120, 121]: flagged.
  const ir::Graph g = graph(
      R"([{"name": "fc", "op": "dense", "inputs": ["x", "w", "b"], "outputs": ["fc"], "attrs": {"units": 2}},
          {"name": "y", "op": "exp", "inputs": ["fc"], "outputs": ["y"]}])",
      R"([{"name": "w", "dtype": "float32", "shape": [2, 2], "data": [1, -2, 0.5, 0.5]},
          {"name": "b", "dtype": "float32", "shape": [2], "data": [0, 1]}])");
  RangeAnalysis a = analyze_ranges(g, {{"x", {-1, 1}}});
  expect_interval(a.ranges.at("fc"), -4, 5);
  expect_interval(a.ranges.at("y"), std::exp(-4.0), std::exp(5.0));
  ASSERT_EQ(a.sites.size(), 1u);
  EXPECT_EQ(a.sites[0].node, "y");
  EXPECT_FALSE(a.sites[0].flagged);
  a = analyze_ranges(g, {{"x", {-30, 30}}});
  expect_interval(a.ranges.at("fc"), -120, 121);
  EXPECT_TRUE(a.sites[0].flagged);
  // Weights anywhere: unbounded, flagged.
  a = analyze_ranges(g, {{"x", {-1, 1}}}, true);
  EXPECT_TRUE(a.sites[0].flagged);
}

TEST(Ranges, LogOfSoftmaxAndDivisionByANorm) {
  // softmax over 2 elements of inputs in [-1, 1]: p in [1/(1+e^2), 1/(1+e^-2)], above 0: log is safe.
  const ir::Graph sm = graph(R"([{"name": "p", "op": "softmax", "inputs": ["x"], "outputs": ["p"]},
                                 {"name": "y", "op": "log", "inputs": ["p"], "outputs": ["y"]}])");
  RangeAnalysis a = analyze_ranges(sm, {{"x", {-1, 1}}});
  EXPECT_NEAR(a.ranges.at("p").lo, 1 / (1 + std::exp(2.0)), 1e-15);
  EXPECT_NEAR(a.ranges.at("p").hi, 1 / (1 + std::exp(-2.0)), 1e-15);
  EXPECT_FALSE(a.sites[0].flagged);
  // Inputs in [-100, 100]: p down to 1/(1+e^200), which float32 rounds to 0: flagged.
  a = analyze_ranges(sm, {{"x", {-100, 100}}});
  EXPECT_TRUE(a.sites[0].flagged);

  // x / sqrt(sum(x^2)): the sum of squares is in [0, 2], its root in [0, sqrt 2]; the divisor can be
  // 0: the division is flagged; sqrt's operand is >= 0: safe.
  const ir::Graph norm = graph(R"([{"name": "sq", "op": "square", "inputs": ["x"], "outputs": ["sq"]},
      {"name": "s", "op": "reduce_sum", "inputs": ["sq"], "outputs": ["s"], "attrs": {"axes": [1]}},
      {"name": "n", "op": "sqrt", "inputs": ["s"], "outputs": ["n"]},
      {"name": "y", "op": "div", "inputs": ["x", "n"], "outputs": ["y"]}])");
  a = analyze_ranges(norm, {{"x", {-1, 1}}});
  expect_interval(a.ranges.at("s"), 0, 2);
  expect_interval(a.ranges.at("n"), 0, std::sqrt(2.0));
  ASSERT_EQ(a.sites.size(), 2u);
  EXPECT_EQ(a.sites[0].node, "n");
  EXPECT_FALSE(a.sites[0].flagged);
  EXPECT_EQ(a.sites[1].node, "y");
  EXPECT_TRUE(a.sites[1].flagged);
  // With inputs in [0.5, 1] the norm is at least sqrt(0.5): safe.
  a = analyze_ranges(norm, {{"x", {0.5, 1}}});
  EXPECT_FALSE(a.sites[1].flagged);
}

TEST(Ranges, ValidRegionInFloat32) {
  const auto& log_valid = ops::op("log").valid_ranges;
  EXPECT_FALSE(invalid_value(log_valid, 1e-30));
  EXPECT_TRUE(invalid_value(log_valid, 1e-50));  // rounds to 0 in float32
  EXPECT_TRUE(invalid_value(log_valid, -1));
  const auto& exp_valid = ops::op("exp").valid_ranges;
  EXPECT_FALSE(invalid_value(exp_valid, 80));
  EXPECT_TRUE(invalid_value(exp_valid, 89));
  const BoundaryDistance d = boundary_distance(exp_valid, 80);
  EXPECT_DOUBLE_EQ(d.distance, 88.72 - 80);
  EXPECT_EQ(d.toward, 1);
  const auto& rec = ops::op("reciprocal").valid_ranges;
  EXPECT_DOUBLE_EQ(boundary_distance(rec, -0.5).distance, 0.5);
  EXPECT_EQ(boundary_distance(rec, -0.5).toward, 1);
  EXPECT_TRUE(reaches_invalid(rec, {-1, 1}));
  EXPECT_FALSE(reaches_invalid(rec, {0.5, 1}));
}

// Soundness: for every operator with a rule, sampled cases' forward values lie in the intervals the
// rule gives for their inputs' hulls.
TEST(Ranges, RulesHoldOnSampledCases) {
  int checked = 0;
  for (const ops::OpSpec* s : ops::catalogue().all()) {
    if (!s->range || s->is_loss) continue;
    core::Rng rng(7);
    for (int k = 0; k < 6; ++k) {
      ir::SingleNode sn;
      try {
        sn = ir::single_node_graph(*s, s->sample(rng), rng, core::DType::F64);
      } catch (const core::OpError&) {
        continue;
      }
      ValueMap values = forward(sn.graph, sn.inputs);
      RangeMap in;
      for (const auto& gi : sn.graph.inputs) {
        const Tensor& t = values.at(gi.name);
        Interval h{kInf, -kInf};
        for (int64_t i = 0; i < t.numel(); ++i) h = ops::hull(h, Interval{t.get(i), t.get(i)});
        in[gi.name] = h;
      }
      const RangeAnalysis a = analyze_ranges(sn.graph, in);
      for (const auto& n : sn.graph.nodes)
        for (const auto& o : n.outputs) {
          const Interval r = a.ranges.at(o);
          const Tensor& t = values.at(o);
          for (int64_t i = 0; i < t.numel(); ++i) {
            const double v = t.get(i);
            if (std::isnan(v)) continue;
            const double slack = 1e-9 * std::max(1.0, std::abs(v));
            EXPECT_TRUE(v >= r.lo - slack && v <= r.hi + slack)
                << s->name << ": " << v << " outside [" << r.lo << ", " << r.hi << "]";
          }
          ++checked;
        }
    }
  }
  EXPECT_GT(checked, 100);
}

}  // namespace
}  // namespace quorum::ref
