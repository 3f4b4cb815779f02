// The kernels' float32 evaluation (ops::Float32Evaluation): the recurrent layers' own formula computed in
// float32, products summed in order or by fused multiply-adds. Where the numbers stay in range it agrees with
// the float64 kernel to float32's accuracy and holds float32 values; where a per-step product or a state
// gradient leaves float32's range it gives what a float32 library gives (NaN in order, inf fused) although
// the float64 result is finite.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <string>

#include "ops/registry.h"

namespace quorum::ops {
namespace {

Tensor filled(const core::Shape& s, double phase, double scale) {
  Tensor t(core::DType::F64, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.f64()[i] = static_cast<float>(scale * std::sin(1.3 * i + phase));
  return t;
}

struct Results {
  std::vector<Tensor> y, grads;
};

Results evaluate(const OpSpec& s, const std::vector<Tensor>& in, const core::Attrs& a, const Tensor& gy) {
  Inputs p;
  for (const Tensor& t : in) p.push_back(&t);
  Results r;
  r.y = s.forward(p, a);
  r.grads = s.vjp(p, a, r.y, {gy});
  return r;
}

Results evaluate_in(std::optional<Float32Order> order, const OpSpec& s, const std::vector<Tensor>& in,
                const core::Attrs& a, const Tensor& gy) {
  if (!order) return evaluate(s, in, a, gy);
  const Float32Evaluation scope(*order);
  return evaluate(s, in, a, gy);
}

TEST(Float32Evaluation, RecurrentLayersListBothOrdersAndAgreeWithTheKernelInRange) {
  for (const std::string op : {"simple_rnn", "lstm", "gru"}) {
    const OpSpec& s = ops::op(op);
    ASSERT_EQ(s.float32_orders.size(), 2u) << op;
    const int64_t g = op == "lstm" ? 4 : op == "gru" ? 3 : 1, h = 3;
    for (const std::string dir : {"forward", "bidirectional"}) {
      core::Attrs a = canonical_attrs(s, {{"hidden_size", int64_t{h}}, {"direction", dir}});
      if (op == "gru") a["linear_before_reset"] = int64_t{0};
      const int64_t d = dir == "bidirectional" ? 2 : 1;
      const std::vector<Tensor> in = {filled({2, 4, 3}, 0.1, 1.5), filled({d * g * h, 3}, 0.7, 0.8),
                                      filled({d * g * h, h}, 1.9, 0.6), filled({d * g * h}, 2.3, 0.3),
                                      filled({d * g * h}, 0.5, 0.3)};
      const Tensor gy = filled({2, 4, d * h}, 1.1, 1.0);
      const Results exact = evaluate_in(std::nullopt, s, in, a, gy);
      for (const Float32Order order : s.float32_orders) {
        const Results f = evaluate_in(order, s, in, a, gy);
        ASSERT_EQ(f.grads.size(), exact.grads.size());
        std::vector<std::pair<const Tensor*, const Tensor*>> pairs = {{&f.y[0], &exact.y[0]}};
        for (size_t i = 0; i < f.grads.size(); ++i) pairs.push_back({&f.grads[i], &exact.grads[i]});
        bool any_rounded = false;
        for (const auto& [got, want] : pairs)
          for (int64_t i = 0; i < want->numel(); ++i) {
            const double v = got->get(i), w = want->get(i);
            EXPECT_NEAR(v, w, 1e-5 + 1e-4 * std::abs(w)) << op << " " << dir << " " << float32_order_name(order);
            EXPECT_EQ(static_cast<double>(static_cast<float>(v)), v) << "a float32 value";
            any_rounded |= v != w;
          }
        EXPECT_TRUE(any_rounded) << op << ": the float32 evaluation computes in float32";
      }
    }
  }
}

// dW_ih = sum_t dpre_t x_t^T with per-step products 3e40 and -2.99e40 whose exact sum 1e38 fits: summed in
// order (the backward walks from the last step) the first is -inf and the second inf (NaN, as libtorch gives);
// fused, the first rounds to -inf and the second adds to it exactly (-inf, as oneDNN's FMA kernels give).
TEST(Float32Evaluation, ARecurrentWeightGradientWhoseStepProductsOverflowIsNaNInOrderAndInfFused) {
  const OpSpec& s = ops::op("simple_rnn");
  const core::Attrs a = canonical_attrs(s, {{"hidden_size", int64_t{1}}, {"return_sequences", int64_t{1}}});
  const std::vector<Tensor> in = {Tensor::f64({1, 2, 2}, {100, -100, -100, 100}), Tensor::f64({1, 2}, {1, 1}),
                                  Tensor::f64({1, 1}, {0}), Tensor::f64({1}, {0}), Tensor::f64({1}, {0})};
  const Tensor gy = Tensor::f64({1, 2, 1}, {3e38, 2.99e38});
  const double exact = evaluate_in(std::nullopt, s, in, a, gy).grads[1].get(0);
  EXPECT_NEAR(exact, 1e38, 1e33);
  EXPECT_TRUE(std::isnan(evaluate_in(Float32Order::kInOrder, s, in, a, gy).grads[1].get(0)));
  EXPECT_EQ(evaluate_in(Float32Order::kFused, s, in, a, gy).grads[1].get(0), -INFINITY);
}

// A saturated gate times an overflowed state gradient: step 0's tanh(10) is 1 - 8e-9, 1 in float32, so its
// derivative is 0 there; the state gradient w_hh * dpre_1 = 10 * 3e38 passes FLT_MAX. The exact dx_0 is
// 3e39 * 8.2e-9 = 2.5e31; float32's inf * 0 is NaN, in either order. Step 1's dx_1 = w_ih * dpre_1 = 3e38
// stays in range.
TEST(Float32Evaluation, ASaturatedGateTimesAnOverflowedStateGradientIsNaN) {
  const OpSpec& s = ops::op("simple_rnn");
  const core::Attrs a = canonical_attrs(s, {{"hidden_size", int64_t{1}}, {"return_sequences", int64_t{1}}});
  const std::vector<Tensor> in = {Tensor::f64({1, 2, 1}, {10, -10}), Tensor::f64({1, 1}, {1}),
                                  Tensor::f64({1, 1}, {10}), Tensor::f64({1}, {0}), Tensor::f64({1}, {0})};
  const Tensor gy = Tensor::f64({1, 2, 1}, {0, 3e38});
  const Results exact = evaluate_in(std::nullopt, s, in, a, gy);
  EXPECT_NEAR(exact.grads[0].get(0), 2.47e31, 0.01e31);
  for (const Float32Order order : {Float32Order::kInOrder, Float32Order::kFused}) {
    const Results f = evaluate_in(order, s, in, a, gy);
    EXPECT_TRUE(std::isnan(f.grads[0].get(0))) << float32_order_name(order);
    EXPECT_NEAR(f.grads[0].get(1), 3e38, 1e32) << float32_order_name(order);
  }
}

// Dense: in range the float32 evaluation agrees with the kernel; an input gradient summing the products
// 3e38 * 2 and 3e38 * -2 (exactly 0) is NaN in order and inf fused, as float32 libraries give it.
TEST(Float32Evaluation, DenseAgreesInRangeAndItsInputGradientsProductsOverflow) {
  const OpSpec& s = ops::op("dense");
  ASSERT_EQ(s.float32_orders.size(), 2u);
  const core::Attrs a = canonical_attrs(s, {{"units", int64_t{2}}, {"bias", int64_t{1}}});
  const std::vector<Tensor> in = {filled({3, 5}, 0.2, 2.0), filled({2, 5}, 1.4, 0.7), filled({2}, 0.9, 0.5)};
  const Tensor gy = filled({3, 2}, 2.2, 1.0);
  const Results exact = evaluate_in(std::nullopt, s, in, a, gy);
  for (const Float32Order order : s.float32_orders) {
    const Results f = evaluate_in(order, s, in, a, gy);
    for (int64_t i = 0; i < exact.y[0].numel(); ++i) EXPECT_NEAR(f.y[0].get(i), exact.y[0].get(i), 1e-5);
    for (size_t k = 0; k < 3; ++k)
      for (int64_t i = 0; i < exact.grads[k].numel(); ++i)
        EXPECT_NEAR(f.grads[k].get(i), exact.grads[k].get(i), 1e-5) << k << " " << i;
  }
  const std::vector<Tensor> big = {Tensor::f64({1, 1}, {1}), Tensor::f64({2, 1}, {2, -2})};
  const core::Attrs nb = canonical_attrs(s, {{"units", int64_t{2}}, {"bias", int64_t{0}}});
  const Tensor g2 = Tensor::f64({1, 2}, {3e38, 3e38});
  EXPECT_EQ(evaluate_in(std::nullopt, s, big, nb, g2).grads[0].get(0), 0);
  EXPECT_TRUE(std::isnan(evaluate_in(Float32Order::kInOrder, s, big, nb, g2).grads[0].get(0)));
  EXPECT_EQ(evaluate_in(Float32Order::kFused, s, big, nb, g2).grads[0].get(0), INFINITY);
}

// Plain sums (global_avg_pool, reduce_sum, reduce_mean): in range every order agrees with the kernel, the
// forward and the gradient; 60 copies of FLT_MAX / 60 sum to exactly FLT_MAX, which float32 in order keeps
// and 16 lanes then a horizontal sum round past FLT_MAX to inf (seed 14201's torch global_avg_pool).
TEST(Float32Evaluation, APlainSumInLanesRoundsPastFloat32MaxWhereInOrderItDoesNot) {
  struct Sum {
    const char* op;
    core::Attrs attrs;
    core::Shape out;
  };
  for (const Sum& c : {Sum{"global_avg_pool", {}, {1, 2, 1}},
                       Sum{"reduce_mean", {{"axes", std::vector<int64_t>{2}}}, {1, 2, 1}},
                       Sum{"reduce_sum", {{"axes", std::vector<int64_t>{2}}}, {1, 2, 1}}}) {
    const OpSpec& s = ops::op(c.op);
    ASSERT_EQ(s.float32_orders.size(), 2u) << c.op;
    const core::Attrs a = canonical_attrs(s, c.attrs);
    const Tensor gy = filled(c.out, 0.4, 1.0);
    const std::vector<Tensor> in = {filled({1, 2, 60}, 0.3, 3.0)};
    const Results exact = evaluate_in(std::nullopt, s, in, a, gy);
    for (const Float32Order order : s.float32_orders) {
      const Results f = evaluate_in(order, s, in, a, gy);
      for (int64_t i = 0; i < exact.y[0].numel(); ++i) EXPECT_NEAR(f.y[0].get(i), exact.y[0].get(i), 1e-5) << c.op;
      for (int64_t i = 0; i < exact.grads[0].numel(); ++i)
        EXPECT_NEAR(f.grads[0].get(i), exact.grads[0].get(i), 1e-6) << c.op << " " << i;
    }
    Tensor x(core::DType::F64, {1, 2, 60});
    for (int64_t i = 0; i < 120; ++i) x.f64()[i] = static_cast<double>(FLT_MAX / 60);
    const double terms = std::string(c.op) == "reduce_sum" ? 1.0 : 60.0;
    EXPECT_DOUBLE_EQ(evaluate_in(std::nullopt, s, {x}, a, gy).y[0].get(0), static_cast<double>(FLT_MAX) / terms)
        << c.op;
    EXPECT_TRUE(std::isfinite(evaluate_in(Float32Order::kInOrder, s, {x}, a, gy).y[0].get(0))) << c.op;
    EXPECT_EQ(evaluate_in(Float32Order::kLanes, s, {x}, a, gy).y[0].get(1), INFINITY) << c.op;
  }
  // A window's average sums its few cells in order; padded cells counted or not.
  const OpSpec& ap = ops::op("avg_pool1d");
  ASSERT_EQ(ap.float32_orders.size(), 1u);
  for (const int64_t include : {0, 1}) {
    const core::Attrs a = canonical_attrs(ap, {{"kernel_shape", std::vector<int64_t>{4}},
                                               {"strides", std::vector<int64_t>{2}},
                                               {"pads", std::vector<int64_t>{1, 1}},
                                               {"count_include_pad", include}});
    const std::vector<Tensor> in = {filled({1, 2, 9}, 0.7, 2.0)};
    const Tensor gy = filled({1, 2, 4}, 1.1, 1.0);
    const Results exact = evaluate_in(std::nullopt, ap, in, a, gy);
    const Results f = evaluate_in(Float32Order::kInOrder, ap, in, a, gy);
    for (int64_t i = 0; i < exact.y[0].numel(); ++i) EXPECT_NEAR(f.y[0].get(i), exact.y[0].get(i), 1e-5) << i;
    for (int64_t i = 0; i < exact.grads[0].numel(); ++i) EXPECT_NEAR(f.grads[0].get(i), exact.grads[0].get(i), 1e-6);
  }
}

// Normalisations: in range the forward's float32 evaluation agrees with the kernel, in both modes of
// batch_norm and for layer_norm.
TEST(Float32Evaluation, NormalisationsAgreeWithTheKernelInRange) {
  const Tensor x = filled({2, 3, 4}, 0.3, 2.0), p = filled({3}, 0.8, 1.0), var = filled({3}, 1.7, 0.4);
  for (const int64_t training : {0, 1}) {
    const OpSpec& s = ops::op("batch_norm");
    ASSERT_EQ(s.float32_orders.size(), 2u);
    const core::Attrs a = canonical_attrs(s, {{"training", training}, {"epsilon", 1e-3}});
    Tensor v = var;
    for (int64_t i = 0; i < 3; ++i) v.f64()[i] = 1 + std::abs(v.get(i));
    const std::vector<Tensor> in = {x, p, filled({3}, 2.1, 0.5), filled({3}, 0.4, 0.5), v};
    const Results exact = evaluate_in(std::nullopt, s, in, a, x);
    for (const Float32Order order : s.float32_orders) {
      const Results f = evaluate_in(order, s, in, a, x);
      for (int64_t i = 0; i < x.numel(); ++i)
        EXPECT_NEAR(f.y[0].get(i), exact.y[0].get(i), 1e-5) << "training " << training << " at " << i;
      ASSERT_EQ(f.grads.size(), exact.grads.size());
      for (size_t k = 0; k < 3; ++k)
        for (int64_t i = 0; i < exact.grads[k].numel(); ++i)
          EXPECT_NEAR(f.grads[k].get(i), exact.grads[k].get(i), 1e-4 * (1 + std::abs(exact.grads[k].get(i))))
              << "training " << training << " gradient " << k << " at " << i;
    }
  }
  const OpSpec& s = ops::op("layer_norm");
  const core::Attrs a = canonical_attrs(s, {{"axis", int64_t{-1}}});
  const std::vector<Tensor> in = {x, filled({4}, 0.8, 1.0), filled({4}, 2.1, 0.5)};
  const Results exact = evaluate_in(std::nullopt, s, in, a, x);
  for (const Float32Order order : s.float32_orders) {
    const Results f = evaluate_in(order, s, in, a, x);
    for (int64_t i = 0; i < x.numel(); ++i) EXPECT_NEAR(f.y[0].get(i), exact.y[0].get(i), 1e-5) << i;
    ASSERT_EQ(f.grads.size(), 3u);
    for (size_t k = 0; k < 3; ++k)
      for (int64_t i = 0; i < exact.grads[k].numel(); ++i)
        EXPECT_NEAR(f.grads[k].get(i), exact.grads[k].get(i), 1e-4 * (1 + std::abs(exact.grads[k].get(i))))
            << "layer_norm gradient " << k << " at " << i;
  }
}

// layer_norm's backward in libtorch's order multiplies the row's raw sum db * mean - ds by rstd three times
// before dividing by N: x = {0, 2e-3} (rstd 301.5) under dy = {1e36, -1e36} takes 2e33 to 5.5e40, inf in
// float32, and dx = rstd * dy + b * x + c is NaN (libtorch 1.13's float32 NaN) where the float64 gradient is
// +-2.74e38.
TEST(Float32Evaluation, ALayerNormGradientWhoseRawSumTimesRstdCubedOverflowsIsNaN) {
  const OpSpec& s = ops::op("layer_norm");
  const core::Attrs a = canonical_attrs(s, {{"axis", int64_t{-1}}, {"epsilon", 1e-5}});
  const std::vector<Tensor> in = {Tensor::f64({1, 2}, {0, static_cast<float>(2e-3)}), Tensor::f64({2}, {1, 1}),
                                  Tensor::f64({2}, {0, 0})};
  const Tensor dy = Tensor::f64({1, 2}, {1e36, -1e36});
  const Results exact = evaluate_in(std::nullopt, s, in, a, dy);
  EXPECT_NEAR(exact.grads[0].get(0), 2.741e38, 1e35);
  EXPECT_NEAR(exact.grads[0].get(1), -2.741e38, 1e35);
  for (const Float32Order order : s.float32_orders) {
    const Results f = evaluate_in(order, s, in, a, dy);
    EXPECT_TRUE(std::isnan(f.grads[0].get(0))) << float32_order_name(order) << ": " << f.grads[0].get(0);
    EXPECT_TRUE(std::isnan(f.grads[0].get(1))) << float32_order_name(order);
  }
}

// An affine step with a FLT_MAX scale. batch_norm folds scale * rstd = FLT_MAX * 1.1 into one factor, inf
// in float32, so y = 0.5 * a + (bias - mean * a) is NaN where the float64 value 1.9e38 fits. layer_norm over a
// constant row of 1e6 has xhat = 0 exactly, and in order float32's x * rstd - mean * rstd is 0 too; fused,
// x * rstd keeps the rounding error of mean * rstd (a few units), and times FLT_MAX that is inf (libtorch's
// vectorised fmadd gives -inf there).
TEST(Float32Evaluation, AnAffineStepWithAFloat32MaxScaleLeavesFloat32sRange) {
  const OpSpec& bn = ops::op("batch_norm");
  const std::vector<Tensor> in = {Tensor::f64({1, 1, 2}, {0.5, 0.25}), Tensor::f64({1}, {FLT_MAX}),
                                  Tensor::f64({1}, {0}), Tensor::f64({1}, {0.25}), Tensor::f64({1}, {0.82})};
  const core::Attrs a = canonical_attrs(bn, {{"training", int64_t{0}}, {"epsilon", 1e-5}});
  const Tensor y = evaluate_in(std::nullopt, bn, in, a, in[0]).y[0];
  EXPECT_NEAR(y.get(0), 9.4e37, 0.1e37);
  EXPECT_EQ(y.get(1), 0);
  for (const Float32Order order : bn.float32_orders)
    EXPECT_TRUE(std::isnan(evaluate_in(order, bn, in, a, in[0]).y[0].get(0))) << float32_order_name(order);

  const OpSpec& ln = ops::op("layer_norm");
  const std::vector<Tensor> row = {Tensor::f64({1, 4}, {1e6, 1e6, 1e6, 1e6}),
                                   Tensor::f64({4}, {FLT_MAX, 1, 1, 1}), Tensor::f64({4}, {0, 0, 0, 0})};
  const core::Attrs la = canonical_attrs(ln, {{"axis", int64_t{-1}}, {"epsilon", 1e-5}});
  EXPECT_EQ(evaluate_in(std::nullopt, ln, row, la, row[0]).y[0].get(0), 0);
  EXPECT_EQ(evaluate_in(Float32Order::kInOrder, ln, row, la, row[0]).y[0].get(0), 0);
  const Tensor fused = evaluate_in(Float32Order::kFused, ln, row, la, row[0]).y[0];
  EXPECT_TRUE(std::isinf(fused.get(0))) << fused.get(0);
  EXPECT_TRUE(std::isfinite(fused.get(1))) << "scale 1: xhat fits";
}

// batch_norm's training backward as libtorch writes it multiplies the centred gradient by invstd before the scale:
// 15 zeros have var 0 and invstd 316, and dy = -6e37 at every other element makes (dy - mean(dy)) * invstd pass
// FLT_MAX, so dx is +-inf in float32 although with a scale of 1e-3 the exact 1.1e37 fits (seed 14201: libtorch's
// +-inf, which the operand-magnitude bound missed, x and the mean being 0).
TEST(Float32Evaluation, ABatchNormGradientCentredAndScaledByInvstdBeforeTheScaleOverflows) {
  const OpSpec& s = ops::op("batch_norm");
  const core::Attrs a = canonical_attrs(s, {{"training", int64_t{1}}, {"epsilon", 1e-5}});
  const std::vector<Tensor> in = {Tensor(core::DType::F64, {1, 1, 15}), Tensor::f64({1}, {1e-3}),
                                  Tensor::f64({1}, {0}), Tensor::f64({1}, {0}), Tensor::f64({1}, {1})};
  Tensor gy(core::DType::F64, {1, 1, 15});
  for (int64_t i = 0; i < 15; i += 2) gy.f64()[i] = -6e37;
  const double exact = evaluate_in(std::nullopt, s, in, a, gy).grads[0].get(0);
  EXPECT_TRUE(std::isfinite(exact));
  EXPECT_GT(std::abs(exact), 1e36);
  EXPECT_LT(std::abs(exact), FLT_MAX);
  for (const Float32Order order : s.float32_orders)
    EXPECT_TRUE(std::isinf(evaluate_in(order, s, in, a, gy).grads[0].get(0))) << float32_order_name(order);
}

}  // namespace
}  // namespace quorum::ops
