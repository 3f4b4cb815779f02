// Input data for generated models: where a model's input shape and task come from, and the
// inputs and labels that feed it. Three sources: Fashion-MNIST (IDX files of the Debian package
// dataset-fashion-mnist), sine-wave sequences, and seeded random tensors with edge values mixed in.
// Every draw comes from a core::Rng passed in, so a seed gives the same batch on any machine.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"

namespace quorum::data {

using core::Shape;
using core::Tensor;

// What a model is trained for: its output layer and its target follow from this.
enum class Task { None, Classification, Regression };
std::string to_string(Task t);

// The kind of input a generator asks for. Any lets the source choose its natural form.
enum class Want { Any, Image32, Sequence };

// A model's input and target, batch first.
struct DataSpec {
  std::string source;  // "fashion-mnist", "sine", "random"
  Shape input;         // e.g. [N, 1, 28, 28]
  Task task = Task::None;
  int64_t classes = 0;  // classification: number of classes
  Shape target;         // classification: [N, classes] one-hot; regression: the target shape
};

struct Batch {
  Tensor input;   // float64, shaped spec.input
  Tensor target;  // float64, shaped spec.target (undefined when the task is None)
};

class Source {
 public:
  virtual ~Source() = default;
  virtual std::string name() const = 0;
  // The input shape and task of one model. Fixed by the data (Fashion-MNIST) or drawn (random).
  virtual DataSpec spec(core::Rng& rng, Want want) const = 0;
  // One batch for a spec this source made.
  virtual Batch batch(const DataSpec& spec, core::Rng& rng) const = 0;
};

// "fashion-mnist", "sine" or "random"; UserError naming the choices otherwise. Fashion-MNIST is
// read here, so a missing package fails at once with one clear line.
std::unique_ptr<Source> open_source(const std::string& name);
const std::vector<std::string>& source_names();

// ---- Fashion-MNIST ------------------------------------------------------------------------

// Where the Debian package dataset-fashion-mnist installs its files.
std::string fashion_mnist_dir();

// An IDX file (big-endian header: magic, then one uint32 per dimension, then uint8 data).
struct Idx {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};
// Reads a gzip-compressed IDX file of unsigned bytes. UserError naming the file when it is
// missing, not gzip, truncated or not IDX.
Idx read_idx_gz(const std::string& path);

// The test split (t10k: 10 000 images, 28x28, labels 0..9) of the data set in `dir`. UserError
// naming the directory and the package when the files are absent.
std::unique_ptr<Source> open_fashion_mnist(const std::string& dir);

// A validation set: the first n images of the test split in order (pixels / 255) and their labels
// 0..9, shaped for a model input `input` ([N, 1, S, S] with S >= 28, zero-padded to the centre, or
// [N, 28, 28]; N is replaced by n). UserError when the files are absent, n is out of range or the
// shape takes no 28x28 image.
struct Validation {
  Tensor images;  // float64
  std::vector<int64_t> labels;
};
Validation fashion_mnist_validation(const std::string& dir, int64_t n, const Shape& input);
// One split of Fashion-MNIST as stored: "train" (60 000 images) or "t10k" (the 10 000 test images),
// each 28x28 bytes, and its labels 0..9. UserError as open_fashion_mnist.
struct LabeledImages {
  Idx images;  // [n, 28, 28]
  Idx labels;  // [n]
  int64_t count() const { return images.dims.empty() ? 0 : images.dims[0]; }
};
LabeledImages read_fashion_mnist(const std::string& dir, const std::string& split);
// Images `index` of the split as a float64 batch shaped `input` ([N, 1, S, S] with S >= 28, zero-padded
// around the centre as spec() pads to 32; or [N, 28, 28], rows as time steps), values in [0, 1], and
// their one-hot targets [N, 10].
Batch image_batch(const LabeledImages& set, const std::vector<int64_t>& index, const Shape& input);

// Random tensors with edge values (the random source's inputs): data/values.h.

}  // namespace quorum::data
