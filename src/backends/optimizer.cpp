// Quorum's optimizer arithmetic (optimizer.h), in float32 or float64 as the weights are.
#include "backends/optimizer.h"

#include <cmath>

#include "core/error.h"

namespace quorum::backends {

void OptimizerSpec::check() const {
  if (name != "sgd" && name != "adam") throw core::UserError("unknown optimizer '" + name + "' (choose sgd or adam)");
  if (!(lr > 0) || !std::isfinite(lr)) throw core::UserError("the learning rate must be a finite number above 0");
  if (!(momentum >= 0 && momentum < 1)) throw core::UserError("the momentum must lie in [0, 1)");
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    throw core::UserError("adam's betas must lie in [0, 1)");
  if (!(eps > 0)) throw core::UserError("adam's eps must be above 0");
}

Optimizer::Optimizer(OptimizerSpec spec) : spec_(std::move(spec)) { spec_.check(); }

namespace {

// The step in the arithmetic of T (float or double).
template <typename T>
void step_as(const OptimizerSpec& s, OptimizerSlot& slot, T* w, const T* g, int64_t n) {
  const T lr = static_cast<T>(s.lr);
  if (s.name == "sgd") {
    if (s.momentum == 0) {
      for (int64_t i = 0; i < n; ++i) w[i] -= lr * g[i];
      return;
    }
    const T mu = static_cast<T>(s.momentum);
    T* v = static_cast<T*>(slot.first.raw());
    for (int64_t i = 0; i < n; ++i) {
      v[i] = slot.steps == 1 ? g[i] : mu * v[i] + g[i];
      w[i] -= lr * v[i];
    }
    return;
  }
  const T b1 = static_cast<T>(s.beta1), b2 = static_cast<T>(s.beta2), eps = static_cast<T>(s.eps);
  const T bc1 = T(1) - static_cast<T>(std::pow(s.beta1, static_cast<double>(slot.steps)));
  const T bc2 = T(1) - static_cast<T>(std::pow(s.beta2, static_cast<double>(slot.steps)));
  const T step_size = lr / bc1, root_bc2 = std::sqrt(bc2);
  T* m = static_cast<T*>(slot.first.raw());
  T* v = static_cast<T*>(slot.second.raw());
  for (int64_t i = 0; i < n; ++i) {
    m[i] = b1 * m[i] + (T(1) - b1) * g[i];
    v[i] = b2 * v[i] + (T(1) - b2) * g[i] * g[i];
    w[i] -= step_size * m[i] / (std::sqrt(v[i]) / root_bc2 + eps);
  }
}

}  // namespace

void Optimizer::step(const std::string& name, core::Tensor& w, const core::Tensor& g) {
  if (w.dtype() != core::DType::F32 && w.dtype() != core::DType::F64)
    throw core::UserError("optimizer: weight '" + name + "' is not a floating-point tensor");
  if (g.shape() != w.shape())
    throw core::UserError("optimizer: the gradient of '" + name + "' has shape " + core::to_string(g.shape()) +
                          ", the weight " + core::to_string(w.shape()));
  const core::Tensor gw = g.dtype() == w.dtype() ? g : g.to(w.dtype());
  auto it = slots_.find(name);
  if (it == slots_.end()) {
    OptimizerSlot slot;
    slot.first = core::Tensor(w.dtype(), w.shape());
    slot.second = core::Tensor(w.dtype(), w.shape());
    it = slots_.emplace(name, std::move(slot)).first;
  }
  OptimizerSlot& slot = it->second;
  ++slot.steps;
  if (w.dtype() == core::DType::F32)
    step_as<float>(spec_, slot, w.f32(), gw.f32(), w.numel());
  else
    step_as<double>(spec_, slot, w.f64(), gw.f64(), w.numel());
}

}  // namespace quorum::backends
