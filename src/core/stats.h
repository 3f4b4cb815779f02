// Summary statistics of a tensor: min/max/mean over finite elements, NaN and Inf counts.
#pragma once
#include "core/tensor.h"

namespace quorum::core {

struct TensorStats {
  int64_t count = 0, nan = 0, inf = 0;
  double min = 0, max = 0, mean = 0;  // over finite elements; 0 when there are none
};

TensorStats stats_of(const Tensor& t);

// The top-1 label of one row of scores: the index of the largest (the first of ties); -1 for an empty row.
// NaN never wins. CRADLE's label changes, the detection's accuracy and the search's label oracle use it.
int64_t top1(const double* y, int64_t classes);

}  // namespace quorum::core
