// The libtorch backend's sink (torch_sink.cpp): it runs the statements the lowering (lower.h) emits
// for a node with ATen calls, one dispatch entry per call name, on the node's input tensors. Only
// ATen per-operator headers are used: <torch/torch.h> triples the compile time of a TU.
#pragma once
#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "backends/torch/lower.h"

namespace quorum::backends::torch {

using TensorList = std::vector<at::Tensor>;

class TorchSink : public Sink {
 public:
  // The node's inputs (data inputs, then parameters) become x0, x1, ...
  explicit TorchSink(const TensorList& inputs);
  void assign(const std::vector<std::string>& outs, const CallPtr& e, const std::string& note) override;
  void begin_if_requires_grad(const std::vector<std::string>& vars) override;
  void end_if() override;
  void comment(const std::string&) override {}
  // The node's output (y) once the statements have run.
  const at::Tensor& result() const;

  // An expression's value: every element of a call that returns a tuple.
  TensorList eval(const Call& c);
  at::Tensor eval1(const Call& c);

 private:
  std::map<std::string, at::Tensor> vars_;
  std::vector<bool> running_;  // per open if: whether its statements run
};

// A catalogue loss of prediction p against target t (both of the session dtype), a 0-dim tensor.
// Used by the loss operators and by train_step. Throws core::UserError on an unknown loss.
at::Tensor catalogue_loss(const std::string& loss, const at::Tensor& p, const at::Tensor& t);

}  // namespace quorum::backends::torch
