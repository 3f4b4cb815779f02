// The float64 reference interpreter: runs any valid graph, computes a loss, and back-propagates
// through the operators' VJPs to every node output, every weight and every graph input.
#pragma once
#include <map>
#include <string>

#include "core/rng.h"
#include "ir/graph.h"
#include "ops/op_spec.h"

namespace quorum::ref {

using core::Tensor;
using ValueMap = std::map<std::string, Tensor>;

// Replacement kernels by operator name, for backends built on the interpreter (the faulty
// backend plants its numeric faults this way). Null means the catalogue's own kernels.
struct Overrides {
  std::map<std::string, ops::ForwardFn> forward;
  std::map<std::string, ops::VjpFn> vjp;
  double loss_grad_scale = 1.0;
};

// Every value of the graph (inputs, initializers, node outputs) in float64. Inputs of other dtypes
// are converted. Throws UserError when an input is missing or has the wrong shape.
ValueMap forward(const ir::Graph& g, const ValueMap& inputs, const Overrides* ov = nullptr);

// Back-propagation from given gradients: `seeds` holds d s / d v for some values v of the graph (graph
// output 0 for a training loss, or any intermediate value: GRIST's suspect loss at a vulnerable
// operation's operand), `values` every value as forward() gives them. Returns d s / d value for every
// value s depends on (node outputs, weights, graph inputs), through the operators' VJPs (or the
// overrides'), and each consumer's share of values several nodes consume (ir::contribution_key).
// Throws UserError when a node on the way is not differentiable.
ValueMap backward(const ir::Graph& g, const ValueMap& values, const ValueMap& seeds, const Overrides* ov = nullptr);

struct LossSpec {
  std::string op = "mse_loss";  // a catalogue operator with is_loss
  core::Attrs attrs;
};

struct TrainResult {
  ValueMap values;    // as forward()
  double loss = 0;    // the loss of graph output 0 against the target
  Tensor loss_grad;   // d loss / d (graph output 0)
  ValueMap grads;     // d loss / d value, for every value the loss depends on
};

TrainResult train(const ir::Graph& g, const ValueMap& inputs, const Tensor& target, const LossSpec& loss,
                  const Overrides* ov = nullptr);

}  // namespace quorum::ref
