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
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace quorum::ir {

constexpr int kOnnxMinOpset = 11;
constexpr int kOnnxMaxOpset = 17;

// Serialized ModelProto in the plain form (every node's first form, ops/onnx_map.h). Throws
// UserError for an opset outside [11, 17], a loss node or a graph the bridge cannot express (naming
// the node); an internal error when the ONNX checker or shape inference rejects what was written.
std::string graph_to_onnx(const Graph& g, int opset = 13);

// Exchange forms. ONNX spells most operators several equivalent ways (ops/onnx_map.h, "Forms"); an
// export with a form seed picks one per node and `what`, seeded: the choice is a hash of the seed,
// the node's name, operator, attributes and input types, and `what` (so a node keeps its form when
// the reducer removes others). Seed 0 writes the plain form.
struct OnnxForm {
  OnnxForm() = default;
  OnnxForm(int opset_, uint64_t seed_, std::vector<std::string> avoid_ = {})
      : opset(opset_), seed(seed_), avoid(std::move(avoid_)) {}
  int opset = 13;
  uint64_t seed = 0;
  // Forms an engine cannot read, "what=form" or "op what=form": a seeded choice that lands on one
  // takes the next alternative (a form the export must use, such as a decomposition the opset
  // forces, is still written).
  std::vector<std::string> avoid;
  // Forms to write wherever a node offers them, "what=form" or "op what=form", over the seeded
  // choice and over `avoid` (an execution variant that runs one form on purpose).
  std::vector<std::string> force;
  // Choices recorded for a node (by name, OnnxExported::forms' "what=form,..."): a node listed takes exactly
  // these over everything above, so a model is written again in the very form an engine read (a bundle).
  std::map<std::string, std::string> node_forms;
  // Only the graph's own outputs as ONNX graph outputs (an optimized run: the engine may fuse what no one
  // asks for); otherwise every node output is one too, after them.
  bool outputs_only = false;
};
struct OnnxExported {
  std::string bytes;  // empty for a dry run
  int opset = 13;
  // Per node (by Quorum node name): its choices, "what=form" joined by ","; a node without
  // alternatives has none.
  std::map<std::string, std::string> forms;
  // "opset 12; dense_1 gemm=matmul_add; conv2d_0 attrs=minimal" (the nodes with choices, by name).
  std::string str() const;
};
OnnxExported graph_to_onnx(const Graph& g, const OnnxForm& form);
// The forms alone: no bytes, no checker (what a backend's supports() reads). Throws as the export.
OnnxExported onnx_forms(const Graph& g, const OnnxForm& form);

// The form seed of a model: a hash of its name and inputs (a function of the campaign seed and the
// model index, as the model is) and of its form draw (Graph::form_draw), never 0.
uint64_t form_seed(const Graph& g);
// The seeded form for an engine that reads opsets [lo, hi] (clamped to the exporter's): the model's
// form seed and an opset chosen from it in that range.
OnnxForm seeded_form(const Graph& g, int lo, int hi, std::vector<std::string> avoid = {});

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
  std::vector<std::string> domains;               // in node order: "" for ai.onnx, "com.microsoft", ...
  std::vector<std::vector<std::string>> outputs;  // in node order: the values each node writes
};
OnnxSummary onnx_summary(const std::string& bytes, const std::string& where);

// A serialized TensorProto (e.g. the conformance suite's test_data_set_*/input_0.pb) as a Tensor
// (float, double, int32 and int64 data). Throws UserError naming `where`.
// `name`, when given, receives the tensor's name.
Tensor tensor_from_onnx(const std::string& bytes, const std::string& where, std::string* name = nullptr);

}  // namespace quorum::ir
