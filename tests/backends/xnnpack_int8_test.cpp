// XNNPACK's quantized twins (src/backends/xnnpack/lower_quant.cpp): qlinear_add, qlinear_mul,
// qlinear_global_avg_pool, qlinear_sigmoid and qlinear_max_pool2d run on the library's qs8 (int8) and qu8 (uint8)
// subgraph nodes and agree with the reference's exact integer arithmetic within the spread's one step (both sinks
// lowering them alike: xnnpack_sinks_test.cpp); the twins and parameters XNNPACK 2022-02 cannot take are refused
// with the measured reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backends/xnnpack/lower.h"
#include "ir/json_io.h"
#include "ref/interpreter.h"
#include "worker/supervisor.h"

namespace quorum::backends::xnnpack {
namespace {

bool have_xnnpack() {
  const auto& have = worker::available_backends();
  return std::find(have.begin(), have.end(), "xnnpack") != have.end();
}

struct Twin {
  std::string op;
  std::vector<core::Shape> inputs;
  core::Shape output;
  std::vector<double> scales;
  std::vector<int64_t> zero_points;
  double y_scale;
  int64_t y_zero_point;
  std::string extra;      // the float operator's attributes, JSON members with a leading comma
  bool ties_up = false;  // exact scale ratios: the library rounds the ties up, the reference to even
};

std::string shape_json(const core::Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

template <class T>
std::string list_json(const std::vector<T>& v) {
  std::string r = "[";
  for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + core::to_string(core::AttrValue(v[i]));
  return r + "]";
}

// One twin node on graph inputs of `type` ("int8", "uint8").
ir::Graph twin_graph(const Twin& t, const std::string& type) {
  std::string inputs, names;
  for (size_t i = 0; i < t.inputs.size(); ++i) {
    const std::string n = "x" + std::to_string(i);
    inputs += std::string(i ? ", " : "") + R"({"name": ")" + n + R"(", "dtype": ")" + type + R"(", "shape": )" +
              shape_json(t.inputs[i]) + "}";
    names += std::string(i ? ", " : "") + "\"" + n + "\"";
  }
  const std::string json = R"({"inputs": [)" + inputs + R"(], "outputs": ["y"], "nodes": [{"name": "t", "op": ")" +
                           t.op + R"(", "inputs": [)" + names + R"(], "outputs": ["y"], "attrs": {"x_scales": )" +
                           list_json(t.scales) + R"(, "x_zero_points": )" + list_json(t.zero_points) +
                           R"(, "y_scale": )" + core::to_string(core::AttrValue(t.y_scale)) +
                           R"(, "y_zero_point": )" + std::to_string(t.y_zero_point) + R"(, "to": ")" + type + "\"" +
                           t.extra + "}}]}";
  return ir::graph_from_json(json, t.op);
}

// Each input spans its type's range in steps of 37 (mod 256), so results saturate and round at many points.
ValueMap twin_inputs(const ir::Graph& g) {
  ValueMap in;
  for (size_t k = 0; k < g.inputs.size(); ++k) {
    const ir::ValueInfo& v = g.inputs[k];
    const double lo = core::dtype_range(v.type.dtype).first;
    std::vector<double> x(static_cast<size_t>(core::numel(v.type.shape)));
    for (size_t i = 0; i < x.size(); ++i) x[i] = lo + static_cast<double>((i * 37 + k * 101) % 256);
    in[v.name] = core::Tensor::f64(v.type.shape, x).to(v.type.dtype);
  }
  return in;
}

// The library's output against the reference's: every element within one step, most of them equal.
void expect_agrees(const Twin& t, const std::string& type) {
  const ir::Graph g = twin_graph(t, type);
  const ir::Node& n = g.nodes.at(0);
  const Support s = supports(g, n);
  ASSERT_TRUE(s.ok) << t.op << " " << type << ": " << s.reason;
  const ValueMap in = twin_inputs(g);
  const ValueMap want = ref::forward(g, in);
  worker::Worker w("xnnpack", {}, worker::Limits{});
  const worker::Outcome compiled = w.compile(g, CompileOptions{core::DType::F32, 1});
  ASSERT_TRUE(compiled.ok()) << t.op << " " << type << ": " << compiled.str();
  ValueMap got;
  const worker::Outcome ran = w.forward(in, true, got);
  ASSERT_TRUE(ran.ok()) << ran.str();
  ASSERT_TRUE(got.count("y"));
  EXPECT_EQ(got.at("y").dtype(), g.types.at("y").dtype);
  EXPECT_EQ(got.at("y").shape(), t.output);
  const std::vector<double> a = got.at("y").values(), b = want.at("y").values();
  ASSERT_EQ(a.size(), b.size());
  size_t equal = 0, up = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_LE(std::abs(a[i] - b[i]), 1.0) << t.op << " " << type << " [" << i << "]";
    if (t.ties_up) {
      EXPECT_GE(a[i], b[i]) << t.op << " " << type << " [" << i << "]";
    }
    equal += a[i] == b[i];
    up += a[i] == b[i] + 1;
  }
  if (t.ties_up) {  // ledger xnnpack-qadd-ties-round-up
    EXPECT_GT(up, 0u) << t.op << " " << type << ": some tie";
  } else {
    EXPECT_GE(equal * 10, a.size() * 9) << t.op << " " << type << ": " << equal << " of " << a.size() << " equal";
  }
  std::map<std::string, std::vector<std::string>> ops;
  ASSERT_TRUE(w.lowering(ops).ok());
  EXPECT_FALSE(ops["t"].empty());
}

int64_t zp(const std::string& type, int64_t v) { return type == "int8" ? v : v + 128; }

std::vector<Twin> mapped(const std::string& type) {
  return {
      // Broadcasting along H; a scale ratio that is no power of two.
      {"qlinear_add", {{1, 3, 4, 5}, {1, 3, 1, 5}}, {1, 3, 4, 5}, {0.05, 0.037}, {zp(type, 3), zp(type, -7)},
       0.08, zp(type, 1), ""},
      // Power-of-two scales: exact ratios, so the ties are real (XNNPACK rounds them up).
      {"qlinear_add", {{2, 6}, {2, 6}}, {2, 6}, {0.25, 0.5}, {zp(type, 0), zp(type, 10)}, 0.5, zp(type, -4), "",
       true},
      {"qlinear_mul", {{1, 2, 3, 4}, {1, 2, 3, 4}}, {1, 2, 3, 4}, {0.1, 0.05}, {zp(type, 2), zp(type, -3)},
       0.1 * 0.05 * 64, zp(type, 5), ""},
      {"qlinear_mul", {{3, 4}, {1, 4}}, {3, 4}, {0.25, 0.125}, {zp(type, 0), zp(type, 1)}, 2.0, zp(type, 0), ""},
      {"qlinear_global_avg_pool", {{1, 3, 5, 5}}, {1, 3, 1, 1}, {0.2}, {zp(type, -5)}, 0.03, zp(type, 2), ""},
      {"qlinear_global_avg_pool", {{2, 4, 7}}, {2, 4, 1}, {0.5}, {zp(type, 0)}, 0.25, zp(type, 0), ""},
      {"qlinear_sigmoid", {{2, 3, 8}}, {2, 3, 8}, {0.05}, {zp(type, 4)}, 1.0 / 256, type == "int8" ? -128 : 0, ""},
      // Padding (never a maximum) and ceil_mode, the output quantized as the input.
      {"qlinear_max_pool2d", {{1, 2, 5, 6}}, {1, 2, 3, 5}, {0.3}, {zp(type, -7)}, 0.3, zp(type, -7),
       R"(, "kernel_shape": [2, 3], "strides": [2, 1], "pads": [1, 0, 0, 1], "ceil_mode": 1)"},
  };
}

TEST(XnnpackInt8, TwinsAgreeWithTheReference) {
  if (!have_xnnpack()) GTEST_SKIP() << "xnnpack backend not built";
  for (const std::string type : {"int8", "uint8"})
    for (const Twin& t : mapped(type)) expect_agrees(t, type);
}

// What XNNPACK 2022-02 cannot take is refused with the measured reason, not run.
TEST(XnnpackInt8, RefusalsSayWhy) {
  struct Case {
    Twin twin;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {{"qlinear_avg_pool2d", {{1, 2, 4, 4}}, {1, 2, 3, 3}, {0.5}, {0}, 0.5, 0,
        R"(, "kernel_shape": [2, 2], "strides": [1, 1], "pads": [0, 0, 0, 0])"},
       "subgraph average pooling is float32 only"},
      {{"qlinear_leaky_relu", {{1, 4}}, {1, 4}, {0.5}, {0}, 0.5, 0, R"(, "alpha": 0.1)"},
       "subgraph leaky relu is float32 only"},
      {{"qlinear_concat", {{1, 4}, {1, 4}}, {1, 8}, {0.5, 0.5}, {0, 0}, 0.5, 0, R"(, "axis": 1)"},
       "no concatenation"},
      {{"qlinear_add", {{1, 4}, {1, 4}}, {1, 4}, {0.5, 0.5}, {0, 0}, 1024.0, 0, ""}, "is below 2^-10"},
      {{"qlinear_add", {{1, 4}, {1, 4}}, {1, 4}, {0.5, 256.0}, {0, 0}, 1.0, 0, ""},
       "x_scales[1] / y_scale is not below 2^8"},
      {{"qlinear_mul", {{1, 4}, {1, 4}}, {1, 4}, {16.0, 16.0}, {0, 0}, 1.0, 0, ""}, "is not below 2^8"},
      {{"qlinear_mul", {{1, 4}, {1, 4}}, {1, 4}, {0.001, 0.001}, {0, 0}, 1.0, 0, ""}, "is below 2^-16"},
      {{"qlinear_global_avg_pool", {{1, 2, 3, 3}}, {1, 2, 1, 1}, {0.001}, {0}, 1.0, 0, ""},
       "is below 2^-8: XNNPACK 2022-02 takes [2^-8, 2^8)"},
      {{"qlinear_sigmoid", {{1, 4}}, {1, 4}, {0.5}, {0}, 1.0 / 128, -128, ""}, "for another y_scale"},
      {{"qlinear_max_pool2d", {{1, 2, 4, 4}}, {1, 2, 3, 3}, {0.5}, {0}, 0.25, 0, R"(, "kernel_shape": [2, 2])"},
       "keeps its input's quantization"},
      {{"qlinear_sigmoid", {{1, 4}}, {1, 4}, {0.5}, {0}, 1.0 / 256, 0, ""},
       "y_zero_point -128 (xnn_create_runtime_v2: xnn_status_unsupported_parameter for another y_zero_point)"},
  };
  for (const Case& c : cases) {
    const ir::Graph g = twin_graph(c.twin, "int8");
    const Support s = supports(g, g.nodes.at(0));
    EXPECT_FALSE(s.ok) << c.twin.op;
    EXPECT_NE(s.reason.find(c.reason), std::string::npos) << c.twin.op << ": " << s.reason;
  }
  // The ends of the measured ranges map.
  const Twin lo{"qlinear_add", {{1, 4}, {1, 4}}, {1, 4}, {1.0 / 1024, 255.0}, {0, 0}, 1.0, 0, ""};
  const ir::Graph g = twin_graph(lo, "uint8");
  EXPECT_TRUE(supports(g, g.nodes.at(0)).ok) << supports(g, g.nodes.at(0)).reason;
}

}  // namespace
}  // namespace quorum::backends::xnnpack
