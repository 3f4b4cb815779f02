// Shared pieces of the XNNPACK backend: value layouts, status checking, the subgraph builder that
// turns a run of Quorum nodes into one XNNPACK subgraph (every node output an external output),
// and the op table through which each operator family (ops_*.cpp) registers its support rule, its
// layout and its definition.
//
// Layouts: Quorum values are row-major NCHW (ONNX conventions); XNNPACK's spatial operators want
// NHWC. A value can exist in a segment in its logical layout (Plain) or channels-last (rank 3 and
// 4 only: [N, C, L] is stored as [N, 1, L, C], [N, C, H, W] as [N, H, W, C]). XNNPACK 2022-02 has no
// transpose operator, so layout changes happen in host code between segments: a node that needs a
// value in a layout other than the one its producer wrote in the current segment starts a new
// segment, where the value enters as an external input permuted on the host.
#pragma once
#include <xnnpack.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace quorum::backends::xnnpack {

using core::Shape;
using Dims = std::vector<size_t>;

enum class Layout { Plain, ChannelsLast };

const char* status_name(xnn_status s);
// Throws ConversionError("<call> failed: <status>") unless s is xnn_status_success.
void check_define(xnn_status s, const std::string& call);
// Throws std::runtime_error (a library error while running) unless s is xnn_status_success.
void check_run(xnn_status s, const std::string& call);

// The XNNPACK dims of a logical shape stored in `layout`.
Dims xnn_dims(const Shape& logical, Layout layout);
// Host-side layout changes between Quorum's row-major tensor and a channels-last buffer.
std::vector<float> to_channels_last(const core::Tensor& t);
core::Tensor from_channels_last(const std::vector<float>& data, const Shape& logical);

// One runnable piece of the compiled model, reading and writing the host value map (float32,
// logical layout).
class Step {
 public:
  virtual ~Step() = default;
  virtual void run(ValueMap& values) = 0;
};

// Buffers the library reads at run time or packs at runtime creation (weights, constants); they
// must outlive every runtime and operator built from them.
using ConstantStore = std::deque<std::vector<float>>;

class SegmentBuilder;

// What an operator definition sees: its node, its layout, and the segment being built.
class NodeCtx {
 public:
  NodeCtx(SegmentBuilder& b, const ir::Graph& g, const ir::Node& n, Layout l) : b_(b), graph(g), node(n), layout(l) {}
  uint32_t input(size_t i);                // data input i, in the node's layout
  uint32_t output(size_t i = 0);           // node output i, an external output in the node's layout
  uint32_t temp(const Dims& dims);         // an internal value
  uint32_t constant(std::vector<float> data, const Dims& dims);  // a static value
  uint32_t scalar(float v) { return constant({v}, {1}); }
  // A static reshape of `id` into a new internal value of dims `dims`.
  uint32_t reshape(uint32_t id, const Dims& dims);
  const core::Tensor& weight(size_t i) const;  // input i, which must be an initializer
  const Shape& in_shape(size_t i) const { return graph.types.at(node.inputs[i]).shape; }
  const Shape& out_shape(size_t i = 0) const { return graph.types.at(node.outputs[i]).shape; }
  const core::Attrs& attrs() const { return node.attrs; }
  xnn_subgraph_t subgraph() const;
  // Checks a definition call: "node 'N' (op): xnn_define_x failed: xnn_status_y".
  void check(xnn_status s, const char* call) const;

 private:
  SegmentBuilder& b_;

 public:
  const ir::Graph& graph;
  const ir::Node& node;
  const Layout layout;
};

using SupportFn = std::function<Support(const ir::Graph&, const ir::Node&)>;
// The node's layout, given the layout its first data input already has in the current segment
// (nullopt: it comes from the host and can enter in either layout).
using LayoutFn = std::function<Layout(const ir::Graph&, const ir::Node&, std::optional<Layout>)>;
using DefineFn = std::function<void(NodeCtx&)>;
// Operators the subgraph API lacks run as their own step through the operator API.
using HostStepFn = std::function<std::unique_ptr<Step>(const ir::Graph&, const ir::Node&, ConstantStore&)>;

struct OpEntry {
  SupportFn supports;  // null: every case of the operator maps
  LayoutFn layout;     // null: Plain
  DefineFn define;     // subgraph operators
  HostStepFn host;     // operator-API operators (define is null)
};
using OpTable = std::map<std::string, OpEntry>;

const OpTable& op_table();
void register_conv_pool(OpTable& t);
void register_elementwise(OpTable& t);
void register_shape(OpTable& t);

// Layout rules shared by the families.
Layout plain_layout(const ir::Graph&, const ir::Node&, std::optional<Layout>);
Layout channels_last_layout(const ir::Graph&, const ir::Node&, std::optional<Layout>);
// Elementwise: channels-last when the first input already is and every data input has its rank.
Layout follow_layout(const ir::Graph& g, const ir::Node& n, std::optional<Layout> first);

// Builds the segments of one model. Nodes are added in topological order; a node that needs a
// value in another layout than the one it has in the current segment closes the segment.
class SegmentBuilder {
 public:
  // Every definition call is noted in `log` under its node.
  SegmentBuilder(const ir::Graph& g, ConstantStore& constants, LoweringLog& log);
  ~SegmentBuilder();
  SegmentBuilder(const SegmentBuilder&) = delete;
  SegmentBuilder& operator=(const SegmentBuilder&) = delete;

  void add_node(const ir::Node& n, const OpEntry& op);
  // Closes the last segment; returns every step in execution order.
  std::vector<std::unique_ptr<Step>> finish();

  // For NodeCtx.
  uint32_t value(const std::string& name, Layout l);
  uint32_t define_output(const std::string& name, Layout l);
  uint32_t define_internal(const Dims& dims, const float* data);
  xnn_subgraph_t subgraph() const { return sg_; }
  ConstantStore& constants() { return constants_; }
  const std::string& where() const { return where_; }
  void note(const std::string& call) { log_.note(node_, call); }

 private:
  struct External {
    std::string value;
    Layout layout;
    uint32_t id;
  };
  void open();
  void close();
  uint32_t define_external(const std::string& name, Layout l, uint32_t flags);
  std::optional<Layout> layout_in_segment(const std::string& value) const;

  const ir::Graph& g_;
  ConstantStore& constants_;
  std::vector<std::unique_ptr<Step>> steps_;
  xnn_subgraph_t sg_ = nullptr;
  uint32_t reserved_ = 0;  // external ids [0, reserved_)
  std::vector<External> inputs_, outputs_;
  std::map<std::string, Layout> produced_;  // node outputs defined in the open segment
  std::map<std::pair<std::string, Layout>, uint32_t> ids_;
  std::string where_;  // the node being defined, for messages
  std::string node_;   // its name
  LoweringLog& log_;
};

}  // namespace quorum::backends::xnnpack
