// Unary elementwise operators as chains of oneDNN eltwise algorithms (the chains are the lowering's,
// lower.cpp: eltwise_chain; the forward runs through it); backward runs the library's eltwise
// backward kernels in reverse order on the step inputs the forward kept.
// softsign = x / linear(1, 1)(abs(x)) with a binary division; its backward uses the kept denominator.
#include "backends/onednn/onednn_sink.h"

namespace quorum::backends::onednn {
namespace {

class ChainKernel : public Kernel {
 public:
  ChainKernel(const ir::Graph& g, const ir::Node& n) : Kernel(g, n), steps_(*lw::eltwise_chain(n.op, n.attrs)) {}

  void forward(Env& env, bool training) override {
    lowered_forward(env, node_, in_shapes_, out_shapes_, training, saved_);
  }

  void backward(Env& env) override {
    Buf g = *gout(env, 0);
    for (size_t i = steps_.size(); i-- > 0;) {
      const lw::Eltwise& s = steps_[i];
      g = eltwise_backward(to_dnnl(s.alg), s.alpha, s.beta, saved_.step_inputs[i], g);
    }
    add_gin(env, 0, std::move(g));
  }

 private:
  std::vector<lw::Eltwise> steps_;
  Saved saved_;
};

// softsign(x) = x / (1 + |x|); d/dx = 1 / (1 + |x|)^2.
class SoftsignKernel : public Kernel {
 public:
  using Kernel::Kernel;

  void forward(Env& env, bool training) override {
    lowered_forward(env, node_, in_shapes_, out_shapes_, training, saved_);
  }

  void backward(Env& env) override {
    const Buf& denom = saved_.values.at(node_.outputs[0] + "_den");
    add_gin(env, 0, binary(algorithm::binary_div, *gout(env, 0), eltwise(algorithm::eltwise_square, 0, 0, denom)));
  }

 private:
  Saved saved_;
};

}  // namespace

void register_eltwise(OpTable& t) {
  for (const std::string& name : lw::eltwise_ops()) t[name] = OpEntry{maker<ChainKernel>(), {}, {}};
  t["softsign"] = OpEntry{maker<SoftsignKernel>(), {}, {}};
}

}  // namespace quorum::backends::onednn
