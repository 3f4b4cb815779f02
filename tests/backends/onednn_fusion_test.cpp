// oneDNN's optimized run (src/backends/onednn/lower_fusion.cpp, onednn_fusion.cpp): elementwise consumers
// of a convolution, inner product, matmul or pooling become post-ops of its primitive where only the graph
// outputs are asked for, and the session names each fusion on every node involved, by primitive and
// algorithms, never by node names.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backends/onednn/lower.h"
#include "campaign/campaign.h"
#include "campaign/model_source.h"
#include "ir/json_io.h"
#include "worker/supervisor.h"

namespace quorum::backends::onednn_lower {
namespace {

// conv c -> relu r -> add a (+ a per-channel constant) -> max_pool p -> sigmoid s (an output): c takes r and a
// (the pool is no post-op), p takes s. dense e -> gelu ge (an output) fuses; dense f feeds two nodes, so
// nothing fuses into it; sub(k, d) has the dense result second, which a post-op (dst - operand) cannot take;
// the matmul's result is a graph output.
ir::Graph model() {
  return ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 2, 4, 4]},
                                            {"name": "x2", "dtype": "float32", "shape": [2, 5]},
                                            {"name": "k", "dtype": "float32", "shape": [2, 3]}],
    "outputs": ["s", "ge", "fa", "m", "mm"],
    "initializers": [{"name": "w", "dtype": "float32", "shape": [3, 2, 1, 1], "data": [1, -1, 0.5, 2, -0.25, 1]},
                     {"name": "b", "dtype": "float32", "shape": [3], "data": [0.1, -0.2, 0.3]},
                     {"name": "cb", "dtype": "float32", "shape": [3, 1, 1], "data": [0.5, -1, 2]},
                     {"name": "wd", "dtype": "float32", "shape": [3, 5],
                      "data": [1, 0, -1, 0.5, 2, -0.5, 1, 0, 0.25, -1, 0, 0, 1, 1, -2]},
                     {"name": "wm", "dtype": "float32", "shape": [5, 3],
                      "data": [1, 0, -1, 0.5, 2, -0.5, 1, 0, 0.25, -1, 0, 0, 1, 1, -2]}],
    "nodes": [{"name": "c", "op": "conv2d", "inputs": ["x", "w", "b"], "outputs": ["c"],
               "attrs": {"out_channels": 3, "kernel_shape": [1, 1]}},
              {"name": "r", "op": "relu", "inputs": ["c"], "outputs": ["r"]},
              {"name": "a", "op": "add", "inputs": ["r", "cb"], "outputs": ["a"]},
              {"name": "p", "op": "max_pool2d", "inputs": ["a"], "outputs": ["p"],
               "attrs": {"kernel_shape": [2, 2], "strides": [2, 2]}},
              {"name": "s", "op": "sigmoid", "inputs": ["p"], "outputs": ["s"]},
              {"name": "e", "op": "dense", "inputs": ["x2", "wd"], "outputs": ["e"], "attrs": {"units": 3, "bias": 0}},
              {"name": "ge", "op": "gelu", "inputs": ["e"], "outputs": ["ge"]},
              {"name": "f", "op": "dense", "inputs": ["x2", "wd"], "outputs": ["f"], "attrs": {"units": 3, "bias": 0}},
              {"name": "fr", "op": "relu", "inputs": ["f"], "outputs": ["fr"]},
              {"name": "fa", "op": "add", "inputs": ["f", "fr"], "outputs": ["fa"]},
              {"name": "d", "op": "dense", "inputs": ["x2", "wd"], "outputs": ["d"], "attrs": {"units": 3, "bias": 0}},
              {"name": "m", "op": "sub", "inputs": ["k", "d"], "outputs": ["m"]},
              {"name": "mm", "op": "matmul", "inputs": ["x2", "wm"], "outputs": ["mm"]}]})",
                             "onednn fusion");
}

size_t index_of(const ir::Graph& g, const std::string& node) {
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].name == node) return i;
  return g.nodes.size();
}

TEST(OnednnFusion, PlansChainsThroughSingleConsumersOnly) {
  const ir::Graph g = model();
  const std::vector<Fusion> plan = plan_fusions(g);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].producer, index_of(g, "c"));
  EXPECT_EQ(plan[0].consumers, (std::vector<size_t>{index_of(g, "r"), index_of(g, "a")}));
  const std::vector<PostOp> ops = plan[0].post_ops(2);
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].alg, Alg::eltwise_relu);
  EXPECT_TRUE(ops[0].operand.empty());
  EXPECT_EQ(ops[1].alg, Alg::binary_add);
  EXPECT_EQ(ops[1].operand, "cb");
  EXPECT_EQ(ops[1].operand_dims, (Dims{1, 3, 1, 1}));
  EXPECT_EQ(plan[1].producer, index_of(g, "p"));
  EXPECT_EQ(plan[1].consumers, (std::vector<size_t>{index_of(g, "s")}));
  EXPECT_EQ(plan[2].producer, index_of(g, "e"));
  EXPECT_EQ(plan[2].post_ops(1).at(0).alg, Alg::eltwise_gelu_erf);
}

// An inner product computes [rows, units] of a result [..., units]: a per-unit operand is [1, units].
TEST(OnednnFusion, DenseOperandsAreSeenInTheInnerProductsDims) {
  const ir::Graph g = ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [2, 3, 4]}],
    "outputs": ["y"],
    "initializers": [{"name": "w", "dtype": "float32", "shape": [2, 4], "data": [1, 2, 3, 4, 5, 6, 7, 8]},
                     {"name": "u", "dtype": "float32", "shape": [2], "data": [1, -1]}],
    "nodes": [{"name": "d", "op": "dense", "inputs": ["x", "w"], "outputs": ["d"], "attrs": {"units": 2, "bias": 0}},
              {"name": "y", "op": "mul", "inputs": ["u", "d"], "outputs": ["y"]}]})",
                                          "dense operand");
  const std::vector<Fusion> plan = plan_fusions(g);
  ASSERT_EQ(plan.size(), 1u);
  const PostOp op = plan[0].post_ops(1).at(0);
  EXPECT_EQ(op.alg, Alg::binary_mul);
  EXPECT_EQ(op.operand_dims, (Dims{1, 2}));
}

// mul(d, m) reads two producers' results (campaign seed 31): the first producer takes the mul, the other's result
// is the post-op's operand (each claiming it crashed the optimized run: "no value 'm'").
TEST(OnednnFusion, ABinaryNodeJoinsOneFusion) {
  const ir::Graph g = ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [2, 3]}],
    "outputs": ["y"],
    "initializers": [{"name": "w", "dtype": "float32", "shape": [2, 3], "data": [1, 2, 3, 4, 5, 6]},
                     {"name": "v", "dtype": "float32", "shape": [3, 2], "data": [1, 2, 3, 4, 5, 6]}],
    "nodes": [{"name": "m", "op": "matmul", "inputs": ["x", "v"], "outputs": ["m"]},
              {"name": "d", "op": "dense", "inputs": ["x", "w"], "outputs": ["d"], "attrs": {"units": 2, "bias": 0}},
              {"name": "y", "op": "mul", "inputs": ["d", "m"], "outputs": ["y"]}]})",
                                          "two producers");
  const std::vector<Fusion> plan = plan_fusions(g);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].producer, index_of(g, "m"));
  EXPECT_EQ(plan[0].post_ops(1).at(0).operand, "d");
}

using Ops = std::map<std::string, std::vector<std::string>>;

bool has(const Ops& ops, const std::string& node, const std::string& entry) {
  const auto it = ops.find(node);
  return it != ops.end() && std::find(it->second.begin(), it->second.end(), entry) != it->second.end();
}

// The library end to end: the optimized session returns the pinned outputs (within float32 rounding: a
// post-op computes on the primitive's result in registers) and names the fusions; the pinned one, none.
TEST(OnednnFusion, TheOptimizedSessionComputesThePinnedOutputs) {
  const auto& have = worker::available_backends();
  if (std::find(have.begin(), have.end(), "onednn") == have.end()) GTEST_SKIP() << "onednn backend not built";
  std::vector<double> x(32), x2(10), k(6);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i % 7) * 0.5 - 1.25;
  for (size_t i = 0; i < x2.size(); ++i) x2[i] = static_cast<double>(i % 4) * 0.75 - 1.0;
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<double>(i) - 2.5;
  const ValueMap in{{"x", core::Tensor::f64({1, 2, 4, 4}, x).to(core::DType::F32)},
                    {"x2", core::Tensor::f64({2, 5}, x2).to(core::DType::F32)},
                    {"k", core::Tensor::f64({2, 3}, k).to(core::DType::F32)}};
  worker::Worker w("onednn", {}, worker::Limits{});
  ASSERT_TRUE(w.compile(model(), CompileOptions{core::DType::F32, 1}).ok());
  ValueMap pinned;
  ASSERT_TRUE(w.forward(in, true, pinned).ok());
  Ops pinned_ops;
  ASSERT_TRUE(w.lowering(pinned_ops).ok());
  worker::OptimizedResult opt;
  ASSERT_TRUE(w.optimized(model(), CompileOptions{core::DType::F32, 1}, in, opt).ok());
  for (const char* v : {"s", "ge", "fa", "m", "mm"}) {
    ASSERT_TRUE(opt.values.count(v)) << v;
    const core::Tensor &p = pinned.at(v), &o = opt.values.at(v);
    ASSERT_EQ(p.shape(), o.shape()) << v;
    for (int64_t i = 0; i < p.numel(); ++i) EXPECT_NEAR(p.get(i), o.get(i), 1e-6 * (1 + std::abs(p.get(i)))) << v;
  }
  EXPECT_FALSE(opt.values.count("r")) << "an optimized session gives only the graph outputs";
  const std::string conv = "fused convolution+eltwise_relu+binary_add";
  for (const char* n : {"c", "r", "a"}) EXPECT_TRUE(has(opt.lowering, n, conv)) << n;
  for (const char* n : {"p", "s"}) EXPECT_TRUE(has(opt.lowering, n, "fused pooling_max+eltwise_logistic")) << n;
  for (const char* n : {"e", "ge"}) EXPECT_TRUE(has(opt.lowering, n, "fused inner_product+eltwise_gelu_erf")) << n;
  EXPECT_TRUE(has(opt.lowering, "c", "convolution")) << "the producer's primitive is noted under its node";
  for (const char* n : {"f", "fr", "fa", "d", "m", "mm"}) {
    const auto it = opt.lowering.find(n);
    if (it == opt.lowering.end()) continue;
    for (const auto& e : it->second) EXPECT_NE(e.rfind(kFusedPrefix, 0), 0u) << n << ": " << e;
  }
  for (const auto& [node, list] : pinned_ops)
    for (const auto& op : list) EXPECT_NE(op.rfind(kFusedPrefix, 0), 0u) << node << ": " << op;
}

// Generated models: some fuse, and every fusion's chain starts at a producer the lowering names.
TEST(OnednnFusion, GeneratedModelsFuse) {
  std::map<std::string, int> producers;
  for (const char* generator : {"muffin", "ws", "rn", "zoo"}) {
    gen::GenOptions opt;
    opt.generator = generator;
    const campaign::ModelFactory factory = campaign::generator_factory(opt, "random");
    for (int64_t i = 0; i < 100; ++i) {
      const ir::Graph g = campaign::draw_case(factory, 91, i, "mse_loss").graph;
      for (const Fusion& f : plan_fusions(g)) {
        ++producers[g.nodes[f.producer].op];
        EXPECT_FALSE(f.consumers.empty());
        EXPECT_EQ(f.consumers.size(), f.steps.size());
      }
    }
  }
  EXPECT_FALSE(producers.empty()) << "no generated model fused";
  for (const auto& [op, n] : producers) std::printf("%4d fusions into %s\n", n, op.c_str());
}

}  // namespace
}  // namespace quorum::backends::onednn_lower
