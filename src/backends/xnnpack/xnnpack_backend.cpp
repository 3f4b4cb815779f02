// The XNNPACK backend: compiles a graph into XNNPACK 2022-02 subgraphs (xnn_define_* then
// xnn_create_runtime_v2 without a thread pool, so single-threaded), plus operator-API steps for
// the few operators the subgraph API lacks, and runs them in float32. Forward only. What runs how
// is decided by the lowering (lower.h: support rules, layouts, segments, definitions), which the
// reproducer writer shares; this backend drives it into the library sink (xnnpack_segment.cpp). The
// optimized run (CompileOptions::optimized) keeps only the values the host needs external, so
// xnn_create_runtime_v2 fuses through the rest, and names what it fused (lower_fusion.cpp).
#include <algorithm>
#include <mutex>

#include "backends/xnnpack/xnnpack_common.h"
#include "core/error.h"

#ifndef QUORUM_XNNPACK_PACKAGE_VERSION
#define QUORUM_XNNPACK_PACKAGE_VERSION "unknown"
#endif

namespace quorum::backends::xnnpack {

namespace {

class XnnpackSession : public Session {
 public:
  XnnpackSession(ir::Graph g, std::unique_ptr<ConstantStore> constants, std::vector<std::unique_ptr<Step>> steps,
                 LoweringLog lowering, bool optimized)
      : g_(std::move(g)),
        constants_(std::move(constants)),
        steps_(std::move(steps)),
        lowering_(std::move(lowering)),
        optimized_(optimized) {}

  std::map<std::string, std::vector<std::string>> lowering() const override { return lowering_.ops(); }

  ~XnnpackSession() override {
    steps_.clear();  // runtimes and operators first: they may point into the constants
  }

  ValueMap forward(const ValueMap& inputs, bool keep_intermediates) override {
    ValueMap values;
    // Float inputs in float32; a quantized (int8/uint8) input keeps its type, which its segment reads.
    for (const GraphInput& in : bind_graph_inputs(g_, inputs))
      values.emplace(in.info.name, core::is_quantized(in.info.type.dtype) ? in.value.to(in.info.type.dtype)
                                                                         : in.value.to(core::DType::F32));
    for (auto& step : steps_) step->run(values);
    // An optimized session's intermediates are internal to their subgraphs: only the graph outputs exist.
    const bool all = keep_intermediates && !optimized_;
    ValueMap out;
    for (const auto& n : g_.nodes)
      for (const auto& o : n.outputs)
        if (all || std::find(g_.outputs.begin(), g_.outputs.end(), o) != g_.outputs.end())
          out.emplace(o, values.at(o));
    return out;
  }

 private:
  ir::Graph g_;
  std::unique_ptr<ConstantStore> constants_;
  std::vector<std::unique_ptr<Step>> steps_;
  LoweringLog lowering_;
  bool optimized_;  // compiled for the optimized run: intermediates internal
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
    return std::string("XNNPACK ") + QUORUM_XNNPACK_PACKAGE_VERSION +
           " (Debian libxnnpack0, float32 and qs8/qu8, no thread pool)";
  }

  bool trains() const override { return false; }
  // xnn_create_runtime_v2 fuses clamps into their producers and zero pads into convolutions through
  // internal values, which the optimized lowering leaves it.
  bool optimizes() const override { return true; }

  Support supports(const ir::Graph& g, const ir::Node& n) const override { return xnnpack::supports(g, n); }

  std::unique_ptr<Session> compile(const ir::Graph& g, const CompileOptions& opt) override {
    if (opt.dtype != core::DType::F32)
      throw ConversionError("XNNPACK computes in float32 (or float16), it has no float64 operators");
    initialize_once();
    auto constants = std::make_unique<ConstantStore>();
    std::vector<std::unique_ptr<Step>> steps;
    LoweringLog lowering;
    {
      LibrarySink library(g, *constants, lowering);
      if (const Support s = lower_into(g, library, lowering, opt.optimized); !s.ok) throw ConversionError(s.reason);
      steps = library.finish();
    }
    return std::make_unique<XnnpackSession>(g, std::move(constants), std::move(steps), std::move(lowering),
                                            opt.optimized);
  }

 private:
  // Pinned: every node output external. Optimized: only the exposed ones, through the fusion model so
  // the lowering names what XNNPACK fuses.
  static Support lower_into(const ir::Graph& g, LibrarySink& library, LoweringLog& lowering, bool optimized) {
    if (!optimized) return lower(g, library);
    const std::set<std::string> exposed = exposed_values(g);
    const std::unique_ptr<Sink> sink = fusion_sink(library, lowering);
    return lower(g, *sink, &exposed);
  }
};

}  // namespace

std::vector<std::string> library_sink_calls(const ir::Graph& g) {
  initialize_once();
  std::vector<std::string> lines;
  ConstantStore constants;
  LoweringLog log;
  LibrarySink library(g, constants, log);
  const std::unique_ptr<Sink> sink = recording_sink(library, lines);
  try {
    if (const Support s = lower(g, *sink); !s.ok) lines.push_back("refused: " + s.reason);
  } catch (const ConversionError& e) {
    lines.push_back(std::string("library error: ") + e.what());
  }
  return lines;
}

}  // namespace quorum::backends::xnnpack

namespace quorum::backends {

std::unique_ptr<Backend> create_backend(const std::vector<std::string>& args) {
  if (!args.empty()) throw core::UserError("backend 'xnnpack' takes no options, got '" + args[0] + "'");
  return std::make_unique<xnnpack::XnnpackBackend>();
}

}  // namespace quorum::backends
