// The JSON model format: exact round trip, and one clear line for each kind of bad input.
#include "ir/json_io.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/fileio.h"

namespace quorum::ir {
namespace {

std::string example(const std::string& name) {
  return std::string(QUORUM_SOURCE_DIR) + "/docs/examples/" + name;
}

TEST(JsonIo, ExamplesRoundTripExactly) {
  for (const char* name : {"lenet5.json", "residual_small.json"}) {
    const Graph g = load_graph(example(name));
    const std::string once = graph_to_json(g);
    const Graph back = graph_from_json(once, "mem");
    EXPECT_EQ(graph_to_json(back), once) << name;
    EXPECT_EQ(back.nodes, g.nodes);
    EXPECT_EQ(back.inputs, g.inputs);
    EXPECT_EQ(back.outputs, g.outputs);
    EXPECT_EQ(back.types, g.types);
    ASSERT_EQ(back.initializers.size(), g.initializers.size());
    for (const auto& [k, t] : g.initializers) EXPECT_TRUE(back.initializers.at(k).bit_equal(t)) << k;
  }
}

const char* kTiny = R"({
 "inputs": [{"name": "x", "dtype": "float32", "shape": [2, 3]}],
 "outputs": ["y"],
 "initializers": [{"name": "w", "dtype": "float64", "shape": [2], "data": [0.1, "nan"]}],
 "nodes": [
  {"name": "a", "op": "leaky_relu", "inputs": ["x"], "outputs": ["h"], "attrs": {"alpha": 0.30000000000000004}},
  {"name": "b", "op": "clip", "inputs": ["h"], "outputs": [{"name": "y", "dtype": "float32", "shape": [2, 3]}],
   "attrs": {"min": "-inf", "max": 1e300}}
 ]
})";

TEST(JsonIo, DoublesAndNonFiniteValuesRoundTrip) {
  const Graph g = graph_from_json(kTiny, "tiny.json");
  EXPECT_EQ(std::get<double>(g.nodes[0].attrs.at("alpha")), 0.30000000000000004);
  EXPECT_TRUE(std::isinf(std::get<double>(g.nodes[1].attrs.at("min"))));
  EXPECT_TRUE(std::isnan(g.initializers.at("w").f64()[1]));
  const Graph back = graph_from_json(graph_to_json(g), "mem");
  EXPECT_EQ(back.nodes, g.nodes);
  EXPECT_TRUE(std::isnan(back.initializers.at("w").f64()[1]));
  EXPECT_EQ(back.initializers.at("w").f64()[0], 0.1);
}

TEST(JsonIo, Float32WeightsAreWrittenShortAndExact) {
  Graph g = graph_from_json(kTiny, "tiny.json");
  core::Tensor w(core::DType::F32, {3});
  w.f32()[0] = 0.1f;
  w.f32()[1] = 1e-45f;  // denormal
  w.f32()[2] = 3.4028235e38f;
  g.initializers["w32"] = w;
  const std::string text = graph_to_json(g);
  EXPECT_NE(text.find("[0.1,1e-45,3.4028235e+38]"), std::string::npos) << text;
  EXPECT_TRUE(graph_from_json(text, "mem").initializers.at("w32").bit_equal(w));
}

TEST(JsonIo, NodesAreSortedTopologically) {
  const char* text = R"({"inputs": [{"name": "x", "dtype": "float64", "shape": [3]}], "outputs": ["z"],
    "nodes": [{"name": "second", "op": "neg", "inputs": ["y"], "outputs": ["z"]},
              {"name": "first", "op": "relu", "inputs": ["x"], "outputs": ["y"]}]})";
  const Graph g = graph_from_json(text, "m.json");
  EXPECT_EQ(g.nodes[0].name, "first");
  EXPECT_EQ(g.nodes[1].name, "second");
}

// Each bad input: a UserError whose one line names the file, the node where there is one, and the problem.
struct BadCase {
  std::string label, text, expect1, expect2;
};

std::string with_nodes(const std::string& nodes, const std::string& extra = "") {
  return R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [2, 3]}], "outputs": ["y"], )" + extra +
         R"("nodes": )" + nodes + "}";
}

TEST(JsonIo, BadInputsGiveOneClearLine) {
  const std::vector<BadCase> cases = {
      {"malformed", "{\"inputs\": [", "bad.json: malformed JSON", "parse error"},
      {"not object", "[1,2]", "bad.json", "must be a JSON object"},
      {"missing field", R"({"inputs": [], "outputs": []})", "bad.json", "missing field 'nodes'"},
      {"unknown op", with_nodes(R"([{"name": "n1", "op": "frobnicate", "inputs": ["x"], "outputs": ["y"]}])"),
       "node 'n1' (frobnicate)", "unknown operator 'frobnicate'"},
      {"bad attr value",
       with_nodes(R"([{"name": "n1", "op": "lrn", "inputs": ["x"], "outputs": ["y"], "attrs": {"size": 0}}])"),
       "node 'n1' (lrn)", "attribute 'size' value 0 outside"},
      {"unknown attr",
       with_nodes(R"([{"name": "n1", "op": "relu", "inputs": ["x"], "outputs": ["y"], "attrs": {"slope": 1}}])"),
       "node 'n1' (relu)", "unknown attribute 'slope'"},
      {"attr kind",
       with_nodes(R"([{"name": "n1", "op": "gelu", "inputs": ["x"], "outputs": ["y"], "attrs": {"approximate": 3}}])"),
       "node 'n1' (gelu)", "must be string"},
      {"shape mismatch",
       with_nodes(R"([{"name": "n1", "op": "relu", "inputs": ["x"],
                       "outputs": [{"name": "y", "dtype": "float32", "shape": [3, 2]}]}])"),
       "node 'n1' (relu)", "declared float32[3,2] but the shape rule gives float32[2,3]"},
      {"arity", with_nodes(R"([{"name": "n1", "op": "relu", "inputs": ["x", "x"], "outputs": ["y"]}])"),
       "node 'n1' (relu)", "parameter inputs"},
      {"undefined input", with_nodes(R"([{"name": "n1", "op": "relu", "inputs": ["nope"], "outputs": ["y"]}])"),
       "node 'n1' (relu)", "input 'nope' is not defined"},
      {"cycle",
       with_nodes(R"([{"name": "n1", "op": "relu", "inputs": ["z"], "outputs": ["y"]},
                      {"name": "n2", "op": "neg", "inputs": ["y"], "outputs": ["z"]}])"),
       "node 'n1' (relu)", "cycle"},
      {"duplicate value",
       with_nodes(R"([{"name": "n1", "op": "relu", "inputs": ["x"], "outputs": ["x"]}])"), "bad.json",
       "value 'x' is defined twice"},
      {"missing output", with_nodes(R"([{"name": "n1", "op": "relu", "inputs": ["x"], "outputs": ["h"]}])"),
       "bad.json", "graph output 'y' is not defined"},
      {"bad dtype", R"({"inputs": [{"name": "x", "dtype": "float16", "shape": [2]}], "outputs": [], "nodes": []})",
       "graph input 'x'", "unknown dtype 'float16'"},
      {"bad shape", R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [-2]}], "outputs": [], "nodes": []})",
       "graph input 'x'", "non-negative integers"},
      {"weight count",
       with_nodes(R"([{"name": "n1", "op": "relu", "inputs": ["x"], "outputs": ["y"]}])",
                  R"("initializers": [{"name": "w", "dtype": "float32", "shape": [2, 2], "data": [1, 2, 3]}], )"),
       "initializer 'w'", "has 3 values, shape [2,2] needs 4"},
  };
  for (const auto& c : cases) {
    try {
      graph_from_json(c.text, "bad.json");
      ADD_FAILURE() << c.label << ": accepted";
    } catch (const core::UserError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.find('\n'), std::string::npos) << c.label << ": " << msg;
      EXPECT_EQ(msg.rfind("bad.json", 0), 0u) << c.label << ": " << msg;
      EXPECT_NE(msg.find(c.expect1), std::string::npos) << c.label << ": " << msg;
      EXPECT_NE(msg.find(c.expect2), std::string::npos) << c.label << ": " << msg;
    }
  }
}

}  // namespace
}  // namespace quorum::ir

namespace quorum::ir {
namespace {

TEST(JsonIo, TheDocumentedExampleLoads) {
  const std::string doc = core::read_file(std::string(QUORUM_SOURCE_DIR) + "/docs/model-format.md");
  const auto start = doc.find("```json\n");
  ASSERT_NE(start, std::string::npos);
  const auto end = doc.find("```", start + 8);
  const Graph g = graph_from_json(doc.substr(start + 8, end - start - 8), "docs/model-format.md");
  EXPECT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.types.at("y").shape, (core::Shape{1, 2}));
}

}  // namespace
}  // namespace quorum::ir
