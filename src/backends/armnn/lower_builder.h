// Inside ArmNN's lowering (lower*.cpp only): the network builder the operator families write
// against — Quorum values as sink handles with their shapes, a fresh layer name per layer, and the
// helpers every family shares (reshape elision, NumPy broadcasting by rank padding, Mean shapes) —
// and the operator table (per operator: what ArmNN 20.08 can express, and how to add its layers).
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backends/armnn/lower.h"
#include "ops/kernel_util.h"

namespace quorum::backends::armnn_lower {

class Builder {
 public:
  Builder(LayerSink& sink, const ir::Graph& g) : sink_(sink), g_(g) {}

  const ir::Graph& graph() const { return g_; }
  LayerSink& sink() { return sink_; }

  // A graph input, node output or initializer (initializers become constant layers on first use).
  Value value(const std::string& name);
  void define(const std::string& name, const Value& v);
  // An initializer's elements as float32 (ArmNN takes weights as constants when it builds the network).
  std::vector<float> floats(const std::string& initializer) const;
  Weights weights(const std::string& hint, std::vector<float> data, const Shape& shape) const {
    return Weights{hint, std::move(data), shape, {}, {}};
  }
  // An initializer's elements exactly (float32, or the integers of a quantized or int32 tensor), and
  // weights of data type `q` made of them (float32 data, or the integers in Weights::ints).
  std::vector<double> elements(const std::string& initializer) const;
  Weights weights(const std::string& hint, const std::vector<double>& data, const Shape& shape, const Quant& q) const;

  void set_node(const ir::Node& n);
  // Notes what the library does to the node being lowered beyond its layers (an optimizer pass).
  void note(const std::string& what) { log_.note(node_, what); }
  void comment(const std::string& text) { sink_.comment(text); }
  LoweringLog& log() { return log_; }

  // Adds a layer named after the node and `what` (noted as one of the node's layers, with
  // `detail`: an activation's function, a pool's algorithm).
  Value add(const Layer& layer, const std::vector<Value>& inputs, const Shape& out, const std::string& what,
            const std::string& detail = "");
  // ... whose output has data type and quantization `q` (a Float32 `q`: as above).
  Value add(const Layer& layer, const std::vector<Value>& inputs, const Shape& out, const Quant& q,
            const std::string& what, const std::string& detail = "");

  Value constant(const std::vector<float>& data, const Shape& shape, const std::string& hint = "const");
  Value scalar_like(float v, size_t rank);  // a constant of shape [1, ..., 1]
  Value reshape(const Value& x, const Shape& shape);  // none when ArmNN's shapes are equal
  // A quantized value read with data type and quantization `q` (ONNX gives every consumer its own scale and
  // zero point, ArmNN one per tensor): a Slice of the whole tensor (CpuRef copies the bytes) whose output
  // TensorInfo carries `q`, so the same integers are read with the consumer's parameters; none when `q` is the
  // value's own. reshape(x, shape, q): that view, then a Reshape to `shape` (none for an equal shape).
  Value as_quant(const Value& x, const Quant& q);
  Value reshape(const Value& x, const Shape& shape, const Quant& q);
  Value transpose(const Value& x, const std::vector<size_t>& perm);  // none for the identity
  // activation and binary with an output of data type and quantization `q` (a quantized twin's y_scale and
  // y_zero_point; Float32 by default).
  Value activation(const Value& x, Act f, float a = 0, float b = 0, const Quant& q = Quant{});
  Value unary(const Value& x, UnaryOp op);
  // With NumPy broadcasting (ranks are padded with leading 1s by reshapes).
  Value binary(BinaryOp op, const Value& a, const Value& b, const Quant& q = Quant{});
  Value mean(const Value& x, const std::vector<size_t>& axes, bool keep_dims);
  Value slice(const Value& x, const Ints& begin, const Shape& size);
  Value concat(const std::vector<Value>& parts, size_t axis);  // none for one part
  // Parts (of one quantized type, each with its own scale and offset) joined into an output quantized by `q`:
  // CpuRef's Concat dequantizes each part and quantizes the result (measured), so no part needs a view. At
  // least two parts (ArmNN's Concat takes no fewer; so does qlinear_concat).
  Value concat(const std::vector<Value>& parts, size_t axis, const Quant& q);
  Value pad(const Value& x, const Ints& begin, const Ints& end, float value);

 private:
  LayerSink& sink_;
  const ir::Graph& g_;
  std::map<std::string, Value> values_;
  std::string node_;
  int counter_ = 0;
  LoweringLog log_;
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
void register_quant(OpTable& t);
// The quantized operators (lower_quant.cpp): the ones whose values may be int8, uint8 or int32.
bool is_quant_op(const std::string& op);
// ArmNN's type of an int8 (QAsymmS8) or uint8 (QAsymmU8) value.
DataType data_type(core::DType t);
// A quantized product's (qlinear_conv2d, qlinear_matmul) tensors: the input as the node reads it, the
// weights, the int32 bias (scale x_scale * w_scale in float32, offset 0) and the output.
struct ProductQuant {
  Quant x, w, bias, y;
};
ProductQuant product_quant(const ir::Graph& g, const ir::Node& n);
// What ArmNN 20.08's CpuRef takes of a quantized product (IsConvolution2dSupported,
// IsFullyConnectedSupported), or why not.
Support product_supports(const ir::Graph& g, const ir::Node& n);
// Notes (Builder::note) where CpuRef's float32 arithmetic on the dequantized operands leaves float32's range for
// a product of `terms` terms: "float32 range (dequantized operands overflow)" — (q - offset) * scale, a product
// or the sum can be inf (inf - inf or 0 * inf is NaN) — and "float32 range (dequantized products underflow)"
// (x_scale * w_scale below float32's normal range). The ledger's entries for them name these.
void note_float32_range(Builder& b, const ProductQuant& q, int64_t terms);
// A quantized twin's (qlinear_add, ..., qlinear_sigmoid: src/ops/qlinear.cpp) tensors: each data input as the
// node reads it (x_scales[i], x_zero_points[i]) and the output (y_scale, y_zero_point), all of the type `to`.
struct TwinQuant {
  std::vector<Quant> x;
  Quant y;
};
TwinQuant twin_quant(const ir::Node& n);

// One Pooling2d max window of 1 x `width` over [.., .., rows, width] (ArmNN 20.08 has no max
// reduction: global max pooling and reduce_max/min are built on it).
Value max_window(Builder& b, const Value& flat, int64_t width, const Shape& out, const std::string& what);

// Small helpers for the family files.
const Shape& in_shape(const ir::Graph& g, const ir::Node& n, size_t i);
const Shape& out_shape(const ir::Graph& g, const ir::Node& n, size_t i = 0);
float attr_float(const ir::Node& n, const char* attr);
std::string str(const Ints& v);

}  // namespace quorum::backends::armnn_lower
