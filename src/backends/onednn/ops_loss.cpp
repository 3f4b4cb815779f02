// The four catalogue losses and their gradients, built from oneDNN primitives only: binary
// (sub/mul/div/add/eq/gt), eltwise (square/log/linear/relu), reduction (mean/sum/max) and softmax_v2
// (accurate and log). Used both by train_step and by the loss operators as graph nodes.
#include "backends/onednn/onednn_common.h"
#include "core/error.h"

namespace quorum::backends::onednn {
namespace {

Buf softmax_along(algorithm alg, const Buf& x, int axis) {
  const memory::desc md = md_of(x);
  const auto& c =
      cached<dnnl::softmax_v2_forward::primitive_desc>(Key() << "loss" << static_cast<int>(alg) << axis << md, [&] {
        dnnl::softmax_v2_forward::desc d(prop_kind::forward_inference, alg, md, md, axis);
        return dnnl::softmax_v2_forward::primitive_desc(d, cpu_engine());
      });
  Buf y(x.shape);
  run(c.prim, {{DNNL_ARG_SRC, mem(md, x.ptr())}, {DNNL_ARG_DST, mem(md, y.ptr())}});
  return y;
}

Buf mul(const Buf& a, const Buf& b) { return binary(algorithm::binary_mul, a, b); }
Buf sub(const Buf& a, const Buf& b) { return binary(algorithm::binary_sub, a, b); }
Buf one_minus(const Buf& x) { return linear(x, -1, 1); }
Buf total(algorithm alg, const Buf& x) { return reduce_to(alg, x, Shape{}); }

// -1 where c == 0, -inf elsewhere (binary_div: -1 / (c == 0)).
Buf minus_one_or_inf(const Buf& c) {
  Buf minus_one(Shape{1});
  minus_one.data[0] = -1;
  return binary(algorithm::binary_div, minus_one, binary(algorithm::binary_eq, c, Buf(Shape{1})));
}

// Where c is 0, the term c * x is absent: its limit 0, not 0 * inf = NaN (the catalogue's losses,
// ops/loss.cpp). Returns x where c != 0 and x clamped to [-1, 1] where c == 0, so that mul(c, result)
// is 0 there whatever x is. The bounds come first in binary_max/min: a NaN x stays NaN (oneDNN returns
// the second operand when one is NaN, onednn-binary-max-nan-operand-order).
Buf zero_where_absent(const Buf& c, const Buf& x) {
  const Buf lo = minus_one_or_inf(c);
  return binary(algorithm::binary_min, linear(lo, -1), binary(algorithm::binary_max, lo, x));
}
Buf scaled(const Buf& c, const Buf& x) { return mul(c, zero_where_absent(c, x)); }

void require_rank2(const std::string& name, const Buf& p) {
  if (p.shape.size() != 2)
    throw core::UserError(name + " expects a prediction [N, C] of rank 2, got " + core::to_string(p.shape));
}

LossValue mse(const Buf& p, const Buf& t) {
  const Buf d = sub(p, t);
  return {total(algorithm::reduction_mean, eltwise(algorithm::eltwise_square, 0, 0, d)),
          linear(d, 2.0f / static_cast<float>(p.numel()))};
}

LossValue softmax_cross_entropy(const Buf& p, const Buf& t) {
  require_rank2("softmax_cross_entropy", p);
  const float inv_n = 1.0f / static_cast<float>(p.shape[0]);
  const Buf log_sm = softmax_along(algorithm::softmax_log, p, 1);
  LossValue v;
  v.loss = linear(total(algorithm::reduction_sum, scaled(t, log_sm)), -inv_n);
  // d/dp = (sum_c t) * softmax(p) - t, over N.
  const Buf tsum = reduce_to(algorithm::reduction_sum, t, Shape{p.shape[0], 1});
  v.grad = linear(sub(mul(softmax_along(algorithm::softmax_accurate, p, 1), tsum), t), inv_n);
  return v;
}

LossValue binary_cross_entropy(const Buf& p, const Buf& t) {
  const Buf q = one_minus(p);
  const Buf not_t = one_minus(t);
  const Buf terms = binary(algorithm::binary_add, scaled(t, eltwise(algorithm::eltwise_log, 0, 0, p)),
                           scaled(not_t, eltwise(algorithm::eltwise_log, 0, 0, q)));
  LossValue v;
  v.loss = linear(total(algorithm::reduction_mean, terms), -1);
  // (p - t) / (p q), which is 0 / 0 at p = t = 0 and p = t = 1, where the limits are 1 / q and -1 / p:
  // where t = 0, p is replaced by max(1, p) (p_: (p_ - 0) / (p_ q) = 1 / q for every p); where t = 1, q by
  // max(1, q) in the denominator and the numerator p - 1 = -q by -q_ (q_ - q subtracted). Elsewhere
  // p_ = p, q_ = q: the expression as before.
  const auto floor_one = [](const Buf& c, const Buf& x) {
    return binary(algorithm::binary_max, linear(minus_one_or_inf(c), 1, 2), x);
  };
  const Buf p_ = floor_one(t, p), q_ = floor_one(not_t, q);
  const Buf num = sub(sub(p_, t), sub(q_, q));
  // num / (p_ q_ n): the 1 / n goes into the denominator, one division last. Dividing first and
  // scaling by 1 / n after overflowed float32 where the gradient fits (p = 1e-40, t = 0.269, n = 16:
  // -2.69e39 before the scaling, -1.68e38 exactly; tests/backends/loss_limits_test.cpp). p_ q_ <= 1
  // for p in [0, 1], so p_ q_ n cannot overflow, and a subnormal p_ q_ times n is exact.
  const Buf denom = linear(mul(p_, q_), static_cast<float>(p.numel()));
  v.grad = binary(algorithm::binary_div, num, denom);
  return v;
}

LossValue categorical_hinge(const Buf& p, const Buf& t) {
  require_rank2("categorical_hinge", p);
  const Shape rows{p.shape[0], 1};
  const float inv_n = 1.0f / static_cast<float>(p.shape[0]);
  const Buf not_t = one_minus(t);
  const Buf q = scaled(not_t, p);
  const Buf pos = reduce_to(algorithm::reduction_sum, scaled(t, p), rows);
  const Buf neg = reduce_to(algorithm::reduction_max, q, rows);
  const Buf margin = linear(sub(neg, pos), 1, 1);
  LossValue v;
  v.loss = total(algorithm::reduction_mean, eltwise(algorithm::eltwise_relu, 0, 0, margin));
  // Rows with margin <= 0 sit on the flat part of the hinge; elsewhere d/dp = (1-t)*[p is the
  // first largest (1-t)*p] - t. The first of tied maxima (the reference's choice): score each
  // match by C - column, keep the best score.
  const Buf active = binary(algorithm::binary_gt, margin, Buf(Shape{1}));
  Buf rank(Shape{1, p.shape[1]});
  for (int64_t j = 0; j < p.shape[1]; ++j) rank.data[static_cast<size_t>(j)] = static_cast<float>(p.shape[1] - j);
  const Buf score = mul(binary(algorithm::binary_eq, q, neg), rank);
  const Buf at_max = binary(algorithm::binary_eq, score, reduce_to(algorithm::reduction_max, score, rows));
  v.grad = linear(mul(sub(mul(at_max, not_t), t), active), inv_n);
  return v;
}

const std::map<std::string, std::function<LossValue(const Buf&, const Buf&)>>& losses() {
  static const std::map<std::string, std::function<LossValue(const Buf&, const Buf&)>> m = {
      {"mse_loss", mse},
      {"softmax_cross_entropy", softmax_cross_entropy},
      {"binary_cross_entropy", binary_cross_entropy},
      {"categorical_hinge", categorical_hinge}};
  return m;
}

// A loss as a graph node: scalar output; the target (input 1) is not differentiated.
class LossKernel : public Kernel {
 public:
  using Kernel::Kernel;

  void forward(Env& env, bool) override {
    value_ = compute_loss(node_.op, in(env, 0), in(env, 1));
    set_out(env, 0, value_.loss);
  }

  void backward(Env& env) override { add_gin(env, 0, mul(value_.grad, *gout(env, 0))); }

 private:
  LossValue value_;
};

}  // namespace

bool loss_known(const std::string& name) { return losses().count(name) > 0; }

LossValue compute_loss(const std::string& name, const Buf& pred, const Buf& target) {
  LossValue v = losses().at(name)(pred, target);
  v.loss.shape = {};
  return v;
}

void register_loss(OpTable& t) {
  for (const auto& [name, fn] : losses()) t[name] = OpEntry{maker<LossKernel>(), {}, {}};
}

}  // namespace quorum::backends::onednn
