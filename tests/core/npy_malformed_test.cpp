// Malformed .npy files found by fuzz/npy_fuzz.cpp: each is refused with a UserError naming the
// file, before anything is allocated for it, never with another exception or undefined behaviour.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/npy.h"

namespace quorum::core {
namespace {

// A version 1.0 .npy file with this header dictionary and `data` after it.
std::string npy(const std::string& dict, const std::string& data = "") {
  std::string header = dict;
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  return out + header + data;
}

void expect_refused(const std::string& bytes, const std::string& why) {
  try {
    parse_npy(bytes, "m.npy");
    ADD_FAILURE() << "accepted: " << why;
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("m.npy: ", 0), 0u) << e.what();
  }
}

TEST(NpyMalformed, ShapesNoDataHoldsAreRefusedBeforeAllocating) {
  // 2^60 float64 elements in a file of a few bytes (was: an allocation of 8 EiB).
  expect_refused(npy("{'descr': '<f8', 'fortran_order': False, 'shape': (1073741824, 1073741824), }"), "huge");
  // Dimensions whose product overflows int64, even beside a zero (numel multiplies them all).
  expect_refused(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 0), }"),
                 "overflowing empty");
  // A dimension beyond int64 (was: std::out_of_range from stoll).
  expect_refused(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }"), "stoll");
}

TEST(NpyMalformed, HeadersCutShortAreRefused) {
  expect_refused(npy("{'descr':"), "value missing at the end");
  expect_refused(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2"), "shape not closed");
  expect_refused(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", "abc"), "data short");
}

TEST(NpyMalformed, AnEmptyArrayStillReads) {
  const Tensor t = parse_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }"), "m.npy");
  EXPECT_EQ(t.shape(), (Shape{0, 3}));
}

}  // namespace
}  // namespace quorum::core
