// Two-input arithmetic with NumPy broadcasting (binary primitive), n-ary sum (sum primitive, or a
// chain of broadcasting adds when shapes differ) and concat (concat primitive); the forward runs
// through the lowering (lower.cpp) and the backend's sink (onednn_sink.cpp).
// Backward follows the chain rule with the same primitives, as the lowering's backward steps:
// products and quotients by binary ops, the reduction primitive to sum a gradient down to a
// broadcast operand's shape, and for maximum/minimum a comparison mask (binary ge/le) that sends
// ties to the first operand, as the reference does. Concat's backward splits the gradient with
// strided reorders (still here).
#include "backends/onednn/onednn_sink.h"

namespace quorum::backends::onednn {
namespace {

// Binary operators and sum: forward and backward are the lowering's steps.
class LoweredKernel : public Kernel {
 public:
  using Kernel::Kernel;

  void forward(Env& env, bool training) override {
    lowered_forward(env, node_, in_shapes_, out_shapes_, training, saved_);
  }

  void backward(Env& env) override { lowered_backward(env, node_, in_shapes_, out_shapes_, saved_); }

 private:
  Saved saved_;
};

class ConcatKernel : public Kernel {
 public:
  ConcatKernel(const ir::Graph& g, const ir::Node& n) : Kernel(g, n) {
    axis_ = ops::norm_axis(core::attr_i(attrs(), "axis"), static_cast<int>(out_shape(0).size()));
  }

  void forward(Env& env, bool training) override {
    Saved saved;
    lowered_forward(env, node_, in_shapes_, out_shapes_, training, saved);
  }

  void backward(Env& env) override {
    const Buf& gy = *gout(env, 0);
    const View whole = view_of(gy);
    int64_t offset = 0;
    for (size_t i = 0; i < in_shapes_.size(); ++i) {
      Buf gx(in_shape(i));
      View part = whole;
      part.dims = dims_of(in_shape(i));
      part.ptr += offset * whole.strides[static_cast<size_t>(axis_)];
      copy_view(part, view_of(gx));
      offset += in_shape(i)[static_cast<size_t>(axis_)];
      add_gin(env, i, std::move(gx));
    }
  }

 private:
  int axis_ = 0;
};

}  // namespace

void register_binary(OpTable& t) {
  for (const char* name : {"add", "sub", "mul", "div", "maximum", "minimum"})
    t[name] = OpEntry{maker<LoweredKernel>(), {}, {}};
  t["sum"] = OpEntry{maker<LoweredKernel>(), {}, {}};
  t["concat"] = OpEntry{maker<ConcatKernel>(), {}, {}};
}

}  // namespace quorum::backends::onednn
