// The worker protocol: length-prefixed frames over a pair of pipes. A frame is a u32 payload
// length and the payload; a request payload starts with its Kind, a reply payload with a Status
// and, for Ok, the kind's result (otherwise a message string, and for the failure of a library's
// child process — backends::ChildProcessError — its signal number (u32) and output tail).
#pragma once
#include <cstdint>
#include <string>

namespace quorum::worker {

enum class Kind : uint8_t {
  Hello = 1,     // -> name, version, trains, reads_exchange_form, optimizes
  Supports = 2,  // graph, training flag -> per node: name, ok, reason
  Compile = 3,   // graph, dtype, threads -> (nothing)
  Forward = 4,   // values, keep_intermediates -> values
  Train = 5,     // values, target, loss, loss attrs, learning rate -> TrainResult
  Lowering = 6,  // (nothing) -> per node the session ran: name, its library operations
  // Many cases of one model in one round trip (a search's generation): graph, dtype, threads, forward
  // flag, train flag, loss, loss attrs, learning rate, count, then per case its weights (values; empty:
  // the graph's own — the model is compiled once — else the model is compiled again with them), its
  // inputs (values) and, with the train flag, its target -> count, then per case: status; for Ok a
  // forward flag [values], a trained flag [loss, loss grad, values, grads, weights after]; otherwise
  // the stage it failed at (0 compile, 1 forward, 2 backward), message, signal (u32), output tail,
  // and a forward flag [values] (the forward pass that ran before a failed training step).
  Batch = 7,
  // Multi-step training on the compiled session (Session::optimizer_step), which keeps the weights
  // and the optimizer's state from call to call: optimizer (name, lr, momentum, beta1, beta2, eps),
  // loss, loss attrs, detail flag, count, then per step its inputs (values) and target -> count, then
  // per step: loss, and with the detail flag the weights' gradients (values) and the weights after
  // the step (values).
  Steps = 8,
  // The session's weights: a set flag [values replacing weights] -> the weights now (values).
  Weights = 9,
  // The optimized run (backends::CompileOptions::optimized): graph, dtype, threads, inputs (values) -> the
  // graph outputs (values), then the optimized session's lowering (as Lowering's reply). The model is
  // compiled in a session of its own, dropped after the run: the compiled (pinned) session stays.
  Optimized = 10,
};

constexpr uint32_t kMaxFrame = 1u << 31;

// Blocking frame I/O for the worker side. read_frame returns false on a clean EOF.
bool read_frame(int fd, std::string& payload);
void write_frame(int fd, const std::string& payload);

}  // namespace quorum::worker
