// The quantized twins in the QDQ exchange form (DequantizeLinear -> the float operator -> QuantizeLinear) on
// OpenCV 4.6: each runs and agrees with the float64 kernel within the ±1 of float32 requantization. 4.6 takes every
// node output named "...quantized" for an int8 value; the exporter's "<node>/x0_dequantized" made the float layer
// after the Dequantize fail (pooling_layer.cpp:666 'src.type() == 5'), which dequantized_names renames away.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backends/opencv/quantizer_names.h"
#include "ir/json_io.h"
#include "support/run_op.h"
#include "worker/supervisor.h"

namespace quorum::backends {
namespace {

struct Twin {
  const char* op;
  const char* attrs;  // besides x_scales, x_zero_points, y_scale, y_zero_point, to
  int inputs;
};

ir::Graph twin_model(const Twin& t) {
  // Two quantized values of x (a twin's two operands are distinct values: the exporter looks an operand's scale
  // up by its value).
  std::string nodes = R"({"name": "q", "op": "quantize_linear", "inputs": ["x"], "outputs": ["xq"],
                          "attrs": {"scale": 0.03125, "zero_point": 60, "to": "int8"}},
                         {"name": "r", "op": "quantize_linear", "inputs": ["x"], "outputs": ["xr"],
                          "attrs": {"scale": 0.0625, "zero_point": -5, "to": "int8"}})";
  std::string ins = R"("xq")", scales = "0.0957", zps = "11";
  if (t.inputs == 2) ins += R"(, "xr")", scales += ", 0.05", zps += ", -3";
  nodes += R"(, {"name": "y", "op": ")" + std::string(t.op) + R"(", "inputs": [)" + ins +
           R"(], "outputs": ["y"], "attrs": {)" + t.attrs + R"("x_scales": [)" + scales + R"(], "x_zero_points": [)" +
           zps + R"(], "y_scale": 0.0207, "y_zero_point": 0, "to": "int8"}})";
  return ir::graph_from_json(
      R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 2, 4, 4]}], "outputs": ["y"], "nodes": [)" + nodes +
          "]}",
      t.op);
}

TEST(OpenCVQdq, TheTwinsRunInTheQdqForm) {
  const auto& have = worker::available_backends();
  if (std::find(have.begin(), have.end(), "opencv") == have.end()) GTEST_SKIP() << "opencv backend not built";
  worker::Worker w("opencv", {"form=qlinear=qdq"}, worker::Limits{});
  core::Tensor x(core::DType::F32, {1, 2, 4, 4});
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, (static_cast<double>(i % 16) - 8) * 0.3 + 0.1 * (i / 16));
  for (const Twin& t : {Twin{"qlinear_add", "", 2}, Twin{"qlinear_mul", "", 2},
                        Twin{"qlinear_avg_pool2d", R"("kernel_shape": [2, 1], "pads": [1, 0, 1, 0], )", 1},
                        Twin{"qlinear_global_avg_pool", "", 1}, Twin{"qlinear_concat", R"("axis": 1, )", 2},
                        Twin{"qlinear_leaky_relu", R"("alpha": 0.08, )", 1}, Twin{"qlinear_sigmoid", "", 1},
                        Twin{"qlinear_max_pool2d", R"("kernel_shape": [2, 2], "pads": [1, 0, 1, 0], )", 1}}) {
    SCOPED_TRACE(t.op);
    const ir::Graph g = twin_model(t);
    ASSERT_EQ(w.compile(g, CompileOptions{core::DType::F32, 1}).status, worker::Status::Ok);
    std::map<std::string, std::vector<std::string>> lowering;
    ASSERT_EQ(w.lowering(lowering).status, worker::Status::Ok);
    const auto& l = lowering.at("y");
    EXPECT_TRUE(std::any_of(l.begin(), l.end(), [](const std::string& s) {
      return s.rfind("onnx form ", 0) == 0 && s.find("qlinear=qdq") != std::string::npos;
    }));
    ValueMap out;
    const worker::Outcome o = w.forward({{"x", x}}, true, out);
    ASSERT_EQ(o.status, worker::Status::Ok) << o.message;
    std::vector<core::Tensor> operands;  // the reference kernels take their operands in float64
    for (int k = 0; k < t.inputs; ++k) {
      const std::vector<double> v = testing::run_op("quantize_linear", {x.to(core::DType::F64)}, g.nodes[k].attrs);
      operands.emplace_back(core::DType::F64, x.shape());
      for (int64_t i = 0; i < x.numel(); ++i) operands.back().set(i, v[i]);
    }
    const std::vector<double> want = testing::run_op(t.op, operands, g.nodes[2].attrs);
    const std::vector<double> got = out.at("y").values();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_LE(std::abs(got[i] - want[i]), 1.0) << "at " << i;
  }
}

TEST(OpenCVQdq, DequantizedNamesKeepTheLength) {
  const std::string in = std::string("\x0a\x1f") + "qlinear_add_1/x0_dequantized" + "\x12\x02";
  const std::string out = opencv::dequantized_names(in);
  EXPECT_EQ(out, std::string("\x0a\x1f") + "qlinear_add_1/x0_dequant_out" + "\x12\x02");
  EXPECT_EQ(opencv::dequantized_names("a_dequantized_dequantized"), "a_dequant_out_dequant_out");
}

}  // namespace
}  // namespace quorum::backends
