// The ONNX Runtime backend: ONNX Runtime's CPU execution provider, the release the npm package
// onnxruntime-node ships (pinned in package.json; `make deps` installs it). The project's Node
// runner (runner.js) holds the library; the worker starts it once and sends it one model at a time
// through the exec protocol's persistent mode (program_session.h, shared with the exec backend):
// a crash, a hang past the time limit or a malformed answer is that model's outcome, and the next
// model starts the runner again.
//
// Every model is written in its seeded exchange form at an opset from 11 to 17, every node output a
// graph output (the pinned run). ORT's graph optimizations run at the variant's level (variant.h;
// default disabled); above disabled the runner also writes the optimized model, and each node's
// lowering names the ORT node that produced its output ("ort node FusedConv", "ort node
// com.microsoft.Gelu"): what ORT made of it. Inference only: onnxruntime-node has no training API.
#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>

#include "backends/backend.h"
#include "backends/exec/program_session.h"
#include "backends/ort/variant.h"
#include "core/error.h"
#include "core/fileio.h"
#include "ir/onnx_io.h"

namespace quorum::backends::ort {
namespace {

constexpr double kTimeLimit = 20;  // seconds per model; below the supervisor's --timeout (60)

// What ORT 1.30's CPU kernels refuse on purpose, with their own words; `form` is the node's exchange form.
Support declared_refusal(const ir::Graph& g, const ir::Node& n, const std::string& form) {
  // The integer form (ConvInteger / MatMulInteger, Cast, Mul, QuantizeLinear) runs every int8/uint8 combination
  // and output type (measured); its ConvInteger takes only a per-tensor weight zero point.
  const bool integer = ("," + form + ",").find(",qlinear=integer,") != std::string::npos;
  if (integer && n.op == "qlinear_conv2d" && n.attrs.count("w_zero_points") &&
      !core::attr_ints(n.attrs, "w_zero_points").empty())
    return Support::no("ORT 1.30's ConvInteger takes a per-tensor weight zero point only ('IsScalarOr1ElementVector"
                       "(W_Zero_Point)' at run time; ONNX allows one per output channel)");
  if (!integer && (n.op == "qlinear_conv2d" || n.op == "qlinear_matmul")) {
    const core::DType x = g.types.at(n.inputs[0]).dtype;
    if (x == core::DType::I8 && core::attr_s(n.attrs, "w_type") == "uint8")
      return Support::no("ORT 1.30 has no QLinearConv or QLinearMatMul kernel for an int8 input with uint8 weights "
                         "('Could not find an implementation for QLinearConv(10)' at load)");
    if (core::to_string(x) != core::attr_s(n.attrs, "to"))
      return Support::no("ORT 1.30's QLinearConv and QLinearMatMul kernels give the input's type (uint8 or int8): "
                         "another output type has no implementation at load");
  }
  if (n.op == "conv1d" || n.op == "conv2d" || n.op == "conv3d" || n.op == "qlinear_conv2d") {
    const std::string& pad = core::attr_s(n.attrs, "auto_pad");
    const auto& d = core::attr_ints(n.attrs, "dilations");
    if ((pad == "SAME_UPPER" || pad == "SAME_LOWER") &&
        std::any_of(d.begin(), d.end(), [](int64_t v) { return v != 1; }))
      return Support::no(
          "ORT 1.30's Conv and QLinearConv: 'Dilation not supported for AutoPadType::SAME_UPPER or "
          "AutoPadType::SAME_LOWER' (a run-time error for any dilation other than 1)");
  }
  if (n.op == "lrn" && core::attr_i(n.attrs, "size") % 2 == 0)
    return Support::no("ORT 1.30's LRN kernel requires an odd size (lrn.h: 'size_ % 2 == 1 was false' at load)");
  return Support::yes();
}

// The "version" field of a package.json (the backend checked that it exists), "" when there is none.
std::string package_version(const std::string& package_json) {
  const std::string text = core::read_file(package_json);
  const size_t key = text.find("\"version\"");
  if (key == std::string::npos) return "";
  const size_t open = text.find('"', text.find(':', key) + 1);
  const size_t close = open == std::string::npos ? open : text.find('"', open + 1);
  return close == std::string::npos ? "" : text.substr(open + 1, close - open - 1);
}

class OrtSession : public exec::ProgramSession {
 public:
  using ProgramSession::ProgramSession;

  // An optimized run's session: `written` the [domain.]OpType of every node of the model as written, so
  // the optimized model's nodes of other types are what ORT's optimizer made ("fused com.microsoft.FusedConv").
  void set_written_ops(std::set<std::string> written) { written_ = std::move(written); }

  // The exchange form read, then what ORT's optimizer made of the node: the node of the optimized
  // model that writes each of its outputs (a node ORT left alone names its own ONNX operator).
  std::map<std::string, std::vector<std::string>> lowering() const override {
    std::map<std::string, std::vector<std::string>> out = ProgramSession::lowering();
    for (const auto& n : graph().nodes) {
      std::vector<std::string>& l = out[n.name];
      for (const auto& o : n.outputs)
        if (const auto it = producer_.find(o); it != producer_.end()) {
          if (std::find(l.begin(), l.end(), it->second) == l.end()) l.push_back(it->second);
          const std::string type = it->second.substr(std::string("ort node ").size());
          const std::string fused = kFusedPrefix + type;
          if (written_ && !written_->count(type) && std::find(l.begin(), l.end(), fused) == l.end())
            l.push_back(fused);
        }
    }
    return out;
  }

 protected:
  void after_run(const exec::ScratchDir& dir) override {
    const std::string optimized = dir.file("optimized.onnx");
    if (!std::filesystem::exists(optimized)) return;  // level disabled: the model as written
    const std::string bytes = core::read_file(optimized);
    const ir::OnnxSummary s = ir::onnx_summary(bytes, "ONNX Runtime's optimized model");
    producer_.clear();
    for (size_t i = 0; i < s.op_types.size(); ++i)
      for (const auto& o : s.outputs[i])
        producer_[o] = "ort node " + (s.domains[i].empty() ? "" : s.domains[i] + ".") + s.op_types[i];
  }

 private:
  std::map<std::string, std::string> producer_;  // value -> "ort node [domain.]OpType" in the optimized model
  std::optional<std::set<std::string>> written_;  // an optimized run's: the model's own operator types
};

// The [domain.]OpType of every node of an ONNX model.
std::set<std::string> op_types(const std::string& bytes) {
  const ir::OnnxSummary s = ir::onnx_summary(bytes, "the model written for ONNX Runtime");
  std::set<std::string> out;
  for (size_t i = 0; i < s.op_types.size(); ++i)
    out.insert((s.domains[i].empty() ? "" : s.domains[i] + ".") + s.op_types[i]);
  return out;
}

class OrtBackend : public Backend {
 public:
  explicit OrtBackend(Variant v) : variant_(std::move(v)) {
    if (const std::string missing = missing_install(QUORUM_ORT_DIR); !missing.empty()) throw core::UserError(missing);
    node_ = exec::resolve_program("node");
    if (node_.empty())
      throw core::UserError("backend 'ort': no `node` on $PATH (Node.js 20 runs ONNX Runtime's runner)");
    loaded_ = package_version(modules_dir(QUORUM_ORT_DIR) + "/onnxruntime-node/package.json");
  }

  std::string name() const override { return "ort"; }
  std::string version() const override {
    std::ostringstream os;
    os << "ONNX Runtime " << (loaded_.empty() ? "(unknown version)" : loaded_) << " (onnxruntime-node, CPU execution "
       << "provider, inference only, graph optimization level " << variant_.level;
    if (variant_.threads) os << ", " << variant_.threads << " threads";
    if (!variant_.arena) os << ", arena off";
    if (variant_.parallel) os << ", parallel execution mode";
    os << ", ONNX "
       << (variant_.opset ? "opset " + std::to_string(variant_.opset)
                          : "opsets " + std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset))
       << " in seeded exchange forms)";
    return os.str();
  }
  bool trains() const override { return false; }
  bool reads_exchange_form() const override { return true; }
  // The optimized run: graphOptimizationLevel 'all', only the graph's outputs in the model.
  bool optimizes() const override { return true; }

  // Whatever the exporter can write, less what ORT 1.30 refuses by design (declared below, each measured
  // by the agreement test); what it lacks (a kernel for an operator, or for a type) the runner answers
  // as unsupported, naming the ONNX operator, and the campaign learns it.
  Support supports(const ir::Graph& g, const ir::Node& n) const override {
    std::string form;
    if (n.op == "qlinear_conv2d" || n.op == "qlinear_matmul") {
      try {
        const auto forms = ir::onnx_forms(g, onnx_form(g, variant_)).forms;
        if (const auto it = forms.find(n.name); it != forms.end()) form = it->second;
      } catch (const core::UserError&) {  // the exporter refuses the model (another node, maybe): its reason
        return exec::exporter_support(g, n, onnx_form(g, variant_).opset);
      }
    }
    if (Support s = declared_refusal(g, n, form); !s.ok) return s;
    return exec::exporter_support(g, n, onnx_form(g, variant_).opset);
  }

  std::unique_ptr<Session> compile(const ir::Graph& g, const CompileOptions& opt) override {
    if (!core::is_float(opt.dtype)) throw ConversionError("ort: models compute in float32 or float64");
    Variant v = variant_;
    if (opt.optimized) v.level = "all";
    ir::Graph typed = exec::in_dtype(g, opt.dtype);
    ir::OnnxForm form = onnx_form(typed, v);
    form.outputs_only = opt.optimized;
    std::string bytes = onnx_for_library(typed, form);
    ir::OnnxExported chosen = ir::onnx_forms(typed, form);
    exec::Runner runner;
    runner.argv = {node_, std::string(QUORUM_ORT_DIR) + "/runner.js"};
    for (const auto& o : runner_options(v)) runner.argv.push_back(o);
    runner.time_limit_s = kTimeLimit;
    runner.persistent = true;
    std::vector<std::string> env = exec::runner_environment(runner, opt.threads);
    // The optimized run keeps a runner of its own (other options), so neither restarts the other's.
    std::shared_ptr<exec::Persistent>& persistent = opt.optimized ? optimized_persistent_ : persistent_;
    persistent = exec::persistent_for(runner, env, persistent);
    std::set<std::string> written;
    if (opt.optimized) written = op_types(bytes);
    auto s = std::make_unique<OrtSession>(runner, std::move(typed), std::move(bytes), std::move(chosen),
                                          std::move(env), persistent);
    if (opt.optimized) s->set_written_ops(std::move(written));
    return s;
  }

 private:
  Variant variant_;
  std::string node_, loaded_;
  std::shared_ptr<exec::Persistent> persistent_;  // the worker's runner
  std::shared_ptr<exec::Persistent> optimized_persistent_;  // the optimized run's
};

}  // namespace
}  // namespace quorum::backends::ort

namespace quorum::backends {

std::unique_ptr<Backend> create_backend(const std::vector<std::string>& args) {
  return std::make_unique<ort::OrtBackend>(ort::parse_variant(args));
}

}  // namespace quorum::backends
