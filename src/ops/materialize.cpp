// Drawing concrete inputs and weights.
#include "ops/materialize.h"

#include <cmath>

namespace quorum::ops {

Tensor fill_input(const TensorType& t, const InputGen& gen, core::Rng& rng) {
  Tensor x(DType::F64, t.shape);
  double* p = x.f64();
  const int64_t n = x.numel();
  if (core::is_quantized(t.dtype)) {  // a quantized value: integers over the dtype's whole range
    const auto [lo, hi] = core::dtype_range(t.dtype);
    for (int64_t i = 0; i < n; ++i)
      p[i] = static_cast<double>(rng.randint(static_cast<int64_t>(lo), static_cast<int64_t>(hi)));
    return x;
  }
  if (gen.fill == Fill::Uniform) {
    for (int64_t i = 0; i < n; ++i) p[i] = rng.uniform(gen.lo, gen.hi);
    // Only a power-of-two grid's ties are exact in float32 (and judged); near a tie of another scale float32
    // decides either way, which the spread accepts and a plain comparison does not.
    int e = 0;
    const bool exact = gen.tie_grid > 0 && std::frexp(gen.tie_grid, &e) == 0.5;
    if (gen.tie_grid > 0)
      for (int64_t i = 0; i < n; ++i)
        if (rng.bernoulli(0.25) && exact) p[i] = (std::floor(p[i] / gen.tie_grid) + 0.5) * gen.tie_grid;
    return x;
  }
  const int64_t last = t.shape.empty() ? 1 : t.shape.back();
  for (int64_t row = 0; row < n / std::max<int64_t>(last, 1); ++row) {
    double* r = p + row * last;
    if (gen.fill == Fill::OneHot) {
      r[rng.randint(0, last - 1)] = 1.0;
    } else {
      double sum = 0;
      for (int64_t j = 0; j < last; ++j) sum += (r[j] = rng.uniform(0.05, 1.0));
      for (int64_t j = 0; j < last; ++j) r[j] /= sum;
    }
  }
  return x;
}

Tensor init_param(const ParamSpec& ps, core::Rng& rng) {
  Tensor w(DType::F64, ps.type.shape);
  double* p = w.f64();
  // He-style scale from the fan-in (every dimension but the first), so deep stacks stay bounded.
  int64_t fan_in = 1;
  for (size_t i = 1; i < ps.type.shape.size(); ++i) fan_in *= ps.type.shape[i];
  const double scale = std::sqrt(2.0 / static_cast<double>(std::max<int64_t>(fan_in, 1)));
  if (!core::is_float(ps.type.dtype)) {  // quantized weights over their range; an int32 bias of a few thousand
    const auto [lo, hi] = core::dtype_range(ps.type.dtype);
    const auto a = static_cast<int64_t>(std::max(lo, -4096.0)), b = static_cast<int64_t>(std::min(hi, 4096.0));
    for (int64_t i = 0; i < w.numel(); ++i) p[i] = static_cast<double>(rng.randint(a, b));
    return w;
  }
  for (int64_t i = 0; i < w.numel(); ++i) {
    switch (ps.init) {
      case Init::Normal: p[i] = rng.normal(0.0, scale); break;
      case Init::Zeros: p[i] = rng.uniform(-0.1, 0.1); break;  // small, not zero: gradients stay informative
      case Init::Ones: p[i] = rng.uniform(0.8, 1.2); break;
      case Init::Positive: p[i] = rng.uniform(0.5, 1.5); break;
    }
  }
  return w;
}

Inputs Materialized::ptrs() const {
  Inputs v;
  for (const auto& t : inputs) v.push_back(&t);
  return v;
}

Materialized materialize(const OpSpec& spec, Case& c, core::Rng& rng) {
  Materialized m;
  c.attrs = canonical_attrs(spec, c.attrs);
  m.sig = spec.infer(c.inputs, c.attrs);
  for (size_t i = 0; i < c.inputs.size(); ++i)
    m.inputs.push_back(fill_input(c.inputs[i], i < c.gen.size() ? c.gen[i] : InputGen{}, rng));
  for (const auto& p : m.sig.params) m.inputs.push_back(init_param(p, rng));
  return m;
}

}  // namespace quorum::ops
