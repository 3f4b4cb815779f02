// Backend agreement: compiled once per backend (it links exactly one backend library). For every
// catalogue operator the backend supports, cases drawn from the operator's domain must agree with
// the float64 reference within the operator's tolerance — forward, and for training backends the
// loss, the loss gradient, every gradient and the weights after one SGD step. A pair that disagrees
// is waived by an entry of the backend's ledger (known_differences.json) for that operator, case
// and stage, or fails here; a waiver that is no longer needed fails too.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "backends/backend.h"
#include "data/dataset.h"
#include "gen/generator.h"
#include "ir/build.h"
#include "ops/materialize.h"
#include "ops/registry.h"
#include "oracle/compare.h"
#include "oracle/known.h"
#include "ref/interpreter.h"

namespace quorum::backends {
namespace {

constexpr int kCases = 6;

Backend& backend() {
  static std::unique_ptr<Backend> b = create_backend({});
  return *b;
}

// The backend's known-issue ledger (src/backends/<name>/known_differences.json): its agreement
// waivers name the (operator, case, stage) triples that disagree for a recorded reason.
const oracle::Ledger& ledger() {
  static const oracle::Ledger l = [] {
    std::ifstream probe(QUORUM_KNOWN_DIFFERENCES);
    return probe ? oracle::load_ledger(QUORUM_KNOWN_DIFFERENCES) : oracle::Ledger{};
  }();
  return l;
}

// The entry waiving (op, case, stage) on this CPU, or null: an entry whose case shows only on some CPUs
// (KnownEntry::needs_cpu, lacks_cpu) waives nothing elsewhere.
const oracle::KnownEntry* waiver(const std::string& op, int k, core::Stage stage) {
  for (const auto& e : ledger().entries)
    if (e.cpu_unmet().empty())
      for (const auto& w : e.agreement)
      if (w.op == op && w.case_index == k && w.stage == stage) return &e;
  return nullptr;
}

// One disagreement: the case, the stage it belongs to (forward and compile: FC; the loss and its gradient:
// LC; gradients and the SGD step: BC), what differs.
struct Failure {
  int k;
  core::Stage stage;
  std::string what;
};

uint64_t name_seed(const std::string& s) { return core::fnv1a(s); }

class Agreement : public ::testing::TestWithParam<std::string> {};

TEST_P(Agreement, MatchesReference) {
  const ops::OpSpec& spec = ops::op(GetParam());
  Backend& b = backend();
  int supported = 0;
  std::vector<Failure> failures;
  for (int k = 0; k < kCases; ++k) {
    core::Rng rng(name_seed(spec.name) + static_cast<uint64_t>(k));
    ops::Case c = spec.sample(rng);
    const ir::SingleNode sn = ir::single_node_graph(spec, c, rng, core::DType::F32);
    const ir::Graph& g = sn.graph;
    const std::string where = "case " + std::to_string(k) + " " + core::to_string(g.nodes[0].attrs) + " inputs " +
                              core::to_string(g.inputs[0].type.shape);
    const Support s = supports_graph(b, g);
    if (!s.ok) {
      EXPECT_FALSE(s.reason.empty()) << "an unsupported node must say why";
      continue;
    }
    ++supported;
    std::unique_ptr<Session> session;
    try {
      session = b.compile(g, CompileOptions{core::DType::F32, 1});
    } catch (const std::exception& e) {
      failures.push_back({k, core::Stage::Forward, where + ": compile failed: " + e.what()});
      continue;
    }
    std::vector<core::TensorType> in_types;
    for (const auto& in : g.inputs) in_types.push_back(in.type);
    const ops::Tolerance tol = spec.tolerance(core::DType::F32, in_types, g.nodes[0].attrs);
    ValueMap inputs;
    for (const auto& [name, t] : sn.inputs) inputs.emplace(name, t.to(core::DType::F32));
    try {
      const ValueMap got = session->forward(inputs, true);
      const ValueMap want = reference_forward(g, sn.inputs, core::DType::F32);
      for (const auto& out : g.outputs) {
        if (!got.count(out)) {
          failures.push_back({k, core::Stage::Forward, where + ": forward did not return '" + out + "'"});
          continue;
        }
        const oracle::Diff d = oracle::compare(got.at(out), want.at(out), tol);
        if (!d.ok) failures.push_back({k, core::Stage::Forward, where + ": forward " + out + ": " + d.describe()});
      }
    } catch (const std::exception& e) {
      failures.push_back({k, core::Stage::Forward, where + ": forward threw: " + e.what()});
      continue;
    }
    if (!spec.differentiable() || !supports_graph(b, g, true).ok) continue;
    // One training step with an MSE loss on output 0 against a random target.
    TrainRequest req;
    req.inputs = inputs;
    req.target = ops::fill_input(g.types.at(g.outputs[0]), ops::InputGen{-1, 1}, rng);
    req.loss = "mse_loss";
    req.learning_rate = 0.1;
    ir::Graph rounded = g;
    for (auto& [name, t] : rounded.initializers) t = t.to(core::DType::F64);
    ValueMap ref_in;
    for (const auto& [name, t] : inputs) ref_in.emplace(name, t.to(core::DType::F64));
    try {
      const TrainResult got = session->train_step(req);
      const ref::TrainResult want =
          ref::train(rounded, ref_in, req.target.to(core::DType::F32), ref::LossSpec{"mse_loss", {}});
      const ops::Tolerance gt = ops::backward_tolerance(tol);
      const oracle::Diff dl = oracle::compare(core::Tensor::scalar(got.loss), core::Tensor::scalar(want.loss), gt);
      if (!dl.ok)
        failures.push_back(
            {k, core::Stage::Loss, where + ": loss " + std::to_string(got.loss) + " vs " + std::to_string(want.loss)});
      const oracle::Diff dlg = oracle::compare(got.loss_grad, want.loss_grad, gt);
      if (!dlg.ok) failures.push_back({k, core::Stage::Loss, where + ": loss gradient: " + dlg.describe()});
      for (const auto& [name, t] : g.initializers) {
        if (!got.grads.count(name)) {
          failures.push_back({k, core::Stage::Backward, where + ": no gradient for weight '" + name + "'"});
          continue;
        }
        const oracle::Diff d = oracle::compare(got.grads.at(name), want.grads.at(name), gt);
        if (!d.ok)
          failures.push_back({k, core::Stage::Backward, where + ": gradient of " + name + ": " + d.describe()});
        if (!got.weights_after.count(name)) {
          failures.push_back({k, core::Stage::Backward, where + ": no updated weight '" + name + "'"});
          continue;
        }
        core::Tensor expect_w = t.to(core::DType::F64);
        for (int64_t i = 0; i < expect_w.numel(); ++i)
          expect_w.f64()[i] -= req.learning_rate * want.grads.at(name).f64()[i];
        const oracle::Diff dw = oracle::compare(got.weights_after.at(name), expect_w, gt);
        if (!dw.ok)
          failures.push_back({k, core::Stage::Backward, where + ": weight after SGD " + name + ": " + dw.describe()});
      }
      for (const auto& n : g.nodes)
        for (const auto& out : n.outputs) {
          if (!got.grads.count(out)) {
            failures.push_back({k, core::Stage::Backward, where + ": no gradient for node output '" + out + "'"});
            continue;
          }
          const oracle::Diff d = oracle::compare(got.grads.at(out), want.grads.at(out), gt);
          if (!d.ok)
            failures.push_back({k, core::Stage::Backward, where + ": gradient of " + out + ": " + d.describe()});
        }
    } catch (const std::exception& e) {
      failures.push_back({k, core::Stage::Backward, where + ": train_step threw: " + e.what()});
    }
  }
  if (supported == 0) GTEST_SKIP() << b.name() << " supports none of the sampled " << spec.name << " cases";
  // Each disagreement must be waived by a ledger entry for its (operator, case, stage); each
  // waiver must still be needed (a stale one fails too, as the conformance exceptions do).
  std::set<std::pair<int, core::Stage>> failing;
  for (const auto& [k, stage, f] : failures) {
    failing.insert({k, stage});
    if (const oracle::KnownEntry* e = waiver(spec.name, k, stage)) {
      std::cout << "[known: " << e->id << "] " << b.name() << "/" << spec.name << " " << f << "\n";
      continue;
    }
    ADD_FAILURE() << b.name() << "/" << spec.name << " " << f << "\n  (a known difference needs a ledger entry with "
                  << "\"agreement\": [{\"op\": \"" << spec.name << "\", \"case\": " << k << ", \"stage\": \""
                  << core::to_string(stage) << "\"}])";
  }
  for (const auto& e : ledger().entries)
    for (const auto& w : e.agreement)
      if (e.cpu_unmet().empty() && w.op == spec.name && !failing.count({w.case_index, w.stage}))
        ADD_FAILURE() << "stale ledger waiver in " << e.id << ": " << b.name() << "/" << spec.name << " case "
                      << w.case_index << " " << core::to_string(w.stage) << " agrees now";
}

std::vector<std::string> all_names() {
  std::vector<std::string> v;
  for (const ops::OpSpec* s : ops::catalogue().all()) v.push_back(s->name);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Catalogue, Agreement, ::testing::ValuesIn(all_names()),
                         [](const auto& info) { return info.param; });

// What the backend's worker answers for a model (supports_nodes: every node at once) is what it answers
// node by node. A backend that works out what depends on the whole model once per model (OpenCV: the
// exchange forms) must change no answer by it. Generated models, so that nodes meet each other.
TEST(BackendSupport, EveryNodeAtOnceIsEachNodeAlone) {
  Backend& b = backend();
  gen::GenOptions opt;
  opt.generator = "muffin";
  opt.seed = 2026;
  const auto source = data::open_source("random");
  gen::Stream stream(opt, *source);
  size_t answers = 0;
  for (int i = 0; i < 120; ++i) {
    ir::Graph g = stream.next().graph;
    ir::validate(g, "model " + std::to_string(i));  // every value typed, as the backends see it
    for (const bool training : {false, true}) {
      const std::vector<Support> all = b.supports_nodes(g, training);
      ASSERT_EQ(all.size(), g.nodes.size());
      for (size_t k = 0; k < g.nodes.size(); ++k) {
        const ir::Node& n = g.nodes[k];
        Support alone = b.supports(g, n);
        if (alone.ok && training)
          alone = b.trains() ? b.supports_training(g, n) : Support::no("backend does not train");
        EXPECT_EQ(all[k].ok, alone.ok) << "model " << i << " node " << n.name << " (" << n.op << ")";
        EXPECT_EQ(all[k].reason, alone.reason) << "model " << i << " node " << n.name << " (" << n.op << ")";
        ++answers;
      }
    }
  }
  EXPECT_GT(answers, 500u);
}

TEST(BackendInfo, HasNameAndRealVersion) {
  EXPECT_FALSE(backend().name().empty());
  EXPECT_FALSE(backend().version().empty());
}

}  // namespace
}  // namespace quorum::backends
