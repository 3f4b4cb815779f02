// Data sources for generated models: Fashion-MNIST through zlib, sine waves, random tensors.
#include "data/dataset.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <numbers>

#include "core/error.h"
#include "data/values.h"

namespace quorum::data {

using core::UserError;

std::string to_string(Task t) {
  switch (t) {
    case Task::None: return "none";
    case Task::Classification: return "classification";
    case Task::Regression: return "regression";
  }
  return "?";
}

const std::vector<std::string>& source_names() {
  static const std::vector<std::string> names = {"fashion-mnist", "sine", "random"};
  return names;
}

namespace {

int64_t batch_size(core::Rng& rng) { return rng.randint(1, 2); }

Tensor one_hot(int64_t rows, int64_t classes, const std::vector<int64_t>& labels) {
  Tensor t(core::DType::F64, {rows, classes});
  for (int64_t r = 0; r < rows; ++r) t.f64()[r * classes + labels[static_cast<size_t>(r)]] = 1.0;
  return t;
}

// Random labels for a spec whose data carries none (random and sine images).
Tensor random_target(const DataSpec& s, core::Rng& rng) {
  if (s.task == Task::None) return Tensor();
  if (s.task == Task::Classification) {
    std::vector<int64_t> labels;
    for (int64_t r = 0; r < s.target[0]; ++r) labels.push_back(rng.randint(0, s.classes - 1));
    return one_hot(s.target[0], s.classes, labels);
  }
  Tensor t(core::DType::F64, s.target);
  for (int64_t i = 0; i < t.numel(); ++i) t.f64()[i] = rng.uniform(-1.0, 1.0);
  return t;
}

// ---- random ----------------------------------------------------------------------------------

class RandomSource : public Source {
 public:
  std::string name() const override { return "random"; }

  DataSpec spec(core::Rng& rng, Want want) const override {
    DataSpec s;
    s.source = name();
    const int64_t n = batch_size(rng);
    if (want == Want::Image32) {
      s.input = {n, rng.randint(1, 3), 32, 32};
    } else if (want == Want::Sequence) {
      s.input = {n, rng.randint(4, 16), rng.randint(1, 4)};
    } else {
      // Mostly images, the form most layers take; other ranks exercise the reshaping layers.
      const double u = rng.uniform();
      if (u < 0.5) s.input = {n, rng.randint(1, 3), rng.randint(8, 16), rng.randint(8, 16)};
      else if (u < 0.7) s.input = {n, rng.randint(1, 3), rng.randint(8, 32)};
      else if (u < 0.85) s.input = {n, rng.randint(4, 64)};
      else s.input = {n, rng.randint(1, 2), rng.randint(3, 6), rng.randint(3, 6), rng.randint(3, 6)};
    }
    if (rng.bernoulli(0.6)) {
      s.task = Task::Classification;
      s.classes = rng.randint(2, 10);
      s.target = {n, s.classes};
    } else {
      s.task = Task::Regression;
      s.target = {n, rng.randint(1, 4)};
    }
    return s;
  }

  Batch batch(const DataSpec& s, core::Rng& rng) const override {
    Batch b;
    b.input = random_with_edges(s.input, rng);
    b.target = random_target(s, rng);
    return b;
  }
};

// ---- sine --------------------------------------------------------------------------------------

class SineSource : public Source {
 public:
  std::string name() const override { return "sine"; }

  DataSpec spec(core::Rng& rng, Want want) const override {
    DataSpec s;
    s.source = name();
    const int64_t n = batch_size(rng);
    s.task = Task::Regression;
    if (want == Want::Image32) {
      // A plane wave per image; the model regresses its two frequencies.
      s.input = {n, 1, 32, 32};
      s.target = {n, 2};
    } else {
      // A window of a sine wave; the model predicts the next value.
      s.input = {n, rng.randint(8, 24), 1};
      s.target = {n, 1};
    }
    return s;
  }

  Batch batch(const DataSpec& s, core::Rng& rng) const override {
    Batch b;
    b.input = Tensor(core::DType::F64, s.input);
    // A spec without a task (inference-only models) gets inputs alone.
    const bool labelled = s.task != Task::None;
    if (labelled) b.target = Tensor(core::DType::F64, s.target);
    const int64_t n = s.input[0];
    const int64_t per = b.input.numel() / n;
    for (int64_t r = 0; r < n; ++r) {
      double* x = b.input.f64() + r * per;
      const double amp = rng.uniform(0.5, 2.0), phase = rng.uniform(0.0, 2.0 * std::numbers::pi);
      if (s.input.size() == 4) {
        const double fy = rng.uniform(0.05, 0.5), fx = rng.uniform(0.05, 0.5);
        const int64_t h = s.input[2], w = s.input[3];
        for (int64_t i = 0; i < h; ++i)
          for (int64_t j = 0; j < w; ++j)
            x[i * w + j] = amp * std::sin(fy * static_cast<double>(i) + fx * static_cast<double>(j) + phase);
        if (labelled) {
          b.target.f64()[r * 2] = fy;
          b.target.f64()[r * 2 + 1] = fx;
        }
      } else {
        const double omega = rng.uniform(0.1, 1.0);
        for (int64_t t = 0; t < per; ++t) x[t] = amp * std::sin(omega * static_cast<double>(t) + phase);
        if (labelled) b.target.f64()[r] = amp * std::sin(omega * static_cast<double>(per) + phase);
      }
    }
    return b;
  }
};

// ---- Fashion-MNIST -----------------------------------------------------------------------------

class FashionMnist : public Source {
 public:
  FashionMnist(Idx images, Idx labels) : images_(std::move(images)), labels_(std::move(labels)) {}

  std::string name() const override { return "fashion-mnist"; }

  DataSpec spec(core::Rng& rng, Want want) const override {
    DataSpec s;
    s.source = name();
    const int64_t n = batch_size(rng);
    s.task = Task::Classification;
    s.classes = 10;
    s.target = {n, 10};
    if (want == Want::Image32) s.input = {n, 1, 32, 32};  // zero-padded by 2, as LeNet-5 read MNIST
    else if (want == Want::Sequence) s.input = {n, 28, 28};  // rows as time steps
    else s.input = {n, 1, 28, 28};
    return s;
  }

  Batch batch(const DataSpec& s, core::Rng& rng) const override {
    Batch b;
    b.input = Tensor(core::DType::F64, s.input);
    const int64_t n = s.input[0];
    const int64_t count = images_.dims[0], h = images_.dims[1], w = images_.dims[2];
    const int64_t side = s.input.back();  // 28, or 32 when padded
    const int64_t off = (side - w) / 2;
    std::vector<int64_t> labels;
    for (int64_t r = 0; r < n; ++r) {
      const int64_t k = rng.randint(0, count - 1);
      labels.push_back(labels_.data[static_cast<size_t>(k)]);
      const uint8_t* img = images_.data.data() + k * h * w;
      double* x = b.input.f64() + r * side * side;
      for (int64_t i = 0; i < h; ++i)
        for (int64_t j = 0; j < w; ++j) x[(i + off) * side + (j + off)] = img[i * w + j] / 255.0;
    }
    if (s.task != Task::None) b.target = one_hot(n, 10, labels);
    return b;
  }

 private:
  Idx images_, labels_;
};

uint32_t be32(const std::string& b, size_t at) {
  return (static_cast<uint32_t>(static_cast<uint8_t>(b[at])) << 24) |
         (static_cast<uint32_t>(static_cast<uint8_t>(b[at + 1])) << 16) |
         (static_cast<uint32_t>(static_cast<uint8_t>(b[at + 2])) << 8) |
         static_cast<uint32_t>(static_cast<uint8_t>(b[at + 3]));
}

}  // namespace

std::string fashion_mnist_dir() { return "/usr/share/datasets/fashion-mnist"; }

Idx read_idx_gz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw UserError(path + ": cannot open: " + std::strerror(errno));
  gzbuffer(f, 1 << 17);
  std::string bytes;
  std::vector<char> buf(1 << 16);
  int got = 0;
  while ((got = gzread(f, buf.data(), static_cast<unsigned>(buf.size()))) > 0)
    bytes.append(buf.data(), static_cast<size_t>(got));
  if (got < 0) {
    int code = 0;
    const std::string msg = gzerror(f, &code);
    gzclose(f);
    throw UserError(path + ": cannot decompress: " + msg);
  }
  gzclose(f);
  // Header: two zero bytes, the element type (0x08 = unsigned byte) and the number of dimensions.
  if (bytes.size() < 4 || bytes[0] != 0 || bytes[1] != 0)
    throw UserError(path + ": not an IDX file (bad magic number)");
  if (static_cast<uint8_t>(bytes[2]) != 0x08)
    throw UserError(path + ": IDX element type " + std::to_string(static_cast<uint8_t>(bytes[2])) +
                    " is not unsigned byte (8)");
  const size_t nd = static_cast<uint8_t>(bytes[3]);
  if (nd == 0 || bytes.size() < 4 + 4 * nd) throw UserError(path + ": truncated IDX header");
  Idx idx;
  uint64_t total = 1;
  for (size_t d = 0; d < nd; ++d) {
    idx.dims.push_back(be32(bytes, 4 + 4 * d));
    total *= static_cast<uint64_t>(idx.dims.back());
  }
  const size_t header = 4 + 4 * nd;
  if (bytes.size() - header != total)
    throw UserError(path + ": IDX data has " + std::to_string(bytes.size() - header) + " bytes, the header says " +
                    std::to_string(total));
  idx.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return idx;
}

std::unique_ptr<Source> open_fashion_mnist(const std::string& dir) {
  LabeledImages set = read_fashion_mnist(dir, "t10k");
  return std::make_unique<FashionMnist>(std::move(set.images), std::move(set.labels));
}

Batch image_batch(const LabeledImages& set, const std::vector<int64_t>& index, const Shape& input) {
  const int64_t n = static_cast<int64_t>(index.size());
  if (input.empty() || input[0] != n) throw UserError("image_batch: the batch shape does not hold the images");
  Batch b;
  b.input = Tensor(core::DType::F64, input);
  b.target = Tensor(core::DType::F64, {n, 10});
  const int64_t h = set.images.dims[1], w = set.images.dims[2];
  const int64_t side = input.back(), rows = input[input.size() - 2];
  if (side < w || rows < h || core::numel(input) != n * rows * side)
    throw UserError("image_batch: an input " + core::to_string(input) + " cannot hold 28x28 images");
  const int64_t off_r = (rows - h) / 2, off_c = (side - w) / 2;
  for (int64_t r = 0; r < n; ++r) {
    const int64_t k = index[static_cast<size_t>(r)];
    const uint8_t* img = set.images.data.data() + k * h * w;
    double* x = b.input.f64() + r * rows * side;
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < w; ++j) x[(i + off_r) * side + (j + off_c)] = img[i * w + j] / 255.0;
    b.target.f64()[r * 10 + set.labels.data[static_cast<size_t>(k)]] = 1.0;
  }
  return b;
}

LabeledImages read_fashion_mnist(const std::string& dir, const std::string& split) {
  if (split != "train" && split != "t10k") throw UserError("fashion-mnist: unknown split '" + split + "'");
  const std::string images = dir + "/" + split + "-images-idx3-ubyte.gz",
                    labels = dir + "/" + split + "-labels-idx1-ubyte.gz";
  for (const auto& p : {images, labels})
    if (!std::filesystem::exists(p))
      throw UserError("fashion-mnist: " + p +
                      " not found (install the Debian package dataset-fashion-mnist, which puts the IDX files in " +
                      fashion_mnist_dir() + ")");
  Idx im = read_idx_gz(images), lb = read_idx_gz(labels);
  if (im.dims.size() != 3 || im.dims[1] != 28 || im.dims[2] != 28)
    throw UserError(images + ": expected images [n, 28, 28]");
  if (lb.dims.size() != 1 || lb.dims[0] != im.dims[0])
    throw UserError(labels + ": expected " + std::to_string(im.dims[0]) + " labels");
  for (uint8_t l : lb.data)
    if (l > 9) throw UserError(labels + ": label " + std::to_string(l) + " outside 0..9");
  return LabeledImages{std::move(im), std::move(lb)};
}

Validation fashion_mnist_validation(const std::string& dir, int64_t n, const Shape& input) {
  const LabeledImages set = read_fashion_mnist(dir, "t10k");
  const Idx &im = set.images, &lb = set.labels;
  const int64_t count = im.dims[0], h = im.dims[1], w = im.dims[2];
  if (n < 1 || n > count)
    throw UserError("fashion-mnist: " + std::to_string(n) + " validation images asked, the test split holds " +
                    std::to_string(count));
  // [B, 1, S, S] or [B, S, S] (rows as time steps), S >= 28: zero-padded to the centre as batch() does.
  const bool image = input.size() == 4 && input[1] == 1;
  const int64_t side = input.empty() ? 0 : input.back();
  if (!(image || input.size() == 3) || side < 28 || input[input.size() - 2] != side || (!image && side != 28))
    throw UserError("fashion-mnist: a model input of shape " + core::to_string(input) +
                    " does not take 28x28 images (expected [N, 1, S, S] with S >= 28, or [N, 28, 28])");
  Validation v;
  v.images = image ? Tensor(core::DType::F64, {n, 1, side, side}) : Tensor(core::DType::F64, {n, side, side});
  const int64_t off = (side - w) / 2;
  for (int64_t r = 0; r < n; ++r) {
    v.labels.push_back(lb.data[static_cast<size_t>(r)]);
    const uint8_t* img = im.data.data() + r * h * w;
    double* x = v.images.f64() + r * side * side;
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < w; ++j) x[(i + off) * side + (j + off)] = img[i * w + j] / 255.0;
  }
  return v;
}

std::unique_ptr<Source> open_source(const std::string& name) {
  if (name == "random") return std::make_unique<RandomSource>();
  if (name == "sine") return std::make_unique<SineSource>();
  if (name == "fashion-mnist") return open_fashion_mnist(fashion_mnist_dir());
  throw UserError("unknown data set '" + name + "' (choose fashion-mnist, sine or random)");
}

}  // namespace quorum::data
