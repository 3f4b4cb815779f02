// quorum train: zoo models on real data through a library's worker (train.h).
#include "train/train.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "gen/generator.h"
#include "ir/edit.h"
#include "ir/json_io.h"
#include "worker/worker_set.h"

namespace quorum::train {

using core::UserError;

namespace {

// A source whose specs have a fixed batch size (the zoo draws its own small one).
class FixedBatch : public data::Source {
 public:
  FixedBatch(const data::Source& inner, int64_t batch) : inner_(inner), batch_(batch) {}
  std::string name() const override { return inner_.name(); }
  data::DataSpec spec(core::Rng& rng, data::Want want) const override {
    data::DataSpec s = inner_.spec(rng, want);
    s.input[0] = batch_;
    if (!s.target.empty()) s.target[0] = batch_;
    return s;
  }
  data::Batch batch(const data::DataSpec& s, core::Rng& rng) const override { return inner_.batch(s, rng); }

 private:
  const data::Source& inner_;
  int64_t batch_;
};

// The model without a final softmax on its output: the logits a cross-entropy loss takes.
ir::Graph without_softmax(const ir::Graph& g) {
  ir::Graph t = g;
  if (t.nodes.empty() || t.outputs.size() != 1) return t;
  const ir::Node& last = t.nodes.back();
  if (last.op != "softmax" || last.outputs.size() != 1 || last.outputs[0] != t.outputs[0]) return t;
  t.outputs[0] = last.inputs.at(0);
  t.types.erase(last.outputs[0]);
  t.nodes.pop_back();
  return t;
}

// Rounds a float64 tensor to float32 values (still float64): every library and the reference then
// see the same inputs.
core::Tensor f32_values(const core::Tensor& t) { return t.to(core::DType::F32).to(core::DType::F64); }

}  // namespace

Trainable zoo_trainable(const std::string& arch, const std::string& dataset, int64_t batch, uint64_t seed) {
  const auto& archs = gen::zoo_architectures();
  const auto it = std::find(archs.begin(), archs.end(), arch);
  if (it == archs.end()) {
    std::string all;
    for (const auto& a : archs) all += (all.empty() ? "" : ", ") + a;
    throw UserError("unknown zoo model '" + arch + "' (choose " + all + ")");
  }
  if (batch < 1) throw UserError("--batch must be at least 1");
  const bool image = it - archs.begin() < 4;
  if (dataset != "fashion-mnist" && dataset != "sine")
    throw UserError("--dataset " + dataset + ": train reads fashion-mnist or sine");
  if (dataset == "sine" && image) throw UserError("--dataset sine: only the recurrent zoo models train on sine");
  const std::unique_ptr<data::Source> src = data::open_source(dataset);
  const FixedBatch fixed(*src, batch);
  gen::GenOptions opt;
  opt.generator = "zoo";
  opt.seed = seed;
  const std::unique_ptr<gen::Generator> zoo = gen::make_generator(opt, fixed);
  core::Rng rng = gen::model_rng(seed, static_cast<uint64_t>(it - archs.begin()));
  gen::Model m = zoo->generate(static_cast<uint64_t>(it - archs.begin()), rng);
  Trainable t;
  t.name = arch;
  t.data = m.data;
  core::Rng wrng = rng.derive("weights");
  t.model = gen::materialize(std::move(m), wrng);
  ir::validate(t.model, "zoo model " + arch);
  t.trained = without_softmax(t.model);
  t.loss = t.data.task == data::Task::Classification ? "softmax_cross_entropy" : "mse_loss";
  return t;
}

Trainable file_trainable(const std::string& path) {
  Trainable t;
  t.model = ir::load_graph(path);
  t.name = std::filesystem::path(path).stem().string();
  if (t.model.inputs.size() != 1 || t.model.outputs.size() != 1)
    throw UserError(path + ": train-diff takes a model with one input and one output");
  const core::Shape in = t.model.inputs[0].type.shape;
  const bool image = in.size() == 4 && in[1] == 1 && in[2] >= 28 && in[3] >= 28 && in[2] == in[3];
  const bool rows = in.size() == 3 && in[1] == 28 && in[2] == 28;
  if (!image && !rows)
    throw UserError(path + ": the input " + core::to_string(in) +
                    " is not a batch of Fashion-MNIST images ([B, 1, S, S] with S >= 28, or [B, 28, 28])");
  t.trained = without_softmax(t.model);
  const core::Shape out = t.trained.types.at(t.trained.outputs[0]).shape;
  if (out != core::Shape{in[0], 10})
    throw UserError(path + ": the output " + core::to_string(out) + " is not 10 classes per image");
  t.data.source = "fashion-mnist";
  t.data.input = in;
  t.data.task = data::Task::Classification;
  t.data.classes = 10;
  t.data.target = {in[0], 10};
  t.loss = "softmax_cross_entropy";
  return t;
}

// ---- data -------------------------------------------------------------------------------------

TrainData::TrainData(const Trainable& t, const std::string& dataset, uint64_t seed, int64_t limit)
    : t_(t), seed_(seed), limit_(limit) {
  classification_ = t.data.task == data::Task::Classification;
  if (dataset == "sine") {
    sine_ = data::open_source("sine");
    return;
  }
  train_ = data::read_fashion_mnist(data::fashion_mnist_dir(), "train");
  test_ = data::read_fashion_mnist(data::fashion_mnist_dir(), "t10k");
  if (limit_ <= 0 || limit_ > train_.count()) limit_ = train_.count();
}

int64_t TrainData::steps_per_epoch() const {
  if (sine_) return 200;
  return limit_ / t_.data.input[0];
}

data::Batch TrainData::train_batch(int64_t epoch, int64_t step) const {
  const int64_t b = t_.data.input[0];
  if (sine_) {
    core::Rng rng = core::Rng(seed_).derive("sine:" + std::to_string(epoch) + ":" + std::to_string(step));
    data::Batch d = sine_->batch(t_.data, rng);
    return {f32_values(d.input), f32_values(d.target)};
  }
  // The epoch's permutation of the training images (Fisher-Yates, seeded per epoch); an epoch takes
  // its first `limit_`.
  auto& perm = perm_;
  if (perm.first != epoch) {
    const int64_t n = train_.count();
    perm.first = epoch;
    perm.second.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) perm.second[static_cast<size_t>(i)] = i;
    core::Rng rng = core::Rng(seed_).derive("epoch:" + std::to_string(epoch));
    for (int64_t i = n - 1; i > 0; --i)
      std::swap(perm.second[static_cast<size_t>(i)], perm.second[static_cast<size_t>(rng.randint(0, i))]);
  }
  std::vector<int64_t> idx(perm.second.begin() + step * b, perm.second.begin() + (step + 1) * b);
  data::Batch d = data::image_batch(train_, idx, t_.data.input);
  d.input = f32_values(d.input);
  return d;
}

int64_t TrainData::test_batches() const {
  if (sine_) return 20;
  const int64_t b = t_.data.input[0];
  return (test_.count() + b - 1) / b;
}

data::Batch TrainData::test_batch(int64_t i, int64_t& valid) const {
  const int64_t b = t_.data.input[0];
  if (sine_) {
    valid = b;
    core::Rng rng = core::Rng(seed_).derive("sine-test:" + std::to_string(i));
    data::Batch d = sine_->batch(t_.data, rng);
    return {f32_values(d.input), f32_values(d.target)};
  }
  std::vector<int64_t> idx;
  valid = std::min(b, test_.count() - i * b);
  for (int64_t r = 0; r < b; ++r) idx.push_back(r < valid ? i * b + r : r);
  data::Batch d = data::image_batch(test_, idx, t_.data.input);
  d.input = f32_values(d.input);
  return d;
}

// ---- training ---------------------------------------------------------------------------------

namespace {

[[noreturn]] void worker_failed(const worker::Worker& w, const std::string& what, const worker::Outcome& o) {
  if (o.status == worker::Status::Unsupported)
    throw UserError("backend " + w.backend() + " cannot " + what + ": " + o.message);
  throw std::runtime_error("backend " + w.backend() + " failed to " + what + ": " + o.str());
}

// The test metric of the session's current weights: accuracy, or the mean squared error.
double evaluate(worker::Worker& w, const Trainable& t, const TrainData& data) {
  int64_t right = 0, seen = 0;
  double sq = 0;
  for (int64_t i = 0; i < data.test_batches(); ++i) {
    int64_t valid = 0;
    const data::Batch b = data.test_batch(i, valid);
    backends::ValueMap out;
    const worker::Outcome o = w.forward({{t.trained.inputs[0].name, b.input}}, false, out);
    if (!o.ok()) worker_failed(w, "run the test set", o);
    const core::Tensor& y = out.at(t.trained.outputs[0]);
    const int64_t cols = y.numel() / y.shape()[0];
    for (int64_t r = 0; r < valid; ++r) {
      if (data.classification()) {
        int64_t best = 0, label = 0;
        for (int64_t c = 1; c < cols; ++c) {
          if (y.get(r * cols + c) > y.get(r * cols + best)) best = c;
          if (b.target.get(r * cols + c) > b.target.get(r * cols + label)) label = c;
        }
        right += best == label ? 1 : 0;
      } else {
        for (int64_t c = 0; c < cols; ++c) sq += std::pow(y.get(r * cols + c) - b.target.get(r * cols + c), 2);
      }
      seen += data.classification() ? 1 : cols;
    }
  }
  return data.classification() ? static_cast<double>(right) / static_cast<double>(seen)
                               : sq / static_cast<double>(seen);
}

}  // namespace

TrainOutcome train_model(const Trainable& t, const TrainOptions& o,
                         const std::function<void(const Progress&)>& progress,
                         const std::function<void(const EpochResult&)>& epoch_done) {
  o.optimizer.check();
  if (o.epochs < 1) throw UserError("--epochs must be at least 1");
  const std::vector<worker::BackendSpec> specs = worker::parse_backends(o.backend);
  if (specs.size() != 1) throw UserError("--backend: train takes one backend, got '" + o.backend + "'");
  worker::Worker w(specs[0].name, specs[0].options, o.limits);
  worker::BackendInfo info;
  if (const worker::Outcome h = w.hello(info); !h.ok()) worker_failed(w, "start", h);
  if (!info.trains) throw UserError("backend " + info.name + " does not train");
  std::vector<worker::NodeSupport> sup;
  if (const worker::Outcome s = w.supports(t.trained, true, sup); !s.ok()) worker_failed(w, "inspect the model", s);
  for (const auto& n : sup)
    if (!n.ok) throw UserError("backend " + info.name + " cannot train node '" + n.node + "': " + n.reason);
  if (const worker::Outcome c = w.compile(t.trained, {core::DType::F32, o.threads}); !c.ok())
    worker_failed(w, "build the model", c);

  TrainData data(t, o.dataset, o.seed, o.limit);
  const int64_t steps = data.steps_per_epoch();
  if (steps < 1) throw UserError("--limit is smaller than one batch");
  TrainOutcome out;
  out.metric = data.classification() ? "accuracy" : "mse";
  out.library = info.name + " (" + info.version + ")";
  const auto start = std::chrono::steady_clock::now();
  constexpr int64_t kChunk = 20;  // steps per worker call
  for (int64_t e = 0; e < o.epochs; ++e) {
    double loss_sum = 0;
    for (int64_t s = 0; s < steps; s += kChunk) {
      worker::StepsRequest req;
      req.optimizer = o.optimizer;
      req.loss = t.loss;
      for (int64_t k = s; k < std::min(steps, s + kChunk); ++k) {
        data::Batch b = data.train_batch(e, k);
        req.steps.emplace_back(backends::ValueMap{{t.trained.inputs[0].name, std::move(b.input)}}, std::move(b.target));
      }
      std::vector<worker::StepOutput> res;
      if (const worker::Outcome so = w.steps(req, res); !so.ok()) worker_failed(w, "train", so);
      for (const auto& r : res) {
        if (!std::isfinite(r.loss))
          throw UserError("training diverged: the loss is " + std::to_string(r.loss) + " at epoch " +
                          std::to_string(e + 1) + " (try a smaller --learning_rate)");
        loss_sum += r.loss;
      }
      const int64_t done = std::min(steps, s + kChunk);
      if (progress) progress({e + 1, o.epochs, done, steps, loss_sum / static_cast<double>(done)});
    }
    EpochResult er;
    er.epoch = e + 1;
    er.train_loss = loss_sum / static_cast<double>(steps);
    er.metric = evaluate(w, t, data);
    er.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out.epochs.push_back(er);
    if (epoch_done) epoch_done(er);
  }
  backends::ValueMap weights;
  if (const worker::Outcome wo = w.weights(nullptr, weights); !wo.ok()) worker_failed(w, "give its weights", wo);
  out.model = ir::with_weights(t.model, weights);
  return out;
}

}  // namespace quorum::train
