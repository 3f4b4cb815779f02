// The reducer's last step: graph inputs halved while the finding remains, keeping the half that
// holds the trigger; sizes an operator's shape rule refuses are skipped.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/graph.h"
#include "localize/reduce.h"
#include "ops/registry.h"

namespace quorum::localize {
namespace {

bool has_nan(const core::Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (std::isnan(t.get(i))) return true;
  return false;
}

Case relu_case(core::Shape shape, int64_t nan_at) {
  Case c;
  c.graph.inputs = {{"x", {core::DType::F32, shape}}};
  c.graph.nodes.push_back({"r", "relu", {"x"}, {"r"}, {}});
  c.graph.outputs = {"r"};
  ir::validate(c.graph, "test");
  std::vector<double> v(static_cast<size_t>(core::numel(shape)), 0.5);
  v[static_cast<size_t>(nan_at)] = std::nan("");
  c.inputs["x"] = core::Tensor::f64(shape, v);
  return c;
}

TEST(Shrink, HalvesToTheElementThatTriggers) {
  // A library that swallows NaN: the finding shows while the input holds the NaN (last element).
  const Case c = relu_case({4, 6}, 23);
  const Predicate holds = [](const Case& k) { return has_nan(k.inputs.at("x")); };
  Reduced r = reduce(c, "r", false, {}, {}, holds, ReduceOptions{100, nullptr});
  ASSERT_TRUE(r.reproduced);
  shrink_inputs(r, holds, ReduceOptions{100, nullptr});
  EXPECT_EQ(r.reduced.graph.inputs[0].type.shape, (core::Shape{1, 1}));
  EXPECT_TRUE(has_nan(r.reduced.inputs.at("x")));
  EXPECT_EQ(r.elements_before, 24);
  EXPECT_EQ(r.elements, 1);
  EXPECT_LE(r.runs, 100);
}

TEST(Shrink, StopsWhereTheShapeRuleRefusesAndWithinTheBudget) {
  Case c;
  c.graph.inputs = {{"x", {core::DType::F32, {1, 1, 8, 8}}}};
  ir::Node n{"p", "max_pool2d", {"x"}, {"p"}, {}};
  n.attrs = ops::canonical_attrs(ops::op("max_pool2d"), {{"kernel_shape", std::vector<int64_t>{3, 3}}});
  c.graph.nodes.push_back(n);
  c.graph.outputs = {"p"};
  ir::validate(c.graph, "test");
  c.inputs["x"] = core::Tensor::f64({1, 1, 8, 8}, std::vector<double>(64, 1.0));
  const Predicate always = [](const Case&) { return true; };
  Reduced r = reduce(c, "p", false, {}, {}, always, ReduceOptions{100, nullptr});
  shrink_inputs(r, always, ReduceOptions{100, nullptr});
  // 8 -> 4 -> 2 would leave the 3x3 window no room: the spatial axes stop at 4.
  EXPECT_EQ(r.reduced.graph.inputs[0].type.shape, (core::Shape{1, 1, 4, 4}));
  // A budget of 3 runs: the original, the node alone, one halving.
  Reduced small = reduce(c, "p", false, {}, {}, always, ReduceOptions{3, nullptr});
  shrink_inputs(small, always, ReduceOptions{3, nullptr});
  EXPECT_EQ(small.runs, 3);
  EXPECT_EQ(core::numel(small.reduced.graph.inputs[0].type.shape), 32);
}

}  // namespace
}  // namespace quorum::localize

namespace quorum::localize {
namespace {

TEST(InputSearch, TellsABugForEveryInputFromOneForTheRecordedInputs) {
  const Case c = relu_case({2, 3}, 0);
  const InputSearch every = search_inputs(c, [](const Case&) { return true; }, 4);
  EXPECT_EQ(every.tried, 4);
  EXPECT_EQ(every.verdict(), "every input");
  // A NaN trigger: fresh uniform inputs hold none.
  const InputSearch recorded = search_inputs(c, [](const Case& k) { return has_nan(k.inputs.at("x")); }, 4);
  EXPECT_EQ(recorded.shown, 0);
  EXPECT_EQ(recorded.verdict(), "the recorded inputs only");
  // Inputs above 0.5 somewhere: some draws, not all.
  const InputSearch some = search_inputs(c, [](const Case& k) {
    const auto& x = k.inputs.at("x");
    for (int64_t i = 0; i < x.numel(); ++i)
      if (x.get(i) > 0.9) return true;
    return false;
  }, 20);
  EXPECT_EQ(some.verdict(), "some inputs") << some.shown;
  EXPECT_EQ(search_inputs(c, [](const Case&) { return true; }, 0).verdict(), "");
}

}  // namespace
}  // namespace quorum::localize

namespace quorum::localize {
namespace {

TEST(Shrink, ZeroesEveryValueButTheTrigger) {
  // A 3x3 max pool stops the halving at 4x4; the values then go to 0 except the one above 10.
  Case c;
  c.graph.inputs = {{"x", {core::DType::F32, {1, 1, 8, 8}}}};
  ir::Node n{"p", "max_pool2d", {"x"}, {"p"}, {}};
  n.attrs = ops::canonical_attrs(ops::op("max_pool2d"), {{"kernel_shape", std::vector<int64_t>{3, 3}}});
  c.graph.nodes.push_back(n);
  c.graph.outputs = {"p"};
  ir::validate(c.graph, "test");
  std::vector<double> v(64, 1.0);
  v[63] = 50;
  c.inputs["x"] = core::Tensor::f64({1, 1, 8, 8}, v);
  const Predicate big = [](const Case& k) {
    const auto& x = k.inputs.at("x");
    for (int64_t i = 0; i < x.numel(); ++i)
      if (x.get(i) > 10) return true;
    return false;
  };
  Reduced r = reduce(c, "p", false, {}, {}, big, ReduceOptions{200, nullptr});
  shrink_inputs(r, big, ReduceOptions{200, nullptr});
  EXPECT_EQ(r.reduced.graph.inputs[0].type.shape, (core::Shape{1, 1, 4, 4}));
  EXPECT_EQ(r.nonzero, 1);
  EXPECT_EQ(r.reduced.inputs.at("x").get(15), 50);
}

}  // namespace
}  // namespace quorum::localize
