// The per-node rule judges infinite operands: a library that turns an infinite operand into NaN where
// the kernel's limit is a number is a finding (the planted faulty:tanh-inf-as-nan, found at the
// node whose operand is infinite), while a library that gives the limit there is clean.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "campaign/campaign.h"
#include "store/store.h"
#include "ops/materialize.h"
#include "ops/registry.h"

namespace quorum::campaign {
namespace {

namespace fs = std::filesystem;

std::string scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("quorum_nonfinite_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d.string();
}

// x -> relu -> tanh, x [1, 8] holding +inf (even models) or -inf (odd ones) at one element: relu
// passes +inf on (its limit) and makes -inf a 0, so tanh's operand is computed, not a graph input.
ModelCase relu_tanh(int64_t index, core::Rng& rng) {
  ModelCase m;
  ir::Graph& g = m.graph;
  g.inputs = {{"x", {core::DType::F32, {1, 8}}}};
  g.nodes.push_back({"relu0", "relu", {"x"}, {"relu0"}, {}});
  g.nodes.push_back({"tanh1", "tanh", {"relu0"}, {"tanh1"}, {}});
  g.outputs = {"tanh1"};
  ir::validate(g, "relu_tanh");
  core::Tensor x(core::DType::F64, {1, 8});
  for (int64_t i = 0; i < 8; ++i) x.f64()[i] = rng.uniform(-1, 1);
  x.f64()[rng.randint(0, 7)] = index % 2 == 0 ? INFINITY : -INFINITY;
  m.inputs["x"] = x;
  return m;
}

// x -> gelu, x [1, 8] holding -inf at one element: gelu's limit there is 0, the formula x * Phi(x) as
// written gives -inf * 0 = NaN.
ModelCase gelu_at_minus_inf(int64_t, core::Rng& rng) {
  ModelCase m;
  ir::Graph& g = m.graph;
  g.inputs = {{"x", {core::DType::F32, {1, 8}}}};
  g.nodes.push_back({"gelu0", "gelu", {"x"}, {"gelu0"}, {{"approximate", std::string("none")}}});
  g.outputs = {"gelu0"};
  ir::validate(g, "gelu_at_minus_inf");
  core::Tensor x(core::DType::F64, {1, 8});
  for (int64_t i = 0; i < 8; ++i) x.f64()[i] = rng.uniform(-1, 1);
  x.f64()[rng.randint(0, 7)] = -INFINITY;
  m.inputs["x"] = x;
  return m;
}

Summary run(const std::string& backends, const std::string& out, const ModelFactory& gen = relu_tanh) {
  CampaignOptions opt;
  opt.generator = "relu-tanh";
  opt.setup.backends = parse_backends(backends);
  opt.setup.mode = Mode::Both;
  opt.models = 6;
  opt.seed = 5;
  opt.out = out;
  opt.quiet = true;
  opt.reduce_runs = 20;
  std::ostringstream log;
  return run_campaign(opt, gen, log);
}

TEST(NonFiniteOperands, ALibrarysNaNForAnInfiniteOperandIsAFindingAtThatNode) {
  const std::string out = scratch("fault");
  const Summary s = run("faulty:tanh-inf-as-nan", out);
  EXPECT_EQ(s.errors, 0);
  const auto all = store::open_sqlite_store(out)->findings();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].signature, "nan|FC|faulty:tanh-inf-as-nan|tanh");
  EXPECT_EQ(all[0].node, "tanh1");
  // At most the 3 models with +inf at relu's operand (-inf becomes relu's 0); the campaign's extreme
  // values (a NaN elsewhere in x) may leave one unjudged.
  EXPECT_GE(all[0].hits, 2);
  EXPECT_LE(all[0].hits, 3);
  fs::remove_all(out);
}

// A limit of 0 is judged too: NaN for an exact 0 is excused only where the operands are finite (0 times a
// float32 intermediate that overflowed), not where the 0 is a limit at an infinite operand.
TEST(NonFiniteOperands, ALibrarysNaNAtAZeroLimitIsAFinding) {
  const std::string out = scratch("zero_limit");
  const Summary s = run("faulty:inf-as-nan=gelu", out, gelu_at_minus_inf);
  EXPECT_EQ(s.errors, 0);
  const auto all = store::open_sqlite_store(out)->findings();
  ASSERT_GE(all.size(), 1u);
  EXPECT_EQ(all[0].signature, "nan|FC|faulty:inf-as-nan=gelu|gelu");
  EXPECT_EQ(all[0].node, "gelu0");
  fs::remove_all(out);
}

TEST(NonFiniteOperands, TheLimitOnAnInfiniteOperandIsClean) {
  // The same models on a faulty backend whose fault never fires here: the reference's kernels
  // give tanh(inf) = 1, relu(inf) = inf and their gradients, so nothing is found.
  const std::string out = scratch("clean");
  const Summary s = run("faulty:concat-drops-last", out);
  EXPECT_EQ(s.errors, 0);
  EXPECT_EQ(s.models_run, 6);
  const auto all = store::open_sqlite_store(out)->findings();
  for (const auto& f : all) ADD_FAILURE() << f.signature << ": " << f.detail;
  fs::remove_all(out);
}

}  // namespace
}  // namespace quorum::campaign
