// Shared by the ArmNN backend's files: the network builder (Quorum values as ArmNN output slots
// with the TensorInfo Quorum computed) and the operator table (per operator: what ArmNN 20.08 can
// express, and how to add its layers). Only files in this folder include ArmNN headers.
#pragma once
#include <armnn/ArmNN.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "ops/kernel_util.h"

namespace quorum::backends::armnn_backend {

using core::Shape;
using Ints = std::vector<int64_t>;

// A Quorum value inside the network being built: the slot that produces it and its Quorum shape
// (rank 0 is carried as ArmNN shape [1]).
struct Value {
  armnn::IOutputSlot* slot = nullptr;
  Shape shape;
};

armnn::TensorInfo tensor_info(const Shape& s);

// Adds layers to one INetwork. Every helper sets the TensorInfo of the slots it creates.
class Builder {
 public:
  Builder(armnn::INetwork& net, const ir::Graph& g) : net_(net), g_(g) {}

  const ir::Graph& graph() const { return g_; }
  armnn::INetwork& net() { return net_; }

  // A graph input, node output or initializer (initializers become constant layers on first use).
  Value value(const std::string& name);
  void define(const std::string& name, Value v) { values_[name] = v; }
  // An initializer's elements as float32.
  std::vector<float> floats(const std::string& initializer) const;

  // A fresh layer name derived from the node being converted; `what` (with `detail`: an
  // activation's function) is noted as one of the node's layers (Session::lowering).
  std::string layer_name(const std::string& what, const std::string& detail = "");
  void set_node(const ir::Node& n) { node_ = n.name; }
  const LoweringLog& lowering() const { return lowering_; }
  // Notes what the library does to the node being converted beyond its layers (an optimizer pass).
  void note(const std::string& what) { lowering_.note(node_, what); }

  // Sets the output slot's TensorInfo and connects `inputs` to the layer's input slots in order.
  Value finish(armnn::IConnectableLayer* layer, const std::vector<Value>& inputs, const Shape& out);

  Value constant(const std::vector<float>& data, const Shape& shape);
  Value scalar_like(float v, size_t rank);  // a constant of shape [1, ..., 1]
  Value reshape(const Value& x, const Shape& shape);
  Value transpose(const Value& x, const std::vector<size_t>& perm);  // output axis i is input axis perm[i]
  Value activation(const Value& x, armnn::ActivationFunction f, float a = 0, float b = 0);
  Value unary(const Value& x, armnn::UnaryOperation op);
  // add / sub / mul / div / max / min with NumPy broadcasting (ranks are padded with leading 1s).
  Value binary(const std::string& op, const Value& a, const Value& b);
  Value mean(const Value& x, const std::vector<size_t>& axes, bool keep_dims);
  Value slice(const Value& x, const Ints& begin, const Shape& size);
  Value concat(const std::vector<Value>& parts, size_t axis);
  Value pad(const Value& x, const Ints& begin, const Ints& end, float value);

 private:
  armnn::INetwork& net_;
  const ir::Graph& g_;
  std::map<std::string, Value> values_;
  std::string node_;
  int counter_ = 0;
  LoweringLog lowering_;
};

// ArmNN's optimizer takes time growing faster than the square of the layer count
// (SubgraphViewSelector; `quorum run` of one GRU on this backend, measured: 1 260 layers 0.06 s,
// 1 995 layers 0.19 s, 5 040 layers 2.2 s, about L^2.6; a GRU over 480 steps took 28 s and one
// over 1 080 steps, or a conv_transpose2d over a batch of 2 310 (one layer per sample), ran into
// the worker's 60 s limit). A node whose lowering needs more layers than this is refused (`what`:
// how it gets that many) rather than run into the time limit.
constexpr int64_t kMaxLayersPerNode = 2000;
Support layer_budget(const ir::Node& n, int64_t layers, const std::string& what);

struct OpEntry {
  std::function<Support(const ir::Graph&, const ir::Node&)> supports;  // null: always
  std::function<void(Builder&, const ir::Node&)> build;                // defines the node's outputs
};
using OpTable = std::map<std::string, OpEntry>;

const OpTable& op_table();
void register_elementwise(OpTable& t);
void register_spatial(OpTable& t);
void register_tensor(OpTable& t);

// Small helpers for the family files.
const Shape& in_shape(const ir::Graph& g, const ir::Node& n, size_t i);
const Shape& out_shape(const ir::Graph& g, const ir::Node& n, size_t i = 0);
std::string str(const Ints& v);

}  // namespace quorum::backends::armnn_backend
