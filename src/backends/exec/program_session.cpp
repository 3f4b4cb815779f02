#include "backends/exec/program_session.h"

#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "backends/refusal.h"
#include "core/error.h"
#include "core/fileio.h"
#include "core/npy.h"
#include "core/signals.h"

namespace quorum::backends::exec {

namespace fs = std::filesystem;

namespace {

constexpr int kExitCannotLoad = 3;   // protocol: the program could not load/convert the model
constexpr int kExitUnsupported = 4;  // protocol: the program does not run an operator it names

std::string seconds(double s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

}  // namespace

std::vector<std::string> onnx_outputs(const ir::Graph& g, size_t& real) {
  std::vector<std::string> out;
  std::set<std::string> listed;
  for (const auto& o : g.outputs)
    if (listed.insert(o).second) out.push_back(o);
  real = out.size();
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs)
      if (listed.insert(o).second) out.push_back(o);
  return out;
}

ir::Graph in_dtype(ir::Graph g, core::DType dtype) {
  auto convert = [&](core::TensorType& t) {
    if (core::is_float(t.dtype)) t.dtype = dtype;
  };
  for (auto& in : g.inputs) convert(in.type);
  for (auto& [name, t] : g.types) convert(t);
  for (auto& [name, w] : g.initializers)
    if (core::is_float(w.dtype()) && w.dtype() != dtype) w = w.to(dtype);
  return g;
}

namespace {

// Node `n` alone: its computed inputs become graph inputs, its weights stay initializers. Named
// "model", not after `g`: the exporter's refusal names it, and a campaign learns refusals by text.
ir::Graph one_node(const ir::Graph& g, const ir::Node& n) {
  ir::Graph one;
  one.name = "model";
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

}  // namespace

Support exporter_support(const ir::Graph& g, const ir::Node& n, int opset) {
  try {
    ir::graph_to_onnx(one_node(g, n), opset);
  } catch (const core::UserError& e) {
    return Support::no(std::string("the ONNX exporter cannot write it: ") + e.what());
  }
  return Support::yes();
}

std::vector<std::string> runner_environment(const Runner& r, int threads) {
  const std::string n = std::to_string(std::max(1, threads));
  return environment_with({"QUORUM_THREADS=" + n, "OMP_NUM_THREADS=" + n,
                           std::string("QUORUM_EXEC_PROTOCOL=") + (r.persistent ? "persistent" : "per-model")});
}

std::shared_ptr<Persistent> persistent_for(const Runner& r, const std::vector<std::string>& env,
                                           std::shared_ptr<Persistent> held) {
  if (!r.persistent) return nullptr;
  if (held && held->env == env) return held;
  return std::make_shared<Persistent>(r, env);
}

ScratchDir::ScratchDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/quorum-exec-XXXXXX";
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("exec: cannot create a directory from " + tmpl);
  path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string ScratchDir::file(const std::string& name) const { return (fs::path(path_) / name).string(); }

// What the program said about one model: its status, and the message or output that goes with it.
struct ProgramSession::Reply {
  ProgramEnd end;        // Exited with the status (0: ok), Signaled or TimedOut
  bool answered = true;  // persistent mode: false when the program ended without answering
  std::string message;   // persistent mode: the text after the status on the answer line
  std::string tail;      // the program's output for this model (the end of its log)
};

ProgramSession::ProgramSession(Runner runner, ir::Graph g, std::string onnx, ir::OnnxExported form,
                               std::vector<std::string> env, std::shared_ptr<Persistent> persistent)
    : runner_(std::move(runner)),
      g_(std::move(g)),
      onnx_(std::move(onnx)),
      form_(std::move(form)),
      outputs_(onnx_outputs(g_, real_outputs_)),
      env_(std::move(env)),
      persistent_(std::move(persistent)) {}

std::map<std::string, std::vector<std::string>> ProgramSession::lowering() const {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& n : g_.nodes) {
    std::vector<std::string>& l = out[n.name];
    l.push_back("onnx opset " + std::to_string(form_.opset));
    if (const auto it = form_.forms.find(n.name); it != form_.forms.end()) l.push_back("onnx form " + it->second);
  }
  return out;
}

ValueMap ProgramSession::forward(const ValueMap& inputs, bool keep_intermediates) {
  ScratchDir dir;
  core::write_file_atomic(dir.file("model.onnx"), onnx_);
  for (const GraphInput& in : bind_graph_inputs(g_, inputs))
    core::write_npy(dir.file("input_" + std::to_string(in.index) + ".npy"), in.value.to(in.info.type.dtype));
  check(persistent_ ? ask(dir) : run(dir));
  after_run(dir);
  return read_outputs(dir, keep_intermediates);
}

// Per model: PROGRAM ARG... DIR, its output in DIR/runner.log.
ProgramSession::Reply ProgramSession::run(const ScratchDir& dir) const {
  std::vector<std::string> argv = runner_.argv;
  argv.push_back(dir.path());
  const std::string log = dir.file("runner.log");
  Reply r;
  r.end = run_program(argv, env_, log, runner_.time_limit_s);
  r.tail = file_tail(log);
  return r;
}

// Persistent: one request line (the directory), one answer line "STATUS [MESSAGE]".
ProgramSession::Reply ProgramSession::ask(const ScratchDir& dir) const {
  PersistentProgram& p = persistent_->program;
  const PersistentProgram::Answer a = p.ask(dir.path(), runner_.time_limit_s);
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
std::string ProgramSession::refusal(const Reply& r) const {
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
  // The program names an ONNX operator of the model it was given, at the opset it was written in.
  std::optional<Refusal> parsed = parse_refusal(line);
  const std::string why = "the program exited with status " + std::to_string(kExitUnsupported) + " (unsupported) but ";
  if (!parsed || parsed->onnx_opset != 0)
    throw ChildProcessError(ChildProcessError::Kind::Exit, kExitUnsupported,
                            why + "named no operator ('unsupported: OpType' or 'unsupported: OpType attr=value')",
                            r.tail);
  parsed->onnx_opset = form_.opset;
  const ir::OnnxSummary s = ir::onnx_summary(onnx_, "the model");
  if (std::find(s.op_types.begin(), s.op_types.end(), parsed->op) == s.op_types.end())
    throw ChildProcessError(ChildProcessError::Kind::Exit, kExitUnsupported,
                            why + "named " + parsed->op + ", which the model does not hold", r.tail);
  return parsed->str();
}

// Throws the outcome of a program that did not succeed.
void ProgramSession::check(const Reply& r) const {
  using K = ChildProcessError::Kind;
  const ProgramEnd& end = r.end;
  switch (end.how) {
    case ProgramEnd::How::TimedOut:
      throw ChildProcessError(
          K::Timeout, 0,
          "no answer within " + seconds(runner_.time_limit_s) + " s (the exec time limit); program killed", r.tail);
    case ProgramEnd::How::Signaled:
      throw ChildProcessError(K::Signal, end.code, core::signal_name(end.code), r.tail);
    case ProgramEnd::How::Exited:
      if (!r.answered)
        throw ChildProcessError(
            K::Exit, end.code,
            "the persistent program exited with status " + std::to_string(end.code) + " before answering", r.tail);
      if (end.code == 0) return;
      if (end.code == kExitUnsupported) throw UnsupportedError(refusal(r));
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
// may be; each must have the value's dtype and shape exactly. They are checked in the graph's order, so
// a wrong value is named where it first appears, not at a graph output it reaches (ONNX Runtime's dilated
// SAME MaxPool ten nodes above the Concat whose output the crash would have named, seed 10337).
ValueMap ProgramSession::read_outputs(const ScratchDir& dir, bool keep_intermediates) const {
  ValueMap out;
  const size_t wanted = keep_intermediates ? outputs_.size() : real_outputs_;
  std::map<std::string, size_t> index;
  for (size_t j = 0; j < wanted; ++j) index.emplace(outputs_[j], j);
  std::vector<size_t> order;
  for (const auto& n : g_.nodes)
    for (const auto& o : n.outputs)
      if (const auto it = index.find(o); it != index.end()) {
        order.push_back(it->second);
        index.erase(it);
      }
  for (const auto& [value, j] : index) order.push_back(j);  // a graph input listed as an output
  for (const size_t j : order) {
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

}  // namespace quorum::backends::exec
