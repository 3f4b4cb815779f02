// Sink agreement for libtorch: the backend (running ATen) and the reproducer writer (printing
// PyTorch Python) drive one lowering (src/backends/torch/lower.h). For sampled cases of every
// catalogue operator, the calls each sink receives — logged by the lowering's RecordingSink — must
// be the same lines, or both must refuse the node with the same reason. The backend's log comes
// from a real forward pass through its session, so a backend that lowered differently from the
// writer (other attributes, other shapes, a skipped node) shows here.
#include <gtest/gtest.h>

#include <map>

#include "backends/torch/lower.h"
#include "ir/build.h"
#include "ops/quant_util.h"
#include "ops/registry.h"

namespace quorum::backends::torch {
namespace {

constexpr int kCases = 4;

TEST(TorchSinks, BackendAndWriterReceiveTheSameCalls) {
  int ops_compared = 0, calls = 0, refusals = 0;
  for (const ops::OpSpec* spec : ops::catalogue().all()) {
    bool compared = false;
    for (int k = 0; k < kCases; ++k) {
      core::Rng rng(core::fnv1a(spec->name) + static_cast<uint64_t>(k));
      ir::SingleNode sn;
      try {
        sn = ir::single_node_graph(*spec, spec->sample(rng), rng, core::DType::F32);
      } catch (const core::OpError&) {
        continue;  // an invalid draw: nothing to lower
      }
      ValueMap inputs;
      for (const auto& [name, t] : sn.inputs)  // a quantized operator's integer inputs keep their type
        inputs.emplace(name, core::is_float(t.dtype()) ? t.to(core::DType::F32) : t);
      const std::string where =
          spec->name + " case " + std::to_string(k) + " " + core::to_string(sn.graph.nodes[0].attrs);
      const std::vector<std::string> library = library_sink_calls(sn.graph, inputs);
      const std::vector<std::string> writer = writer_sink_calls(sn.graph);
      EXPECT_EQ(library, writer) << where;
      ASSERT_FALSE(library.empty()) << where << ": the lowering emitted nothing";
      if (library[0].rfind("refused: ", 0) == 0) {
        ++refusals;
        continue;
      }
      compared = true;
      calls += static_cast<int>(library.size());
    }
    ops_compared += compared;
  }
  // The comparison must have seen real work: most of the catalogue, several calls per case.
  EXPECT_GE(ops_compared, 12);
  EXPECT_GE(calls, 100);
  std::printf("compared %d operators, %d sink calls, %d refusals\n", ops_compared, calls, refusals);
}

// Per-channel weights (w_scales): both sinks receive the same per-channel quantized weight (float64 scales, int64
// zero points, axis 0) for sampled qlinear_conv2d and qlinear_matmul cases, and the backend runs them on its default
// engine (onednn: symmetric weights; the others are refused with the measured reason, the same in both sinks).
TEST(TorchSinks, PerChannelWeightsReachBothSinksAlike) {
  for (const char* name : {"qlinear_conv2d", "qlinear_matmul"}) {
    const ops::OpSpec& spec = ops::op(name);
    int ran = 0, per_channel = 0;
    for (uint64_t k = 0; k < 200 && ran < 3; ++k) {
      core::Rng rng(core::fnv1a(spec.name) + 1000 + k);
      ir::SingleNode sn;
      try {
        sn = ir::single_node_graph(spec, spec.sample(rng), rng, core::DType::F32);
      } catch (const core::OpError&) {
        continue;
      }
      if (!ops::per_channel_weight(sn.graph.nodes[0].attrs)) continue;
      ++per_channel;
      const std::string where = std::string(name) + " " + core::to_string(sn.graph.nodes[0].attrs);
      const std::vector<std::string> library = library_sink_calls(sn.graph, sn.inputs);
      EXPECT_EQ(library, writer_sink_calls(sn.graph)) << where;
      ASSERT_FALSE(library.empty()) << where;
      if (library[0].rfind("refused: ", 0) == 0) continue;
      ++ran;
      std::string all;
      for (const std::string& line : library) all += line + "\n";
      EXPECT_NE(all.find("torch._make_per_channel_quantized_tensor("), std::string::npos) << all;
      EXPECT_EQ(all.find("error: "), std::string::npos) << where << "\n" << all;
    }
    EXPECT_GE(ran, 3) << name << ": " << per_channel << " per-channel cases drawn";
  }
}

// Per-axis quantize_linear / dequantize_linear (scales along axis): both sinks receive the same per-channel
// quantizer (float64 scales, int64 zero points, the axis made non-negative), torch.quantize_per_channel or a
// per-channel quantized tensor's dequantize, and the backend runs them.
TEST(TorchSinks, PerAxisQuantizationReachesBothSinksAlike) {
  for (const char* name : {"quantize_linear", "dequantize_linear"}) {
    const ops::OpSpec& spec = ops::op(name);
    int ran = 0;
    for (uint64_t k = 0; k < 400 && ran < 4; ++k) {
      core::Rng rng(core::fnv1a(spec.name) + 7000 + k);
      ir::SingleNode sn = ir::single_node_graph(spec, spec.sample(rng), rng, core::DType::F32);
      if (!ops::per_channel_weight(sn.graph.nodes[0].attrs, "")) continue;
      ir::quantized_inputs_from_float(sn);
      const std::string where = std::string(name) + " " + core::to_string(sn.graph.nodes.back().attrs);
      const std::vector<std::string> library = library_sink_calls(sn.graph, sn.inputs);
      EXPECT_EQ(library, writer_sink_calls(sn.graph)) << where;
      ASSERT_FALSE(library.empty()) << where;
      std::string all;
      for (const std::string& line : library) all += line + "\n";
      EXPECT_EQ(library[0].rfind("refused: ", 0), std::string::npos) << where << "\n" << all;
      ++ran;
      EXPECT_NE(all.find(std::string(name) == "quantize_linear" ? "torch.quantize_per_channel("
                                                                 : "torch._make_per_channel_quantized_tensor("),
                std::string::npos)
          << all;
      EXPECT_EQ(all.find("error: "), std::string::npos) << where << "\n" << all;
    }
    EXPECT_GE(ran, 4) << name;
  }
}

// The quantized twins (ops/qlinear.cpp): both sinks receive the same quantized tensors and libtorch operators for
// sampled cases of each twin, and the backend runs them on its default engine. The pools' output scale and zero
// point are set to the input's (libtorch's quantized pools keep them; others are refused alike in both sinks).
TEST(TorchSinks, QuantizedTwinsReachBothSinksAlike) {
  const std::map<std::string, std::string> calls = {
      {"qlinear_add", "torch.ops.quantized.add("},        {"qlinear_mul", "torch.ops.quantized.mul("},
      {"qlinear_avg_pool2d", "F.avg_pool2d("},            {"qlinear_global_avg_pool", "F.adaptive_avg_pool"},
      {"qlinear_concat", "torch.ops.quantized.cat("},     {"qlinear_leaky_relu", "torch.ops.quantized.leaky_relu("},
      {"qlinear_sigmoid", "torch.ops.quantized.sigmoid("},     {"qlinear_max_pool2d", "F.max_pool2d("}};
  for (const auto& [name, fn] : calls) {
    const ops::OpSpec& spec = ops::op(name);
    int ran = 0;
    for (uint64_t k = 0; k < 100 && ran < 4; ++k) {
      core::Rng rng(core::fnv1a(spec.name) + 2000 + k);
      ops::Case c = spec.sample(rng);
      if (name == "qlinear_avg_pool2d" || name == "qlinear_global_avg_pool" || name == "qlinear_max_pool2d") {
        c.attrs["y_scale"] = core::attr_floats(c.attrs, "x_scales").at(0);
        c.attrs["y_zero_point"] = core::attr_ints(c.attrs, "x_zero_points").at(0);
      }
      ir::SingleNode sn;
      try {
        sn = ir::single_node_graph(spec, c, rng, core::DType::F32);
      } catch (const core::OpError&) {
        continue;
      }
      const std::string where = name + " " + core::to_string(sn.graph.nodes[0].attrs);
      const std::vector<std::string> library = library_sink_calls(sn.graph, sn.inputs);
      EXPECT_EQ(library, writer_sink_calls(sn.graph)) << where;
      ASSERT_FALSE(library.empty()) << where;
      if (library[0].rfind("refused: ", 0) == 0) continue;
      ++ran;
      std::string all;
      for (const std::string& line : library) all += line + "\n";
      EXPECT_NE(all.find("torch._make_per_tensor_quantized_tensor(x0"), std::string::npos) << all;
      EXPECT_NE(all.find(fn), std::string::npos) << all;
      EXPECT_NE(all.find(".int_repr("), std::string::npos) << all;
      EXPECT_EQ(all.find("error: "), std::string::npos) << where << "\n" << all;
    }
    EXPECT_GE(ran, 4) << name;
  }
}

// The recording decorator's lines name the call, its arguments (keywords, kinds) and the note, so
// two sinks that received different arguments cannot log the same line.
TEST(TorchSinks, RecordingSinkLogsCallsWithTheirArguments) {
  class Null : public Sink {
   public:
    void assign(const std::vector<std::string>&, const CallPtr&, const std::string&) override {}
    void begin_if_requires_grad(const std::vector<std::string>&) override {}
    void end_if() override {}
    void comment(const std::string&) override {}
  } null;
  core::Rng rng(1);
  const ops::OpSpec& spec = ops::op("conv2d");
  const ir::SingleNode sn = ir::single_node_graph(spec, spec.sample(rng), rng, core::DType::F32);
  std::vector<std::string> log;
  RecordingSink rec(null, log);
  lower_node(sn.graph, sn.graph.nodes[0], rec);
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log.back().find("y = F.conv2d(x"), std::string::npos) << log.back();
  EXPECT_NE(log.back().find("stride=["), std::string::npos) << log.back();
  EXPECT_NE(log.back().find("groups="), std::string::npos) << log.back();
}

}  // namespace
}  // namespace quorum::backends::torch
