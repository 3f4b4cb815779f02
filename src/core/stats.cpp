// Tensor statistics.
#include "core/stats.h"

#include <cmath>
#include <limits>

namespace quorum::core {

TensorStats stats_of(const Tensor& t) {
  TensorStats s;
  s.count = t.numel();
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0;
  int64_t finite = 0;
  for (int64_t i = 0; i < s.count; ++i) {
    const double v = t.get(i);
    if (std::isnan(v)) {
      ++s.nan;
    } else if (std::isinf(v)) {
      ++s.inf;
    } else {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      sum += v;
      ++finite;
    }
  }
  if (finite > 0) {
    s.min = lo;
    s.max = hi;
    s.mean = sum / static_cast<double>(finite);
  }
  return s;
}

int64_t top1(const double* y, int64_t classes) {
  int64_t best = -1;
  for (int64_t j = 0; j < classes; ++j)
    if (!std::isnan(y[j]) && (best < 0 || y[j] > y[best])) best = j;
  return best;
}

double mean_abs_difference(const double* a, const double* b, int64_t n) {
  if (n <= 0) return 0;
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = std::fabs(a[i] - b[i]);
    s += std::isfinite(d) ? d : a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])) ? 0.0 : kFar;
  }
  return s / static_cast<double>(n);
}

}  // namespace quorum::core
