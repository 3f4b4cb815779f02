// A node's float64 kernel re-run on given operands: the one way the verdicts, the spread, the
// root-cause classifier and the report recompute what a node should have given — its forward
// outputs, or the gradients of its inputs (the vector-Jacobian product) for incoming gradients.
#pragma once
#include <functional>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"

namespace quorum::oracle {

// Operands -> results, in float64.
using Kernel = std::function<std::vector<core::Tensor>(const std::vector<core::Tensor>&)>;

// The node's forward outputs on `operands` (one per input). Throws when the kernel refuses them.
std::vector<core::Tensor> node_forward(const ir::Node& n, const std::vector<core::Tensor>& operands);
// The gradients of the node's inputs (undefined where the operator has none) on `operands`, with
// `outputs` the forward values the derivative is taken at and `incoming` the gradients of the
// outputs. Empty for an operator that is not differentiable.
std::vector<core::Tensor> node_vjp(const ir::Node& n, const std::vector<core::Tensor>& operands,
                                   const std::vector<core::Tensor>& outputs, const std::vector<core::Tensor>& incoming);

// operands -> forward outputs.
Kernel forward_kernel(const ir::Node& n);
// operands -> the gradients of the inputs numbered `judged`, for a fixed incoming gradient (the
// forward recomputed from the operands).
Kernel backward_kernel(const ir::Node& n, std::vector<core::Tensor> incoming, std::vector<size_t> judged);
// operands followed by the incoming gradients -> the gradient of input `input` (both move in the
// spread of a gradient).
Kernel gradient_kernel(const ir::Node& n, size_t input);

}  // namespace quorum::oracle
