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

}  // namespace quorum::core
