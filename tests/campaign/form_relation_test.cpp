// The form relation (stage FR): a planted reader fault (faulty's opset-below=: a node read at an opset below N
// is off) is found by the relation where the model's own form is read right, at the node it is in, and by the
// per-node rule where the model's own form is the wrong one; a draw that reads every node as before runs
// nothing; off means no second run; the bundle names the draw and its reproducer reads the other form.
#include <gtest/gtest.h>

#include <filesystem>

#include "campaign/bundle.h"
#include "campaign/evaluate.h"
#include "core/rng.h"
#include "gen/builder.h"
#include "ir/graph.h"
#include "ir/onnx_io.h"
#include "ops/registry.h"
#include "report/repro.h"
#include "support/stage_findings.h"

namespace quorum::campaign {
namespace {

// input [2, 6] -> tanh -> relu -> sigmoid.
ModelCase tanh_relu_sigmoid(uint64_t seed) {
  core::Rng rng(seed);
  gen::Builder b(rng);
  const gen::Vid x = b.input({2, 6});
  b.output(b.add("sigmoid", {b.add("relu", {b.add("tanh", {x})})}));
  ModelCase m{gen::materialize(b.finish("chain_" + std::to_string(seed), {}), rng), {}, {}};
  ir::validate(m.graph, "chain");
  complete_case(m, "mse_loss", rng);
  return m;
}

int opset_of(const ir::Graph& g, uint64_t draw) {
  ir::Graph d = g;
  d.form_draw = draw;
  return ir::seeded_form(d, 11, 17).opset;  // faulty's opsets (opset-below)
}

Setup form_setup(const std::string& spec, uint64_t draw = 1) {
  Setup s;
  s.backends = parse_backends(spec);
  s.mode = Mode::Infer;
  s.optimized = false;
  s.form_relation.on = true;
  s.form_relation.draw = draw;
  return s;
}

// A model and a draw whose own opset is higher than the draw's.
struct Pick {
  ModelCase m;
  uint64_t draw = 0;
  int own = 0, other = 0;
};
Pick pick() {
  for (uint64_t seed = 1; seed < 50; ++seed) {
    ModelCase m = tanh_relu_sigmoid(seed);
    const int own = opset_of(m.graph, 0);
    for (uint64_t draw = 1; draw < 20; ++draw)
      if (const int other = opset_of(m.graph, draw); other < own) return {m, draw, own, other};
  }
  ADD_FAILURE() << "no model whose draw reads a lower opset";
  return {};
}

TEST(FormRelation, AReaderWrongAtOlderOpsetsIsFoundAtItsNode) {
  const Pick p = pick();
  // The fault fires below the model's own opset: the model's own run is right, the other form's is not.
  const std::string spec = "faulty:opset-below=relu@" + std::to_string(p.own);
  {
    const campaign::Setup setup = form_setup(spec, p.draw);
    WorkerSet workers(setup.backends, setup.limits);
    const Evaluation ev = evaluate(p.m, setup, workers);
    EXPECT_TRUE(of_stage(ev, core::Stage::Forward).empty()) << "the model's own form is read right";
    EXPECT_TRUE(ev.runs[1].formed.ran);
    const auto fr = of_stage(ev, core::Stage::Form);
    ASSERT_EQ(fr.size(), 1u);
    EXPECT_EQ(fr[0].kind, core::FindingKind::Inconsistency);
    EXPECT_EQ(fr[0].op, "relu") << "the first node whose values depart, not the output's";
    EXPECT_EQ(fr[0].signature().rfind("inconsistency|FR|" + spec + "|relu", 0), 0u) << fr[0].signature();
    EXPECT_NE(fr[0].detail.find("opset " + std::to_string(p.other)), std::string::npos) << fr[0].detail;
    EXPECT_NE(fr[0].detail.find("opset " + std::to_string(p.own)), std::string::npos) << fr[0].detail;
    EXPECT_NE(std::find(fr[0].lowering.begin(), fr[0].lowering.end(), "onnx opset " + std::to_string(p.other)),
              fr[0].lowering.end())
        << "the finding carries the other form's lowering";

    // The bundle fixes the draw; its case and setup give the finding again; the reproducer reads the other form.
    const std::string out = ::testing::TempDir() + "/form_relation_bundle";
    std::filesystem::remove_all(out);
    const std::string dir = write_bundle(out, fr[0], BundleContext{p.m, ev, setup, 1, 0, "test", {}, {}, ""});
    const campaign::Setup fixed = bundle_setup(dir);
    EXPECT_TRUE(fixed.form_relation.on);
    EXPECT_EQ(fixed.form_relation.draw, p.draw);
    WorkerSet again(fixed.backends, fixed.limits);
    const auto replay = of_stage(evaluate(p.m, fixed, again), core::Stage::Form);
    ASSERT_EQ(replay.size(), 1u);
    EXPECT_EQ(replay[0].signature(), fr[0].signature());
    const backends::ReproCase rc = report::load_repro_case(dir);
    EXPECT_EQ(rc.stage, core::Stage::Form);
    EXPECT_EQ(rc.model.form_draw, p.draw);
    EXPECT_NE(rc.detail.find("other exchange form"), std::string::npos) << rc.detail;
    EXPECT_TRUE(rc.actual.empty()) << "the recorded values are the model's own form's, which are right";
    std::filesystem::remove_all(out);
  }
  {
    // The fault fires at the model's own opset too: the per-node rule finds it, and the relation does not
    // (its pinned run departs from the reference at the faulty node).
    const campaign::Setup setup = form_setup("faulty:opset-below=relu@18", p.draw);
    WorkerSet workers(setup.backends, setup.limits);
    const Evaluation ev = evaluate(p.m, setup, workers);
    EXPECT_FALSE(of_stage(ev, core::Stage::Forward).empty());
    EXPECT_TRUE(of_stage(ev, core::Stage::Form).empty()) << of_stage(ev, core::Stage::Form)[0].detail;
  }
}

TEST(FormRelation, TheSameFormRunsNothingAndOffMakesNoRun) {
  const Pick p = pick();
  // A draw that reads the model at its own opset: faulty's form is its opset alone, so nothing differs.
  uint64_t same = 0;
  for (uint64_t draw = 1; draw < 200 && !same; ++draw)
    if (opset_of(p.m.graph, draw) == p.own) same = draw;
  ASSERT_GT(same, 0u);
  {
    const campaign::Setup setup = form_setup("faulty:opset-below=relu@18", same);
    WorkerSet workers(setup.backends, setup.limits);
    const Evaluation ev = evaluate(p.m, setup, workers);
    EXPECT_FALSE(ev.runs[1].formed.ran);
    EXPECT_TRUE(of_stage(ev, core::Stage::Form).empty());
  }
  {
    campaign::Setup off = form_setup("faulty:opset-below=relu@" + std::to_string(p.own), p.draw);
    off.form_relation.on = false;
    WorkerSet workers(off.backends, off.limits);
    const Evaluation ev = evaluate(p.m, off, workers);
    EXPECT_FALSE(ev.runs[1].formed.ran);
    EXPECT_TRUE(ev.findings.empty());
  }
  {
    // A library that reads no exchange form is not asked.
    const campaign::Setup setup = form_setup("faulty:tail=relu@8", p.draw);
    WorkerSet workers(setup.backends, setup.limits);
    const Evaluation ev = evaluate(p.m, setup, workers);
    EXPECT_FALSE(ev.runs[1].formed.ran);
  }
}

TEST(FormRelation, TheDrawChangesTheFormSeed) {
  const ModelCase m = tanh_relu_sigmoid(3);
  ir::Graph d = m.graph;
  d.form_draw = 1;
  EXPECT_NE(ir::form_seed(d), ir::form_seed(m.graph));
  int differs = 0;
  for (uint64_t draw = 1; draw <= 12; ++draw) differs += opset_of(m.graph, draw) != opset_of(m.graph, 0);
  EXPECT_GT(differs, 0);
}

}  // namespace
}  // namespace quorum::campaign
