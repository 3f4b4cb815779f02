// The float64 reference as a backend: a voter and the tie-breaker in every comparison.
#include "backends/ref/ref_backend.h"

#include <algorithm>

#include "ops/registry.h"
#include "ref/interpreter.h"

namespace quorum::backends {
namespace {

class RefSession : public Session {
 public:
  RefSession(ir::Graph g, ref::Overrides ov) : g_(std::move(g)), ov_(std::move(ov)) {}

  ValueMap forward(const ValueMap& inputs, bool keep_intermediates) override {
    ValueMap all = ref::forward(g_, inputs, &ov_);
    return select(all, keep_intermediates);
  }

  TrainResult train_step(const TrainRequest& req) override {
    ref::TrainResult r = ref::train(g_, req.inputs, req.target, ref::LossSpec{req.loss, req.loss_attrs}, &ov_);
    TrainResult out;
    out.loss = r.loss;
    out.loss_grad = r.loss_grad;
    out.values = select(r.values, true);
    for (const auto& n : g_.nodes)
      for (const auto& o : n.outputs)
        if (r.grads.count(o)) out.grads.emplace(o, r.grads.at(o));
    // Graph inputs' gradients too (as libtorch and oneDNN return them): a backward finding at the
    // first node of a model (a reduced one-node case) is judged through them.
    for (const auto& in : g_.inputs)
      if (r.grads.count(in.name)) out.grads.emplace(in.name, r.grads.at(in.name));
    // What each consumer of a value several nodes use sent back (as libtorch and oneDNN return it):
    // without it a wrong gradient from one consumer is judged on the total and blamed on whichever
    // consumer sends the most there, not always the one at fault.
    for (const auto& v : multi_consumer_values(g_))
      for (const auto& n : g_.nodes)
        if (std::find(n.inputs.begin(), n.inputs.end(), v) != n.inputs.end())
          if (auto it = r.grads.find(contribution_key(v, n.name)); it != r.grads.end())
            out.grads.emplace(it->first, it->second);
    for (auto& [name, w] : g_.initializers) {
      core::Tensor g = r.grads.count(name) ? r.grads.at(name) : core::Tensor(core::DType::F64, w.shape());
      out.grads.emplace(name, g);
      core::Tensor after = w.to(core::DType::F64);
      for (int64_t i = 0; i < after.numel(); ++i) after.f64()[i] -= req.learning_rate * g.f64()[i];
      out.weights_after.emplace(name, after);
    }
    return out;
  }

  // The reference's weights in float64: its optimizer steps (the shared arithmetic) are float64 too.
  ValueMap weights() const override {
    ValueMap out;
    for (const auto& [name, w] : g_.initializers) out.emplace(name, w.to(core::DType::F64));
    return out;
  }

  void set_weights(const ValueMap& w) override { replace_weights(g_, w); }

 private:
  ValueMap select(ValueMap& all, bool keep_intermediates) const {
    ValueMap out;
    for (const auto& n : g_.nodes)
      for (const auto& o : n.outputs)
        if (keep_intermediates || std::find(g_.outputs.begin(), g_.outputs.end(), o) != g_.outputs.end())
          out.emplace(o, std::move(all.at(o)));
    return out;
  }
  ir::Graph g_;
  ref::Overrides ov_;
};

class RefBackend : public Backend {
 public:
  std::string name() const override { return "ref"; }
  std::string version() const override { return std::string("quorum-ref ") + QUORUM_VERSION + " (float64)"; }
  bool trains() const override { return true; }
  Support supports(const ir::Graph&, const ir::Node& n) const override {
    return ops::catalogue().find(n.op) ? Support::yes() : Support::no("not in the catalogue");
  }
  std::unique_ptr<Session> compile(const ir::Graph& g, const CompileOptions&) override {
    return make_ref_session(g);
  }
};

}  // namespace

std::unique_ptr<Backend> make_ref_backend() { return std::make_unique<RefBackend>(); }

std::unique_ptr<Session> make_ref_session(const ir::Graph& g, ref::Overrides overrides) {
  return std::make_unique<RefSession>(g, std::move(overrides));
}

}  // namespace quorum::backends
