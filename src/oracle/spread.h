// The float32 spread: how far the float64 kernel's result moves when it is computed the ways a
// correct float32 implementation may compute it. One spread for every verdict (the per-node
// rule's forward, loss and backward) and for the classifier's precision suggestion; its constants
// and their reasons are here and in docs/findings.md.
//
// Sensitivity: how far the kernel's result moves when every operand moves by a few units in the
// last place of the run's precision. A backward-stable float32 computation returns the exact
// result of such slightly perturbed operands, so a library inside that spread is right; this is
// what covers cancellation in sums and normalisations, exp of large values and the like, for every
// operator without a table. Computed only where the plain tolerance fails.
// A summing operator (a reduction length L: norms, convolutions, means) rounds each of its L-term
// sums; a float32 sum is the exact sum of terms perturbed by up to (L-1) units each, typically
// sqrt(L), so its operands move by kUlps * sqrt(L) units (the same growth as its tolerance).
// The trials run the kernel with its stored intermediates (ops::stored: gates, states, statistics,
// sums) at the run's precision. The first five keep the operands exact: one rounds the
// intermediates, one also moves every one down by its whole rounding error (a constant row's
// normalisation keeps its exact mean and zero variance there), one moves them and the statistics
// up by theirs (a constant row's float32 mean is off by its sum's rounding, the same for the whole
// row), and two do the same with the values a kernel marks in odd lanes moved the other way (a
// nearest resize's width coordinate against its height's). The two that move values down leave out
// the range marks (ops::float32_range and its kin): they compute the kernel's own formula, so a
// NaN result (0 * inf) that rounding makes a number still shows. These are deterministic: the worst case
// of one rounding (a coordinate on an exact tie, on either axis, the x*rstd - mean*rstd of a
// constant row) is in the spread whatever the draws. The others move
// operands, intermediates and statistics by random fractions of their errors, drawn from an Rng
// seeded by the operator and the operands' values, so the verdict on the same values is the same
// whatever the node is called. An intermediate that saturates (sigmoid = 1) or
// overflows in float32 then shows in the spread, and a trial that is non-finite where the kernel
// is finite makes the spread infinite there: any value, NaN and Inf included, is float32's at that
// element.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "ops/op_spec.h"

namespace quorum::oracle {

constexpr int kExactOperandTrials = 5;
constexpr int kTrials = kExactOperandTrials + 3;
constexpr double kUlps = 4;    // operand perturbation, in units of the run's precision
constexpr double kMargin = 4;  // allowed deviation, in spreads

// The unit roundoff of `dtype` (2^-24 for float32).
double unit_roundoff(core::DType dtype);

// The operand perturbation for node `n` on operands `held`: 0 for a quantized operator (exact operands), kUlps,
// times sqrt(L) for an operator
// with a reduction length L.
double perturbation_ulps(const ir::Node& n, const std::vector<core::Tensor>& held);

// Operands -> results, in float64 (a node's forward, or its vector-Jacobian product).
using SpreadKernel = std::function<std::vector<core::Tensor>(const std::vector<core::Tensor>&)>;

// Per result element, the largest |trial - base| over the trials (INFINITY where a trial is
// non-finite and the base finite, or anything but that infinity (NaN, a number) where the base is
// infinite, or a number where it is NaN). `what` names the operator and what is judged (never a
// node's name): with the operands' values it seeds the random trials. Empty when the kernel throws
// or changes shape.
// The trials after kTrials, on a float32 run, are the kernel's own float32 evaluations (`orders`: the operator's
// OpSpec::float32_orders; float32_runs).
std::vector<core::Tensor> spread(const std::vector<core::Tensor>& operands, const std::vector<core::Tensor>& base,
                                 core::DType dtype, double ulps, const std::string& what, const SpreadKernel& f,
                                 const std::vector<ops::Float32Order>& orders);

// The kernel `f` evaluated in float32 (ops::Float32Evaluation) on `operands` as they are, once per order in
// `orders`; a run's results are empty where the kernel throws.
struct Float32Run {
  ops::Float32Order order;
  std::vector<core::Tensor> out;
};
std::vector<Float32Run> float32_runs(const std::vector<core::Tensor>& operands,
                                     const std::vector<ops::Float32Order>& orders, const SpreadKernel& f);

}  // namespace quorum::oracle
