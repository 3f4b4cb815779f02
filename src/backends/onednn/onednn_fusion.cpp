// oneDNN's optimized run, the backend's part: the post-ops of a fused producer's primitive (dnnl::post_ops
// eltwise and binary entries, as framework integrations attach them), and the kernels of a fused model.
// Which nodes fuse is the lowering's decision (lower_fusion.cpp); oneDNN has the last word, since a
// primitive descriptor with post-ops no implementation takes is refused, and the chain is then cut.
#include <oneapi/dnnl/dnnl_debug.h>

#include "backends/onednn/onednn_sink.h"
#include "core/error.h"

namespace quorum::backends::onednn {

dnnl::primitive_attr PostOps::attr() const {
  dnnl::post_ops chain;
  for (const auto& o : ops_) {
    if (o.operand.empty()) chain.append_eltwise(1.0f, to_dnnl(o.alg), o.alpha, o.beta);
    else chain.append_binary(to_dnnl(o.alg), plain_md(o.operand_dims));
  }
  dnnl::primitive_attr a;
  a.set_post_ops(chain);
  return a;
}

std::string PostOps::keyed(const std::string& key, const PostOps* po) {
  if (!po) return key;
  Key k;
  k << "post_ops";
  for (const auto& o : po->ops_)
    k << static_cast<int>(o.alg) << o.alpha << o.beta << o.operand.empty() << o.operand_dims;
  return key + k.str();
}

void PostOps::bind(const std::function<const Buf&(const std::string&)>& value,
                   std::unordered_map<int, memory>& args) const {
  for (size_t i = 0; i < ops_.size(); ++i) {
    const lw::PostOp& o = ops_[i];
    if (o.operand.empty()) continue;
    args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i)) | DNNL_ARG_SRC_1] =
        mem(plain_md(o.operand_dims), value(o.operand).ptr());
  }
}

namespace {

[[noreturn]] void no_training() {
  throw core::UserError("an optimized oneDNN session runs inference only: its fused nodes have no backward");
}

// The producer's primitive with the post-ops of the nodes it absorbed (inference), writing the last
// one's output: its elements in the primitive's dst order, which is the output's (same shape, or for an
// inner product [rows, units] of [..., units]).
class FusedKernel : public Kernel {
 public:
  FusedKernel(const ir::Graph& g, const ir::Node& producer, PostOps po, const std::string& out)
      : Kernel(g, producer), post_ops_(std::move(po)), out_(out), out_shape_(g.types.at(out).shape) {}
  void forward(Env& env, bool) override {
    lowered_forward(env, node_, in_shapes_, out_shapes_, false, saved_, &post_ops_);
    const auto it = env.values.find(node_.outputs.at(0));
    Buf b = std::move(it->second);
    env.values.erase(it);
    b.shape = out_shape_;
    env.values[out_] = std::move(b);
  }
  void backward(Env&) override { no_training(); }

 private:
  PostOps post_ops_;
  std::string out_;
  Shape out_shape_;
  Saved saved_;
};

// A node another's primitive computes (a post-op, or the producer, which runs with its last consumer).
class AbsorbedKernel : public Kernel {
 public:
  using Kernel::Kernel;
  void forward(Env&, bool) override {}
  void backward(Env&) override { no_training(); }
};

std::vector<Shape> shapes_of(const ir::Graph& g, const std::vector<std::string>& values) {
  std::vector<Shape> s;
  for (const auto& v : values) s.push_back(g.types.at(v).shape);
  return s;
}

// The producer's forward with `po` on zero operands: the primitive oneDNN creates for it (cached, as the
// session will run it), named as the session's lowering names it; empty where oneDNN refuses the post-ops.
std::string fused_primitive(const ir::Graph& g, const ir::Node& n, const PostOps& po) {
  Env env;
  for (const auto& v : n.inputs) env.values[v] = Buf(g.types.at(v).shape);
  for (const auto& o : po.ops())
    if (!o.operand.empty()) env.values[o.operand] = Buf(g.types.at(o.operand).shape);
  LoweringLog log;
  Saved saved;
  try {
    LoweringScope scope(log, n.name);
    lowered_forward(env, n, shapes_of(g, n.inputs), shapes_of(g, n.outputs), false, saved, &po);
  } catch (const dnnl::error&) {
    return {};
  }
  const auto it = log.ops().find(n.name);
  return it == log.ops().end() || it->second.empty() ? std::string() : it->second.back();
}

// "fused <primitive>+<post-op algorithm>+...", the algorithms as oneDNN names them.
std::string fusion_entry(const std::string& primitive, const PostOps& po) {
  std::string s = kFusedPrefix + primitive;
  for (const auto& o : po.ops()) s += std::string("+") + lw::name(o.alg);
  return s;
}

}  // namespace

std::map<std::string, std::vector<std::string>> fuse(const ir::Graph& g,
                                                     std::vector<std::unique_ptr<Kernel>>& kernels) {
  std::map<std::string, std::vector<std::string>> entries;
  for (const lw::Fusion& f : lw::plan_fusions(g)) {
    const ir::Node& producer = g.nodes[f.producer];
    for (size_t n = f.consumers.size(); n > 0; --n) {
      PostOps po(f.post_ops(n));
      const std::string primitive = fused_primitive(g, producer, po);
      if (primitive.empty()) continue;  // refused: one consumer fewer
      const std::string entry = fusion_entry(primitive, po);
      entries[producer.name].push_back(entry);
      kernels[f.producer] = std::make_unique<AbsorbedKernel>(g, producer);
      for (size_t k = 0; k < n; ++k) {
        const ir::Node& c = g.nodes[f.consumers[k]];
        entries[c.name].push_back(entry);
        kernels[f.consumers[k]] = std::make_unique<AbsorbedKernel>(g, c);
      }
      const size_t last = f.consumers[n - 1];
      kernels[last] = std::make_unique<FusedKernel>(g, producer, std::move(po), g.nodes[last].outputs.at(0));
      break;
    }
  }
  return entries;
}

}  // namespace quorum::backends::onednn
