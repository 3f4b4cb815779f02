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

}  // namespace
}  // namespace quorum::backends
