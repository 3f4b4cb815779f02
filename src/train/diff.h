// Multi-step training divergence (`quorum train-diff`): one model, its initial weights and the same
// batches on every training library and on the float64 reference, step after step. After each step:
// the loss, every weight's distance to the reference's weights (drift) and its gradient's distance
// to the reference's gradient. Drift compounds (a float32 run of the reference's own kernels, its
// float32 twin, drifts as far within 200 steps: ReLU and max-pool decisions flip), so the flag judges
// each step on its own: the step error of a weight is the library's step against the reference's
// step from the library's own weights and optimizer state (float64 gradients there, the reference
// arithmetic), relative to the step's size. A library is flagged at the first step where
//   step error > factor x max(the twin's step error (its float32 rounding), 1e-5)
// (factor: --f32_factor, default 100). The update error (the reference arithmetic on the library's
// own gradients) then tells an optimizer fault (large) from a gradient fault (small); a gradient-side
// step is kept only when the per-node oracle, on that step as a model, finds a node at fault
// (DiffOptions::confirm): a ReLU or max-pool decision at a float32 near-tie is no finding. docs/trained.md.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "train/train.h"
#include "worker/worker_set.h"

namespace quorum::train {

// The batch of step k (0-based): the same for every library and the reference.
using BatchOf = std::function<data::Batch(int64_t k)>;

// The per-node oracle on one step taken as a model (the graph at the library's weights before it,
// the step's batch and target) on backend `spec`: what it finds, one line each, or nothing when every
// node is within what float32 explains (a ReLU or max-pool decision at a near-tie, for one).
using Confirm = std::function<std::vector<std::string>(const std::string& spec, const ir::Graph& step_model,
                                                       const data::Batch& batch)>;

struct DiffOptions {
  std::vector<worker::BackendSpec> backends;
  backends::OptimizerSpec optimizer;
  int64_t steps = 200;
  double factor = 100;
  int threads = 1;
  worker::Limits limits;
  // A step beyond the bound whose update follows the library's own gradients (update error at most
  // 1e-3: the gradients moved it) is kept only when this finds something (null: always kept).
  Confirm confirm;
};

// One library's curves, index k = after step k + 1.
struct LibraryCurves {
  std::string spec;     // the backend spec ("torch", "faulty:momentum-twice")
  std::string library;  // its name and version
  std::string failure;  // the worker's failure, when it could not train the model (curves then stop)
  std::vector<double> loss;
  // By weight: drift; gradient distance to the reference's gradient of the same step; the same at the
  // library's own weights (grad_own); the step error; the update error.
  std::map<std::string, std::vector<double>> drift, grad, grad_own, step_error, update_error;
  std::vector<double> drift_max;  // the largest drift over the weights
  // The flag: the first step whose own error float32 rounding does not explain (step 0: none).
  int64_t step = 0;
  std::string weight, node;
  double step_error_at = 0, bound_at = 0, drift_at = 0, grad_own_at = 0, update_error_at = 0;
  std::vector<std::string> findings;  // what the per-node oracle found on the flagged step
  // Steps beyond the bound that the per-node oracle explained (DiffOptions::confirm found nothing).
  std::vector<int64_t> explained;
  // The flagged step's reduced case: the library's weights before and after it, its gradients.
  backends::ValueMap before, after, grads;
};

struct DiffResult {
  std::string model;  // the model's name
  std::vector<double> ref_loss, twin_loss;
  std::map<std::string, std::vector<double>> twin_drift;       // by weight
  std::map<std::string, std::vector<double>> twin_step_error;  // the float32 rounding of each twin step
  std::map<std::string, std::string> node_of;             // weight -> the node that takes it
  std::vector<LibraryCurves> libs;
};

// Runs o.steps steps of the same batches everywhere. `progress(step)` after
// each step. Bundles are written by write_diff.
DiffResult train_diff(const Trainable& t, const BatchOf& batch_of, const DiffOptions& o,
                      const std::function<void(int64_t)>& progress);

// DIR/curves.json (every curve), DIR/summary.txt, and for each flagged library DIR/<spec>/ a
// replayable bundle: model.json, case.json, the batches of steps 1..t and reduced/ (the one step
// that diverges: the library's weights before and after it, its gradients, the reference's
// gradients at the library's weights before it, and the shadow optimizer's update).
// The folder name of a backend spec's bundle ("faulty:momentum-twice" -> "faulty-momentum-twice").
std::string bundle_name(const std::string& spec);

void write_diff(const std::string& dir, const Trainable& t, const BatchOf& batch_of, const DiffOptions& o,
                const DiffResult& r);

}  // namespace quorum::train
