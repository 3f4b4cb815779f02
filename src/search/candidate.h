// One point of a search: the values it gives a model's graph inputs and, where it changes them, its
// weights. Shared by every method of src/search/ (the genetic search, GRIST).
#pragma once
#include <map>
#include <string>

#include "core/tensor.h"

namespace quorum::search {

// Values for the graph's inputs (float64) and the weights that replace the graph's initializers of
// the same names (those it does not hold, or all when empty: the graph's own).
struct Candidate {
  std::map<std::string, core::Tensor> inputs;
  std::map<std::string, core::Tensor> weights;
};

}  // namespace quorum::search
