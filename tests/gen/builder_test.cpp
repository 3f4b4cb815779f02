// The shared builder: parameters that fit, reshaping to a rank and to a shape, merges, output
// layers, rollback; the block corpus and the random structures it fills.
#include "gen/builder.h"

#include <gtest/gtest.h>

#include <set>

#include "gen/corpus.h"
#include "gen/dag.h"
#include "gen/params.h"
#include "ops/registry.h"

namespace quorum::gen {
namespace {

void expect_valid(Model m, core::Rng& rng) {
  ir::Graph g = materialize(std::move(m), rng);
  EXPECT_NO_THROW(ir::validate(g, "test"));
}

TEST(Params, AcceptedRanksComeFromTheShapeRules) {
  EXPECT_EQ(accepted_ranks(ops::op("conv2d")), (std::vector<int>{4}));
  EXPECT_EQ(accepted_ranks(ops::op("conv1d")), (std::vector<int>{3}));
  EXPECT_EQ(accepted_ranks(ops::op("conv3d")), (std::vector<int>{5}));
  EXPECT_EQ(accepted_ranks(ops::op("lstm")), (std::vector<int>{3}));
  EXPECT_EQ(accepted_ranks(ops::op("lrn")), (std::vector<int>{4}));
  EXPECT_EQ(accepted_ranks(ops::op("dense")), (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(accepted_ranks(ops::op("relu")), (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_TRUE(accepted_ranks(ops::op("add")).empty());
}

TEST(Params, KeepSpatialGivesTheSameSize) {
  core::Rng rng(3);
  for (const char* op : {"conv2d", "conv1d", "conv_transpose2d", "max_pool2d", "avg_pool1d"}) {
    const ops::OpSpec& spec = ops::op(op);
    const int sr = spatial_rank(spec);
    Shape x{2, 3};
    for (int i = 0; i < sr; ++i) x.push_back(7);
    for (int t = 0; t < 50; ++t) {
      Want w;
      w.keep_spatial = true;
      const Attrs a = ops::canonical_attrs(spec, draw_attrs(spec, {{core::DType::F32, x}}, rng, Limits{}, w));
      const Shape y = spec.infer({{core::DType::F32, x}}, a).outputs[0].shape;
      EXPECT_EQ(Shape(y.begin() + 2, y.end()), Shape(x.begin() + 2, x.end())) << op << " " << core::to_string(a);
    }
  }
}

TEST(Params, RepairFitsAWindowToATinyInput) {
  const ops::OpSpec& conv = ops::op("conv2d");
  Attrs a = ops::canonical_attrs(conv, {{"kernel_shape", std::vector<int64_t>{5, 5}},
                                        {"dilations", std::vector<int64_t>{2, 2}},
                                        {"out_channels", int64_t{4}},
                                        {"group", int64_t{2}}});
  const std::vector<TensorType> in{{core::DType::F32, {1, 3, 2, 3}}};
  EXPECT_THROW(conv.infer(in, a), core::OpError);
  ASSERT_TRUE(repair_attrs(conv, in, a));
  EXPECT_NO_THROW(conv.infer(in, a));
}

TEST(Builder, PlaceFitsEveryLayerOperatorOnAnImage) {
  for (const ops::OpSpec* s : ops::catalogue().all()) {
    if (s->is_loss || s->is_quantized) continue;
    core::Rng rng(7);
    Builder b(rng);
    const Vid x = b.input({2, 3, 8, 8});
    std::vector<Vid> in{x};
    if (s->multi_input()) in.push_back(b.add("tanh", {x}));
    const auto v = b.layer(*s, in);
    ASSERT_TRUE(v.has_value()) << s->name;
    b.output(*v);
    expect_valid(b.finish("t", {}), rng);
  }
}

TEST(Builder, ToShapeReachesAnyShape) {
  core::Rng rng(11);
  for (int t = 0; t < 300; ++t) {
    Builder b(rng);
    auto random_shape = [&] {
      Shape s;
      for (int64_t r = rng.randint(1, 5), i = 0; i < r; ++i) s.push_back(rng.randint(1, 6));
      return s;
    };
    const Shape from = random_shape(), to = random_shape();
    const Vid y = b.to_shape(b.input(from), to);
    EXPECT_EQ(b.shape(y), to) << core::to_string(from) << " -> " << core::to_string(to);
    b.output(y);
    expect_valid(b.finish("t", {}), rng);
  }
}

TEST(Builder, ToRankKeepsTheElements) {
  core::Rng rng(12);
  for (int from = 1; from <= 5; ++from)
    for (int to = 1; to <= 5; ++to) {
      Builder b(rng);
      Shape x{2, 3, 4, 5, 6};
      x.resize(static_cast<size_t>(from));
      const Vid y = b.to_rank(b.input(x), to);
      EXPECT_EQ(b.rank(y), to);
      EXPECT_EQ(core::numel(b.shape(y)), core::numel(x));
    }
}

TEST(Builder, MergesBringInputsToOneShape) {
  core::Rng rng(13);
  for (const char* op : {"add", "sub", "mul", "div", "maximum", "minimum", "sum", "concat", "matmul"}) {
    for (int t = 0; t < 20; ++t) {
      Builder b(rng);
      const Vid x = b.input({2, 3, 5, 4});
      const Vid y = b.add("reshape", {b.add("relu", {x})}, {{"shape", std::vector<int64_t>{2, 60}}});
      const Vid z = b.input({1, 7}, "z");
      const bool binary = ops::op(op).max_inputs == 2;
      auto v = b.layer(ops::op(op), binary ? std::vector<Vid>{x, z} : std::vector<Vid>{x, y, z});
      ASSERT_TRUE(v.has_value()) << op;
      b.output(*v);
      expect_valid(b.finish("t", {}), rng);
    }
  }
}

TEST(Builder, HeadShapesTheOutputForTheTask) {
  core::Rng rng(14);
  data::DataSpec cls;
  cls.task = data::Task::Classification;
  cls.classes = 7;
  cls.target = {2, 7};
  data::DataSpec reg;
  reg.task = data::Task::Regression;
  reg.target = {2, 3, 2};
  for (const data::DataSpec& d : {cls, reg})
    for (const Shape& x : {Shape{2, 3, 8, 8}, Shape{3, 5}, Shape{1, 1}, Shape{2, 9, 2}}) {
      Builder b(rng);
      const Vid y = b.head(b.input(x), d);
      EXPECT_EQ(b.shape(y), d.target);
      b.output(y);
      expect_valid(b.finish("t", d), rng);
    }
}

TEST(Builder, RollbackLeavesNothingBehind) {
  core::Rng rng(15);
  Builder b(rng);
  const Vid x = b.input({2, 3, 8, 8});
  const auto m = b.mark();
  b.add("relu", {b.to_rank(x, 2)});
  b.constant({3}, ops::Init::Zeros, "c");
  b.rollback(m);
  EXPECT_EQ(b.node_count(), 0u);
  b.output(b.add("tanh", {x}));
  const Model model = b.finish("t", {});
  EXPECT_TRUE(model.pending.empty());
  EXPECT_EQ(model.graph.types.size(), 1u);
  EXPECT_EQ(model.graph.nodes[0].name, "tanh_0");
}

TEST(Builder, VulnerableOperandsAreGuarded) {
  core::Rng rng(16);
  Builder b(rng);
  b.set_guard_probability(1.0);
  const Vid x = b.input({2, 4});
  const auto v = b.layer(ops::op("log"), {x});
  ASSERT_TRUE(v);
  b.output(*v);
  const Model m = b.finish("t", {});
  ASSERT_EQ(m.graph.nodes.size(), 2u);
  EXPECT_EQ(m.graph.nodes[0].op, "clip");
  EXPECT_GT(core::attr_f(m.graph.nodes[0].attrs, "min"), 0.0);
}

TEST(Corpus, EveryBlockInstantiatesAtEveryAllowedInDegree) {
  for (const Block& block : block_corpus()) {
    const int hi = block.max_in < 0 ? 4 : block.max_in;
    for (int k = block.min_in; k <= hi; ++k) {
      core::Rng rng(17);
      Builder b(rng);
      const Vid x = b.input({2, 3, 8, 8});
      std::vector<Vid> in;
      for (int i = 0; i < k; ++i) in.push_back(i == 0 ? x : b.add("sigmoid", {in.back()}));
      const auto v = instantiate(block, b, in);
      ASSERT_TRUE(v.has_value()) << block.name << " in-degree " << k;
      b.output(*v);
      expect_valid(b.finish("t", {}), rng);
    }
  }
}

TEST(Corpus, HasTheSubgraphsOfTheIssue) {
  std::set<std::string> names;
  for (const Block& b : block_corpus()) names.insert(b.name);
  for (const char* n : {"conv+bias+relu", "conv+bn+relu", "conv+relu+pow+concat", "conv+conv+add+add",
                        "multi-scale concat", "matmul+add+gelu"})
    EXPECT_TRUE(names.count(n)) << n;
  // The paper's inner edges for its two four-operator subgraphs.
  for (const Block& b : block_corpus()) {
    if (b.name == "conv+relu+pow+concat") {
      EXPECT_EQ(b.edges(), (std::vector<std::pair<int, int>>{{0, 1}, {1, 3}, {2, 3}}));
    }
    if (b.name == "conv+conv+add+add") {
      EXPECT_EQ(b.edges(), (std::vector<std::pair<int, int>>{{0, 2}, {1, 2}, {2, 3}, {2, 3}}));
    }
  }
}

// ---- structures ------------------------------------------------------------------------------

void expect_one_source_one_sink(const Dag& d) {
  int sources = 0;
  for (int v = 0; v < d.size(); ++v) {
    sources += d.preds[static_cast<size_t>(v)].empty() ? 1 : 0;
    for (int u : d.preds[static_cast<size_t>(v)]) EXPECT_LT(u, v);
  }
  EXPECT_EQ(sources, 1);
  EXPECT_EQ(d.sinks(), std::vector<int>{d.size() - 1});
}

TEST(Dag, MuffinTemplatesHaveOneInputAndOneOutput) {
  core::Rng rng(18);
  for (int t = 0; t < 300; ++t) {
    const int n = static_cast<int>(rng.randint(2, 30));
    expect_one_source_one_sink(chain_with_skips(rng, n, 0.2));
    const Dag c = cell_based(rng, n, 5);
    EXPECT_LE(c.size(), std::max(n, 2));
    expect_one_source_one_sink(c);
  }
}

TEST(Dag, ResidualNetworkRespectsTheNeighbourBound) {
  core::Rng rng(19);
  for (int k : {2, 4, 6}) {
    const Dag d = residual_network(rng, 12, k, 0.9);
    std::vector<int> deg(12, 0);
    for (int v = 0; v < d.size(); ++v)
      for (int u : d.preds[static_cast<size_t>(v)]) {
        EXPECT_LT(u, v);
        ++deg[static_cast<size_t>(u)];
        ++deg[static_cast<size_t>(v)];
      }
    for (int x : deg) EXPECT_LE(x, std::max(k, 2));
    for (int v = 1; v < d.size(); ++v) EXPECT_FALSE(d.preds[static_cast<size_t>(v)].empty());  // the line
  }
}

TEST(Dag, WattsStrogatzKeepsTheEdgeCount) {
  core::Rng rng(20);
  for (int k : {2, 4, 6}) {
    const Dag d = watts_strogatz(rng, 10, k, 0.5);
    EXPECT_EQ(d.edge_count(), 10 * k / 2);  // rewiring moves links, never adds or drops one
    for (int v = 0; v < d.size(); ++v)
      for (int u : d.preds[static_cast<size_t>(v)]) EXPECT_LT(u, v);
  }
}

}  // namespace
}  // namespace quorum::gen
