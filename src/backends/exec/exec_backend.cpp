// The exec backend: any external program as a library under test, with no rebuild. For every
// forward call Quorum writes model.onnx (the ONNX bridge's export) and input_<i>.npy into a fresh
// directory, runs PROGRAM ARGS... DIR, and reads output_<j>.npy back (program_session.h, the piece
// every runner-driven backend shares). The protocol, the options and which failure becomes which
// outcome are documented in docs/exec-backend.md.
//
// Options (--backends exec:OPT+OPT+...): leading timeout=SECONDS, opset=N and name=LABEL, then the
// program and its arguments, passed verbatim.
#include <sstream>

#include "backends/backend.h"
#include "backends/exec/exec_config.h"
#include "backends/exec/program_session.h"
#include "core/error.h"
#include "ir/onnx_io.h"

namespace quorum::backends::exec {
namespace {

const char* const kNeedProgram = "exec needs a program: --backends exec:PROGRAM+ARG...";

std::string seconds(double s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

class ExecBackend : public Backend {
 public:
  explicit ExecBackend(Config cfg) : cfg_(std::move(cfg)) {}

  std::string name() const override { return "exec"; }
  std::string version() const override {
    std::string command;
    for (const auto& a : cfg_.argv) command += (command.empty() ? "" : " ") + a;
    const std::string what = !cfg_.label.empty() ? cfg_.label : !command.empty() ? command : "no program";
    return what + " (exec: ONNX opset " + std::to_string(cfg_.opset) + ", time limit " + seconds(cfg_.time_limit_s) +
           " s" + (cfg_.persistent ? ", persistent" : "") + ")";
  }
  bool trains() const override { return false; }
  bool reads_exchange_form() const override { return true; }

  // Whatever the exporter can write: the program itself decides what it runs (exit status 3).
  Support supports(const ir::Graph& g, const ir::Node& n) const override {
    if (cfg_.argv.empty()) return Support::no(kNeedProgram);
    return exporter_support(g, n, cfg_.opset);
  }

  std::unique_ptr<Session> compile(const ir::Graph& g, const CompileOptions& opt) override {
    if (cfg_.argv.empty()) throw ConversionError(kNeedProgram);
    if (!core::is_float(opt.dtype)) throw ConversionError("exec: models compute in float32 or float64");
    ir::Graph typed = in_dtype(g, opt.dtype);
    const ir::OnnxForm form = onnx_form(cfg_, typed);
    std::string bytes = onnx_for_library(typed, form);
    ir::OnnxExported chosen = ir::onnx_forms(typed, form);
    const Runner runner = cfg_.runner();
    std::vector<std::string> env = runner_environment(runner, opt.threads);
    // One program for the worker's models, started again for another thread count.
    persistent_ = persistent_for(runner, env, persistent_);
    return std::make_unique<ProgramSession>(runner, std::move(typed), std::move(bytes), std::move(chosen),
                                            std::move(env), persistent_);
  }

 private:
  Config cfg_;
  std::shared_ptr<Persistent> persistent_;
};

}  // namespace
}  // namespace quorum::backends::exec

namespace quorum::backends {

std::unique_ptr<Backend> create_backend(const std::vector<std::string>& args) {
  return std::make_unique<exec::ExecBackend>(exec::parse(args));
}

}  // namespace quorum::backends
