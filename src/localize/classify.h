// A root-cause class for a finding the ledger does not know (METHODS.md §4, Audee): a float32
// precision effect, a convention (an implementation difference a parameter selects), or a bug.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/finding_kind.h"
#include "core/tensor.h"
#include "ir/graph.h"
#include "ops/op_spec.h"
#include "oracle/node_kernel.h"

namespace quorum::localize {

struct ClassGuess {
  std::string cls;  // bug | convention | precision
  std::string why;  // one sentence: the evidence
  double excess = 0;  // inconsistencies: worst |got - want| in units of float32's own spread
};

// The kernel the finding is about: operands -> results (a node's forward, or its vector-Jacobian
// product for a backward finding), in float64 (oracle/node_kernel.h makes them).
using Kernel = oracle::Kernel;

// Inconsistencies: precision when every wrong element lies within kPrecisionSpreads of the spread
// float32 itself allows there (oracle::spread, the verdicts' own: the kernel re-run with its
// float32 intermediates and on operands moved by a few units in the last place; a finding is
// already beyond oracle::kMargin of it, so this asks whether it is a little or far beyond); else a
// convention when the localized causes are all categorical attributes (a mode or flag: SAME
// padding, align_corners); else a bug. NaN swallowed: a convention when the
// number is the result with the NaN taken as -inf (maxNum semantics), else a bug. NaN/Inf made:
// precision when the operator's own float32 evaluation (ops::Float32Evaluation) gives the same NaN or
// infinity at every such element, the order that does named; else float32's range when the operands reach
// kRangeEdge; else a bug. Crashes: bugs. `kind` is the finding's kind; `causes` the attributes whose change
// removed it (localize-fix).
// A NaN/Inf finding whose operands reach kRangeEdge (1e18, a little below sqrt(FLT_MAX)) is float32's range
// (an intermediate overflows), not a bug of the operator: the rule for operators without a float32
// evaluation.
constexpr double kPrecisionSpreads = 16;
constexpr double kRangeEdge = 1e18;
ClassGuess guess_class(core::FindingKind kind, const ir::Node& node, const Kernel& kernel,
                       const std::vector<core::Tensor>& operands, const std::vector<core::Tensor>& got,
                       const ops::Tolerance& tol, core::DType dtype, const std::vector<std::string>& causes);

}  // namespace quorum::localize
