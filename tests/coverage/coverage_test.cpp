// Operator-level coverage of a small hand-built model set equals the values computed by hand; the
// shape-and-parameter cap, the weights, the gain a model would bring and functionality coverage.
#include "coverage/coverage.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace quorum::coverage {
namespace {

ir::Node node(const std::string& name, const std::string& op, std::vector<std::string> in) {
  ir::Node n;
  n.name = name;
  n.op = op;
  n.inputs = std::move(in);
  n.outputs = {name};
  return n;
}

// x -> relu -> a; a -> sigmoid -> b; add(a, b) -> c (the output).
ir::Graph diamond() {
  ir::Graph g;
  g.inputs.push_back({"x", {core::DType::F32, {2, 3}}});
  g.nodes = {node("a", "relu", {"x"}), node("b", "sigmoid", {"a"}), node("c", "add", {"a", "b"})};
  g.outputs = {"c"};
  for (const char* v : {"a", "b", "c"}) g.types[v] = {core::DType::F32, {2, 3}};
  return g;
}

// x -> relu -> a (the output), x of `shape`.
ir::Graph single_relu(core::Shape shape) {
  ir::Graph g;
  g.inputs.push_back({"x", {core::DType::F32, shape}});
  g.nodes = {node("a", "relu", {"x"})};
  g.outputs = {"a"};
  g.types["a"] = {core::DType::F32, shape};
  return g;
}

TEST(Coverage, ASmallModelSetGivesTheHandComputedParts) {
  ASSERT_EQ(allowed_in_degrees("relu"), std::vector<int>{1});
  ASSERT_EQ(allowed_in_degrees("add"), std::vector<int>{2});
  const double n = static_cast<double>(operator_types().size());
  Coverage c;
  c.add(model_facts(diamond(), 0));
  c.add(model_facts(single_relu({2, 3}), 1));
  // relu: in {1} of {1}; out {2 (sigmoid, add), 1} of 4; successors sigmoid, add; one shape-and-parameter vector
  // (the second model's relu has the first one's). sigmoid: in 1/1, out {1}/4, successor add, 1 vector.
  // add: in {2}/{2}, out {1} (the graph output)/4, no successor, 1 vector.
  const Parts p = c.parts();
  EXPECT_DOUBLE_EQ(p.otc, 3 / n);
  EXPECT_DOUBLE_EQ(p.idc, 3 / n);
  EXPECT_DOUBLE_EQ(p.odc, (2.0 / 4 + 1.0 / 4 + 1.0 / 4) / n);
  EXPECT_DOUBLE_EQ(p.sec, (2 / n + 1 / n + 0) / n);
  EXPECT_DOUBLE_EQ(p.spc, 3 * (1.0 / 200) / n);
  EXPECT_DOUBLE_EQ(p.olc, (p.otc + p.idc + p.odc + p.sec + p.spc) / 5);
  for (const OpCoverage& o : c.per_op()) {
    if (o.op == "relu") {
      EXPECT_EQ(o.out_seen, 2);
      EXPECT_EQ(o.succ_seen, 2);
      EXPECT_EQ(o.spc_seen, 1);
      EXPECT_DOUBLE_EQ(o.parts.olc, (1 + 1 + 0.5 + 2 / n + 1.0 / 200) / 5);
    } else if (o.op == "add") {
      EXPECT_DOUBLE_EQ(o.parts.olc, (1 + 1 + 0.25 + 0 + 1.0 / 200) / 5);
    } else if (o.op != "sigmoid") {
      EXPECT_FALSE(o.used) << o.op;
      EXPECT_EQ(o.parts.olc, 0) << o.op;
    }
  }
  EXPECT_DOUBLE_EQ(c.op_coverage("sigmoid"), (1 + 1 + 0.25 + 1 / n + 1.0 / 200) / 5);
}

TEST(Coverage, TheGainIsWhatAddingWouldBring) {
  Coverage c;
  EXPECT_EQ(c.gain(diamond()), model_facts(diamond()).size());
  c.add(model_facts(diamond(), 0));
  EXPECT_EQ(c.gain(diamond()), 0u);
  EXPECT_EQ(c.gain(single_relu({2, 3})), 1u);  // relu with out-degree 1
  EXPECT_EQ(c.gain(single_relu({4, 3})), 2u);  // and a new shape
  EXPECT_EQ(c.add(model_facts(single_relu({4, 3}), 7)).size(), 2u);
  EXPECT_EQ(c.gain(single_relu({4, 3})), 0u);
}

TEST(Coverage, ShapeAndParameterVectorsStopAtNMaxspcAndAFactKeepsItsEarliestModel) {
  CoverageOptions o;
  o.n_maxspc = 2;
  Coverage c(o);
  for (int64_t k = 1; k <= 4; ++k) c.add(model_facts(single_relu({k, 3}), 10 - k));
  for (const OpCoverage& oc : c.per_op())
    if (oc.op == "relu") {
      EXPECT_EQ(oc.spc_seen, 2);
      EXPECT_DOUBLE_EQ(oc.parts.spc, 1.0);
    }
  EXPECT_EQ(c.gain(single_relu({5, 3})), 0u);
  c.add({{"relu", FactKind::Op, "", 2}});
  for (const Fact& f : c.facts())
    if (f.kind == FactKind::Op) {
      EXPECT_EQ(f.model, 2);
    }
}

TEST(Coverage, WeightsChooseTheParts) {
  CoverageOptions o;
  parse_weights("1,0,0,0,0", o);
  Coverage c(o);
  c.add(model_facts(diamond(), 0));
  EXPECT_DOUBLE_EQ(c.parts().olc, c.parts().otc);
  for (const char* bad : {"1,1,1,1", "0,0,0,0,0", "1,1,1,1,-1", "1,1,x,1,1", "1,1,1,1,1,1"})
    EXPECT_THROW(parse_weights(bad, o), core::UserError) << bad;
}

TEST(Coverage, FunctionalityIsTheShareOfWhatABackendMapsThatItRan) {
  Coverage c;
  c.add({{"lib:a", FactKind::Maps, "relu", -1},
         {"lib:a", FactKind::Maps, "add", -1},
         {"lib:a", FactKind::Maps, "sigmoid", -1},
         {"lib:a", FactKind::Maps, "mse_loss", -1},
         {"lib:a", FactKind::Ran, "relu", 0},
         {"lib:a", FactKind::Ran, "mse_loss", 0},
         {"lib:a", FactKind::Ran, "relu", 1}});
  const auto f = c.functionality();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].backend, "lib:a");
  EXPECT_EQ(f[0].mapped, 4);
  EXPECT_EQ(f[0].invoked, 2);
  EXPECT_EQ(f[0].uncovered, (std::vector<std::string>{"add", "sigmoid"}));
  EXPECT_EQ(c.parts().otc, 0);  // backend facts are not operator coverage
}

// A backend reading exported ONNX: the exchange forms and opsets it read, beside its operators; the
// opsets of a range it never read; none of it is operator coverage.
TEST(Coverage, ExchangeFormsAndOpsetsArePerBackend) {
  Coverage c;
  const auto fresh = c.add({{"lib:a", FactKind::Maps, "dense", -1},
                            {"lib:a", FactKind::Ran, "dense", 0},
                            {"lib:a", FactKind::Opset, "12", 0},
                            {"lib:a", FactKind::Form, "dense gemm=matmul_add", 0},
                            {"lib:a", FactKind::Form, "dense operands=constant_node", 0},
                            {"lib:a", FactKind::Opset, "12", 1},
                            {"lib:a", FactKind::Opset, "16", 2},
                            {"lib:a", FactKind::Form, "dense gemm=matmul_add", 2}});
  EXPECT_EQ(fresh.size(), 6u);
  const auto f = c.functionality();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].opsets, (std::vector<int>{12, 16}));
  EXPECT_EQ(f[0].forms, (std::vector<std::string>{"dense gemm=matmul_add", "dense operands=constant_node"}));
  EXPECT_EQ(missing_opsets(f[0].opsets, 11, 17), "11, 13, 14, 15, 17");
  EXPECT_EQ(missing_opsets({11, 12}, 11, 12), "");
  EXPECT_EQ(c.parts().otc, 0);
  EXPECT_NE(coverage_text(c).find("ONNX read: opsets 12 16, 2 exchange forms: dense gemm=matmul_add;"),
            std::string::npos)
      << coverage_text(c);
  EXPECT_EQ(coverage_curve(c.facts(), {}, 10).size(), 0u);  // no operator facts: no curve
}

// What an optimizer did is counted in models: every fused fact is passed on (the store sums them), the
// earliest model kept; none of it is operator coverage.
TEST(Coverage, FusionsAreCountedInModels) {
  Coverage c;
  const auto fresh = c.add({{"lib:a", FactKind::Maps, "conv2d", -1},
                            {"lib:a", FactKind::Fused, "Conv+ReLU", 4},
                            {"lib:a", FactKind::Fused, "Conv+ReLU", 2},
                            {"lib:a", FactKind::Fused, "Gemm+Add", 3, 5}});
  EXPECT_EQ(fresh.size(), 4u);
  const auto f = c.functionality();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].fused, (std::vector<std::pair<std::string, int64_t>>{{"Conv+ReLU", 2}, {"Gemm+Add", 5}}));
  EXPECT_EQ(c.parts().otc, 0);
  EXPECT_NE(coverage_text(c).find("optimizer, 2 kinds seen: Conv+ReLU (2 models); Gemm+Add (5 models);"),
            std::string::npos)
      << coverage_text(c);
  for (const auto& x : c.facts())
    if (x.kind == FactKind::Fused && x.value == "Conv+ReLU") {
      EXPECT_EQ(x.model, 2);
    }
}

TEST(Coverage, TheCurveGrowsModelByModel) {
  std::vector<Fact> facts = model_facts(diamond(), 0);
  for (const Fact& f : model_facts(single_relu({5, 3}), 3)) facts.push_back(f);
  const auto curve = coverage_curve(facts, {}, 50);
  ASSERT_EQ(curve.size(), 4u);
  EXPECT_EQ(curve.front().first, 1);
  EXPECT_EQ(curve.back().first, 4);
  EXPECT_LT(curve.front().second.olc, curve.back().second.olc);
  EXPECT_EQ(curve[1].second.olc, curve[0].second.olc);
}


TEST(FactKinds, EachNameReadsBackAndTheNamesSortAsTheKinds) {
  const std::vector<FactKind> all = {FactKind::Form, FactKind::Fused, FactKind::In,  FactKind::Maps, FactKind::Op,
                                     FactKind::Opset, FactKind::Out,  FactKind::Ran, FactKind::Spc,  FactKind::Succ};
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(fact_kind_from_string(to_string(all[i])), all[i]);
    if (i > 0) {  // the stored rows' order
      EXPECT_LT(std::string(to_string(all[i - 1])), std::string(to_string(all[i])));
    }
  }
  EXPECT_EQ(fact_kind_from_string("a later version's kind"), std::nullopt);
  EXPECT_TRUE(backend_fact(FactKind::Maps) && backend_fact(FactKind::Fused) && !backend_fact(FactKind::Spc));
}

}  // namespace
}  // namespace quorum::coverage
