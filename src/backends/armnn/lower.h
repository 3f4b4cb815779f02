// ArmNN's lowering: the one mapping from Quorum nodes to ArmNN 20.08 layers, written against a
// LayerSink and free of ArmNN's headers. Every decision is made here — which layers, in which
// order, their descriptors' fields, weight rearrangements, shapes (ArmNN's TensorInfos), what
// ArmNN cannot express and why — and the sink only adds what it is told:
//   - the backend's sink (armnn_sink.cpp) calls INetwork::Add...Layer with ArmNN's descriptors;
//   - the reproducer writer's sink (repro.cpp) prints the same calls as C++ source.
// So a reproducer is printed from the lowering that ran (tests/backends/armnn_sinks_test.cpp checks
// both sinks receive the same calls for every catalogue operator's sampled cases).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "backends/backend.h"

namespace quorum::backends::armnn_lower {

using core::Shape;
using Ints = std::vector<int64_t>;

// ArmNN's data types (armnn::DataType) the lowering gives a tensor: float32 values, the quantized
// int8/uint8 values of the quantized operators (QAsymmS8/QAsymmU8), and a quantized convolution's
// int32 bias (Signed32).
enum class DataType { Float32, QAsymmU8, QAsymmS8, Signed32 };
const char* name(DataType t);

// A TensorInfo's data type and quantization (scale and offset; none for Float32). ArmNN holds one per
// tensor, where ONNX gives each consumer its own: a consumer reading a quantized value with other
// parameters reads it through a view (Builder::as_quant).
struct Quant {
  DataType type = DataType::Float32;
  float scale = 0;
  int32_t offset = 0;
  bool operator==(const Quant& o) const { return type == o.type && scale == o.scale && offset == o.offset; }
  bool operator!=(const Quant& o) const { return !(*this == o); }
};
std::string describe(const Quant& q);  // "" for Float32, else " QAsymmU8(scale,offset)"

// A layer output inside the network being built: the sink's handle, its Quorum shape (rank 0
// is carried as ArmNN shape [1]) and its data type and quantization.
struct Value {
  int id = -1;
  Shape shape;
  Quant q{};
};

// ArmNN's enumerators, named as ArmNN names them (armnn::ActivationFunction::ReLu, ...).
enum class Act { ReLu, BoundedReLu, Sigmoid, TanH, SoftReLu, Square, HardSwish, LeakyReLu, Elu, Linear };
enum class UnaryOp { Abs, Exp, Sqrt, Rsqrt, Neg };
enum class BinaryOp { Addition, Subtraction, Multiplication, Division, Maximum, Minimum };
enum class ConvKind { Convolution2d, DepthwiseConvolution2d, TransposeConvolution2d };
const char* name(Act f);
const char* name(UnaryOp op);
const char* name(BinaryOp op);
const char* name(ConvKind k);

// A constant tensor (ConstTensor) with a hint naming it in source code (a Quorum value name): float32
// `data`, or with a quantized type (q) its integer elements in `ints` (int8, uint8 or int32).
struct Weights {
  std::string hint;
  std::vector<float> data;
  Shape shape;
  Quant q{};
  std::vector<int32_t> ints{};
};

// Strides and explicit pads of a 2-D layer (NCHW).
struct Geometry {
  int64_t stride_y = 1, stride_x = 1, pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
};

// The layers Quorum adds: the descriptor fields it sets (the others keep ArmNN's defaults).
struct ConstantLayer {
  Weights w;
};
struct ReshapeLayer {
  Shape shape;
};
struct TransposeLayer {
  std::vector<size_t> perm;  // output axis i is input axis perm[i]
};
struct ActivationLayer {
  Act f;
  float a = 0, b = 0;
};
struct UnaryLayer {
  UnaryOp op;
};
struct BinaryLayer {
  BinaryOp op;
};
struct MeanLayer {
  std::vector<size_t> axes;
  bool keep_dims = false;
};
struct SliceLayer {
  Ints begin;
  Shape size;
};
struct StridedSliceLayer {
  Ints begin, end, stride;
  int end_mask = 0;
};
struct ConcatLayer {
  std::vector<Shape> shapes;  // the inputs' shapes
  size_t axis = 0;
};
struct PadLayer {
  Ints begin, end;
  float value = 0;
};
struct FullyConnectedLayer {  // weights [outputs, inputs] (m_TransposeWeightMatrix)
  Weights w;
  std::optional<Weights> bias;
};
struct SoftmaxLayer {
  bool log = false;  // LogSoftmax
  int64_t axis = -1;
  bool beta = true;  // m_Beta set (to 1)
};
struct ConvLayer {
  ConvKind kind;
  Geometry geometry;
  int64_t dilation_y = 1, dilation_x = 1;  // not for TransposeConvolution2d
  bool bias_enabled = false;
  Weights w;
  std::optional<Weights> bias;
};
struct PoolLayer {
  bool max = true;  // else Average
  int64_t height = 1, width = 1;
  // Strides, pads, rounding and padding method; a plain window (strides 1, no pads) without.
  struct Full {
    Geometry geometry;
    bool ceil = false;
    bool ignore_value = false;  // PaddingMethod::IgnoreValue (pads count in the average), else Exclude
  };
  std::optional<Full> full;
};
struct BatchNormLayer {
  float eps = 0;
  Weights mean, var, beta, gamma;
};
struct LrnLayer {  // Normalization across channels, LocalBrightness
  int64_t size = 1;
  float alpha = 0, beta = 0, k = 0;  // ArmNN: k + alpha * sum (alpha already divided by size)
};
struct QuantizeLayer {};    // float32 -> the output's quantized type, scale and offset
struct DequantizeLayer {};  // the input's quantized type, scale and offset -> float32
struct ResizeLayer {
  bool bilinear = false;
  int64_t height = 0, width = 0;
  bool half_pixel = false, align_corners = false;
};
using Layer = std::variant<ConstantLayer, ReshapeLayer, TransposeLayer, ActivationLayer, UnaryLayer, BinaryLayer,
                           MeanLayer, SliceLayer, StridedSliceLayer, ConcatLayer, PadLayer, FullyConnectedLayer,
                           SoftmaxLayer, ConvLayer, PoolLayer, BatchNormLayer, LrnLayer, ResizeLayer, QuantizeLayer,
                           DequantizeLayer>;
// One line naming the layer and every field the lowering set (weights by size and a checksum).
std::string describe(const Layer& l);

// Receives the network the lowering builds. Handles are the sink's own (ids it returns).
class LayerSink {
 public:
  virtual ~LayerSink() = default;
  virtual int input(size_t index, const std::string& name, const Shape& shape, const Quant& q) = 0;
  // Adds `layer` named `name`, connects `inputs` to its input slots in order, sets its output's
  // TensorInfo to `out` with data type and quantization `q`, returns the output's handle.
  virtual int layer(const Layer& layer, const std::vector<Value>& inputs, const Shape& out, const Quant& q,
                    const std::string& name) = 0;
  virtual void output(size_t index, const std::string& name, const Value& v) = 0;
  // What the calls are for, for a reader (the writer prints them; the backend ignores them).
  virtual void node(const ir::Node&) {}
  virtual void defined(const std::string& /*value*/, const Value&) {}
  virtual void comment(const std::string&) {}
};

// A sink that forwards to another and records each network-building call as one line.
class RecordingSink : public LayerSink {
 public:
  explicit RecordingSink(LayerSink& inner) : inner_(inner) {}
  int input(size_t index, const std::string& name, const Shape& shape, const Quant& q) override;
  int layer(const Layer& layer, const std::vector<Value>& inputs, const Shape& out, const Quant& q,
            const std::string& name) override;
  void output(size_t index, const std::string& name, const Value& v) override;
  void node(const ir::Node& n) override { inner_.node(n); }
  void defined(const std::string& value, const Value& v) override { inner_.defined(value, v); }
  void comment(const std::string& text) override { inner_.comment(text); }
  const std::vector<std::string>& calls() const { return calls_; }

 private:
  LayerSink& inner_;
  std::vector<std::string> calls_;
};

// Whether ArmNN 20.08 can run the node as this lowering maps it, or why not.
Support supports(const ir::Graph& g, const ir::Node& n);

// A node output bound to an output layer (binding ids in node order).
struct OutputBinding {
  std::string value;
  int64_t id = 0;
  Shape shape;
  Quant q;  // a quantized output's bytes are the values of its type
};

struct Lowered {
  std::vector<OutputBinding> outputs;  // the values bound to output layers (see lower)
  LoweringLog log;                     // the layers (and optimizer passes) each node gives
};

// Lowers the whole graph into `sink`: one input layer per graph input, the nodes' layers, and
// one output layer per node output — or, with `outputs_only` (the optimized run), per graph output,
// each once. Throws ConversionError for a node `supports` refuses.
Lowered lower(LayerSink& sink, const ir::Graph& g, bool outputs_only = false);

// For the sink-agreement test: the calls each sink receives for `g` (or "refused: <reason>").
// The library's sink is defined in armnn_sink.cpp (it builds a real INetwork), the writer's in
// repro.cpp.
std::vector<std::string> library_sink_calls(const ir::Graph& g);
std::vector<std::string> writer_sink_calls(const ir::Graph& g);

}  // namespace quorum::backends::armnn_lower
