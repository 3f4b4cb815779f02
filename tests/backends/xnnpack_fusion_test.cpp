// XNNPACK's optimized run (src/backends/xnnpack/lower_fusion.cpp): only the values the host needs leave
// their subgraph, so xnn_create_runtime_v2 fuses clamps into their producers through the internal ones, and
// the lowering names each fused pair on the nodes involved, by the definitions, never by node names.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "backends/xnnpack/lower.h"
#include "campaign/campaign.h"
#include "campaign/model_source.h"
#include "ir/json_io.h"
#include "worker/supervisor.h"

namespace quorum::backends::xnnpack {
namespace {

// x -> conv (1x1) -> relu -> clip -> max_pool -> sigmoid -> add(s, s) = a (an output) -> relu6 -> concat(q, a):
// conv, relu and clip fuse into the convolution through internal values; the add does not take the relu6,
// since the add's output is a graph output (an external value); the relu6 is read by concat on the host.
ir::Graph model() {
  return ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 2, 4, 4]}],
    "outputs": ["a", "cat"],
    "initializers": [{"name": "w", "dtype": "float32", "shape": [3, 2, 1, 1], "data": [1, -1, 0.5, 2, -0.25, 1]},
                     {"name": "b", "dtype": "float32", "shape": [3], "data": [0.1, -0.2, 0.3]}],
    "nodes": [{"name": "c", "op": "conv2d", "inputs": ["x", "w", "b"], "outputs": ["c"],
               "attrs": {"out_channels": 3, "kernel_shape": [1, 1]}},
              {"name": "r", "op": "relu", "inputs": ["c"], "outputs": ["r"]},
              {"name": "k", "op": "clip", "inputs": ["r"], "outputs": ["k"], "attrs": {"min": 0, "max": 2}},
              {"name": "p", "op": "max_pool2d", "inputs": ["k"], "outputs": ["p"], "attrs": {"strides": [2, 2]}},
              {"name": "s", "op": "sigmoid", "inputs": ["p"], "outputs": ["s"]},
              {"name": "a", "op": "add", "inputs": ["s", "s"], "outputs": ["a"]},
              {"name": "q", "op": "relu6", "inputs": ["a"], "outputs": ["q"]},
              {"name": "cat", "op": "concat", "inputs": ["q", "a"], "outputs": ["cat"]}]})",
                             "xnnpack fusion");
}

using Ops = std::map<std::string, std::vector<std::string>>;
const std::string kConvClamp = "fused xnn_define_convolution_2d+xnn_define_clamp";

TEST(XnnpackFusion, OnlyValuesTheHostReadsAreExposed) {
  const std::set<std::string> want = {"a", "cat", "q"};
  EXPECT_EQ(exposed_values(model()), want);
}

TEST(XnnpackFusion, ClampsFuseIntoTheConvolutionThroughInternalValues) {
  const ir::Graph g = model();
  const std::set<std::string> exposed = exposed_values(g);
  NullSink null;
  std::vector<std::string> lines;
  const std::unique_ptr<Sink> recorded = recording_sink(null, lines);
  LoweringLog log;
  const std::unique_ptr<Sink> fusion = fusion_sink(*recorded, log);
  ASSERT_TRUE(lower(g, *fusion, &exposed).ok);
  const auto outputs = std::count_if(lines.begin(), lines.end(),
                                     [](const std::string& l) { return l.rfind("external_output ", 0) == 0; });
  EXPECT_EQ(outputs, 2) << "'a' and 'q' leave the subgraph ('cat' is the host's)";
  const Ops want = {{"c", {kConvClamp}}, {"r", {kConvClamp}}, {"k", {kConvClamp}}};
  EXPECT_EQ(log.ops(), want);
}

TEST(XnnpackFusion, ThePinnedLoweringFusesNothing) {
  NullSink null;
  LoweringLog log;
  const std::unique_ptr<Sink> fusion = fusion_sink(null, log);
  ASSERT_TRUE(lower(model(), *fusion).ok);
  EXPECT_TRUE(log.ops().empty());
}

// The lines of `g`'s lowering (recording_sink) with every value definition cut to its id, so an optimized
// lowering that keeps a value internal reads like the pinned one; and the fusions it names.
std::vector<std::string> definitions(const ir::Graph& g, const std::set<std::string>* exposed, LoweringLog& log) {
  NullSink null;
  std::vector<std::string> lines;
  const std::unique_ptr<Sink> recorded = recording_sink(null, lines);
  const std::unique_ptr<Sink> fusion = fusion_sink(*recorded, log);
  if (!lower(g, *fusion, exposed).ok) return {};
  for (auto& l : lines) {
    for (const char* def : {"external_output ", "internal_value "}) {
      const size_t at = std::strlen(def);
      if (l.rfind(def, 0) == 0) l = "value " + l.substr(at, l.find(' ', at) - at);
    }
    // External ids count the externals defined so far, and the segment's outputs are what changes.
    if (l.rfind("external_input ", 0) == 0) l = l.substr(0, l.rfind(" external "));
    if (l.rfind("end_subgraph", 0) == 0) l = "end_subgraph";
  }
  return lines;
}

// Generated models: the optimized lowering defines the same subgraphs with the same definitions (only which
// values are external changes), and some of them fuse.
TEST(XnnpackFusion, GeneratedModelsKeepTheirSubgraphsAndSomeFuse) {
  std::map<std::string, int> fused;
  int lowered = 0;
  for (const char* generator : {"muffin", "ws", "rn", "zoo"}) {
    gen::GenOptions opt;
    opt.generator = generator;
    const campaign::ModelFactory factory = campaign::generator_factory(opt, "random");
    for (int64_t i = 0; i < 100; ++i) {
      const ir::Graph g = campaign::draw_case(factory, 91, i, "mse_loss").graph;
      LoweringLog pinned_log, optimized_log;
      const std::vector<std::string> pinned = definitions(g, nullptr, pinned_log);
      if (pinned.empty()) continue;
      ++lowered;
      const std::set<std::string> exposed = exposed_values(g);
      EXPECT_EQ(definitions(g, &exposed, optimized_log), pinned) << generator << " model " << i;
      EXPECT_TRUE(pinned_log.ops().empty()) << generator << " model " << i;
      for (const auto& [node, ops] : optimized_log.ops())
        for (const auto& op : ops) ++fused[op];
    }
  }
  EXPECT_GE(lowered, 20);
  EXPECT_FALSE(fused.empty()) << "no generated model fused";
  for (const auto& [op, nodes] : fused) std::printf("%4d nodes: %s\n", nodes, op.c_str());
}

// The library end to end: the optimized session returns the graph outputs the pinned one does and names the
// fusions; the pinned session names none.
TEST(XnnpackFusion, TheOptimizedSessionComputesThePinnedOutputs) {
  const auto& have = worker::available_backends();
  if (std::find(have.begin(), have.end(), "xnnpack") == have.end()) GTEST_SKIP() << "xnnpack backend not built";
  std::vector<double> x(32);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i % 7) * 0.5 - 1.25;
  const ValueMap in{{"x", core::Tensor::f64({1, 2, 4, 4}, x).to(core::DType::F32)}};
  worker::Worker w("xnnpack", {}, worker::Limits{});
  ASSERT_TRUE(w.compile(model(), CompileOptions{core::DType::F32, 1}).ok());
  ValueMap pinned;
  ASSERT_TRUE(w.forward(in, true, pinned).ok());
  Ops pinned_ops;
  ASSERT_TRUE(w.lowering(pinned_ops).ok());
  worker::OptimizedResult opt;
  ASSERT_TRUE(w.optimized(model(), CompileOptions{core::DType::F32, 1}, in, opt).ok());
  const ValueMap& optimized = opt.values;
  const Ops& optimized_ops = opt.lowering;
  for (const char* v : {"a", "cat"}) {
    ASSERT_TRUE(optimized.count(v)) << v;
    const core::Tensor &p = pinned.at(v), &o = optimized.at(v);
    ASSERT_EQ(p.numel(), o.numel());
    for (int64_t i = 0; i < p.numel(); ++i) EXPECT_EQ(p.f32()[i], o.f32()[i]) << v << "[" << i << "]";
  }
  EXPECT_FALSE(optimized.count("r")) << "an optimized session gives only the graph outputs";
  for (const char* n : {"c", "r", "k"}) {
    const auto& l = optimized_ops.at(n);
    EXPECT_NE(std::find(l.begin(), l.end(), kConvClamp), l.end()) << n;
  }
  for (const auto& [node, list] : pinned_ops)
    for (const auto& op : list) EXPECT_NE(op.rfind(kFusedPrefix, 0), 0u) << node << ": " << op;
}

}  // namespace
}  // namespace quorum::backends::xnnpack
