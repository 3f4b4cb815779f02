// Training on real data (`quorum train`): a zoo architecture trained through a library's worker on
// Fashion-MNIST (or the sine task), many steps per worker call with the library's optimizer (or
// Quorum's shared arithmetic where the library has none: backends/optimizer.h), then the test set's
// accuracy through the same worker. The data the models train on is here too, for train-diff.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "backends/optimizer.h"
#include "data/dataset.h"
#include "ir/graph.h"
#include "worker/supervisor.h"

namespace quorum::train {

// A model ready to train.
struct Trainable {
  std::string name;       // the zoo architecture, or the model file's stem
  ir::Graph model;        // the whole model (a classifier ends in softmax): the form saved and judged
  ir::Graph trained;      // what the library trains: the model without its final softmax (the logits)
  data::DataSpec data;    // input and target shapes (batch first), task
  std::string loss;       // softmax_cross_entropy (classification) or mse_loss
};

// Zoo architecture `arch` (gen::zoo_architectures) as published, at batch size `batch`, for data set
// "fashion-mnist" (images [B, 1, 32, 32]; the recurrent models read rows as time steps [B, 28, 28])
// or "sine" (the recurrent models' next-value regression), weights drawn from `seed`. UserError for an
// unknown architecture or data set.
Trainable zoo_trainable(const std::string& arch, const std::string& dataset, int64_t batch, uint64_t seed);
// A model file (MODEL.json or .onnx) whose input is a batch of Fashion-MNIST images ([B, 1, S, S],
// S >= 28, or [B, 28, 28]) and whose output is a softmax over 10 classes (or 10 logits). UserError otherwise.
Trainable file_trainable(const std::string& path);

// Batches for a trainable model: Fashion-MNIST's training split shuffled per epoch (seeded) and its
// test split in order, or the sine task's seeded draws.
class TrainData {
 public:
  TrainData(const Trainable& t, const std::string& dataset, uint64_t seed, int64_t limit = 0);
  bool classification() const { return classification_; }
  int64_t steps_per_epoch() const;
  // The batch of step `step` (0-based) of epoch `epoch`: inputs float64 rounded to float32 values.
  data::Batch train_batch(int64_t epoch, int64_t step) const;
  int64_t test_batches() const;
  // Test batch i; `valid` rows of it are real (the last batch is padded with the first images).
  data::Batch test_batch(int64_t i, int64_t& valid) const;

 private:
  const Trainable& t_;
  std::unique_ptr<data::Source> sine_;
  data::LabeledImages train_, test_;
  uint64_t seed_;
  int64_t limit_;
  bool classification_ = true;
  mutable std::pair<int64_t, std::vector<int64_t>> perm_{-1, {}};  // the last epoch's order
};

struct TrainOptions {
  std::string backend = "torch";  // NAME or NAME:OPT+OPT
  backends::OptimizerSpec optimizer;
  int64_t epochs = 3;
  int64_t limit = 0;  // training images per epoch (0: all 60 000)
  uint64_t seed = 1;
  int threads = 1;
  worker::Limits limits;
  std::string dataset = "fashion-mnist";
};

struct Progress {
  int64_t epoch, epochs, step, steps;
  double loss;  // mean loss of the steps of this epoch so far
};
struct EpochResult {
  int64_t epoch = 0;
  double train_loss = 0;
  double metric = 0;  // test accuracy (classification) or test mean squared error
  double seconds = 0;  // since training started
};
struct TrainOutcome {
  ir::Graph model;  // the whole model with the trained weights
  std::vector<EpochResult> epochs;
  std::string metric;  // "accuracy" or "mse"
  std::string library;  // the worker's name and version
};

// Trains `t` through the worker of o.backend: UserError when the backend does not train the model or
// the loss turns NaN/Inf (the learning rate is the user's), std::runtime_error when its worker fails.
// `progress` is called every few steps, `epoch_done` after each epoch's test evaluation.
TrainOutcome train_model(const Trainable& t, const TrainOptions& o,
                         const std::function<void(const Progress&)>& progress,
                         const std::function<void(const EpochResult&)>& epoch_done);

}  // namespace quorum::train
