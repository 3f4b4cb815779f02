// Multi-step training divergence (`quorum train-diff`): one model, its initial weights and the same
// batches on every training library and on the float64 reference, step after step. After each step:
// the loss, every weight's distance to the reference's weights (drift) and its gradient's distance
// to the reference's gradient. Drift that float32 rounding explains is measured by the reference's
// float32 twin: the same float64 kernels and optimizer, its weights rounded to float32 after every
// step. A library is flagged at the first step where a weight's drift exceeds
//   factor x max(twin's drift of that weight, 2^-24)
// (factor: --drift_factor, default 100, for float32 accumulation order in the library's kernels).
// Beside it, each step's update error: the library's own update against the reference optimizer's
// float64 arithmetic applied to the library's own gradients (a shadow state), which tells an optimizer
// fault (large update error) from compounding gradient differences (small). docs/trained.md.
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

struct DiffOptions {
  std::vector<worker::BackendSpec> backends;
  backends::OptimizerSpec optimizer;
  int64_t steps = 200;
  double factor = 100;
  int threads = 1;
  worker::Limits limits;
};

// One library's curves, index k = after step k + 1.
struct LibraryCurves {
  std::string spec;     // the backend spec ("torch", "faulty:momentum-twice")
  std::string library;  // its name and version
  std::string failure;  // the worker's failure, when it could not train the model (curves then stop)
  std::vector<double> loss;
  std::map<std::string, std::vector<double>> drift, grad, update_error;  // by weight
  std::vector<double> drift_max;  // the largest drift over the weights
  // The flag: the first step whose drift float32 rounding does not explain (step 0: none).
  int64_t step = 0;
  std::string weight, node;
  double drift_at = 0, bound_at = 0, update_error_at = 0;
  // The flagged step's reduced case: the library's weights before and after it, its gradients.
  backends::ValueMap before, after, grads;
};

struct DiffResult {
  std::string model;  // the model's name
  std::vector<double> ref_loss, twin_loss;
  std::map<std::string, std::vector<double>> twin_drift;  // by weight
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
