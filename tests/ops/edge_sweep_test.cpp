// The infinity sweep: every operator of the catalogue fed the edge values (±inf, NaN, ±0, float32
// subnormals, ±FLT_MAX) in each of its operands, one element at a time, and its float64 kernel
// checked against the operator's mathematical limit: no NaN where the limit is a number (an edge
// value other than NaN, in one element among finite ones), and the known limits of the table below
// exactly (gelu(-inf) = 0, tanh(±inf) = ±1, softmax with +inf entries, ...). The per-node rule
// judges a library's NaN against these kernels (oracle/per_node.cpp), so a kernel that gives NaN
// where the limit is a number would hide a library's bug, and one that gives a number where the
// limit is NaN would invent one.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <map>
#include <set>

#include "ops/materialize.h"
#include "ops/registry.h"

namespace quorum::ops {
namespace {

constexpr double kInfinity = INFINITY;

const std::vector<double>& edges() {
  static const std::vector<double> v = {kInfinity, -kInfinity, std::nan(""), 0.0,     -0.0,
                                        1e-40,     -1e-40,     1.4e-45,      FLT_MAX, -FLT_MAX};
  return v;
}

// Where NaN is the mathematical answer (no limit, or outside the domain), as operator -> operand
// -> the edge values; each with its reason. Anything else NaN from non-NaN operands fails.
struct Indeterminate {
  std::string op;
  int input;  // -1: any operand
  std::vector<double> values;
  std::string why;
};

const std::vector<Indeterminate>& indeterminate() {
  static const std::vector<Indeterminate> v = {
      {"log", 0, {-kInfinity, -FLT_MAX, -1e-40, -1.4e-45}, "log of a negative number"},
      {"sqrt", 0, {-kInfinity, -FLT_MAX, -1e-40}, "square root of a negative number"},
      {"rsqrt", 0, {-kInfinity, -FLT_MAX, -1e-40}, "square root of a negative number"},
      {"pow", 0, {-kInfinity, -FLT_MAX, -1e-40}, "a fractional power of a negative number"},
      {"binary_cross_entropy", 0, {kInfinity, -kInfinity, FLT_MAX, -FLT_MAX, -1e-40, -1.4e-45},
       "a probability outside [0, 1]: log of a negative number"},
      {"binary_cross_entropy", 1, {kInfinity, -kInfinity}, "an infinite target: inf - inf between the two terms"},
      // Places Quorum stays narrower (docs/generators.md): the limit as one element of a normalised
      // group grows exists (layer norm: ±sqrt(n-1) there, -1/sqrt(n-1) elsewhere), but the kernels
      // compute x - mean = inf - inf as every library does, so the per-node rule does not judge it.
      {"batch_norm", -1, {kInfinity, -kInfinity, -FLT_MAX}, "x - mean with an infinite mean or variance"},
      {"layer_norm", -1, {kInfinity, -kInfinity}, "x - mean with an infinite mean"},
      {"lrn", -1, {kInfinity, -kInfinity}, "x / (k + sum x^2)^beta: inf / inf"},
      // Recurrent cells: an infinite gate pre-activation times a zero state (0 * inf) in the kernel's
      // matrix products.
      {"gru", -1, {kInfinity, -kInfinity}, "0 * inf in the gates' products"},
      {"lstm", -1, {kInfinity, -kInfinity}, "0 * inf in the gates' products"},
      {"simple_rnn", -1, {kInfinity, -kInfinity}, "0 * inf in the state's product"},
  };
  return v;
}

bool is_indeterminate(const std::string& op, int input, double v) {
  for (const auto& e : indeterminate())
    if (e.op == op && (e.input < 0 || e.input == input))
      for (double x : e.values)
        if (x == v && std::signbit(x) == std::signbit(v)) return true;
  return false;
}

// The first NaN of the outputs: (output, element), or (-1, -1).
std::pair<int64_t, int64_t> first_nan(const std::vector<Tensor>& out) {
  for (size_t o = 0; o < out.size(); ++o)
    for (int64_t i = 0; i < out[o].numel(); ++i)
      if (std::isnan(out[o].f64()[i])) return {static_cast<int64_t>(o), i};
  return {-1, -1};
}

class EdgeSweep : public ::testing::TestWithParam<std::string> {};

TEST_P(EdgeSweep, NoNaNWhereTheLimitIsANumber) {
  const OpSpec& spec = op(GetParam());
  for (int k = 0; k < 3; ++k) {
    core::Rng rng(core::fnv1a(spec.name) + 7919 * static_cast<uint64_t>(k));
    Case c = spec.sample(rng);
    Materialized m;
    ASSERT_NO_THROW(m = materialize(spec, c, rng)) << spec.name << " sampled an invalid case";
    for (size_t j = 0; j < m.inputs.size(); ++j) {
      const int64_t n = m.inputs[j].numel();
      if (n == 0) continue;
      for (int64_t at : std::set<int64_t>{0, n - 1}) {
        for (double v : edges()) {
          if (std::isnan(v) || is_indeterminate(spec.name, static_cast<int>(j), v)) continue;
          std::vector<Tensor> in = m.inputs;
          in[j].f64()[at] = v;
          Inputs ptrs;
          for (const auto& t : in) ptrs.push_back(&t);
          std::vector<Tensor> out;
          try {
            out = spec.forward(ptrs, c.attrs);
          } catch (const std::exception& e) {
            ADD_FAILURE() << spec.name << " threw on operand " << j << " = " << v << ": " << e.what();
            continue;
          }
          const auto [o, i] = first_nan(out);
          if (o >= 0)
            ADD_FAILURE() << spec.name << " case " << k << " " << core::to_string(c.attrs) << ": operand " << j << " ["
                          << at << "] = " << v << " gives NaN at output " << o << " [" << i << "]";
        }
      }
    }
  }
}

// NaN in, NaN out: a NaN operand is never turned into a number by an elementwise operator.
TEST_P(EdgeSweep, NaNPropagatesThroughElementwiseOperators) {
  const OpSpec& spec = op(GetParam());
  if (spec.family != "eltwise") GTEST_SKIP() << "only the elementwise family maps each element alone";
  core::Rng rng(core::fnv1a(spec.name));
  Case c = spec.sample(rng);
  Materialized m = materialize(spec, c, rng);
  m.inputs[0].f64()[0] = std::nan("");
  const std::vector<Tensor> out = spec.forward(m.ptrs(), c.attrs);
  EXPECT_TRUE(std::isnan(out[0].f64()[0])) << spec.name;
}

std::vector<std::string> all_ops() {
  std::vector<std::string> names;
  for (const OpSpec* s : catalogue().all()) names.push_back(s->name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Catalogue, EdgeSweep, ::testing::ValuesIn(all_ops()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// The limits known in closed form: operator (attributes), operand, the kernel's exact result.
struct Limit {
  std::string op;
  Attrs attrs;
  std::vector<double> x;     // one row (softmax: along the last axis)
  std::vector<double> want;  // the output row
};

std::vector<Limit> limits() {
  const double inf = kInfinity;
  const Attrs none;
  const Attrs tanh_form = {{"approximate", std::string("tanh")}}, erf_form = {{"approximate", std::string("none")}};
  return {
      {"gelu", erf_form, {-inf, inf, -FLT_MAX}, {0, inf, 0}},
      {"gelu", tanh_form, {-inf, inf, -FLT_MAX}, {0, inf, 0}},
      {"softplus", none, {-inf, inf}, {0, inf}},
      {"tanh", none, {-inf, inf, -FLT_MAX, FLT_MAX}, {-1, 1, -1, 1}},
      {"sigmoid", none, {-inf, inf, -FLT_MAX, FLT_MAX}, {0, 1, 0, 1}},
      {"softsign", none, {-inf, inf, -FLT_MAX}, {-1, 1, -1}},
      {"elu", {{"alpha", 0.5}}, {-inf, inf}, {-0.5, inf}},
      {"selu", none, {-inf, inf}, {-1.7580993408473766, inf}},
      {"relu", none, {-inf, inf}, {0, inf}},
      {"relu6", none, {-inf, inf}, {0, 6}},
      {"leaky_relu", {{"alpha", 0.0}}, {-inf, inf}, {0, inf}},
      {"leaky_relu", {{"alpha", 0.1}}, {-inf, inf}, {-inf, inf}},
      {"hard_sigmoid", {{"alpha", 0.2}, {"beta", 0.5}}, {-inf, inf}, {0, 1}},
      {"hardswish", none, {-inf, inf}, {0, inf}},
      {"exp", none, {-inf, inf}, {0, inf}},
      {"log", none, {0.0, inf}, {-inf, inf}},
      {"sqrt", none, {0.0, inf}, {0, inf}},
      {"rsqrt", none, {0.0, inf}, {inf, 0}},
      {"reciprocal", none, {-inf, inf, 0.0}, {-0.0, 0, inf}},
      {"abs", none, {-inf, inf}, {inf, inf}},
      {"neg", none, {-inf, inf}, {inf, -inf}},
      {"square", none, {-inf, inf}, {inf, inf}},
      {"pow", {{"exponent", 2.0}}, {-inf, inf}, {inf, inf}},
      {"pow", {{"exponent", -1.0}}, {-inf, inf}, {-0.0, 0}},
      {"pow", {{"exponent", 0.5}}, {0.0, inf}, {0, inf}},
      {"clip", {{"min", -1.0}, {"max", 2.0}}, {-inf, inf}, {-1, 2}},
      {"softmax", {{"axis", int64_t{-1}}}, {inf, 1, -inf}, {1, 0, 0}},
      {"softmax", {{"axis", int64_t{-1}}}, {inf, inf, 0}, {0.5, 0.5, 0}},
      {"softmax", {{"axis", int64_t{-1}}}, {-inf, 0, 0}, {0, 0.5, 0.5}},
      {"log_softmax", {{"axis", int64_t{-1}}}, {inf, 1, -inf}, {0, -inf, -inf}},
      {"log_softmax", {{"axis", int64_t{-1}}}, {inf, inf, 0}, {-std::log(2.0), -std::log(2.0), -inf}},
      {"log_softmax", {{"axis", int64_t{-1}}}, {-inf, 0, 0}, {-inf, -std::log(2.0), -std::log(2.0)}},
  };
}

TEST(EdgeLimits, KernelsGiveTheMathematicalLimit) {
  for (const Limit& l : limits()) {
    const OpSpec& spec = op(l.op);
    Attrs attrs = l.attrs;
    for (const auto& a : spec.attrs)
      if (!attrs.count(a.name)) attrs[a.name] = a.default_value;
    Tensor x(core::DType::F64, {static_cast<int64_t>(l.x.size())});
    for (size_t i = 0; i < l.x.size(); ++i) x.f64()[i] = l.x[i];
    const std::vector<Tensor> out = spec.forward({&x}, attrs);
    for (size_t i = 0; i < l.want.size(); ++i) {
      const double got = out[0].f64()[i], want = l.want[i];
      if (std::isinf(want)) {
        EXPECT_EQ(got, want) << l.op << " " << core::to_string(attrs) << " at " << l.x[i];
      } else {
        EXPECT_NEAR(got, want, 1e-12) << l.op << " " << core::to_string(attrs) << " at " << l.x[i];
      }
    }
  }
}

// The losses at their domain edges: the limits where a target's zero coefficient removes a term
// (binary cross-entropy at p = 0 or 1, cross-entropy with an infinite logit) and the gradients there.
TEST(EdgeLimits, LossesAtTheirDomainEdges) {
  const double inf = kInfinity;
  const auto loss = [](const std::string& name, const Tensor& p, const Tensor& t) {
    const OpSpec& s = op(name);
    const std::vector<Tensor> out = s.forward({&p, &t}, {});
    const std::vector<Tensor> g = s.vjp({&p, &t}, {}, out, {Tensor::scalar(1.0)});
    return std::make_pair(out[0].f64()[0], g[0]);
  };
  const auto row = [](std::vector<double> v, Shape s) {
    Tensor t(core::DType::F64, std::move(s));
    for (size_t i = 0; i < v.size(); ++i) t.f64()[i] = v[i];
    return t;
  };
  {  // BCE: p = 0 with t = 0 and p = 1 with t = 1 cost nothing; the gradient is the one-sided limit
    const auto [l, g] = loss("binary_cross_entropy", row({0, 1}, {2}), row({0, 1}, {2}));
    EXPECT_EQ(l, 0);
    EXPECT_DOUBLE_EQ(g.f64()[0], 0.5);   // 1 / (1 - p) / n
    EXPECT_DOUBLE_EQ(g.f64()[1], -0.5);  // -1 / p / n
  }
  {  // BCE: a confident wrong prediction costs +inf
    const auto [l, g] = loss("binary_cross_entropy", row({0, 0.5}, {2}), row({1, 0.5}, {2}));
    EXPECT_EQ(l, inf);
    EXPECT_EQ(g.f64()[0], -inf);
  }
  {  // cross-entropy: an infinite logit on the target class costs 0, elsewhere +inf
    const auto [l, g] = loss("softmax_cross_entropy", row({inf, 1, 2}, {1, 3}), row({1, 0, 0}, {1, 3}));
    EXPECT_EQ(l, 0);
    for (int j = 0; j < 3; ++j) EXPECT_EQ(g.f64()[j], 0) << j;
    const auto [l2, g2] = loss("softmax_cross_entropy", row({inf, 1, 2}, {1, 3}), row({0, 1, 0}, {1, 3}));
    EXPECT_EQ(l2, inf);
    EXPECT_EQ(g2.f64()[0], 1);
  }
  {  // categorical hinge: an infinite logit on a class the target excludes, or on the target class
    const auto [l, g] = loss("categorical_hinge", row({inf, 0}, {1, 2}), row({0, 1}, {1, 2}));
    EXPECT_EQ(l, inf);
    const auto [l2, g2] = loss("categorical_hinge", row({inf, 0}, {1, 2}), row({1, 0}, {1, 2}));
    EXPECT_EQ(l2, 0);
  }
  {  // mse: the square of an infinite difference
    const auto [l, g] = loss("mse_loss", row({inf, 0}, {2}), row({0, 0}, {2}));
    EXPECT_EQ(l, inf);
  }
}

}  // namespace
}  // namespace quorum::ops
