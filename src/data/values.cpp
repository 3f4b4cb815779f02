// A model's concrete values.
#include "data/values.h"

#include <cfloat>
#include <cmath>

#include "ops/materialize.h"
#include "ops/registry.h"

namespace quorum::data {

const std::vector<double>& edge_values() {
  // float32 denormals (1e-40, the smallest 1.4e-45) and magnitudes large enough to overflow a
  // careless float32 square or exp, yet finite after one multiplication.
  static const std::vector<double> v = {0.0, -0.0, 1.0, -1.0, 1e-40, -1e-40, 1.4e-45, 1e4, -1e4, 1e6, -1e6};
  return v;
}

const std::vector<double>& extreme_values() {
  static const std::vector<double> v = {INFINITY, -INFINITY, FLT_MAX, -FLT_MAX, 1.4e-45, -1.4e-45, 0.0, -0.0};
  return v;
}

namespace {

double draw_extreme(core::Rng& rng, bool non_negative) {
  if (rng.bernoulli(1.0 / 16)) return std::nan("");
  for (;;) {
    const double v = rng.pick(extreme_values());
    if (!non_negative || !std::signbit(v)) return v;
  }
}

bool is_float(const Tensor& t) { return t.dtype() == core::DType::F32 || t.dtype() == core::DType::F64; }

}  // namespace

bool place_extreme_values(ir::Graph& g, ref::ValueMap& inputs, core::Rng rng) {
  if (!rng.bernoulli(kExtremeModelShare)) return false;
  const auto place = [&rng](Tensor& t, double element_rate, bool non_negative) {
    if (!is_float(t) || t.numel() == 0) return;
    const auto set = [&t](int64_t i, double v) {
      if (t.dtype() == core::DType::F32) t.f32()[i] = static_cast<float>(v);
      else t.f64()[i] = v;
    };
    if (rng.bernoulli(kExtremeTensorRate)) set(rng.randint(0, t.numel() - 1), draw_extreme(rng, non_negative));
    if (element_rate > 0)
      for (int64_t i = 0; i < t.numel(); ++i)
        if (rng.bernoulli(element_rate)) set(i, draw_extreme(rng, non_negative));
  };
  for (const auto& in : g.inputs) {  // graph-input order: the draw does not depend on map order
    auto it = inputs.find(in.name);
    if (it != inputs.end()) place(it->second, kExtremeElementRate, false);
  }
  for (auto& [name, w] : g.initializers) {
    if (!is_float(w)) continue;
    bool non_negative = true;
    for (int64_t i = 0; i < w.numel() && non_negative; ++i) non_negative = w.get(i) >= 0;
    place(w, 0.0, non_negative);
  }
  return true;
}

Tensor random_with_edges(const Shape& shape, core::Rng& rng, double lo, double hi, double edge_rate) {
  Tensor t(core::DType::F64, shape);
  double* p = t.f64();
  const auto& edges = edge_values();
  const bool with_edges = edge_rate > 0;  // rate 0: one uniform draw per element, nothing else
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = with_edges && rng.bernoulli(edge_rate) ? rng.pick(edges) : rng.uniform(lo, hi);
  return t;
}

ops::Interval input_range(double lo, double hi, double edge_rate) {
  ops::Interval r{lo, hi};
  if (edge_rate > 0)
    for (double e : edge_values()) r = ops::hull(r, ops::Interval{e, e});
  return r;
}

Tensor input_value(const core::TensorType& type, const ops::InputGen* gen, core::Rng& rng) {
  if (!core::is_float(type.dtype)) return ops::fill_input(type, ops::InputGen{}, rng);  // integers of its type
  return gen ? ops::fill_input({core::DType::F64, type.shape}, *gen, rng) : random_with_edges(type.shape, rng);
}

void complete_inputs(const ir::Graph& g, ref::ValueMap& inputs, core::Rng& rng, double edge_rate) {
  for (const auto& in : g.inputs) {
    if (inputs.count(in.name)) continue;
    if (!core::is_float(in.type.dtype)) inputs.emplace(in.name, ops::fill_input(in.type, ops::InputGen{}, rng));
    else inputs.emplace(in.name, random_with_edges(in.type.shape, rng, -1.0, 1.0, edge_rate));
  }
}

Tensor loss_target(const std::string& loss, const Shape& out, core::Rng& rng) {
  // The loss's sampler names the target's distribution; its own stream, so the case drawn does
  // not depend on `rng`.
  core::Rng srng(1);
  const ops::Case c = ops::op(loss).sample(srng);
  const ops::InputGen gen = c.gen.size() > 1 ? c.gen[1] : ops::InputGen{-1, 1};
  return ops::fill_input({core::DType::F64, out}, gen, rng);
}

}  // namespace quorum::data
