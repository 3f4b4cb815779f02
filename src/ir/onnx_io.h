// The ONNX bridge: ir::Graph to an ONNX ModelProto and back. Only onnx_io.cpp sees the ONNX and
// protobuf headers; everything else exchanges serialized bytes.
//
// Export writes each catalogue node through its operator's export hook (OpSpec::onnx_export,
// ops/onnx_map.h): one ONNX node where ONNX has the operator, a short decomposition where it does
// not at the chosen opset. Value and node names are kept (helper values and nodes of a
// decomposition are named "<node>/<what>"; the node producing the Quorum value carries the Quorum
// node's name). The graph outputs are the Quorum graph's outputs, then every other node output in
// node order, so engines can return intermediates; the metadata entry "quorum.outputs" records how
// many are real. Losses are not exported.
//
// Import maps each ONNX node to the import hook the catalogue registers for its type
// (OpSpec::onnx_import; constant inputs become attributes where the catalogue takes attributes),
// folds Constant nodes into constants, fuses the Div/Erf/Add/Mul/Mul form of GELU back into one
// node, and validates the result.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace quorum::ir {

constexpr int kOnnxMinOpset = 13;
constexpr int kOnnxMaxOpset = 17;

// Serialized ModelProto. Throws UserError for an opset outside [13, 17], a loss node or a graph
// the bridge cannot express (naming the node); an internal error when the ONNX checker or shape
// inference rejects what was written.
std::string graph_to_onnx(const Graph& g, int opset = 13);

// Parses, converts and validates. Throws one-line UserErrors starting with `where`: malformed
// bytes, unsupported opset or data type, an operator outside the catalogue ("node 'N' (OpType):
// operator not in the catalogue"), or an attribute form the catalogue cannot express.
Graph graph_from_onnx(const std::string& bytes, const std::string& where, const ValidateOptions& opt = {});
// The same with some graph inputs given values: they become constants (initializers), so inputs
// that the catalogue takes as attributes (a Reshape's shape, Slice's starts, Clip's bounds, as the
// conformance suite feeds them) can be imported.
Graph graph_from_onnx(const std::string& bytes, const std::string& where,
                      const std::map<std::string, Tensor>& constant_inputs, const ValidateOptions& opt = {});

// What a model holds, without converting it: node operator types, names and attributes (in node
// order) and the names of the graph inputs that are not initializers. Throws UserError naming
// `where` when it does not parse.
struct OnnxSummary {
  std::vector<std::string> op_types;
  std::vector<std::string> inputs;
  std::vector<std::string> node_names;  // in node order, as op_types
  // Each node's attributes as text, in node order: an int "2", a float "0.2", a string as it is,
  // a list "1,2,3"; graphs and tensors are left out.
  std::vector<std::map<std::string, std::string>> attrs;
};
OnnxSummary onnx_summary(const std::string& bytes, const std::string& where);

// A serialized TensorProto (e.g. the conformance suite's test_data_set_*/input_0.pb) as a Tensor
// (float, double, int32 and int64 data). Throws UserError naming `where`.
// `name`, when given, receives the tensor's name.
Tensor tensor_from_onnx(const std::string& bytes, const std::string& where, std::string* name = nullptr);

}  // namespace quorum::ir
