// A session whose model runs in a program Quorum starts (the exec protocol, docs/exec-backend.md):
// every forward writes model.onnx and input_<i>.npy into a fresh directory, the program (one per
// model, or one per worker in the persistent mode) writes output_<j>.npy there, and its exit status
// or answer line becomes the outcome. The shared piece of every backend driven by a runner program:
// the exec backend (any program) and ort (the project's own Node runner for ONNX Runtime).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/exec/run_program.h"
#include "ir/graph.h"
#include "ir/onnx_io.h"

namespace quorum::backends::exec {

// How a runner program is started and held.
struct Runner {
  std::vector<std::string> argv;  // the program (resolved) and its arguments
  double time_limit_s = 20;       // per model; the program is killed past it
  bool persistent = false;        // one program per worker, one model directory per request line
};

// The ONNX graph outputs in the exporter's order: the graph's outputs, then every other node output
// in node order (src/ir/onnx_io.h). `real` receives how many are the graph's own outputs.
std::vector<std::string> onnx_outputs(const ir::Graph& g, size_t& real);

// The graph with every floating-point value in `dtype`: the model the program receives computes in
// the session's precision.
ir::Graph in_dtype(ir::Graph g, core::DType dtype);

// Whether Quorum's ONNX exporter can write node `n` of `g` alone at `opset` (its computed inputs as
// graph inputs, its weights as initializers), or why not: what a runner can be sent at all.
Support exporter_support(const ir::Graph& g, const ir::Node& n, int opset);

// The environment a runner gets: this process's, with the thread count (QUORUM_THREADS,
// OMP_NUM_THREADS) and the protocol (QUORUM_EXEC_PROTOCOL) set.
std::vector<std::string> runner_environment(const Runner& r, int threads);

// The program of one worker in the persistent mode, kept across its sessions.
struct Persistent {
  Persistent(const Runner& r, std::vector<std::string> env) : env(env), program(r.argv, std::move(env)) {}
  std::vector<std::string> env;
  PersistentProgram program;
};

// The worker's persistent program for `r` in `env`: `held` when it was started with the same
// environment, else a new one (started again for another thread count). Null when not persistent.
std::shared_ptr<Persistent> persistent_for(const Runner& r, const std::vector<std::string>& env,
                                           std::shared_ptr<Persistent> held);

// A fresh private directory under $TMPDIR (or /tmp), removed with this object.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string file(const std::string& name) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class ProgramSession : public Session {
 public:
  // `g` in the session's dtype, `onnx` its bytes in the exchange form `form` describes, `env` the
  // runner's environment, `persistent` the worker's program (null: a program per model).
  ProgramSession(Runner runner, ir::Graph g, std::string onnx, ir::OnnxExported form, std::vector<std::string> env,
                 std::shared_ptr<Persistent> persistent);

  // What the program read, per node: "onnx opset N" and its exchange form ("onnx form what=form,...").
  std::map<std::string, std::vector<std::string>> lowering() const override;

  ValueMap forward(const ValueMap& inputs, bool keep_intermediates) override;

 protected:
  // Called after a run that succeeded, with the directory still there (before the outputs are read):
  // a backend reads what else its runner wrote (ort: the optimized model).
  virtual void after_run(const ScratchDir&) {}
  const ir::Graph& graph() const { return g_; }

 private:
  struct Reply;
  Reply run(const ScratchDir& dir) const;
  Reply ask(const ScratchDir& dir) const;
  std::string refusal(const Reply& r) const;
  void check(const Reply& r) const;
  ValueMap read_outputs(const ScratchDir& dir, bool keep_intermediates) const;

  Runner runner_;
  ir::Graph g_;
  std::string onnx_;
  ir::OnnxExported form_;  // the opset and forms, without the bytes
  size_t real_outputs_ = 0;
  std::vector<std::string> outputs_;
  std::vector<std::string> env_;            // the worker's, with the thread count for the program's libraries
  std::shared_ptr<Persistent> persistent_;  // the worker's program, in persistent mode
};

}  // namespace quorum::backends::exec
