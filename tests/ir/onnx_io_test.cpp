// The ONNX bridge: every catalogue operator (but the losses) round-trips through ONNX with the same
// float64 reference results; the examples too; bad input gives one clear line; conformance-suite
// node tests import and the reference reproduces their expected outputs.
#include "ir/onnx_io.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <set>

#include "core/error.h"
#include "core/fileio.h"
#include "data/values.h"
#include "ir/build.h"
#include "ir/json_io.h"
#include "ops/registry.h"
#include "ref/interpreter.h"

namespace quorum::ir {
namespace {

namespace fs = std::filesystem;
using core::DType;

// Every value named in `names` agrees: same shape, NaN where NaN, else within tol*(1+|a|).
void expect_same_values(const ref::ValueMap& a, const ref::ValueMap& b, const std::vector<std::string>& names,
                        double tol, const std::string& ctx) {
  for (const auto& v : names) {
    ASSERT_TRUE(a.count(v) && b.count(v)) << ctx << ": value '" << v << "' missing";
    const core::Tensor& x = a.at(v);
    const core::Tensor& y = b.at(v);
    ASSERT_EQ(x.shape(), y.shape()) << ctx << ": value '" << v << "'";
    double worst = 0;
    int64_t at = -1;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double p = x.get(i), q = y.get(i);
      if (std::isnan(p) && std::isnan(q)) continue;
      if (p == q) continue;
      const double d = std::abs(p - q) / (1.0 + std::abs(p));
      if (!(d <= worst)) {
        worst = std::isnan(d) ? INFINITY : d;
        at = i;
      }
    }
    EXPECT_LE(worst, tol) << ctx << ": value '" << v << "' element " << at << ": " << x.get(at) << " vs "
                          << y.get(at);
  }
}

std::vector<std::string> node_outputs(const Graph& g) {
  std::vector<std::string> v = g.outputs;
  for (const auto& n : g.nodes) v.insert(v.end(), n.outputs.begin(), n.outputs.end());
  return v;
}

// One exported → imported round trip, compared on the reference.
void round_trip(const Graph& g, const ref::ValueMap& inputs, int opset, double tol, const std::string& ctx) {
  const std::string bytes = graph_to_onnx(g, opset);
  Graph back;
  try {
    back = graph_from_onnx(bytes, ctx);
  } catch (const core::UserError& e) {
    FAIL() << ctx << ": import failed: " << e.what();
  }
  EXPECT_EQ(back.outputs, g.outputs) << ctx;
  EXPECT_EQ(back.inputs, g.inputs) << ctx;
  EXPECT_EQ(back.name, g.name) << ctx;
  for (const auto& n : g.nodes) EXPECT_NE(back.find_node(n.name), nullptr) << ctx << ": node '" << n.name << "' lost";
  const ref::ValueMap want = ref::forward(g, inputs);
  const ref::ValueMap got = ref::forward(back, inputs);
  expect_same_values(want, got, node_outputs(g), tol, ctx);
}

TEST(OnnxIo, EveryCatalogueOperatorRoundTrips) {
  int exported = 0, expected = 0;
  for (const ops::OpSpec* spec : ops::catalogue().all()) {
    if (spec->is_loss) continue;
    // ONNX's quantized operators take float32 scales and values: their models are float32 only.
    const std::vector<DType> dtypes =
        spec->is_quantized ? std::vector<DType>{DType::F32} : std::vector<DType>{DType::F64, DType::F32};
    expected += 6 * static_cast<int>(dtypes.size());
    for (int k = 0; k < 6; ++k) {
      core::Rng rng(1000 + static_cast<uint64_t>(k) * 7919 + std::hash<std::string>{}(spec->name) % 100000);
      const ops::Case c = spec->sample(rng);
      for (DType dt : dtypes) {
        core::Rng wrng = rng.derive("weights");
        const SingleNode s = single_node_graph(*spec, c, wrng, dt);
        const std::string ctx = spec->name + " case " + std::to_string(k) + " " + core::to_string(dt) + " " +
                                core::to_string(c.attrs);
        // float32 graphs carry float32 constants in decompositions (gelu's sqrt(2/pi)), hence 1e-6.
        const double tol = dt == DType::F64 ? 1e-12 : 1e-6;
        round_trip(s.graph, s.inputs, 13, tol, ctx + " opset 13");
        if ((dt == DType::F64 || spec->is_quantized) && k < 2) {
          round_trip(s.graph, s.inputs, 14, tol, ctx + " opset 14");
          round_trip(s.graph, s.inputs, 17, tol, ctx + " opset 17");
        }
        ++exported;
      }
    }
  }
  EXPECT_EQ(exported, expected);
}

// Under auto_pad SAME or VALID the catalogue ignores ceil_mode, ONNX's shape inference does not: a
// stride-3 SAME pool over 5 rows has 2 windows, not 3. Such a pool exports (with ceil_mode 0) and
// computes what the reference does.
TEST(OnnxIo, APoolWithAutoPadIgnoresCeilMode) {
  for (const std::string auto_pad : {"SAME_LOWER", "SAME_UPPER", "VALID"}) {
    ops::Case c;
    c.inputs = {core::TensorType{DType::F64, {2, 3, 5, 6}}};
    c.attrs = {{"kernel_shape", std::vector<int64_t>{1, 1}}, {"strides", std::vector<int64_t>{3, 3}},
               {"auto_pad", auto_pad}, {"ceil_mode", int64_t{1}}};
    core::Rng rng(3);
    const SingleNode s = single_node_graph(ops::op("max_pool2d"), c, rng);
    round_trip(s.graph, s.inputs, 13, 1e-12, "max_pool2d " + auto_pad);
  }
}

// GELU arrives as a pattern of five nodes in both orders exporters write: PyTorch's x*(1 + erf)*0.5 and
// Quorum's own (0.5*x)*(1 + erf), which keeps every float32 intermediate finite. Both import as one gelu
// (tests/ir/data: written with the onnx Python package's helper, checked by its checker).
TEST(OnnxIo, BothGeluPatternsImportAsOneGelu) {
  for (const std::string form : {"gelu_half_last", "gelu_half_first"}) {
    const Graph g = load_graph(std::string(QUORUM_SOURCE_DIR) + "/tests/ir/data/" + form + ".onnx");
    ASSERT_EQ(g.nodes.size(), 1u) << form;
    EXPECT_EQ(g.nodes[0].op, "gelu") << form;
    EXPECT_EQ(std::get<std::string>(g.nodes[0].attrs.at("approximate")), "none") << form;
  }
}

// Each operator carries its ONNX mapping: every non-loss operator an export hook, and each ONNX type
// in an import entry dispatches to that entry (no type claimed twice; Constant stays generic).
TEST(OnnxIo, EveryOperatorCarriesItsOnnxMapping) {
  std::set<std::string> seen;
  for (const ops::OpSpec* spec : ops::catalogue().all()) {
    EXPECT_EQ(static_cast<bool>(spec->onnx_export), !spec->is_loss) << spec->name;
    for (const auto& e : spec->onnx_import)
      for (const auto& t : e.op_types) {
        EXPECT_TRUE(seen.insert(t).second) << t;
        EXPECT_EQ(ops::catalogue().onnx_importer(t), &e.hook) << t;
      }
  }
  EXPECT_GE(seen.size(), 50u);
  EXPECT_EQ(ops::catalogue().onnx_importer("Constant"), nullptr);
  EXPECT_EQ(ops::catalogue().onnx_importer("ReduceL2"), nullptr);
}

std::string example(const std::string& name) { return std::string(QUORUM_SOURCE_DIR) + "/docs/examples/" + name; }

TEST(OnnxIo, ExamplesRoundTripAndKeepEveryIntermediate) {
  for (const char* name : {"lenet5.json", "residual_small.json"}) {
    const Graph g = load_graph(example(name));
    core::Rng rng(7);
    ref::ValueMap inputs;
    data::complete_inputs(g, inputs, rng, 0.0);
    for (int opset : {13, 17})
      round_trip(g, inputs, opset, 1e-12, std::string(name) + " opset " + std::to_string(opset));
    // Through a file: load_graph reads .onnx.
    const std::string path = (fs::temp_directory_path() / (std::string("quorum_onnx_") + name + ".onnx")).string();
    core::write_file_atomic(path, graph_to_onnx(g));
    const Graph back = load_graph(path);
    expect_same_values(ref::forward(g, inputs), ref::forward(back, inputs), node_outputs(g), 1e-12, name);
    fs::remove(path);
  }
}

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == std::string::npos; }

std::string user_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const core::UserError& e) {
    return e.what();
  }
  return "(no UserError)";
}

TEST(OnnxIo, MalformedInputGivesOneLine) {
  const std::string e1 = user_error([] { graph_from_onnx("this is not a protobuf \x01\x02\xff", "junk.onnx"); });
  EXPECT_TRUE(one_line(e1)) << e1;
  EXPECT_EQ(e1.rfind("junk.onnx: ", 0), 0u) << e1;

  const std::string path = (fs::temp_directory_path() / "quorum_bad_model.onnx").string();
  core::write_file_atomic(path, "\x08\x07\x12garbage");
  const std::string e2 = user_error([&] { load_graph(path); });
  EXPECT_TRUE(one_line(e2)) << e2;
  EXPECT_NE(e2.find(path), std::string::npos) << e2;
  fs::remove(path);

  // A truncated model.
  core::Rng rng(3);
  const SingleNode s = single_node_graph(ops::op("conv2d"), ops::op("conv2d").sample(rng), rng);
  const std::string bytes = graph_to_onnx(s.graph);
  const std::string e3 = user_error([&] { graph_from_onnx(bytes.substr(0, bytes.size() / 2), "cut.onnx"); });
  EXPECT_TRUE(one_line(e3)) << e3;
  EXPECT_EQ(e3.rfind("cut.onnx: ", 0), 0u) << e3;

  const std::string e4 = user_error([] { load_graph("model.txt"); });
  EXPECT_TRUE(one_line(e4)) << e4;
}

TEST(OnnxIo, LossesAndBadOpsetsAreRefused) {
  core::Rng rng(5);
  const SingleNode s = single_node_graph(ops::op("mse_loss"), ops::op("mse_loss").sample(rng), rng);
  const std::string e = user_error([&] { graph_to_onnx(s.graph); });
  EXPECT_TRUE(one_line(e)) << e;
  EXPECT_NE(e.find("node 'mse_loss'"), std::string::npos) << e;
  const SingleNode r = single_node_graph(ops::op("relu"), ops::op("relu").sample(rng), rng);
  EXPECT_TRUE(one_line(user_error([&] { graph_to_onnx(r.graph, 10); })));
  EXPECT_TRUE(one_line(user_error([&] { graph_to_onnx(r.graph, 18); })));
}

// ---- the ONNX conformance suite (libonnx-testdata): the whole suite runs in
// tests/conformance/conformance_test.cpp; here only the importer's error for a foreign operator.

const fs::path kNodeTests = "/usr/share/libonnx-testdata/data/node";

TEST(OnnxIo, OperatorOutsideTheCatalogueIsNamed) {
  const fs::path p = kNodeTests / "test_identity" / "model.onnx";
  if (!fs::exists(p)) GTEST_SKIP() << "libonnx-testdata is not installed";
  const std::string e = user_error([&] { load_graph(p.string()); });
  EXPECT_TRUE(one_line(e)) << e;
  EXPECT_NE(e.find(p.string() + ": node '"), std::string::npos) << e;
  EXPECT_NE(e.find("(Identity): operator not in the catalogue"), std::string::npos) << e;
}

}  // namespace
}  // namespace quorum::ir
