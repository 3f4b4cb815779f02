// The segment builder: one XNNPACK subgraph per run of nodes that agree on the layouts of the
// values they share, turned into a runtime (single-threaded: no pthreadpool) when the segment
// closes. Every node output is an external output, so the host sees every intermediate; values
// that cross segments go back through the host, permuted there when the next segment wants them
// in another layout.
#include <algorithm>

#include "backends/xnnpack/xnnpack_common.h"

namespace quorum::backends::xnnpack {

const char* status_name(xnn_status s) {
  switch (s) {
    case xnn_status_success:
      return "xnn_status_success";
    case xnn_status_uninitialized:
      return "xnn_status_uninitialized";
    case xnn_status_invalid_parameter:
      return "xnn_status_invalid_parameter";
    case xnn_status_invalid_state:
      return "xnn_status_invalid_state";
    case xnn_status_unsupported_parameter:
      return "xnn_status_unsupported_parameter";
    case xnn_status_unsupported_hardware:
      return "xnn_status_unsupported_hardware";
    case xnn_status_out_of_memory:
      return "xnn_status_out_of_memory";
  }
  return "xnn_status#unknown";
}

void check_define(xnn_status s, const std::string& call) {
  if (s != xnn_status_success) throw ConversionError(call + " failed: " + status_name(s));
}

void check_run(xnn_status s, const std::string& call) {
  if (s != xnn_status_success) throw std::runtime_error("XNNPACK " + call + " failed: " + status_name(s));
}

Dims xnn_dims(const Shape& logical, Layout layout) {
  if (logical.empty()) return {1};  // rank 0: one element
  Dims d(logical.begin(), logical.end());
  if (layout == Layout::Plain) return d;
  if (logical.size() == 3) return {d[0], 1, d[2], d[1]};
  return {d[0], d[2], d[3], d[1]};
}

namespace {

// [N, C, S] <-> [N, S, C] where S is the product of the spatial dims.
struct NcsView {
  int64_t n = 1, c = 1, s = 1;
  explicit NcsView(const Shape& x) : n(x[0]), c(x[1]) {
    for (size_t i = 2; i < x.size(); ++i) s *= x[i];
  }
};

}  // namespace

std::vector<float> to_channels_last(const core::Tensor& t) {
  const NcsView v(t.shape());
  std::vector<float> out(static_cast<size_t>(t.numel()));
  const float* in = t.f32();
  for (int64_t n = 0; n < v.n; ++n)
    for (int64_t c = 0; c < v.c; ++c)
      for (int64_t s = 0; s < v.s; ++s) out[static_cast<size_t>((n * v.s + s) * v.c + c)] = in[(n * v.c + c) * v.s + s];
  return out;
}

core::Tensor from_channels_last(const std::vector<float>& data, const Shape& logical) {
  const NcsView v(logical);
  core::Tensor t(core::DType::F32, logical);
  float* out = t.f32();
  for (int64_t n = 0; n < v.n; ++n)
    for (int64_t c = 0; c < v.c; ++c)
      for (int64_t s = 0; s < v.s; ++s) out[(n * v.c + c) * v.s + s] = data[static_cast<size_t>((n * v.s + s) * v.c + c)];
  return t;
}

namespace {

struct IoValue {
  std::string name;
  Layout layout;
  uint32_t id;
  Shape shape;
};

// A runtime built from one subgraph; external values are bound and permuted at every run.
class SegmentStep : public Step {
 public:
  SegmentStep(xnn_runtime_t rt, std::vector<IoValue> inputs, std::vector<IoValue> outputs)
      : rt_(rt), inputs_(std::move(inputs)), outputs_(std::move(outputs)) {}
  ~SegmentStep() override { xnn_delete_runtime(rt_); }

  void run(ValueMap& values) override {
    std::vector<xnn_external_value> bind;
    std::vector<std::vector<float>> staged;  // channels-last copies of inputs, and every output
    staged.reserve(inputs_.size() + outputs_.size());
    for (const auto& in : inputs_) {
      core::Tensor& t = values.at(in.name);
      if (in.layout == Layout::Plain) {
        bind.push_back({in.id, t.f32()});
      } else {
        staged.push_back(to_channels_last(t));
        bind.push_back({in.id, staged.back().data()});
      }
    }
    const size_t first_out = staged.size();
    for (const auto& out : outputs_) {
      staged.emplace_back(static_cast<size_t>(core::numel(out.shape)));
      bind.push_back({out.id, staged.back().data()});
    }
    check_run(xnn_setup_runtime(rt_, bind.size(), bind.data()), "xnn_setup_runtime");
    check_run(xnn_invoke_runtime(rt_), "xnn_invoke_runtime");
    for (size_t i = 0; i < outputs_.size(); ++i) {
      const IoValue& out = outputs_[i];
      std::vector<float>& data = staged[first_out + i];
      core::Tensor t;
      if (out.layout == Layout::Plain) {
        t = core::Tensor(core::DType::F32, out.shape);
        std::copy(data.begin(), data.end(), t.f32());
      } else {
        t = from_channels_last(data, out.shape);
      }
      values.insert_or_assign(out.name, std::move(t));
    }
  }

 private:
  xnn_runtime_t rt_;
  std::vector<IoValue> inputs_, outputs_;
};

}  // namespace

SegmentBuilder::SegmentBuilder(const ir::Graph& g, ConstantStore& constants, LoweringLog& log)
    : g_(g), constants_(constants), reserved_(static_cast<uint32_t>(2 * g.types.size() + 1)), log_(log) {}

SegmentBuilder::~SegmentBuilder() {
  if (sg_) xnn_delete_subgraph(sg_);
}

void SegmentBuilder::open() {
  check_define(xnn_create_subgraph(reserved_, 0, &sg_), "xnn_create_subgraph");
}

void SegmentBuilder::close() {
  if (!sg_) return;
  xnn_subgraph_t sg = sg_;
  sg_ = nullptr;
  std::vector<IoValue> ins, outs;
  for (const auto& e : inputs_) ins.push_back({e.value, e.layout, e.id, g_.types.at(e.value).shape});
  for (const auto& e : outputs_) outs.push_back({e.value, e.layout, e.id, g_.types.at(e.value).shape});
  std::string nodes;
  for (const auto& e : outputs_) nodes += (nodes.empty() ? "" : ", ") + e.value;
  inputs_.clear();
  outputs_.clear();
  produced_.clear();
  ids_.clear();
  xnn_runtime_t rt = nullptr;
  const xnn_status s = outs.empty() ? xnn_status_success : xnn_create_runtime_v2(sg, nullptr, 0, &rt);
  xnn_delete_subgraph(sg);
  check_define(s, "xnn_create_runtime_v2 (segment producing " + nodes + ")");
  if (rt) steps_.push_back(std::make_unique<SegmentStep>(rt, std::move(ins), std::move(outs)));
}

std::optional<Layout> SegmentBuilder::layout_in_segment(const std::string& value) const {
  const auto it = produced_.find(value);
  if (it == produced_.end()) return std::nullopt;
  return it->second;
}

void SegmentBuilder::add_node(const ir::Node& n, const OpEntry& op) {
  where_ = "node '" + n.name + "' (" + n.op + ")";
  node_ = n.name;
  if (op.host) {
    note("host code");
    close();
    steps_.push_back(op.host(g_, n, constants_));
    return;
  }
  const size_t data_inputs = ir::data_input_count(n);
  const Layout l = op.layout ? op.layout(g_, n, layout_in_segment(n.inputs.at(0))) : Layout::Plain;
  for (size_t i = 0; i < data_inputs; ++i) {
    const auto have = layout_in_segment(n.inputs[i]);
    if (have && *have != l) {
      close();  // the value goes through the host, where its layout changes
      break;
    }
  }
  if (!sg_) open();
  NodeCtx ctx(*this, g_, n, l);
  op.define(ctx);
}

std::vector<std::unique_ptr<Step>> SegmentBuilder::finish() {
  close();
  return std::move(steps_);
}

uint32_t SegmentBuilder::value(const std::string& name, Layout l) {
  const auto key = std::make_pair(name, l);
  if (const auto it = ids_.find(key); it != ids_.end()) return it->second;
  const Shape& shape = g_.types.at(name).shape;
  if (produced_.count(name))
    throw std::logic_error(where_ + ": value '" + name + "' is wanted in a layout its producer did not write");
  if (g_.is_initializer(name)) {
    const core::Tensor w = g_.initializers.at(name).to(core::DType::F32);
    std::vector<float> data = l == Layout::Plain ? std::vector<float>(w.f32(), w.f32() + w.numel()) : to_channels_last(w);
    constants_.push_back(std::move(data));
    const uint32_t id = define_internal(xnn_dims(shape, l), constants_.back().data());
    ids_[key] = id;
    return id;
  }
  const uint32_t id = define_external(name, l, XNN_VALUE_FLAG_EXTERNAL_INPUT);
  inputs_.push_back({name, l, id});
  ids_[key] = id;
  return id;
}

uint32_t SegmentBuilder::define_output(const std::string& name, Layout l) {
  const uint32_t id = define_external(name, l, XNN_VALUE_FLAG_EXTERNAL_OUTPUT);
  outputs_.push_back({name, l, id});
  produced_[name] = l;
  ids_[{name, l}] = id;
  return id;
}

// An external value (the next external id) of the segment: a graph value crossing into or out of it.
uint32_t SegmentBuilder::define_external(const std::string& name, Layout l, uint32_t flags) {
  const uint32_t ext = static_cast<uint32_t>(inputs_.size() + outputs_.size());
  const Dims d = xnn_dims(g_.types.at(name).shape, l);
  uint32_t id = XNN_INVALID_VALUE_ID;
  check_define(xnn_define_tensor_value(sg_, xnn_datatype_fp32, d.size(), d.data(), nullptr, ext, flags, &id),
               where_ + ": xnn_define_tensor_value (external " +
                   (flags == XNN_VALUE_FLAG_EXTERNAL_INPUT ? "input" : "output") + " '" + name + "')");
  return id;
}

uint32_t SegmentBuilder::define_internal(const Dims& dims, const float* data) {
  uint32_t id = XNN_INVALID_VALUE_ID;
  check_define(xnn_define_tensor_value(sg_, xnn_datatype_fp32, dims.size(), dims.data(), data, XNN_INVALID_VALUE_ID,
                                       0, &id),
               where_ + (data ? ": xnn_define_tensor_value (static)" : ": xnn_define_tensor_value (internal)"));
  return id;
}

// ---- NodeCtx ----

uint32_t NodeCtx::input(size_t i) { return b_.value(node.inputs.at(i), layout); }
uint32_t NodeCtx::output(size_t i) { return b_.define_output(node.outputs.at(i), layout); }
uint32_t NodeCtx::temp(const Dims& dims) { return b_.define_internal(dims, nullptr); }

uint32_t NodeCtx::constant(std::vector<float> data, const Dims& dims) {
  b_.constants().push_back(std::move(data));
  return b_.define_internal(dims, b_.constants().back().data());
}

uint32_t NodeCtx::reshape(uint32_t id, const Dims& dims) {
  const uint32_t out = temp(dims);
  check(xnn_define_static_reshape(subgraph(), dims.size(), dims.data(), id, out, 0), "xnn_define_static_reshape");
  return out;
}

const core::Tensor& NodeCtx::weight(size_t i) const { return graph.initializers.at(node.inputs.at(i)); }

xnn_subgraph_t NodeCtx::subgraph() const { return b_.subgraph(); }

void NodeCtx::check(xnn_status s, const char* call) const {
  b_.note(call);
  check_define(s, b_.where() + ": " + call);
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

}  // namespace quorum::backends::xnnpack
