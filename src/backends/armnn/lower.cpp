// ArmNN's lowering: the builder, the operator table, what ArmNN 20.08 cannot express, and the
// whole-graph walk both sinks are driven by (see lower.h). The operator families are in
// lower_elementwise.cpp, lower_spatial.cpp and lower_tensor.cpp.
#include <algorithm>
#include <cstring>
#include <set>
#include <sstream>

#include "backends/armnn/lower_builder.h"
#include "core/error.h"

namespace quorum::backends::armnn_lower {

const char* name(Act f) {
  static const char* const names[] = {"ReLu", "BoundedReLu", "Sigmoid", "TanH", "SoftReLu",
                                      "Square", "HardSwish", "LeakyReLu", "Elu", "Linear"};
  return names[static_cast<int>(f)];
}
const char* name(UnaryOp op) {
  static const char* const names[] = {"Abs", "Exp", "Sqrt", "Rsqrt", "Neg"};
  return names[static_cast<int>(op)];
}
const char* name(BinaryOp op) {
  static const char* const names[] = {"Addition", "Subtraction", "Multiplication", "Division", "Maximum", "Minimum"};
  return names[static_cast<int>(op)];
}
const char* name(ConvKind k) {
  static const char* const names[] = {"Convolution2d", "DepthwiseConvolution2d", "TransposeConvolution2d"};
  return names[static_cast<int>(k)];
}
const char* name(DataType t) {
  static const char* const names[] = {"Float32", "QAsymmU8", "QAsymmS8", "Signed32"};
  return names[static_cast<int>(t)];
}

std::string describe(const Quant& q) {
  if (q.type == DataType::Float32) return "";
  std::ostringstream o;
  o.precision(9);
  o << " " << name(q.type) << "(" << q.scale << "," << q.offset << ")";
  return o.str();
}

// ---- describe (the recorded form of a call) ------------------------------------------------------

namespace {

template <class T>
std::string list(const std::vector<T>& v) {
  std::ostringstream o;
  o << '[';
  for (size_t i = 0; i < v.size(); ++i) o << (i ? "," : "") << v[i];
  o << ']';
  return o.str();
}

std::string weights(const Weights& w) {
  // Exact bits, summed: two sinks given different data differ here.
  uint64_t sum = 0;
  for (float f : w.data) {
    uint32_t bits = 0;
    std::memcpy(&bits, &f, sizeof bits);
    sum = sum * 31 + bits;
  }
  if (w.q.type == DataType::Float32)
    return w.hint + list(w.shape) + "#" + std::to_string(w.data.size()) + ":" + std::to_string(sum);
  for (int32_t v : w.ints) sum = sum * 31 + static_cast<uint32_t>(v);
  return w.hint + list(w.shape) + describe(w.q) + "#" + std::to_string(w.ints.size()) + ":" + std::to_string(sum);
}

std::string geometry(const Geometry& g) {
  return "stride " + std::to_string(g.stride_y) + "," + std::to_string(g.stride_x) + " pad " +
         std::to_string(g.pad_top) + "," + std::to_string(g.pad_left) + "," + std::to_string(g.pad_bottom) + "," +
         std::to_string(g.pad_right);
}

struct Describe {
  std::string operator()(const ConstantLayer& l) const { return "Constant " + weights(l.w); }
  std::string operator()(const ReshapeLayer& l) const { return "Reshape " + list(l.shape); }
  std::string operator()(const TransposeLayer& l) const { return "Transpose " + list(l.perm); }
  std::string operator()(const ActivationLayer& l) const {
    return std::string("Activation ") + name(l.f) + " " + std::to_string(l.a) + " " + std::to_string(l.b);
  }
  std::string operator()(const UnaryLayer& l) const { return std::string("ElementwiseUnary ") + name(l.op); }
  std::string operator()(const BinaryLayer& l) const { return name(l.op); }
  std::string operator()(const MeanLayer& l) const { return "Mean " + list(l.axes) + (l.keep_dims ? " keep" : ""); }
  std::string operator()(const SliceLayer& l) const { return "Slice " + list(l.begin) + " " + list(l.size); }
  std::string operator()(const StridedSliceLayer& l) const {
    return "StridedSlice " + list(l.begin) + " " + list(l.end) + " " + list(l.stride) + " mask " +
           std::to_string(l.end_mask);
  }
  std::string operator()(const ConcatLayer& l) const {
    std::string s = "Concat axis " + std::to_string(l.axis);
    for (const Shape& sh : l.shapes) s += " " + list(sh);
    return s;
  }
  std::string operator()(const PadLayer& l) const {
    return "Pad " + list(l.begin) + " " + list(l.end) + " " + std::to_string(l.value);
  }
  std::string operator()(const FullyConnectedLayer& l) const {
    return "FullyConnected " + weights(l.w) + (l.bias ? " bias " + weights(*l.bias) : "");
  }
  std::string operator()(const SoftmaxLayer& l) const {
    return std::string(l.log ? "LogSoftmax" : "Softmax") + " axis " + std::to_string(l.axis) +
           (l.beta ? " beta 1" : "");
  }
  std::string operator()(const ConvLayer& l) const {
    return std::string(name(l.kind)) + " " + geometry(l.geometry) + " dilation " + std::to_string(l.dilation_y) + "," +
           std::to_string(l.dilation_x) + (l.bias_enabled ? " bias" : "") + " " + weights(l.w) +
           (l.bias ? " " + weights(*l.bias) : "");
  }
  std::string operator()(const PoolLayer& l) const {
    std::string s = std::string("Pooling2d ") + (l.max ? "Max " : "Average ") + std::to_string(l.height) + "x" +
                    std::to_string(l.width);
    if (l.full)
      s += " " + geometry(l.full->geometry) + (l.full->ceil ? " ceil" : " floor") +
           (l.full->ignore_value ? " IgnoreValue" : " Exclude");
    return s;
  }
  std::string operator()(const BatchNormLayer& l) const {
    return "BatchNormalization eps " + std::to_string(l.eps) + " " + weights(l.mean) + " " + weights(l.var) + " " +
           weights(l.beta) + " " + weights(l.gamma);
  }
  std::string operator()(const LrnLayer& l) const {
    return "Normalization " + std::to_string(l.size) + " " + std::to_string(l.alpha) + " " + std::to_string(l.beta) +
           " " + std::to_string(l.k);
  }
  std::string operator()(const QuantizeLayer&) const { return "Quantize"; }
  std::string operator()(const DequantizeLayer&) const { return "Dequantize"; }
  std::string operator()(const ResizeLayer& l) const {
    return std::string("Resize ") + (l.bilinear ? "Bilinear " : "NearestNeighbor ") + std::to_string(l.height) + "x" +
           std::to_string(l.width) + (l.half_pixel ? " half_pixel" : "") + (l.align_corners ? " align_corners" : "");
  }
};

}  // namespace

std::string describe(const Layer& l) { return std::visit(Describe{}, l); }

int RecordingSink::input(size_t index, const std::string& name, const Shape& shape, const Quant& q) {
  const int id = inner_.input(index, name, shape, q);
  calls_.push_back("input " + std::to_string(index) + " '" + name + "' " + list(shape) + describe(q) + " -> " +
                   std::to_string(id));
  return id;
}

int RecordingSink::layer(const Layer& layer, const std::vector<Value>& inputs, const Shape& out, const Quant& q,
                         const std::string& name) {
  const int id = inner_.layer(layer, inputs, out, q, name);
  std::string ins;
  for (const Value& v : inputs) ins += (ins.empty() ? "" : ",") + std::to_string(v.id);
  calls_.push_back(describe(layer) + " '" + name + "' (" + ins + ") " + list(out) + describe(q) + " -> " +
                   std::to_string(id));
  return id;
}

void RecordingSink::output(size_t index, const std::string& name, const Value& v) {
  inner_.output(index, name, v);
  calls_.push_back("output " + std::to_string(index) + " '" + name + "' <- " + std::to_string(v.id));
}

// ---- the builder ---------------------------------------------------------------------------------

Value Builder::value(const std::string& name) {
  auto it = values_.find(name);
  if (it != values_.end()) return it->second;
  if (!g_.is_initializer(name))
    throw ConversionError("ArmNN lowering: value '" + name + "' is not defined before its use");
  const core::Tensor& t = g_.initializers.at(name);
  // A quantized constant holds its integers (read through a view with its consumer's scale and offset).
  const Value v = core::is_quantized(t.dtype())
                      ? add(ConstantLayer{weights(name, elements(name), t.shape(), Quant{data_type(t.dtype()), 1, 0})},
                            {}, t.shape(), Quant{data_type(t.dtype()), 1, 0}, "const")
                      : constant(floats(name), t.shape(), name);
  values_[name] = v;
  return v;
}

void Builder::define(const std::string& name, const Value& v) {
  values_[name] = v;
  sink_.defined(name, v);
}

std::vector<float> Builder::floats(const std::string& initializer) const {
  const auto it = g_.initializers.find(initializer);
  if (it == g_.initializers.end())
    throw ConversionError("ArmNN takes weights as constants when it builds the network: '" + initializer +
                          "' is a graph input or computed");
  const core::Tensor& t = it->second;
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = static_cast<float>(t.get(i));
  return out;
}

std::vector<double> Builder::elements(const std::string& initializer) const {
  const auto it = g_.initializers.find(initializer);
  if (it == g_.initializers.end())
    throw ConversionError("ArmNN takes weights as constants when it builds the network: '" + initializer +
                          "' is a graph input or computed");
  std::vector<double> out(static_cast<size_t>(it->second.numel()));
  for (int64_t i = 0; i < it->second.numel(); ++i) out[static_cast<size_t>(i)] = it->second.get(i);
  return out;
}

Weights Builder::weights(const std::string& hint, const std::vector<double>& data, const Shape& shape,
                         const Quant& q) const {
  Weights w{hint, {}, shape, q, {}};
  for (double v : data) {
    if (q.type == DataType::Float32) w.data.push_back(static_cast<float>(v));
    else w.ints.push_back(static_cast<int32_t>(v));
  }
  return w;
}

void Builder::set_node(const ir::Node& n) {
  node_ = n.name;
  sink_.node(n);
}

Value Builder::add(const Layer& layer, const std::vector<Value>& inputs, const Shape& out, const std::string& what,
                   const std::string& detail) {
  return add(layer, inputs, out, Quant{}, what, detail);
}

Value Builder::add(const Layer& layer, const std::vector<Value>& inputs, const Shape& out, const Quant& q,
                   const std::string& what, const std::string& detail) {
  log_.note(node_, detail.empty() ? what : what + " " + detail);
  const std::string name = node_ + "/" + what + "#" + std::to_string(counter_++);
  return Value{sink_.layer(layer, inputs, out, q, name), out, q};
}

Value Builder::constant(const std::vector<float>& data, const Shape& shape, const std::string& hint) {
  return add(ConstantLayer{Weights{hint, data, shape}}, {}, shape, "const");
}

Value Builder::scalar_like(float v, size_t rank) {
  return constant({v}, Shape(std::max<size_t>(rank, 1), 1), "scalar");
}

namespace {
Shape armnn_dims(const Shape& s) { return s.empty() ? Shape{1} : s; }
}  // namespace

Value Builder::reshape(const Value& x, const Shape& shape) { return reshape(x, shape, x.q); }

Value Builder::reshape(const Value& x, const Shape& shape, const Quant& q) {
  const Value v = as_quant(x, q);
  if (armnn_dims(v.shape) == armnn_dims(shape)) return Value{v.id, shape, q};
  return add(ReshapeLayer{shape}, {v}, shape, q, "reshape");
}

Value Builder::as_quant(const Value& x, const Quant& q) {
  if (x.q == q) return x;
  // A Slice of the whole tensor, not a Reshape: Optimize's SquashEqualReshapeSiblings takes two Reshapes of
  // one value to the same shape as equal whatever their output TensorInfos (measured: two dequantize_linear
  // nodes reading one value with different scales both got the second's), and OptimizeConsecutiveReshapes
  // drops a Reshape pair that restores the shape.
  const Shape dims = armnn_dims(x.shape);
  return Value{add(SliceLayer{Ints(dims.size(), 0), dims}, {x}, dims, q, "view").id, x.shape, q};
}

Value Builder::transpose(const Value& x, const std::vector<size_t>& perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == i;
  if (identity) return x;
  Shape out;
  for (size_t p : perm) out.push_back(x.shape[p]);
  return add(TransposeLayer{perm}, {x}, out, x.q, "transpose");
}

Value Builder::activation(const Value& x, Act f, float a, float b, const Quant& q) {
  return add(ActivationLayer{f, a, b}, {x}, x.shape, q, "activation", name(f));
}

Value Builder::unary(const Value& x, UnaryOp op) { return add(UnaryLayer{op}, {x}, x.shape, "unary", name(op)); }

Value Builder::binary(BinaryOp op, const Value& a, const Value& b, const Quant& q) {
  const size_t rank = std::max<size_t>({a.shape.size(), b.shape.size(), 1});
  auto padded = [&](const Value& v) {
    Shape s(rank - v.shape.size(), 1);
    s.insert(s.end(), v.shape.begin(), v.shape.end());
    return reshape(v, s);
  };
  const Value pa = padded(a), pb = padded(b);
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) out[i] = pa.shape[i] == 1 ? pb.shape[i] : pa.shape[i];
  static const char* const whats[] = {"add", "sub", "mul", "div", "max", "min"};
  return add(BinaryLayer{op}, {pa, pb}, out, q, whats[static_cast<int>(op)]);
}

Value Builder::mean(const Value& x, const std::vector<size_t>& axes, bool keep_dims) {
  Shape out;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    const bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!reduced) out.push_back(x.shape[d]);
    else if (keep_dims) out.push_back(1);
  }
  return add(MeanLayer{axes, keep_dims}, {x}, out, "mean");
}

Value Builder::slice(const Value& x, const Ints& begin, const Shape& size) {
  return add(SliceLayer{begin, size}, {x}, size, x.q, "slice");
}

Value Builder::concat(const std::vector<Value>& parts, size_t axis) {
  if (parts.size() == 1) return parts[0];
  return concat(parts, axis, parts[0].q);
}

Value Builder::concat(const std::vector<Value>& parts, size_t axis, const Quant& q) {
  ConcatLayer l{{}, axis};
  for (const Value& p : parts) l.shapes.push_back(armnn_dims(p.shape));
  Shape out = parts[0].shape;
  out[axis] = 0;
  for (const Value& p : parts) out[axis] += p.shape[axis];
  return add(l, parts, out, q, "concat");
}

Value Builder::pad(const Value& x, const Ints& begin, const Ints& end, float value) {
  Shape out = x.shape;
  for (size_t d = 0; d < x.shape.size(); ++d) out[d] += begin[d] + end[d];
  return add(PadLayer{begin, end, value}, {x}, out, "pad");
}

Support layer_budget(const ir::Node& n, int64_t layers, const std::string& what) {
  if (layers <= kMaxLayersPerNode) return Support::yes();
  return Support::no(n.op + " " + what + " takes " + std::to_string(layers) +
                     " ArmNN layers; the optimizer's time grows faster than the square of the layer count (2.2 s "
                     "for 5 040 layers), so more than " +
                     std::to_string(kMaxLayersPerNode) + " per node are not built");
}

const Shape& in_shape(const ir::Graph& g, const ir::Node& n, size_t i) { return g.types.at(n.inputs.at(i)).shape; }
const Shape& out_shape(const ir::Graph& g, const ir::Node& n, size_t i) { return g.types.at(n.outputs.at(i)).shape; }
float attr_float(const ir::Node& n, const char* attr) { return static_cast<float>(core::attr_f(n.attrs, attr)); }

std::string str(const Ints& v) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << ']';
  return os.str();
}

// ---- the operator table and the graph walk -------------------------------------------------------

const OpTable& op_table() {
  static const OpTable table = [] {
    OpTable t;
    register_elementwise(t);
    register_spatial(t);
    register_tensor(t);
    register_quant(t);
    return t;
  }();
  return table;
}

namespace {

// ArmNN 20.08 tensors have at most 5 dimensions, and many layers assert (abort, in Debian's build)
// on more than 4: rank 5 is allowed only where the mapping was checked to reshape it to rank <= 4.
size_t max_rank(const std::string& op) {
  // qlinear_global_avg_pool: its input is reshaped to [N, C, 1, cells] (build_global_pool).
  static const std::set<std::string> five_d = {"reshape",         "flatten",         "squeeze",
                                               "unsqueeze",       "batch_norm",      "global_avg_pool",
                                               "global_max_pool", "qlinear_global_avg_pool"};
  return five_d.count(op) ? 5 : 4;
}

}  // namespace

Support supports(const ir::Graph& g, const ir::Node& n) {
  const auto it = op_table().find(n.op);
  if (it == op_table().end())
    return Support::no("ArmNN 20.08 has no layer (or exact layer composition) for '" + n.op + "'");
  // Weights become ConstTensors of the layers.
  if (Support w = constant_weights(g, n, "ArmNN"); !w.ok) return w;
  for (const auto* names : {&n.inputs, &n.outputs})
    for (const auto& v : *names) {
      const core::TensorType& t = g.types.at(v);
      // The quantized operators' int8/uint8 values and int32 biases (lower_quant.cpp).
      const bool quantized = is_quant_op(n.op) && (core::is_quantized(t.dtype) || t.dtype == core::DType::I32);
      if (!core::is_float(t.dtype) && !quantized)
        return Support::no("this backend maps float32 tensors only; value '" + v + "' is " + core::to_string(t.dtype));
      if (t.shape.size() > max_rank(n.op))
        return Support::no("ArmNN 20.08 maps rank <= " + std::to_string(max_rank(n.op)) + " for '" + n.op +
                           "' (its layers assert on more); value '" + v + "' has rank " +
                           std::to_string(t.shape.size()));
    }
  return it->second.supports ? it->second.supports(g, n) : Support::yes();
}

Lowered lower(LayerSink& sink, const ir::Graph& g, bool outputs_only) {
  for (const auto& n : g.nodes) {
    const Support s = supports(g, n);
    if (!s.ok) throw ConversionError("node '" + n.name + "' (" + n.op + "): " + s.reason);
  }
  Builder b(sink, g);
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const auto& in = g.inputs[i];
    // A quantized input holds its integers (scale 1, offset 0): each consumer reads it through a view.
    const Quant q = core::is_quantized(in.type.dtype) ? Quant{data_type(in.type.dtype), 1, 0} : Quant{};
    b.define(in.name, Value{sink.input(i, in.name, in.type.shape, q), in.type.shape, q});
  }
  for (const auto& n : g.nodes) {
    b.set_node(n);
    op_table().at(n.op).build(b, n);
  }
  // Every node output (so forward can return intermediates), or the graph's outputs only: an output layer
  // keeps the layer it reads alive, so ArmNN's optimizer merges and drops only layers nothing binds
  // (lower_passes.h).
  std::vector<std::string> bound;
  if (outputs_only) {
    for (const auto& o : g.outputs)
      if (std::find(bound.begin(), bound.end(), o) == bound.end()) bound.push_back(o);
  } else {
    for (const auto& n : g.nodes) bound.insert(bound.end(), n.outputs.begin(), n.outputs.end());
  }
  Lowered out;
  for (const auto& o : bound) {
    const int64_t id = static_cast<int64_t>(out.outputs.size());
    const Value v = b.value(o);
    sink.output(static_cast<size_t>(id), o, v);
    out.outputs.push_back({o, id, g.types.at(o).shape, v.q});
  }
  out.log = b.log();
  return out;
}

}  // namespace quorum::backends::armnn_lower
