// Building graphs in code: a one-operator model from an operator case (unit mode, backend tests).
#pragma once
#include "ir/graph.h"
#include "ops/op_spec.h"

namespace quorum::ir {

struct SingleNode {
  Graph graph;
  std::map<std::string, Tensor> inputs;  // float64 values for the graph inputs
};

// One node of `spec` with the case's attributes; data inputs become graph inputs "in0", "in1", ...
// of `dtype`, parameters become initializers "<op>.<param>" (rounded to `dtype`). The graph is
// validated. Throws OpError if the case is invalid.
SingleNode single_node_graph(const ops::OpSpec& spec, ops::Case c, core::Rng& rng,
                             core::DType dtype = core::DType::F32);

// The graph with each quantized (int8/uint8) graph input made by a quantize_linear (scale 1, zero point 0) of a
// float graph input holding the same integers: the node sees the same values, from a float input as in the
// generated quantized models (a library that cannot take a quantized network input still runs it).
void quantized_inputs_from_float(SingleNode& s);

}  // namespace quorum::ir
