// The XNNPACK lowering's optimized run (part of the lowering: no XNNPACK header). An application asks an
// XNNPACK runtime only for the values it needs, so the values in between are internal and
// xnn_create_runtime_v2 (through xnn_subgraph_optimize) may fuse nodes through them. Here: which node
// outputs must still leave their segment (exposed_values), and which definitions XNNPACK then fuses
// (fusion_sink). The library reports no fusions, so its rule is applied to the subgraph the lowering defines.
#include <algorithm>
#include <cstring>

#include "backends/xnnpack/lower_ops.h"

namespace quorum::backends::xnnpack {
namespace {

// Pass one of the optimized lowering: the pinned lowering into a sink that defines nothing and notes the
// node outputs read outside the segment that writes them (an external input of a later segment, an input
// of a host-side operator). Segments follow layouts and quantizations only, so pass two has the same segments.
class CrossingSink : public NullSink {
 public:
  explicit CrossingSink(std::set<std::string>& read) : read_(read) {}

  void external_input(ValueId, const std::string& value, Layout, const Dims&, uint32_t, const Quant&) override {
    read_.insert(value);
  }
  void concat(const ir::Node&, const Concat& c) override {
    for (const auto& k : c.copies)
      if (!k.data) read_.insert(k.value);
  }

 private:
  std::set<std::string>& read_;
};

// XNNPACK 2022-02's fusion rule: xnn_subgraph_optimize (with xnn_subgraph_analyze_consumers_and_producers) in
// src/subgraph.c of google/XNNPACK at ae108ef (the Debian package 0.0~git20220216.ae108ef), which
// xnn_create_runtime_v2 runs on every subgraph (no sparse or fp16 flags here, so nothing else rewrites it):
//  - every node input counts one consumer of its value (an input named twice counts twice), and an external
//    output one more: only an internal value can be fused away. Values are visited in id order (external ids
//    first, then the others as defined); one qualifies with exactly one consumer and a producer.
//  - a clamp consumer fuses into a producer of kind add2, average_pooling_2d, clamp, convolution_2d, divide,
//    deconvolution_2d, depthwise_convolution_2d, fully_connected, multiply2, max_pooling_2d or subtract (its
//    output bounds narrowed); the producer then writes the clamp's output, so a chain of clamps fuses clamp by
//    clamp into the first producer.
//  - otherwise a static_constant_pad producer folds into a [depthwise] convolution_2d consumer when the padded
//    value is 4-D (NHWC) with batch and channels unpadded, the padding value's bits are those of +0.0f, and the
//    convolution has no XNN_FLAG_TENSORFLOW_SAME_PADDING; the convolution then reads the pad's input. (The
//    lowering pads plain values and convolves channels-last ones, so a pad's output reaches a convolution only
//    through the host today: the fold is modelled for when that changes.)
// Nothing else fuses in that revision: leaky_relu, elu, hardswish... stay nodes of their own.
const char* const kClamp = "xnn_define_clamp";
const char* const kPad = "xnn_define_static_constant_pad";

bool fuses_clamp(const std::string& producer) {
  static const std::set<std::string> kinds = {"xnn_define_add2",
                                              "xnn_define_average_pooling_2d",
                                              kClamp,
                                              "xnn_define_convolution_2d",
                                              "xnn_define_divide",
                                              "xnn_define_deconvolution_2d",
                                              "xnn_define_depthwise_convolution_2d",
                                              "xnn_define_fully_connected",
                                              "xnn_define_multiply2",
                                              "xnn_define_max_pooling_2d",
                                              "xnn_define_subtract"};
  return kinds.count(producer) > 0;
}

bool takes_pad(const std::string& consumer) {
  return consumer == "xnn_define_convolution_2d" || consumer == "xnn_define_depthwise_convolution_2d";
}

constexpr int kNone = -1;  // XNN_INVALID_NODE_ID

// A value of the segment's subgraph as the analysis sees it.
struct SgValue {
  bool external = false;         // an external input or output
  bool external_output = false;  // counts one more consumer
  size_t rank = 0;
  int producer = kNone, first_consumer = kNone;
  int consumers = 0;
};

// A definition of the segment's subgraph; a fused-away one keeps an empty call (xnn_node_type_invalid).
struct SgNode {
  std::string call;  // the definition function, which names its XNNPACK node kind
  std::string owner;  // the Quorum node it belongs to
  std::vector<ValueId> inputs;
  ValueId output = kNoValue;
  bool zero_spatial_pad = false;  // a static_constant_pad the convolutions may absorb (see the rule)
  bool same_padding = false;      // a convolution with XNN_FLAG_TENSORFLOW_SAME_PADDING
};

// The decorator of fusion_sink (lower.h): records each segment's subgraph, applies the rule when it ends.
class FusionSink : public Sink {
 public:
  FusionSink(Sink& inner, LoweringLog& log) : inner_(inner), log_(log) {}

  void begin_subgraph() override {
    values_.clear();
    nodes_.clear();
    inner_.begin_subgraph();
  }
  void begin_node(const ir::Node& node, Layout layout) override {
    owner_ = node.name;
    inner_.begin_node(node, layout);
  }
  void external_input(ValueId v, const std::string& value, Layout layout, const Dims& dims, uint32_t external,
                      const Quant& q) override {
    define(v, dims).external = true;
    inner_.external_input(v, value, layout, dims, external, q);
  }
  void external_output(ValueId v, const std::string& value, Layout layout, const Dims& dims, uint32_t external,
                       const Quant& q) override {
    SgValue& x = define(v, dims);
    x.external = x.external_output = true;
    inner_.external_output(v, value, layout, dims, external, q);
  }
  void weight_value(ValueId v, const std::string& value, Layout layout, const Dims& dims,
                    std::vector<float> data) override {
    define(v, dims);
    inner_.weight_value(v, value, layout, dims, std::move(data));
  }
  void static_value(ValueId v, const Dims& dims, std::vector<float> data, const std::string& what) override {
    define(v, dims);
    inner_.static_value(v, dims, std::move(data), what);
  }
  void internal_value(ValueId v, const Dims& dims, const Quant& q) override {
    define(v, dims);
    inner_.internal_value(v, dims, q);
  }
  void quantized_static(ValueId v, const Dims& dims, std::vector<int32_t> data, const Quant& q,
                        const std::string& what) override {
    define(v, dims);
    inner_.quantized_static(v, dims, std::move(data), q, what);
  }

  void unary(Unary op, ValueId x, ValueId y) override {
    node(call_name(op), {x}, y);
    inner_.unary(op, x, y);
  }
  void arithmetic(Arithmetic op, float min, float max, ValueId a, ValueId b, ValueId y) override {
    node(call_name(op), {a, b}, y);
    inner_.arithmetic(op, min, max, a, b, y);
  }
  void binary(Binary op, ValueId a, ValueId b, ValueId y) override {
    node(call_name(op), {a, b}, y);
    inner_.binary(op, a, b, y);
  }
  void clamp(float min, float max, ValueId x, ValueId y) override {
    node(kClamp, {x}, y);
    inner_.clamp(min, max, x, y);
  }
  void elu(float alpha, ValueId x, ValueId y) override {
    node("xnn_define_elu", {x}, y);
    inner_.elu(alpha, x, y);
  }
  void leaky_relu(float slope, ValueId x, ValueId y) override {
    node("xnn_define_leaky_relu", {x}, y);
    inner_.leaky_relu(slope, x, y);
  }
  void convolution_2d(const Window2d& w, uint32_t groups, size_t group_input_channels, size_t group_output_channels,
                      ValueId x, ValueId filter, ValueId bias, ValueId y) override {
    node("xnn_define_convolution_2d", {x, filter, bias}, y).same_padding = w.flags & kTensorflowSamePadding;
    inner_.convolution_2d(w, groups, group_input_channels, group_output_channels, x, filter, bias, y);
  }
  void depthwise_convolution_2d(const Window2d& w, uint32_t depth_multiplier, size_t input_channels, ValueId x,
                                ValueId filter, ValueId bias, ValueId y) override {
    node("xnn_define_depthwise_convolution_2d", {x, filter, bias}, y).same_padding = w.flags & kTensorflowSamePadding;
    inner_.depthwise_convolution_2d(w, depth_multiplier, input_channels, x, filter, bias, y);
  }
  void deconvolution_2d(const Window2d& w, uint32_t adjustment_h, uint32_t adjustment_w, uint32_t groups,
                        size_t group_input_channels, size_t group_output_channels, ValueId x, ValueId filter,
                        ValueId bias, ValueId y) override {
    node("xnn_define_deconvolution_2d", {x, filter, bias}, y);
    inner_.deconvolution_2d(w, adjustment_h, adjustment_w, groups, group_input_channels, group_output_channels, x,
                            filter, bias, y);
  }
  void max_pooling_2d(const Window2d& w, ValueId x, ValueId y) override {
    node("xnn_define_max_pooling_2d", {x}, y);
    inner_.max_pooling_2d(w, x, y);
  }
  void average_pooling_2d(const Window2d& w, ValueId x, ValueId y) override {
    node("xnn_define_average_pooling_2d", {x}, y);
    inner_.average_pooling_2d(w, x, y);
  }
  void global_average_pooling_2d(ValueId x, ValueId y) override {
    node("xnn_define_global_average_pooling_2d", {x}, y);
    inner_.global_average_pooling_2d(x, y);
  }
  void fully_connected(ValueId x, ValueId filter, ValueId bias, ValueId y, uint32_t flags) override {
    node("xnn_define_fully_connected", {x, filter, bias}, y);
    inner_.fully_connected(x, filter, bias, y, flags);
  }
  void static_reshape(const Dims& new_shape, ValueId x, ValueId y) override {
    node("xnn_define_static_reshape", {x}, y);
    inner_.static_reshape(new_shape, x, y);
  }
  void static_constant_pad(const Dims& pre, const Dims& post, float value, ValueId x, ValueId y) override {
    node(kPad, {x}, y).zero_spatial_pad = zero_spatial_pad(pre, post, value, y);
    inner_.static_constant_pad(pre, post, value, x, y);
  }
  void softmax(ValueId x, ValueId y) override {
    node("xnn_define_softmax", {x}, y);
    inner_.softmax(x, y);
  }
  void static_resize_bilinear_2d(size_t height, size_t width, ValueId x, ValueId y, uint32_t flags) override {
    node("xnn_define_static_resize_bilinear_2d", {x}, y);
    inner_.static_resize_bilinear_2d(height, width, x, y, flags);
  }
  void convert(ValueId x, ValueId y) override {
    node("xnn_define_convert", {x}, y);
    inner_.convert(x, y);
  }

  void end_subgraph(const std::vector<External>& inputs, const std::vector<External>& outputs) override {
    segment_fused_.clear();
    fuse();
    try {
      inner_.end_subgraph(inputs, outputs);
    } catch (const ConversionError& e) {
      // xnn_create_runtime_v2 refusing a segment it fused: said by what it fused, not by the segment's node
      // names, so one defect of the fusion is one finding whatever the model calls its nodes.
      const std::string what = e.what();
      const size_t at = what.find(" failed: ");
      if (segment_fused_.empty() || at == std::string::npos) throw;
      std::string fused;
      for (const auto& f : segment_fused_) fused += (fused.empty() ? "" : ", ") + f;
      throw ConversionError("xnn_create_runtime_v2 failed: " + what.substr(at + 9) + " on a segment XNNPACK's fusion "
                            "rewrote (" + fused + ")");
    }
  }
  void concat(const ir::Node& node, const Concat& c) override { inner_.concat(node, c); }

 private:
  SgValue& define(ValueId v, const Dims& dims) {
    if (values_.size() <= v) values_.resize(v + 1);
    values_[v].rank = dims.size();
    return values_[v];
  }

  SgNode& node(const char* call, std::vector<ValueId> inputs, ValueId output) {
    inputs.erase(std::remove(inputs.begin(), inputs.end(), kNoValue), inputs.end());  // no bias: no input
    nodes_.push_back({call, owner_, std::move(inputs), output});
    return nodes_.back();
  }

  bool zero_spatial_pad(const Dims& pre, const Dims& post, float value, ValueId y) const {
    uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    return values_.at(y).rank == 4 && (pre[0] | post[0] | pre[3] | post[3]) == 0 && bits == 0;
  }

  // xnn_subgraph_analyze_consumers_and_producers.
  void count_consumers() {
    for (size_t n = 0; n < nodes_.size(); ++n) {
      for (ValueId v : nodes_[n].inputs)
        if (values_.at(v).consumers++ == 0) values_[v].first_consumer = static_cast<int>(n);
      values_.at(nodes_[n].output).producer = static_cast<int>(n);
    }
    for (SgValue& v : values_) v.consumers += v.external_output;
  }

  // XNNPACK's value ids: external ids first (the lowering numbers them as it defines them), then the rest.
  std::vector<ValueId> id_order() const {
    std::vector<ValueId> order;
    for (const bool external : {true, false})
      for (ValueId v = 0; v < values_.size(); ++v)
        if (values_[v].external == external) order.push_back(v);
    return order;
  }

  void fuse() {
    count_consumers();
    for (ValueId v : id_order()) {
      const SgValue& x = values_[v];
      if (x.consumers != 1 || x.producer == kNone || x.first_consumer == kNone) continue;
      const int p = x.producer, c = x.first_consumer;
      if (nodes_[c].call == kClamp && fuses_clamp(nodes_[p].call))
        fuse_clamp(v, p, c);
      else if (nodes_[p].call == kPad && nodes_[p].zero_spatial_pad && takes_pad(nodes_[c].call) &&
               !nodes_[c].same_padding)
        fold_pad(v, p, c);
    }
  }

  void fuse_clamp(ValueId v, int p, int c) {
    note(p, c);
    values_.at(nodes_[c].output).producer = p;
    nodes_[p].output = nodes_[c].output;
    nodes_[c].call.clear();
    values_[v] = SgValue{};
  }

  void fold_pad(ValueId v, int p, int c) {
    note(p, c);
    const ValueId in = nodes_[p].inputs.at(0);
    nodes_[c].inputs.at(0) = in;
    if (values_.at(in).first_consumer == p) values_[in].first_consumer = c;
    nodes_[p].call.clear();
    values_[v] = SgValue{};
  }

  // The pair on both Quorum nodes: what the optimizer did is keyed by the definitions, never by names.
  void note(int p, int c) {
    const std::string entry = kFusedPrefix + nodes_[p].call + "+" + nodes_[c].call;
    const std::string pair = nodes_[p].call + "+" + nodes_[c].call;
    if (std::find(segment_fused_.begin(), segment_fused_.end(), pair) == segment_fused_.end())
      segment_fused_.push_back(pair);
    log_.note(nodes_[p].owner, entry);
    log_.note(nodes_[c].owner, entry);
  }

  Sink& inner_;
  LoweringLog& log_;
  std::vector<std::string> segment_fused_;  // what the fusion did in the segment being closed
  std::string owner_;
  std::vector<SgValue> values_;  // by the lowering's value id in the open segment
  std::vector<SgNode> nodes_;    // in definition order (XNNPACK's node ids)
};

}  // namespace

std::set<std::string> exposed_values(const ir::Graph& g) {
  std::set<std::string> crossing;  // and graph inputs, which every segment reads from the host
  CrossingSink sink(crossing);
  lower(g, sink);  // a refusal leaves the set short, but then the real lowering refuses alike
  std::set<std::string> read;
  for (const auto& n : g.nodes) read.insert(n.inputs.begin(), n.inputs.end());
  std::set<std::string> exposed;
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs)
      if (crossing.count(o) || !read.count(o) || std::find(g.outputs.begin(), g.outputs.end(), o) != g.outputs.end())
        exposed.insert(o);
  return exposed;
}

std::unique_ptr<Sink> fusion_sink(Sink& inner, LoweringLog& log) {
  return std::make_unique<FusionSink>(inner, log);
}

}  // namespace quorum::backends::xnnpack
