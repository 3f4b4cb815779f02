// .npy round trips and the exact bytes NumPy writes.
#include "core/npy.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

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

// A .npy file as another writer lays it out: `descr` and `fortran` in the header, `data` as given.
std::string npy_with(const std::string& descr, bool fortran, const std::string& shape, const std::string& data) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                       ", 'shape': " + shape + ", }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  return out + header + data;
}

// The bytes of `v` as a T in big-endian order.
template <typename T>
std::string big_endian(T v) {
  std::string b(sizeof(T), '\0');
  std::memcpy(b.data(), &v, sizeof(T));
  std::reverse(b.begin(), b.end());
  return b;
}

TEST(Npy, ReadsFortranOrderAndBigEndian) {
  // [[0, 1, 2], [3, 4, 5]] stored column by column: 0 3 1 4 2 5.
  const std::vector<double> col_major = {0, 3, 1, 4, 2, 5};
  std::string le, be;
  for (double v : col_major) {
    le.append(reinterpret_cast<const char*>(&v), sizeof v);
    be += big_endian(v);
  }
  const Tensor want = Tensor::f64({2, 3}, {0, 1, 2, 3, 4, 5});
  EXPECT_TRUE(parse_npy(npy_with("<f8", true, "(2, 3)", le), "f.npy").bit_equal(want));
  EXPECT_TRUE(parse_npy(npy_with(">f8", true, "(2, 3)", be), "f.npy").bit_equal(want));
  std::string be_rows;
  for (double v : {0.0, 1.0, 2.0, 3.0, 4.0, 5.0}) be_rows += big_endian(v);
  EXPECT_TRUE(parse_npy(npy_with(">f8", false, "(2, 3)", be_rows), "b.npy").bit_equal(want));
  // float32 and int64, big-endian; a rank-3 Fortran array.
  const Tensor f = parse_npy(npy_with(">f4", false, "(2,)", big_endian(1.5f) + big_endian(-2.0f)), "f4.npy");
  EXPECT_TRUE(f.bit_equal(Tensor::f64({2}, {1.5, -2}).to(DType::F32)));
  const Tensor i = parse_npy(npy_with(">i8", false, "(2,)", big_endian<int64_t>(7) + big_endian<int64_t>(-300)), "i8");
  EXPECT_EQ(i.dtype(), DType::I64);
  EXPECT_EQ(i.values(), (std::vector<double>{7, -300}));
  std::string f3;
  for (int k = 0; k < 2; ++k)  // column-major over shape (2, 2, 2): the first index runs fastest
    for (int j = 0; j < 2; ++j)
      for (int r = 0; r < 2; ++r) {
        const double v = r * 4 + j * 2 + k;
        f3.append(reinterpret_cast<const char*>(&v), sizeof v);
      }
  EXPECT_TRUE(parse_npy(npy_with("<f8", true, "(2, 2, 2)", f3), "f3.npy")
                  .bit_equal(Tensor::f64({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7})));
  EXPECT_THROW(parse_npy(npy_with("|f8", false, "(2, 3)", le), "x.npy"), UserError);
}

// Files NumPy itself writes (np.save of a transposed view is Fortran order; astype('>f4') is big-endian).
TEST(Npy, ReadsWhatNumpyWritesInEveryOrder) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3-numpy";
  const auto dir = std::filesystem::temp_directory_path() / ("quorum_npy_numpy_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string script =
      "import numpy as np, sys; d = sys.argv[1]; a = np.arange(24, dtype='<f8').reshape(2, 3, 4) - 7.5\n"
      "np.save(d + '/c.npy', a); np.save(d + '/f.npy', np.asfortranarray(a))\n"
      "np.save(d + '/be4.npy', a.astype('>f4')); np.save(d + '/be8f.npy', np.asfortranarray(a.astype('>f8')))\n"
      "np.save(d + '/bei8.npy', np.asfortranarray(a.astype('>i8'))); np.save(d + '/t.npy', a.T)\n";
  std::ofstream(dir / "w.py") << script;
  ASSERT_EQ(std::system(("/usr/bin/python3 " + (dir / "w.py").string() + " " + dir.string()).c_str()), 0);
  const Tensor c = read_npy((dir / "c.npy").string());
  ASSERT_EQ(c.shape(), (Shape{2, 3, 4}));
  EXPECT_NE(read_file((dir / "f.npy").string()).find("'fortran_order': True"), std::string::npos);
  EXPECT_TRUE(read_npy((dir / "f.npy").string()).bit_equal(c));
  EXPECT_TRUE(read_npy((dir / "be4.npy").string()).bit_equal(c.to(DType::F32)));
  EXPECT_TRUE(read_npy((dir / "be8f.npy").string()).bit_equal(c));
  EXPECT_EQ(read_npy((dir / "bei8.npy").string()).values(), c.to(DType::I64).values());
  const Tensor t = read_npy((dir / "t.npy").string());
  ASSERT_EQ(t.shape(), (Shape{4, 3, 2}));
  const std::vector<double> tv = t.values(), cv = c.values();
  for (size_t i = 0; i < 2; ++i)
    for (size_t j = 0; j < 3; ++j)
      for (size_t k = 0; k < 4; ++k) EXPECT_EQ(tv[k * 6 + j * 2 + i], cv[i * 12 + j * 4 + k]);
  std::filesystem::remove_all(dir);
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
