// What a coverage-guided generator (mcts) learns from whoever runs its models, without depending on
// them: src/coverage/coverage.h implements it from the models seen so far, src/campaign and the
// `quorum gen` command feed it. Keeps gen below search and campaign in the layering.
#pragma once
#include <cstddef>
#include <string>

#include "ir/graph.h"

namespace quorum::gen {

class Feedback {
 public:
  virtual ~Feedback() = default;
  // Operator-level coverage of `op` so far (OLC_op, in [0, 1]).
  virtual double op_coverage(const std::string& op) const = 0;
  // How many coverage items the model would add to what is covered so far (0: it raises nothing).
  virtual size_t gain(const ir::Graph& g) const = 0;
  // Whether operator `op` has been seen feeding an operator of type `successor` (a SEC item).
  virtual bool has_successor(const std::string& op, const std::string& successor) const = 0;
};

}  // namespace quorum::gen
