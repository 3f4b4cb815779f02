// ArmNN lowering, the quantized operators on ArmNN 20.08 layers: quantize_linear (Quantize: float32 to
// QAsymmU8/QAsymmS8 with the TensorInfo's scale and offset), dequantize_linear (Dequantize),
// qlinear_matmul (FullyConnected with constant weights) and qlinear_conv2d (Convolution2d, with conv2d
// in lower_spatial.cpp), and the quantized twins of src/ops/qlinear.cpp on their float operators' layers with
// quantized TensorInfos: qlinear_add and qlinear_mul (Addition, Multiplication), qlinear_concat (Concat),
// qlinear_leaky_relu and qlinear_sigmoid (Activation LeakyReLu, Sigmoid); qlinear_avg_pool2d,
// qlinear_global_avg_pool (Pooling2d Average) and qlinear_max_pool2d (Pooling2d Max) are with the float pooling in
// lower_spatial.cpp. ArmNN holds one
// scale and offset per tensor where ONNX gives each consumer its own: a consumer reads a quantized value
// through a view (Builder::as_quant, a Slice of the whole tensor whose output TensorInfo carries the consumer's
// parameters; CpuRef's Slice copies the bytes).
//
// What CpuRef takes, measured with ILayerSupport on Debian's libarmnn22: Convolution2d and
// DepthwiseConvolution2d take any of QAsymmU8, QAsymmS8, QSymmS8 weights with a QAsymmU8 or QAsymmS8
// input, but only an output of the input's type; FullyConnected needs input, weights and output of one
// type (QAsymmU8 or QAsymmS8). CpuRef computes these in float32: each operand dequantized
// ((q - offset) * scale), products summed in float32, the bias as float(int32) * bias scale, and the sum
// quantized by armnn::Quantize (round(v / scale) + offset, saturated: std::round, ties away from zero).
// Addition, Multiplication, Concat, Activation and Pooling2d take QAsymmS8 and QAsymmU8 inputs and output
// (IsAdditionSupported, ..., IsPooling2dSupported: every input with its own scale and offset, Pooling2d with
// either padding method and rounding), and compute the same way: every input element dequantized with its
// tensor's scale and offset, the float operator in float32, the result quantized by armnn::Quantize. Concat
// too: parts with different scales are requantized to the output's (measured: two uint8 parts (scale 0.5,
// offset 3) and (0.25, 1) into (0.125, 2) give the requantized values, not the parts' bytes).
#include <limits>
#include <set>

#include "backends/armnn/lower_builder.h"
#include "core/error.h"
#include "ops/quant_util.h"

namespace quorum::backends::armnn_lower {

bool is_quant_op(const std::string& op) {
  static const std::set<std::string> ops = {
      "quantize_linear",    "dequantize_linear",       "qlinear_conv2d", "qlinear_matmul",     "qlinear_add",
      "qlinear_mul",        "qlinear_avg_pool2d",      "qlinear_concat", "qlinear_leaky_relu", "qlinear_sigmoid",
      "qlinear_global_avg_pool", "qlinear_max_pool2d"};
  return ops.count(op) > 0;
}

DataType data_type(core::DType t) {
  if (t == core::DType::I8) return DataType::QAsymmS8;
  if (t == core::DType::U8) return DataType::QAsymmU8;
  throw ConversionError("ArmNN lowering: " + core::to_string(t) + " is not a quantized type");
}

namespace {

// The scale <prefix>scale (as the float32 ArmNN's TensorInfo holds) and zero point <prefix>zero_point.
Quant quant(const ir::Node& n, const std::string& prefix, core::DType type) {
  return Quant{data_type(type), static_cast<float>(ops::quant_scale(n.attrs, prefix + "scale")),
               static_cast<int32_t>(core::attr_i(n.attrs, prefix + "zero_point"))};
}

const char* x_prefix(const ir::Node& n) { return n.op == "qlinear_matmul" ? "a_" : "x_"; }

}  // namespace

ProductQuant product_quant(const ir::Graph& g, const ir::Node& n) {
  ProductQuant q;
  q.x = quant(n, x_prefix(n), g.types.at(n.inputs[0]).dtype);
  q.w = quant(n, "w_", ops::quant_dtype(n.attrs, "w_type"));
  q.y = quant(n, "y_", ops::quant_dtype(n.attrs, "to"));
  q.bias = Quant{DataType::Signed32, q.x.scale * q.w.scale, 0};
  return q;
}

Support product_supports(const ir::Graph& g, const ir::Node& n) {
  if (ops::per_channel_weight(n.attrs))
    return Support::no("per-channel weight scales (w_scales) are not lowered to ArmNN (its per-axis weight "
                       "quantization is not wired here)");
  const core::DType x = g.types.at(n.inputs[0]).dtype, w = ops::quant_dtype(n.attrs, "w_type"),
                    y = ops::quant_dtype(n.attrs, "to");
  const bool conv = n.op == "qlinear_conv2d";
  const std::string layer = conv ? "Convolution2d" : "FullyConnected";
  const std::string says = conv ? "Reference Convolution2d" : "Reference Fully Connected";
  if (y != x)
    return Support::no("ArmNN 20.08 CpuRef's " + layer + " takes only an output of the input's type (" +
                       core::to_string(x) + " input, " + core::to_string(y) + " output; Is" + layer + "Supported: \"" +
                       says + ": input and output types mismatched.\")");
  if (!conv && w != x)
    return Support::no("ArmNN 20.08 CpuRef's FullyConnected takes only weights of the input's type (" +
                       core::to_string(x) + " input, " + core::to_string(w) +
                       " weights; IsFullyConnectedSupported: \"Reference Fully Connected: input and weights types "
                       "mismatched.\")");
  return Support::yes();
}

TwinQuant twin_quant(const ir::Node& n) {
  const DataType t = data_type(ops::quant_dtype(n.attrs, "to"));
  const std::vector<double>& scales = core::attr_floats(n.attrs, "x_scales");
  const std::vector<int64_t>& zps = core::attr_ints(n.attrs, "x_zero_points");
  TwinQuant q;
  for (size_t i = 0; i < scales.size(); ++i)
    q.x.push_back(Quant{t, static_cast<float>(scales[i]), static_cast<int32_t>(zps.at(i))});
  q.y = Quant{t, static_cast<float>(ops::quant_scale(n.attrs, "y_scale")),
              static_cast<int32_t>(core::attr_i(n.attrs, "y_zero_point"))};
  return q;
}

void note_float32_range(Builder& b, const ProductQuant& q, int64_t terms) {
  const double xs = q.x.scale, ws = q.w.scale, big = std::numeric_limits<float>::max();
  if (255 * xs > big || 255 * ws > big || 255.0 * 255.0 * xs * ws * static_cast<double>(terms) > big)
    b.note("float32 range (dequantized operands overflow)");
  if (xs * ws < std::numeric_limits<float>::min()) b.note("float32 range (dequantized products underflow)");
}

namespace {

void build_quantize(Builder& b, const ir::Node& n) {
  const Value x = b.value(n.inputs[0]);
  const Quant q = quant(n, "", ops::quant_dtype(n.attrs, "to"));
  b.define(n.outputs[0], b.add(QuantizeLayer{}, {x}, x.shape, q, "quantize"));
}

void build_dequantize(Builder& b, const ir::Node& n) {
  const Value x = b.value(n.inputs[0]);
  const Value xq = b.as_quant(x, quant(n, "", b.graph().types.at(n.inputs[0]).dtype));
  b.define(n.outputs[0], b.add(DequantizeLayer{}, {xq}, x.shape, "dequantize"));
}

// y [..., M, N] = x [..., M, K] w [K, N]: the input flattened to rows [R, K] (as ArmNN's FullyConnected
// flattens a higher-rank input) and read with a_scale / a_zero_point, the weights transposed to ArmNN's
// [N, K] (m_TransposeWeightMatrix), no bias, the rows reshaped back.
void build_qlinear_matmul(Builder& b, const ir::Node& n) {
  const ir::Graph& g = b.graph();
  const ProductQuant q = product_quant(g, n);
  const Value x = b.value(n.inputs[0]);
  const Shape& ws = g.types.at(n.inputs[1]).shape;  // [K, N]
  const int64_t K = ws[0], N = ws[1], rows = core::numel(x.shape) / std::max<int64_t>(K, 1);
  const std::vector<double> w = b.elements(n.inputs[1]);
  std::vector<double> wt(w.size());
  for (int64_t k = 0; k < K; ++k)
    for (int64_t u = 0; u < N; ++u) wt[static_cast<size_t>(u * K + k)] = w[static_cast<size_t>(k * N + u)];
  b.comment("weights transposed from ONNX [K, N] to ArmNN's [N, K] (m_TransposeWeightMatrix)");
  note_float32_range(b, q, K);
  const Value xr = b.reshape(x, Shape{rows, K}, q.x);
  const Value y = b.add(FullyConnectedLayer{b.weights(n.inputs[1], wt, Shape{N, K}, q.w), std::nullopt}, {xr},
                        Shape{rows, N}, q.y, "fully_connected");
  b.define(n.outputs[0], b.reshape(y, out_shape(g, n)));
}

// Each data input read with its own scale and zero point (a view where they are not the value's own).
std::vector<Value> twin_inputs(Builder& b, const ir::Node& n, const TwinQuant& q) {
  std::vector<Value> in;
  for (size_t i = 0; i < n.inputs.size(); ++i) in.push_back(b.as_quant(b.value(n.inputs[i]), q.x.at(i)));
  return in;
}

// qlinear_add, qlinear_mul: the broadcasting Addition / Multiplication with a quantized output.
void build_qlinear_binary(Builder& b, const ir::Node& n) {
  const TwinQuant q = twin_quant(n);
  const std::vector<Value> in = twin_inputs(b, n, q);
  const BinaryOp op = n.op == "qlinear_add" ? BinaryOp::Addition : BinaryOp::Multiplication;
  b.define(n.outputs[0], b.binary(op, in[0], in[1], q.y));
}

void build_qlinear_concat(Builder& b, const ir::Node& n) {
  const TwinQuant q = twin_quant(n);
  const std::vector<Value> in = twin_inputs(b, n, q);
  const size_t axis = ops::norm_axis(core::attr_i(n.attrs, "axis"), in[0].shape.size());
  b.define(n.outputs[0], b.concat(in, axis, q.y));
}

void build_qlinear_activation(Builder& b, const ir::Node& n) {
  const TwinQuant q = twin_quant(n);
  const Value x = twin_inputs(b, n, q)[0];
  const Value y = n.op == "qlinear_sigmoid"
                      ? b.activation(x, Act::Sigmoid, 0, 0, q.y)
                      : b.activation(x, Act::LeakyReLu, attr_float(n, "alpha"), 0, q.y);
  b.define(n.outputs[0], y);
}

// Per-axis quantize_linear / dequantize_linear (scales along axis): ArmNN 20.08's TensorInfo holds per-axis scales
// (SetQuantizationScales, SetQuantizationDim) but one offset, and its reference Quantize / Dequantize read a
// QAsymmU8/QAsymmS8 tensor with one scale and offset (per-axis decoding is QSymmS8's, for weights): not lowered.
Support per_axis_supports(const ir::Graph&, const ir::Node& n) {
  if (ops::per_channel_weight(n.attrs, ""))
    return Support::no("per-axis scales (scales along axis): ArmNN 20.08's Quantize and Dequantize take a "
                       "QAsymmU8/QAsymmS8 TensorInfo's one scale and offset (per-axis TensorInfos are QSymmS8 "
                       "weights', without offsets)");
  return Support::yes();
}

}  // namespace

void register_quant(OpTable& t) {
  t["qlinear_add"] = OpEntry{{}, build_qlinear_binary};
  t["qlinear_mul"] = OpEntry{{}, build_qlinear_binary};
  t["qlinear_concat"] = OpEntry{{}, build_qlinear_concat};
  t["qlinear_leaky_relu"] = OpEntry{{}, build_qlinear_activation};
  t["qlinear_sigmoid"] = OpEntry{{}, build_qlinear_activation};
  t["quantize_linear"] = OpEntry{per_axis_supports, build_quantize};
  t["dequantize_linear"] = OpEntry{per_axis_supports, build_dequantize};
  t["qlinear_matmul"] = OpEntry{product_supports, build_qlinear_matmul};
}

}  // namespace quorum::backends::armnn_lower
