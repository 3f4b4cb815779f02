// The libtorch backend (libtorch 1.13, Debian libtorch-dev): a graph runs node by node in eager
// ATen calls, in float32 or float64. Each node's calls come from the lowering (lower.h, shared
// with the reproducer writer) and run in the backend's sink (torch_sink.cpp); supports() is the
// lowering's support check. Training uses libtorch's autograd: weights and inputs become leaf
// tensors, every node output retains its gradient, and one backward pass of the catalogue loss
// gives the loss gradient, every node output's gradient and every weight's gradient. Multi-step
// training (optimizer_step) is libtorch's own: the session's weights become the parameters of a
// torch::optim::SGD or torch::optim::Adam that keeps its state from step to step.
//
// Execution variants (backend options: variant.h) lay out inputs and weights and set the threads.
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/add.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/zeros_like.h>
#include <c10/util/Logging.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#include <torch/version.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "backends/torch/torch_ops.h"
#include "backends/torch/variant.h"
#include "core/error.h"

namespace quorum::backends {
namespace torch {

namespace {

at::ScalarType scalar_type(core::DType d) {
  switch (d) {
    case core::DType::F32: return at::kFloat;
    case core::DType::F64: return at::kDouble;
    case core::DType::I64: return at::kLong;
    case core::DType::I8: return at::kChar;
    case core::DType::U8: return at::kByte;
    case core::DType::I32: return at::kInt;
  }
  return at::kDouble;
}

// A copy of a Quorum tensor as an ATen tensor of type `st` (any source dtype).
at::Tensor to_aten(const core::Tensor& t, at::ScalarType st) {
  const std::vector<int64_t> sizes(t.shape().begin(), t.shape().end());
  if (t.numel() == 0) return at::empty(sizes, at::TensorOptions().dtype(st));
  // from_blob only borrows the buffer; the converting copy owns its data.
  const at::Tensor view =
      at::from_blob(const_cast<void*>(t.raw()), sizes, at::TensorOptions().dtype(scalar_type(t.dtype())));
  return view.to(st, false, true);
}

core::Tensor to_core(const at::Tensor& t, core::DType d) {
  const at::Tensor c = t.detach().to(scalar_type(d)).contiguous();
  core::Tensor out(d, core::Shape(c.sizes().begin(), c.sizes().end()));
  if (out.nbytes() > 0) std::memcpy(out.raw(), c.data_ptr(), out.nbytes());
  return out;
}

using Env = std::map<std::string, at::Tensor>;

// `t` (a fresh tensor the session owns) in the variant's layout, same values.
at::Tensor layout(const Variant& v, const at::Tensor& t) {
  at::Tensor r = t;
  if (v.channels_last && (r.dim() == 4 || r.dim() == 5))
    r = r.contiguous(r.dim() == 4 ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::ChannelsLast3d);
  if (v.strided && r.dim() >= 1 && r.numel() > 0) {
    std::vector<int64_t> wide(r.sizes().begin(), r.sizes().end());
    wide.back() *= 2;
    const at::Tensor big = at::empty(wide, r.options());
    at::Tensor view = big.slice(r.dim() - 1, 0, wide.back(), 2);
    view.copy_(r);
    r = view;
  }
  return r;
}

class TorchSession : public Session {
 public:
  TorchSession(ir::Graph g, const CompileOptions& opt, Variant variant = {})
      : g_(std::move(g)), dtype_(opt.dtype), st_(scalar_type(opt.dtype)), variant_(variant) {
    if (dtype_ != core::DType::F32 && dtype_ != core::DType::F64)
      throw ConversionError("the torch backend computes in float32 or float64, not " + core::to_string(dtype_));
    // Single-threaded unless asked: results are then bit-identical across processes.
    at::set_num_threads(variant_.threads > 0 ? variant_.threads : std::max(1, opt.threads));
    for (const auto& n : g_.nodes)
      if (!has_lowering(n.op)) throw ConversionError("libtorch has no mapping for operator '" + n.op + "'");
    try {
      // Weights are converted once, to the session's dtype.
      for (const auto& [name, w] : g_.initializers) {
        const core::DType d = core::is_float(w.dtype()) ? dtype_ : w.dtype();  // integers keep their type
        weights_.emplace(name, layout(variant_, to_aten(w, scalar_type(d))));
      }
    } catch (const c10::Error& e) {
      throw ConversionError(std::string("libtorch refused a weight: ") + e.what_without_backtrace());
    }
  }

  ValueMap forward(const ValueMap& inputs, bool keep_intermediates) override {
    at::NoGradGuard no_grad;
    Env env = weights_;
    bind_inputs(inputs, env, false);
    run_graph(env, false);
    ValueMap out;
    for (const auto& n : g_.nodes)
      for (const auto& o : n.outputs)
        if (keep_intermediates || std::find(g_.outputs.begin(), g_.outputs.end(), o) != g_.outputs.end())
          out.emplace(o, to_core(env.at(o), value_dtype(o)));
    return out;
  }

  TrainResult train_step(const TrainRequest& req) override {
    if (!req.loss_attrs.empty()) throw core::UserError("torch backend: loss '" + req.loss + "' takes no attributes");
    at::AutoGradMode grad_mode(true);
    Env env;
    // Fresh leaves every step: the session's weights never change.
    for (const auto& [name, w] : weights_)
      env.emplace(name, layout(variant_, w.detach().clone()).requires_grad_(true));
    bind_inputs(req.inputs, env, true);
    Edges edges;
    run_graph(env, true, &edges);
    const at::Tensor& y = env.at(g_.outputs.at(0));
    const at::Tensor loss = catalogue_loss(req.loss, y, to_aten(req.target, st_));
    if (loss.requires_grad()) loss.backward();

    TrainResult r;
    r.loss = loss.detach().to(at::kDouble).item<double>();
    r.loss_grad = grad_of(y);
    for (const auto& n : g_.nodes)
      for (const auto& o : n.outputs) {
        r.values.emplace(o, to_core(env.at(o), dtype_));
        r.grads.emplace(o, grad_of(env.at(o)));
      }
    for (const auto& in : g_.inputs)  // graph inputs are leaves: their gradients too
      if (env.at(in.name).requires_grad()) r.grads.emplace(in.name, grad_of(env.at(in.name)));
    {
      at::NoGradGuard no_grad;
      std::map<std::string, at::Tensor> contrib;
      for (const auto& [key, t] : edges) {
        const at::Tensor g = t.grad().defined() ? t.grad() : at::zeros_like(t);
        auto it = contrib.find(key);
        if (it == contrib.end()) contrib.emplace(key, g.clone());
        else it->second = at::add(it->second, g);
      }
      for (const auto& [key, g] : contrib) r.grads.emplace(key, to_core(g, dtype_));
    }
    at::NoGradGuard no_grad;
    for (const auto& [name, w] : weights_) {
      const at::Tensor& leaf = env.at(name);
      const at::Tensor g = leaf.grad().defined() ? leaf.grad() : at::zeros_like(w);
      r.grads.emplace(name, to_core(g, dtype_));
      r.weights_after.emplace(name, to_core(at::sub(w, at::mul(g, req.learning_rate)), dtype_));
    }
    return r;
  }

  StepResult optimizer_step(const TrainRequest& req, const OptimizerSpec& spec) override {
    if (!req.loss_attrs.empty()) throw core::UserError("torch backend: loss '" + req.loss + "' takes no attributes");
    if (!optim_ || !(optim_spec_ == spec)) start_optimizer(spec);
    at::AutoGradMode grad_mode(true);
    optim_->zero_grad();
    Env env = weights_;  // the parameters themselves: their gradients accumulate on them
    bind_inputs(req.inputs, env, false);
    run_graph(env, false);
    const at::Tensor loss = catalogue_loss(req.loss, env.at(g_.outputs.at(0)), to_aten(req.target, st_));
    if (loss.requires_grad()) loss.backward();
    StepResult r;
    r.loss = loss.detach().to(at::kDouble).item<double>();
    for (const auto& [name, w] : weights_) r.grads.emplace(name, grad_of(w));
    optim_->step();
    return r;
  }

  ValueMap weights() const override {
    ValueMap out;
    for (const auto& [name, w] : weights_) out.emplace(name, to_core(w, dtype_));
    return out;
  }

  void set_weights(const ValueMap& w) override {
    at::NoGradGuard no_grad;
    for (const auto& [name, t] : w) {
      auto it = weights_.find(name);
      if (it == weights_.end()) throw core::UserError("the model has no weight '" + name + "'");
      if (it->second.sizes() != at::IntArrayRef(t.shape()))
        throw core::UserError("weight '" + name + "' given with another shape");
      it->second.copy_(to_aten(t, st_));  // in place: an optimizer's parameters stay the same tensors
    }
  }

 private:
  // libtorch's optimizer over the session's weights, as parameters (leaves that keep their grad).
  void start_optimizer(const OptimizerSpec& spec) {
    spec.check();
    std::vector<at::Tensor> params;
    for (auto& [name, w] : weights_) {
      w = w.detach().clone().requires_grad_(true);
      params.push_back(w);
    }
    if (spec.name == "sgd")
      optim_ =
          std::make_unique<::torch::optim::SGD>(params, ::torch::optim::SGDOptions(spec.lr).momentum(spec.momentum));
    else
      optim_ = std::make_unique<::torch::optim::Adam>(
          params, ::torch::optim::AdamOptions(spec.lr).betas({spec.beta1, spec.beta2}).eps(spec.eps));
    optim_spec_ = spec;
  }

  void bind_inputs(const ValueMap& inputs, Env& env, bool training) const {
    for (const GraphInput& in : bind_graph_inputs(g_, inputs)) {
      at::Tensor x = layout(variant_, to_aten(in.value, scalar_type(value_dtype(in.info.name))));
      // Inputs are leaves too, so every node output (even of a weightless graph) has a gradient.
      if (training) x.requires_grad_(true);
      env.emplace(in.info.name, x);
    }
  }

  // Per-consumer views of values several nodes consume (training): each view's gradient is what
  // that consumer sends back (backends::contribution_key).
  using Edges = std::vector<std::pair<std::string, at::Tensor>>;

  void run_graph(Env& env, bool training, Edges* edges = nullptr) const {
    select_qengine();
    for (size_t k = 0; k < g_.nodes.size(); ++k) {
      const ir::Node& n = g_.nodes[k];
      TensorList in;
      for (const auto& name : n.inputs) {
        const at::Tensor& x = env.at(name);
        if (edges && multi_.count(name) && x.requires_grad()) {
          at::Tensor view = x.view_as(x);
          view.retain_grad();
          edges->emplace_back(contribution_key(name, n.name), view);
          in.push_back(view);
        } else {
          in.push_back(x);
        }
      }
      TorchSink sink(in);
      if (log_) {
        RecordingSink recording(sink, *log_);
        lower_node(g_, n, recording);
      } else {
        lower_node(g_, n, sink);
      }
      const TensorList out{sink.result()};
      if (out.size() != n.outputs.size())
        throw std::runtime_error("torch backend: node '" + n.name + "' gave " + std::to_string(out.size()) +
                                 " outputs, expected " + std::to_string(n.outputs.size()));
      for (size_t j = 0; j < out.size(); ++j) {
        const at::ScalarType st = scalar_type(value_dtype(n.outputs[j]));
        at::Tensor t = out[j].scalar_type() == st ? out[j] : out[j].to(st);
        if (training) {
          // A node output must be its own autograd node, or its gradient would merge with the
          // gradient of the input (or leaf) it aliases.
          const bool aliases_input =
              t.is_leaf() || std::any_of(in.begin(), in.end(), [&](const at::Tensor& x) { return x.is_same(t); });
          if (aliases_input) t = t.view_as(t);
          if (t.requires_grad()) t.retain_grad();
        }
        env[n.outputs[j]] = t;
      }
    }
  }

  // The session's dtype, or a quantized model's integer values (int8, uint8, int32) in the type the graph declares.
  core::DType value_dtype(const std::string& name) const {
    const core::DType d = g_.types.at(name).dtype;
    return core::is_float(d) ? dtype_ : d;
  }
  // The quantized engine is a global of libtorch: set before every run.
  void select_qengine() const {
    at::globalContext().setQEngine(variant_.qengine == "qnnpack" ? at::QEngine::QNNPACK : at::QEngine::ONEDNN);
  }

  core::Tensor grad_of(const at::Tensor& t) const {
    const at::Tensor g = t.grad();
    return to_core(g.defined() ? g : at::zeros_like(t), dtype_);
  }

  ir::Graph g_;
  std::set<std::string> multi_ = multi_consumer_values(g_);
  core::DType dtype_;
  at::ScalarType st_;
  Variant variant_;
  Env weights_;
  std::unique_ptr<::torch::optim::Optimizer> optim_;  // multi-step training's, once started
  OptimizerSpec optim_spec_;
  std::vector<std::string>* log_ = nullptr;  // every sink call, for the sink-agreement test

 public:
  void record_sink_calls(std::vector<std::string>* log) { log_ = log; }
};

class TorchBackend : public Backend {
 public:
  explicit TorchBackend(Variant variant = {}) : variant_(variant) {}
  std::string name() const override { return "torch"; }
  std::string version() const override { return std::string("libtorch ") + TORCH_VERSION + ", float32/float64"; }
  bool trains() const override { return true; }

  Support supports(const ir::Graph& g, const ir::Node& n) const override {
    try {
      return torch::support(g, n, variant_.qengine);
    } catch (const std::exception& e) {
      // The decision reads value shapes; a graph without them cannot be judged.
      return Support::no(std::string("cannot inspect the node's shapes: ") + e.what());
    }
  }

  std::unique_ptr<Session> compile(const ir::Graph& g, const CompileOptions& opt) override {
    return std::make_unique<TorchSession>(g, opt, variant_);
  }

 private:
  Variant variant_;
};

}  // namespace

std::vector<std::string> library_sink_calls(const ir::Graph& g, const ValueMap& inputs) {
  std::vector<std::string> log;
  TorchBackend backend;
  for (const auto& n : g.nodes) {
    const Support s = backend.supports(g, n);
    if (!s.ok) return {"refused: " + s.reason};
  }
  TorchSession session(g, CompileOptions{core::DType::F32, 1});
  session.record_sink_calls(&log);
  try {
    session.forward(inputs, true);
  } catch (const LoweringError& e) {
    log.push_back(std::string("error: ") + e.what());
  }
  return log;
}

}  // namespace torch

std::unique_ptr<Backend> create_backend(const std::vector<std::string>& args) {
  // libtorch symbolises a C++ backtrace (dladdr per frame) into every c10::Error it raises, as
  // binary_cross_entropy does for each input outside [0, 1]: 4 % of a campaign's torch worker. The
  // error's message and source location stay; only the frames (addresses of this build) go.
  c10::SetStackTraceFetcher([] { return std::string(); });
  return std::make_unique<torch::TorchBackend>(torch::parse_variant(args));
}

}  // namespace quorum::backends
