// The batch request of the worker protocol: one round trip for many cases of one model gives what
// single calls give, per case (weights of its own recompile the model), and a worker death in a
// batch is told to the case that caused it by evaluate_batch.
#include <gtest/gtest.h>

#include "campaign/evaluate.h"
#include "core/rng.h"
#include "data/values.h"
#include "run_worker.h"
#include "worker/supervisor.h"

namespace quorum::worker {
namespace {

using testing::unit;

backends::ValueMap fresh_inputs(const ir::Graph& g, uint64_t seed) {
  core::Rng rng(seed);
  backends::ValueMap in;
  data::complete_inputs(g, in, rng);
  return in;
}

TEST(Batch, ForwardAndTrainMatchSingleCallsPerCase) {
  const ir::SingleNode sn = unit("dense");
  Worker single("faulty", {"loss-grad-x2"});
  Worker batched("faulty", {"loss-grad-x2"});
  BatchRequest req;
  req.forward = req.train = true;
  req.loss = "mse_loss";
  core::Rng rng(7);
  for (uint64_t k = 0; k < 4; ++k) {
    BatchCase c;
    c.inputs = fresh_inputs(sn.graph, 100 + k);
    c.target = data::loss_target("mse_loss", sn.graph.types.at("out").shape, rng);
    if (k >= 2)  // weights of its own: the model is compiled again for this case
      for (const auto& [name, w] : sn.graph.initializers) {
        core::Tensor t = w.to(core::DType::F64);
        for (int64_t i = 0; i < t.numel(); ++i) t.f64()[i] += rng.uniform(-1, 1);
        c.weights.emplace(name, t);
      }
    req.cases.push_back(std::move(c));
  }
  std::vector<BatchResult> got;
  const Outcome o = batched.batch(sn.graph, req, got);
  ASSERT_TRUE(o.ok()) << o.str();
  ASSERT_EQ(got.size(), req.cases.size());
  for (size_t k = 0; k < req.cases.size(); ++k) {
    const BatchCase& c = req.cases[k];
    ir::Graph g = sn.graph;
    for (const auto& [name, w] : c.weights) g.initializers[name] = w;
    ASSERT_TRUE(single.compile(g, {}).ok());
    backends::ValueMap values;
    ASSERT_TRUE(single.forward(c.inputs, true, values).ok());
    backends::TrainResult tr;
    ASSERT_TRUE(single.train({c.inputs, c.target, "mse_loss", {}, 0.01}, tr).ok());
    ASSERT_TRUE(got[k].outcome.ok()) << got[k].outcome.str();
    ASSERT_TRUE(got[k].ran_forward && got[k].trained);
    EXPECT_TRUE(got[k].values.at("out").bit_equal(values.at("out"))) << "case " << k;
    EXPECT_DOUBLE_EQ(got[k].train.loss, tr.loss) << "case " << k;
    EXPECT_TRUE(got[k].train.grads.at("dense.weight").bit_equal(tr.grads.at("dense.weight"))) << "case " << k;
  }
  // Cases with their own weights differ from the first ones' model: the weights did travel.
  EXPECT_FALSE(got[2].values.at("out").bit_equal(got[0].values.at("out")));
  EXPECT_EQ(batched.restarts(), 0);
}

TEST(Batch, ALibraryErrorStaysWithItsCase) {
  // The batch's second case has the wrong input shape: that case fails, the others run.
  const ir::SingleNode sn = unit("relu");
  Worker w("ref");
  BatchRequest req;
  for (int k = 0; k < 3; ++k) req.cases.push_back({{}, sn.inputs, {}});
  req.cases[1].inputs.begin()->second = core::Tensor(core::DType::F64, {1, 1, 1, 1, 1});
  std::vector<BatchResult> got;
  ASSERT_TRUE(w.batch(sn.graph, req, got).ok());
  ASSERT_EQ(got.size(), 3u);
  EXPECT_TRUE(got[0].outcome.ok());
  EXPECT_FALSE(got[1].outcome.ok());
  EXPECT_EQ(got[1].failed_at, 1);
  EXPECT_TRUE(got[2].outcome.ok());
  EXPECT_TRUE(got[2].values.at("out").bit_equal(got[0].values.at("out")));
}

TEST(Batch, EvaluateBatchJudgesEachCaseAsEvaluateDoes) {
  // Every planted numeric fault: the verdicts of a batch are those of single evaluations.
  const ir::SingleNode sn = unit("tanh");
  campaign::Setup setup;
  setup.backends = campaign::parse_backends("ref,faulty:all-numeric");
  setup.mode = campaign::Mode::Both;
  campaign::WorkerSet workers(setup.backends, setup.limits);
  std::vector<campaign::ModelCase> cases;
  core::Rng rng(3);
  for (uint64_t k = 0; k < 3; ++k) {
    campaign::ModelCase m{sn.graph, fresh_inputs(sn.graph, 10 + k), {}};
    campaign::complete_case(m, setup.loss, rng);
    cases.push_back(std::move(m));
  }
  const auto batch = campaign::evaluate_batch(cases, setup, workers);
  ASSERT_EQ(batch.size(), cases.size());
  for (size_t k = 0; k < cases.size(); ++k) {
    const campaign::Evaluation one = campaign::evaluate(cases[k], setup, workers);
    ASSERT_EQ(batch[k].runs.size(), one.runs.size());
    for (size_t i = 0; i < one.runs.size(); ++i) {
      EXPECT_EQ(batch[k].runs[i].backend, one.runs[i].backend);
      EXPECT_EQ(batch[k].runs[i].trained, one.runs[i].trained);
      for (const auto& [name, v] : one.runs[i].values)
        EXPECT_TRUE(batch[k].runs[i].values.at(name).bit_equal(v)) << name;
      for (const auto& [name, v] : one.runs[i].grads)
        EXPECT_TRUE(batch[k].runs[i].grads.at(name).bit_equal(v)) << name;
    }
    ASSERT_EQ(batch[k].findings.size(), one.findings.size());
    for (size_t f = 0; f < one.findings.size(); ++f)
      EXPECT_EQ(batch[k].findings[f].signature(), one.findings[f].signature());
  }
  // The loss gradient fault shows in every case, as in single evaluations.
  EXPECT_FALSE(batch[0].findings.empty());
}

TEST(Batch, AWorkerDeathIsToldToTheCaseThatCausedIt) {
  // hang-on-shape would be timed; crash-on-op crashes every case: each is a crash of its own.
  const ir::SingleNode sn = unit("relu");
  campaign::Setup setup;
  setup.backends = campaign::parse_backends("faulty:crash-on-op=relu,ref");
  setup.mode = campaign::Mode::Infer;
  campaign::WorkerSet workers(setup.backends, setup.limits);
  std::vector<campaign::ModelCase> cases(2, campaign::ModelCase{sn.graph, sn.inputs, {}});
  core::Rng rng(1);
  for (auto& m : cases) campaign::complete_case(m, setup.loss, rng);
  const auto evs = campaign::evaluate_batch(cases, setup, workers);
  for (const auto& ev : evs) {
    ASSERT_EQ(ev.runs.size(), 3u);
    EXPECT_EQ(ev.runs[1].outcome.status, Status::Crash) << ev.runs[1].outcome.str();
    EXPECT_TRUE(ev.runs[2].outcome.ok());
  }
}

}  // namespace
}  // namespace quorum::worker
