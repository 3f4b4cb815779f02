// libtorch's quantized path through the real worker (--dtype int8): QuantizeLinear, DequantizeLinear, QLinearConv
// and QLinearMatMul on libtorch's quantized tensors and its registered quantized operators, on both quantized
// engines of Debian's build (onednn, the default, and torch:qengine=qnnpack). Every finding a short campaign
// records is a ledger entry's, and what an engine cannot take is refused with its reason, not a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "backends/torch/lower.h"
#include "store/store.h"
#include "ir/json_io.h"
#include "ref/interpreter.h"
#include "run_quorum.h"
#include "support/one_node_graph.h"
#include "worker/supervisor.h"

namespace quorum::backends {
namespace {

namespace fs = std::filesystem;

bool torch_built() {
  const auto& have = worker::available_backends();
  return std::find(have.begin(), have.end(), "torch") != have.end();
}

TEST(TorchInt8, QuantizedUnitModelsReportOnlyLedgerEntries) {
  if (!torch_built()) GTEST_SKIP() << "torch backend not built";
  const fs::path out = testing::scratch("torch_int8_test") / "campaign";
  fs::remove_all(out);
  const testing::Result r = testing::run_quorum("fuzz --generator unit --dtype int8 --backends "
                                                "torch,torch:qengine=qnnpack --models 120 --jobs 1 --seed 17 --out " +
                                                    out.string(),
                                                "torch_int8_test");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  // Each engine ran quantized models, and each refused what it cannot take, with the measured reason.
  EXPECT_NE(r.out.find("takes symmetric weights only"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("QNNPACK takes a requantization scale"), std::string::npos) << r.out;
  const auto store = store::open_sqlite_store(out.string());
  EXPECT_EQ(store->models_done(), 120);
  for (const auto& f : store->findings())
    EXPECT_FALSE(f.known.empty()) << "not in the ledger: " << f.signature << " (root cause " << f.root_cause << ")";
  fs::remove_all(out);
}

// Per-channel weights (w_scales) on both engines: the convolution and matmul cases (three tenths per channel) run as
// libtorch's per-channel qint8 weights, none is refused as unlowered, and every finding is a ledger entry's.
TEST(TorchInt8, PerChannelWeightsReportOnlyLedgerEntries) {
  if (!torch_built()) GTEST_SKIP() << "torch backend not built";
  const fs::path out = testing::scratch("torch_int8_test") / "per_channel";
  fs::remove_all(out);
  const testing::Result r = testing::run_quorum("fuzz --generator unit --dtype int8 --backends "
                                                "torch,torch:qengine=qnnpack --ops qlinear_conv2d,qlinear_matmul "
                                                "--models 60 --jobs 1 --seed 23 --out " + out.string(),
                                                "torch_int8_test");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("are not lowered"), std::string::npos) << r.out;
  const auto store = store::open_sqlite_store(out.string());
  EXPECT_EQ(store->models_done(), 60);
  for (const auto& f : store->findings())
    EXPECT_FALSE(f.known.empty()) << "not in the ledger: " << f.signature << " (root cause " << f.root_cause << ")";
  fs::remove_all(out);
}

// The seven quantized twins (ops/qlinear.cpp) on libtorch's quantized operators: a hand-built node per twin, int8 (as
// qint8) and uint8 (as quint8), on both engines, against the reference's exact integer arithmetic. Each output is at
// most one step from the reference (float32 requantization) and most are equal.
struct Twin {
  const char* op;
  std::vector<core::Shape> shapes;
  const char* attrs;  // the float operator's attributes and the twin's, as JSON; "Z" is replaced by a zero point
};

const std::vector<Twin>& twins() {
  static const std::vector<Twin> t = {
      {"qlinear_add", {{1, 2, 3, 4}, {1, 1, 3, 4}},
       R"("x_scales": [0.05, 0.1], "x_zero_points": [Z, Z], "y_scale": 0.125, "y_zero_point": Z)"},
      {"qlinear_mul", {{1, 2, 3, 4}, {1, 2, 3, 4}},
       R"("x_scales": [0.05, 0.1], "x_zero_points": [Z, Z], "y_scale": 0.5, "y_zero_point": Z)"},
      {"qlinear_avg_pool2d", {{1, 2, 5, 6}},
       R"("kernel_shape": [3, 3], "strides": [2, 2], "pads": [0, 0, 1, 1], "count_include_pad": 1,
          "x_scales": [0.1], "x_zero_points": [Z], "y_scale": 0.1, "y_zero_point": Z)"},
      {"qlinear_global_avg_pool", {{1, 3, 4, 5}},
       R"("x_scales": [0.1], "x_zero_points": [Z], "y_scale": 0.1, "y_zero_point": Z)"},
      // asymmetric pads (padded explicitly with the type's lowest integer) and ceil_mode
      {"qlinear_max_pool2d", {{1, 2, 5, 6}},
       R"("kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 0, 1], "ceil_mode": 1,
          "x_scales": [0.1], "x_zero_points": [Z], "y_scale": 0.1, "y_zero_point": Z)"},
      {"qlinear_concat", {{1, 2, 3}, {1, 3, 3}},
       R"("axis": 1, "x_scales": [0.05, 0.1], "x_zero_points": [Z, Z], "y_scale": 0.0625, "y_zero_point": Z)"},
      {"qlinear_leaky_relu", {{2, 3, 4}},
       R"("alpha": 0.1, "x_scales": [0.05], "x_zero_points": [Z], "y_scale": 0.03, "y_zero_point": Z)"},
      {"qlinear_sigmoid", {{2, 3, 4}},
       R"("x_scales": [0.05], "x_zero_points": [Z], "y_scale": 0.00390625, "y_zero_point": Y)"},
  };
  return t;
}

// Twin `t` as a one-node graph of type `type` ("int8" or "uint8").
ir::Graph twin_graph(const Twin& t, const std::string& type) {
  std::string attrs = t.attrs;
  const std::string zp = type == "int8" ? "3" : "131", sig_zp = type == "int8" ? "-128" : "0";
  for (size_t at; (at = attrs.find('Z')) != std::string::npos;) attrs.replace(at, 1, zp);
  for (size_t at; (at = attrs.find('Y')) != std::string::npos;) attrs.replace(at, 1, sig_zp);
  return testing::one_node_graph(t.op, type, t.shapes, attrs + R"(, "to": ")" + type + "\"", t.op);
}

// Integers spread over the type's whole range.
ValueMap twin_inputs(const ir::Graph& g) { return testing::spread_integer_inputs(g); }

TEST(TorchInt8, QuantizedTwinsAgreeWithTheReferenceOnBothEngines) {
  if (!torch_built()) GTEST_SKIP() << "torch backend not built";
  const std::vector<std::vector<std::string>> variants = {{}, {"qengine=qnnpack"}};
  for (const std::vector<std::string>& variant : variants)
    for (const Twin& t : twins())
      for (const std::string type : {"int8", "uint8"}) {
        const std::string where = std::string(t.op) + " " + type + (variant.empty() ? " onednn" : " qnnpack");
        const ir::Graph g = twin_graph(t, type);
        const Support s = torch::support(g, g.nodes.at(0), variant.empty() ? "onednn" : "qnnpack");
        ASSERT_TRUE(s.ok) << where << ": " << s.reason;
        const ValueMap in = twin_inputs(g);
        const ValueMap want = ref::forward(g, in);
        worker::Worker w("torch", variant, worker::Limits{});
        const worker::Outcome compiled = w.compile(g, CompileOptions{core::DType::F32, 1});
        ASSERT_TRUE(compiled.ok()) << where << ": " << compiled.str();
        ValueMap got;
        const worker::Outcome ran = w.forward(in, false, got);
        ASSERT_TRUE(ran.ok()) << where << ": " << ran.str();
        ASSERT_TRUE(got.count("y")) << where;
        EXPECT_EQ(got.at("y").dtype(), g.types.at("y").dtype) << where;
        const std::vector<double> a = got.at("y").values(), b = want.at("y").values();
        ASSERT_EQ(a.size(), b.size()) << where;
        size_t equal = 0;
        for (size_t i = 0; i < a.size(); ++i) {
          EXPECT_LE(std::abs(a[i] - b[i]), 1.0) << where << " [" << i << "]";
          equal += a[i] == b[i];
        }
        EXPECT_GE(equal * 10, a.size() * 9) << where << ": " << equal << " of " << a.size() << " equal";
      }
}

// What an engine cannot take is refused with the measured reason, not run: a pool whose output has other qparams
// than its input, QNNPACK's sigmoid at another output scale than 1/256 (quint8), an add ratio beyond QNNPACK's
// range, a qint8 product ratio beyond XNNPACK's.
TEST(TorchInt8, WhatTheTwinsCannotTakeIsRefusedWithItsReason) {
  struct Case {
    const char* op;
    const char* type;
    const char* engine;
    std::map<std::string, core::AttrValue> attrs;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {"qlinear_avg_pool2d", "int8", "onednn", {{"y_scale", 0.2}}, "keep the input's scale and zero point"},
      {"qlinear_global_avg_pool", "uint8", "qnnpack", {{"y_zero_point", int64_t{7}}}, "no native requantization"},
      {"qlinear_avg_pool2d",
       "uint8",
       "onednn",
       {{"count_include_pad", int64_t{0}}},
       "take a division of window sums"},
      {"qlinear_sigmoid", "uint8", "qnnpack", {{"y_scale", 0.0078125}}, "only output scale of 1/256"},
      {"qlinear_add", "uint8", "qnnpack", {{"y_scale", 1e-4}}, "scale ratio must be in [2**-14, 2**8)"},
      {"qlinear_add", "int8", "qnnpack", {{"y_scale", 100.0}}, "qs8 add"},
      {"qlinear_mul", "int8", "onednn", {{"y_scale", 1e-6}}, "in [2^-16, 256)"},
      {"qlinear_max_pool2d", "uint8", "onednn", {{"y_zero_point", int64_t{7}}}, "keeps the input's scale"},
      {"qlinear_max_pool2d",
       "uint8",
       "qnnpack",
       {{"kernel_shape", std::vector<int64_t>{1, 1}}, {"pads", std::vector<int64_t>{0, 0, 0, 0}}},
       "refuses a 1x1 kernel"},
  };
  for (const Case& c : cases) {
    const auto it =
        std::find_if(twins().begin(), twins().end(), [&](const Twin& t) { return t.op == std::string(c.op); });
    ASSERT_NE(it, twins().end());
    Twin t = *it;
    if (std::string(c.op) == "qlinear_add") t.shapes[1] = t.shapes[0];  // QNNPACK's own add: equal shapes
    ir::Graph g = twin_graph(t, c.type);
    for (const auto& [k, v] : c.attrs) g.nodes.at(0).attrs[k] = v;
    const Support s = torch::support(g, g.nodes.at(0), c.engine);
    EXPECT_FALSE(s.ok) << c.op;
    EXPECT_NE(s.reason.find(c.reason), std::string::npos) << c.op << ": " << s.reason;
    // The other engine's rules: sigmoid and add run on onednn.
    if (std::string(c.engine) == "qnnpack" && std::string(c.op) != "qlinear_global_avg_pool") {
      EXPECT_TRUE(torch::support(g, g.nodes.at(0), "onednn").ok) << c.op;
    }
  }
}

// A campaign of the twins only, on both engines: they run (none is refused as unlowered) and every finding is a
// ledger entry's.
TEST(TorchInt8, QuantizedTwinCampaignReportsOnlyLedgerEntries) {
  if (!torch_built()) GTEST_SKIP() << "torch backend not built";
  const fs::path out = testing::scratch("torch_int8_test") / "twins";
  fs::remove_all(out);
  const testing::Result r = testing::run_quorum(
      "fuzz --generator unit --dtype int8 --backends torch,torch:qengine=qnnpack --ops qlinear_add,qlinear_mul,"
      "qlinear_avg_pool2d,qlinear_global_avg_pool,qlinear_max_pool2d,qlinear_concat,qlinear_leaky_relu,qlinear_sigmoid "
      "--models 60 "
      "--jobs 1 --seed 29 --out " + out.string(),
      "torch_int8_test");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("are not lowered"), std::string::npos) << r.out;
  const auto store = store::open_sqlite_store(out.string());
  EXPECT_EQ(store->models_done(), 60);
  for (const auto& f : store->findings())
    EXPECT_FALSE(f.known.empty()) << "not in the ledger: " << f.signature << " (root cause " << f.root_cause << ")";
  fs::remove_all(out);
}

}  // namespace
}  // namespace quorum::backends
