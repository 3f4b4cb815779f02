// Two-input arithmetic with NumPy broadcasting (binary primitive), n-ary sum (sum primitive, or a
// chain of broadcasting adds when shapes differ) and concat (concat primitive); the forward runs
// through the lowering (lower.cpp) and the backend's sink (onednn_sink.cpp).
// Backward follows the chain rule with the same primitives: products and quotients by binary ops,
// the reduction primitive to sum a gradient down to a broadcast operand's shape, and for
// maximum/minimum a comparison mask (binary ge/le) that sends ties to the first operand, as the
// reference does. Concat's backward splits the gradient with strided reorders.
#include "backends/onednn/onednn_sink.h"

namespace quorum::backends::onednn {
namespace {

class BinaryKernel : public Kernel {
 public:
  BinaryKernel(const ir::Graph& g, const ir::Node& n) : Kernel(g, n), alg_(to_dnnl(*lw::binary_alg(n.op))) {}

  void forward(Env& env, bool training) override {
    Saved saved;
    lowered_forward(env, node_, in_shapes_, out_shapes_, training, saved);
  }

  void backward(Env& env) override {
    const Buf& gy = *gout(env, 0);
    const Buf& a = in(env, 0);
    const Buf& b = in(env, 1);
    Buf ga, gb;
    switch (alg_) {
      case algorithm::binary_add:
        ga = gy;
        gb = gy;
        break;
      case algorithm::binary_sub:
        ga = gy;
        gb = linear(gy, -1);
        break;
      case algorithm::binary_mul:
        ga = binary(algorithm::binary_mul, gy, b);
        gb = binary(algorithm::binary_mul, gy, a);
        break;
      case algorithm::binary_div: {
        // d(a/b)/db = -(a/b)/b, from the forward result y, as -gy * (y / b) (libtorch's order):
        // (gy / b) * y overflows where gy / b does (gy = -3.8e37, b = 0.1) although the gradient fits.
        ga = binary(algorithm::binary_div, gy, b);
        gb = linear(binary(algorithm::binary_mul, gy, binary(algorithm::binary_div, env.value(node_.outputs[0]), b)),
                    -1);
        break;
      }
      default: {
        const Buf mask = binary(alg_ == algorithm::binary_max ? algorithm::binary_ge : algorithm::binary_le, a, b);
        ga = binary(algorithm::binary_mul, gy, mask);
        gb = binary(algorithm::binary_sub, gy, ga);
        break;
      }
    }
    add_gin(env, 0, sum_to(ga, in_shape(0)));
    add_gin(env, 1, sum_to(gb, in_shape(1)));
  }

 private:
  algorithm alg_;
};

class SumKernel : public Kernel {
 public:
  using Kernel::Kernel;

  void forward(Env& env, bool training) override {
    Saved saved;
    lowered_forward(env, node_, in_shapes_, out_shapes_, training, saved);
  }

  void backward(Env& env) override {
    for (size_t i = 0; i < in_shapes_.size(); ++i) add_gin(env, i, sum_to(*gout(env, 0), in_shape(i)));
  }
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
    t[name] = OpEntry{maker<BinaryKernel>(), {}, {}};
  t["sum"] = OpEntry{maker<SumKernel>(), {}, {}};
  t["concat"] = OpEntry{maker<ConcatKernel>(), {}, {}};
}

}  // namespace quorum::backends::onednn
