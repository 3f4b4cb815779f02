// Audee's genetic search: crossover and mutation, determinism for a seed, and the planted band
// fault (faulty:band=OP@LO..HI) found by the search where random inputs of the same budget miss it.
#include "search/genetic.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <memory>

#include "campaign/search_case.h"
#include "ir/graph.h"
#include "oracle/known.h"
#include "ops/materialize.h"
#include "ops/registry.h"

namespace quorum::search {
namespace {

Layout one_segment(size_t n, double scale) {
  Layout l;
  Segment s;
  s.name = "x";
  s.shape = {static_cast<int64_t>(n)};
  s.size = n;
  s.scale = scale;
  l.segments.push_back(s);
  l.genes = n;
  return l;
}

TEST(Genetic, CrossoverTakesEachGeneFromOneParent) {
  const std::vector<double> a(1000, 1.0), b(1000, 2.0);
  core::Rng rng(5);
  EXPECT_EQ(crossover(a, b, 1.0, rng), a);
  EXPECT_EQ(crossover(a, b, 0.0, rng), b);
  const auto c = crossover(a, b, 0.3, rng);
  int from_a = 0;
  for (double g : c) {
    ASSERT_TRUE(g == 1.0 || g == 2.0);
    from_a += g == 1.0;
  }
  EXPECT_NEAR(from_a / 1000.0, 0.3, 0.05);  // r1 is the share of genes from the first parent
  core::Rng r1(9), r2(9);
  EXPECT_EQ(crossover(a, b, 0.5, r1), crossover(a, b, 0.5, r2));
}

// The float-aware mutation reaches what Cauchy noise around a tensor's median never does: other binades
// (tiny and huge magnitudes), the other sign, subnormals and float32's ends; half of a mutation's genes
// take such a move, the rest Cauchy noise as before.
TEST(Genetic, FloatMovesReachOtherBinadesSignsSubnormalsAndFloat32sEnds) {
  core::Rng rng(5);
  int tiny = 0, huge = 0, negative = 0, subnormal = 0, infinite = 0, top = 0;
  for (int i = 0; i < 4000; ++i) {
    const double v = float_move(1.5, rng);
    const double a = std::fabs(v);
    tiny += a > 0 && a < 1e-6;
    huge += a > 1e6 && std::isfinite(a);
    negative += v < 0;
    subnormal += a > 0 && a < FLT_MIN;
    infinite += std::isinf(v);
    top += a == FLT_MAX;
  }
  for (const int n : {tiny, huge, negative, subnormal, infinite, top}) EXPECT_GT(n, 20);
  const Layout l = one_segment(4000, 2.0);
  std::vector<double> g(4000, 1.5);
  mutate(g, l, 1.0, rng, true);
  int moved = 0;
  for (double v : g) moved += std::fabs(v) > 1e6 || std::fabs(v) < 1e-6 || std::isinf(v);
  EXPECT_GT(moved, 400);
  std::vector<double> c(4000, 1.5);
  mutate(c, l, 1.0, rng, false);
  int cauchy_far = 0;
  for (double v : c) cauchy_far += std::isinf(v) || (std::fabs(v) > 0 && std::fabs(v) < 1e-6);
  EXPECT_EQ(cauchy_far, 0);
}

// The model's own boundaries: a float move's edge value is, half the time, one of the model's vulnerable
// operands' valid-range boundaries (exp's overflow edge here) or a neighbour of it; a model without one keeps
// the campaign's edge values alone.
TEST(Genetic, FloatMovesReachTheModelsOwnValidRangeBoundaries) {
  ir::Graph g;
  g.inputs.push_back({"x", {core::DType::F32, {1, 8}}});
  g.nodes.push_back({"e", "exp", {"x"}, {"e"}, {}});
  g.outputs = {"e"};
  ir::validate(g, "edges");
  Candidate c;
  c.inputs.emplace("x", core::Tensor(core::DType::F64, {1, 8}));
  const Layout l = layout_of(g, c, Level::Input, 1);
  ASSERT_FALSE(l.edges.empty());
  double top = 0;
  for (double e : l.edges) top = std::max(top, e);
  EXPECT_GT(top, 88.0);  // exp overflows float32 past 88.72
  core::Rng rng(3);
  int at_edge = 0;
  for (int i = 0; i < 4000; ++i) {
    const double v = float_move(1.5, rng, &l.edges);
    at_edge += std::find(l.edges.begin(), l.edges.end(), v) != l.edges.end();
  }
  EXPECT_GT(at_edge, 300);  // a quarter of the moves are edge values, half of those the model's
  ir::Graph r = g;
  r.nodes[0].op = "relu";
  EXPECT_TRUE(layout_of(r, c, Level::Input, 1).edges.empty());
}

TEST(Genetic, MutationAddsCauchyNoiseAtItsRateAndScale) {
  const Layout l = one_segment(4000, 2.0);
  core::Rng rng(11);
  std::vector<double> g(4000, 0.0);
  mutate(g, l, 0.0, rng);
  EXPECT_EQ(g, std::vector<double>(4000, 0.0));
  mutate(g, l, 0.25, rng);
  std::vector<double> changed;
  for (double v : g)
    if (v != 0.0) changed.push_back(std::fabs(v));
  EXPECT_NEAR(changed.size() / 4000.0, 0.25, 0.03);
  // The median |Cauchy(0, s)| is s.
  std::nth_element(changed.begin(), changed.begin() + static_cast<long>(changed.size() / 2), changed.end());
  EXPECT_NEAR(changed[changed.size() / 2], 2.0, 0.3);
}

TEST(Genetic, GenesRoundTripThroughTheLayout) {
  ir::Graph g;
  g.inputs.push_back({"x", {core::DType::F32, {2, 3}}});
  g.initializers.emplace("w", core::Tensor(core::DType::F32, {4}));
  Candidate c;
  c.inputs.emplace("x", core::Tensor(core::DType::F64, {2, 3}));
  for (int i = 0; i < 6; ++i) c.inputs.at("x").f64()[i] = i;
  c.weights.emplace("w", core::Tensor(core::DType::F64, {4}));
  EXPECT_EQ(layout_of(g, c, Level::Input, 1).genes, 6u);
  EXPECT_EQ(layout_of(g, c, Level::Weights, 1).genes, 4u);
  const Layout l = layout_of(g, c, Level::Both, 1);
  ASSERT_EQ(l.genes, 10u);
  std::vector<double> genes = genes_of(c, l);
  EXPECT_EQ(genes[5], 5.0);
  genes[7] = 42;
  const Candidate d = with_genes(c, l, genes);
  EXPECT_EQ(d.weights.at("w").f64()[1], 42.0);
  EXPECT_EQ(d.inputs.at("x").f64()[5], 5.0);
  EXPECT_EQ(genes_of(d, l), genes);
}

// x[1, 32] -> OP: the model whose OP a band fault perturbs (relu in [5, 5.5]: the campaign's random inputs,
// uniform in [-1, 1) with edge values 0, ±1, denormals, ±1e4, ±1e6, never fall there).
campaign::ModelCase band_model(const std::string& op = "relu") {
  campaign::ModelCase m;
  m.graph.inputs.push_back({"x", {core::DType::F32, {1, 32}}});
  m.graph.nodes.push_back({op, op, {"x"}, {op}, {}});
  m.graph.outputs = {op};
  ir::validate(m.graph, "band");
  core::Rng rng(1);
  campaign::complete_case(m, "mse_loss", rng);
  return m;
}

struct Planted {
  std::string backend = "faulty:band=relu@5..5.5", op = "relu";
  campaign::SearchMethod method = campaign::SearchMethod::Ga;
  Fitness fitness = Fitness::Nan;
  bool float_moves = true;
  int64_t budget = 200;
  std::shared_ptr<const oracle::Ledger> known;
  StopRule stop;
};

campaign::Searched run(const Planted& p, uint64_t seed) {
  const campaign::ModelCase m = band_model(p.op);
  campaign::Setup setup;
  setup.backends = campaign::parse_backends(p.backend);
  setup.mode = campaign::Mode::Infer;
  setup.known = p.known;
  campaign::WorkerSet workers(setup.backends, setup.limits);
  campaign::SearchOptions o;
  o.method = p.method;
  o.ga.budget = p.budget;
  o.ga.fitness = p.fitness;
  o.ga.float_moves = p.float_moves;
  o.ga.stop = p.stop;
  core::Rng rng(seed);
  return campaign::search_case(m, o, setup, workers, rng);
}

campaign::Searched run(campaign::SearchMethod method, uint64_t seed, Fitness f = Fitness::Nan) {
  Planted p;
  p.method = method;
  p.fitness = f;
  return run(p, seed);
}

TEST(Genetic, FindsTheBandFaultRandomInputsOfTheSameBudgetMiss) {
  const campaign::Searched ga = run(campaign::SearchMethod::Ga, 1);
  ASSERT_TRUE(ga.result.found) << "best " << ga.result.best;
  EXPECT_EQ(ga.result.failure.oracle, Oracle::Verdict);
  ASSERT_FALSE(ga.evaluation.findings.empty());
  EXPECT_EQ(ga.evaluation.findings[0].op, "relu");
  EXPECT_EQ(ga.evaluation.findings[0].backend, "faulty:band=relu@5..5.5");
  EXPECT_LE(ga.result.evaluations, 200);
  // The failing input holds an operand in the band.
  bool inside = false;
  const core::Tensor x = ga.model.inputs.at("x").to(core::DType::F32).to(core::DType::F64);
  for (int64_t i = 0; i < x.numel(); ++i) inside |= x.f64()[i] >= 5 && x.f64()[i] <= 5.5;
  EXPECT_TRUE(inside);

  const campaign::Searched random = run(campaign::SearchMethod::Random, 1);
  EXPECT_FALSE(random.result.found) << random.result.failure.detail;
  EXPECT_EQ(random.result.evaluations, 200);
}

// The planted faults the float-aware operators exist for: one that needs a subnormal operand, one that needs a
// value near FLT_MAX. Audee's operators (Cauchy noise around the inputs' median magnitude) miss both in the
// budget in which the float-aware GA finds them.
TEST(Genetic, FloatAwareOperatorsFindFaultsAtSubnormalsAndNearFltMaxAudeesMiss) {
  for (const std::string band : {"tanh@1e-41..1e-39", "tanh@1e37..3.5e38"}) {
    Planted p;
    p.backend = "faulty:band=" + band;
    p.op = "tanh";
    p.budget = 100;
    p.float_moves = false;
    const campaign::Searched audee = run(p, 2);
    EXPECT_FALSE(audee.result.found) << band << ": " << audee.result.failure.detail;
    EXPECT_EQ(audee.result.evaluations, 100) << band;
    p.float_moves = true;
    const campaign::Searched floats = run(p, 2);
    ASSERT_TRUE(floats.result.found) << band;
    EXPECT_EQ(floats.result.failure.oracle, Oracle::Verdict) << band;
    ASSERT_FALSE(floats.evaluation.findings.empty()) << band;
    EXPECT_EQ(floats.evaluation.findings[0].op, "tanh") << band;
  }
}

// A failure a ledger knows is a bug already filed: the search goes past it (listed as met) and keeps it as
// the result only when it finds nothing else; --stop_at first stops there; an entry's id stops only there.
TEST(Genetic, GoesPastAKnownFailureAndKeepsItOnlyWhenNothingElseIsFound) {
  Planted p;
  p.budget = 60;
  p.known = std::make_shared<const oracle::Ledger>(oracle::parse_ledger(
      R"({"format": "quorum.known", "backend": "faulty", "entries": [
    {"id": "faulty-relu-band", "class": "bug", "signature": "inconsistency|FC|faulty|relu|{}", "note": "the planted band"}]})",
      "test ledger"));
  const campaign::Searched past = run(p, 1);
  ASSERT_TRUE(past.result.found);
  EXPECT_EQ(past.result.failure.known, "faulty-relu-band");
  EXPECT_EQ(past.result.evaluations, 60);  // it went on to the end of the budget
  ASSERT_EQ(past.result.met.size(), 1u);
  EXPECT_EQ(past.result.met[0].known, "faulty-relu-band");
  EXPECT_EQ(met_text(past.result.met), "faulty-relu-band@" + std::to_string(past.result.met[0].evaluation));
  ASSERT_FALSE(past.evaluation.findings.empty());
  EXPECT_EQ(past.evaluation.findings[0].known, "faulty-relu-band");

  p.stop = stop_rule_from_string("first");
  const campaign::Searched first = run(p, 1);
  ASSERT_TRUE(first.result.found);
  EXPECT_TRUE(first.result.met.empty());
  EXPECT_EQ(first.result.evaluations, past.result.met[0].evaluation);

  p.stop = stop_rule_from_string("faulty-relu-band");
  const campaign::Searched entry = run(p, 1);
  EXPECT_EQ(entry.result.evaluations, past.result.met[0].evaluation);
  EXPECT_TRUE(entry.result.met.empty());
  p.stop = stop_rule_from_string("another-entry");
  const campaign::Searched other = run(p, 1);
  EXPECT_EQ(other.result.met.size(), 1u);
  EXPECT_EQ(other.result.evaluations, 60);
}

// A failure of the search's own label oracle (no verdict holds it) is recorded, by `quorum search` and by a
// campaign's --search alike, as an inconsistency at the model's output that names the oracle.
TEST(Genetic, ALabelFailureTheVerdictsDoNotHoldIsRecordedAtTheOutput) {
  campaign::Searched s;
  s.model = band_model();
  s.result.found = true;
  s.result.failure = {Oracle::Label, "faulty says 3, ref says 1 (row 0)", "", "faulty"};
  oracle::BackendRun ref, lib;
  ref.backend = "ref";
  ref.is_reference = true;
  lib.backend = "faulty";
  s.evaluation.runs = {ref, lib};
  const oracle::Finding f = campaign::search_finding(s);
  EXPECT_EQ(f.kind, oracle::Kind::Inconsistency);
  EXPECT_EQ(f.backend, "faulty");
  EXPECT_EQ(f.node, "relu");
  EXPECT_EQ(f.detail, "search oracle 'label': faulty says 3, ref says 1 (row 0)");
  // With a verdict, the verdict.
  oracle::Finding v;
  v.op = "relu";
  v.detail = "a verdict";
  s.evaluation.findings = {v};
  EXPECT_EQ(campaign::search_finding(s).detail, "a verdict");
}

TEST(Genetic, IsDeterministicForASeed) {
  const campaign::Searched a = run(campaign::SearchMethod::Ga, 3, Fitness::Inconsistency);
  const campaign::Searched b = run(campaign::SearchMethod::Ga, 3, Fitness::Inconsistency);
  EXPECT_EQ(a.result.found, b.result.found);
  EXPECT_EQ(a.result.evaluations, b.result.evaluations);
  EXPECT_EQ(a.result.best_by_generation, b.result.best_by_generation);
  EXPECT_TRUE(a.model.inputs.at("x").bit_equal(b.model.inputs.at("x")));
}

}  // namespace
}  // namespace quorum::search

namespace quorum::search {
namespace {

oracle::BackendRun run_of(const std::string& backend, std::vector<double> v, bool reference = false) {
  oracle::BackendRun r;
  r.backend = backend;
  r.is_reference = reference;
  core::Tensor t(core::DType::F64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.f64()[i] = v[i];
  r.values.emplace("y", t);
  return r;
}

TEST(Divergence, RewardsOneLibraryAwayFromTheOthersNotTheModelsOwnOverflow) {
  ir::Graph g;
  g.outputs = {"y"};
  const double inf = std::numeric_limits<double>::infinity();
  // One library's NaN where the reference is finite: the largest reward.
  Trial t{{run_of("ref", {1, 2}, true), run_of("a", {1, std::nan("")})}, {}};
  EXPECT_EQ(divergence(g, t), 1e3);
  // The model's own overflow (the reference is infinite there too) scores nothing.
  t = {{run_of("ref", {1, inf}, true), run_of("a", {1, inf}), run_of("b", {1, inf})}, {}};
  EXPECT_EQ(divergence(g, t), 0.0);
  // Two libraries: the lead of the farther over the nearer, relative to the reference's magnitude.
  t = {{run_of("ref", {1, 3}, true), run_of("a", {1, 3.4}), run_of("b", {1, 3.1})}, {}};
  EXPECT_NEAR(divergence(g, t), (0.4 - 0.1) / 4, 1e-12);
  // Both libraries equally far: no library-specific behaviour.
  t = {{run_of("ref", {1, 3}, true), run_of("a", {1, 3.4}), run_of("b", {1, 3.4})}, {}};
  EXPECT_NEAR(divergence(g, t), 0.0, 1e-12);
  // Backward too: a gradient only one library gets wrong.
  t = {{run_of("ref", {1, 3}, true), run_of("a", {1, 3}), run_of("b", {1, 3})}, {}};
  for (auto& r : t.runs) {
    r.trained = true;
    r.grads.emplace("w", r.values.at("y"));
  }
  t.runs[2].grads.at("w").f64()[0] = inf;
  EXPECT_EQ(divergence(g, t), 1e3);
}

TEST(Fitness, InconsistencyAndSpreadAtTheLogits) {
  ir::Graph g;
  g.outputs = {"y"};
  Trial t{{run_of("ref", {0, 4}, true), run_of("a", {1, 2})}, {}};
  EXPECT_DOUBLE_EQ(fitness_of(g, t, Fitness::Inconsistency), 1.5);  // one library: against the reference
  EXPECT_DOUBLE_EQ(fitness_of(g, t, Fitness::Nan), 1.0);
  t.runs.push_back(run_of("b", {1, 5}));
  EXPECT_DOUBLE_EQ(fitness_of(g, t, Fitness::Inconsistency), 1.5);  // two: between them
  EXPECT_DOUBLE_EQ(fitness_of(g, t, Fitness::Nan), 4.0);
  // A changed top-1 label: with the reference, the per-node verdicts have judged every node (none here: what
  // they leave is float32's, seed 10477's five label flips); without one, a failure.
  t.runs[2] = run_of("b", {3, 2});
  EXPECT_FALSE(failure_of(g, t).has_value());
  t.runs.erase(t.runs.begin());
  ASSERT_TRUE(failure_of(g, t).has_value());
  EXPECT_EQ(failure_of(g, t)->oracle, Oracle::Label);
  EXPECT_EQ(failure_of(g, t)->backend, "a");
  // And the NaN/Inf check, only without a reference.
  t.runs[1] = run_of("b", {std::nan(""), 2});
  ASSERT_TRUE(failure_of(g, t).has_value());
  EXPECT_EQ(failure_of(g, t)->oracle, Oracle::Nan);
}

// Seed 10463 (fuzz --search ga): OpenCV's dense row [-inf, nan, nan, nan] read as label 0 and ORT's all-NaN
// softmax row as label 0, each against a finite row, after a float32 overflow upstream that the per-node rule
// judged; both were reported as label failures. A row holding NaN or an infinity has no top-1 label, and with
// the reference the verdicts alone judge.
TEST(Fitness, ARowHoldingNanOrAnInfinityHasNoLabel) {
  ir::Graph g;
  g.outputs = {"y"};
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  Trial t{{run_of("ref", {-103062, 50776, 8857, -221647}, true), run_of("torch", {-103062, 50776, 8857, -221647}),
           run_of("opencv", {-inf, nan, nan, nan})},
          {}};
  EXPECT_FALSE(failure_of(g, t).has_value());
  t = {{run_of("ref", {0, 1, 0}, true), run_of("ort", {nan, nan, nan})}, {}};
  EXPECT_FALSE(failure_of(g, t).has_value());
  t = {{run_of("ref", {0, 1, 0}, true), run_of("ort", {inf, 1, 0})}, {}};
  EXPECT_FALSE(failure_of(g, t).has_value());
}

}  // namespace
}  // namespace quorum::search
