// Inside the XNNPACK lowering (lower*.cpp): the segment state, what an operator's lowering sees,
// and the op table through which each family (lower_conv_pool.cpp, lower_elementwise.cpp,
// lower_shape.cpp) registers its support rule, its layout rule and its lowering.
#pragma once
#include <functional>
#include <map>
#include <tuple>
#include <string>

#include "backends/xnnpack/lower.h"

namespace quorum::backends::xnnpack {

// The segments of one model. Nodes are added in topological order; a node that needs a value in
// another layout or quantization than the one it has in the current segment closes the segment.
class Segments {
 public:
  // `exposed`: the node outputs defined as external outputs (null: all; lower() in lower.h).
  Segments(const ir::Graph& g, Sink& sink, const std::set<std::string>* exposed)
      : g_(g), sink_(sink), exposed_(exposed) {}
  void close();

  // Opens a segment unless one is open; tells the sink which node comes.
  void begin_node(const ir::Node& n, Layout l);
  // The value `name` in layout `l` and datatype `q`: defined once per segment (an external input, or an
  // initializer as a static value).
  ValueId value(const std::string& name, Layout l, const Quant& q);
  ValueId define_output(const std::string& name, Layout l, const Quant& q);
  ValueId internal(const Dims& dims, const Quant& q = kFloat);
  ValueId constant(std::vector<float> data, const Dims& dims, const std::string& what);
  ValueId quantized_constant(std::vector<int32_t> data, const Dims& dims, const Quant& q, const std::string& what);
  // The layout and datatype the value's producer wrote it in, when that was in the open segment.
  std::optional<std::pair<Layout, Quant>> in_segment(const std::string& value) const;
  std::optional<Layout> layout_in_segment(const std::string& value) const;
  Sink& sink() { return sink_; }

 private:
  const ir::Graph& g_;
  Sink& sink_;
  const std::set<std::string>* exposed_;
  bool open_ = false;
  ValueId next_ = 0;
  std::vector<External> inputs_, outputs_;
  std::map<std::string, std::pair<Layout, Quant>> produced_;  // node outputs defined in the open segment
  std::map<std::tuple<std::string, Layout, Quant>, ValueId> ids_;
};

// The XNNPACK datatype a node wants its data input i in (output = false) or writes its output i in;
// null in an op entry: float32 throughout.
using QuantFn = std::function<Quant(const ir::Graph&, const ir::Node&, bool output, size_t i)>;

// What an operator's lowering sees: its node, its layout, the segment and the sink.
class NodeLowering {
 public:
  NodeLowering(Segments& s, const ir::Graph& g, const ir::Node& n, Layout l, const QuantFn& q)
      : s_(s), quant_(q), graph(g), node(n), layout(l), sink(s.sink()) {}
  // Data input i, in the node's layout and the datatype the node wants it in.
  ValueId input(size_t i) { return s_.value(node.inputs.at(i), layout, quant(false, i)); }
  ValueId output(size_t i = 0) { return s_.define_output(node.outputs.at(i), layout, quant(true, i)); }
  Quant quant(bool output, size_t i) const { return quant_ ? quant_(graph, node, output, i) : kFloat; }
  ValueId temp(const Dims& dims) { return s_.internal(dims); }
  ValueId constant(std::vector<float> data, const Dims& dims, const std::string& what) {
    return s_.constant(std::move(data), dims, what);
  }
  ValueId quantized_constant(std::vector<int32_t> data, const Dims& dims, const Quant& q, const std::string& what) {
    return s_.quantized_constant(std::move(data), dims, q, what);
  }
  ValueId scalar(float v);
  // A static reshape of `id` into a new internal value of dims `dims`.
  ValueId reshape(ValueId id, const Dims& dims);
  const core::Tensor& weight(size_t i) const { return graph.initializers.at(node.inputs.at(i)); }
  const Shape& in_shape(size_t i) const { return graph.types.at(node.inputs[i]).shape; }
  const Shape& out_shape(size_t i = 0) const { return graph.types.at(node.outputs[i]).shape; }
  Dims out_dims() const { return xnn_dims(out_shape(), layout); }
  const core::Attrs& attrs() const { return node.attrs; }
  float attr_float(const char* name) const { return static_cast<float>(core::attr_f(node.attrs, name)); }

 private:
  Segments& s_;
  const QuantFn& quant_;

 public:
  const ir::Graph& graph;
  const ir::Node& node;
  const Layout layout;
  Sink& sink;
};

// A node's values as float32, row-major.
std::vector<float> f32_values(const core::Tensor& t);
// A quantized initializer's elements (int8, uint8, int32) as integers.
std::vector<int32_t> int_values(const core::Tensor& t);
size_t prod(const Shape& s, size_t from, size_t to);

using SupportFn = std::function<Support(const ir::Graph&, const ir::Node&)>;
// The node's layout, given the layout its first data input already has in the current segment
// (nullopt: it comes from the host and can enter in either layout).
using LayoutFn = std::function<Layout(const ir::Graph&, const ir::Node&, std::optional<Layout>)>;
using DefineFn = std::function<void(NodeLowering&)>;
// Operators the subgraph API lacks run between segments on the operator API.
using HostFn = std::function<void(const ir::Graph&, const ir::Node&, Sink&)>;

struct OpEntry {
  OpEntry(SupportFn s = {}, LayoutFn l = {}, DefineFn d = {}, HostFn h = {}, QuantFn q = {})
      : supports(std::move(s)), layout(std::move(l)), define(std::move(d)), host(std::move(h)), quant(std::move(q)) {}
  SupportFn supports;  // null: every case of the operator maps
  LayoutFn layout;     // null: Plain
  DefineFn define;     // subgraph operators
  HostFn host;         // operator-API operators (define is null)
  QuantFn quant;       // null: float32 values
};
using OpTable = std::map<std::string, OpEntry>;

void register_conv_pool(OpTable& t);
void register_elementwise(OpTable& t);
void register_shape(OpTable& t);
void register_quantized(OpTable& t);  // lower_quant.cpp

// A convolution's geometry from its window attributes (kernel_shape, strides, pads, dilations, auto_pad), y its
// declared output shape (lower_conv_pool.cpp).
Window2d conv_window(const ir::Node& n, const Shape& x, const Shape& y);
// ONNX's filter [OC, Cg, kH, kW] (taps = kH * kW) in XNNPACK's layout: OHWI [OC, kH, kW, Cg], or a depthwise
// convolution's [1, kH, kW, OC] (Cg = 1).
template <class T>
std::vector<T> xnn_filter(const std::vector<T>& src, size_t oc, size_t cg, size_t taps, bool depthwise) {
  std::vector<T> filter(oc * taps * cg);
  for (size_t o = 0; o < oc; ++o)
    for (size_t i = 0; i < cg; ++i)
      for (size_t t = 0; t < taps; ++t) {
        const T v = src[(o * cg + i) * taps + t];
        if (depthwise)
          filter[t * oc + o] = v;
        else
          filter[(o * taps + t) * cg + i] = v;
      }
  return filter;
}

// Layout rules shared by the families.
Layout plain_layout(const ir::Graph&, const ir::Node&, std::optional<Layout>);
Layout channels_last_layout(const ir::Graph&, const ir::Node&, std::optional<Layout>);
// Elementwise: channels-last when the first input already is and every data input has its rank.
Layout follow_layout(const ir::Graph& g, const ir::Node& n, std::optional<Layout> first);

}  // namespace quorum::backends::xnnpack
