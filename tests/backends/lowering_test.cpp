// Each library backend says which of its library's operations a node ran
// (backends::Session::lowering): findings carry the list, and known-issue ledger entries name the
// operation at fault. The names are the libraries' own.
#include <gtest/gtest.h>

#include <algorithm>

#include "ir/json_io.h"
#include "worker/supervisor.h"

namespace quorum::backends {
namespace {

bool built(const std::string& name) {
  const auto& have = worker::available_backends();
  return std::find(have.begin(), have.end(), name) != have.end();
}

// a, b -> maximum -> relu
ir::Graph model() {
  return ir::graph_from_json(R"({"inputs": [{"name": "a", "dtype": "float32", "shape": [1, 3]},
                                             {"name": "b", "dtype": "float32", "shape": [1, 3]}],
    "outputs": ["r"],
    "nodes": [{"name": "m", "op": "maximum", "inputs": ["a", "b"], "outputs": ["m"]},
              {"name": "r", "op": "relu", "inputs": ["m"], "outputs": ["r"]}]})",
                             "lowering");
}

std::map<std::string, std::vector<std::string>> lowering_of(const std::string& backend, bool train) {
  worker::Worker w(backend, {}, worker::Limits{});
  EXPECT_TRUE(w.compile(model(), CompileOptions{core::DType::F32, 1}).ok());
  const ValueMap in{{"a", core::Tensor::f64({1, 3}, {1, -2, 3}).to(core::DType::F32)},
                    {"b", core::Tensor::f64({1, 3}, {0, 1, 4}).to(core::DType::F32)}};
  if (train) {
    TrainRequest req{in, core::Tensor::f64({1, 3}, {0, 0, 0}).to(core::DType::F32), "mse_loss", {}, 0.01};
    TrainResult r;
    EXPECT_TRUE(w.train(req, r).ok());
  } else {
    ValueMap out;
    EXPECT_TRUE(w.forward(in, true, out).ok());
  }
  std::map<std::string, std::vector<std::string>> ops;
  EXPECT_TRUE(w.lowering(ops).ok());
  return ops;
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(Lowering, OneDNNNamesEachPrimitiveWithItsAlgorithmForwardAndBackward) {
  if (!built("onednn")) GTEST_SKIP() << "onednn backend not built";
  const auto ops = lowering_of("onednn", true);
  ASSERT_TRUE(ops.count("m"));
  EXPECT_TRUE(has(ops.at("m"), "binary_max"));
  EXPECT_TRUE(has(ops.at("m"), "binary_ge"));  // the backward's comparison mask
  ASSERT_TRUE(ops.count("r"));
  EXPECT_TRUE(has(ops.at("r"), "eltwise_relu"));
  EXPECT_TRUE(has(ops.at("r"), "eltwise_relu_backward"));
}

TEST(Lowering, XNNPACKNamesItsSubgraphDefinitions) {
  if (!built("xnnpack")) GTEST_SKIP() << "xnnpack backend not built";
  const auto ops = lowering_of("xnnpack", false);
  ASSERT_TRUE(ops.count("m"));
  EXPECT_EQ(ops.at("m"), (std::vector<std::string>{"xnn_define_maximum2"}));
  ASSERT_TRUE(ops.count("r"));
  EXPECT_EQ(ops.at("r"), (std::vector<std::string>{"xnn_define_clamp"}));
}

TEST(Lowering, ArmNNNamesItsLayers) {
  if (!built("armnn")) GTEST_SKIP() << "armnn backend not built";
  const auto ops = lowering_of("armnn", false);
  ASSERT_TRUE(ops.count("r"));
  EXPECT_TRUE(has(ops.at("r"), "activation ReLu")) << ops.at("r").size();
}

TEST(Lowering, OpenCVNamesTheLayerTypeOfEachNode) {
  if (!built("opencv")) GTEST_SKIP() << "opencv backend not built";
  const auto ops = lowering_of("opencv", false);
  ASSERT_TRUE(ops.count("r"));
  // The layer type, then the opset the model was read at (its seeded exchange form, 11 to 17); relu
  // has no alternative forms, so no "onnx form" entry.
  const auto& r = ops.at("r");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0], "ReLU");
  EXPECT_EQ(r[1].rfind("onnx opset 1", 0), 0u) << r[1];
}

}  // namespace
}  // namespace quorum::backends
