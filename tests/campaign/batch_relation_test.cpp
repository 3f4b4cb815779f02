// The batch relation (stage BR): planted batch faults (faulty's batch-from=: a kernel wrong for batches of 8
// or more; tail=: a vector loop over the batch whose remainder is wrong once a full block ran) are found by
// the relation and not by the per-node rule on the model's own batch of one, at the node they are in; a value
// that mixes the samples (a softmax over the batch axis) is not judged; off means no wide run.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "campaign/bundle.h"
#include "campaign/evaluate.h"
#include "core/attrs.h"
#include "core/rng.h"
#include "gen/builder.h"
#include "ir/graph.h"
#include "ir/onnx_io.h"
#include "ops/registry.h"
#include "support/stage_findings.h"
#include "report/repro.h"

namespace quorum::campaign {
namespace {

// input [1, 3, 8, 8] -> conv2d -> relu -> tanh.
ModelCase conv_relu_tanh(uint64_t seed = 5) {
  core::Rng rng(seed);
  gen::Builder b(rng);
  const gen::Vid x = b.input({1, 3, 8, 8});
  const gen::Vid c = *b.layer(ops::op("conv2d"), {x});
  b.output(b.add("tanh", {b.add("relu", {c})}));
  ModelCase m{gen::materialize(b.finish("conv_relu_tanh", {}), rng), {}, {}};
  ir::validate(m.graph, "conv_relu_tanh");
  complete_case(m, "mse_loss", rng);
  return m;
}

Setup relation_setup(const std::string& spec, int64_t batch = 0, int64_t position = 0) {
  Setup s;
  s.backends = parse_backends(spec);
  s.mode = Mode::Infer;
  s.optimized = false;
  s.batch_relation.on = true;
  s.batch_relation.batch = batch;
  s.batch_relation.position = position;
  return s;
}

TEST(BatchRelation, AKernelWrongForLargeBatchesIsFoundAtItsNode) {
  const ModelCase m = conv_relu_tanh();
  {
    const campaign::Setup setup = relation_setup("faulty:batch-from=relu@8", 16, 3);
    WorkerSet workers(setup.backends, setup.limits);
    const Evaluation ev = evaluate(m, setup, workers);
    EXPECT_EQ(ev.batch, 16);
    EXPECT_EQ(ev.position, 3);
    EXPECT_TRUE(ev.runs[1].batched.ran);
    EXPECT_TRUE(of_stage(ev, core::Stage::Forward).empty()) << "a batch of one is right";
    const auto br = of_stage(ev, core::Stage::Batch);
    ASSERT_EQ(br.size(), 1u);
    EXPECT_EQ(br[0].kind, core::FindingKind::Inconsistency);
    EXPECT_EQ(br[0].op, "relu") << "the first node whose rows depart, not the output's";
    EXPECT_EQ(br[0].signature().rfind("inconsistency|BR|faulty:batch-from=relu@8|relu", 0), 0u)
        << br[0].signature();
    EXPECT_NE(br[0].detail.find("rows 3..3 of a batch of 16"), std::string::npos) << br[0].detail;
    EXPECT_NE(br[0].detail.find("beyond the float32 envelope of the batch-1 run"), std::string::npos)
        << br[0].detail;
  }
  {
    const campaign::Setup setup = relation_setup("faulty:batch-from=relu@8", 7, 6);  // below the fault's size
    WorkerSet workers(setup.backends, setup.limits);
    const Evaluation ev = evaluate(m, setup, workers);
    EXPECT_TRUE(ev.runs[1].batched.ran);
    EXPECT_TRUE(ev.findings.empty()) << ev.findings[0].detail;
  }
}

TEST(BatchRelation, AMishandledTailIsFoundOnlyInTheTail) {
  const ModelCase m = conv_relu_tanh(9);
  const auto br_of = [&](int64_t batch, int64_t position) {
    const campaign::Setup setup = relation_setup("faulty:tail=relu@8", batch, position);
    WorkerSet workers(setup.backends, setup.limits);
    const Evaluation ev = evaluate(m, setup, workers);
    EXPECT_TRUE(of_stage(ev, core::Stage::Forward).empty());
    return of_stage(ev, core::Stage::Batch).size();
  };
  EXPECT_EQ(br_of(17, 16), 1u) << "the last row of 17: the remainder after two blocks of 8";
  EXPECT_EQ(br_of(17, 0), 0u) << "a row of the first full block";
  EXPECT_EQ(br_of(8, 7), 0u) << "no remainder";
  EXPECT_EQ(br_of(5, 4), 0u) << "all remainder, no full block ran";
}

TEST(BatchRelation, TheDrawIsAFunctionOfTheCaseAndAlwaysWider) {
  const ModelCase m = conv_relu_tanh();
  const campaign::Setup setup = relation_setup("faulty:batch-from=relu@3");  // every drawn batch is 3 or more
  WorkerSet workers(setup.backends, setup.limits);
  const Evaluation a = evaluate(m, setup, workers), b = evaluate(m, setup, workers);
  EXPECT_GE(a.batch, 3);
  EXPECT_EQ(a.batch, b.batch);
  EXPECT_EQ(a.position, b.position);
  EXPECT_LE(a.position, a.batch - 1);
  EXPECT_EQ(of_stage(a, core::Stage::Batch).size(), 1u);
}

TEST(BatchRelation, ValuesThatMixTheSamplesAreNotJudgedAndOffMakesNoRun) {
  // [2, 4] -> softmax over the batch axis -> relu: no value is a function of its own sample.
  core::Rng rng(4);
  gen::Builder bl(rng);
  const gen::Vid x = bl.input({2, 4});
  bl.output(bl.add("relu", {bl.add("softmax", {x}, {{"axis", int64_t{0}}})}));
  ModelCase m{gen::materialize(bl.finish("mix", {}), rng), {}, {}};
  ir::validate(m.graph, "mix");
  complete_case(m, "mse_loss", rng);
  const campaign::Setup setup = relation_setup("faulty:batch-from=relu@3", 9, 0);
  WorkerSet workers(setup.backends, setup.limits);
  const Evaluation ev = evaluate(m, setup, workers);
  EXPECT_EQ(ev.batch, 0);
  EXPECT_FALSE(ev.runs[1].batched.ran);
  EXPECT_TRUE(ev.findings.empty());

  // A NaN of the model's sample spread over the whole batch (a log_softmax over axis 0) makes the model's rows
  // NaN in every batch: equal to its run by chance, while the other rows depend on the sample.
  {
    core::Rng r3(8);
    gen::Builder b3(r3);
    const gen::Vid x3 = b3.input({1, 4});
    b3.output(b3.add("relu", {b3.add("log_softmax", {x3}, {{"axis", int64_t{0}}})}));
    ModelCase m3{gen::materialize(b3.finish("mix_nan", {}), r3), {}, {}};
    ir::validate(m3.graph, "mix_nan");
    complete_case(m3, "mse_loss", r3);
    for (int64_t i = 0; i < 4; ++i) m3.inputs.at(m3.graph.inputs[0].name).f64()[i] = NAN;
    const Evaluation ev3 = evaluate(m3, setup, workers);
    EXPECT_EQ(ev3.batch, 0) << "the log_softmax's rows are NaN in every batch, but they spread the sample's NaN";
  }

  // Downstream of where the library's own run departs from the reference, its NaN and the reference's may
  // coincide for different causes: relu turns the sample's NaN into 0, 0/0 is NaN as the reference's NaN/NaN
  // is, and a wide relu's 0.5/0.5 is 1. Not a relation finding (the per-node stage has relu's).
  {
    core::Rng r4(10);
    gen::Builder b4(r4);
    const gen::Vid x4 = b4.input({1, 4});
    const gen::Vid rl = b4.add("relu", {x4});
    b4.output(b4.add("div", {rl, rl}));
    ModelCase m4{gen::materialize(b4.finish("coincide", {}), r4), {}, {}};
    ir::validate(m4.graph, "coincide");
    complete_case(m4, "mse_loss", r4);
    for (int64_t i = 0; i < 4; ++i) m4.inputs.at(m4.graph.inputs[0].name).f64()[i] = NAN;
    const campaign::Setup s4 = relation_setup("faulty:relu-nan-to-zero+batch-from=relu@3", 9, 0);
    WorkerSet w4(s4.backends, s4.limits);
    const Evaluation ev4 = evaluate(m4, s4, w4);
    EXPECT_EQ(ev4.batch, 9);
    EXPECT_TRUE(of_stage(ev4, core::Stage::Batch).empty()) << of_stage(ev4, core::Stage::Batch)[0].detail;
    EXPECT_FALSE(of_stage(ev4, core::Stage::Forward).empty()) << "relu's NaN swallowed, at the model's own batch";
  }

  campaign::Setup off = relation_setup("faulty:batch-from=relu@3", 9, 0);
  off.batch_relation.on = false;
  WorkerSet off_workers(off.backends, off.limits);
  const Evaluation ev_off = evaluate(conv_relu_tanh(), off, off_workers);
  EXPECT_FALSE(ev_off.runs[1].batched.ran);
  EXPECT_TRUE(ev_off.findings.empty());
  // The float64 reference as a library agrees with itself in every batch.
  const campaign::Setup plain = relation_setup("ref", 33, 32);
  WorkerSet plain_workers(plain.backends, plain.limits);
  const Evaluation ev_plain = evaluate(conv_relu_tanh(), plain, plain_workers);
  EXPECT_TRUE(ev_plain.runs[1].batched.ran);
  EXPECT_TRUE(ev_plain.findings.empty()) << ev_plain.findings[0].detail;
}

TEST(BatchRelation, AReshapeThatSpellsTheBatchOutFollowsIt) {
  // [2, 3, 4] -> reshape [2, 12] -> relu: the target shape names the batch; reshape's OpSpec widens it.
  core::Rng rng(6);
  gen::Builder bl(rng);
  const gen::Vid x = bl.input({2, 3, 4});
  bl.output(bl.add("relu", {bl.add("reshape", {x}, {{"shape", std::vector<int64_t>{2, 12}}})}));
  ModelCase m{gen::materialize(bl.finish("reshaped", {}), rng), {}, {}};
  ir::validate(m.graph, "reshaped");
  complete_case(m, "mse_loss", rng);
  const campaign::Setup setup = relation_setup("faulty:batch-from=relu@8", 9, 7);
  const auto w = wide_case(m.graph, m.inputs, setup);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(core::attr_ints(w->graph.nodes[0].attrs, "shape"), (std::vector<int64_t>{9, 12}));
  WorkerSet workers(setup.backends, setup.limits);
  const auto br = of_stage(evaluate(m, setup, workers), core::Stage::Batch);
  ASSERT_EQ(br.size(), 1u);
  EXPECT_EQ(br[0].op, "relu");
  EXPECT_NE(br[0].detail.find("rows 7..8 of a batch of 9"), std::string::npos) << br[0].detail;
}

TEST(BatchRelation, TheWideModelIsReadInItsOwnModelsExchangeForm) {
  // An engine that reads ONNX gets the wide model in the form (opset, each node's choices) of the model's own:
  // else the relation would compare two exchange forms, not two batches.
  int differs = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const ModelCase m = conv_relu_tanh(seed);
    const campaign::Setup setup = relation_setup("ref", 16, 0);
    const auto w = wide_case(m.graph, m.inputs, setup);
    ASSERT_TRUE(w.has_value());
    const ir::OnnxExported own = ir::onnx_forms(m.graph, ir::seeded_form(m.graph, 11, 17));
    const ir::OnnxExported wide = ir::onnx_forms(w->graph, ir::seeded_form(w->graph, 11, 17));
    EXPECT_EQ(own.str(), wide.str());
    ir::Graph plain = w->graph;
    plain.form_batch = {};
    differs += ir::onnx_forms(plain, ir::seeded_form(plain, 11, 17)).str() != own.str();
  }
  EXPECT_GT(differs, 0) << "the shapes do choose forms: without form_batch some wide model reads another form";
}

TEST(BatchRelation, AWeightWhoseFirstAxisIsTheWideBatchKeepsTheModelsForm) {
  // An LSTM of hidden size 1 has weights [4, F]: at a batch of 4 their shape read as the batch's made the wide
  // model draw other forms (seed 10513: initial_h written for the model, left out for the wide one).
  int differs = 0;
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    core::Rng rng(seed);
    gen::Builder b(rng);
    b.output(b.add("lstm", {b.input({1, 3, 2})}, {{"hidden_size", int64_t{1}}}));
    ModelCase m{gen::materialize(b.finish("lstm1", {}), rng), {}, {}};
    ir::validate(m.graph, "lstm1");
    complete_case(m, "mse_loss", rng);
    const auto w = wide_case(m.graph, m.inputs, relation_setup("ref", 4, 3));
    ASSERT_TRUE(w.has_value());
    const ir::OnnxExported own = ir::onnx_forms(m.graph, ir::seeded_form(m.graph, 11, 17));
    differs += ir::onnx_forms(w->graph, ir::seeded_form(w->graph, 11, 17)).str() != own.str();
  }
  EXPECT_EQ(differs, 0);
}

TEST(BatchRelation, ABundleFixesTheDrawAndItsReproducerCaseIsTheWideBatch) {
  const ModelCase m = conv_relu_tanh();
  const campaign::Setup setup = relation_setup("faulty:batch-from=relu@8");
  WorkerSet workers(setup.backends, setup.limits);
  Evaluation ev;
  uint64_t seed = 5;
  ModelCase c = m;
  for (; seed < 40 && ev.batch < 8; ++seed) {  // a case whose drawn batch reaches the fault
    c = conv_relu_tanh(seed);
    ev = evaluate(c, setup, workers);
  }
  ASSERT_GE(ev.batch, 8);
  const auto br = of_stage(ev, core::Stage::Batch);
  ASSERT_EQ(br.size(), 1u);
  const std::string out = ::testing::TempDir() + "/batch_relation_bundle";
  std::filesystem::remove_all(out);
  const std::string dir = write_bundle(out, br[0], BundleContext{c, ev, setup, seed, 0, "test", {}, {}, ""});
  const campaign::Setup fixed = bundle_setup(dir);
  EXPECT_TRUE(fixed.batch_relation.on);
  EXPECT_EQ(fixed.batch_relation.batch, ev.batch);
  EXPECT_EQ(fixed.batch_relation.position, ev.position);
  // The bundle's case and setup give the same finding again (replay, reduction).
  WorkerSet again(fixed.backends, fixed.limits);
  const Evaluation replay = evaluate(c, fixed, again);
  EXPECT_EQ(replay.batch, ev.batch);
  ASSERT_EQ(of_stage(replay, core::Stage::Batch).size(), 1u);
  EXPECT_EQ(of_stage(replay, core::Stage::Batch)[0].signature(), br[0].signature());
  const backends::ReproCase rc = report::load_repro_case(dir);
  EXPECT_EQ(rc.stage, core::Stage::Batch);
  EXPECT_EQ(rc.model.inputs[0].type.shape[0], ev.batch);
  EXPECT_EQ(rc.expected.at(rc.model.outputs[0]).shape()[0], ev.batch);
  EXPECT_NE(rc.detail.find("the program runs the batch of " + std::to_string(ev.batch)), std::string::npos);
  std::filesystem::remove_all(out);
}

}  // namespace
}  // namespace quorum::campaign
