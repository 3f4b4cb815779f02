// Test helper: one catalogue operator's float64 kernel on given operands, its first output's values.
#pragma once
#include <string>
#include <vector>

#include "ops/registry.h"

namespace quorum::testing {

inline std::vector<double> run_op(const std::string& op, const std::vector<core::Tensor>& in,
                                  const core::Attrs& given) {
  const ops::OpSpec& spec = ops::op(op);
  const core::Attrs a = ops::canonical_attrs(spec, given);
  ops::Inputs p;
  for (const auto& t : in) p.push_back(&t);
  return spec.forward(p, a)[0].values();
}

}  // namespace quorum::testing
