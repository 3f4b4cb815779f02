// Pieces both verdict rules use (internal to src/oracle/): a node's tolerance at the run's dtype,
// the categorical attributes that key a signature, and a run's own values of a node's inputs.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "oracle/oracle.h"
#include "ops/op_spec.h"

namespace quorum::oracle::detail {

bool has_nonfinite(const core::Tensor& t);
bool has_nan(const core::Tensor& t);

// The categorical attributes (those with an enumerated domain: modes, flags). Sizes are left out
// so that one bug seen at many kernel sizes stays one finding.
std::string key_params(const ir::Node& n);

// The tolerance for node `n`'s outputs (grad: its gradients) computed in `dtype`.
ops::Tolerance node_tolerance(const ir::Graph& g, const ir::Node& n, core::DType dtype, bool grad);

// The tolerance of the loss operator on the model's output (grad: the loss gradient).
ops::Tolerance loss_tolerance(const ir::Graph& g, const std::string& loss_op, core::DType dtype, bool grad);

// A run's own value of `name` in float64: its node output in `values` (a run's forward values, or
// its training pass's), else the graph input or weight as the library received it (rounded to
// `dtype`). nullopt when the run does not hold it.
std::optional<core::Tensor> own_value(const ir::Graph& g, const backends::ValueMap& values, const std::string& name,
                                      const backends::ValueMap* inputs, core::DType dtype);

// Node `n`'s inputs (data and weights) as a run held them in `values`; empty when one is missing.
std::vector<core::Tensor> own_inputs(const ir::Graph& g, const ir::Node& n, const backends::ValueMap& values,
                                     const backends::ValueMap* inputs, core::DType dtype);

// A float64 result as a `dtype` computation would hold it at best: rounded to float32 (a value
// beyond float32's range becomes inf, as the correct float32 result does), then back to float64.
core::Tensor rounded_to(const core::Tensor& t, core::DType dtype);

// A failed run's message as a crash finding carries it: the status, the normalised message and the last
// line the library wrote.
std::string crash_message(const worker::Outcome& o);

// The optimized stage (OC), whatever rule judges the numbers: each library's optimized run against the
// float64 reference's outputs and its own pinned run (oracle/optimized.cpp).
std::vector<Finding> judge_optimized(const ir::Graph& g, const std::vector<BackendRun>& runs, const Thresholds& th,
                                     const backends::ValueMap* inputs);

// The per-node rule: every library node (forward), the loss and every gradient (backward)
// against the catalogue's float64 kernels on that library's own values.
std::vector<Finding> per_node(const ir::Graph& g, const std::vector<BackendRun>& runs, const Thresholds& th,
                              const backends::ValueMap* inputs, const core::Tensor* target);

}  // namespace quorum::oracle::detail
