// ArmNN's sink agreement: the backend (ArmnnSink, building a real INetwork) and the reproducer
// writer (TextSink, printing C++) are both driven by ArmNN's lowering; for every catalogue
// operator's sampled cases both must receive the same calls, in the same order, with the same
// descriptors, weights and shapes — or both refuse for the same reason.
#include <gtest/gtest.h>

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

// A recording sink sees a changed descriptor: the comparison above can fail.
TEST(SinksRecord, ADifferentDescriptorIsADifferentCall) {
  EXPECT_NE(describe(ActivationLayer{Act::BoundedReLu, 6, 0}), describe(ActivationLayer{Act::BoundedReLu, 6, 1}));
  EXPECT_NE(describe(ConstantLayer{Weights{"w", {1.0f}, {1}}}), describe(ConstantLayer{Weights{"w", {1.5f}, {1}}}));
  PoolLayer window{true, 1, 4, std::nullopt}, full = window;
  full.full = PoolLayer::Full{};
  EXPECT_NE(describe(window), describe(full));
}

}  // namespace
}  // namespace quorum::backends::armnn_lower
