// The supervisor side: starts `quorum-worker-<backend>` with fork+exec (a fresh process, so library
// thread pools start clean), talks to it over pipes, enforces a time limit per call and an
// address-space limit per process, and classifies a death — signal, timeout, out of memory — into
// an Outcome. A dead worker is restarted on the next call; the caller's campaign goes on.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "worker/outcome.h"

namespace quorum::worker {

struct Limits {
  double timeout_s = 60;              // per call
  uint64_t address_space_mb = 16384;  // RLIMIT_AS of the worker; 0 = unlimited
  // Recycling: a healthy worker is replaced by a fresh process before it compiles its next model once
  // it has compiled this many models, or once its resident memory exceeds this many MiB (0 = never).
  // Only between models: a model's compile, forward and training step always run in one process.
  uint64_t recycle_models = 0;
  uint64_t recycle_rss_mb = 0;
};

struct BackendInfo {
  std::string name, version;
  bool trains = false;
  bool reads_exchange_form = false;  // backends::Backend::reads_exchange_form
  bool optimizes = false;            // backends::Backend::optimizes
};

// What the optimized run of one model gave: the graph outputs and what the optimizer did.
struct OptimizedResult {
  backends::ValueMap values;
  std::map<std::string, std::vector<std::string>> lowering;
};

struct NodeSupport {
  std::string node;
  bool ok = true;
  std::string reason;
};

// Backends built next to this executable (the generated backend table).
const std::vector<std::string>& available_backends();
// Path of the worker executable for `backend`; UserError for an unknown backend name.
std::string worker_path(const std::string& backend);
// What a worker's start says of its backend's options: the worker's own line ("backend 'ort': unknown option ...")
// when it stopped at its start with status 2 (it refused them), else "".
std::string refused_options(const Outcome& started);
// The backend's options as its worker reads them: a worker started and asked for its Hello. UserError with
// refused_options' line when it refuses them, so a misspelt option is one clear line before a command runs
// anything, not a crash finding. Nothing is run for a spec without options.
void check_options(const std::string& backend, const std::vector<std::string>& options);

// One case of a batch (Kind::Batch): its weights (empty: the graph's own), inputs and, when the
// batch trains, its target.
struct BatchCase {
  backends::ValueMap weights;
  backends::ValueMap inputs;
  core::Tensor target;
};
struct BatchRequest {
  backends::CompileOptions options;
  bool forward = true, train = false;
  std::string loss;
  core::Attrs loss_attrs;
  double learning_rate = 0.01;
  std::vector<BatchCase> cases;
};
// One case's result: ok, or the outcome and the stage (0 compile, 1 forward, 2 backward) it failed at.
struct BatchResult {
  Outcome outcome;
  int failed_at = 0;
  bool ran_forward = false, trained = false;
  backends::ValueMap values;  // the forward pass's, every node output
  backends::TrainResult train;
};

// Multi-step training (Kind::Steps) on the compiled model: each step's batch and target.
struct StepsRequest {
  backends::OptimizerSpec optimizer;
  std::string loss;
  core::Attrs loss_attrs;
  bool detail = false;  // return every step's weight gradients and weights after it
  std::vector<std::pair<backends::ValueMap, core::Tensor>> steps;  // inputs, target
};
struct StepOutput {
  double loss = 0;
  backends::ValueMap grads, weights;  // with StepsRequest::detail
};

class Worker {
 public:
  Worker(std::string backend, std::vector<std::string> args = {}, Limits limits = {});
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  const std::string& backend() const { return backend_; }
  // Processes started after the first one because a worker died (a recycle is not a death).
  int restarts() const { return starts_ - 1 - recycles_; }
  // Fresh processes started by recycling (Limits::recycle_*), not by a death.
  int recycles() const { return recycles_; }
  pid_t pid() const { return pid_; }
  // The per-call time limit (Limits::timeout_s); the reduction of a hang lowers it for its runs.
  double timeout() const { return limits_.timeout_s; }
  void set_timeout(double seconds) { limits_.timeout_s = seconds; }

  Outcome hello(BackendInfo& info);
  // The Hello reply, asked at the first call and kept (a backend's answer does not change between its
  // processes); null while the worker cannot answer.
  const BackendInfo* info();
  Outcome supports(const ir::Graph& g, bool training, std::vector<NodeSupport>& out);
  Outcome compile(const ir::Graph& g, const backends::CompileOptions& opt);
  Outcome forward(const backends::ValueMap& inputs, bool keep_intermediates, backends::ValueMap& out);
  Outcome train(const backends::TrainRequest& req, backends::TrainResult& out);
  // Every case of `req` on the model `g` in one call (the time limit is per case). A non-ok outcome
  // is the whole call's (the worker died or hung: which case did it is unknown); else `out` holds
  // one result per case, each with its own outcome.
  Outcome batch(const ir::Graph& g, const BatchRequest& req, std::vector<BatchResult>& out);
  // Every step of `req` on the compiled model, the session keeping weights and optimizer state (the
  // time limit is per step).
  Outcome steps(const StepsRequest& req, std::vector<StepOutput>& out);
  // The compiled model's weights now, after replacing those in `set` (null: none).
  Outcome weights(const backends::ValueMap* set, backends::ValueMap& out);
  // The optimized run (Kind::Optimized): `g` compiled with `opt` (its `optimized` set here) in a session
  // of its own and run on `inputs`; the compiled session stays the one lowering() and the others ask.
  Outcome optimized(const ir::Graph& g, backends::CompileOptions opt, const backends::ValueMap& inputs,
                    OptimizedResult& out);
  // The library operations each node of the compiled model ran (backends::Session::lowering).
  Outcome lowering(std::map<std::string, std::vector<std::string>>& out);

 private:
  void start();
  void stop();
  // Sends one request and waits for the reply; on death or timeout returns the classified outcome.
  Outcome call(const std::string& request, std::string& reply, double timeout_scale = 1);
  Outcome death(int wait_status, bool timed_out);
  // Before a compile: stops the worker when Limits::recycle_* says it has served long enough.
  void maybe_recycle();
  std::string stderr_tail() const;

  std::string backend_;
  std::vector<std::string> args_;
  Limits limits_;
  pid_t pid_ = -1;
  int to_fd_ = -1, from_fd_ = -1;
  std::string stderr_path_;
  int starts_ = 0;
  int recycles_ = 0;
  uint64_t compiles_ = 0;  // models compiled by the current process
  std::optional<BackendInfo> info_;
};

}  // namespace quorum::worker
