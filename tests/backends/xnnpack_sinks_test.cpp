// XNNPACK sink agreement: the backend and the reproducer writer drive one lowering
// (src/backends/xnnpack/lower.h) into their own sinks. For sampled cases of every catalogue operator,
// and for generated multi-node models (layout changes, several segments, concat between them), the
// calls each sink receives (recorded by xnnpack::recording_sink) must be the same lines, or both must refuse
// the graph with the same reason. The backend's sink really defines the subgraphs, so a call XNNPACK
// refuses shows up as "library error: ..." on its side only and fails here: the reproducer would
// print a program that fails where the backend never ran.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "backends/xnnpack/lower.h"
#include "campaign/campaign.h"
#include "campaign/model_source.h"
#include "ir/build.h"
#include "ir/json_io.h"
#include "ops/registry.h"

namespace quorum::backends::xnnpack {
namespace {

constexpr int kCases = 6;

struct Tally {
  int compared = 0, refused = 0;
  size_t lines = 0;
};

// Compares both sinks' calls for `g`; true when the graph was lowered (not refused).
bool agree(const ir::Graph& g, const std::string& what, Tally& t) {
  const std::vector<std::string> library = library_sink_calls(g);
  const std::vector<std::string> writer = writer_sink_calls(g);
  EXPECT_EQ(library, writer) << what;
  const bool refused = !library.empty() && library.back().rfind("refused: ", 0) == 0;
  if (refused) {
    EXPECT_EQ(library.size(), 1u) << what << ": a refused graph reaches no sink";
    ++t.refused;
    return false;
  }
  ++t.compared;
  t.lines += library.size();
  return true;
}

TEST(XnnpackSinks, EveryOperatorLowersAlikeIntoBothSinks) {
  Tally t;
  int operators = 0;
  for (const ops::OpSpec* spec : ops::catalogue().all()) {
    bool lowered = false;
    for (int k = 0; k < kCases; ++k) {
      core::Rng rng(core::fnv1a(spec->name) + static_cast<uint64_t>(k));
      const ops::Case c = spec->sample(rng);
      const ir::SingleNode sn = ir::single_node_graph(*spec, c, rng, core::DType::F32);
      lowered |= agree(sn.graph, spec->name + " case " + std::to_string(k), t);
    }
    operators += lowered;
  }
  // The comparison must have something to compare: most of the mapped operators, their calls.
  EXPECT_GE(operators, 30) << "operators lowered";
  EXPECT_GE(t.compared, 150);
  EXPECT_GE(t.lines, 1000u) << "calls recorded";
  EXPECT_GT(t.refused, 0) << "unsupported operators must refuse alike too";
  std::printf("%d operators lowered: %d cases (%zu calls), %d refused\n", operators, t.compared, t.lines, t.refused);
}

TEST(XnnpackSinks, GeneratedModelsLowerAlikeIntoBothSinks) {
  Tally t;
  int segments = 0;
  for (const char* generator : {"muffin", "ws", "rn", "zoo"}) {
    gen::GenOptions opt;
    opt.generator = generator;
    const campaign::ModelFactory factory = campaign::generator_factory(opt, "random");
    for (int64_t i = 0; i < 100; ++i) {
      const campaign::ModelCase m = campaign::draw_case(factory, 2026, i, "mse_loss");
      if (agree(m.graph, std::string(generator) + " model " + std::to_string(i), t))
        for (const auto& line : library_sink_calls(m.graph)) segments += line == "begin_subgraph";
    }
  }
  EXPECT_GE(t.compared, 20) << "models lowered";
  EXPECT_GT(segments, t.compared) << "some model needs more than one subgraph";
  EXPECT_GE(t.lines, 500u) << "calls recorded";
  std::printf("%d models lowered (%zu calls, %d subgraphs), %d refused\n", t.compared, t.lines, segments, t.refused);
}

// Quantized models (--dtype int8): the unit generator's quantized operators and the float generators' models
// rewritten by the quantizer lower alike into both sinks, with quantized values, converts and qs8/qu8 products.
TEST(XnnpackSinks, QuantizedModelsLowerAlikeIntoBothSinks) {
  Tally t;
  std::map<std::string, int> calls;
  for (const char* generator : {"unit", "muffin", "zoo"}) {
    gen::GenOptions opt;
    opt.generator = generator;
    opt.quantized = true;
    const campaign::ModelFactory factory = campaign::generator_factory(opt, "random");
    for (int64_t i = 0; i < 200; ++i) {  // some quantized twins and per-channel weights are refused
      const campaign::ModelCase m = campaign::draw_case(factory, 2027, i, "mse_loss");
      if (!agree(m.graph, std::string(generator) + " int8 model " + std::to_string(i), t)) continue;
      for (const auto& line : library_sink_calls(m.graph))
        for (const char* c : {"xnn_define_convert", "xnn_define_convolution_2d", "xnn_define_fully_connected",
                              "quantized_static", "qint8", "quint8"})
          calls[c] += line.find(c) != std::string::npos;
    }
  }
  EXPECT_GE(t.compared, 20) << "quantized models lowered";
  EXPECT_GT(t.refused, 0) << "what XNNPACK cannot take is refused alike";
  for (const char* c : {"xnn_define_convert", "xnn_define_convolution_2d", "xnn_define_fully_connected",
                        "quantized_static", "qint8", "quint8"})
    EXPECT_GT(calls[c], 0) << c;
  std::printf("%d quantized models lowered (%zu calls), %d refused\n", t.compared, t.lines, t.refused);
}

// The quantized twins XNNPACK runs (lower_quant.cpp), int8 and uint8, each input under its own scale and zero
// point: both sinks receive the same calls, with qint8/quint8 external values and the twin's definition.
TEST(XnnpackSinks, QuantizedTwinsLowerAlikeIntoBothSinks) {
  struct Twin {
    const char* op;
    std::vector<const char*> shapes;  // the graph inputs', JSON
    const char* scales;               // x_scales, y_scale
    std::vector<int> zero_points;     // the inputs', then the output's (int8; uint8: + 128)
    const char* call;
  };
  const std::vector<Twin> twins = {
      {"qlinear_add", {"[1, 3, 4, 5]", "[1, 3, 1, 5]"}, R"("x_scales": [0.05, 0.037], "y_scale": 0.08)", {3, -7, 1},
       "xnn_define_add2"},
      {"qlinear_mul", {"[3, 4]", "[1, 4]"}, R"("x_scales": [0.25, 0.125], "y_scale": 2.0)", {0, 1, 0},
       "xnn_define_multiply2"},
      {"qlinear_global_avg_pool", {"[1, 3, 5, 5]"}, R"("x_scales": [0.2], "y_scale": 0.03)", {-5, 2},
       "xnn_define_global_average_pooling_2d"},
      {"qlinear_sigmoid", {"[2, 3, 8]"}, R"("x_scales": [0.05], "y_scale": 0.00390625)", {4, -128},
       "xnn_define_sigmoid"},
      {"qlinear_max_pool2d", {"[1, 2, 5, 6]"},
       R"("kernel_shape": [2, 3], "pads": [1, 0, 0, 1], "x_scales": [0.3], "y_scale": 0.3)", {-7, -7},
       "xnn_define_max_pooling_2d"},
  };
  for (const std::string type : {"int8", "uint8"})
    for (const Twin& t : twins) {
      const int shift = type == "int8" ? 0 : 128;
      std::string inputs, names, zps;
      for (size_t k = 0; k < t.shapes.size(); ++k) {
        const std::string n = "x" + std::to_string(k), sep = k ? ", " : "";
        inputs += sep + R"({"name": ")" + n + R"(", "dtype": ")" + type + R"(", "shape": )" + t.shapes[k] + "}";
        names += sep + "\"" + n + "\"";
        zps += sep + std::to_string(t.zero_points[k] + shift);
      }
      const std::string json = R"({"inputs": [)" + inputs + R"(], "outputs": ["y"], "nodes": [{"name": "t", "op": ")" +
                               t.op + R"(", "inputs": [)" + names + R"(], "outputs": ["y"], "attrs": {)" + t.scales +
                               R"(, "x_zero_points": [)" + zps + R"(], "y_zero_point": )" +
                               std::to_string(t.zero_points.back() + shift) + R"(, "to": ")" + type + R"("}}]})";
      const ir::Graph g = ir::graph_from_json(json, t.op);
      const std::string what = std::string(t.op) + " " + type;
      Tally tally;
      EXPECT_TRUE(agree(g, what, tally)) << what << ": " << library_sink_calls(g).back();
      const std::vector<std::string> lines = library_sink_calls(g);
      const std::string q = type == "int8" ? " qint8 " : " quint8 ";
      auto has = [&](const std::string& a, const std::string& b) {
        return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) {
          return l.find(a) != std::string::npos && l.find(b) != std::string::npos;
        });
      };
      EXPECT_TRUE(has("external_input", q)) << what;
      EXPECT_TRUE(has("external_output", q)) << what;
      EXPECT_TRUE(has(t.call, "")) << what;
    }
}

}  // namespace
}  // namespace quorum::backends::xnnpack
