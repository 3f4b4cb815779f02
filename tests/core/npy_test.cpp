// .npy round trips and the exact bytes NumPy writes.
#include "core/npy.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "core/fileio.h"

namespace quorum::core {
namespace {

TEST(Npy, RoundTripsEveryDtype) {
  for (DType d : {DType::F32, DType::F64, DType::I64}) {
    Tensor t(d, {2, 3});
    for (int64_t i = 0; i < 6; ++i) t.set(i, static_cast<double>(i) - 2.5 * (d != DType::I64));
    const Tensor back = parse_npy(npy_bytes(t), "mem");
    EXPECT_TRUE(back.bit_equal(t)) << to_string(d);
  }
  const Tensor scalar = Tensor::scalar(3.25);
  EXPECT_TRUE(parse_npy(npy_bytes(scalar), "mem").bit_equal(scalar));
  const Tensor vec = Tensor::f64({3}, {1, 2, 3});
  EXPECT_TRUE(parse_npy(npy_bytes(vec), "mem").bit_equal(vec));
}

TEST(Npy, HeaderMatchesNumpyLayout) {
  // numpy.save of np.zeros((2,3), '<f8') writes this exact 128-byte header (v1.0, 118-byte dict).
  const std::string b = npy_bytes(Tensor(DType::F64, {2, 3}));
  ASSERT_EQ(b.size(), 128u + 48u);
  EXPECT_EQ(b.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ(static_cast<unsigned char>(b[8]), 118);
  const std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_EQ(b.substr(10, dict.size()), dict);
  EXPECT_EQ(b[127], '\n');
  // A one-dimensional shape carries the trailing comma Python needs: (3,).
  EXPECT_NE(npy_bytes(Tensor(DType::F32, {3})).find("'shape': (3,), }"), std::string::npos);
}

TEST(Npy, RejectsMalformedFilesWithTheirName) {
  EXPECT_THROW(parse_npy("hello", "x.npy"), UserError);
  std::string b = npy_bytes(Tensor(DType::F64, {4}));
  EXPECT_THROW(parse_npy(b.substr(0, b.size() - 1), "x.npy"), UserError);  // truncated data
  std::string bad = b;
  bad.replace(bad.find("<f8"), 3, "<c8");
  try {
    parse_npy(bad, "x.npy");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("x.npy"), std::string::npos);
  }
}

TEST(Npy, FileWriteIsAtomicAndReadable) {
  const auto dir = std::filesystem::temp_directory_path() / "quorum_npy_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "t.npy").string();
  const Tensor t = Tensor::f64({2}, {1.5, -2});
  write_npy(path, t);
  EXPECT_TRUE(read_npy(path).bit_equal(t));
  for (const auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos);
  std::filesystem::remove_all(dir);
  EXPECT_THROW(read_npy(path), UserError);
}

}  // namespace
}  // namespace quorum::core
