// The backend interface: one narrow contract every library implements in its own folder
// (src/backends/<name>/). Library quirks — layouts, padding conventions, unsupported attributes —
// live there, never in shared code. Backends run inside worker processes (src/worker/): a library
// that crashes, aborts or hangs takes down only its worker.
#pragma once
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/optimizer.h"
#include "core/tensor.h"
#include "ir/graph.h"

namespace quorum::ir {
struct OnnxForm;
}

namespace quorum::backends {

using core::Tensor;
using ValueMap = std::map<std::string, Tensor>;

// The library refused to build the model (a conversion / compile failure finding).
class ConversionError : public std::runtime_error {
 public:
  explicit ConversionError(const std::string& m) : std::runtime_error(m) {}
};

// The backend finds, building the model, that it cannot express it (Quorum's ONNX exporter has no
// form for a node's attributes at the opset the library reads): an abstention with the reason, as
// if supports() had said no, never a finding or an internal error.
class UnsupportedError : public std::runtime_error {
 public:
  explicit UnsupportedError(const std::string& m) : std::runtime_error(m) {}
};

// Quorum's own code failed inside a backend (the ONNX exporter refused a catalogue model): a defect
// of Quorum's, reported as such and never as the library's finding.
class QuorumError : public std::runtime_error {
 public:
  explicit QuorumError(const std::string& m) : std::runtime_error(m) {}
};

// The ONNX bytes a backend that reads ONNX (OpenCV, exec) gives its library: Quorum's exporter at
// `opset`. What the exporter cannot express (it refuses with a reason: a user-level error) is
// UnsupportedError, an abstention; any other failure of the exporter is QuorumError.
std::string onnx_for_library(const ir::Graph& g, int opset);
// The same in an exchange form (ir::OnnxForm: the opset and the seeded form of every node).
std::string onnx_for_library(const ir::Graph& g, const ir::OnnxForm& form);

// A child process the backend runs for the library (the exec backend's program) failed. The worker
// reports it the way it reports the same failure of itself: Crash on a signal, Timeout, and
// LibraryError for a non-zero exit status (src/worker/serve.cpp).
class ChildProcessError : public std::runtime_error {
 public:
  enum class Kind { Signal, Timeout, Exit };
  // `message` says what happened ("SIGSEGV", "no answer within 2 s; ...", "exited with status 1").
  ChildProcessError(Kind kind, int code, const std::string& message, std::string output_tail)
      : std::runtime_error(message), kind(kind), code(code), output_tail(std::move(output_tail)) {}
  Kind kind;
  int code;                 // the signal number (Signal) or the exit status (Exit); 0 for Timeout
  std::string output_tail;  // the last lines the child wrote to stdout and stderr
};

struct Support {
  bool ok = true;
  std::string reason;  // why not, when !ok
  static Support yes() { return {}; }
  static Support no(std::string why) { return {false, std::move(why)}; }
};

struct CompileOptions {
  core::DType dtype = core::DType::F32;  // the precision the library computes in
  int threads = 1;
  // The optimized run: only the graph's outputs will be asked for (forward without intermediates), and the
  // library compiles the model the way an application does, its optimizer free to fuse and fold (no
  // intermediate output layers or external values). Its session's lowering names what the optimizer did,
  // each entry "fused ..." (backends/backend.h kFusedPrefix).
  bool optimized = false;
};

// The lowering entries of an optimized session that name what the library's optimizer did ("fused
// Convolution+ReLU", "fused com.microsoft.FusedConv"): the optimized stage's signature is keyed by them.
inline constexpr const char* kFusedPrefix = "fused ";
// What a lowering entry says the optimizer did ("fused Convolution+ReLU" -> "Convolution+ReLU"), or ""
// for an entry of the pinned run.
inline std::string fused_entry(const std::string& entry) {
  const std::string prefix = kFusedPrefix;
  return entry.rfind(prefix, 0) == 0 ? entry.substr(prefix.size()) : std::string();
}

struct TrainRequest {
  ValueMap inputs;
  Tensor target;
  std::string loss;   // a catalogue loss operator, e.g. "mse_loss"
  core::Attrs loss_attrs;
  double learning_rate = 0.01;  // one plain SGD step
};

struct TrainResult {
  double loss = 0;
  Tensor loss_grad;       // d loss / d (graph output 0)
  ValueMap values;        // every node output (forward of this step)
  ValueMap grads;         // d loss / d value: every node output and every weight
  ValueMap weights_after; // every weight after w -= learning_rate * grad
};

// One step of multi-step training (Session::optimizer_step): the loss of the step's batch before
// the update and every weight's gradient (in the session's dtype).
struct StepResult {
  double loss = 0;
  ValueMap grads;  // by weight name
};

class Session {
 public:
  virtual ~Session() = default;
  // Graph outputs, and with keep_intermediates every node output, by value name, in the
  // session's dtype. Library exceptions propagate (the worker turns them into outcomes).
  virtual ValueMap forward(const ValueMap& inputs, bool keep_intermediates) = 0;
  // Only for backends whose trains() is true.
  virtual TrainResult train_step(const TrainRequest& req);
  // Multi-step training: one step (forward, loss, backward, optimizer update) that changes the
  // session's weights and keeps the optimizer's state for the next step (req.learning_rate is
  // unused: `spec` says the step). A library with an optimizer of its own overrides this (libtorch's
  // torch::optim); this default is train_step's weight gradients and Quorum's shared arithmetic
  // (optimizer.h) in the session's weights' dtype, then set_weights. A new spec starts a new state.
  virtual StepResult optimizer_step(const TrainRequest& req, const OptimizerSpec& spec);
  // The session's weights now (the model's, or as training left them), in the session's dtype.
  virtual ValueMap weights() const;
  // Replaces every weight named (each must exist, with its shape); the next run uses them.
  virtual void set_weights(const ValueMap& w);
  // The library's own operations each node ran so far (compile, forward and training), in the
  // order first run, by node name: primitives with their algorithm (oneDNN "binary_ge",
  // "pooling_max_backward"), subgraph definitions (XNNPACK "xnn_define_add2"), layers (ArmNN
  // "Pad"). Findings carry their node's list, so a known-issue ledger entry can name the library
  // operation at fault and cover every operator built on it. Empty where the backend does not say.
  virtual std::map<std::string, std::vector<std::string>> lowering() const { return {}; }

 protected:
  // The default optimizer_step's state (the shared arithmetic); null before the first step.
  std::unique_ptr<Optimizer> optimizer_;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual std::string version() const = 0;  // the library's own version string
  virtual bool trains() const = 0;
  // Whether the library reads the model as an ONNX exchange form: its sessions' lowering then names the form
  // each node was read in ("onnx opset N", "onnx form what=form,..."), which coverage counts.
  virtual bool reads_exchange_form() const { return false; }
  // Whether compiling with CompileOptions::optimized lets the library's graph optimizer change the model
  // (fusion, folding): the campaign's optimized run is made only on such backends. False where the library
  // runs node by node whatever is asked for (libtorch's eager calls, the reference).
  virtual bool optimizes() const { return false; }
  // Whether this library can run this node (its operator and attributes), or why not.
  virtual Support supports(const ir::Graph& g, const ir::Node& n) const = 0;
  // Whether train_step can differentiate through this node (e.g. the library has a backward
  // primitive for it). Only asked when trains() is true.
  virtual Support supports_training(const ir::Graph&, const ir::Node&) const {
    return trains() ? Support::yes() : Support::no("backend does not train");
  }
  // Every node's answer at once, in the graph's node order: supports(), and where `training` and that says
  // yes, supports_training() ("backend does not train" for a backend that does not). A backend whose answers
  // depend on the whole model (the exchange form it reads) overrides it to work that out once per model.
  virtual std::vector<Support> supports_nodes(const ir::Graph& g, bool training) const;
  // Builds a runnable session; throws ConversionError when the library refuses the model.
  virtual std::unique_ptr<Session> compile(const ir::Graph& g, const CompileOptions& opt) = 0;
};

// Session::lowering as a backend records it: each node's library operations in the order first
// noted, each once.
class LoweringLog {
 public:
  void note(const std::string& node, const std::string& op);
  const std::map<std::string, std::vector<std::string>>& ops() const { return ops_; }

 private:
  std::map<std::string, std::vector<std::string>> ops_;
};

// Whether every weight of the node (its inputs after the data inputs: filters, biases, statistics)
// is a constant (an initializer), or why not. Inference engines pack weights when they build the
// model; a weight fed as a graph input (as conformance tests do) or computed is another form.
Support constant_weights(const ir::Graph& g, const ir::Node& n, const std::string& library);

// A graph input bound to the value a forward call gives for it.
struct GraphInput {
  size_t index;               // position among the graph's inputs
  const ir::ValueInfo& info;  // name and declared type
  const Tensor& value;        // the caller's value, in the caller's dtype
};
// The graph's inputs in order, each with its value from `inputs`: every graph input must be given,
// with the shape the model declares, else core::UserError ("missing value for graph input 'x'",
// "graph input 'x' has shape [2,3], the model wants [2,4]"). Values the graph does not take are
// ignored. The session converts each value to its library's tensor.
std::vector<GraphInput> bind_graph_inputs(const ir::Graph& g, const ValueMap& inputs);

// Session::set_weights on a session that keeps the graph: each named weight replaces the graph's
// initializer (UserError for a name the graph has no weight of, or another shape).
void replace_weights(ir::Graph& g, const ValueMap& w);

// Every node of the graph supported (for training too, if `training`), or the first reason why not.
Support supports_graph(const Backend& b, const ir::Graph& g, bool training = false);

// For a value several nodes consume, the gradient one consumer sends back: a training backend
// that can separate them returns each under this key in TrainResult::grads, beside the value's
// total, so the oracle judges each consumer's backward on its own.
inline std::string contribution_key(const std::string& value, const std::string& consumer) {
  return ir::contribution_key(value, consumer);
}
// The values consumed by more than one node input (data or weight).
std::set<std::string> multi_consumer_values(const ir::Graph& g);

}  // namespace quorum::backends

namespace quorum::backends {

// Each backend library (src/backends/<name>/) defines this factory; a worker executable links
// exactly one backend. `args` are backend options from the command line (e.g. a fault name).
std::unique_ptr<Backend> create_backend(const std::vector<std::string>& args);

// The options of a backend spec as a finding records it ("onednn:isa=avx2+threads=2" -> isa=avx2,
// threads=2; none for "onednn"): what a reproducer writer reads to run the finding's variant.
std::vector<std::string> spec_options(const std::string& spec);
// An option "KEY=N" with a count 1..999 (threads=4); UserError naming `backend` for any other value.
int count_option(const std::string& backend, const std::string& option);
// An option "form=WHAT=FORM" of an ONNX-reading backend: the exchange form it forces (ir::OnnxForm::force),
// "WHAT=FORM"; UserError naming `backend` when either side is missing.
std::string form_option(const std::string& backend, const std::string& option);

// Reference values for comparing a backend: the float64 interpreter run on the same inputs and
// weights rounded to `dtype` first, so both see identical operands.
ValueMap reference_forward(const ir::Graph& g, const ValueMap& inputs, core::DType dtype);

}  // namespace quorum::backends
