// Two-input arithmetic with NumPy broadcasting (binary primitive), n-ary sum (sum primitive, or a
// chain of broadcasting adds when shapes differ) and concat (concat primitive).
// Backward follows the chain rule with the same primitives: products and quotients by binary ops,
// the reduction primitive to sum a gradient down to a broadcast operand's shape, and for
// maximum/minimum a comparison mask (binary ge/le) that sends ties to the first operand, as the
// reference does. Concat's backward splits the gradient with strided reorders.
#include "backends/onednn/onednn_common.h"

namespace quorum::backends::onednn {
namespace {

class BinaryKernel : public Kernel {
 public:
  BinaryKernel(const ir::Graph& g, const ir::Node& n) : Kernel(g, n) {
    static const std::map<std::string, algorithm> algs = {
        {"add", algorithm::binary_add}, {"sub", algorithm::binary_sub},     {"mul", algorithm::binary_mul},
        {"div", algorithm::binary_div}, {"maximum", algorithm::binary_max}, {"minimum", algorithm::binary_min}};
    alg_ = algs.at(n.op);
  }

  void forward(Env& env, bool) override { set_out(env, 0, binary(alg_, in(env, 0), in(env, 1))); }

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
        gb = linear(binary(algorithm::binary_mul, gy, binary(algorithm::binary_div, env.value(node_.outputs[0]), b)), -1);
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

  void forward(Env& env, bool) override {
    bool same = true;
    for (size_t i = 0; i < in_shapes_.size(); ++i) same = same && in_shape(i) == out_shape(0);
    if (!same) {
      Buf acc = binary(algorithm::binary_add, in(env, 0), in(env, 1));
      for (size_t i = 2; i < in_shapes_.size(); ++i) acc = binary(algorithm::binary_add, acc, in(env, i));
      set_out(env, 0, std::move(acc));
      return;
    }
    const memory::desc md = plain_md(dims_of(out_shape(0)));
    const size_t n = in_shapes_.size();
    const auto& c = cached<dnnl::sum::primitive_desc>(Key() << "sum" << n << md, [&] {
      return dnnl::sum::primitive_desc(md, std::vector<float>(n, 1.0f), std::vector<memory::desc>(n, md), cpu_engine());
    });
    Buf y(out_shape(0));
    std::unordered_map<int, memory> args{{DNNL_ARG_DST, mem(md, y.ptr())}};
    for (size_t i = 0; i < n; ++i) args[DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i)] = mem(md, in(env, i).ptr());
    run(c.prim, args);
    set_out(env, 0, std::move(y));
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

  void forward(Env& env, bool) override {
    const size_t n = in_shapes_.size();
    std::vector<memory::desc> srcs;
    Key key;
    key << "concat" << axis_;
    for (size_t i = 0; i < n; ++i) {
      srcs.push_back(plain_md(dims_of(in_shape(i))));
      key << srcs.back();
    }
    const memory::desc dst = plain_md(dims_of(out_shape(0)));
    const auto& c = cached<dnnl::concat::primitive_desc>(
        key, [&] { return dnnl::concat::primitive_desc(dst, axis_, srcs, cpu_engine()); });
    Buf y(out_shape(0));
    std::unordered_map<int, memory> args{{DNNL_ARG_DST, mem(dst, y.ptr())}};
    for (size_t i = 0; i < n; ++i) args[DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i)] = mem(srcs[i], in(env, i).ptr());
    run(c.prim, args);
    set_out(env, 0, std::move(y));
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
