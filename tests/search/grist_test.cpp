// GRIST: model mode finds the model's own NaN/Inf (a log of a softmax, a division by a norm); the
// library target finds a planted fault (faulty:exp-overflow-early) through real workers where random
// inputs of the same budget and seed do not; a seed gives the same search.
#include "ir/edit.h"
#include "search/grist.h"

#include <gtest/gtest.h>

#include <optional>

#include "campaign/grist_library.h"
#include "data/values.h"
#include "ir/json_io.h"

namespace quorum::search {
namespace {

ir::Graph graph(const std::string& shape, const std::string& nodes, const std::string& inits = "[]") {
  return ir::graph_from_json(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": )" + shape +
                                 R"(}], "outputs": ["y"], "initializers": )" + inits + R"(, "nodes": )" + nodes + "}",
                             "test");
}

Candidate start_of(const ir::Graph& g, uint64_t seed, const ops::Interval& range) {
  core::Rng rng(seed);
  Candidate c;
  c.weights = ir::graph_weights(g);
  for (const auto& in : g.inputs)
    c.inputs[in.name] = data::random_with_edges(in.type.shape, rng, range.lo, range.hi, 0);
  return c;
}

Verdict on_model(const ir::Graph& g, const Candidate& c, const ref::VulnerableSite* s) {
  return model_verdict(g, c, s);
}

// A classifier head without epsilon: log(softmax(x W^T)). Its logits can only drift apart as far as
// float32's softmax underflows to 0 with the weights searched (inputs stay in [-1, 1]).
const ir::Graph& log_softmax_model() {
  static const ir::Graph g = graph("[1, 4]",
                                   R"([{"name": "fc", "op": "dense", "inputs": ["x", "w"], "outputs": ["fc"],
                                        "attrs": {"units": 3, "bias": 0}},
                                       {"name": "p", "op": "softmax", "inputs": ["fc"], "outputs": ["p"]},
                                       {"name": "y", "op": "log", "inputs": ["p"], "outputs": ["y"]}])",
                                   R"([{"name": "w", "dtype": "float32", "shape": [3, 4],
                                        "data": [0.3, -0.2, 0.5, 0.1, -0.4, 0.2, 0.1, 0.3, 0.2, 0.6, -0.3, -0.1]}])");
  return g;
}

TEST(Grist, ModelModeFindsTheNaNOfALogOfSoftmax) {
  const ir::Graph& g = log_softmax_model();
  GristOptions opt;
  opt.seed = 5;
  opt.budget = 400;
  opt.aim = -0.01;
  opt.stop_at_first = false;
  const Candidate start = start_of(g, 5, opt.data_range);
  const Evaluate eval = [&g](const Candidate& c, const ref::VulnerableSite* s) { return on_model(g, c, s); };
  // Inputs alone cannot get there: the logits stay within a few units of each other.
  opt.weights = false;
  EXPECT_FALSE(grist(g, start, opt, eval).triggered());
  opt.weights = true;
  const GristResult r = grist(g, start, opt, eval);
  ASSERT_TRUE(r.triggered());
  const TargetOutcome& t = r.targets[static_cast<size_t>(r.trigger)];
  EXPECT_EQ(t.site.node, "y");
  EXPECT_EQ(t.site.op, "log");
  EXPECT_LT(t.best_loss, t.first_loss);
  // The failure-inducing case shows it: log's operand rounds to 0 in float32.
  EXPECT_TRUE(model_verdict(g, t.candidate, &t.site).triggered);
  EXPECT_FALSE(model_verdict(g, start, nullptr).triggered);
}

TEST(Grist, ModelModeFindsADivisionByANorm) {
  // x / sqrt(sum(x^2)) on images in [0, 1]: an all-black image has norm 0.
  const ir::Graph g = graph("[1, 6]", R"([{"name": "sq", "op": "square", "inputs": ["x"], "outputs": ["sq"]},
      {"name": "s", "op": "reduce_sum", "inputs": ["sq"], "outputs": ["s"], "attrs": {"axes": [1]}},
      {"name": "n", "op": "sqrt", "inputs": ["s"], "outputs": ["n"]},
      {"name": "y", "op": "div", "inputs": ["x", "n"], "outputs": ["y"]}])");
  GristOptions opt;
  opt.seed = 2;
  opt.budget = 200;
  opt.aim = -0.01;
  opt.data_range = {0, 1};
  opt.weights = false;
  const Candidate start = start_of(g, 2, opt.data_range);
  const Evaluate eval = [&g](const Candidate& c, const ref::VulnerableSite* s) { return on_model(g, c, s); };
  const GristResult r = grist(g, start, opt, eval);
  ASSERT_TRUE(r.triggered());
  const Candidate& c = r.targets[static_cast<size_t>(r.trigger)].candidate;
  EXPECT_EQ(first_nonfinite_node(g, ref::forward(g, c.inputs)), "y");
  // Random inputs in the same range, same budget: never all zero.
  EXPECT_FALSE(random_inputs(g, start, 200, 2, opt.data_range, eval).triggered());
}

TEST(Grist, SameSeedSameSearch) {
  const ir::Graph& g = log_softmax_model();
  GristOptions opt;
  opt.seed = 9;
  opt.budget = 120;
  opt.aim = -0.01;
  const Candidate start = start_of(g, 9, opt.data_range);
  const Evaluate eval = [&g](const Candidate& c, const ref::VulnerableSite* s) { return on_model(g, c, s); };
  const GristResult a = grist(g, start, opt, eval), b = grist(g, start, opt, eval);
  EXPECT_EQ(a.evaluations, b.evaluations);
  EXPECT_EQ(a.first_trigger, b.first_trigger);
  ASSERT_EQ(a.targets.size(), b.targets.size());
  for (size_t i = 0; i < a.targets.size(); ++i) {
    EXPECT_EQ(a.targets[i].best_loss, b.targets[i].best_loss);
    EXPECT_EQ(a.targets[i].evaluations, b.targets[i].evaluations);
  }
}

TEST(Grist, LibraryTargetFindsAPlantedFaultRandomInputsMiss) {
  // exp(x W^T + b) on faulty:exp-overflow-early, whose exp is +inf for operands in (20, 88.72]. With
  // these weights (none below 0.1 in size) random inputs, edge values included, keep the operand
  // within a few units or put it past 1000.
  const ir::Graph g = graph("[1, 4]",
                            R"([{"name": "fc", "op": "dense", "inputs": ["x", "w", "b"], "outputs": ["fc"],
                                 "attrs": {"units": 2}},
                                {"name": "y", "op": "exp", "inputs": ["fc"], "outputs": ["y"]}])",
                            R"([{"name": "w", "dtype": "float32", "shape": [2, 4],
                                 "data": [0.5, -0.3, 0.8, 0.2, -0.6, 0.4, 0.1, 0.9]},
                                {"name": "b", "dtype": "float32", "shape": [2], "data": [0, 0]}])");
  campaign::Setup setup;
  setup.backends = campaign::parse_backends("faulty:exp-overflow-early");
  setup.mode = campaign::Mode::Infer;
  campaign::WorkerSet workers(setup.backends, setup.limits);
  core::Rng rng(4);
  const core::Tensor target = data::loss_target(setup.loss, {1, 2}, rng);
  const int64_t budget = 24;
  GristOptions opt;
  opt.seed = 4;
  opt.budget = budget;
  const Candidate start = start_of(g, 4, opt.data_range);

  campaign::LibraryHits random_hits;
  const GristResult random = random_inputs(g, start, budget, 4, opt.data_range,
                                           campaign::library_evaluate(g, target, setup, workers, random_hits));
  EXPECT_FALSE(random.triggered());
  EXPECT_EQ(random.evaluations, budget);

  campaign::LibraryHits hits;
  const GristResult r = grist(g, start, opt, campaign::library_evaluate(g, target, setup, workers, hits));
  const std::optional<campaign::SearchHit>& hit = hits.hit;
  ASSERT_TRUE(r.triggered());
  EXPECT_LE(r.first_trigger, budget);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->finding.signature(), "nan|FC|faulty:exp-overflow-early|exp");
  EXPECT_EQ(r.targets[static_cast<size_t>(r.trigger)].site.op, "exp");
}

}  // namespace
}  // namespace quorum::search
