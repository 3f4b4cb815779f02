// oneDNN's sink agreement: the backend (ExecSink, running real primitives) and the reproducer
// writer (Gen, printing the helper-block calls) are both driven by oneDNN's lowering; for every
// catalogue operator's sampled cases both must receive the same forward steps (with prop_kind
// training and inference) and the same backward steps (after the training forward), with the same
// algorithms, parameters and geometry — or both refuse for the same reason.
#include <gtest/gtest.h>

#include <algorithm>

#include "backends/onednn/lower.h"
#include "ir/build.h"
#include "ops/quant_util.h"
#include "ops/registry.h"

namespace quorum::backends::onednn_lower {
namespace {

constexpr int kCases = 6;
// A quantized operator's sampler draws cases oneDNN refuses by design (per-channel weights, weight zero points):
// twice the cases, so one is lowered.
constexpr int kQuantizedCases = 12;

TEST(Sinks, ReceiveTheSameCallsForEveryCatalogueOperator) {
  int ops_lowered = 0, ops_backward = 0;
  size_t calls = 0;
  for (const ops::OpSpec* spec : ops::catalogue().all()) {
    bool lowered = false, backward = false;
    for (int k = 0; k < (spec->is_quantized ? kQuantizedCases : kCases); ++k) {
      core::Rng rng(core::fnv1a(spec->name) + static_cast<uint64_t>(k));
      const ops::Case c = spec->sample(rng);
      const ir::Graph g = ir::single_node_graph(*spec, c, rng, core::DType::F32).graph;
      const std::vector<std::string> library = library_sink_calls(g);
      const std::vector<std::string> writer = writer_sink_calls(g);
      ASSERT_FALSE(library.empty()) << spec->name;
      // The writer cannot express every case the backend runs (a truncated conv_transpose2d): such a
      // case is compared no further.
      if (writer[0].rfind("refused by the writer: ", 0) == 0 || library[0].rfind("refused by the library", 0) == 0)
        continue;
      EXPECT_EQ(library, writer) << spec->name << " case " << k << " " << core::to_string(g.nodes[0].attrs);
      if (library[0].rfind("refused: ", 0) == 0) continue;
      EXPECT_GE(library.size(), 4u) << spec->name;  // node + a step, for each prop kind
      lowered = true;
      calls += library.size();
      backward = backward || std::any_of(library.begin(), library.end(), [](const std::string& l) {
                   return l.find("_backward ") != std::string::npos || l.rfind("alias d:", 0) == 0;
                 });
    }
    ops_lowered += lowered;
    ops_backward += backward;
    // The int8 operators oneDNN lowers go through both sinks (its int8 reorders, convolution and matmul; the
    // quantized twins of ops/qlinear.cpp, whose sampled cases oneDNN mostly refuses, are the next test's).
    if (spec->is_quantized && !spec->attr("x_scales")) {
      EXPECT_TRUE(lowered) << spec->name << ": no int8 case lowered by both sinks";
    }
    // The recurrent cells go through both sinks, forward and backward.
    if (is_rnn(spec->name)) {
      EXPECT_TRUE(backward) << spec->name << ": no backward steps compared";
    }
  }
  EXPECT_GE(ops_lowered, 40);
  EXPECT_GE(ops_backward, 30);  // backward steps compared for most differentiable operators
  EXPECT_GE(calls, 500u);
}

// Per-axis quantize_linear / dequantize_linear (scales along axis): both sinks get one reorder with an output scale
// per index of the axis (mask 1 << axis, the axis made non-negative) and the common zero point; per-axis zero
// points are refused by both with 2.6's measured reason.
TEST(Sinks, PerAxisQuantizationIsOneReorderWithAScalePerIndex) {
  for (const char* name : {"quantize_linear", "dequantize_linear"}) {
    const ops::OpSpec& spec = ops::op(name);
    int lowered = 0, refused = 0;
    for (uint64_t k = 0; k < 400 && (lowered < 3 || refused < 1); ++k) {
      core::Rng rng(core::fnv1a(spec.name) + 9000 + k);
      const ir::Graph g = ir::single_node_graph(spec, spec.sample(rng), rng, core::DType::F32).graph;
      if (!ops::per_channel_weight(g.nodes[0].attrs, "")) continue;
      const std::vector<std::string> library = library_sink_calls(g);
      EXPECT_EQ(library, writer_sink_calls(g)) << name << " " << core::to_string(g.nodes[0].attrs);
      ASSERT_FALSE(library.empty());
      std::string all;
      for (const std::string& line : library) all += line + "\n";
      if (library[0].rfind("refused: ", 0) == 0) {
        ++refused;
        EXPECT_NE(all.find("per-axis zero points"), std::string::npos) << all;
        continue;
      }
      ++lowered;
      EXPECT_NE(all.find("scales(axis "), std::string::npos) << all;
    }
    EXPECT_GE(lowered, 3) << name;
    EXPECT_GE(refused, 1) << name;
  }
}

// The quantized twins (ops/qlinear.cpp) oneDNN runs go through both sinks: their sampled cases, with the
// quantization made one oneDNN 2.6 can take where the sampler rarely draws it (zero zero points for qlinear_mul
// and qlinear_leaky_relu, every input quantized as the output for qlinear_concat); qlinear_sigmoid is refused
// by both for one reason.
TEST(Sinks, ReceiveTheSameCallsForTheQuantizedTwins) {
  for (const char* op : {"qlinear_add", "qlinear_mul", "qlinear_avg_pool2d", "qlinear_global_avg_pool",
                         "qlinear_max_pool2d", "qlinear_concat", "qlinear_leaky_relu", "qlinear_sigmoid"}) {
    const ops::OpSpec& spec = ops::op(op);
    int lowered = 0;
    for (int k = 0; k < kQuantizedCases; ++k) {
      core::Rng rng(core::fnv1a(spec.name) + 7919u * static_cast<uint64_t>(k));
      ops::Case c = spec.sample(rng);
      auto zps = core::attr_ints(c.attrs, "x_zero_points");
      auto scales = core::attr_floats(c.attrs, "x_scales");
      if (spec.name == "qlinear_mul" || spec.name == "qlinear_leaky_relu") zps.assign(zps.size(), 0);
      if (spec.name == "qlinear_concat") {
        scales.assign(scales.size(), core::attr_f(c.attrs, "y_scale"));
        zps.assign(zps.size(), core::attr_i(c.attrs, "y_zero_point"));
      }
      c.attrs["x_zero_points"] = zps;
      c.attrs["x_scales"] = scales;
      const ir::Graph g = ir::single_node_graph(spec, c, rng, core::DType::F32).graph;
      const std::vector<std::string> library = library_sink_calls(g);
      const std::vector<std::string> writer = writer_sink_calls(g);
      ASSERT_FALSE(library.empty()) << op;
      EXPECT_EQ(library, writer) << op << " case " << k << " " << core::to_string(g.nodes[0].attrs);
      if (library[0].rfind("refused", 0) == 0) continue;
      ++lowered;
      EXPECT_TRUE(std::any_of(library.begin(), library.end(), [](const std::string& l) { return l[0] == 'q'; }))
          << op << ": no int8 step";
    }
    if (std::string(op) == "qlinear_sigmoid") {
      EXPECT_EQ(lowered, 0);
    } else {
      EXPECT_GT(lowered, 0) << op << ": no case lowered by both sinks";
    }
  }
}

// A recording sink sees a changed parameter: the comparison above can fail.
class NullSink : public StepSink {
 public:
  void alias(const std::string&, const std::string&) override {}
  void constant(const std::string&, const std::string&, const Shape&, const std::vector<float>&,
                const std::string&) override {}
  void eltwise(const Eltwise&, const Dims&, const std::string&, const std::string&) override {}
  void binary(Alg, const Dims&, const Dims&, const std::string&, const Dims&, const std::string&,
              const std::string&) override {}
  void sum(const Dims&, const std::vector<std::string>&, const std::string&) override {}
  void concat(const Dims&, int, const std::vector<Dims>&, const std::vector<std::string>&,
              const std::string&) override {}
  void transpose(const Dims&, const Dims&, const std::string&, const std::string&) override {}
  void view(const Dims&, const Dims&, int64_t, const std::string&, const std::string&) override {}
  void reduce(Alg, const Dims&, const std::string&, const Dims&, const std::string&) override {}
  void prod_of_others(const Dims&, const std::string&, const Dims&, const std::string&) override {}
  void softmax(Prop, const SoftmaxGeo&, const std::string&, const std::string&) override {}
  void matmul(const Dims&, const std::string&, const Dims&, const std::string&, const Dims&,
              const std::string&) override {}
  void matmul_strided(const Dims&, const Dims&, const std::string&, const Dims&, const Dims&, const std::string&,
                      const Dims&, const std::string&) override {}
  void pool(Prop, const PoolGeo&, const std::string&, const std::string&) override {}
  void conv(Prop, const ConvGeo&, const std::string&, const std::string&, const std::string&,
            const std::string&) override {}
  void dense(Prop, const DenseGeo&, const std::string&, const std::string&, const std::string&,
             const std::string&) override {}
  void batch_norm(Prop, const BnGeo&, const std::vector<std::string>&, const std::string&) override {}
  void layer_norm(const LnGeo&, const std::string&, const std::string&, const std::string&,
                  const std::string&) override {}
  void lrn(Prop, const LrnGeo&, const std::string&, const std::string&) override {}
  void resample(Prop, const ResampleGeo&, const std::string&, const std::string&) override {}
  void rnn(Prop, const RnnGeo&, const std::vector<std::string>&, const std::string&) override {}
  void qreorder(const QReorderGeo&, const std::string&, const std::string&) override {}
  void qconv(const ConvGeo&, const QuantAttr&, const std::string&, const std::string&, const std::string&,
             const std::string&) override {}
  void qmatmul(const QMatmulGeo&, const QuantAttr&, const std::string&, const std::string&,
               const std::string&) override {}
  void qbinary(Alg, const QElemAttr&, const Dims&, const Dims&, const std::string&, const Dims&, const std::string&,
               const std::string&) override {}
  void qpool(const PoolGeo&, const QElemAttr&, const std::string&, const std::string&) override {}
  void qeltwise(const Eltwise&, const QElemAttr&, const Dims&, const std::string&, const std::string&) override {}
  void qconcat(DataType, const Dims&, int, const std::vector<Dims>&, const std::vector<std::string>&,
               const std::string&) override {}
  void zeros(const Dims&, const std::string&) override {}
  void broadcast(const Shape&, const std::string&, const Shape&, const std::string&) override {}
  void eltwise_backward(const Eltwise&, const Dims&, const std::string&, const std::string&,
                        const std::string&) override {}
  void softmax_backward(const SoftmaxGeo&, const std::string&, const std::string&, const std::string&,
                        const std::string&) override {}
  void pool_backward(const PoolGeo&, const std::string&, const std::string&, const std::string&) override {}
  void conv_backward(const ConvGeo&, const std::string&, const std::string&, const std::string&,
                     const std::vector<std::string>&) override {}
  void dense_backward(const DenseGeo&, const std::string&, const std::string&, const std::string&,
                      const std::vector<std::string>&) override {}
  void batch_norm_backward(const BnGeo&, const std::vector<std::string>&, const std::string&,
                           const std::vector<std::string>&) override {}
  void layer_norm_backward(const LnGeo&, const std::vector<std::string>&, const std::string&,
                           const std::vector<std::string>&) override {}
  void lrn_backward(const LrnGeo&, const std::string&, const std::string&, const std::string&) override {}
  void resample_backward(const ResampleGeo&, const std::string&, const std::string&, const std::string&) override {}
  void rnn_backward(const RnnGeo&, const std::vector<std::string>&, const std::string&,
                    const std::vector<std::string>&) override {}
};

TEST(SinksRecord, ADifferentParameterIsADifferentCall) {
  NullSink null;
  RecordingSink a(null), b(null);
  a.eltwise({Alg::eltwise_clip_v2, 0, 6}, {2, 3}, "x", "y");
  b.eltwise({Alg::eltwise_clip_v2, 0, 6.0000005f}, {2, 3}, "x", "y");
  PoolGeo p{Alg::pooling_max, {1, 1, 4}, {1, 1, 2}, {2}, {2}, {0}, {0}, {}, {}, {}};
  a.pool(Prop::forward_training, p, "x", "y");
  p.pad_r = {1};
  b.pool(Prop::forward_training, p, "x", "y");
  ASSERT_EQ(a.calls().size(), 2u);
  EXPECT_NE(a.calls()[0], b.calls()[0]);
  EXPECT_NE(a.calls()[1], b.calls()[1]);
}

}  // namespace
}  // namespace quorum::backends::onednn_lower
