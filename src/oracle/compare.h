// Comparing a library's tensor with the reference under an operator's tolerance.
// An element passes when |got - ref| <= atol * max(1, max|ref|) + rtol * |ref|: atol is relative to
// the tensor's own scale, so one tolerance serves outputs of any magnitude. NaN and Inf must sit at
// the same positions with the same sign.
#pragma once
#include <cmath>
#include <string>

#include "core/tensor.h"
#include "ops/op_spec.h"

namespace quorum::oracle {

struct Diff {
  bool ok = true;
  bool shape_mismatch = false;
  double max_abs = 0;          // max |got - ref| over elements finite in both
  double max_rel = 0;          // max |got - ref| / max(|ref|, tiny)
  int64_t worst = -1;          // flat index of the worst failing element
  int64_t nonfinite_mismatch = 0;
  std::string describe() const;  // "max abs 1.2e-3, max rel 4e-4 at [17]" or "shape ..."
};

Diff compare(const core::Tensor& got, const core::Tensor& ref, const ops::Tolerance& tol);

// The pieces of compare(), for callers that judge element by element: the scale atol is relative
// to (max(1, max|finite ref|)), and whether one element is within the tolerance at that scale.
double tolerance_scale(const core::Tensor& ref);
inline bool element_within(double got, double ref, double scale, const ops::Tolerance& tol) {
  return std::abs(got - ref) <= tol.atol * scale + tol.rtol * std::abs(ref);
}

}  // namespace quorum::oracle
