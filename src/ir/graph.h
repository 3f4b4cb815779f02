// The one model language: a DAG of operator nodes over named values, with initializers (weights).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/attrs.h"
#include "core/tensor.h"

namespace quorum::ir {

using core::Attrs;
using core::Tensor;
using core::TensorType;

struct ValueInfo {
  std::string name;
  TensorType type;
  bool operator==(const ValueInfo&) const = default;
};

struct Node {
  std::string name;
  std::string op;
  std::vector<std::string> inputs;  // data inputs, then the op's parameters (weights)
  std::vector<std::string> outputs;
  Attrs attrs;
  bool operator==(const Node&) const = default;
};

struct Graph {
  std::string name = "model";
  std::vector<ValueInfo> inputs;
  std::vector<std::string> outputs;
  std::map<std::string, Tensor> initializers;
  std::vector<Node> nodes;  // topological order after validate()
  // Type of every value: inputs, initializers and node outputs. Filled (and checked) by validate().
  std::map<std::string, TensorType> types;
  // The exchange form (ir/onnx_io.h: form_seed, each node's choices) is chosen as for the model whose shapes
  // have `as` at axis `axis` where they have `from`: the batch relation's wide model (axis 0) and the position
  // relation's (another axis) are read in their own model's form. from 0: the shapes as they are.
  struct FormBatch {
    int64_t from = 0, as = 0;
    int64_t axis = 0;
  } form_batch;
  // The exchange form drawn again (the form relation, campaign::Setup::form_relation): 0 the model's own
  // seeded form; k > 0 the k-th other draw of its form seed, so of its opset and of every node's choices.
  uint64_t form_draw = 0;

  const Node* producer(const std::string& value) const;
  const Node* find_node(const std::string& name) const;
  bool is_initializer(const std::string& v) const { return initializers.count(v) > 0; }
};

struct ValidateOptions {
  bool allow_invalid_attrs = false;  // invalid-parameter campaigns
};

// The most elements one value may have (2^28: 2 GiB in float64, a worker's default address space
// holds several). A larger one is refused by validate() before anything is allocated.
constexpr int64_t kMaxElements = int64_t{1} << 28;

// Checks a graph and completes it: canonical attributes (defaults filled), nodes in topological
// order, every value typed. Throws UserError "<where>: node 'N' (op): <problem>" (or naming the
// value or graph part) on the first problem: unknown operator, bad attribute, wrong arity, shape
// rule violated, declared type differing from the inferred one, undefined or duplicate value, cycle,
// a value too large (kMaxElements).
void validate(Graph& g, const std::string& where, const ValidateOptions& opt = {});

// Number of leading data inputs of a node (the rest are the op's parameters).
size_t data_input_count(const Node& n);

// The key of one consumer's share of a value's gradient, for values several nodes consume
// (gradient maps keep it beside the value's total).
inline std::string contribution_key(const std::string& value, const std::string& consumer) {
  return value + "@" + consumer;
}

}  // namespace quorum::ir
