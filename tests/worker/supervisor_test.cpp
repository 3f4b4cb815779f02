// Worker processes: the round trip, reuse across models, and every planted fault coming back as
// the right outcome with a useful message — followed by a successful call on a fresh worker.
#include "worker/supervisor.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "ir/build.h"
#include "ops/registry.h"
#include "ref/interpreter.h"
#include "run_worker.h"

namespace quorum::worker {
namespace {

using testing::unit;

using testing::run;

TEST(Worker, RoundTripMatchesInProcessReferenceAndIsReused) {
  Worker w("ref");
  BackendInfo info;
  ASSERT_TRUE(w.hello(info).ok());
  EXPECT_EQ(info.name, "ref");
  EXPECT_TRUE(info.trains);
  const pid_t pid = w.pid();
  for (const char* op : {"conv2d", "lstm", "concat", "softmax"}) {
    const ir::SingleNode sn = unit(op);
    backends::ValueMap got;
    const Outcome o = run(w, sn, &got);
    ASSERT_TRUE(o.ok()) << op << ": " << o.str();
    const auto want = ref::forward(sn.graph, sn.inputs);
    ASSERT_TRUE(got.at("out").bit_equal(want.at("out"))) << op;
  }
  EXPECT_EQ(w.pid(), pid) << "the worker is reused across models";
  EXPECT_EQ(w.restarts(), 0);
}

TEST(Worker, TrainStepCrossesThePipe) {
  Worker w("ref");
  const ir::SingleNode sn = unit("dense");
  ASSERT_TRUE(w.compile(sn.graph, {}).ok());
  backends::TrainRequest req;
  req.inputs = sn.inputs;
  req.target = core::Tensor(core::DType::F64, sn.graph.types.at("out").shape);
  req.loss = "mse_loss";
  backends::TrainResult r;
  const Outcome o = w.train(req, r);
  ASSERT_TRUE(o.ok()) << o.str();
  const auto want = ref::train(sn.graph, sn.inputs, req.target, ref::LossSpec{"mse_loss", {}});
  EXPECT_DOUBLE_EQ(r.loss, want.loss);
  EXPECT_TRUE(r.grads.at("dense.weight").bit_equal(want.grads.at("dense.weight")));
  EXPECT_EQ(r.weights_after.size(), sn.graph.initializers.size());
}

TEST(Worker, SupportsAnswersPerNode) {
  Worker w("ref");
  std::vector<NodeSupport> s;
  ASSERT_TRUE(w.supports(unit("relu").graph, true, s).ok());
  ASSERT_EQ(s.size(), 1u);
  EXPECT_TRUE(s[0].ok);
}

TEST(Worker, LibraryExceptionIsAnOutcome) {
  Worker w("ref");
  const ir::SingleNode sn = unit("relu");
  ASSERT_TRUE(w.compile(sn.graph, {}).ok());
  backends::ValueMap out;
  const Outcome o = w.forward({}, false, out);  // missing input: the library throws
  EXPECT_EQ(o.status, Status::LibraryError);
  EXPECT_NE(o.message.find("missing value for graph input"), std::string::npos) << o.str();
  EXPECT_EQ(w.restarts(), 0) << "an exception does not kill the worker";
}

TEST(Worker, CrashOnOpIsClassifiedAndTheNextCallSucceeds) {
  Worker w("faulty", {"crash-on-op=relu"});
  const Outcome o = run(w, unit("relu"));
  EXPECT_EQ(o.status, Status::Crash);
  EXPECT_EQ(o.message, "SIGSEGV");
  EXPECT_NE(o.stderr_tail.find("crashing in node 'relu'"), std::string::npos) << o.str();
  const Outcome next = run(w, unit("tanh"));
  EXPECT_TRUE(next.ok()) << next.str();
  EXPECT_EQ(w.restarts(), 1);
}

TEST(Worker, AbortOnAttributeAtCompile) {
  Worker w("faulty", {"abort-on-attribute=approximate:\"tanh\""});
  ops::Case c;
  c.inputs = {{core::DType::F64, {2, 3}}};
  c.attrs = {{"approximate", std::string("tanh")}};
  core::Rng rng(1);
  const ir::SingleNode sn = ir::single_node_graph(ops::op("gelu"), c, rng);
  const Outcome o = w.compile(sn.graph, {});
  EXPECT_EQ(o.status, Status::Crash);
  EXPECT_EQ(o.message, "SIGABRT");
  EXPECT_NE(o.stderr_tail.find("attribute approximate=\"tanh\""), std::string::npos) << o.str();
  c.attrs = {{"approximate", std::string("none")}};
  const Outcome next = run(w, ir::single_node_graph(ops::op("gelu"), c, rng));
  EXPECT_TRUE(next.ok()) << next.str();
}

TEST(Worker, HangOnShapeTimesOut) {
  Worker w("faulty", {"hang-on-shape=7"}, Limits{1.0, 16384});
  ops::Case c;
  c.inputs = {{core::DType::F64, {7, 2}}};
  core::Rng rng(1);
  const Outcome o = run(w, ir::single_node_graph(ops::op("relu"), c, rng));
  EXPECT_EQ(o.status, Status::Timeout);
  EXPECT_NE(o.message.find("no answer within 1 s"), std::string::npos);
  c.inputs = {{core::DType::F64, {3, 2}}};
  const Outcome next = run(w, ir::single_node_graph(ops::op("relu"), c, rng));
  EXPECT_TRUE(next.ok()) << next.str();
}

TEST(Worker, LeakUntilOomIsOutOfMemory) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer is incompatible with the address-space limit this fault needs";
#endif
  Worker w("faulty", {"leak-until-oom"}, Limits{30.0, 1024});
  const Outcome o = run(w, unit("relu"));
  EXPECT_EQ(o.status, Status::OutOfMemory) << o.str();
  Worker healthy("faulty", {}, Limits{30.0, 1024});
  EXPECT_TRUE(run(healthy, unit("relu")).ok());
  // The leaking worker survived (bad_alloc is caught); it can serve a model without the fault path.
  EXPECT_EQ(w.restarts(), 0);
}

TEST(Worker, RecycledAfterItsModelBudgetBetweenModelsWithTheSameResults) {
  Limits limits;
  limits.recycle_models = 2;
  Worker w("ref", {}, limits);
  std::vector<pid_t> pids;
  for (int i = 0; i < 5; ++i) {
    const ir::SingleNode sn = unit("conv2d", static_cast<uint64_t>(i + 1));
    backends::ValueMap got;
    const Outcome o = run(w, sn, &got);
    ASSERT_TRUE(o.ok()) << o.str();
    EXPECT_TRUE(got.at("out").bit_equal(ref::forward(sn.graph, sn.inputs).at("out")));
    pids.push_back(w.pid());
  }
  // Models 1-2 on the first process, 3-4 on the second, 5 on the third: forward always ran on the
  // process that compiled its model.
  EXPECT_EQ(pids[0], pids[1]);
  EXPECT_NE(pids[1], pids[2]);
  EXPECT_EQ(pids[2], pids[3]);
  EXPECT_NE(pids[3], pids[4]);
  EXPECT_EQ(w.recycles(), 2);
  EXPECT_EQ(w.restarts(), 0) << "a recycle is not a restart after a death";
}

TEST(Worker, RecycledWhenItsResidentMemoryPassesTheLimit) {
  Limits limits;
  limits.recycle_rss_mb = 200;
  Worker w("faulty", {"leak-per-model=64"}, limits);  // a library that keeps 64 MiB of every model
  for (int i = 0; i < 12; ++i) ASSERT_TRUE(run(w, unit("relu")).ok());
  // A process passes 200 MiB after its third or fourth model, so 12 models need at least 2 fresh ones.
  EXPECT_GE(w.recycles(), 2);
  EXPECT_LE(w.recycles(), 6);
  Worker unlimited("faulty", {"leak-per-model=64"});
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(run(unlimited, unit("relu")).ok());
  EXPECT_EQ(unlimited.recycles(), 0);
}

TEST(Worker, UnknownBackendOrFaultIsAUserError) {
  EXPECT_THROW(Worker("nosuchlib"), core::UserError);
  Worker w("faulty", {"explode"});
  BackendInfo info;
  const Outcome o = w.hello(info);
  EXPECT_EQ(o.status, Status::Crash);
  EXPECT_NE(o.stderr_tail.find("unknown fault 'explode'"), std::string::npos) << o.str();
}

}  // namespace
}  // namespace quorum::worker
