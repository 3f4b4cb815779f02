// The reducer's node removal by delta debugging, a backward case's shapes halved with its incoming
// gradient kept, and the culprit of a failure that names no node.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "ir/edit.h"
#include "ir/graph.h"
#include "localize/reduce.h"
#include "ops/registry.h"
#include "ref/interpreter.h"

namespace quorum::localize {
namespace {

bool has(const Case& c, const std::string& node) { return c.graph.find_node(node) != nullptr; }

// x -> p -> {a, b}; the blamed concat takes a, b and p.
Case branches() {
  Case c;
  c.graph.inputs = {{"x", {core::DType::F32, {2, 3}}}};
  c.graph.nodes.push_back({"p", "neg", {"x"}, {"p"}, {}});
  c.graph.nodes.push_back({"a", "relu", {"p"}, {"a"}, {}});
  c.graph.nodes.push_back({"b", "tanh", {"p"}, {"b"}, {}});
  c.graph.nodes.push_back({"cat", "concat", {"a", "b", "p"}, {"cat"}, {{"axis", int64_t{0}}}});
  c.graph.outputs = {"cat"};
  ir::validate(c.graph, "test");
  c.inputs["x"] = core::Tensor::f64({2, 3}, {1, -2, 3, -4, 5, -6});
  return c;
}

TEST(Ddmin, RemovesASetThatNoSingleRemovalCan) {
  // The finding needs p, and both branches or neither: removing a or b alone loses it, removing
  // p loses it; only the pair {a, b} can go.
  const Case c = branches();
  const Predicate holds = [](const Case& k) {
    return has(k, "p") && has(k, "a") == has(k, "b") && has(k, "cat");
  };
  const backends::ValueMap recorded = ref::forward(c.graph, c.inputs);
  const Reduced r = reduce(c, "cat", false, recorded, {}, holds, ReduceOptions{100, nullptr});
  ASSERT_TRUE(r.reproduced);
  EXPECT_EQ(r.reduced.graph.nodes.size(), 2u);
  EXPECT_TRUE(has(r.reduced, "p"));
  EXPECT_TRUE(has(r.reduced, "cat"));
  // The removed branches' outputs are graph inputs fed what they computed.
  ASSERT_TRUE(r.reduced.inputs.count("a"));
  EXPECT_EQ(r.reduced.inputs.at("a").get(1), recorded.at("a").get(1));
  EXPECT_LE(r.runs, 100);

  // Single removals alone (ddmin over one-node sets only: the budget stops it before the pairs)
  // cannot: each of p, a, b tried alone loses the finding.
  Reduced singles;
  singles.reduced = c;
  const RemoveFn never_pairs = [&](const Case& from, const std::vector<std::string>& drop, Case& out) {
    if (drop.size() != 1) return false;
    Case k = from;
    k.graph = ir::cut_at(from.graph, drop[0]);
    k.inputs["x"] = c.inputs.at("x");
    k.inputs[drop[0]] = recorded.at(drop[0]);
    out = k;
    return true;
  };
  const Case left = ddmin_nodes(c, {"p", "a", "b"}, never_pairs, holds, ReduceOptions{100, nullptr}, singles);
  EXPECT_EQ(left.graph.nodes.size(), 4u);
}

TEST(Ddmin, RemovesALongChainInFewerRunsThanOneByOne) {
  // x -> n0 -> ... -> n15 -> blamed; the finding needs only the blamed node's producer n15.
  Case c;
  c.graph.inputs = {{"x", {core::DType::F32, {1, 4}}}};
  std::string prev = "x";
  for (int i = 0; i < 16; ++i) {
    const std::string n = "n" + std::to_string(i);
    c.graph.nodes.push_back({n, i % 2 ? "tanh" : "neg", {prev}, {n}, {}});
    prev = n;
  }
  c.graph.nodes.push_back({"blamed", "relu", {prev}, {"blamed"}, {}});
  c.graph.outputs = {"blamed"};
  ir::validate(c.graph, "test");
  c.inputs["x"] = core::Tensor::f64({1, 4}, {0.1, 0.2, 0.3, 0.4});
  const backends::ValueMap recorded = ref::forward(c.graph, c.inputs);
  const Predicate holds = [](const Case& k) { return has(k, "n15"); };
  const Reduced r = reduce(c, "blamed", false, recorded, {}, holds, ReduceOptions{100, nullptr});
  EXPECT_EQ(r.reduced.graph.nodes.size(), 2u);
  EXPECT_LT(r.runs, 16);  // one at a time: 16 removals, plus the original and the node alone
}

TEST(BackwardShrink, HalvesShapesAndKeepsTheIncomingGradient) {
  // A one-node backward case: the incoming gradient g at the relu's output, given by an mse_loss
  // target. Each element of x is positive and codes its position, so the predicate can check that
  // every element of the halved case still receives the gradient it had at that position.
  Case c;
  c.graph.inputs = {{"x", {core::DType::F32, {4, 6}}}};
  c.graph.nodes.push_back({"r", "relu", {"x"}, {"r"}, {}});
  c.graph.outputs = {"r"};
  ir::validate(c.graph, "test");
  std::vector<double> x(24), g(24);
  for (int i = 0; i < 24; ++i) {
    x[static_cast<size_t>(i)] = 1 + i;
    g[static_cast<size_t>(i)] = 0.5 * (i % 7) - 1;
  }
  c.inputs["x"] = core::Tensor::f64({4, 6}, x);
  c.grad = core::Tensor::f64({4, 6}, g);
  ASSERT_TRUE(retarget(c));
  EXPECT_EQ(c.loss, "mse_loss");
  auto gradient_kept = [&](const Case& k) {
    if (!k.target.defined() || k.loss != "mse_loss") return false;
    const core::Tensor y = ref::forward(k.graph, k.inputs).at("r");
    const double n = static_cast<double>(y.numel());
    for (int64_t i = 0; i < y.numel(); ++i) {
      const double got = 2 * (y.get(i) - k.target.get(i)) / n;  // mse_loss's gradient
      const double want = g[static_cast<size_t>(k.inputs.at("x").get(i)) - 1];
      if (std::abs(got - want) > 1e-9) return false;
    }
    return true;
  };
  ASSERT_TRUE(gradient_kept(c));
  // The finding: an incoming gradient of 2 (g at position 20) reaches x = 21 (row 3, column 2).
  const Predicate holds = [&](const Case& k) {
    if (!gradient_kept(k)) return false;
    const auto& xs = k.inputs.at("x");
    for (int64_t i = 0; i < xs.numel(); ++i)
      if (xs.get(i) == 21) return true;
    return false;
  };
  // The recorded value and incoming gradient of the output: the node alone keeps them.
  const backends::ValueMap recorded = ref::forward(c.graph, c.inputs), grads{{"r", c.grad}};
  Reduced r = reduce(c, "r", true, recorded, grads, holds, ReduceOptions{100, nullptr});
  ASSERT_TRUE(r.reproduced);
  shrink_inputs(r, holds, ReduceOptions{100, nullptr});
  EXPECT_EQ(r.reduced.graph.inputs[0].type.shape, (core::Shape{1, 1}));
  EXPECT_EQ(r.reduced.inputs.at("x").get(0), 21);
  EXPECT_EQ(r.reduced.grad.shape(), (core::Shape{1, 1}));
  EXPECT_EQ(r.reduced.grad.get(0), g[20]);
}

TEST(Culprit, TheFirstNodeWrongAloneInOrder) {
  // x -> t (transpose) -> m (matmul with w) -> r; the engine's transpose is wrong, and the
  // failure showed later. Each node alone is fed the reference's values of its inputs.
  Case c;
  c.graph.inputs = {{"x", {core::DType::F32, {2, 3}}}};
  c.graph.initializers["w"] = core::Tensor::f64({2, 4}, std::vector<double>(8, 0.5)).to(core::DType::F32);
  c.graph.nodes.push_back({"t", "transpose", {"x"}, {"t"}, {{"perm", std::vector<int64_t>{1, 0}}}});
  c.graph.nodes.push_back({"m", "matmul", {"t", "w"}, {"m"}, {}});
  c.graph.nodes.push_back({"r", "relu", {"m"}, {"r"}, {}});
  c.graph.outputs = {"r"};
  ir::validate(c.graph, "test");
  c.inputs["x"] = core::Tensor::f64({2, 3}, {1, 2, 3, 4, 5, 6});
  const backends::ValueMap reference = ref::forward(c.graph, c.inputs);
  std::vector<std::string> seen;
  const NodeVerdict wrong = [&](const Case& k) -> std::string {
    seen.push_back(k.graph.nodes[0].name);
    // Every input of a node alone is the reference's value.
    for (const auto& [name, t] : k.inputs)
      if (name != "x" && t.get(0) != reference.at(name).get(0)) return "fed a wrong value";
    return k.graph.nodes[0].op == "matmul" ? "library error: shapes not aligned" : "";
  };
  const Culprit found = find_culprit(c, reference, wrong, 10);
  EXPECT_EQ(found.node, "m");
  EXPECT_EQ(found.op, "matmul");
  EXPECT_EQ(found.evidence, "library error: shapes not aligned");
  EXPECT_EQ(seen, (std::vector<std::string>{"t", "m"}));  // in order, stopping at the first
  EXPECT_EQ(found.runs, 2);
  EXPECT_EQ(find_culprit(c, reference, [](const Case&) { return std::string(); }, 10).node, "");
  EXPECT_EQ(find_culprit(c, reference, wrong, 1).node, "");  // the budget
}

// x -> p (neg) -> b (transpose, blamed) -> q (relu) -> w (tanh); x holds a NaN, so b's output does.
Case nan_chain() {
  Case c;
  c.graph.inputs = {{"x", {core::DType::F32, {2, 3}}}};
  c.graph.nodes.push_back({"p", "neg", {"x"}, {"p"}, {}});
  c.graph.nodes.push_back({"b", "transpose", {"p"}, {"b"}, {{"perm", std::vector<int64_t>{1, 0}}}});
  c.graph.nodes.push_back({"q", "relu", {"b"}, {"q"}, {}});
  c.graph.nodes.push_back({"w", "tanh", {"q"}, {"w"}, {}});
  c.graph.outputs = {"w"};
  ir::validate(c.graph, "test");
  c.inputs["x"] = core::Tensor::f64({2, 3}, {1, std::nan(""), 3, -4, 5, -6});
  return c;
}

// Whether a case cut below its loss gets a number as every element's incoming gradient on the library:
// mse_loss's 2 (y - t) / N, with the target t made from the library's recorded y and incoming gradient,
// is NaN where that y is (whatever t); the campaign's own loss (no Case::loss) may send back a number.
bool incoming_finite(const Case& k) {
  if (k.loss.empty()) return true;
  for (int64_t i = 0; i < k.target.numel(); ++i)
    if (!std::isfinite(k.target.get(i))) return false;
  return true;
}

TEST(Reduce, AFindingThatShowsOnALaterRunOfTheOriginalIsReducedAndMarkedIntermittent) {
  // A library reading memory it should not (seed 14301: XNNPACK's dilated max pooling with padding, in
  // its optimized run) shows the finding on some runs only; the first run of the original missing it
  // left the finding unreduced and unlabelled.
  const Case c = branches();
  const backends::ValueMap recorded = ref::forward(c.graph, c.inputs);
  int calls = 0;
  const Predicate holds = [&](const Case& k) { return ++calls > 1 && has(k, "cat"); };
  std::ostringstream log;
  const Reduced r = reduce(c, "cat", false, recorded, {}, holds, ReduceOptions{100, &log});
  ASSERT_TRUE(r.reproduced) << log.str();
  EXPECT_TRUE(r.intermittent);
  EXPECT_TRUE(r.one_node) << log.str();
  EXPECT_NE(log.str().find("original model, again: reproduces"), std::string::npos) << log.str();
  // One that never shows is gone after kOriginalTries runs, and a steady one is not intermittent.
  int never = 0;
  const Reduced gone = reduce(c, "cat", false, recorded, {}, [&](const Case&) { return ++never < 0; }, {});
  EXPECT_FALSE(gone.reproduced);
  EXPECT_EQ(never, kOriginalTries);
  const Reduced steady = reduce(c, "cat", false, recorded, {}, [&](const Case& k) { return has(k, "cat"); }, {});
  EXPECT_TRUE(steady.reproduced);
  EXPECT_FALSE(steady.intermittent);
}

TEST(BackwardReduce, ANodeWhoseOutputIsNaNTrainsAloneWithTheCampaignsLoss) {
  // The library sent a number back to b's NaN output elements; the fault shows on b's own operands
  // whenever the gradient reaching b is a number, which mse_loss cannot give at a NaN output.
  const Case c = nan_chain();
  const backends::ValueMap recorded = ref::forward(c.graph, c.inputs);
  const backends::ValueMap grads{{"b", core::Tensor::f64({3, 2}, {0.1, -0.2, 0.3, -0.4, 0.5, -0.6})}};
  const Predicate holds = [](const Case& k) { return has(k, "b") && incoming_finite(k); };
  std::ostringstream log;
  const Reduced r = reduce(c, "b", true, recorded, grads, holds, ReduceOptions{100, &log});
  ASSERT_TRUE(r.reproduced);
  EXPECT_TRUE(r.one_node) << log.str();
  EXPECT_EQ(r.reduced.graph.nodes.size(), 1u);
  EXPECT_TRUE(r.reduced.loss.empty());
  EXPECT_FALSE(r.reduced.grad.defined());
  EXPECT_NE(log.str().find("alone, with the campaign's loss: reproduces"), std::string::npos) << log.str();
}

TEST(BackwardReduce, AFindingThatNeedsTheNextNodeIsCutThere) {
  // The gradient shows the fault only where b's consumer q turned its NaN into numbers (the library's
  // q swallows NaN: its recorded value is finite), so the case keeps q and is cut at q's output, not at
  // the model's: b and q, fed the recorded value of p.
  const Case c = nan_chain();
  backends::ValueMap recorded = ref::forward(c.graph, c.inputs);
  core::Tensor q = recorded.at("q");
  for (int64_t i = 0; i < q.numel(); ++i)
    if (std::isnan(q.get(i))) q.f64()[i] = 0;
  recorded.at("q") = q;
  const core::Tensor g = core::Tensor::f64({3, 2}, {0.1, -0.2, 0.3, -0.4, 0.5, -0.6});
  const backends::ValueMap grads{{"b", g}, {"q", g}, {"w", g}};
  const Predicate holds = [](const Case& k) { return has(k, "b") && has(k, "q") && incoming_finite(k); };
  std::ostringstream log;
  const Reduced r = reduce(c, "b", true, recorded, grads, holds, ReduceOptions{100, &log});
  ASSERT_TRUE(r.reproduced);
  EXPECT_EQ(r.reduced.graph.nodes.size(), 2u) << log.str();
  EXPECT_TRUE(has(r.reduced, "b") && has(r.reduced, "q"));
  EXPECT_EQ(r.reduced.graph.outputs, (std::vector<std::string>{"q"}));
  EXPECT_EQ(r.reduced.loss, "mse_loss");  // the recorded incoming gradient at q's output
  EXPECT_NE(log.str().find("cut at 'q' after 'b': reproduces"), std::string::npos) << log.str();
}

}  // namespace
}  // namespace quorum::localize
