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

// How far apart two outputs are: the mean of |a[i] - b[i]| over n elements, an element where both sides are
// NaN or equal (the same infinity) 0, one where the difference is not finite otherwise (NaN on one side, an
// infinity against a number) kFar; 0 for n = 0. The genetic search's disagreement of libraries and the
// detection's blame (the library farther from the reference) use it.
inline constexpr double kFar = 1e30;
double mean_abs_difference(const double* a, const double* b, int64_t n);

}  // namespace quorum::core
