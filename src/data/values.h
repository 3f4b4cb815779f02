// A model's concrete values: the graph inputs and loss targets that `quorum gen`, `quorum run`,
// campaigns, replay, the known-issue check and the tests draw, with one edge-value policy (the
// campaign's: uniform in [-1, 1), each element an edge value with probability kEdgeRate). Weights
// are drawn per ParamSpec by ops::init_param (through gen::materialize); a data source's batch
// (data/dataset.h) draws its random inputs here too.
#pragma once
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "ir/graph.h"
#include "ops/op_spec.h"
#include "ref/interpreter.h"

namespace quorum::data {

using core::Shape;
using core::Tensor;

// The edge values mixed into random inputs: zeros, ±1, float32 denormals, large magnitudes.
const std::vector<double>& edge_values();
// How often an element of a random input is an edge value.
constexpr double kEdgeRate = 0.05;
// Uniform in [lo, hi), each element replaced by a random edge value with probability `edge_rate`
// (0: plain uniform values, one draw per element).
Tensor random_with_edges(const Shape& shape, core::Rng& rng, double lo = -1.0, double hi = 1.0,
                         double edge_rate = kEdgeRate);

// The interval every element of a random_with_edges draw lies in: [lo, hi], widened by the edge
// values when edge_rate > 0 (the static range analysis's input range for the campaign's data).
ops::Interval input_range(double lo = -1.0, double hi = 1.0, double edge_rate = kEdgeRate);

// One graph input's value: drawn as the operator case's InputGen asks (a unit model's operand
// ranges, one-hot, probabilities) when `gen` is given, else random_with_edges; a quantized input:
// integers over its type's range.
Tensor input_value(const core::TensorType& type, const ops::InputGen* gen, core::Rng& rng);

// Draws every graph input `inputs` lacks (random_with_edges, in graph-input order); `edge_rate` 0
// gives plain uniform values for checks that want a smooth neighbourhood (finite differences) or
// ordinary inputs (the reducer's random-input search).
void complete_inputs(const ir::Graph& g, ref::ValueMap& inputs, core::Rng& rng, double edge_rate = kEdgeRate);

// The extreme values a share of a campaign's models carries in its operands (docs/generators.md,
// "Edge values"): ±inf, NaN, ±FLT_MAX, the smallest float32 subnormal of either sign and ±0.
const std::vector<double>& extreme_values();
// The share of models that carry them: decided per model from its own stream, so model i stays a
// function of (seed, i).
constexpr double kExtremeModelShare = 0.2;
// In such a model: each graph input and each float initializer (weights, constants) gets one
// extreme value at a random element with probability kExtremeTensorRate (NaN one draw in 16: a NaN
// operand leaves the nodes after it unjudged), and each element of a graph input is also an
// extreme value with probability kExtremeElementRate. Initializers whose values are all >= 0
// (variances, positive constants) take only the non-negative extremes.
constexpr double kExtremeTensorRate = 0.5;
constexpr double kExtremeElementRate = 0.01;
// Whether the model of stream `rng` carries extreme values, and if so places them in `inputs` and
// in `g`'s initializers (float ones only). `rng` is the model's own stream for this decision.
bool place_extreme_values(ir::Graph& g, ref::ValueMap& inputs, core::Rng rng);

// A target for `loss` on an output of shape `out`, drawn the way the loss expects it (its sampled
// case's target InputGen: one-hot, probabilities, ...; uniform in [-1, 1) when it names none).
Tensor loss_target(const std::string& loss, const Shape& out, core::Rng& rng);

}  // namespace quorum::data
