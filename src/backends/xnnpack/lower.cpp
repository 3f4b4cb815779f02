// The XNNPACK lowering's frame: the support rules every node shares, the segment logic, the op
// table of the families (lower_conv_pool.cpp, lower_elementwise.cpp, lower_shape.cpp) and the
// recording sink. No XNNPACK header: this is built with quorum_backends, for the backend and the
// reproducer writer alike.
#include <sstream>

#include "backends/repro.h"
#include "backends/xnnpack/lower_ops.h"

namespace quorum::backends::xnnpack {

Dims xnn_dims(const Shape& logical, Layout layout) {
  if (logical.empty()) return {1};  // rank 0: one element
  Dims d(logical.begin(), logical.end());
  if (layout == Layout::Plain) return d;
  if (logical.size() == 3) return {d[0], 1, d[2], d[1]};
  return {d[0], d[2], d[3], d[1]};
}

std::vector<float> f32_values(const core::Tensor& t) {
  const core::Tensor f = t.to(core::DType::F32);
  return std::vector<float>(f.f32(), f.f32() + f.numel());
}

std::vector<int32_t> int_values(const core::Tensor& t) {
  std::vector<int32_t> v;
  v.reserve(static_cast<size_t>(t.numel()));
  for (double x : t.values()) v.push_back(static_cast<int32_t>(x));
  return v;
}

std::vector<float> to_channels_last(const core::Tensor& t) {
  const std::vector<float> in = f32_values(t);
  const Shape& x = t.shape();
  const size_t n = static_cast<size_t>(x[0]), c = static_cast<size_t>(x[1]), s = prod(x, 2, x.size());
  std::vector<float> out(in.size());
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < c; ++j)
      for (size_t k = 0; k < s; ++k) out[(i * s + k) * c + j] = in[(i * c + j) * s + k];
  return out;
}

size_t prod(const Shape& s, size_t from, size_t to) {
  size_t p = 1;
  for (size_t i = from; i < to; ++i) p *= static_cast<size_t>(s[i]);
  return p;
}

std::string flag_names(uint32_t flags) {
  std::string s;
  for (const auto& [bit, name] :
       {std::pair{kTensorflowSamePadding, "XNN_FLAG_TENSORFLOW_SAME_PADDING"},
        std::pair{kTransposeWeights, "XNN_FLAG_TRANSPOSE_WEIGHTS"}, std::pair{kAlignCorners, "XNN_FLAG_ALIGN_CORNERS"},
        std::pair{kTensorflowLegacyMode, "XNN_FLAG_TENSORFLOW_LEGACY_MODE"}})
    if (flags & bit) s += (s.empty() ? "" : " | ") + std::string(name);
  return s.empty() ? "0" : s;
}

// Indexed by the enumerators, in their order.
const char* call_name(Unary op) {
  static const char* const names[] = {"xnn_define_abs",       "xnn_define_negate", "xnn_define_sigmoid",
                                      "xnn_define_hardswish", "xnn_define_square", "xnn_define_square_root"};
  return names[static_cast<size_t>(op)];
}

const char* call_name(Arithmetic op) {
  static const char* const names[] = {"xnn_define_add2", "xnn_define_subtract", "xnn_define_multiply2",
                                      "xnn_define_divide"};
  return names[static_cast<size_t>(op)];
}

const char* call_name(Binary op) {
  static const char* const names[] = {"xnn_define_maximum2", "xnn_define_minimum2", "xnn_define_squared_difference"};
  return names[static_cast<size_t>(op)];
}

bool Quant::operator<(const Quant& o) const {
  if (type != o.type) return type < o.type;
  if (!quantized()) return false;
  return scale != o.scale ? scale < o.scale : zero_point < o.zero_point;
}

const char* datatype_name(QType t) {
  static const char* const names[] = {"xnn_datatype_fp32", "xnn_datatype_qint8", "xnn_datatype_quint8",
                                      "xnn_datatype_qint32"};
  return names[static_cast<size_t>(t)];
}

std::string quant_text(const Quant& q) {
  if (!q.quantized()) return "fp32";
  return std::string(datatype_name(q.type) + 13) + " scale " + c_literal(q.scale, true) + " zero point " +
         std::to_string(q.zero_point);
}

core::DType host_dtype(QType t) {
  static const core::DType types[] = {core::DType::F32, core::DType::I8, core::DType::U8, core::DType::I32};
  return types[static_cast<size_t>(t)];
}

// ---- segments ----

void Segments::close() {
  if (!open_) return;
  open_ = false;
  sink_.end_subgraph(inputs_, outputs_);
  inputs_.clear();
  outputs_.clear();
  produced_.clear();
  ids_.clear();
  next_ = 0;
}

void Segments::begin_node(const ir::Node& n, Layout l) {
  if (!open_) {
    open_ = true;
    sink_.begin_subgraph();
  }
  sink_.begin_node(n, l);
}

std::optional<std::pair<Layout, Quant>> Segments::in_segment(const std::string& value) const {
  const auto it = produced_.find(value);
  if (it == produced_.end()) return std::nullopt;
  return it->second;
}

std::optional<Layout> Segments::layout_in_segment(const std::string& value) const {
  const auto it = produced_.find(value);
  if (it == produced_.end()) return std::nullopt;
  return it->second.first;
}

ValueId Segments::value(const std::string& name, Layout l, const Quant& q) {
  const auto key = std::make_tuple(name, l, q);
  if (const auto it = ids_.find(key); it != ids_.end()) return it->second;
  if (produced_.count(name))
    throw std::logic_error("value '" + name + "' is wanted in a layout or datatype its producer did not write");
  const Shape& shape = g_.types.at(name).shape;
  const ValueId id = next_++;
  if (g_.is_initializer(name)) {
    const core::Tensor& w = g_.initializers.at(name);
    if (q.quantized()) {
      if (l != Layout::Plain) throw std::logic_error("quantized initializer '" + name + "' wanted channels-last");
      sink_.quantized_static(id, xnn_dims(shape, l), int_values(w), q, "weight '" + name + "'");
    } else {
      sink_.weight_value(id, name, l, xnn_dims(shape, l), l == Layout::Plain ? f32_values(w) : to_channels_last(w));
    }
  } else {
    sink_.external_input(id, name, l, xnn_dims(shape, l), static_cast<uint32_t>(inputs_.size() + outputs_.size()), q);
    inputs_.push_back({name, l, id, shape, q});
  }
  ids_[key] = id;
  return id;
}

ValueId Segments::define_output(const std::string& name, Layout l, const Quant& q) {
  const ValueId id = next_++;
  const Shape& shape = g_.types.at(name).shape;
  if (exposed_ && !exposed_->count(name)) {
    sink_.internal_value(id, xnn_dims(shape, l), q);  // only this segment reads it: XNNPACK may fuse through it
  } else {
    sink_.external_output(id, name, l, xnn_dims(shape, l), static_cast<uint32_t>(inputs_.size() + outputs_.size()),
                          q);
    outputs_.push_back({name, l, id, shape, q});
  }
  produced_[name] = {l, q};
  ids_[{name, l, q}] = id;
  return id;
}

ValueId Segments::internal(const Dims& dims, const Quant& q) {
  const ValueId id = next_++;
  sink_.internal_value(id, dims, q);
  return id;
}

ValueId Segments::constant(std::vector<float> data, const Dims& dims, const std::string& what) {
  const ValueId id = next_++;
  sink_.static_value(id, dims, std::move(data), what);
  return id;
}

ValueId Segments::quantized_constant(std::vector<int32_t> data, const Dims& dims, const Quant& q,
                                     const std::string& what) {
  const ValueId id = next_++;
  sink_.quantized_static(id, dims, std::move(data), q, what);
  return id;
}

ValueId NodeLowering::scalar(float v) { return constant({v}, {1}, "scalar " + c_literal(v, true)); }

ValueId NodeLowering::reshape(ValueId id, const Dims& dims) {
  const ValueId out = temp(dims);
  sink.static_reshape(dims, id, out);
  return out;
}

// ---- shared layout rules ----

Layout plain_layout(const ir::Graph&, const ir::Node&, std::optional<Layout>) { return Layout::Plain; }
Layout channels_last_layout(const ir::Graph&, const ir::Node&, std::optional<Layout>) { return Layout::ChannelsLast; }

Layout follow_layout(const ir::Graph& g, const ir::Node& n, std::optional<Layout> first) {
  if (first != Layout::ChannelsLast) return Layout::Plain;
  const size_t rank = g.types.at(n.inputs[0]).shape.size();
  for (size_t i = 0; i < ir::data_input_count(n); ++i)
    if (g.types.at(n.inputs[i]).shape.size() != rank) return Layout::Plain;
  for (const auto& o : n.outputs)
    if (g.types.at(o).shape.size() != rank) return Layout::Plain;
  return Layout::ChannelsLast;
}

// ---- support and the graph ----

namespace {

// XNN_MAX_TENSOR_DIMS in XNNPACK's private headers.
constexpr size_t kMaxRank = 6;

const OpTable& op_table() {
  static const OpTable table = [] {
    OpTable t;
    register_conv_pool(t);
    register_elementwise(t);
    register_shape(t);
    register_quantized(t);
    return t;
  }();
  return table;
}

// Why the catalogue operators without an entry in the op table have no XNNPACK 2022-02 mapping.
const std::map<std::string, std::string>& missing_reasons() {
  static const std::map<std::string, std::string> m = [] {
    std::map<std::string, std::string> r;
    for (const char* op : {"exp", "log", "gelu", "softplus", "log_softmax"})
      r[op] = std::string("XNNPACK 2022-02 has no float32 ") + (std::string(op) == "log_softmax" ? "log" : op) +
              " operator";
    r["tanh"] = "XNNPACK 2022-02 has tanh only for quantized (qs8/qu8) tensors, not float32";
    for (const char* op : {"binary_cross_entropy", "softmax_cross_entropy"})
      r[op] = "XNNPACK 2022-02 has no float32 log operator";
    r["categorical_hinge"] =
        "not mapped: XNNPACK 2022-02 has no reduction operators (only pooling) to build its masked max and sum";
    r["transpose"] = "XNNPACK 2022-02 has no transpose operator (static transpose came later)";
    r["slice"] = "XNNPACK 2022-02 has no slice operator";
    for (const char* op : {"resize_nearest", "resize_bicubic"}) r[op] = "XNNPACK 2022-02 resizes only bilinearly";
    r["reduce_prod"] = "XNNPACK 2022-02 has no product reduction";
    r["layer_norm"] = "XNNPACK 2022-02 has no normalisation operator";
    r["lrn"] = "XNNPACK 2022-02 has no cross-channel normalisation";
    for (const char* op : {"gru", "lstm", "simple_rnn"}) r[op] = "XNNPACK 2022-02 has no recurrent operators";
    return r;
  }();
  return m;
}

}  // namespace

Support supports(const ir::Graph& g, const ir::Node& n) {
  const auto it = op_table().find(n.op);
  const bool quantized_op = it != op_table().end() && it->second.quant;  // checks its own dtypes
  for (const auto& v : n.inputs) {
    const core::TensorType& t = g.types.at(v);
    if (!core::is_float(t.dtype) && !quantized_op)
      return Support::no("XNNPACK float32 operators cannot take " + core::to_string(t.dtype) + " input '" + v + "'");
    if (t.shape.size() > kMaxRank)
      return Support::no("XNNPACK tensors have at most 6 dims, '" + v + "' has " + std::to_string(t.shape.size()));
  }
  for (const auto& v : n.outputs)
    if (g.types.at(v).shape.size() > kMaxRank)
      return Support::no("XNNPACK tensors have at most 6 dims, '" + v + "' has more");
  // Filters, biases and batch_norm statistics are packed when the subgraph is defined.
  if (Support w = constant_weights(g, n, "XNNPACK"); !w.ok) return w;
  if (it == op_table().end()) {
    const auto why = missing_reasons().find(n.op);
    return Support::no(why != missing_reasons().end() ? why->second
                                                      : "XNNPACK 2022-02 has no operator for '" + n.op + "'");
  }
  return it->second.supports ? it->second.supports(g, n) : Support::yes();
}

Support lower(const ir::Graph& g, Sink& sink, const std::set<std::string>* exposed) {
  for (const auto& n : g.nodes)
    if (const Support s = supports(g, n); !s.ok)
      return Support::no("node '" + n.name + "' (" + n.op + "): " + s.reason);
  Segments segments(g, sink, exposed);
  for (const auto& n : g.nodes) {
    const OpEntry& op = op_table().at(n.op);
    if (op.host) {
      segments.close();
      op.host(g, n, sink);
      continue;
    }
    const Layout l = op.layout ? op.layout(g, n, segments.layout_in_segment(n.inputs.at(0))) : Layout::Plain;
    for (size_t i = 0; i < ir::data_input_count(n); ++i) {
      const auto have = segments.in_segment(n.inputs[i]);
      const Quant want = op.quant ? op.quant(g, n, false, i) : kFloat;
      if (have && (have->first != l || have->second != want)) {
        // The value goes through the host, where its layout changes or its integers are read under the
        // consumer's scale and zero point (an XNNPACK value has one quantization).
        segments.close();
        break;
      }
    }
    segments.begin_node(n, l);
    NodeLowering c(segments, g, n, l, op.quant);
    op.define(c);
  }
  segments.close();
  return Support::yes();
}

// ---- the recording sink ----

namespace {

std::string lit(float v) { return c_literal(v, true); }
std::string id(ValueId v) { return v == kNoValue ? "none" : "v" + std::to_string(v); }
const char* layout_name(Layout l) { return l == Layout::Plain ? "plain" : "channels-last"; }

std::string dims_text(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

// Float data as its length and a hash of its bytes (filters can be large; any changed bit shows).
std::string data_text(const std::vector<float>& v) {
  const std::string bytes(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  std::ostringstream s;
  s << v.size() << " floats #" << std::hex << core::fnv1a(bytes);
  return s.str();
}

std::string window_text(const Window2d& w) {
  return "pad " + std::to_string(w.top) + "," + std::to_string(w.right) + "," + std::to_string(w.bottom) + "," +
         std::to_string(w.left) + " kernel " + std::to_string(w.kh) + "x" + std::to_string(w.kw) + " stride " +
         std::to_string(w.sh) + "x" + std::to_string(w.sw) + " dilation " + std::to_string(w.dh) + "x" +
         std::to_string(w.dw) + " flags " + flag_names(w.flags) + (w.attribute_window ? "" : " (whole extent)");
}

std::string externals_text(const std::vector<External>& v) {
  std::string s = "[";
  for (const auto& e : v)
    s += (s.size() > 1 ? ", " : "") + id(e.id) + " '" + e.value + "' " + layout_name(e.layout) + " " +
         core::to_string(e.shape) + (e.quant.quantized() ? " " + quant_text(e.quant) : "");
  return s + "]";
}

// The recording decorator (recording_sink in lower.h).
class RecordingSink : public Sink {
 public:
  RecordingSink(Sink& inner, std::vector<std::string>& lines) : inner_(inner), lines_(lines) {}

  void begin_subgraph() override {
    log("begin_subgraph");
    inner_.begin_subgraph();
  }

  void begin_node(const ir::Node& node, Layout layout) override {
    log("begin_node '" + node.name + "' (" + node.op + ") " + layout_name(layout));
    inner_.begin_node(node, layout);
  }

  void external_input(ValueId v, const std::string& value, Layout layout, const Dims& dims, uint32_t external,
                      const Quant& q) override {
    log("external_input " + id(v) + " '" + value + "' " + layout_name(layout) + " " + dims_text(dims) + " external " +
        std::to_string(external) + " " + quant_text(q));
    inner_.external_input(v, value, layout, dims, external, q);
  }

  void external_output(ValueId v, const std::string& value, Layout layout, const Dims& dims, uint32_t external,
                       const Quant& q) override {
    log("external_output " + id(v) + " '" + value + "' " + layout_name(layout) + " " + dims_text(dims) + " external " +
        std::to_string(external) + " " + quant_text(q));
    inner_.external_output(v, value, layout, dims, external, q);
  }

  void weight_value(ValueId v, const std::string& value, Layout layout, const Dims& dims,
                    std::vector<float> data) override {
    log("weight_value " + id(v) + " '" + value + "' " + layout_name(layout) + " " + dims_text(dims) + " " +
        data_text(data));
    inner_.weight_value(v, value, layout, dims, std::move(data));
  }

  void static_value(ValueId v, const Dims& dims, std::vector<float> data, const std::string& what) override {
    log("static_value " + id(v) + " " + dims_text(dims) + " " + data_text(data) + " (" + what + ")");
    inner_.static_value(v, dims, std::move(data), what);
  }

  void internal_value(ValueId v, const Dims& dims, const Quant& q) override {
    log("internal_value " + id(v) + " " + dims_text(dims) + " " + quant_text(q));
    inner_.internal_value(v, dims, q);
  }

  void quantized_static(ValueId v, const Dims& dims, std::vector<int32_t> data, const Quant& q,
                        const std::string& what) override {
    const std::string bytes(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(int32_t));
    std::ostringstream h;
    h << data.size() << " integers #" << std::hex << core::fnv1a(bytes);
    log("quantized_static " + id(v) + " " + dims_text(dims) + " " + h.str() + " " + quant_text(q) + " (" + what + ")");
    inner_.quantized_static(v, dims, std::move(data), q, what);
  }

  void unary(Unary op, ValueId x, ValueId y) override {
    log(std::string(call_name(op)) + " " + id(x) + " -> " + id(y));
    inner_.unary(op, x, y);
  }

  void arithmetic(Arithmetic op, float min, float max, ValueId a, ValueId b, ValueId y) override {
    log(std::string(call_name(op)) + " [" + lit(min) + ", " + lit(max) + "] " + id(a) + ", " + id(b) + " -> " + id(y));
    inner_.arithmetic(op, min, max, a, b, y);
  }

  void binary(Binary op, ValueId a, ValueId b, ValueId y) override {
    log(std::string(call_name(op)) + " " + id(a) + ", " + id(b) + " -> " + id(y));
    inner_.binary(op, a, b, y);
  }

  void clamp(float min, float max, ValueId x, ValueId y) override {
    log("xnn_define_clamp [" + lit(min) + ", " + lit(max) + "] " + id(x) + " -> " + id(y));
    inner_.clamp(min, max, x, y);
  }

  void elu(float alpha, ValueId x, ValueId y) override {
    log("xnn_define_elu alpha " + lit(alpha) + " " + id(x) + " -> " + id(y));
    inner_.elu(alpha, x, y);
  }

  void leaky_relu(float slope, ValueId x, ValueId y) override {
    log("xnn_define_leaky_relu slope " + lit(slope) + " " + id(x) + " -> " + id(y));
    inner_.leaky_relu(slope, x, y);
  }

  void convolution_2d(const Window2d& w, uint32_t groups, size_t group_input_channels, size_t group_output_channels,
                      ValueId x, ValueId filter, ValueId bias, ValueId y) override {
    log("xnn_define_convolution_2d " + window_text(w) + " groups " + std::to_string(groups) + " of " +
        std::to_string(group_input_channels) + " -> " + std::to_string(group_output_channels) + " " + id(x) + ", " +
        id(filter) + ", " + id(bias) + " -> " + id(y));
    inner_.convolution_2d(w, groups, group_input_channels, group_output_channels, x, filter, bias, y);
  }

  void depthwise_convolution_2d(const Window2d& w, uint32_t depth_multiplier, size_t input_channels, ValueId x,
                                ValueId filter, ValueId bias, ValueId y) override {
    log("xnn_define_depthwise_convolution_2d " + window_text(w) + " multiplier " + std::to_string(depth_multiplier) +
        " channels " + std::to_string(input_channels) + " " + id(x) + ", " + id(filter) + ", " + id(bias) + " -> " +
        id(y));
    inner_.depthwise_convolution_2d(w, depth_multiplier, input_channels, x, filter, bias, y);
  }

  void deconvolution_2d(const Window2d& w, uint32_t adjustment_h, uint32_t adjustment_w, uint32_t groups,
                        size_t group_input_channels, size_t group_output_channels, ValueId x, ValueId filter,
                        ValueId bias, ValueId y) override {
    log("xnn_define_deconvolution_2d " + window_text(w) + " adjustment " + std::to_string(adjustment_h) + "x" +
        std::to_string(adjustment_w) + " groups " + std::to_string(groups) + " of " +
        std::to_string(group_input_channels) + " -> " + std::to_string(group_output_channels) + " " + id(x) + ", " +
        id(filter) + ", " + id(bias) + " -> " + id(y));
    inner_.deconvolution_2d(w, adjustment_h, adjustment_w, groups, group_input_channels, group_output_channels, x,
                            filter, bias, y);
  }

  void max_pooling_2d(const Window2d& w, ValueId x, ValueId y) override {
    log("xnn_define_max_pooling_2d " + window_text(w) + " " + id(x) + " -> " + id(y));
    inner_.max_pooling_2d(w, x, y);
  }

  void average_pooling_2d(const Window2d& w, ValueId x, ValueId y) override {
    log("xnn_define_average_pooling_2d " + window_text(w) + " " + id(x) + " -> " + id(y));
    inner_.average_pooling_2d(w, x, y);
  }

  void global_average_pooling_2d(ValueId x, ValueId y) override {
    log("xnn_define_global_average_pooling_2d " + id(x) + " -> " + id(y));
    inner_.global_average_pooling_2d(x, y);
  }

  void fully_connected(ValueId x, ValueId filter, ValueId bias, ValueId y, uint32_t flags) override {
    log("xnn_define_fully_connected " + id(x) + ", " + id(filter) + ", " + id(bias) + " -> " + id(y) + " flags " +
        flag_names(flags));
    inner_.fully_connected(x, filter, bias, y, flags);
  }

  void static_reshape(const Dims& new_shape, ValueId x, ValueId y) override {
    log("xnn_define_static_reshape " + dims_text(new_shape) + " " + id(x) + " -> " + id(y));
    inner_.static_reshape(new_shape, x, y);
  }

  void static_constant_pad(const Dims& pre, const Dims& post, float value, ValueId x, ValueId y) override {
    log("xnn_define_static_constant_pad " + dims_text(pre) + " " + dims_text(post) + " value " + lit(value) + " " +
        id(x) + " -> " + id(y));
    inner_.static_constant_pad(pre, post, value, x, y);
  }

  void softmax(ValueId x, ValueId y) override {
    log("xnn_define_softmax " + id(x) + " -> " + id(y));
    inner_.softmax(x, y);
  }

  void static_resize_bilinear_2d(size_t height, size_t width, ValueId x, ValueId y, uint32_t flags) override {
    log("xnn_define_static_resize_bilinear_2d " + std::to_string(height) + "x" + std::to_string(width) + " " + id(x) +
        " -> " + id(y) + " flags " + flag_names(flags));
    inner_.static_resize_bilinear_2d(height, width, x, y, flags);
  }

  void convert(ValueId x, ValueId y) override {
    log("xnn_define_convert " + id(x) + " -> " + id(y));
    inner_.convert(x, y);
  }

  void end_subgraph(const std::vector<External>& inputs, const std::vector<External>& outputs) override {
    log("end_subgraph inputs " + externals_text(inputs) + " outputs " + externals_text(outputs));
    inner_.end_subgraph(inputs, outputs);
  }

  void concat(const ir::Node& node, const Concat& c) override {
    std::string copies;
    for (const auto& k : c.copies)
      copies += " ['" + k.value + "' " + (k.data ? data_text(*k.data) : "computed") + " channels " +
                std::to_string(k.channels) + " offset " + std::to_string(k.offset) + "]";
    log("concat '" + node.name + "' -> '" + c.output + "' " + core::to_string(c.shape) + " batch " +
        std::to_string(c.batch) + " stride " + std::to_string(c.stride) + copies);
    inner_.concat(node, c);
  }

 private:
  void log(std::string line) { lines_.push_back(std::move(line)); }

  Sink& inner_;
  std::vector<std::string>& lines_;
};

}  // namespace

std::unique_ptr<Sink> recording_sink(Sink& inner, std::vector<std::string>& lines) {
  return std::make_unique<RecordingSink>(inner, lines);
}

}  // namespace quorum::backends::xnnpack
