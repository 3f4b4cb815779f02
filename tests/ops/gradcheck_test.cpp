// Every operator in the catalogue, over several cases drawn from its domain: the forward kernel
// matches the shape rule, and (for differentiable operators) the VJP matches central finite
// differences in float64. A new operator without a passing check fails this suite.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/materialize.h"
#include "ops/registry.h"

namespace quorum::ops {
namespace {

constexpr int kCases = 6;
constexpr int kMaxProbesPerInput = 40;

uint64_t name_seed(const std::string& s) { return core::fnv1a(s); }

double weighted_sum(const std::vector<Tensor>& outs, const std::vector<Tensor>& w) {
  double s = 0;
  for (size_t k = 0; k < outs.size(); ++k)
    for (int64_t i = 0; i < outs[k].numel(); ++i) s += outs[k].f64()[i] * w[k].f64()[i];
  return s;
}

class GradCheck : public ::testing::TestWithParam<std::string> {};

TEST_P(GradCheck, MatchesFiniteDifferences) {
  const OpSpec& spec = op(GetParam());
  ASSERT_TRUE(spec.differentiable() || spec.has_tag("nondifferentiable"))
      << spec.name << " has no VJP and is not tagged nondifferentiable";
  for (int k = 0; k < kCases; ++k) {
    core::Rng rng(name_seed(spec.name) + static_cast<uint64_t>(k));
    Case c = spec.sample(rng);
    Materialized m;
    ASSERT_NO_THROW(m = materialize(spec, c, rng))
        << spec.name << " sampled an invalid case " << core::to_string(c.attrs);
    SCOPED_TRACE(spec.name + " case " + std::to_string(k) + " " + core::to_string(c.attrs) + " input " +
                 core::to_string(c.inputs[0]));
    const std::vector<Tensor> out = spec.forward(m.ptrs(), c.attrs);
    ASSERT_EQ(out.size(), m.sig.outputs.size());
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i].shape(), m.sig.outputs[i].shape) << "output " << i;
    for (const auto& o : out)
      for (int64_t i = 0; i < o.numel(); ++i) ASSERT_TRUE(std::isfinite(o.f64()[i])) << "non-finite output";
    // Deterministic.
    const std::vector<Tensor> again = spec.forward(m.ptrs(), c.attrs);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_TRUE(out[i].bit_equal(again[i]));
    if (!spec.differentiable()) continue;

    std::vector<Tensor> w;
    for (const auto& o : out) w.push_back(fill_input(o.type(), InputGen{-1, 1}, rng));
    const std::vector<Tensor> grads = spec.vjp(m.ptrs(), c.attrs, out, w);
    ASSERT_EQ(grads.size(), m.inputs.size());
    for (size_t j = 0; j < m.inputs.size(); ++j) {
      const bool nondiff = std::find(spec.nondiff_inputs.begin(), spec.nondiff_inputs.end(), static_cast<int>(j)) !=
                           spec.nondiff_inputs.end();
      if (nondiff) continue;
      ASSERT_TRUE(grads[j].defined()) << "no gradient for input " << j;
      ASSERT_EQ(grads[j].shape(), m.inputs[j].shape()) << "gradient shape for input " << j;
      const int64_t n = m.inputs[j].numel();
      std::vector<int64_t> probes;
      if (n <= kMaxProbesPerInput) {
        for (int64_t i = 0; i < n; ++i) probes.push_back(i);
      } else {
        for (int p = 0; p < kMaxProbesPerInput; ++p) probes.push_back(rng.randint(0, n - 1));
      }
      for (int64_t i : probes) {
        std::vector<Tensor> pert = m.inputs;
        const double x0 = pert[j].f64()[i];
        const double h = 1e-6 * std::max(1.0, std::abs(x0));
        Inputs ptrs;
        for (const auto& t : pert) ptrs.push_back(&t);
        pert[j].f64()[i] = x0 + h;
        const double lp = weighted_sum(spec.forward(ptrs, c.attrs), w);
        pert[j].f64()[i] = x0 - h;
        const double lm = weighted_sum(spec.forward(ptrs, c.attrs), w);
        const double numeric = (lp - lm) / (2 * h);
        const double analytic = grads[j].f64()[i];
        const double scale = std::max({1.0, std::abs(lp), std::abs(lm)});
        EXPECT_NEAR(analytic, numeric, 1e-5 * scale + 1e-4 * std::abs(numeric))
            << "input " << j << " element " << i << " (x=" << x0 << ")";
      }
    }
  }
}

std::vector<std::string> all_names() {
  std::vector<std::string> v;
  for (const OpSpec* s : catalogue().all()) v.push_back(s->name);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Catalogue, GradCheck, ::testing::ValuesIn(all_names()),
                         [](const auto& info) { return info.param; });

TEST(Catalogue, HasAtLeastFiftyOperators) { EXPECT_GE(catalogue().all().size(), 50u); }

TEST(Catalogue, SamplersOnlyDrawValidCases) {
  for (const OpSpec* s : catalogue().all()) {
    core::Rng rng(name_seed(s->name));
    for (int k = 0; k < 50; ++k) {
      Case c = s->sample(rng);
      EXPECT_NO_THROW(s->infer(c.inputs, canonical_attrs(*s, c.attrs))) << s->name << " " << core::to_string(c.attrs);
    }
  }
}

TEST(Catalogue, InvalidAttributeValuesAreRejected) {
  for (const OpSpec* s : catalogue().all()) {
    core::Rng rng(name_seed(s->name));
    for (const auto& a : s->attrs) {
      for (const auto& bad : a.invalid) {
        Case c = s->sample(rng);
        c.attrs[a.name] = bad;
        bool rejected = false;
        try {
          s->infer(c.inputs, canonical_attrs(*s, c.attrs));
        } catch (const core::OpError&) {
          rejected = true;
        }
        EXPECT_TRUE(rejected) << s->name << "." << a.name << " = " << core::to_string(bad) << " was accepted";
      }
    }
  }
}

}  // namespace
}  // namespace quorum::ops
