// The suggested root-cause class of a finding the ledger does not know: NaN policies, denormal
// modes, float32's spread, categorical parameters, crashes.
#include "localize/classify.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ops/registry.h"

namespace quorum::localize {
namespace {

using core::Tensor;

ir::Node node(const std::string& op, core::Attrs attrs = {}) {
  ir::Node n;
  n.name = op + "_0";
  n.op = op;
  n.attrs = ops::canonical_attrs(ops::op(op), attrs);
  return n;
}

Kernel forward(const ir::Node& n) {
  return [n](const std::vector<Tensor>& in) {
    ops::Inputs p;
    for (const auto& t : in) p.push_back(&t);
    return ops::op(n.op).forward(p, n.attrs);
  };
}

Tensor t(std::vector<double> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::f64({1, n}, v);
}

const ops::Tolerance kTol{1e-6, 1e-6};
const double kNan = std::nan("");

ClassGuess guess(core::FindingKind kind, const ir::Node& n, std::vector<Tensor> in, std::vector<double> got,
                 std::vector<std::string> causes = {}) {
  return guess_class(kind, n, forward(n), in, {t(got)}, kTol, core::DType::F32, causes);
}

TEST(Classify, NanTakenAsMinusInfinityIsAConvention) {
  // relu(NaN) = 0 and max pooling skipping a NaN: maxNum semantics.
  EXPECT_EQ(guess(core::FindingKind::NaNSwallowed, node("relu"), {t({kNan, 2})}, {0, 2}).cls, "convention");
}

TEST(Classify, ANumberNoNanPolicyExplainsIsABug) {
  // exp(NaN) = inf: with the NaN taken as -inf exp gives 0.
  EXPECT_EQ(guess(core::FindingKind::NaNSwallowed, node("exp"), {t({kNan, 0})}, {INFINITY, 1}).cls, "bug");
}

TEST(Classify, DenormalsAreZeroIsAConvention) {
  const double tiny = 1e-40;  // a float32 subnormal
  EXPECT_EQ(guess(core::FindingKind::Inconsistency, node("mul"), {t({tiny, 3}), t({1e38, 1})}, {0, 3}).cls,
            "convention");
}

TEST(Classify, WithinFloat32sSpreadIsPrecisionAndFarBeyondIsABug) {
  // log near 1 is ill-conditioned in relative terms: a result a few float32 ulps of x away is precision.
  const double x = 1.0 + 0x1p-22;
  const double exact = std::log(x);
  const ClassGuess near = guess(core::FindingKind::Inconsistency, node("log"), {t({x})}, {exact + 3 * 0x1p-24});
  EXPECT_EQ(near.cls, "precision") << near.why;
  const ClassGuess far = guess(core::FindingKind::Inconsistency, node("log"), {t({x})}, {exact + 1e-3});
  EXPECT_EQ(far.cls, "bug") << far.why;
  EXPECT_GT(far.excess, kPrecisionSpreads);
}

TEST(Classify, ACategoricalCauseBeyondPrecisionIsAConvention) {
  // gelu's tanh form where the exact one is asked for: the mode selects it.
  const ir::Node exact = node("gelu", {{"approximate", std::string("none")}});
  const double tanh_form = 0.5 * (1 + std::tanh(std::sqrt(2 / M_PI) * (1.5 + 0.044715 * 1.5 * 1.5 * 1.5))) * 1.5;
  const ClassGuess g = guess(core::FindingKind::Inconsistency, exact, {t({1.5})}, {tanh_form}, {"approximate"});
  EXPECT_EQ(g.cls, "convention") << g.why;
  // The same kind of difference with a numeric cause (elu's alpha) is a bug.
  EXPECT_EQ(guess(core::FindingKind::Inconsistency, node("elu", {{"alpha", 0.5}}), {t({-1})}, {-0.63}, {"alpha"}).cls,
            "bug");
}

TEST(Classify, NanFromOperandsAtFloat32sRangeIsPrecisionElseABug) {
  EXPECT_EQ(guess(core::FindingKind::NaN, node("square"), {t({3e19})}, {INFINITY}).cls, "precision");
  EXPECT_EQ(guess(core::FindingKind::NaN, node("softplus"), {t({89})}, {INFINITY}).cls, "bug");
}

// A recurrent layer's pre-activation summing 400 products 9.8e35 before 400 of the opposite sign: the exact
// sum is 0 and relu(0) = 0, but the float32 evaluation's running sum passes FLT_MAX (inf, in either order).
// With operands below kRangeEdge only the kernel's own float32 evaluation says so, and the guess names it;
// a NaN it does not give stays a bug.
TEST(Classify, NanTheKernelsFloat32EvaluationGivesTooIsPrecisionNamingTheOrder) {
  const ir::Node n = node("simple_rnn", {{"hidden_size", int64_t{1}}, {"return_sequences", int64_t{0}},
                                         {"activation", std::string("relu")}});
  const double v = 9.9e17;
  ASSERT_LT(v, kRangeEdge);
  std::vector<double> x(800, v);
  for (size_t i = 400; i < x.size(); ++i) x[i] = -v;
  const std::vector<Tensor> in = {Tensor::f64({1, 1, 800}, x), Tensor::f64({1, 800}, std::vector<double>(800, v)),
                                  Tensor::f64({1, 1}, {0}), Tensor::f64({1}, {0}), Tensor::f64({1}, {0})};
  const ClassGuess g = guess(core::FindingKind::NaN, n, in, {INFINITY});
  EXPECT_EQ(g.cls, "precision") << g.why;
  EXPECT_NE(g.why.find("float32, products summed in order"), std::string::npos) << g.why;
  EXPECT_EQ(guess(core::FindingKind::NaN, n, in, {kNan}).cls, "bug") << "the float32 evaluation gives inf, not NaN";
}

TEST(Classify, ACrashIsABug) { EXPECT_EQ(guess(core::FindingKind::Crash, node("relu"), {t({1})}, {1}).cls, "bug"); }

}  // namespace
}  // namespace quorum::localize
