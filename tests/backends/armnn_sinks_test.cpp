// ArmNN's sink agreement: the backend (ArmnnSink, building a real INetwork) and the reproducer
// writer (TextSink, printing C++) are both driven by ArmNN's lowering; for every catalogue
// operator's sampled cases both must receive the same calls, in the same order, with the same
// descriptors, weights and shapes — or both refuse for the same reason.
#include <gtest/gtest.h>

#include <algorithm>

#include "backends/armnn/lower.h"
#include "ir/build.h"
#include "ops/registry.h"

namespace quorum::backends::armnn_lower {
namespace {

constexpr int kCases = 6;

TEST(Sinks, ReceiveTheSameCallsForEveryCatalogueOperator) {
  int ops_lowered = 0;
  size_t calls = 0;
  for (const ops::OpSpec* spec : ops::catalogue().all()) {
    bool lowered = false;
    for (int k = 0; k < kCases; ++k) {
      core::Rng rng(core::fnv1a(spec->name) + static_cast<uint64_t>(k));
      const ops::Case c = spec->sample(rng);
      const ir::Graph g = ir::single_node_graph(*spec, c, rng, core::DType::F32).graph;
      const std::vector<std::string> library = library_sink_calls(g);
      const std::vector<std::string> writer = writer_sink_calls(g);
      ASSERT_FALSE(library.empty()) << spec->name;
      EXPECT_EQ(library, writer) << spec->name << " case " << k << " " << core::to_string(g.nodes[0].attrs);
      if (library[0].rfind("refused: ", 0) == 0) continue;
      // Its inputs and outputs (an identity transpose adds no layer in between).
      EXPECT_GE(library.size(), g.inputs.size() + g.nodes[0].outputs.size()) << spec->name;
      lowered = true;
      calls += library.size();
    }
    ops_lowered += lowered;
  }
  // Most of the catalogue was compared (ArmNN 20.08 maps about 55 of its operators).
  EXPECT_GE(ops_lowered, 40);
  EXPECT_GE(calls, 500u);
}

// The quantized operators as the unit generator and the probe give them: each int8/uint8 operand made by a
// quantize_linear of a float input (ir::quantized_inputs_from_float), so the operator reads it through a view
// with its own scale and zero point. Both sinks get the same Quantize, Slice views, quantized weights and
// int32 biases — or both refuse (an output type other than the input's; FullyConnected's mixed weights;
// per-channel weights; per-axis quantize_linear / dequantize_linear).
TEST(Sinks, ReceiveTheSameCallsForTheQuantizedOperators) {
  int lowered = 0, refused = 0;
  for (const char* op : {"quantize_linear", "dequantize_linear", "qlinear_conv2d", "qlinear_matmul"}) {
    const ops::OpSpec& spec = ops::op(op);
    for (int k = 0; k < 3 * kCases; ++k) {
      core::Rng rng(core::fnv1a(spec.name) + 1000 + static_cast<uint64_t>(k));
      const ops::Case c = spec.sample(rng);
      ir::SingleNode sn = ir::single_node_graph(spec, c, rng, core::DType::F32);
      ir::quantized_inputs_from_float(sn);
      const std::vector<std::string> library = library_sink_calls(sn.graph);
      EXPECT_EQ(library, writer_sink_calls(sn.graph)) << op << " case " << k;
      ASSERT_FALSE(library.empty());
      if (library[0].rfind("refused: ", 0) == 0) {
        ++refused;
        const bool per_channel = library[0].find("per-channel") != std::string::npos ||
                                 library[0].find("per-axis") != std::string::npos;
        EXPECT_TRUE(per_channel || library[0].find("mismatched") != std::string::npos) << library[0];
        continue;
      }
      ++lowered;
      const bool quantized = std::any_of(library.begin(), library.end(), [](const std::string& call) {
        return call.find("QAsymm") != std::string::npos;
      });
      EXPECT_TRUE(quantized) << op << " case " << k;
    }
  }
  EXPECT_GE(lowered, 40);
  EXPECT_GE(refused, 1);
}

// The quantized twins (src/ops/qlinear.cpp), int8 and uint8 as sampled, their inputs made by quantize_linear:
// both sinks get the same views, layers and quantized TensorInfos, or both refuse (the float pooling's rule).
TEST(Sinks, ReceiveTheSameCallsForTheQuantizedTwins) {
  for (const char* op : {"qlinear_add", "qlinear_mul", "qlinear_avg_pool2d", "qlinear_global_avg_pool",
                         "qlinear_max_pool2d", "qlinear_concat", "qlinear_leaky_relu", "qlinear_sigmoid"}) {
    const ops::OpSpec& spec = ops::op(op);
    int lowered = 0;
    for (int k = 0; k < 3 * kCases; ++k) {
      core::Rng rng(core::fnv1a(spec.name) + 2000 + static_cast<uint64_t>(k));
      const ops::Case c = spec.sample(rng);
      ir::SingleNode sn = ir::single_node_graph(spec, c, rng, core::DType::F32);
      ir::quantized_inputs_from_float(sn);
      const std::vector<std::string> library = library_sink_calls(sn.graph);
      EXPECT_EQ(library, writer_sink_calls(sn.graph)) << op << " case " << k;
      ASSERT_FALSE(library.empty());
      if (library[0].rfind("refused: ", 0) == 0) continue;
      ++lowered;
      // The output's TensorInfo is quantized (the layer's, then any reshape's).
      const bool quantized = std::any_of(library.begin(), library.end(), [](const std::string& call) {
        return call.find("QAsymm") != std::string::npos && call.find("Quantize '") != 0;
      });
      EXPECT_TRUE(quantized) << op << " case " << k;
    }
    EXPECT_GE(lowered, 2 * kCases) << op;
  }
}

// A recording sink sees a changed descriptor: the comparison above can fail.
TEST(SinksRecord, ADifferentDescriptorIsADifferentCall) {
  EXPECT_NE(describe(ActivationLayer{Act::BoundedReLu, 6, 0}), describe(ActivationLayer{Act::BoundedReLu, 6, 1}));
  EXPECT_NE(describe(ConstantLayer{Weights{"w", {1.0f}, {1}, {}, {}}}),
            describe(ConstantLayer{Weights{"w", {1.5f}, {1}, {}, {}}}));
  const Quant u8{DataType::QAsymmU8, 0.5f, 3};
  EXPECT_NE(describe(ConstantLayer{Weights{"w", {}, {1}, u8, {7}}}),
            describe(ConstantLayer{Weights{"w", {}, {1}, u8, {8}}}));
  EXPECT_NE(describe(u8), describe(Quant{DataType::QAsymmU8, 0.5f, 4}));
  PoolLayer window{true, 1, 4, std::nullopt}, full = window;
  full.full = PoolLayer::Full{};
  EXPECT_NE(describe(window), describe(full));
}

}  // namespace
}  // namespace quorum::backends::armnn_lower
