// The libtorch lowering: the one mapping from a Quorum node to the libtorch calls that compute it,
// shared by the backend (torch_sink.cpp calls ATen) and its reproducer writer (repro.cpp prints the
// same calls as PyTorch Python). Every decision lives here: which torch function, ONNX conventions
// resolved into explicit arguments (negative axes, "all axes", Slice clamping, auto_pad, asymmetric
// pads, pooling pads beyond half the kernel, ceil-mode crops, resize coordinate modes per axis), and
// the support checks with their refusal reasons. No library header is included: the lowering emits
// statements to a Sink, each a tensor expression (nested calls of named torch functions on
// variables, int lists, scalars, strings) assigned to variables.
//
// Call names are PyTorch's spelling: "torch.add", "F.conv2d" (torch.nn.functional), ".clone" (a
// method of the first argument), "slice" (x[a:b:s] along one axis, ATen's at::slice), and the
// reproducer's helpers "crop_to" and "catalogue_loss". Quantized operators use libtorch's quantized tensors and
// its registered operators ("torch.ops.quantized.conv2d", whose packed weight is the nested call of
// "torch.ops.quantized.conv2d_prepack", as Python writes it). A keyword argument is Python's keyword; the
// backend's sink reads arguments by position.
#pragma once
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace quorum::backends::torch {

using Ints = std::vector<int64_t>;

struct Call;
using CallPtr = std::shared_ptr<const Call>;

// One argument of a call.
struct Arg {
  enum class Kind { Tensor, Tensors, Int, Ints, Float, Floats, Bool, Str, None, DTypeOf, SizeMinus, DType };
  Kind kind = Kind::None;
  std::string keyword{};      // Python keyword; "" for a positional argument
  CallPtr t{};                // Tensor; DTypeOf: the tensor whose dtype (and device) to use; SizeMinus: whose size
  std::vector<CallPtr> ts{};  // Tensors
  int64_t i = 0;              // Int; SizeMinus: the axis
  int64_t minus = 0;          // SizeMinus: t.size(i) - minus
  Ints ints{};
  double f = 0;
  std::vector<double> fs{};  // Floats (a Python tuple)
  bool literal = false;  // Float: a constant of the mapping (1.0, 20.0), not an attribute's value
  bool b = false;
  std::string s{};  // Str; DType: the torch dtype's name ("uint8", "int16", "float32", "quint8")
};

// A tensor expression: a variable (`fn` empty) or the call fn(args...).
struct Call {
  std::string var;
  std::string fn;
  std::vector<Arg> args;
};

// What the lowering drives. The node's inputs (data inputs, then parameters) are the variables
// x0, x1, ...; its output is the variable y when the statements have run.
class Sink {
 public:
  virtual ~Sink() = default;
  // outs = e. Several outs: the call returns a tuple ("_" discards an element). `note` explains the
  // statement to a reader (the writer prints it as a comment).
  virtual void assign(const std::vector<std::string>& outs, const CallPtr& e, const std::string& note) = 0;
  // The statements until end_if() run only when one of `vars` requires a gradient.
  virtual void begin_if_requires_grad(const std::vector<std::string>& vars) = 0;
  virtual void end_if() = 0;
  // A comment for a reader; nothing runs.
  virtual void comment(const std::string& text) = 0;
};

// A lowering decision the node's attributes make impossible (an axis out of range); the message
// names the node.
class LoweringError : public std::runtime_error {
 public:
  explicit LoweringError(const std::string& m) : std::runtime_error(m) {}
};

// Whether the lowering knows the operator at all.
bool has_lowering(const std::string& op);
// Whether libtorch can run node `n` of `g` (its attributes on its input shapes), and why not; the
// quantized operators also depend on the quantized engine the variant selects (variant.h).
Support support(const ir::Graph& g, const ir::Node& n, const std::string& qengine = "onednn");
// Emits the statements computing node `n` of `g` (supported: see support()). Throws LoweringError.
void lower_node(const ir::Graph& g, const ir::Node& n, Sink& sink);

// One line of text for a statement, the same whichever sink receives it (the agreement test
// compares these).
std::string describe_assign(const std::vector<std::string>& outs, const Call& e, const std::string& note);

// A decorator that logs every sink call as a text line, then passes it on.
class RecordingSink : public Sink {
 public:
  RecordingSink(Sink& inner, std::vector<std::string>& log) : inner_(inner), log_(log) {}
  void assign(const std::vector<std::string>& outs, const CallPtr& e, const std::string& note) override;
  void begin_if_requires_grad(const std::vector<std::string>& vars) override;
  void end_if() override;
  void comment(const std::string& text) override;

 private:
  Sink& inner_;
  std::vector<std::string>& log_;
};

// The sink-agreement test's entry points (tests/backends/torch_sinks_test.cpp): the logged sink
// calls of every node of `g`, in order, through the backend's sink (running libtorch on `inputs`,
// float32) and through the writer's sink. A node the lowering refuses logs "refused: <reason>"
// and ends the log; a LoweringError logs "error: <message>".
std::vector<std::string> library_sink_calls(const ir::Graph& g, const ValueMap& inputs);
std::vector<std::string> writer_sink_calls(const ir::Graph& g);

}  // namespace quorum::backends::torch
