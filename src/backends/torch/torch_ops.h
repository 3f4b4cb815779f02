// The libtorch backend's operator table: for every catalogue operator, whether libtorch can express
// a node (its attributes on its input shapes) and how to run it with ATen functions. Each family
// file (torch_ops_*.cpp) fills its part of the table; the session and the backend only look up.
// Only ATen per-operator headers are used: <torch/torch.h> triples the compile time of a TU.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace quorum::backends::torch {

using TensorList = std::vector<at::Tensor>;

// Everything an operator implementation may consult: the node, and the graph for value types
// (input shapes decide pads, output shapes decide crops).
struct NodeContext {
  const ir::Graph& graph;
  const ir::Node& node;

  const core::Shape& input_shape(size_t i) const { return graph.types.at(node.inputs.at(i)).shape; }
  const core::Shape& output_shape(size_t i = 0) const { return graph.types.at(node.outputs.at(i)).shape; }
  size_t data_inputs() const { return ir::data_input_count(node); }
  // Attribute accessors (attributes are canonical: defaults are filled by validate()).
  int64_t i(const std::string& name) const;
  double f(const std::string& name) const;
  const std::string& s(const std::string& name) const;
  const std::vector<int64_t>& ints(const std::string& name) const;
};

using SupportFn = std::function<Support(const NodeContext&)>;
// Runs the node on its inputs (data inputs then parameters, as at::Tensor of the session dtype).
using RunFn = std::function<TensorList(const NodeContext&, const TensorList&)>;

struct OpImpl {
  SupportFn support;  // null: always supported
  RunFn run;
};

using OpTable = std::map<std::string, OpImpl>;

const OpTable& op_table();

// Family registrations (one per torch_ops_*.cpp).
void add_elementwise_ops(OpTable& t);   // eltwise, binary
void add_layout_ops(OpTable& t);        // shape, reduce, softmax
void add_spatial_ops(OpTable& t);       // conv, pool, resize
void add_network_ops(OpTable& t);       // dense, norm, rnn, loss

// A catalogue loss of prediction p against target t (both of the session dtype), a 0-dim tensor.
// Used by the loss operators and by train_step. Throws core::UserError on an unknown loss.
at::Tensor catalogue_loss(const std::string& loss, const at::Tensor& p, const at::Tensor& t);

// Small shared helpers.
int normalize_axis(int64_t axis, int64_t rank);
// ONNX pads [b1, b2, ..., e1, e2, ...] of the trailing spatial axes to at::constant_pad_nd's order
// (last axis first, each as begin, end).
std::vector<int64_t> torch_pad_order(const std::vector<int64_t>& begin, const std::vector<int64_t>& end);

}  // namespace quorum::backends::torch
