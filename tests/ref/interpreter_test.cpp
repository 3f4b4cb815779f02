// The reference interpreter: forward values by hand on a tiny graph; whole-graph backward against
// central finite differences on the example models (weights, inputs and intermediate outputs).
#include "ref/interpreter.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "data/values.h"
#include "ir/json_io.h"

namespace quorum::ref {
namespace {

TEST(Interpreter, ForwardByHand) {
  const ir::Graph g = ir::graph_from_json(R"({
    "inputs": [{"name": "x", "dtype": "float32", "shape": [4]}], "outputs": ["y"],
    "nodes": [{"name": "r", "op": "relu", "inputs": ["x"], "outputs": ["r"]},
              {"name": "y", "op": "square", "inputs": ["r"], "outputs": ["y"]}]})",
                                          "tiny");
  const ValueMap v = forward(g, {{"x", Tensor::f64({4}, {-1, 0.5, 2, -3})}});
  EXPECT_EQ(v.at("y").values(), (std::vector<double>{0, 0.25, 4, 0}));
  EXPECT_THROW(forward(g, {}), core::UserError);
  EXPECT_THROW(forward(g, {{"x", Tensor::f64({3}, {1, 2, 3})}}), core::UserError);
}

TEST(Interpreter, BackwardFromAnIntermediateValueByHand) {
  // y = square(exp(x)): seeded at e = exp(x) with s, d/dx = s * exp(x); square's node is not on the way.
  const ir::Graph g = ir::graph_from_json(R"({
    "inputs": [{"name": "x", "dtype": "float64", "shape": [2]}], "outputs": ["y"],
    "nodes": [{"name": "e", "op": "exp", "inputs": ["x"], "outputs": ["e"]},
              {"name": "y", "op": "square", "inputs": ["e"], "outputs": ["y"]}]})",
                                          "tiny");
  const ValueMap v = forward(g, {{"x", Tensor::f64({2}, {0.5, -1})}});
  const ValueMap gr = backward(g, v, {{"e", Tensor::f64({2}, {0, -1})}});
  EXPECT_DOUBLE_EQ(gr.at("x").f64()[0], 0.0);
  EXPECT_DOUBLE_EQ(gr.at("x").f64()[1], -std::exp(-1.0));
  EXPECT_EQ(gr.count("y"), 0u);
  // From the graph output with the loss gradient, it is train's backward.
  const TrainResult r =
      train(g, {{"x", Tensor::f64({2}, {0.5, -1})}}, Tensor::f64({2}, {0, 5}), LossSpec{"mse_loss", {}});
  const ValueMap again = backward(g, r.values, {{"y", r.loss_grad}});
  EXPECT_EQ(again.at("x").values(), r.grads.at("x").values());
}

TEST(Interpreter, MseLossAndGradientByHand) {
  const ir::Graph g = ir::graph_from_json(R"({
    "inputs": [{"name": "x", "dtype": "float64", "shape": [2]}], "outputs": ["y"],
    "nodes": [{"name": "y", "op": "square", "inputs": ["x"], "outputs": ["y"]}]})",
                                          "tiny");
  // loss = mean((x^2 - t)^2); d/dx = 2*(x^2 - t)*2x / 2
  const TrainResult r = train(g, {{"x", Tensor::f64({2}, {1, 3})}}, Tensor::f64({2}, {0, 5}), LossSpec{"mse_loss", {}});
  EXPECT_DOUBLE_EQ(r.loss, (1.0 + 16.0) / 2);
  EXPECT_DOUBLE_EQ(r.grads.at("x").f64()[0], 2.0 * 1 * 2 * 1 / 2);
  EXPECT_DOUBLE_EQ(r.grads.at("x").f64()[1], 2.0 * 4 * 2 * 3 / 2);
  EXPECT_EQ(r.loss_grad.values(), (std::vector<double>{1, 4}));
}

double loss_of(const ir::Graph& g, const ValueMap& inputs, const Tensor& target, const LossSpec& l) {
  return train(g, inputs, target, l).loss;
}

void check_whole_graph(const std::string& file, const LossSpec& loss) {
  ir::Graph g = ir::load_graph(std::string(QUORUM_SOURCE_DIR) + "/docs/examples/" + file);
  for (auto& [name, t] : g.initializers) t = t.to(core::DType::F64);
  core::Rng rng(3);
  ValueMap inputs;
  data::complete_inputs(g, inputs, rng, 0.0);  // smooth values: finite differences stay meaningful
  const auto out_shape = g.types.at(g.outputs[0]).shape;
  Tensor target(core::DType::F64, out_shape);
  for (int64_t i = 0; i < target.numel(); ++i) target.f64()[i] = rng.uniform(0, 1);
  const TrainResult r = train(g, inputs, target, loss);
  ASSERT_TRUE(std::isfinite(r.loss));
  // Every weight and the input receive a gradient of the right shape.
  for (const auto& [name, t] : g.initializers) {
    ASSERT_TRUE(r.grads.count(name)) << name;
    EXPECT_EQ(r.grads.at(name).shape(), t.shape()) << name;
  }
  for (const auto& n : g.nodes) EXPECT_TRUE(r.grads.count(n.outputs[0])) << n.name;
  // Probe a few elements of every weight and of the input with central differences.
  for (const auto& [name, w] : g.initializers) {
    for (int p = 0; p < 3; ++p) {
      const int64_t i = rng.randint(0, w.numel() - 1);
      ir::Graph gp = g, gm = g;
      const double h = 1e-6;
      gp.initializers.at(name).f64()[i] += h;
      gm.initializers.at(name).f64()[i] -= h;
      const double numeric = (loss_of(gp, inputs, target, loss) - loss_of(gm, inputs, target, loss)) / (2 * h);
      EXPECT_NEAR(r.grads.at(name).f64()[i], numeric, 1e-6 + 1e-4 * std::abs(numeric))
          << file << " " << name << "[" << i << "]";
    }
  }
  const std::string in = g.inputs[0].name;
  for (int p = 0; p < 5; ++p) {
    const int64_t i = rng.randint(0, inputs.at(in).numel() - 1);
    ValueMap ip = inputs, im = inputs;
    ip.at(in).f64()[i] += 1e-6;
    im.at(in).f64()[i] -= 1e-6;
    const double numeric = (loss_of(g, ip, target, loss) - loss_of(g, im, target, loss)) / 2e-6;
    EXPECT_NEAR(r.grads.at(in).f64()[i], numeric, 1e-6 + 1e-4 * std::abs(numeric)) << file << " input[" << i << "]";
  }
}

TEST(Interpreter, WholeGraphBackwardMatchesFiniteDifferencesLeNet) {
  check_whole_graph("lenet5.json", LossSpec{"mse_loss", {}});
}

TEST(Interpreter, WholeGraphBackwardMatchesFiniteDifferencesResidual) {
  check_whole_graph("residual_small.json", LossSpec{"mse_loss", {}});
}

}  // namespace
}  // namespace quorum::ref
