// Multi-step training's optimizer: its settings (what a Steps request carries) and Quorum's one
// implementation of the optimizer arithmetic, for the libraries without an optimizer of their own
// (oneDNN) and for the float64 reference. It computes in the weights' own dtype: float32 on a
// float32 library's gradients, float64 on the reference's. The formulas are libtorch's
// (torch::optim::SGD without dampening or Nesterov, torch::optim::Adam without weight decay or
// amsgrad), so a library with its own optimizer and one using this one do the same step:
//   sgd:  v = momentum * v + g (v = g at the first step); w -= lr * v   (momentum 0: w -= lr * g)
//   adam: m = b1 m + (1 - b1) g; s = b2 s + (1 - b2) g^2;
//         w -= (lr / (1 - b1^t)) * m / (sqrt(s) / sqrt(1 - b2^t) + eps)
#pragma once
#include <map>
#include <string>

#include "core/tensor.h"

namespace quorum::backends {

struct OptimizerSpec {
  std::string name = "sgd";  // "sgd" or "adam"
  double lr = 0.01;
  double momentum = 0;  // sgd
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam
  // UserError naming the problem (unknown name, a rate out of range).
  void check() const;
  bool operator==(const OptimizerSpec&) const = default;
};

// One weight's optimizer state: sgd's velocity, or adam's two moments; `steps` taken so far.
struct OptimizerSlot {
  core::Tensor first, second;
  int64_t steps = 0;
};

class Optimizer {
 public:
  explicit Optimizer(OptimizerSpec spec);
  const OptimizerSpec& spec() const { return spec_; }
  // One step on weight `name`: `w` updated in place from its gradient `g` (any dtype; converted to
  // w's dtype first), in w's dtype.
  void step(const std::string& name, core::Tensor& w, const core::Tensor& g);
  // The state of weight `name` (created at its first step); a planted fault may tamper with it.
  std::map<std::string, OptimizerSlot>& slots() { return slots_; }

 private:
  OptimizerSpec spec_;
  std::map<std::string, OptimizerSlot> slots_;
};

}  // namespace quorum::backends
