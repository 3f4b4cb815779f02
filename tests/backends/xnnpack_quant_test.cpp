// XNNPACK's quantized path (src/backends/xnnpack/lower_quant.cpp): quantize_linear and dequantize_linear as
// xnn_define_convert, qlinear_conv2d and qlinear_matmul as qs8/qu8 convolutions and fully connected layers. The
// library's results agree exactly with the reference's integer arithmetic on hand-built models (ties of the
// requantization included), and what XNNPACK 2022-02 cannot take is refused with the measured reason.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "backends/xnnpack/lower.h"
#include "core/fileio.h"
#include "ir/json_io.h"
#include "ref/interpreter.h"
#include "run_quorum.h"
#include "worker/supervisor.h"

namespace quorum::backends::xnnpack {
namespace {

// x [1, 2, 5, 5] -> quantize (int8) -> qlinear_conv2d (int8, 3x3, pad 1, int32 bias) -> q2, read by a
// qlinear_matmul under another scale and zero point than the convolution wrote (so it crosses the host), and
// dequantized. The multipliers 0.25 * 0.5 / 0.25 = 0.5 and 0.5 * 0.25 / 0.0625 = 2 make ties of the rounding.
const char* kInt8 = R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 2, 5, 5]}],
  "outputs": ["f", "m"],
  "initializers": [{"name": "w", "dtype": "int8", "shape": [3, 2, 3, 3], "data": [
      1, -2, 3, 0, 5, -1, 2, 2, -3, 4, 0, 1, -1, 1, 2, -5, 3, 1, 127, -128, 0, 1, 1, 1, -7, 9, 2,
      -1, 0, 0, 2, 3, -4, 5, 6, -6, 0, 0, 1, 1, -1, -1, 2, 2, 3, 3, -3, -3, 8, -8, 1, 0, 0, 1]},
    {"name": "b", "dtype": "int32", "shape": [3], "data": [7, -300, 0]},
    {"name": "mw", "dtype": "int8", "shape": [5, 4], "data": [
      1, -1, 2, 0, 3, 5, -2, 1, 0, 0, 7, -7, 1, 2, 3, 4, -128, 127, 0, 1]}],
  "nodes": [
    {"name": "q", "op": "quantize_linear", "inputs": ["x"], "outputs": ["q"],
     "attrs": {"scale": 0.25, "zero_point": -3, "to": "int8"}},
    {"name": "c", "op": "qlinear_conv2d", "inputs": ["q", "w", "b"], "outputs": ["c"],
     "attrs": {"out_channels": 3, "kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "bias": 1,
               "x_scale": 0.25, "x_zero_point": -3, "w_scale": 0.5, "w_zero_point": 0, "w_type": "int8",
               "y_scale": 0.25, "y_zero_point": 5, "to": "int8"}},
    {"name": "m", "op": "qlinear_matmul", "inputs": ["c", "mw"], "outputs": ["m"],
     "attrs": {"units": 4, "a_scale": 0.5, "a_zero_point": 1, "w_scale": 0.25, "w_zero_point": 0, "w_type": "int8",
               "y_scale": 0.0625, "y_zero_point": -2, "to": "int8"}},
    {"name": "f", "op": "dequantize_linear", "inputs": ["c"], "outputs": ["f"],
     "attrs": {"scale": 0.25, "zero_point": 5}}]})";

// The uint8 form: qu8 filters keep their zero point (131 here); a multiplier that is no power of two.
const char* kUint8 = R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [3, 6]}],
  "outputs": ["f"],
  "initializers": [{"name": "w", "dtype": "uint8", "shape": [6, 2], "data": [
      131, 0, 255, 130, 129, 200, 131, 131, 17, 140, 250, 3]}],
  "nodes": [
    {"name": "q", "op": "quantize_linear", "inputs": ["x"], "outputs": ["q"],
     "attrs": {"scale": 0.125, "zero_point": 128, "to": "uint8"}},
    {"name": "m", "op": "qlinear_matmul", "inputs": ["q", "w"], "outputs": ["m"],
     "attrs": {"units": 2, "a_scale": 0.125, "a_zero_point": 128, "w_scale": 0.0078125, "w_zero_point": 131,
               "w_type": "uint8", "y_scale": 0.0377, "y_zero_point": 100, "to": "uint8"}},
    {"name": "f", "op": "dequantize_linear", "inputs": ["m"], "outputs": ["f"],
     "attrs": {"scale": 0.0377, "zero_point": 100}}]})";

bool have_xnnpack() {
  const auto& have = worker::available_backends();
  return std::find(have.begin(), have.end(), "xnnpack") != have.end();
}

// Inputs on the quantization grid and half-way between its points (ties of quantize_linear).
ValueMap inputs(const ir::Graph& g, double step) {
  const ir::ValueInfo& in = g.inputs.at(0);
  std::vector<double> x(static_cast<size_t>(core::numel(in.type.shape)));
  for (size_t i = 0; i < x.size(); ++i) x[i] = (static_cast<double>(i % 23) - 11) * step * (i % 2 ? 0.5 : 1.0) * 3;
  return ValueMap{{in.name, core::Tensor::f64(in.type.shape, x).to(core::DType::F32)}};
}

using Ops = std::map<std::string, std::vector<std::string>>;

// Every node output of `g` from the library equals the reference's, element by element (a float output the
// reference's value rounded to float32: one rounding of (x - zero_point) * scale); with `saturates`, some quantized
// value reaches an end of its type.
void expect_exact(const char* json, double step, bool saturates) {
  const ir::Graph g = ir::graph_from_json(json, "xnnpack quant");
  const ValueMap in = inputs(g, step);
  const ValueMap want = ref::forward(g, in);
  worker::Worker w("xnnpack", {}, worker::Limits{});
  const worker::Outcome compiled = w.compile(g, CompileOptions{core::DType::F32, 1});
  ASSERT_TRUE(compiled.ok()) << compiled.str();
  ValueMap got;
  const worker::Outcome ran = w.forward(in, true, got);
  ASSERT_TRUE(ran.ok()) << ran.str();
  int saturated = 0;
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs) {
      ASSERT_TRUE(got.count(o)) << o;
      EXPECT_EQ(got.at(o).dtype(), g.types.at(o).dtype) << o;
      const std::vector<double> a = got.at(o).values(), b = want.at(o).values();
      ASSERT_EQ(a.size(), b.size()) << o;
      for (size_t i = 0; i < a.size(); ++i) {
        const double want = core::is_quantized(g.types.at(o).dtype) ? b[i] : static_cast<float>(b[i]);
        EXPECT_EQ(a[i], want) << o << "[" << i << "]";
        if (core::is_quantized(g.types.at(o).dtype)) {
          const auto [lo, hi] = core::dtype_range(g.types.at(o).dtype);
          saturated += a[i] == lo || a[i] == hi;
        }
      }
    }
  if (saturates) {
    EXPECT_GT(saturated, 0) << "some value reaches an end of its type";
  }
  Ops ops;
  ASSERT_TRUE(w.lowering(ops).ok());
  for (const auto& n : g.nodes) EXPECT_FALSE(ops[n.name].empty()) << n.name;
}

TEST(XnnpackQuant, Int8ModelAgreesExactly) {
  if (!have_xnnpack()) GTEST_SKIP() << "xnnpack backend not built";
  expect_exact(kInt8, 0.25, true);
}

TEST(XnnpackQuant, Uint8ModelWithWeightZeroPointAgreesExactly) {
  if (!have_xnnpack()) GTEST_SKIP() << "xnnpack backend not built";
  expect_exact(kUint8, 0.125, false);
}

// The lowering: one convert per quantize/dequantize, the convolution with a quantized filter and a qint32 bias of
// scale x_scale * w_scale; the matmul reads the convolution's output under its own quantization in a new segment.
TEST(XnnpackQuant, LoweringDefinesQuantizedValues) {
  const ir::Graph g = ir::graph_from_json(kInt8, "xnnpack quant");
  NullSink null;
  std::vector<std::string> lines;
  const std::unique_ptr<Sink> sink = recording_sink(null, lines);
  ASSERT_TRUE(lower(g, *sink).ok);
  auto has = [&](const std::string& part) {
    return std::any_of(lines.begin(), lines.end(),
                       [&](const std::string& l) { return l.find(part) != std::string::npos; });
  };
  EXPECT_TRUE(has("xnn_define_convert"));
  EXPECT_TRUE(has("qint8 scale 0x1p-1f zero point 0 (filter 'w' OHWI)"));
  EXPECT_TRUE(has("qint32 scale 0x1p-3f zero point 0 (bias 'b')"));
  EXPECT_TRUE(has("external_input v0 'c' plain [1,3,5,5] external 0 qint8 scale 0x1p-1f zero point 1"));
  EXPECT_EQ(std::count(lines.begin(), lines.end(), "begin_subgraph"), 3)
      << "the quantize; the convolution (channels-last); the matmul and the dequantize";
}

// What XNNPACK 2022-02 cannot take is refused with the reason measured against the library.
TEST(XnnpackQuant, RefusalsSayWhy) {
  struct Case {
    const char* what;
    std::map<std::string, core::AttrValue> attrs;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {"int8 weight zero point", {{"w_zero_point", int64_t{2}}}, "int8 (qs8) filters have no zero point"},
      {"uint8 weights for an int8 input",
       {{"w_type", std::string("uint8")}, {"w_zero_point", int64_t{0}}},
       "no quantized kernel for a int8 input with uint8 weights"},
      {"output type",
       {{"to", std::string("uint8")}, {"y_zero_point", int64_t{0}}},
       "quantized products write the input's type"},
      {"multiplier 256", {{"a_scale", 512.0}, {"y_scale", 0.5}}, "is not below 256"},
      {"multiplier below 2^-32", {{"y_scale", 1e10}}, "below 2^-32"},
  };
  for (const Case& c : cases) {
    ir::Graph g = ir::graph_from_json(kInt8, "xnnpack quant");
    ir::Node& m = g.nodes.at(2);
    for (const auto& [k, v] : c.attrs) m.attrs[k] = v;
    if (c.attrs.count("w_type")) {
      core::Tensor& w = g.initializers.at("mw");
      w = w.to(core::DType::U8);
      g.types.at("mw").dtype = core::DType::U8;
    }
    if (c.attrs.count("to")) g.types.at("m").dtype = core::DType::U8;
    const Support s = supports(g, m);
    EXPECT_FALSE(s.ok) << c.what;
    EXPECT_NE(s.reason.find(c.reason), std::string::npos) << c.what << ": " << s.reason;
  }
  const ir::Graph g = ir::graph_from_json(kInt8, "xnnpack quant");
  for (const auto& n : g.nodes) EXPECT_TRUE(supports(g, n).ok) << n.name << ": " << supports(g, n).reason;
}

// The reproducer writer prints the same quantized calls as C++: the ledger case of quantize_linear's flushed
// reciprocal, through `quorum known --check --out` and `quorum repro`, builds against the installed library and
// shows the difference (exit 1) with its qtensor / xnn_define_convert calls.
TEST(XnnpackQuant, ReproducerShowsTheQuantizedFinding) {
  if (!have_xnnpack()) GTEST_SKIP() << "xnnpack backend not built";
  namespace fs = std::filesystem;
  const std::string id = "xnnpack-quantize-reciprocal-scale-flushed";
  const fs::path out = testing::scratch("xnnpack_quant") / "repro";
  fs::remove_all(out);
  const auto k = testing::run_quorum("known --check --backends xnnpack --filter " + id + " --out " + out.string(),
                                     "xnnpack_quant_known");
  ASSERT_EQ(k.code, 0) << k.out << k.err;
  fs::path bundle;
  for (const auto& e : fs::directory_iterator(out / "bundles")) bundle = e.path();
  ASSERT_FALSE(bundle.empty()) << k.out;
  const auto r =
      testing::run_quorum("repro " + bundle.string() + " -o " + (out / "cpp").string(), "xnnpack_quant_repro");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::string src = core::read_file((out / "cpp" / "repro.cpp").string());
  EXPECT_NE(src.find("qtensor(sg, xnn_datatype_qint8, /*zero_point*/ -69"), std::string::npos) << src;
  EXPECT_NE(src.find("xnn_define_convert"), std::string::npos);
  const std::string log = (out / "cpp" / "run.log").string();
  const std::string cmd = "cd '" + (out / "cpp").string() +
                          "' && g++ -std=c++17 -O1 repro.cpp -o repro -lXNNPACK -lpthreadpool && ./repro >'" + log +
                          "' 2>&1";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  const std::string ran = core::read_file(log);
  EXPECT_EQ(WEXITSTATUS(status), 1) << ran;
  EXPECT_NE(ran.find("expected -70, actual -69"), std::string::npos) << ran;
  fs::remove_all(out);
}

}  // namespace
}  // namespace quorum::backends::xnnpack
