// The exec backend: any external program as a library under test, with no rebuild. For every
// forward call Quorum writes model.onnx (the ONNX bridge's export) and input_<i>.npy into a fresh
// directory, runs PROGRAM ARGS... DIR, and reads output_<j>.npy back. The protocol, the options and
// which failure becomes which outcome are documented in docs/exec-backend.md.
//
// Options (--backends exec:OPT+OPT+...): leading timeout=SECONDS, opset=N and name=LABEL, then the
// program and its arguments, passed verbatim.
#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "backends/backend.h"
#include "backends/refusal.h"
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

constexpr int kExitCannotLoad = 3;    // protocol: the program could not load/convert the model
constexpr int kExitUnsupported = 4;   // protocol: the program does not run an operator it names
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

// The persistent program of one worker (the `persistent` option).
struct Persistent {
  Persistent(const Config& cfg, std::vector<std::string> env) : env(env), program(cfg.argv, std::move(env)) {}
  std::vector<std::string> env;
  PersistentProgram program;
};

// What the program said about one model: its status, and the message or output that goes with it.
struct Reply {
  ProgramEnd end;        // Exited with the status (0: ok), Signaled or TimedOut
  bool answered = true;  // persistent mode: false when the program ended without answering
  std::string message;   // persistent mode: the text after the status on the answer line
  std::string tail;      // the program's output for this model (the end of its log)
};

class ExecSession : public Session {
 public:
  ExecSession(const Config& cfg, ir::Graph g, std::string onnx, ir::OnnxExported form, std::vector<std::string> env,
              std::shared_ptr<Persistent> persistent)
      : cfg_(cfg),
        g_(std::move(g)),
        onnx_(std::move(onnx)),
        form_(std::move(form)),
        outputs_(onnx_outputs(g_, real_outputs_)),
        env_(std::move(env)),
        persistent_(std::move(persistent)) {}

  // What the program read, per node: "onnx opset N" and its exchange form ("onnx form what=form,...").
  std::map<std::string, std::vector<std::string>> lowering() const override {
    std::map<std::string, std::vector<std::string>> out;
    for (const auto& n : g_.nodes) {
      std::vector<std::string>& l = out[n.name];
      l.push_back("onnx opset " + std::to_string(form_.opset));
      if (const auto it = form_.forms.find(n.name); it != form_.forms.end()) l.push_back("onnx form " + it->second);
    }
    return out;
  }

  ValueMap forward(const ValueMap& inputs, bool keep_intermediates) override {
    ScratchDir dir;
    core::write_file_atomic(dir.file("model.onnx"), onnx_);
    for (const GraphInput& in : bind_graph_inputs(g_, inputs))
      core::write_npy(dir.file("input_" + std::to_string(in.index) + ".npy"), in.value.to(in.info.type.dtype));
    check(persistent_ ? ask(dir) : run(dir));
    return read_outputs(dir, keep_intermediates);
  }

 private:
  // Per model: PROGRAM ARG... DIR, its output in DIR/runner.log.
  Reply run(const ScratchDir& dir) const {
    std::vector<std::string> argv = cfg_.argv;
    argv.push_back(dir.path().string());
    const std::string log = dir.file("runner.log");
    Reply r;
    r.end = run_program(argv, env_, log, cfg_.time_limit_s);
    r.tail = file_tail(log);
    return r;
  }

  // Persistent: one request line (the directory), one answer line "STATUS [MESSAGE]".
  Reply ask(const ScratchDir& dir) const {
    PersistentProgram& p = persistent_->program;
    const PersistentProgram::Answer a = p.ask(dir.path().string(), cfg_.time_limit_s);
    Reply r;
    r.tail = a.tail;
    if (!a.answered) {
      r.answered = false;
      r.end = a.end;
      return r;
    }
    const std::string& line = a.line;
    size_t digits = 0;
    while (digits < line.size() && digits < 3 && std::isdigit(static_cast<unsigned char>(line[digits]))) ++digits;
    if (digits == 0 || (digits < line.size() && line[digits] != ' ')) {
      p.stop();  // out of step with its answers: started again for the next model
      throw std::runtime_error("the persistent program's answer is not 'STATUS [MESSAGE]': '" + line.substr(0, 200) +
                               "' (is something printing to its stdout?)");
    }
    r.end.how = ProgramEnd::How::Exited;
    r.end.code = std::stoi(line.substr(0, digits));
    r.message = digits < line.size() ? line.substr(digits + 1) : "";
    return r;
  }

  // The refusal an "unsupported" status names: the persistent answer's message, or the last line
  // of the program's output that starts with "unsupported: ".
  Refusal refusal(const Reply& r) const {
    std::string line = r.message;
    if (!persistent_) {
      for (size_t end = r.tail.size(); end > 0;) {
        const size_t start = r.tail.rfind('\n', end - 1);
        const size_t from = start == std::string::npos ? 0 : start + 1;
        const std::string l = r.tail.substr(from, end - from);
        if (l.rfind("unsupported: ", 0) == 0) {
          line = l;
          break;
        }
        if (start == std::string::npos) break;
        end = start;
      }
    }
    // The program names an ONNX operator of the model it was given, at this backend's opset.
    std::optional<Refusal> parsed = parse_refusal(line);
    const std::string why = "the program exited with status " + std::to_string(kExitUnsupported) +
                            " (unsupported) but ";
    if (!parsed || parsed->onnx_opset != 0)
      throw ChildProcessError(ChildProcessError::Kind::Exit, kExitUnsupported,
                              why + "named no operator ('unsupported: OpType' or 'unsupported: OpType attr=value')",
                              r.tail);
    parsed->onnx_opset = cfg_.opset;
    const ir::OnnxSummary s = ir::onnx_summary(onnx_, "the model");
    if (std::find(s.op_types.begin(), s.op_types.end(), parsed->op) == s.op_types.end())
      throw ChildProcessError(ChildProcessError::Kind::Exit, kExitUnsupported,
                              why + "named " + parsed->op + ", which the model does not hold", r.tail);
    return *parsed;
  }

  // Throws the outcome of a program that did not succeed.
  void check(const Reply& r) const {
    using K = ChildProcessError::Kind;
    const ProgramEnd& end = r.end;
    switch (end.how) {
      case ProgramEnd::How::TimedOut:
        throw ChildProcessError(K::Timeout, 0,
                                "no answer within " + seconds(cfg_.time_limit_s) +
                                    " s (the exec time limit); program killed",
                                r.tail);
      case ProgramEnd::How::Signaled:
        throw ChildProcessError(K::Signal, end.code, core::signal_name(end.code), r.tail);
      case ProgramEnd::How::Exited:
        if (!r.answered)
          throw ChildProcessError(K::Exit, end.code,
                                  "the persistent program exited with status " + std::to_string(end.code) +
                                      " before answering",
                                  r.tail);
        if (end.code == 0) return;
        if (end.code == kExitUnsupported) throw UnsupportedError(refusal(r).str());
        if (end.code == kExitCannotLoad) {
          std::string last = persistent_ ? r.message : r.tail;
          if (const auto nl = last.rfind('\n'); nl != std::string::npos) last = last.substr(nl + 1);
          throw ConversionError("the program could not load the model (exit status 3)" +
                                (last.empty() ? "" : ": " + last));
        }
        throw ChildProcessError(K::Exit, end.code,
                                (persistent_ ? "the program answered status " : "the program exited with status ") +
                                    std::to_string(end.code) + (r.message.empty() ? "" : ": " + r.message),
                                r.tail);
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
  ir::OnnxExported form_;  // the opset and forms, without the bytes
  size_t real_outputs_ = 0;
  std::vector<std::string> outputs_;
  std::vector<std::string> env_;  // the worker's, with the thread count for the program's libraries
  std::shared_ptr<Persistent> persistent_;  // the worker's program, in persistent mode
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
           seconds(cfg_.time_limit_s) + " s" + (cfg_.persistent ? ", persistent" : "") + ")";
  }
  bool trains() const override { return false; }
  bool reads_exchange_form() const override { return true; }

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
    const ir::OnnxForm form = onnx_form(cfg_, typed);
    std::string bytes = onnx_for_library(typed, form);
    ir::OnnxExported chosen = ir::onnx_forms(typed, form);
    const std::string threads = std::to_string(std::max(1, opt.threads));
    std::vector<std::string> env = environment_with(
        {"QUORUM_THREADS=" + threads, "OMP_NUM_THREADS=" + threads,
         std::string("QUORUM_EXEC_PROTOCOL=") + (cfg_.persistent ? "persistent" : "per-model")});
    // One program for the worker's models, started again for another thread count.
    if (cfg_.persistent && (!persistent_ || persistent_->env != env))
      persistent_ = std::make_shared<Persistent>(cfg_, env);
    return std::make_unique<ExecSession>(cfg_, std::move(typed), std::move(bytes), std::move(chosen), std::move(env),
                                         persistent_);
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
