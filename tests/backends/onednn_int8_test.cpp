// oneDNN's int8 path (ops_quant.cpp, lower.cpp's lower_quantized): quantize_linear / dequantize_linear as
// reorders with an output scale and zero points, qlinear_conv2d / qlinear_matmul as int8 convolution and
// matmul primitives. Hand-built quantized models agree exactly with the float64 reference (integer sums,
// one rounding half to even, saturation; uint8 weights shifted into s8, int32 bias, padding holding the
// input's zero point); what oneDNN 2.6 cannot express exactly is one refusal with its measured reason.
#include <gtest/gtest.h>

#include <algorithm>

#include "ir/json_io.h"
#include "ref/interpreter.h"
#include "run_quorum.h"
#include "worker/supervisor.h"

namespace quorum::backends {
namespace {

bool have_onednn() {
  const auto& have = worker::available_backends();
  return std::find(have.begin(), have.end(), "onednn") != have.end();
}

// x (float) -> quantize_linear (uint8) -> qlinear_conv2d (int8 or uint8 weights, int32 bias, pads 1) ->
// dequantize_linear, and the quantized x through qlinear_matmul with a weight zero point.
std::string chain(const std::string& w_type, int w_zero_point, const std::string& bias) {
  const bool u8 = w_type == "uint8";
  const std::string w = u8 ? "[128,130,250,0,127,129,200,5,60,128,255,1,100,140,128,7]"
                           : "[1,-2,3,-4,5,-6,7,-8,127,-128,0,9,-10,11,-12,13]";
  const std::string mw = u8 ? "[0,255,128,3,200,17]" : "[1,-128,127,3,-50,17]";
  return R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 2, 3, 3]}],
    "outputs": ["dq", "mm"],
    "initializers": [
      {"name": "w", "dtype": ")" +
         w_type + R"(", "shape": [2, 2, 2, 2], "data": )" + w + R"(},
      {"name": "b", "dtype": "int32", "shape": [2], "data": )" +
         bias + R"(},
      {"name": "mw", "dtype": ")" +
         w_type + R"(", "shape": [3, 2], "data": )" + mw + R"(}],
    "nodes": [
      {"name": "q", "op": "quantize_linear", "inputs": ["x"], "outputs": ["q"],
       "attrs": {"scale": 0.0625, "zero_point": 37, "to": "uint8"}},
      {"name": "c", "op": "qlinear_conv2d", "inputs": ["q", "w", "b"], "outputs": ["c"],
       "attrs": {"out_channels": 2, "kernel_shape": [2, 2], "pads": [1, 1, 1, 1], "bias": 1,
                 "x_scale": 0.0625, "x_zero_point": 37, "w_scale": 0.0078125, "w_zero_point": )" +
         std::to_string(w_zero_point) + R"(, "w_type": ")" + w_type + R"(",
                 "y_scale": 0.04, "y_zero_point": -3, "to": "int8"}},
      {"name": "dq", "op": "dequantize_linear", "inputs": ["c"], "outputs": ["dq"],
       "attrs": {"scale": 0.04, "zero_point": -3}},
      {"name": "mm", "op": "qlinear_matmul", "inputs": ["q", "mw"], "outputs": ["mm"],
       "attrs": {"units": 2, "a_scale": 0.0625, "a_zero_point": 37, "w_scale": 0.01, "w_zero_point": )" +
         std::to_string(u8 ? 140 : -5) + R"(, "w_type": ")" + w_type + R"(",
                 "y_scale": 0.3, "y_zero_point": 128, "to": "uint8"}}]})";
}

ref::ValueMap chain_inputs() {
  std::vector<double> x;
  for (int i = 0; i < 18; ++i) x.push_back(-9.0 + 1.53 * i);  // both ends of uint8 saturate
  return {{"x", core::Tensor::f64({1, 2, 3, 3}, x).to(core::DType::F32)}};
}

// Every value of the model on oneDNN equals the reference's, and each keeps its type.
void expect_exact(const ir::Graph& g) {
  worker::Worker w("onednn", {}, worker::Limits{});
  ASSERT_TRUE(w.compile(g, CompileOptions{core::DType::F32, 1}).ok());
  ValueMap got;
  ASSERT_TRUE(w.forward(chain_inputs(), true, got).ok());
  const ref::ValueMap want = ref::forward(g, chain_inputs());
  for (const char* v : {"q", "c", "dq", "mm"}) {
    ASSERT_TRUE(got.count(v)) << v;
    const core::Tensor& t = got.at(v);
    EXPECT_EQ(t.dtype(), g.types.at(v).dtype) << v;
    ASSERT_EQ(t.numel(), want.at(v).numel()) << v;
    int saturated = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      // dequantize_linear's float32 result: (x - zp) * scale rounded once to float32.
      EXPECT_EQ(t.get(i), static_cast<double>(static_cast<float>(want.at(v).get(i)))) << v << " element " << i;
      saturated += t.dtype() == core::DType::U8 && (t.get(i) == 255 || t.get(i) == 0);
    }
    if (std::string(v) == "q") {
      EXPECT_GT(saturated, 0) << "the input should saturate";
    }
  }
}

TEST(OneDNNInt8, Int8WeightsAndAnInt32BiasAgreeExactly) {
  if (!have_onednn()) GTEST_SKIP() << "onednn backend not built";
  expect_exact(ir::graph_from_json(chain("int8", 0, "[1000, -77777]"), "int8"));
}

TEST(OneDNNInt8, Uint8WeightsWithZeroPoint128AreShiftedIntoS8Exactly) {
  if (!have_onednn()) GTEST_SKIP() << "onednn backend not built";
  expect_exact(ir::graph_from_json(chain("uint8", 128, "[-5, 123456]"), "uint8"));
}

// The unit generator's quantized models (each quantized operand a float input through quantize_linear, scales
// and zero points drawn, both ends of the types saturating) agree with the reference on oneDNN's full ISA.
TEST(OneDNNInt8, GeneratedUnitModelsAgree) {
  if (!have_onednn()) GTEST_SKIP() << "onednn backend not built";
  const auto out = testing::scratch("onednn_int8") / "campaign";
  const testing::Result r = testing::run_quorum(
      "fuzz --backends onednn --dtype int8 --generator unit --models 120 --jobs 1 --seed 12001 "
      "--ops quantize_linear,dequantize_linear,qlinear_conv2d,qlinear_matmul --out " +
          out.string(),
      "onednn_int8");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  // Every finding is a ledger entry (the quantizing reorder's tie convention,
  // onednn-quantize-zero-point-before-rounding).
  int findings = 0;
  for (size_t at = r.out.find("new "); at != std::string::npos; at = r.out.find("new ", at + 1)) {
    const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
    if (line.rfind("new inconsistency", 0) == 0 || line.rfind("new crash", 0) == 0 || line.rfind("new nan", 0) == 0) {
      ++findings;
      EXPECT_NE(line.find("(known: "), std::string::npos) << line;
    }
  }
  EXPECT_TRUE(findings > 0 || r.out.find("no findings") != std::string::npos) << r.out;
  const size_t ran = r.out.find("onednn: ran ");
  ASSERT_NE(ran, std::string::npos) << r.out;
  EXPECT_GT(std::stoi(r.out.substr(ran + 12)), 90) << r.out.substr(ran, 200);  // most run, convolutions refused
}

// Without VNNI (onednn:isa=avx2) the int8 kernels follow oneDNN's documented int16 pair sums and halved weights:
// the ledger's two conventions reproduce (their cases need AVX2).
TEST(OneDNNInt8, TheNonVnniConventionsReproduce) {
  if (!have_onednn()) GTEST_SKIP() << "onednn backend not built";
  for (const char* id : {"onednn-int8-non-vnni-pair-saturation", "onednn-int8-non-vnni-conv-weights-halved"}) {
    const testing::Result r = testing::run_quorum(std::string("known --check --filter ") + id, "onednn_int8");
    const bool skipped =
        r.out.find("not checked") != std::string::npos && r.out.find("0 not checked") == std::string::npos;
    if (!skipped) {
      EXPECT_NE(r.out.find("reproduces  onednn:isa=avx2  " + std::string(id)), std::string::npos) << r.out << r.err;
    }
  }
}

// What oneDNN 2.6 cannot express exactly is refused with the measured reason, node by node.
std::string conv_reason(const ir::Graph& g) {
  worker::Worker w("onednn", {}, worker::Limits{});
  std::vector<worker::NodeSupport> sup;
  EXPECT_TRUE(w.supports(g, false, sup).ok());
  for (const auto& s : sup)
    if (s.node == "c") return s.ok ? "" : s.reason;
  return "node c not reported";
}

TEST(OneDNNInt8, WhatTheConvolutionCannotTakeIsOneRefusalWithItsReason) {
  if (!have_onednn()) GTEST_SKIP() << "onednn backend not built";
  // A weights zero point: 2.6's convolution refuses set_zero_points on DNNL_ARG_WEIGHTS.
  EXPECT_NE(conv_reason(ir::graph_from_json(chain("int8", 3, "[0, 0]"), "wzp")).find("takes no weights zero point"),
            std::string::npos);
  // uint8 weights whose zero point does not shift them into s8.
  EXPECT_NE(conv_reason(ir::graph_from_json(chain("uint8", 100, "[0, 0]"), "u8w")).find("only with w_zero_point 128"),
            std::string::npos);
  // A bias that is no float32 integer: oneDNN adds it in float32.
  EXPECT_NE(conv_reason(ir::graph_from_json(chain("int8", 0, "[16777217, 0]"), "bias")).find("no float32 integer"),
            std::string::npos);
  // What maps is not refused.
  EXPECT_EQ(conv_reason(ir::graph_from_json(chain("int8", 0, "[16777216, 0]"), "ok")), "");
}

}  // namespace
}  // namespace quorum::backends
