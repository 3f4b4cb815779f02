// Summary statistics of a tensor: min/max/mean over finite elements, NaN and Inf counts.
#pragma once
#include "core/tensor.h"

namespace quorum::core {

struct TensorStats {
  int64_t count = 0, nan = 0, inf = 0;
  double min = 0, max = 0, mean = 0;  // over finite elements; 0 when there are none
};

TensorStats stats_of(const Tensor& t);

}  // namespace quorum::core
