// Data sources: the gzip IDX reader (on files made here with zlib), Fashion-MNIST from the Debian
// package when it is installed, a clear error when it is not, sine waves and random tensors.
#include "data/dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "data/values.h"

namespace quorum::data {
namespace {

namespace fs = std::filesystem;

fs::path scratch() {
  const fs::path d = fs::temp_directory_path() / ("quorum_data_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

void write_gz(const fs::path& p, const std::string& bytes) {
  gzFile f = gzopen(p.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  gzclose(f);
}

std::string idx_bytes(const std::vector<uint32_t>& dims, uint8_t type = 0x08) {
  std::string b{'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  size_t n = 1;
  for (uint32_t d : dims) {
    for (int s = 24; s >= 0; s -= 8) b += static_cast<char>((d >> s) & 0xff);
    n *= d;
  }
  for (size_t i = 0; i < n; ++i) b += static_cast<char>(i % 251);
  return b;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const core::UserError& e) {
    return e.what();
  }
  return "";
}

TEST(Idx, ReadsGzipIdx) {
  const fs::path p = scratch() / "small-idx3-ubyte.gz";
  write_gz(p, idx_bytes({3, 4, 5}));
  const Idx idx = read_idx_gz(p.string());
  EXPECT_EQ(idx.dims, (std::vector<int64_t>{3, 4, 5}));
  ASSERT_EQ(idx.data.size(), 60u);
  EXPECT_EQ(idx.data[59], 59);
}

TEST(Idx, BadFilesAreNamedUserErrors) {
  const fs::path d = scratch();
  EXPECT_NE(error_of([&] { read_idx_gz((d / "absent.gz").string()); }).find("absent.gz: cannot open"),
            std::string::npos);
  write_gz(d / "magic.gz", "\x01\x02\x08\x01xxxx");
  EXPECT_NE(error_of([&] { read_idx_gz((d / "magic.gz").string()); }).find("bad magic"), std::string::npos);
  write_gz(d / "type.gz", idx_bytes({2}, 0x0D));
  EXPECT_NE(error_of([&] { read_idx_gz((d / "type.gz").string()); }).find("not unsigned byte"), std::string::npos);
  std::string shortened = idx_bytes({4, 4});
  shortened.resize(shortened.size() - 3);
  write_gz(d / "short.gz", shortened);
  EXPECT_NE(error_of([&] { read_idx_gz((d / "short.gz").string()); }).find("the header says 16"), std::string::npos);
  // A gzip stream cut in the middle.
  write_gz(d / "cut.gz", idx_bytes({64, 64}));
  const auto size = fs::file_size(d / "cut.gz");
  fs::resize_file(d / "cut.gz", size / 2);
  EXPECT_NE(error_of([&] { read_idx_gz((d / "cut.gz").string()); }).find("cut.gz"), std::string::npos);
}

TEST(FashionMnist, MissingPackageIsOneClearLine) {
  const std::string msg = error_of([&] { open_fashion_mnist((scratch() / "nowhere").string()); });
  EXPECT_NE(msg.find("dataset-fashion-mnist"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
}

TEST(FashionMnist, SyntheticFilesInThePackageLayout) {
  const fs::path d = scratch() / "fm";
  fs::create_directories(d);
  write_gz(d / "t10k-images-idx3-ubyte.gz", idx_bytes({5, 28, 28}));
  std::string labels = idx_bytes({5});
  write_gz(d / "t10k-labels-idx1-ubyte.gz", labels.substr(0, 8) + std::string{1, 2, 3, 4, 9});
  const auto src = open_fashion_mnist(d.string());
  core::Rng rng(1);
  for (Want w : {Want::Any, Want::Image32, Want::Sequence}) {
    const DataSpec s = src->spec(rng, w);
    const Batch b = src->batch(s, rng);
    EXPECT_EQ(b.input.shape(), s.input);
    EXPECT_EQ(b.target.shape(), s.target);
    EXPECT_EQ(s.task, Task::Classification);
    double ones = 0;
    for (double v : b.target.values()) ones += v;
    EXPECT_EQ(ones, static_cast<double>(s.input[0]));  // one-hot rows
    for (double v : b.input.values()) EXPECT_TRUE(v >= 0.0 && v <= 1.0);
  }
  write_gz(d / "t10k-labels-idx1-ubyte.gz", labels.substr(0, 8) + std::string{1, 2, 3, 4, 10});
  EXPECT_NE(error_of([&] { open_fashion_mnist(d.string()); }).find("outside 0..9"), std::string::npos);
}

TEST(FashionMnist, TheInstalledDataSet) {
  if (!fs::exists(fashion_mnist_dir())) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const auto src = open_source("fashion-mnist");
  core::Rng rng(2);
  const DataSpec s = src->spec(rng, Want::Any);
  EXPECT_EQ(s.input, (Shape{s.input[0], 1, 28, 28}));
  EXPECT_EQ(s.classes, 10);
  const Batch b = src->batch(s, rng);
  double sum = 0;
  for (double v : b.input.values()) sum += v;
  EXPECT_GT(sum, 0.0);  // real images are not blank
  // Padded to 32x32 for the zoo: a border of two zero pixels.
  const DataSpec p = src->spec(rng, Want::Image32);
  const Batch pb = src->batch(p, rng);
  EXPECT_EQ(pb.input.f64()[0], 0.0);
  EXPECT_EQ(pb.input.f64()[32 * 32 - 1], 0.0);
}

TEST(Sine, SequencesPredictTheNextValue) {
  const auto src = open_source("sine");
  core::Rng rng(3);
  const DataSpec s = src->spec(rng, Want::Sequence);
  EXPECT_EQ(s.task, Task::Regression);
  EXPECT_EQ(s.input.size(), 3u);
  const Batch b = src->batch(s, rng);
  for (double v : b.input.values()) EXPECT_LE(std::abs(v), 2.0);
  EXPECT_EQ(b.target.shape(), (Shape{s.input[0], 1}));
  const DataSpec img = src->spec(rng, Want::Image32);
  EXPECT_EQ(src->batch(img, rng).input.shape(), img.input);
  // Inference-only models (ws, rn) keep the input and drop the task: no target then.
  for (DataSpec none : {s, img}) {
    none.task = Task::None;
    const Batch nb = src->batch(none, rng);
    EXPECT_EQ(nb.input.shape(), none.input);
    EXPECT_FALSE(nb.target.defined());
  }
}

TEST(Random, EdgeValuesAreMixedIn) {
  core::Rng rng(4);
  const core::Tensor t = random_with_edges({4000}, rng);
  int zero = 0, denormal = 0, large = 0;
  for (double v : t.values()) {
    zero += v == 0.0;
    denormal += v != 0.0 && std::abs(v) < 1e-38;
    large += std::abs(v) >= 1e4;
  }
  EXPECT_GT(zero, 0);
  EXPECT_GT(denormal, 0);
  EXPECT_GT(large, 0);
  EXPECT_LT(zero + denormal + large, 400);  // mixed in, not dominating
}

TEST(Random, SameSeedSameBatch) {
  const auto src = open_source("random");
  core::Rng a(5), b(5);
  const DataSpec sa = src->spec(a, Want::Any), sb = src->spec(b, Want::Any);
  EXPECT_EQ(sa.input, sb.input);
  EXPECT_TRUE(src->batch(sa, a).input.bit_equal(src->batch(sb, b).input));
}

TEST(Sources, UnknownNameIsAUserError) {
  EXPECT_NE(error_of([] { open_source("cifar"); }).find("fashion-mnist, sine or random"), std::string::npos);
}

}  // namespace
}  // namespace quorum::data
