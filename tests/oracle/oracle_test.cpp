// The oracles on synthetic runs: born-here localisation, voting, the NaN and crash rules, LC and BC.
#include "oracle/oracle.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ir/json_io.h"
#include "oracle/exact_run.h"
#include "ref/interpreter.h"

namespace quorum::oracle {
namespace {

// x -> a (relu) -> b (neg) -> d (dense, weights W, bias B) -> output
ir::Graph graph() {
  return ir::graph_from_json(R"({
    "inputs": [{"name": "x", "dtype": "float32", "shape": [1, 4]}], "outputs": ["d"],
    "initializers": [{"name": "W", "dtype": "float32", "shape": [2, 4], "data": [1, 2, 3, 4, 5, 6, 7, 8]},
                     {"name": "B", "dtype": "float32", "shape": [2], "data": [0, 1]}],
    "nodes": [{"name": "a", "op": "relu", "inputs": ["x"], "outputs": ["a"]},
              {"name": "b", "op": "neg", "inputs": ["a"], "outputs": ["b"]},
              {"name": "d", "op": "dense", "inputs": ["b", "W", "B"], "outputs": ["d"], "attrs": {"units": 2}}]})",
                             "g");
}

using testing::exact_run;

struct Fixture {
  ir::Graph g = graph();
  ref::ValueMap in{{"x", core::Tensor::f64({1, 4}, {0.5, -1, 2, 3})}};
  ref::TrainResult tr = ref::train(g, in, core::Tensor::f64({1, 2}, {0, 0}), ref::LossSpec{"mse_loss", {}});

  BackendRun run(const std::string& name, bool is_ref = false) const { return exact_run(g, tr, name, is_ref); }
  std::vector<BackendRun> three() const { return {run("ref", true), run("A"), run("B")}; }
};

// Muffin's rule (METHODS.md §1): pairs of backends, born-here, voting.
Thresholds muffin() {
  Thresholds th;
  th.rule = Rule::Muffin;
  return th;
}

void bump(core::Tensor& t, double by) {
  for (int64_t i = 0; i < t.numel(); ++i) t.f64()[i] += by;
}

TEST(Oracle, AgreementGivesNoFinding) {
  Fixture f;
  EXPECT_TRUE(judge(f.g, f.three(), muffin()).empty());
}

TEST(Oracle, ForwardDeviationIsBornAtItsNodeAndBlamedByVote) {
  Fixture f;
  auto runs = f.three();
  bump(runs[1].values["b"], 1.0);
  bump(runs[1].values["d"], 5.0);  // inherited downstream: must not be reported again
  const auto found = judge(f.g, runs, muffin());
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, Kind::Inconsistency);
  EXPECT_EQ(found[0].stage, Stage::Forward);
  EXPECT_EQ(found[0].node, "b");
  EXPECT_EQ(found[0].backend, "A");
  EXPECT_DOUBLE_EQ(found[0].distance, 1.0);
  EXPECT_EQ(found[0].against, (std::vector<std::string>{"ref", "B"}));
  EXPECT_GT(found[0].rate, 1e6);
}

TEST(Oracle, SmallOrWithinToleranceDeviationsAreNotFindings) {
  Fixture f;
  auto runs = f.three();
  bump(runs[1].values["b"], 0.1);  // below T = 0.15
  EXPECT_TRUE(judge(f.g, runs, muffin()).empty());
  Thresholds strict = muffin();
  strict.T = 0.01;
  EXPECT_EQ(judge(f.g, runs, strict).size(), 1u);
}

// A difference the producer's tolerance allows (0.3 next to 1e7 in relu's output) that the next
// node exposes (clip to [0.1, 100] removes the large element): a node computed right on each
// backend's own inputs is not where a bug was born; computed wrong on them, it is.
TEST(Oracle, AnExposedInputDifferenceIsInheritedWhenTheNodeIsRightOnItsOwnInputs) {
  const ir::Graph g = ir::graph_from_json(R"({
    "inputs": [{"name": "x", "dtype": "float32", "shape": [1, 2]}], "outputs": ["b"],
    "nodes": [{"name": "a", "op": "relu", "inputs": ["x"], "outputs": ["a"]},
              {"name": "b", "op": "clip", "inputs": ["a"], "outputs": ["b"], "attrs": {"min": 0.1, "max": 100}}]})",
                                          "g");
  const ref::ValueMap in{{"x", core::Tensor::f64({1, 2}, {1e7, 0.5})}};
  const ref::ValueMap want = ref::forward(g, in);
  auto run = [&](const std::string& name, bool is_ref) {
    BackendRun r;
    r.backend = name;
    r.is_reference = is_ref;
    r.values = {{"a", want.at("a")}, {"b", want.at("b")}};
    return r;
  };
  std::vector<BackendRun> runs = {run("ref", true), run("A", false), run("B", false)};
  runs[1].values["a"].f64()[1] = 0.8;
  runs[1].values["b"].f64()[1] = 0.8;  // clip of A's own value: right
  EXPECT_TRUE(judge(g, runs, muffin(), &in).empty());
  runs[1].values["b"].f64()[1] = 0.1;  // wrong on its own input: born here
  const auto found = judge(g, runs, muffin(), &in);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].node, "b");
  EXPECT_EQ(found[0].backend, "A");
}

TEST(Oracle, RelativeMetricIsAvailable) {
  Fixture f;
  auto runs = f.three();
  runs[1].values["b"].f64()[3] *= 1.01;  // 1 % off on one element of four
  Thresholds rel = muffin();
  rel.relative_metric = true;
  const auto found = judge(f.g, runs, rel);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].node, "b");
}

TEST(Oracle, NaNCountsOnlyWhenAnotherBackendRanClean) {
  Fixture f;
  auto runs = f.three();
  runs[1].values["a"].f64()[0] = NAN;
  runs[1].values["b"].f64()[0] = NAN;
  auto found = judge(f.g, runs, muffin());
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(found[0].kind, Kind::NaN);
  EXPECT_EQ(found[0].stage, Stage::Forward);
  EXPECT_EQ(found[0].node, "a");
  EXPECT_EQ(found[0].backend, "A");
  EXPECT_EQ(found[0].signature(), "nan|FC|A|relu");
  // Only the float64 reference clean: float32 overflow, not a finding.
  EXPECT_TRUE(judge(f.g, {runs[0], runs[1]}, muffin()).empty());
  for (auto& r : runs) r.values["a"].f64()[0] = NAN;
  for (const auto& x : judge(f.g, runs, muffin())) EXPECT_NE(x.kind, Kind::NaN) << x.detail;
}

TEST(Oracle, NaNTheReferenceHasTooIsNotAFinding) {
  Fixture f;
  auto runs = f.three();
  for (size_t i : {0u, 1u}) runs[i].values["a"].f64()[0] = NAN;  // ref and A: the model's own NaN (say 0/0)
  for (const auto& x : judge(f.g, runs, muffin())) EXPECT_NE(x.kind, Kind::NaN) << x.detail;
}

TEST(Oracle, WithOneLibraryTheReferenceWinsEveryTie) {
  Fixture f;
  auto runs = f.three();
  bump(runs[1].loss_grad, 1.0);  // the loss value agrees; only its gradient differs
  const auto found = judge(f.g, {runs[0], runs[1]}, muffin());
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].stage, Stage::Loss);
  EXPECT_EQ(found[0].backend, "A");
}

TEST(Oracle, TheReferenceIsBlamedWhenTheLibrariesAgree) {
  Fixture f;
  auto runs = f.three();
  bump(runs[1].values["b"], 1.0);
  bump(runs[2].values["b"], 1.0);
  const auto found = judge(f.g, runs, muffin());
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].backend, "ref");
}

TEST(Oracle, CrashesAreSplitByStageAndNormalised) {
  Fixture f;
  auto runs = f.three();
  runs[2].values.clear();
  runs[2].trained = false;
  runs[2].outcome = {worker::Status::Crash, "SIGSEGV", 11, "bad access at 0x7ffe12 in /usr/lib/x.so:42"};
  runs[2].failed_at = Stage::Compile;
  auto found = judge(f.g, runs, muffin());
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, Kind::Crash);
  EXPECT_EQ(found[0].stage, Stage::Compile);
  EXPECT_EQ(found[0].message, "crash: SIGSEGV | bad access at ADDR in PATH:N");
  EXPECT_NE(found[0].detail.find("conversion"), std::string::npos);
  // Nobody ran normally: not a finding.
  for (auto& r : runs) r.outcome = runs[2].outcome;
  EXPECT_TRUE(judge(f.g, runs, muffin()).empty());
  // An unsupported model is an abstention, not a crash.
  auto runs2 = f.three();
  runs2[1].outcome = {worker::Status::Unsupported, "no", 0, ""};
  runs2[1].unsupported = true;
  runs2[1].values.clear();
  EXPECT_TRUE(judge(f.g, runs2, muffin()).empty());
}

TEST(Oracle, ACrashNamingAValueBlamesTheNodeComputingIt) {
  // An engine that returns a value with the wrong shape says which value: the finding gets its node.
  Fixture f;
  auto runs = f.three();
  runs[2].values.clear();
  runs[2].trained = false;
  runs[2].outcome = {worker::Status::LibraryError,
                     "OpenCV returned 'b' with shape [4] (4 elements), Quorum's shape is [1,3]", 0, ""};
  runs[2].failed_at = Stage::Forward;
  for (const Thresholds& th : {muffin(), Thresholds{}}) {
    const auto found = judge(f.g, runs, th);
    ASSERT_EQ(found.size(), 1u);
    EXPECT_EQ(found[0].kind, Kind::Crash);
    EXPECT_EQ(found[0].node, f.g.producer("b")->name);
    EXPECT_EQ(found[0].op, f.g.producer("b")->op);
  }
  // A message naming nothing of the model keeps the finding without a node.
  runs[2].outcome.message = "OpenCV returned 'blob' of type 5";
  EXPECT_EQ(judge(f.g, runs, muffin()).at(0).op, "");
}

TEST(Oracle, LossInconsistencyOnlyWhenOutputsAgree) {
  Fixture f;
  auto runs = f.three();
  runs[1].loss *= 1.05;  // 5 % off: beyond the loss tolerance and T
  auto found = judge(f.g, runs, muffin());
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].stage, Stage::Loss);
  EXPECT_EQ(found[0].backend, "A");
  EXPECT_EQ(found[0].op, "mse_loss");
  bump(runs[1].values["d"], 3.0);  // outputs differ now: the forward finding, no LC
  found = judge(f.g, runs, muffin());
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].stage, Stage::Forward);
}

TEST(Oracle, BackwardInconsistencyIsBornWhereIncomingGradientsAgree) {
  Fixture f;
  auto runs = f.three();
  bump(runs[2].grads["W"], 2.0);  // dense's weight gradient on B
  bump(runs[2].grads["b"], 2.0);  // dense's input gradient on B
  bump(runs[2].grads["a"], 2.0);  // inherited upstream: not reported again
  auto found = judge(f.g, runs, muffin());
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].stage, Stage::Backward);
  EXPECT_EQ(found[0].node, "d");
  EXPECT_EQ(found[0].backend, "B");
}

TEST(Oracle, GradientSplitAtATieOfMaximumIsNotAFinding) {
  const ir::Graph g = ir::graph_from_json(R"({
    "inputs": [{"name": "x", "dtype": "float32", "shape": [1, 3]}, {"name": "y", "dtype": "float32", "shape": [1, 3]}],
    "outputs": ["r"],
    "nodes": [{"name": "a", "op": "neg", "inputs": ["x"], "outputs": ["a"]},
              {"name": "b", "op": "neg", "inputs": ["y"], "outputs": ["b"]},
              {"name": "m", "op": "maximum", "inputs": ["a", "b"], "outputs": ["m"]},
              {"name": "r", "op": "relu", "inputs": ["m"], "outputs": ["r"]}]})",
                                          "tie");
  const backends::ValueMap in{{"x", core::Tensor::f64({1, 3}, {-1, 2, -3})},
                              {"y", core::Tensor::f64({1, 3}, {-1, 1, 0})}};
  const auto tr = ref::train(g, in, core::Tensor::f64({1, 3}, {0, 0, 0}), ref::LossSpec{"mse_loss", {}});
  std::vector<BackendRun> runs{exact_run(g, tr, "ref", true), exact_run(g, tr, "A", false),
                               exact_run(g, tr, "B", false)};
  // Element 0 is a tie (a = b = 1): A splits its gradient between the operands.
  const double g0 = runs[1].grads["a"].f64()[0];
  ASSERT_NE(g0, 0.0);
  runs[1].grads["a"].f64()[0] = g0 / 2;
  runs[1].grads["b"].f64()[0] = g0 / 2;
  EXPECT_TRUE(judge(g, runs, muffin(), &in).empty());
  // Off the tie (element 1), the same change is a finding.
  runs[1].grads["a"].f64()[1] += 1.0;
  const auto found = judge(g, runs, muffin(), &in);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].node, "m");
  EXPECT_EQ(found[0].backend, "A");
}

TEST(Oracle, GradientAtAKinkWithinTheOneSidedDerivativesIsNotAFinding) {
  const ir::Graph g = ir::graph_from_json(R"({
    "inputs": [{"name": "x", "dtype": "float32", "shape": [1, 3]}], "outputs": ["c"],
    "nodes": [{"name": "a", "op": "neg", "inputs": ["x"], "outputs": ["a"]},
              {"name": "c", "op": "clip", "inputs": ["a"], "outputs": ["c"], "attrs": {"min": -0.75, "max": 2}}]})",
                                          "kink");
  // a = -x: element 0 sits on clip's lower bound, element 1 inside.
  const backends::ValueMap in{{"x", core::Tensor::f64({1, 3}, {0.75, -1, 3})}};
  const auto tr = ref::train(g, in, core::Tensor::f64({1, 3}, {5, 5, 5}), ref::LossSpec{"mse_loss", {}});
  std::vector<BackendRun> runs{exact_run(g, tr, "ref", true), exact_run(g, tr, "A", false),
                               exact_run(g, tr, "B", false)};
  ASSERT_EQ(runs[0].grads["a"].f64()[0], 0.0);  // the catalogue gives 0 at the bound
  // A passes the gradient at the bound (libtorch does): the other one-sided derivative.
  runs[1].grads["a"].f64()[0] = runs[1].grads["c"].f64()[0];
  EXPECT_TRUE(judge(g, runs, muffin(), &in).empty());
  // Beyond both one-sided derivatives at the bound, or off the kink: findings.
  runs[1].grads["a"].f64()[0] = 3 * runs[1].grads["c"].f64()[0];
  EXPECT_EQ(judge(g, runs, muffin(), &in).size(), 1u);
  runs[1].grads["a"].f64()[0] = runs[1].grads["c"].f64()[0];
  runs[1].grads["a"].f64()[1] += 1.0;
  const auto found = judge(g, runs, muffin(), &in);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].node, "c");
  EXPECT_EQ(found[0].backend, "A");
}

TEST(Oracle, GradientSplitAmongTiedCellsOfAMaxPoolIsNotAFindingButDuplicatingItIs) {
  const ir::Graph g = ir::graph_from_json(R"({
    "inputs": [{"name": "x", "dtype": "float32", "shape": [1, 1, 4]}], "outputs": ["m"],
    "nodes": [{"name": "a", "op": "neg", "inputs": ["x"], "outputs": ["a"]},
              {"name": "m", "op": "max_pool1d", "inputs": ["a"], "outputs": ["m"],
               "attrs": {"kernel_shape": [2], "strides": [2]}}]})",
                                          "pool");
  const backends::ValueMap in{{"x", core::Tensor::f64({1, 1, 4}, {-1, -1, 0, -2})}};  // a = [1, 1, 0, 2]
  const auto tr = ref::train(g, in, core::Tensor::f64({1, 1, 2}, {5, 5}), ref::LossSpec{"mse_loss", {}});
  std::vector<BackendRun> runs{exact_run(g, tr, "ref", true), exact_run(g, tr, "A", false),
                               exact_run(g, tr, "B", false)};
  const double g0 = runs[1].grads["a"].f64()[0];
  ASSERT_NE(g0, 0.0);
  ASSERT_EQ(runs[1].grads["a"].f64()[1], 0.0);  // the catalogue routes it to the first maximum
  runs[1].grads["a"].f64()[0] = g0 / 2;          // A splits it between the tied cells
  runs[1].grads["a"].f64()[1] = g0 / 2;
  EXPECT_TRUE(judge(g, runs, muffin(), &in).empty());
  runs[1].grads["a"].f64()[0] = g0;  // A gives it to both: gradient made from nothing
  runs[1].grads["a"].f64()[1] = g0;
  const auto found = judge(g, runs, muffin(), &in);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].node, "m");
  EXPECT_EQ(found[0].backend, "A");
  // Second window [0, 2]: cell 3 is the sole maximum everywhere; a gradient scaled there is a bug.
  runs[1].grads["a"].f64()[0] = g0;
  runs[1].grads["a"].f64()[1] = 0;
  runs[1].grads["a"].f64()[3] *= 3;
  EXPECT_EQ(judge(g, runs, muffin(), &in).size(), 1u);
  // Near-equal cells ordered differently on A (its first window reads [1, 1 + 1e-7]): A routes the
  // gradient to cell 1, the others to cell 0. Rounding, not a bug.
  runs[1].grads["a"].f64()[3] = runs[0].grads["a"].f64()[3];
  runs[1].values["a"].f64()[1] += 1e-7;
  runs[1].grads["a"].f64()[0] = 0;
  runs[1].grads["a"].f64()[1] = g0;
  EXPECT_TRUE(judge(g, runs, muffin(), &in).empty());
}

TEST(Oracle, GradientSplitAtATieOfReduceMaxIsNotAFinding) {
  const ir::Graph g = ir::graph_from_json(R"({
    "inputs": [{"name": "x", "dtype": "float32", "shape": [2, 3]}], "outputs": ["r"],
    "nodes": [{"name": "a", "op": "neg", "inputs": ["x"], "outputs": ["a"]},
              {"name": "r", "op": "reduce_max", "inputs": ["a"], "outputs": ["r"], "attrs": {"axes": [1], "keepdims": 0}}]})",
                                          "rtie");
  const backends::ValueMap in{{"x", core::Tensor::f64({2, 3}, {-2, -2, 1, -1, -3, 0})}};
  const auto tr = ref::train(g, in, core::Tensor::f64({2}, {0, 0}), ref::LossSpec{"mse_loss", {}});
  std::vector<BackendRun> runs{exact_run(g, tr, "ref", true), exact_run(g, tr, "A", false),
                               exact_run(g, tr, "B", false)};
  // Row 0 has a tie (2, 2): A splits the gradient between the two maxima.
  auto& ga = runs[1].grads["a"];
  const double g0 = ga.f64()[0];
  ASSERT_NE(g0, 0.0);
  ga.f64()[0] = g0 / 2;
  ga.f64()[1] = g0 / 2;
  EXPECT_TRUE(judge(g, runs, muffin(), &in).empty());
  ga.f64()[3] += 1.0;  // row 1 has a single maximum (1): a real difference
  const auto found = judge(g, runs, muffin(), &in);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].node, "r");
}

TEST(Oracle, NormalizeMessage) {
  EXPECT_EQ(normalize_message("error at 0xdeadBEEF in /usr/lib/libtorch.so line 42, size 3.5e+10"),
            "error at ADDR in PATH line N, size N");
  // Whitespace collapses to one space and none is left at the end (a library's message ending in a
  // newline, or a backtrace left empty).
  EXPECT_EQ(normalize_message("failed in 'getBlob'\n  \n"), "failed in 'getBlob'");
}

}  // namespace
}  // namespace quorum::oracle
