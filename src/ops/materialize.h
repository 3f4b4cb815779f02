// Concrete tensors for an operator case: data inputs drawn per InputGen, weights per ParamSpec.
// Shared by tests, generators and data so every tensor comes from the one seeded Rng.
#pragma once
#include "ops/op_spec.h"

namespace quorum::ops {

Tensor fill_input(const TensorType& t, const InputGen& gen, core::Rng& rng);
Tensor init_param(const ParamSpec& p, core::Rng& rng);

struct Materialized {
  Signature sig;
  std::vector<Tensor> inputs;  // data inputs then parameters, float64
  Inputs ptrs() const;
};
// Canonicalises the case's attributes (in place) and draws every input. Throws OpError if the
// case violates the op's rules.
Materialized materialize(const OpSpec& spec, Case& c, core::Rng& rng);

}  // namespace quorum::ops
