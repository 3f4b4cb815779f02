// The position relation (stage PR): a planted fault in a vector loop's tail along a row (faulty's last-tail=: the
// positions past the last full block of W are wrong once a full block ran) is found by the relation and not by the
// per-node rule on the model's own row of W or fewer, at the node it is in; a convolution's border, which reads
// the fresh neighbours in the wider run, is not judged; an axis a shape rule ties to its length is not drawn; a
// bundle fixes the draw and its reproducer runs the wider model.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "campaign/bundle.h"
#include "campaign/evaluate.h"
#include "core/attrs.h"
#include "core/rng.h"
#include "gen/builder.h"
#include "ir/graph.h"
#include "ir/json_io.h"
#include "ops/registry.h"
#include "report/repro.h"
#include "support/stage_findings.h"

namespace quorum::campaign {
namespace {

// input [1, 3, 8] -> conv1d (kernel 3, pads 1: its first and last outputs read the padding) -> relu -> tanh.
ModelCase conv_relu_tanh(uint64_t seed = 5) {
  core::Rng rng(seed);
  gen::Builder b(rng);
  const gen::Vid x = b.input({1, 3, 8});
  const gen::Vid c = *b.place(ops::op("conv1d"), {x},
                              {{"kernel_shape", std::vector<int64_t>{3}}, {"pads", std::vector<int64_t>{1, 1}},
                               {"strides", std::vector<int64_t>{1}}, {"dilations", std::vector<int64_t>{1}}});
  b.output(b.add("tanh", {b.add("relu", {c})}));
  ModelCase m{gen::materialize(b.finish("conv_relu_tanh", {}), rng), {}, {}};
  ir::validate(m.graph, "conv_relu_tanh");
  complete_case(m, "mse_loss", rng);
  return m;
}

Setup relation_setup(const std::string& spec, int axis = 0, int64_t length = 0, int64_t position = 0) {
  Setup s;
  s.backends = parse_backends(spec);
  s.mode = Mode::Infer;
  s.optimized = false;
  s.position_relation.on = true;
  s.position_relation.axis = axis;
  s.position_relation.length = length;
  s.position_relation.position = position;
  return s;
}

TEST(PositionRelation, AMishandledRowTailIsFoundOnlyInTheTailAndNotByThePerNodeRule) {
  const ModelCase m = conv_relu_tanh();
  const auto pr_of = [&](int64_t length, int64_t position) {
    const campaign::Setup setup = relation_setup("faulty:last-tail=relu@8", 2, length, position);
    WorkerSet workers(setup.backends, setup.limits);
    const Evaluation ev = evaluate(m, setup, workers);
    EXPECT_TRUE(of_stage(ev, core::Stage::Forward).empty()) << "a row of 8 has no remainder";
    EXPECT_EQ(ev.positioned.length, length);
    EXPECT_TRUE(ev.runs[1].positioned.ran);
    return of_stage(ev, core::Stage::Position);
  };
  const auto tail = pr_of(17, 9);
  ASSERT_EQ(tail.size(), 1u) << "positions 9..16 of 17: the last is the remainder after two blocks of 8";
  EXPECT_EQ(tail[0].op, "relu") << "the first node whose positions depart, not the output's";
  EXPECT_EQ(tail[0].signature().rfind("inconsistency|PR|faulty:last-tail=relu@8|relu", 0), 0u)
      << tail[0].signature();
  EXPECT_NE(tail[0].detail.find("positions 9..16 of input axis 2 widened to 17"), std::string::npos)
      << tail[0].detail;
  EXPECT_NE(tail[0].detail.find("beyond the float32 envelope of the length-8 run"), std::string::npos)
      << tail[0].detail;
  EXPECT_TRUE(pr_of(17, 0).empty()) << "positions of the first full block";
  EXPECT_TRUE(pr_of(16, 8).empty()) << "no remainder";
}

TEST(PositionRelation, AConvolutionsBorderIsNotJudgedSoTheReferenceAgreesWithItself) {
  // The conv's first and last outputs read the padding in the model's run and fresh neighbours in the wider
  // run: judged, the reference as a library would depart from its own run there.
  for (const int64_t position : {int64_t{0}, int64_t{5}, int64_t{25}}) {
    const campaign::Setup setup = relation_setup("ref", 2, 33, position);
    WorkerSet workers(setup.backends, setup.limits);
    const Evaluation ev = evaluate(conv_relu_tanh(), setup, workers);
    EXPECT_TRUE(ev.runs[1].positioned.ran);
    EXPECT_TRUE(ev.findings.empty()) << ev.findings[0].detail;
    EXPECT_FALSE(ev.runs[1].positioned.values.empty());
  }
  // The channel axis: the conv mixes the channels, so its output is decided by no position alone; the model's
  // input is judged nowhere and the wider model is not run.
  const campaign::Setup channels = relation_setup("faulty:last-tail=relu@8", 1, 9, 2);
  WorkerSet workers(channels.backends, channels.limits);
  const Evaluation ev = evaluate(conv_relu_tanh(), channels, workers);
  EXPECT_EQ(ev.positioned.length, 0);
  EXPECT_FALSE(ev.runs[1].positioned.ran);
}

// A value equal in both runs by coincidence is not decided where an undecided element of an operand reaches it
// (campaign seed 14005: max(x, pad(f(conv(x)))) is x = 1e4 in both runs at a position that the pad fills in
// the model's run and a convolution over fresh values in the wider one, where OpenCV's and Arm NN's softplus
// overflowed (known bugs) and the maximum was blamed). Here faulty's exp returns +inf on (20, 88.72]: the wider
// run's exp(21) is inf where the float64 one is 1.3e9 < x = 1e10, so the maximum is inf there; the per-node
// stage finds nothing (the model's own run never reaches it) and neither does the relation.
TEST(PositionRelation, AnElementAnUndecidedOperandReachesIsNotJudgedWhateverItEquals) {
  ModelCase m;
  m.graph = ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 1, 9]}],
    "outputs": ["y"],
    "initializers": [{"name": "w", "dtype": "float32", "shape": [1, 1, 5], "data": [2.1e-9, 0, 0, 1e-3, 0]}],
    "nodes": [{"name": "c", "op": "conv1d", "inputs": ["x", "w"], "outputs": ["c"],
               "attrs": {"kernel_shape": [5], "dilations": [2], "bias": 0, "out_channels": 1}},
              {"name": "e", "op": "exp", "inputs": ["c"], "outputs": ["e"]},
              {"name": "p", "op": "pad", "inputs": ["e"], "outputs": ["p"], "attrs": {"pads": [0, 0, 0, 0, 0, 8]}},
              {"name": "y", "op": "maximum", "inputs": ["x", "p"], "outputs": ["y"]}]})",
                                "coincidence");
  core::Tensor x(core::DType::F64, {1, 1, 9});
  x.f64()[6] = 1;  // the model's run: conv = 1e-3 at its one position, exp 1.001, padded to x's width
  x.f64()[7] = 1e10;  // the wider run: conv = 21 + 1e-3 * (a fresh value) at position 7, exp inf in faulty
  m.inputs = {{"x", x}};
  const campaign::Setup setup = relation_setup("faulty:exp-overflow-early", 2, 17, 0);
  WorkerSet workers(setup.backends, setup.limits);
  const Evaluation ev = evaluate(m, setup, workers);
  ASSERT_EQ(ev.positioned.length, 17) << ev.runs[1].outcome.str();
  ASSERT_TRUE(ev.runs[1].positioned.ran);
  EXPECT_TRUE(of_stage(ev, core::Stage::Forward).empty());
  EXPECT_TRUE(of_stage(ev, core::Stage::Position).empty()) << of_stage(ev, core::Stage::Position)[0].detail;
}

// A value as long as its operand along the widened axis, in both runs, is judged where that operand's positions
// went (campaign seed 14501). concat(a, b, c) along the widened axis puts each part's positions at its own
// offset; the concatenation matches best where b's part went (offset 29), its gelu where a's went (12), since
// b's gelu is mostly 0. Judged at 12, the gelu's element of c's row 5 (gelu(-92) = 0) sat where the wider run
// holds b's -inf: the reference's gelu(-inf) is its limit 0 too, so the element looked decided, and faulty's
// gelu(-inf) = NaN (inf-as-nan, like torch's) was a finding against the model's 0.
TEST(PositionRelation, AValueAsLongAsItsOperandIsJudgedWhereTheOperandsPositionsWent) {
  ModelCase m;
  m.graph = ir::graph_from_json(R"({"inputs": [{"name": "a", "dtype": "float32", "shape": [1, 1, 15, 4]},
      {"name": "b", "dtype": "float32", "shape": [1, 1, 15, 4]},
      {"name": "c", "dtype": "float32", "shape": [1, 1, 15, 4]}],
    "outputs": ["g"], "initializers": [],
    "nodes": [{"name": "cat", "op": "concat", "inputs": ["a", "b", "c"], "outputs": ["cat"], "attrs": {"axis": 2}},
              {"name": "g", "op": "gelu", "inputs": ["cat"], "outputs": ["g"], "attrs": {"approximate": "none"}}]})",
                                "parts");
  core::Tensor a(core::DType::F64, {1, 1, 15, 4}), b = a, c = a;
  for (int64_t i = 0; i < 60; ++i) {
    a.f64()[i] = i < 10 ? 0 : 1;      // 50 nonzero, gelu 0.84
    b.f64()[i] = i % 2 ? -50 : 1.5;   // 60 nonzero, half of them gelu 0
    c.f64()[i] = i < 20 ? 0 : 2;      // 40 nonzero
  }
  b.f64()[3 * 4 + 1] = -INFINITY;  // b's row 3: the wider run's row 32 + 12 + 3 = 47 = 12 + c's row 5 in the model
  c.f64()[5 * 4 + 1] = -92;        // gelu 0 in float64
  m.inputs = {{"a", a}, {"b", b}, {"c", c}};
  const campaign::Setup setup = relation_setup("faulty:inf-as-nan=gelu", 2, 32, 12);
  WorkerSet workers(setup.backends, setup.limits);
  const Evaluation ev = evaluate(m, setup, workers);
  ASSERT_EQ(ev.positioned.length, 32) << ev.runs[1].outcome.str();
  ASSERT_TRUE(ev.runs[1].positioned.ran);
  EXPECT_FALSE(of_stage(ev, core::Stage::Forward).empty()) << "the model's own gelu(-inf) of b's row 3";
  EXPECT_TRUE(of_stage(ev, core::Stage::Position).empty()) << of_stage(ev, core::Stage::Position)[0].detail;
  EXPECT_TRUE(ev.runs[1].positioned.values.count("cat"));
  EXPECT_TRUE(ev.runs[1].positioned.values.count("g")) << "judged, at the concatenation's offset";
}

TEST(PositionRelation, TheDrawSkipsAnAxisTiedToItsLengthAndIsAFunctionOfTheCase) {
  // [2, 3, 5] -> dense (5 features: the last axis is tied to the weight) -> relu: only axis 1 can be widened.
  core::Rng rng(4);
  gen::Builder bl(rng);
  const gen::Vid x = bl.input({2, 3, 5});
  bl.output(bl.add("relu", {bl.add("dense", {x}, {{"units", int64_t{4}}})}));
  ModelCase m{gen::materialize(bl.finish("dense", {}), rng), {}, {}};
  ir::validate(m.graph, "dense");
  complete_case(m, "mse_loss", rng);
  const campaign::Setup setup = relation_setup("ref");
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    ModelCase c = m;
    c.inputs.clear();
    core::Rng r(seed);
    complete_case(c, "mse_loss", r);
    const auto w = positioned_case(c.graph, c.inputs, setup);
    ASSERT_TRUE(w.has_value());
    EXPECT_EQ(w->axis, 1);
    EXPECT_GT(w->batch, 3);
    EXPECT_LE(w->position, w->batch - 3);
    const auto again = positioned_case(c.graph, c.inputs, setup);
    EXPECT_EQ(again->batch, w->batch);
    EXPECT_EQ(again->position, w->position);
  }
  // A model of rank 1 has no axis but its batch.
  core::Rng r1(2);
  gen::Builder b1(r1);
  b1.output(b1.add("relu", {b1.input({4})}));
  ModelCase v{gen::materialize(b1.finish("vector", {}), r1), {}, {}};
  ir::validate(v.graph, "vector");
  complete_case(v, "mse_loss", r1);
  EXPECT_FALSE(positioned_case(v.graph, v.inputs, setup).has_value());
}

TEST(PositionRelation, AModelWhoseHeadTiesTheAxisRunsItsNodesBeforeTheHead) {
  // [1, 3, 8] -> conv1d (unpadded: the model's positions move by the offset of its window) -> relu -> flatten ->
  // dense: the dense layer's features tie the last axis, so the wider model is its first three nodes (the
  // flattened width is no position axis: not judged).
  core::Rng rng(7);
  gen::Builder bl(rng);
  const gen::Vid x = bl.input({1, 3, 8});
  const gen::Vid c = *bl.place(ops::op("conv1d"), {x},
                               {{"kernel_shape", std::vector<int64_t>{3}}, {"pads", std::vector<int64_t>{0, 0}},
                                {"strides", std::vector<int64_t>{1}}, {"dilations", std::vector<int64_t>{1}}});
  const gen::Vid f = bl.add("flatten", {bl.add("relu", {c})});
  bl.output(bl.add("dense", {f}, {{"units", int64_t{3}}}));
  ModelCase m{gen::materialize(bl.finish("headed", {}), rng), {}, {}};
  ir::validate(m.graph, "headed");
  complete_case(m, "mse_loss", rng);
  const campaign::Setup setup = relation_setup("faulty:last-tail=relu@8", 2, 17, 9);
  const auto w = positioned_case(m.graph, m.inputs, setup);
  ASSERT_TRUE(w.has_value());
  ASSERT_EQ(w->graph.nodes.size(), 3u);
  EXPECT_EQ(w->graph.nodes.back().op, "flatten");
  EXPECT_EQ(w->graph.outputs, std::vector<std::string>{w->graph.nodes.back().outputs[0]});
  WorkerSet workers(setup.backends, setup.limits);
  const Evaluation ev = evaluate(m, setup, workers);
  const auto pr = of_stage(ev, core::Stage::Position);
  ASSERT_EQ(pr.size(), 1u);
  EXPECT_EQ(pr[0].op, "relu");
  EXPECT_TRUE(of_stage(ev, core::Stage::Forward).empty());
}

TEST(PositionRelation, ABundleFixesTheDrawAndItsReproducerCaseIsTheWiderModel) {
  const ModelCase m = conv_relu_tanh();
  const campaign::Setup setup = relation_setup("faulty:last-tail=relu@8", 2, 17, 9);
  WorkerSet workers(setup.backends, setup.limits);
  const Evaluation ev = evaluate(m, setup, workers);
  const auto pr = of_stage(ev, core::Stage::Position);
  ASSERT_EQ(pr.size(), 1u);
  const std::string out = ::testing::TempDir() + "/position_relation_bundle";
  std::filesystem::remove_all(out);
  campaign::Setup drawn = setup;  // the campaign's setup draws; the bundle records the draw
  drawn.position_relation = {true, 0, 0, 0};
  const std::string dir = write_bundle(out, pr[0], BundleContext{m, ev, drawn, 5, 0, "test", {}, {}, ""});
  const campaign::Setup fixed = bundle_setup(dir);
  EXPECT_TRUE(fixed.position_relation.on);
  EXPECT_EQ(fixed.position_relation.axis, 2);
  EXPECT_EQ(fixed.position_relation.length, 17);
  EXPECT_EQ(fixed.position_relation.position, 9);
  WorkerSet again(fixed.backends, fixed.limits);
  const Evaluation replay = evaluate(m, fixed, again);
  ASSERT_EQ(of_stage(replay, core::Stage::Position).size(), 1u);
  EXPECT_EQ(of_stage(replay, core::Stage::Position)[0].signature(), pr[0].signature());
  const backends::ReproCase rc = report::load_repro_case(dir);
  EXPECT_EQ(rc.stage, core::Stage::Position);
  EXPECT_EQ(rc.model.inputs[0].type.shape[2], 17);
  EXPECT_EQ(rc.expected.at(rc.model.outputs[0]).shape()[2], 17);
  EXPECT_NE(rc.detail.find("input axis 2 widened to 17, the model's values at positions 9..16"), std::string::npos)
      << rc.detail;
  std::filesystem::remove_all(out);
}

}  // namespace
}  // namespace quorum::campaign
