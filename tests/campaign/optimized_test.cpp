// The optimized stage (OC): a planted optimizer fault (faulty's fuse-relu-into: a relu fused wrongly into its
// producer only when the intermediate is not asked for) is found by the optimized run and not by the pinned
// one, and named; a model without fusion gives no finding; --optimized off makes no optimized run.
#include <gtest/gtest.h>

#include "campaign/evaluate.h"
#include "core/rng.h"
#include "gen/builder.h"
#include "ir/graph.h"
#include "ops/registry.h"
#include "support/stage_findings.h"

namespace quorum::campaign {
namespace {

// input -> conv2d -> relu (-> tanh when `tail`): the relu's input is an intermediate only the relu uses.
ModelCase conv_relu(bool tail, uint64_t seed = 3) {
  core::Rng rng(seed);
  gen::Builder b(rng);
  const gen::Vid x = b.input({1, 3, 8, 8});
  const gen::Vid c = *b.layer(ops::op("conv2d"), {x});
  gen::Vid y = b.add("relu", {c});
  if (tail) y = b.add("tanh", {y});
  b.output(y);
  ModelCase m{gen::materialize(b.finish("conv_relu", {}), rng), {}, {}};
  ir::validate(m.graph, "conv_relu");
  complete_case(m, "mse_loss", rng);
  return m;
}

Setup faulty_setup(const std::string& spec, bool optimized = true) {
  Setup s;
  s.backends = parse_backends(spec);
  s.mode = Mode::Infer;
  s.optimized = optimized;
  return s;
}

TEST(Optimized, APlantedFusionFaultIsFoundByTheOptimizedRunAndNamed) {
  const campaign::Setup setup = faulty_setup("faulty:fuse-relu-into=conv2d");
  WorkerSet workers(setup.backends, setup.limits);
  for (const bool tail : {false, true}) {
    const Evaluation ev = evaluate(conv_relu(tail), setup, workers);
    ASSERT_EQ(ev.runs.size(), 2u);
    EXPECT_TRUE(ev.runs[1].optimized.ran);
    EXPECT_TRUE(of_stage(ev, core::Stage::Forward).empty()) << "the pinned run is right";
    const auto oc = of_stage(ev, core::Stage::Optimized);
    ASSERT_EQ(oc.size(), 1u) << (ev.findings.empty() ? "" : ev.findings[0].signature());
    EXPECT_EQ(oc[0].kind, core::FindingKind::Inconsistency);
    EXPECT_EQ(oc[0].op, tail ? "tanh" : "relu");  // the output's node; the fusion is in the signature
    EXPECT_NE(oc[0].signature().find("fused={conv2d+relu}"), std::string::npos) << oc[0].signature();
    EXPECT_NE(oc[0].detail.find("beyond the float32 envelope"), std::string::npos) << oc[0].detail;
  }
}

TEST(Optimized, NoFusionNoFindingAndOffMeansNoRun) {
  // The relu's input is a graph output too: nothing fuses, the optimized run equals the pinned one.
  ModelCase m = conv_relu(false);
  m.graph.outputs.push_back(m.graph.nodes[0].outputs[0]);
  const campaign::Setup setup = faulty_setup("faulty:fuse-relu-into=conv2d");
  WorkerSet workers(setup.backends, setup.limits);
  const Evaluation ev = evaluate(m, setup, workers);
  EXPECT_TRUE(ev.runs[1].optimized.ran);
  EXPECT_TRUE(ev.findings.empty()) << ev.findings[0].signature();

  const campaign::Setup off = faulty_setup("faulty:fuse-relu-into=conv2d", false);
  WorkerSet off_workers(off.backends, off.limits);
  const Evaluation ev_off = evaluate(conv_relu(false), off, off_workers);
  EXPECT_FALSE(ev_off.runs[1].optimized.ran);
  EXPECT_TRUE(ev_off.findings.empty());
  // A backend without an optimizer is not asked.
  const campaign::Setup plain = faulty_setup("ref");
  WorkerSet plain_workers(plain.backends, plain.limits);
  EXPECT_FALSE(evaluate(conv_relu(false), plain, plain_workers).runs[1].optimized.ran);
}

}  // namespace
}  // namespace quorum::campaign
