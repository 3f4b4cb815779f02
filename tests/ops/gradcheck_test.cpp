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

// The shape rule, determinism and (differentiable operators) the VJP against central finite
// differences, for one case.
void check_case(const OpSpec& spec, Case c, core::Rng& rng) {
  {
    Materialized m;
    ASSERT_NO_THROW(m = materialize(spec, c, rng))
        << spec.name << " sampled an invalid case " << core::to_string(c.attrs);
    SCOPED_TRACE(spec.name + " " + core::to_string(c.attrs) + " input " + core::to_string(c.inputs[0]));
    const std::vector<Tensor> out = spec.forward(m.ptrs(), c.attrs);
    ASSERT_EQ(out.size(), m.sig.outputs.size());
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i].shape(), m.sig.outputs[i].shape) << "output " << i;
    for (const auto& o : out)
      for (int64_t i = 0; i < o.numel(); ++i) ASSERT_TRUE(std::isfinite(o.f64()[i])) << "non-finite output";
    // Deterministic.
    const std::vector<Tensor> again = spec.forward(m.ptrs(), c.attrs);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_TRUE(out[i].bit_equal(again[i]));
    if (!spec.differentiable()) return;

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

class GradCheck : public ::testing::TestWithParam<std::string> {};

TEST_P(GradCheck, MatchesFiniteDifferences) {
  const OpSpec& spec = op(GetParam());
  ASSERT_TRUE(spec.differentiable() || spec.has_tag("nondifferentiable"))
      << spec.name << " has no VJP and is not tagged nondifferentiable";
  for (int k = 0; k < kCases; ++k) {
    core::Rng rng(name_seed(spec.name) + static_cast<uint64_t>(k));
    SCOPED_TRACE("case " + std::to_string(k));
    check_case(spec, spec.sample(rng), rng);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// The values the attribute audit (docs/generators.md, "Attribute audit") added to the domains, each
// checked on its own: a sampler draws them only sometimes, so the six random cases above may miss
// one. Inputs are drawn from the operator's InputGen.
struct Widened {
  std::string op;
  Shape x;
  Attrs attrs;
};

std::vector<Widened> widened_values() {
  using V = std::vector<int64_t>;
  const Attrs pool2 = {{"kernel_shape", V{2, 3}}, {"strides", V{1, 2}}, {"pads", V{0, 1, 1, 0}},
                       {"auto_pad", std::string("NOTSET")}, {"ceil_mode", int64_t{0}}};
  auto with = [](Attrs a, const std::string& k, AttrValue v) {
    a[k] = std::move(v);
    return a;
  };
  return {
      {"leaky_relu", {2, 5}, {{"alpha", -0.7}}},
      {"leaky_relu", {2, 5}, {{"alpha", 2.5}}},
      {"elu", {2, 5}, {{"alpha", -1.2}}},
      {"elu", {2, 5}, {{"alpha", 0.0}}},
      {"hard_sigmoid", {2, 5}, {{"alpha", -0.3}, {"beta", 0.6}}},
      {"max_pool2d", {1, 2, 7, 8}, with(pool2, "dilations", V{2, 2})},
      {"max_pool2d", {1, 2, 7, 8}, with(with(pool2, "dilations", V{3, 1}), "ceil_mode", int64_t{1})},
      {"max_pool2d", {1, 1, 6, 7}, {{"kernel_shape", V{2, 2}}, {"strides", V{2, 1}}, {"dilations", V{2, 3}},
                                    {"auto_pad", std::string("SAME_UPPER")}, {"pads", V{0, 0, 0, 0}}}},
      {"max_pool1d", {2, 2, 9}, {{"kernel_shape", V{3}}, {"strides", V{2}}, {"dilations", V{3}}, {"pads", V{2, 1}},
                                 {"ceil_mode", int64_t{1}}}},
      {"max_pool1d", {1, 3, 8}, {{"kernel_shape", V{2}}, {"dilations", V{4}}, {"auto_pad", std::string("SAME_LOWER")},
                                 {"pads", V{0, 0}}}},
      // ONNX's directions of the recurrent layers (tests/ops/rnn_direction_test.cpp).
      {"lstm", {2, 3, 2}, {{"hidden_size", int64_t{2}}, {"direction", std::string("reverse")}}},
      {"gru", {1, 3, 2}, {{"hidden_size", int64_t{2}}, {"direction", std::string("bidirectional")}}},
      {"simple_rnn", {2, 3, 2}, {{"hidden_size", int64_t{3}}, {"return_sequences", int64_t{0}},
                                 {"direction", std::string("bidirectional")}}},
      {"gru", {2, 4, 1}, {{"hidden_size", int64_t{2}}, {"return_sequences", int64_t{0}},
                          {"direction", std::string("reverse")}}},
      {"simple_rnn", {2, 3, 2}, {{"hidden_size", int64_t{2}}, {"activation", std::string("relu")}}},
      {"simple_rnn", {1, 4, 2}, {{"hidden_size", int64_t{2}}, {"activation", std::string("sigmoid")},
                                 {"direction", std::string("reverse")}}},
      // ONNX's cell options (tests/ops/rnn_cell_options_test.cpp): clip, input_forget, linear_before_reset 0.
      {"lstm", {2, 3, 2}, {{"hidden_size", int64_t{2}}, {"clip", 0.5}}},
      {"lstm", {2, 3, 2}, {{"hidden_size", int64_t{2}}, {"input_forget", int64_t{1}}}},
      {"lstm", {1, 3, 2}, {{"hidden_size", int64_t{3}}, {"input_forget", int64_t{1}}, {"clip", 1.0},
                           {"direction", std::string("bidirectional")}}},
      {"gru", {2, 3, 2}, {{"hidden_size", int64_t{2}}, {"linear_before_reset", int64_t{0}}}},
      {"gru", {2, 4, 1}, {{"hidden_size", int64_t{3}}, {"linear_before_reset", int64_t{0}}, {"clip", 0.5},
                          {"direction", std::string("reverse")}, {"return_sequences", int64_t{0}}}},
      {"gru", {1, 3, 2}, {{"hidden_size", int64_t{2}}, {"clip", 0.25}}},
      {"lstm", {2, 3, 2}, {{"hidden_size", int64_t{2}}, {"peepholes", int64_t{1}}}},
      {"lstm", {1, 3, 2}, {{"hidden_size", int64_t{2}}, {"peepholes", int64_t{1}}, {"input_forget", int64_t{1}},
                           {"clip", 1.5}, {"direction", std::string("bidirectional")}}},
      {"simple_rnn", {2, 3, 2}, {{"hidden_size", int64_t{2}}, {"clip", 0.5}, {"activation", std::string("relu")}}},
      {"lstm", {2, 3, 2}, {{"hidden_size", int64_t{2}}, {"activation", std::string("sigmoid")}}},
      {"lstm", {1, 3, 2}, {{"hidden_size", int64_t{2}}, {"activation", std::string("relu")}, {"peepholes", int64_t{1}},
                           {"direction", std::string("bidirectional")}}},
      {"gru", {2, 3, 2}, {{"hidden_size", int64_t{2}}, {"activation", std::string("sigmoid")},
                          {"linear_before_reset", int64_t{0}}}},
      {"gru", {1, 3, 2}, {{"hidden_size", int64_t{2}}, {"activation", std::string("relu")}}},
      // A given initial state h0 (and LSTM's c0), shared by the samples: its gradient sums theirs.
      {"lstm", {2, 3, 2}, {{"hidden_size", int64_t{2}}, {"initial_state", int64_t{1}}, {"peepholes", int64_t{1}},
                           {"direction", std::string("bidirectional")}}},
      {"gru", {2, 3, 2}, {{"hidden_size", int64_t{2}}, {"initial_state", int64_t{1}},
                          {"linear_before_reset", int64_t{0}}, {"return_sequences", int64_t{0}}}},
      {"gru", {2, 3, 1}, {{"hidden_size", int64_t{3}}, {"initial_state", int64_t{1}},
                          {"direction", std::string("reverse")}}},
      {"simple_rnn", {3, 2, 2}, {{"hidden_size", int64_t{2}}, {"initial_state", int64_t{1}}}},
  };
}

TEST(GradCheckWidened, EveryAddedValueMatchesFiniteDifferences) {
  for (const Widened& w : widened_values()) {
    const OpSpec& spec = op(w.op);
    core::Rng rng(name_seed(w.op + core::to_string(w.attrs)));
    Case c;
    c.inputs = {TensorType{core::DType::F64, w.x}};
    c.attrs = canonical_attrs(spec, w.attrs);
    const Case drawn = spec.sample(rng);
    c.gen = {drawn.gen.empty() ? InputGen{} : drawn.gen[0]};
    SCOPED_TRACE(w.op + " " + core::to_string(c.attrs));
    check_case(spec, c, rng);
  }
}

// A dilated max pool takes every dil-th cell: the window of output 0 over [0, 1, ..., 8] with
// kernel 3, dilation 3 and no pad holds cells 0, 3, 6.
TEST(GradCheckWidened, DilatedMaxPoolTakesEveryDilthCell) {
  const OpSpec& spec = op("max_pool1d");
  const Attrs a = canonical_attrs(spec, {{"kernel_shape", std::vector<int64_t>{3}},
                                         {"dilations", std::vector<int64_t>{3}}});
  const Tensor x = Tensor::f64({1, 1, 9}, {5, 9, 9, 1, 9, 9, 2, 0, 7});
  const auto sig = spec.infer({x.type()}, a);
  ASSERT_EQ(sig.outputs[0].shape, (Shape{1, 1, 3}));  // 9 - 7 + 1
  const Tensor y = spec.forward({&x}, a)[0];
  EXPECT_EQ(y.get(0), 5);  // cells 0, 3, 6: 5, 1, 2
  EXPECT_EQ(y.get(1), 9);  // cells 1, 4, 7
  EXPECT_EQ(y.get(2), 9);  // cells 2, 5, 8
  // A window whose taps all fall in the padding is refused by the shape rule.
  const Attrs only_pad = canonical_attrs(spec, {{"kernel_shape", std::vector<int64_t>{2}},
                                                {"dilations", std::vector<int64_t>{3}},
                                                {"pads", std::vector<int64_t>{2, 0}},
                                                {"strides", std::vector<int64_t>{1}}});
  const Tensor x2 = Tensor::f64({1, 1, 1}, {1});
  EXPECT_THROW(spec.infer({x2.type()}, only_pad), core::OpError);
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
