// The exec backend: any external program as a library under test, with no rebuild. For every
// forward call Quorum writes model.onnx (the ONNX bridge's export) and input_<i>.npy into a fresh
// directory, runs PROGRAM ARGS... DIR, and reads output_<j>.npy back. The protocol, the options and
// which failure becomes which outcome are documented in docs/exec-backend.md.
//
// Options (--backends exec:OPT+OPT+...): leading timeout=SECONDS, opset=N and name=LABEL, then the
// program and its arguments, passed verbatim.
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "backends/backend.h"
#include "backends/exec/exec_config.h"
#include "backends/exec/run_program.h"
#include "core/error.h"
#include "core/fileio.h"
#include "core/npy.h"
#include "core/signals.h"
#include "ir/onnx_io.h"

namespace quorum::backends::exec {
namespace {

namespace fs = std::filesystem;

constexpr int kExitCannotLoad = 3;        // protocol: the program could not load/convert the model
const char* const kNeedProgram = "exec needs a program: --backends exec:PROGRAM+ARG...";

std::string seconds(double s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

// The graph with every floating-point value in `dtype`: the model the program receives computes in
// the session's precision.
ir::Graph in_dtype(ir::Graph g, core::DType dtype) {
  auto convert = [&](core::TensorType& t) {
    if (t.dtype != core::DType::I64) t.dtype = dtype;
  };
  for (auto& in : g.inputs) convert(in.type);
  for (auto& [name, t] : g.types) convert(t);
  for (auto& [name, w] : g.initializers)
    if (w.dtype() != core::DType::I64 && w.dtype() != dtype) w = w.to(dtype);
  return g;
}


// Node `n` alone: its computed inputs become graph inputs, its weights stay initializers.
ir::Graph one_node(const ir::Graph& g, const ir::Node& n) {
  ir::Graph one;
  one.name = g.name;
  for (const auto& v : n.inputs) {
    if (one.types.count(v)) continue;
    one.types.emplace(v, g.types.at(v));
    if (g.is_initializer(v)) one.initializers.emplace(v, g.initializers.at(v));
    else one.inputs.push_back({v, g.types.at(v)});
  }
  for (const auto& o : n.outputs) {
    one.types.emplace(o, g.types.at(o));
    one.outputs.push_back(o);
  }
  one.nodes.push_back(n);
  return one;
}

// A fresh private directory under $TMPDIR (or /tmp), removed with this object.
class ScratchDir {
 public:
  ScratchDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/quorum-exec-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("exec: cannot create a directory from " + tmpl);
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

class ExecSession : public Session {
 public:
  ExecSession(const Config& cfg, ir::Graph g, std::string onnx, int threads)
      : cfg_(cfg),
        g_(std::move(g)),
        onnx_(std::move(onnx)),
        outputs_(onnx_outputs(g_, real_outputs_)),
        env_(environment_with(
            {"QUORUM_THREADS=" + std::to_string(threads), "OMP_NUM_THREADS=" + std::to_string(threads)})) {}

  ValueMap forward(const ValueMap& inputs, bool keep_intermediates) override {
    ScratchDir dir;
    core::write_file_atomic(dir.file("model.onnx"), onnx_);
    for (const GraphInput& in : bind_graph_inputs(g_, inputs))
      core::write_npy(dir.file("input_" + std::to_string(in.index) + ".npy"), in.value.to(in.info.type.dtype));
    std::vector<std::string> argv = cfg_.argv;
    argv.push_back(dir.path().string());
    const std::string log = dir.file("runner.log");
    const ProgramEnd end = run_program(argv, env_, log, cfg_.time_limit_s);
    check_end(end, log);
    return read_outputs(dir, keep_intermediates);
  }

 private:
  // Throws the outcome of a program that did not exit with status 0.
  void check_end(const ProgramEnd& end, const std::string& log) const {
    using K = ChildProcessError::Kind;
    switch (end.how) {
      case ProgramEnd::How::TimedOut:
        throw ChildProcessError(K::Timeout, 0,
                                "no answer within " + seconds(cfg_.time_limit_s) +
                                    " s (the exec time limit); program killed",
                                file_tail(log));
      case ProgramEnd::How::Signaled:
        throw ChildProcessError(K::Signal, end.code, core::signal_name(end.code), file_tail(log));
      case ProgramEnd::How::Exited:
        if (end.code == 0) return;
        if (end.code == kExitCannotLoad) {
          std::string last = file_tail(log);
          if (const auto nl = last.rfind('\n'); nl != std::string::npos) last = last.substr(nl + 1);
          throw ConversionError("the program could not load the model (exit status 3)" +
                                (last.empty() ? "" : ": " + last));
        }
        throw ChildProcessError(K::Exit, end.code, "the program exited with status " + std::to_string(end.code),
                                file_tail(log));
    }
  }

  // output_<j>.npy for the j-th ONNX graph output: the real outputs must be there, intermediates
  // may be; each must have the value's dtype and shape exactly.
  ValueMap read_outputs(const ScratchDir& dir, bool keep_intermediates) const {
    ValueMap out;
    const size_t wanted = keep_intermediates ? outputs_.size() : real_outputs_;
    for (size_t j = 0; j < wanted; ++j) {
      const std::string& value = outputs_[j];
      const std::string file = "output_" + std::to_string(j) + ".npy";
      const std::string what = file + " (value '" + value + "')";
      std::ifstream in(dir.file(file), std::ios::binary);
      if (!in) {
        if (j < real_outputs_) throw std::runtime_error("the program wrote no " + what + ", a graph output");
        continue;
      }
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      core::Tensor t = core::parse_npy(bytes, what);
      const core::TensorType& want = g_.types.at(value);
      if (t.dtype() != want.dtype)
        throw std::runtime_error(what + ": dtype " + core::to_string(t.dtype()) + ", the model's is " +
                                 core::to_string(want.dtype));
      if (t.shape() != want.shape)
        throw std::runtime_error(what + ": shape " + core::to_string(t.shape()) + ", the model's is " +
                                 core::to_string(want.shape));
      out.emplace(value, std::move(t));
    }
    return out;
  }

  Config cfg_;
  ir::Graph g_;
  std::string onnx_;
  size_t real_outputs_ = 0;
  std::vector<std::string> outputs_;
  std::vector<std::string> env_;  // the worker's, with the thread count for the program's libraries
};

class ExecBackend : public Backend {
 public:
  explicit ExecBackend(Config cfg) : cfg_(std::move(cfg)) {}

  std::string name() const override { return "exec"; }
  std::string version() const override {
    std::string command;
    for (const auto& a : cfg_.argv) command += (command.empty() ? "" : " ") + a;
    const std::string what = !cfg_.label.empty() ? cfg_.label : !command.empty() ? command : "no program";
    return what + " (exec: ONNX opset " + std::to_string(cfg_.opset) + ", time limit " +
           seconds(cfg_.time_limit_s) + " s)";
  }
  bool trains() const override { return false; }

  // Whatever the exporter can write: the program itself decides what it runs (exit status 3).
  Support supports(const ir::Graph& g, const ir::Node& n) const override {
    if (cfg_.argv.empty()) return Support::no(kNeedProgram);
    try {
      ir::graph_to_onnx(one_node(g, n), cfg_.opset);
    } catch (const core::UserError& e) {
      return Support::no(std::string("the ONNX exporter cannot write it: ") + e.what());
    }
    return Support::yes();
  }

  std::unique_ptr<Session> compile(const ir::Graph& g, const CompileOptions& opt) override {
    if (cfg_.argv.empty()) throw ConversionError(kNeedProgram);
    if (opt.dtype == core::DType::I64) throw ConversionError("exec: models compute in float32 or float64");
    ir::Graph typed = in_dtype(g, opt.dtype);
    std::string bytes = onnx_for_library(typed, cfg_.opset);
    return std::make_unique<ExecSession>(cfg_, std::move(typed), std::move(bytes), std::max(1, opt.threads));
  }

 private:
  Config cfg_;
};

}  // namespace
}  // namespace quorum::backends::exec

namespace quorum::backends {

std::unique_ptr<Backend> create_backend(const std::vector<std::string>& args) {
  return std::make_unique<exec::ExecBackend>(exec::parse(args));
}

}  // namespace quorum::backends
