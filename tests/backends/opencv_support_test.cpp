// OpenCV's edge/reflect padding reads at most one axis length beyond the edge: a wider pad is one
// refusal with one reason (it used to surface as four crash signatures, one per padTop/padLeft/...
// assertion), whichever side is too wide.
#include <gtest/gtest.h>

#include <algorithm>

#include "ir/json_io.h"
#include "run_quorum.h"
#include "worker/supervisor.h"

namespace quorum::backends {
namespace {

ir::Graph edge_pad(const std::string& pads) {
  return ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 1, 2, 3]}], "outputs": ["p"],
    "nodes": [{"name": "p", "op": "pad", "inputs": ["x"], "outputs": ["p"],
               "attrs": {"mode": "edge", "pads": )" + pads + R"(}}]})",
                             "pad");
}

TEST(OpenCVSupport, AnEdgePadWiderThanTheAxisIsOneRefusal) {
  const auto& have = worker::available_backends();
  if (std::find(have.begin(), have.end(), "opencv") == have.end()) GTEST_SKIP() << "opencv backend not built";
  worker::Worker w("opencv", {}, worker::Limits{});
  std::vector<std::string> reasons;
  for (const char* pads : {"[0, 0, 3, 0, 0, 0, 0, 0]", "[0, 0, 0, 4, 0, 0, 0, 0]", "[0, 0, 0, 0, 0, 0, 3, 0]",
                           "[0, 0, 0, 0, 0, 0, 0, 4]"}) {
    std::vector<worker::NodeSupport> sup;
    ASSERT_TRUE(w.supports(edge_pad(pads), false, sup).ok());
    ASSERT_EQ(sup.size(), 1u);
    EXPECT_FALSE(sup[0].ok) << pads;
    reasons.push_back(sup[0].reason.substr(0, sup[0].reason.find(": pads")));
  }
  EXPECT_TRUE(std::all_of(reasons.begin(), reasons.end(), [&](const std::string& r) { return r == reasons[0]; }));
  std::vector<worker::NodeSupport> sup;
  ASSERT_TRUE(w.supports(edge_pad("[0, 0, 2, 3, 0, 0, 2, 3]"), false, sup).ok());
  EXPECT_TRUE(sup[0].ok) << sup[0].reason;  // as wide as the axis: fine
}

// An average pool with ceil_mode=1 and count_include_pad=1 whose height keeps its last (partial)
// window while its width drops it has no ONNX 1.12 form: OpenCV abstains with the exporter's reason
// (it used to be an internal error of the campaign).
TEST(OpenCVSupport, WhatTheExporterCannotWriteIsAnAbstention) {
  const auto& have = worker::available_backends();
  if (std::find(have.begin(), have.end(), "opencv") == have.end()) GTEST_SKIP() << "opencv backend not built";
  const ir::Graph g = ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 1, 5, 4]}],
    "outputs": ["p"], "nodes": [{"name": "p", "op": "avg_pool2d", "inputs": ["x"], "outputs": ["p"],
      "attrs": {"kernel_shape": [2, 1], "strides": [2, 2], "ceil_mode": 1, "count_include_pad": 1}}]})",
                                          "mixed_ceil");
  worker::Worker w("opencv", {}, worker::Limits{});
  const worker::Outcome o = w.compile(g, CompileOptions{core::DType::F32, 1});
  EXPECT_EQ(o.status, worker::Status::Unsupported) << o.message;
  EXPECT_NE(o.message.find("no ONNX 1.12 form"), std::string::npos) << o.message;
}

// OpenCV's int8 path imports only under ONNX Runtime's quantizer naming (quantizer_names) and holds uint8 as int8
// shifted by 128: the ledger's int8 cases reproduce (a broken naming would fail the import instead, a broken shift
// the values), and a quantized graph input is one refusal with its reason.
TEST(OpenCVSupport, TheInt8PathRunsUnderTheQuantizerNaming) {
  const auto& have = worker::available_backends();
  if (std::find(have.begin(), have.end(), "opencv") == have.end()) GTEST_SKIP() << "opencv backend not built";
  for (const char* id : {"opencv-qlinear-weight-zero-point-ignored", "opencv-quantize-float-to-int-overflow"}) {
    const testing::Result r = testing::run_quorum(std::string("known --check --filter ") + id, "opencv_int8");
    EXPECT_NE(r.out.find("reproduces  opencv  " + std::string(id)), std::string::npos) << r.out << r.err;
  }
  const ir::Graph g = ir::graph_from_json(
      R"({"inputs": [{"name": "x", "dtype": "uint8", "shape": [1, 4]}], "outputs": ["y"],
    "nodes": [{"name": "y", "op": "dequantize_linear", "inputs": ["x"], "outputs": ["y"],
               "attrs": {"scale": 0.5, "zero_point": 128}}]})",
      "dq");
  worker::Worker w("opencv", {}, worker::Limits{});
  std::vector<worker::NodeSupport> sup;
  ASSERT_TRUE(w.supports(g, false, sup).ok());
  ASSERT_EQ(sup.size(), 1u);
  EXPECT_FALSE(sup[0].ok);
  EXPECT_NE(sup[0].reason.find("converts a network input to float32"), std::string::npos) << sup[0].reason;
}

// A one-direction LSTM or GRU drops its direction axis by Squeeze or Reshape (exchange forms rnn_y_axis,
// rnn_y_h_axis); OpenCV's form takes the one 4.6 reads: Reshape for Y and an LSTM's Y_h (a Squeeze's axes
// are an input from opset 13). Several node names draw both forms before the avoid rule: every layer
// compiles at opsets 11, 13 and 17, but a GRU's final state: 4.6's GRU gives no Y_h, so from opset 13 the layer
// is refused with the reason, and at 11 and 12 its Squeeze is the ledger's opencv-gru-y-h-segfault.
TEST(OpenCVSupport, AOneDirectionRecurrentLayerRunsInTheFormItReads) {
  const auto& have = worker::available_backends();
  if (std::find(have.begin(), have.end(), "opencv") == have.end()) GTEST_SKIP() << "opencv backend not built";
  auto layer = [](const std::string& op, const std::string& name, int seq) {
    const int rows = op == "lstm" ? 8 : 6;
    const std::string zeros = [rows] {
      std::string z;
      for (int i = 0; i < rows * 2; ++i) z += i ? ", 0.25" : "0.5";
      return "[" + z + "]";
    }();
    const std::string bias = [rows] {
      std::string z;
      for (int i = 0; i < rows; ++i) z += i ? ", 0" : "0";
      return "[" + z + "]";
    }();
    const std::string r = std::to_string(rows);
    return ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 3, 2]}],
      "outputs": [")" + name + R"("], "initializers": [
        {"name": "w_ih", "dtype": "float32", "shape": [)" + r + R"(, 2], "data": )" + zeros + R"(},
        {"name": "w_hh", "dtype": "float32", "shape": [)" + r + R"(, 2], "data": )" + zeros + R"(},
        {"name": "b_ih", "dtype": "float32", "shape": [)" + r + R"(], "data": )" + bias + R"(},
        {"name": "b_hh", "dtype": "float32", "shape": [)" + r + R"(], "data": )" + bias + R"(}],
      "nodes": [{"name": ")" + name + R"(", "op": ")" + op + R"(", "inputs": ["x", "w_ih", "w_hh", "b_ih", "b_hh"],
                 "outputs": [")" + name + R"("], "attrs": {"hidden_size": 2, "return_sequences": )" +
                                   std::to_string(seq) + (op == "gru" ? R"(, "linear_before_reset": 1)" : "") +
                                   "}}]}",
                               op);
  };
  for (int opset : {11, 13, 17}) {
    worker::Worker w("opencv", {"opset=" + std::to_string(opset)}, worker::Limits{});
    for (const std::string op : {"lstm", "gru"})
      for (int seq : {0, 1})
        for (const std::string name : {"r", "rnn_1", "layer_2", "cell_3"}) {
          SCOPED_TRACE(op + " return_sequences " + std::to_string(seq) + " node " + name + " opset " +
                       std::to_string(opset));
          if (op == "gru" && seq == 0) {
            if (opset < 13) continue;
            std::vector<worker::NodeSupport> sup;
            ASSERT_TRUE(w.supports(layer(op, name, seq), false, sup).ok());
            ASSERT_EQ(sup.size(), 1u);
            EXPECT_FALSE(sup[0].ok);
            EXPECT_NE(sup[0].reason.find("gives Y only"), std::string::npos) << sup[0].reason;
            continue;
          }
          const worker::Outcome o = w.compile(layer(op, name, seq), CompileOptions{core::DType::F32, 1});
          EXPECT_EQ(o.status, worker::Status::Ok) << o.message;
        }
  }
}

}  // namespace
}  // namespace quorum::backends
