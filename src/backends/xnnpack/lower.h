// The XNNPACK lowering: the one mapping from Quorum nodes to XNNPACK 2022-02 calls, shared by the
// backend (xnnpack_segment.cpp: a sink that calls the library) and the reproducer writer (repro.cpp: a
// sink that prints the same calls as C++). It includes no XNNPACK header and holds every mapping
// decision: the support rules and their reasons, each node's layout, the subgraph segments (a new
// subgraph where a value is wanted in another layout than the one its producer wrote), weight
// rearrangements (OHWI filters, folded batch_norm constants), window geometry and the compositions.
// The sink receives the library-level calls with everything decided.
//
// Layouts: Quorum values are row-major NCHW (ONNX conventions); XNNPACK's spatial operators want
// NHWC. A value can exist in a segment in its logical layout (Plain) or channels-last (rank 3 and
// 4 only: [N, C, L] is stored as [N, 1, L, C], [N, C, H, W] as [N, H, W, C]). XNNPACK 2022-02 has no
// transpose operator, so layout changes happen in host code between segments: a node that needs a
// value in a layout other than the one its producer wrote in the current segment starts a new
// segment, where the value enters as an external input permuted on the host. Every node output is
// an external output, so the host sees every intermediate — except in the optimized run
// (CompileOptions::optimized, lower_fusion.cpp), where only the values the host needs leave their
// segment and the rest are internal, so XNNPACK's subgraph optimizer may fuse through them.
//
// Quantized values (Quorum's int8/uint8) are qint8/quint8 tensors with a per-tensor scale and zero point
// (Quant); an XNNPACK value has one quantization, so a node that reads a value under another scale or zero
// point than its producer wrote it with also starts a new segment (lower_quant.cpp).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace quorum::backends::xnnpack {

using core::Shape;
using Dims = std::vector<size_t>;

enum class Layout { Plain, ChannelsLast };

// The XNNPACK dims of a logical shape stored in `layout`.
Dims xnn_dims(const Shape& logical, Layout layout);
// `t` in float32, row-major [N, C, S...] permuted to channels-last [N, S..., C].
std::vector<float> to_channels_last(const core::Tensor& t);

// A value's XNNPACK datatype: float32, or quantized per tensor (xnn_define_quantized_tensor_value) with a
// float32 scale and an integer zero point. Quorum's I8/U8 values are qint8/quint8, a quantized
// convolution's int32 bias qint32 (scale x_scale * w_scale, zero point 0).
enum class QType { F32, QInt8, QUInt8, QInt32 };
struct Quant {
  QType type = QType::F32;
  float scale = 1.0f;
  int32_t zero_point = 0;
  bool quantized() const { return type != QType::F32; }
  bool operator==(const Quant& o) const {
    return type == o.type && (!quantized() || (scale == o.scale && zero_point == o.zero_point));
  }
  bool operator!=(const Quant& o) const { return !(*this == o); }
  bool operator<(const Quant& o) const;
};
const Quant kFloat{};
// "xnn_datatype_qint8", ...
const char* datatype_name(QType t);
// "qint8 scale S zero point Z" (the float32 scale as an exact literal), "fp32".
std::string quant_text(const Quant& q);
// The host dtype of an XNNPACK datatype (F32, I8, U8, I32).
core::DType host_dtype(QType t);

// A value of the subgraph being defined, numbered by the lowering from 0 in each segment; each sink
// maps it to its own id (XNNPACK's value id, a C++ variable name).
using ValueId = uint32_t;
constexpr ValueId kNoValue = UINT32_MAX;  // XNN_INVALID_VALUE_ID: no bias

// XNN_FLAG_* bits of the definitions the lowering uses.
enum Flag : uint32_t {
  kTensorflowSamePadding = 1u << 0,  // XNN_FLAG_TENSORFLOW_SAME_PADDING
  kTransposeWeights = 1u << 1,       // XNN_FLAG_TRANSPOSE_WEIGHTS
  kAlignCorners = 1u << 2,           // XNN_FLAG_ALIGN_CORNERS
  kTensorflowLegacyMode = 1u << 3,   // XNN_FLAG_TENSORFLOW_LEGACY_MODE
};
// "XNN_FLAG_A | XNN_FLAG_B", or "0".
std::string flag_names(uint32_t flags);

// xnn_define_<unary>(subgraph, input, output, flags).
enum class Unary { Abs, Negate, Sigmoid, Hardswish, Square, SquareRoot };
// xnn_define_<op>(subgraph, output_min, output_max, a, b, output, flags).
enum class Arithmetic { Add, Subtract, Multiply, Divide };
// xnn_define_<op>(subgraph, a, b, output, flags).
enum class Binary { Maximum, Minimum, SquaredDifference };
const char* call_name(Unary op);  // "xnn_define_abs"
const char* call_name(Arithmetic op);
const char* call_name(Binary op);

// The geometry of a 2-D window definition (XNNPACK's argument order: padding top, right, bottom,
// left; kernel, stride and dilation height then width, dilation counting from 1).
struct Window2d {
  uint32_t top = 0, right = 0, bottom = 0, left = 0;
  uint32_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  uint32_t flags = 0;
  // The geometry comes from an operator's window attributes (kernel, strides, pads), not a pooling
  // the lowering composes over a whole extent (global max pool, reductions): the reproducer labels
  // its padding.
  bool attribute_window = true;
};

// A value crossing into or out of a segment, with its logical shape.
struct External {
  std::string value;
  Layout layout;
  ValueId id;
  Shape shape;
  Quant quant;  // float32, or its quantization (the host holds it as I8/U8)
};

// concat on the operator API: one strided xnn_copy_nc_x32 per input into the output buffer.
struct ConcatCopy {
  std::string value;
  std::optional<std::vector<float>> data;  // an initializer's float32 values; nullopt: a computed value
  size_t channels = 0;                     // elements copied per batch row (input and output stride of the copy)
  size_t offset = 0;                       // where its rows start in the output's rows
};
struct Concat {
  std::string output;
  Shape shape;        // the output's
  size_t batch = 1;   // rows: the product of the dims before the axis
  size_t stride = 0;  // the output's row length
  std::vector<ConcatCopy> copies;
};

// What the lowering says to the library. Calls come in this order: begin_subgraph, then per node
// begin_node and its values and definitions, end_subgraph when the segment closes; an operator-API
// node (concat) comes between segments.
class Sink {
 public:
  virtual ~Sink() = default;

  virtual void begin_subgraph() = 0;
  // The values and definitions that follow belong to `node`, which runs in `layout`.
  virtual void begin_node(const ir::Node& node, Layout layout) = 0;
  // xnn_define_tensor_value: graph values crossing the segment (external id `external`), an
  // initializer read as a data input (`data` already in `layout`), a constant the lowering made
  // (`what` says what it holds), an internal value.
  // `q`: xnn_define_tensor_value for float32, xnn_define_quantized_tensor_value otherwise.
  virtual void external_input(ValueId id, const std::string& value, Layout layout, const Dims& dims,
                              uint32_t external, const Quant& q) = 0;
  virtual void external_output(ValueId id, const std::string& value, Layout layout, const Dims& dims,
                               uint32_t external, const Quant& q) = 0;
  virtual void weight_value(ValueId id, const std::string& value, Layout layout, const Dims& dims,
                            std::vector<float> data) = 0;
  virtual void static_value(ValueId id, const Dims& dims, std::vector<float> data, const std::string& what) = 0;
  virtual void internal_value(ValueId id, const Dims& dims, const Quant& q) = 0;
  // xnn_define_quantized_tensor_value with static data (a quantized filter, an int32 bias), each element
  // an integer of q's type.
  virtual void quantized_static(ValueId id, const Dims& dims, std::vector<int32_t> data, const Quant& q,
                                const std::string& what) = 0;

  // Node definitions (flags 0 unless a parameter says otherwise).
  virtual void unary(Unary op, ValueId x, ValueId y) = 0;
  virtual void arithmetic(Arithmetic op, float min, float max, ValueId a, ValueId b, ValueId y) = 0;
  virtual void binary(Binary op, ValueId a, ValueId b, ValueId y) = 0;
  virtual void clamp(float min, float max, ValueId x, ValueId y) = 0;
  virtual void elu(float alpha, ValueId x, ValueId y) = 0;
  virtual void leaky_relu(float slope, ValueId x, ValueId y) = 0;
  virtual void convolution_2d(const Window2d& w, uint32_t groups, size_t group_input_channels,
                              size_t group_output_channels, ValueId x, ValueId filter, ValueId bias, ValueId y) = 0;
  virtual void depthwise_convolution_2d(const Window2d& w, uint32_t depth_multiplier, size_t input_channels, ValueId x,
                                        ValueId filter, ValueId bias, ValueId y) = 0;
  // The window's stride is the upsampling factor.
  virtual void deconvolution_2d(const Window2d& w, uint32_t adjustment_h, uint32_t adjustment_w, uint32_t groups,
                                size_t group_input_channels, size_t group_output_channels, ValueId x, ValueId filter,
                                ValueId bias, ValueId y) = 0;
  virtual void max_pooling_2d(const Window2d& w, ValueId x, ValueId y) = 0;
  virtual void average_pooling_2d(const Window2d& w, ValueId x, ValueId y) = 0;  // no dilation
  virtual void global_average_pooling_2d(ValueId x, ValueId y) = 0;
  virtual void fully_connected(ValueId x, ValueId filter, ValueId bias, ValueId y, uint32_t flags) = 0;
  virtual void static_reshape(const Dims& new_shape, ValueId x, ValueId y) = 0;
  virtual void static_constant_pad(const Dims& pre, const Dims& post, float value, ValueId x, ValueId y) = 0;
  virtual void softmax(ValueId x, ValueId y) = 0;
  virtual void static_resize_bilinear_2d(size_t height, size_t width, ValueId x, ValueId y, uint32_t flags) = 0;
  // xnn_define_convert: float32 to quantized (quantize_linear) or back (dequantize_linear), as x's and y's
  // datatypes say.
  virtual void convert(ValueId x, ValueId y) = 0;

  // The segment is complete: build and run it with these external values (ids in definition order).
  virtual void end_subgraph(const std::vector<External>& inputs, const std::vector<External>& outputs) = 0;
  // An operator-API node, between segments.
  virtual void concat(const ir::Node& node, const Concat& c) = 0;
};

// A sink that defines nothing: a base for passes that only look at some calls (the optimized lowering's first
// pass, lower_fusion.cpp) and for tests.
class NullSink : public Sink {
 public:
  void begin_subgraph() override {}
  void begin_node(const ir::Node&, Layout) override {}
  void external_input(ValueId, const std::string&, Layout, const Dims&, uint32_t, const Quant&) override {}
  void external_output(ValueId, const std::string&, Layout, const Dims&, uint32_t, const Quant&) override {}
  void weight_value(ValueId, const std::string&, Layout, const Dims&, std::vector<float>) override {}
  void static_value(ValueId, const Dims&, std::vector<float>, const std::string&) override {}
  void internal_value(ValueId, const Dims&, const Quant&) override {}
  void quantized_static(ValueId, const Dims&, std::vector<int32_t>, const Quant&, const std::string&) override {}
  void unary(Unary, ValueId, ValueId) override {}
  void arithmetic(Arithmetic, float, float, ValueId, ValueId, ValueId) override {}
  void binary(Binary, ValueId, ValueId, ValueId) override {}
  void clamp(float, float, ValueId, ValueId) override {}
  void elu(float, ValueId, ValueId) override {}
  void leaky_relu(float, ValueId, ValueId) override {}
  void convolution_2d(const Window2d&, uint32_t, size_t, size_t, ValueId, ValueId, ValueId, ValueId) override {}
  void depthwise_convolution_2d(const Window2d&, uint32_t, size_t, ValueId, ValueId, ValueId, ValueId) override {}
  void deconvolution_2d(const Window2d&, uint32_t, uint32_t, uint32_t, size_t, size_t, ValueId, ValueId, ValueId,
                        ValueId) override {}
  void max_pooling_2d(const Window2d&, ValueId, ValueId) override {}
  void average_pooling_2d(const Window2d&, ValueId, ValueId) override {}
  void global_average_pooling_2d(ValueId, ValueId) override {}
  void fully_connected(ValueId, ValueId, ValueId, ValueId, uint32_t) override {}
  void static_reshape(const Dims&, ValueId, ValueId) override {}
  void static_constant_pad(const Dims&, const Dims&, float, ValueId, ValueId) override {}
  void softmax(ValueId, ValueId) override {}
  void static_resize_bilinear_2d(size_t, size_t, ValueId, ValueId, uint32_t) override {}
  void convert(ValueId, ValueId) override {}
  void end_subgraph(const std::vector<External>&, const std::vector<External>&) override {}
  void concat(const ir::Node&, const Concat&) override {}
};

// Every node of `g` that XNNPACK 2022-02 runs, and why not otherwise.
Support supports(const ir::Graph& g, const ir::Node& n);

// Lowers `g` (its nodes in order) into `sink`. When a node is unsupported nothing reaches the sink
// and the answer says "node 'N' (op): <reason>". `exposed` null (the pinned run, the reproducer): every
// node output is an external output of its segment. Otherwise only the node outputs it names are; the
// others are internal values (segments are the same either way: they follow layouts and quantizations).
Support lower(const ir::Graph& g, Sink& sink, const std::set<std::string>* exposed = nullptr);

// The optimized run (lower_fusion.cpp). The node outputs the host must see when only the graph's
// outputs are asked for: the graph outputs, the values a later segment or a host-side operator
// (concat) reads, and outputs nothing reads (XNNPACK 2022-02 clears an unread internal value but keeps
// its producer, which would then write through a cleared value).
std::set<std::string> exposed_values(const ir::Graph& g);
// A sink decorator that passes every call on to `inner` and, as each segment ends, applies XNNPACK
// 2022-02's fusion rule to the subgraph defined, noting "fused <producer call>+<consumer call>" in `log`
// under the Quorum nodes of both ("fused xnn_define_convolution_2d+xnn_define_clamp").
std::unique_ptr<Sink> fusion_sink(Sink& inner, LoweringLog& log);

// A sink decorator that writes every call, with its arguments, as one text line (float data as
// its length and a hash of its bytes) to `lines` before passing it on to `inner`: the
// sink-agreement test compares the backend's and the reproducer writer's lines.
std::unique_ptr<Sink> recording_sink(Sink& inner, std::vector<std::string>& lines);

// The sink-agreement test's entry points (tests/backends/xnnpack_sinks_test.cpp): `g` lowered into
// the backend's sink (xnnpack_segment.cpp, which defines real subgraphs) and into the reproducer
// writer's sink (repro.cpp), each through recording_sink. The lines end with "refused: <reason>"
// when the lowering refuses the graph, "library error: <what>" when the library refuses a call.
std::vector<std::string> library_sink_calls(const ir::Graph& g);
std::vector<std::string> writer_sink_calls(const ir::Graph& g);

}  // namespace quorum::backends::xnnpack
