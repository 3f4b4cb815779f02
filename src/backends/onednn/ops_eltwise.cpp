// Unary elementwise operators as chains of oneDNN eltwise algorithms, and softsign. The chains, their
// forward and backward steps (the library's eltwise backward kernels in reverse order on the step
// inputs the forward kept; softsign's from its kept denominator) are the lowering's (lower.cpp).
#include "backends/onednn/onednn_sink.h"

namespace quorum::backends::onednn {
namespace {

class ChainKernel : public Kernel {
 public:
  using Kernel::Kernel;

  void forward(Env& env, bool training) override {
    lowered_forward(env, node_, in_shapes_, out_shapes_, training, saved_);
  }

  void backward(Env& env) override { lowered_backward(env, node_, in_shapes_, out_shapes_, saved_); }

 private:
  Saved saved_;
};

// softsign(x) = x / (1 + |x|); d/dx = 1 / (1 + |x|)^2.
class SoftsignKernel : public Kernel {
 public:
  using Kernel::Kernel;

  void forward(Env& env, bool training) override {
    lowered_forward(env, node_, in_shapes_, out_shapes_, training, saved_);
  }

  void backward(Env& env) override { lowered_backward(env, node_, in_shapes_, out_shapes_, saved_); }

 private:
  Saved saved_;
};

}  // namespace

void register_eltwise(OpTable& t) {
  for (const std::string& name : lw::eltwise_ops()) t[name] = OpEntry{maker<ChainKernel>(), {}, {}};
  t["softsign"] = OpEntry{maker<SoftsignKernel>(), {}, {}};
}

}  // namespace quorum::backends::onednn
