// softmax / log_softmax (softmax_v2 primitive, accurate and log algorithms, any axis) and the
// reductions sum / mean / max / min / prod (reduction primitive with the reduced dims kept as 1).
// Softmax's and reduce_sum/mean's backward (broadcast by binary add onto zeros, scaling by eltwise
// linear) are the lowering's steps; reduce_max/min/prod's are composed here: for max/min the first
// extreme element in row-major order (as the reference), for prod the product of
// the other elements, exact at zeros (as the reference).
#include "backends/onednn/onednn_sink.h"
#include "ops/kernel_util.h"

namespace quorum::backends::onednn {
namespace {

class SoftmaxKernel : public Kernel {
 public:
  SoftmaxKernel(const ir::Graph& g, const ir::Node& n) : Kernel(g, n) {
    softmax_fwd_pd(lw::softmax_geo(n.op, in_shape(0), attrs()), prop_kind::forward_inference);
  }

  void forward(Env& env, bool training) override {
    lowered_forward(env, node_, in_shapes_, out_shapes_, training, saved_);
  }

  void backward(Env& env) override { lowered_backward(env, node_, in_shapes_, out_shapes_, saved_); }

 private:
  Saved saved_;
};

// Keeps, in each slice of `mask` (1 where an element matches, 0 elsewhere) reduced to `keep`, only
// the first 1 in row-major order: each match scores numel - flat index (all distinct, > 0), the
// slice maximum is the first match, and equality with it leaves exactly that one. A slice without
// a match (the reduction returned a value no element has: oneDNN's min of {inf, inf} is FLT_MAX)
// keeps none: its score maximum 0 equals every non-match's score, so the mask multiplies it out.
Buf first_of(const Buf& mask, const Shape& keep) {
  Buf rank(mask.shape);
  for (int64_t i = 0; i < rank.numel(); ++i) rank.data[static_cast<size_t>(i)] = static_cast<float>(rank.numel() - i);
  const Buf score = binary(algorithm::binary_mul, mask, rank);
  return binary(algorithm::binary_mul, mask,
                binary(algorithm::binary_eq, score, reduce_to(algorithm::reduction_max, score, keep)));
}

class ReduceKernel : public Kernel {
 public:
  ReduceKernel(const ir::Graph& g, const ir::Node& n)
      : Kernel(g, n), alg_(to_dnnl(*lw::reduce_alg(n.op))), keep_(lw::reduce_keep(in_shape(0), attrs())) {}

  void forward(Env& env, bool training) override {
    lowered_forward(env, node_, in_shapes_, out_shapes_, training, saved_);
  }

  void backward(Env& env) override {
    if (lw::backward_mapped(node_)) return lowered_backward(env, node_, in_shapes_, out_shapes_, saved_);
    const Buf& x = in(env, 0);
    const Buf gy = gout(env, 0)->reshaped(keep_);
    const Buf y = env.value(node_.outputs[0]).reshaped(keep_);
    Buf gx;
    switch (alg_) {
      case algorithm::reduction_mul:
        gx = binary(algorithm::binary_mul, prod_of_others(x), gy);
        break;
      default: {
        // The elements equal to their slice's extreme; a NaN extreme (the slice holds a NaN) is
        // matched by the slice's NaNs, which equality misses (NaN != NaN): the first one gets the
        // gradient, as the catalogue's first NaN does.
        const Buf nan_x = binary(algorithm::binary_ne, x, x), nan_y = binary(algorithm::binary_ne, y, y);
        const Buf match = binary(algorithm::binary_max, binary(algorithm::binary_eq, x, y),
                                 binary(algorithm::binary_mul, nan_x, nan_y));
        gx = binary(algorithm::binary_mul, first_of(match, keep_), gy);
        break;
      }
    }
    add_gin(env, 0, std::move(gx));
  }

 private:
  // d prod / d x_i, the product of the other elements of x_i's slice: prefix times suffix
  // products (in double, rounded once). oneDNN has no reduction backward, so this glue is Quorum's;
  // it used to divide the slice's product by x_i and mask zeros, which gives inf * 0 = NaN when
  // the product overflows.
  Buf prod_of_others(const Buf& x) const {
    const std::vector<int64_t> slot = ops::broadcast_map(keep_, x.shape);
    std::vector<std::vector<int64_t>> members(static_cast<size_t>(core::numel(keep_)));
    for (size_t i = 0; i < slot.size(); ++i) members[static_cast<size_t>(slot[i])].push_back(static_cast<int64_t>(i));
    std::vector<double> others(slot.size(), 1.0);
    for (const auto& m : members) {
      double p = 1.0;
      for (int64_t i : m) {
        others[static_cast<size_t>(i)] = p;
        p *= x.data[static_cast<size_t>(i)];
      }
      p = 1.0;
      for (auto it = m.rbegin(); it != m.rend(); ++it) {
        others[static_cast<size_t>(*it)] *= p;
        p *= x.data[static_cast<size_t>(*it)];
      }
    }
    Buf out(x.shape);
    for (size_t i = 0; i < others.size(); ++i) out.data[i] = static_cast<float>(others[i]);
    return out;
  }

  algorithm alg_;
  Shape keep_;
  Saved saved_;
};

}  // namespace

void register_softmax_reduce(OpTable& t) {
  t["softmax"] = OpEntry{maker<SoftmaxKernel>(), {}, {}};
  t["log_softmax"] = OpEntry{maker<SoftmaxKernel>(), {}, {}};
  for (const char* name : {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"})
    t[name] = OpEntry{maker<ReduceKernel>(), {}, {}};
}

}  // namespace quorum::backends::onednn
