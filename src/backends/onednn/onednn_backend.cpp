// The oneDNN backend: runs a graph node by node with oneDNN 2.6 primitives (float32, CPU) and
// trains with the library's backward primitives. Each operator family lives in its own ops_*.cpp
// and registers a kernel, its support rule and its training rule in the op table below. The optimized
// run (CompileOptions::optimized) folds elementwise consumers into their producer's primitive as
// post-ops, as framework integrations do (onednn_fusion.cpp), and names each fusion in its lowering.
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "backends/onednn/lower.h"
#include "backends/onednn/onednn_common.h"
#include "backends/onednn/onednn_sink.h"
#include "backends/onednn/variant.h"
#include "core/error.h"

namespace quorum::backends::onednn {

const OpTable& op_table() {
  static const OpTable table = [] {
    OpTable t;
    register_conv(t);
    register_pool(t);
    register_dense(t);
    register_eltwise(t);
    register_binary(t);
    register_norm(t);
    register_softmax_reduce(t);
    register_shape(t);
    register_resize(t);
    register_rnn(t);
    register_loss(t);
    register_quant(t);
    return t;
  }();
  return table;
}

namespace {

// Every cached primitive keeps its JIT code and descriptors alive: unbounded, a worker that runs
// thousands of models grows until the address-space limit (--memory) makes oneDNN fail an
// allocation, which 2.6 does not always survive (SIGSEGV). The cache is emptied between models
// once it holds more than this many primitives.
constexpr size_t kMaxCachedPrimitives = 1024;

class OnednnSession : public Session {
 public:
  // `fused`: an optimized session's fusions by node (their "fused ..." entries); empty for a pinned one.
  OnednnSession(ir::Graph g, std::vector<std::unique_ptr<Kernel>> kernels, bool optimized,
                std::map<std::string, std::vector<std::string>> fused = {})
      : g_(std::move(g)), kernels_(std::move(kernels)), optimized_(optimized), fused_(std::move(fused)) {
    for (const auto& [name, t] : g_.initializers) weights_.emplace(name, buf_from_tensor(t));
  }

  // The primitives each node ran, then the fusions it took part in.
  std::map<std::string, std::vector<std::string>> lowering() const override {
    std::map<std::string, std::vector<std::string>> ops = lowering_.ops();
    for (const auto& [node, entries] : fused_)
      for (const auto& e : entries)
        if (std::find(ops[node].begin(), ops[node].end(), e) == ops[node].end()) ops[node].push_back(e);
    return ops;
  }

  ValueMap forward(const ValueMap& inputs, bool keep_intermediates) override {
    Env env = run_forward(inputs, false);
    // A fused node's output stays inside its producer's primitive: an optimized session has only the outputs.
    const bool all = keep_intermediates && !optimized_;
    ValueMap out;
    for (const auto& n : g_.nodes)
      for (const auto& o : n.outputs)
        if (all || is_graph_output(o)) out.emplace(o, tensor_from_buf(env.values.at(o)));
    return out;
  }

  TrainResult train_step(const TrainRequest& req) override {
    if (optimized_) throw core::UserError("an optimized oneDNN session runs inference only");
    if (!loss_known(req.loss)) throw core::UserError("oneDNN backend: unknown loss '" + req.loss + "'");
    Env env = run_forward(req.inputs, true);
    const std::string& out0 = g_.outputs.at(0);
    const Buf& pred = env.values.at(out0);
    const Buf target = buf_from_tensor(req.target);
    if (target.shape != pred.shape)
      throw core::UserError("target shape " + core::to_string(target.shape) + " differs from output shape " +
                            core::to_string(pred.shape));
    LossValue lv = [&] {
      LoweringScope scope(lowering_, kLossNode);
      return compute_loss(req.loss, pred, target);
    }();
    TrainResult r;
    r.loss = lv.loss.data.at(0);
    r.loss_grad = tensor_from_buf(lv.grad);
    env.add_grad(out0, lv.grad);
    env.multi = multi_consumer_values(g_);
    // Reverse topological order: every consumer has added its share before a producer runs.
    for (size_t i = kernels_.size(); i-- > 0;) {
      const ir::Node& n = g_.nodes[i];
      const bool any =
          std::any_of(n.outputs.begin(), n.outputs.end(), [&](const std::string& o) { return env.grad(o) != nullptr; });
      if (!any) continue;
      LoweringScope scope(lowering_, n.name);
      kernels_[i]->backward(env);
    }
    for (const auto& n : g_.nodes)
      for (const auto& o : n.outputs) {
        r.values.emplace(o, tensor_from_buf(env.values.at(o)));
        const Buf* gr = env.grad(o);
        r.grads.emplace(o, tensor_from_buf(gr ? *gr : Buf(env.values.at(o).shape)));
      }
    for (const auto& [key, b] : env.contributions) r.grads.emplace(key, tensor_from_buf(b));
    for (const auto& in : g_.inputs)  // the graph inputs' gradients too
      if (const Buf* gr = env.grad(in.name)) r.grads.emplace(in.name, tensor_from_buf(*gr));
    for (const auto& [name, w] : weights_) {
      const Buf* gr = env.grad(name);
      const Buf gw = gr ? *gr : Buf(w.shape);
      r.grads.emplace(name, tensor_from_buf(gw));
      r.weights_after.emplace(name, tensor_from_buf(scaled_sum(w, -static_cast<float>(req.learning_rate), gw)));
    }
    return r;
  }

  // oneDNN has no optimizer: multi-step training is the default Session::optimizer_step, Quorum's
  // shared float32 arithmetic on oneDNN's gradients, through these two.
  ValueMap weights() const override {
    ValueMap out;
    for (const auto& [name, w] : weights_) out.emplace(name, tensor_from_buf(w));
    return out;
  }

  void set_weights(const ValueMap& w) override {
    for (const auto& [name, t] : w) {
      auto it = weights_.find(name);
      if (it == weights_.end()) throw core::UserError("the model has no weight '" + name + "'");
      Buf b = buf_from_tensor(t);
      if (b.shape != it->second.shape) throw core::UserError("weight '" + name + "' given with another shape");
      it->second = std::move(b);
    }
  }

 private:
  bool is_graph_output(const std::string& v) const {
    return std::find(g_.outputs.begin(), g_.outputs.end(), v) != g_.outputs.end();
  }

  Env run_forward(const ValueMap& inputs, bool training) {
    Env env;
    for (const GraphInput& in : bind_graph_inputs(g_, inputs)) env.values[in.info.name] = buf_from_tensor(in.value);
    for (const auto& [name, w] : weights_) env.values[name] = w;
    for (size_t i = 0; i < kernels_.size(); ++i) {
      LoweringScope scope(lowering_, kernels_[i]->name());  // a fused producer's kernel runs late, under its name
      kernels_[i]->forward(env, training);
    }
    return env;
  }

  static inline const std::string kLossNode = "loss";  // the name findings give the loss stage
  ir::Graph g_;
  LoweringLog lowering_;
  std::vector<std::unique_ptr<Kernel>> kernels_;
  bool optimized_;
  std::map<std::string, std::vector<std::string>> fused_;
  std::map<std::string, Buf> weights_;
};

class OnednnBackend : public Backend {
 public:
  explicit OnednnBackend(Variant variant = {}) : variant_(std::move(variant)) {}
  std::string name() const override { return "onednn"; }

  std::string version() const override {
    const dnnl_version_t* v = dnnl_version();
    std::string s = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                    std::to_string(v->patch) + " (git hash " + (v->hash ? v->hash : "?") + ", cpu runtime ";
    s += v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : std::to_string(v->cpu_runtime);
    s += ", isa " + isa_name(dnnl::get_effective_cpu_isa()) + ")";
    return s;
  }

  bool trains() const override { return true; }
  // The optimized run attaches elementwise consumers to their producer's primitive as post-ops.
  bool optimizes() const override { return true; }

  Support supports(const ir::Graph& g, const ir::Node& n) const override {
    // The lowering's checks (float32 operands, what oneDNN's primitives cannot express), shared with
    // the reproducer writer; an operator oneDNN has nothing for is refused after the operand check.
    const Support s = onednn_lower::node_support(g, n);
    const auto it = op_table().find(n.op);
    if (s.ok && it == op_table().end())
      return Support::no("no oneDNN 2.6 primitive is mapped for operator '" + n.op + "'");
    if (!s.ok) return s;
    return it->second.supports ? it->second.supports(g, n) : Support::yes();
  }

  Support supports_training(const ir::Graph& g, const ir::Node& n) const override {
    const auto it = op_table().find(n.op);
    if (it == op_table().end()) return Support::no("operator '" + n.op + "' is not mapped");
    return it->second.trains ? it->second.trains(g, n) : Support::yes();
  }

  std::unique_ptr<Session> compile(const ir::Graph& g, const CompileOptions& opt) override {
    if (opt.dtype != core::DType::F32)
      throw ConversionError("oneDNN 2.6 on CPU has no float64 data type; only float32 sessions can be built");
    // oneDNN parallelises with OpenMP: the thread count of its parallel regions is this one.
    omp_set_num_threads(variant_.threads > 0 ? variant_.threads : std::max(1, opt.threads));
    PrimitiveCache::instance().trim(kMaxCachedPrimitives);
    std::vector<std::unique_ptr<Kernel>> kernels;
    for (const auto& n : g.nodes) {
      const Support s = supports(g, n);
      if (!s.ok) throw ConversionError("node '" + n.name + "' (" + n.op + "): " + s.reason);
      try {
        kernels.push_back(op_table().at(n.op).make(g, n));
      } catch (const dnnl::error& e) {
        throw ConversionError("node '" + n.name + "' (" + n.op + "): oneDNN refused it: " + e.what());
      }
    }
    if (!opt.optimized) return std::make_unique<OnednnSession>(g, std::move(kernels), false);
    std::map<std::string, std::vector<std::string>> fused;
    try {
      fused = fuse(g, kernels);
    } catch (const dnnl::error& e) {
      throw ConversionError(std::string("oneDNN refused a fused primitive: ") + e.what());
    }
    return std::make_unique<OnednnSession>(g, std::move(kernels), true, std::move(fused));
  }

 private:
  Variant variant_;

  static std::string isa_name(dnnl::cpu_isa isa) {
    switch (isa) {
      case dnnl::cpu_isa::sse41:
        return "sse41";
      case dnnl::cpu_isa::avx:
        return "avx";
      case dnnl::cpu_isa::avx2:
        return "avx2";
      case dnnl::cpu_isa::avx2_vnni:
        return "avx2_vnni";
      case dnnl::cpu_isa::avx512_core:
        return "avx512_core";
      case dnnl::cpu_isa::avx512_core_vnni:
        return "avx512_core_vnni";
      case dnnl::cpu_isa::avx512_core_bf16:
        return "avx512_core_bf16";
      case dnnl::cpu_isa::avx512_core_amx:
        return "avx512_core_amx";
      default:
        return "isa#" + std::to_string(static_cast<int>(isa));
    }
  }
};

}  // namespace
}  // namespace quorum::backends::onednn

namespace quorum::backends {

std::unique_ptr<Backend> create_backend(const std::vector<std::string>& args) {
  const onednn::Variant v = onednn::parse_variant(args);
  // The worker's start, before any oneDNN call: oneDNN reads its ISA limit once, at its first
  // dispatch. version() reports the ISA in effect.
  if (!v.isa.empty()) ::setenv("ONEDNN_MAX_CPU_ISA", onednn::isa_env_value(v.isa).c_str(), 1);
  return std::make_unique<onednn::OnednnBackend>(v);
}

}  // namespace quorum::backends
