// Tolerance comparison.
#include "oracle/compare.h"

#include <cmath>
#include <sstream>

namespace quorum::oracle {

std::string Diff::describe() const {
  std::ostringstream os;
  if (shape_mismatch) return "shape mismatch";
  os.precision(3);
  os << "max abs " << max_abs << ", max rel " << max_rel;
  if (nonfinite_mismatch) os << ", " << nonfinite_mismatch << " NaN/Inf mismatches";
  if (worst >= 0) os << ", worst at [" << worst << "]";
  return os.str();
}

double tolerance_scale(const core::Tensor& ref) {
  double scale = 1.0;
  const int64_t n = ref.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double v = ref.get(i);
    if (std::isfinite(v)) scale = std::max(scale, std::abs(v));
  }
  return scale;
}

Diff compare(const core::Tensor& got, const core::Tensor& ref, const ops::Tolerance& tol) {
  Diff d;
  if (got.shape() != ref.shape()) {
    d.ok = false;
    d.shape_mismatch = true;
    return d;
  }
  const int64_t n = ref.numel();
  const double scale = tolerance_scale(ref);
  double worst_excess = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double a = got.get(i), r = ref.get(i);
    if (!std::isfinite(a) || !std::isfinite(r)) {
      const bool same = (std::isnan(a) && std::isnan(r)) || (std::isinf(a) && std::isinf(r) && (a > 0) == (r > 0));
      if (!same) {
        ++d.nonfinite_mismatch;
        d.ok = false;
        if (d.worst < 0 || worst_excess < INFINITY) d.worst = i, worst_excess = INFINITY;
      }
      continue;
    }
    const double err = std::abs(a - r);
    d.max_abs = std::max(d.max_abs, err);
    d.max_rel = std::max(d.max_rel, err / std::max(std::abs(r), 1e-30));
    const double bound = tol.atol * scale + tol.rtol * std::abs(r);  // element_within, keeping the bound
    if (err > bound) {
      d.ok = false;
      if (err - bound > worst_excess) {
        worst_excess = err - bound;
        d.worst = i;
      }
    }
  }
  return d;
}

}  // namespace quorum::oracle
