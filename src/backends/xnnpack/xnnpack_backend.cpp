// The XNNPACK backend: compiles a graph into XNNPACK 2022-02 subgraphs (xnn_define_* then
// xnn_create_runtime_v2 without a thread pool, so single-threaded), plus operator-API steps for
// the few operators the subgraph API lacks, and runs them in float32. Forward only. Each operator
// family lives in its own ops_*.cpp and registers its support rule, layout and definition here.
#include <algorithm>
#include <mutex>

#include "backends/xnnpack/xnnpack_common.h"
#include "core/error.h"

#ifndef QUORUM_XNNPACK_PACKAGE_VERSION
#define QUORUM_XNNPACK_PACKAGE_VERSION "unknown"
#endif

namespace quorum::backends::xnnpack {

const OpTable& op_table() {
  static const OpTable table = [] {
    OpTable t;
    register_conv_pool(t);
    register_elementwise(t);
    register_shape(t);
    return t;
  }();
  return table;
}

namespace {

// XNN_MAX_TENSOR_DIMS in XNNPACK's private headers.
constexpr size_t kMaxRank = 6;

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
    r["categorical_hinge"] = "not mapped: XNNPACK 2022-02 has no reduction operators (only pooling) to build its masked max and sum";
    r["transpose"] = "XNNPACK 2022-02 has no transpose operator (static transpose came later)";
    r["slice"] = "XNNPACK 2022-02 has no slice operator";
    r["resize_nearest"] = "XNNPACK 2022-02 resizes only bilinearly";
    r["reduce_prod"] = "XNNPACK 2022-02 has no product reduction";
    r["layer_norm"] = "XNNPACK 2022-02 has no normalisation operator";
    r["lrn"] = "XNNPACK 2022-02 has no cross-channel normalisation";
    for (const char* op : {"gru", "lstm", "simple_rnn"}) r[op] = "XNNPACK 2022-02 has no recurrent operators";
    return r;
  }();
  return m;
}

class XnnpackSession : public Session {
 public:
  XnnpackSession(ir::Graph g, std::unique_ptr<ConstantStore> constants, std::vector<std::unique_ptr<Step>> steps,
                 LoweringLog lowering)
      : g_(std::move(g)), constants_(std::move(constants)), steps_(std::move(steps)), lowering_(std::move(lowering)) {}

  std::map<std::string, std::vector<std::string>> lowering() const override { return lowering_.ops(); }

  ~XnnpackSession() override {
    steps_.clear();  // runtimes and operators first: they may point into the constants
  }

  ValueMap forward(const ValueMap& inputs, bool keep_intermediates) override {
    ValueMap values;
    for (const GraphInput& in : bind_graph_inputs(g_, inputs)) values.emplace(in.info.name, in.value.to(core::DType::F32));
    for (auto& step : steps_) step->run(values);
    ValueMap out;
    for (const auto& n : g_.nodes)
      for (const auto& o : n.outputs)
        if (keep_intermediates || std::find(g_.outputs.begin(), g_.outputs.end(), o) != g_.outputs.end())
          out.emplace(o, values.at(o));
    return out;
  }

 private:
  ir::Graph g_;
  std::unique_ptr<ConstantStore> constants_;
  std::vector<std::unique_ptr<Step>> steps_;
  LoweringLog lowering_;
};

void initialize_once() {
  static std::once_flag once;
  static xnn_status status = xnn_status_success;
  std::call_once(once, [] { status = xnn_initialize(nullptr); });
  check_define(status, "xnn_initialize");
}

class XnnpackBackend : public Backend {
 public:
  std::string name() const override { return "xnnpack"; }

  // XNNPACK has no version function; the Debian package version is read at configure time.
  std::string version() const override {
    return std::string("XNNPACK ") + QUORUM_XNNPACK_PACKAGE_VERSION + " (Debian libxnnpack0, float32, no thread pool)";
  }

  bool trains() const override { return false; }

  Support supports(const ir::Graph& g, const ir::Node& n) const override {
    for (const auto& v : n.inputs) {
      const core::TensorType& t = g.types.at(v);
      if (t.dtype == core::DType::I64) return Support::no("XNNPACK float32 operators cannot take int64 input '" + v + "'");
      if (t.shape.size() > kMaxRank)
        return Support::no("XNNPACK tensors have at most 6 dims, '" + v + "' has " + std::to_string(t.shape.size()));
    }
    for (const auto& v : n.outputs)
      if (g.types.at(v).shape.size() > kMaxRank)
        return Support::no("XNNPACK tensors have at most 6 dims, '" + v + "' has more");
    // Filters, biases and batch_norm statistics are packed when the subgraph is defined.
    if (Support w = constant_weights(g, n, "XNNPACK"); !w.ok) return w;
    const auto it = op_table().find(n.op);
    if (it == op_table().end()) {
      const auto why = missing_reasons().find(n.op);
      return Support::no(why != missing_reasons().end() ? why->second
                                                          : "XNNPACK 2022-02 has no operator for '" + n.op + "'");
    }
    return it->second.supports ? it->second.supports(g, n) : Support::yes();
  }

  std::unique_ptr<Session> compile(const ir::Graph& g, const CompileOptions& opt) override {
    if (opt.dtype != core::DType::F32)
      throw ConversionError("XNNPACK computes in float32 (or float16), it has no float64 operators");
    initialize_once();
    auto constants = std::make_unique<ConstantStore>();
    std::vector<std::unique_ptr<Step>> steps;
    LoweringLog lowering;
    {
      SegmentBuilder builder(g, *constants, lowering);
      for (const auto& n : g.nodes) {
        const Support s = supports(g, n);
        if (!s.ok) throw ConversionError("node '" + n.name + "' (" + n.op + "): " + s.reason);
        builder.add_node(n, op_table().at(n.op));
      }
      steps = builder.finish();
    }
    return std::make_unique<XnnpackSession>(g, std::move(constants), std::move(steps), std::move(lowering));
  }
};

}  // namespace
}  // namespace quorum::backends::xnnpack

namespace quorum::backends {

std::unique_ptr<Backend> create_backend(const std::vector<std::string>& args) {
  if (!args.empty()) throw core::UserError("backend 'xnnpack' takes no options, got '" + args[0] + "'");
  return std::make_unique<xnnpack::XnnpackBackend>();
}

}  // namespace quorum::backends
