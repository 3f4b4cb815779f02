// Malformed worker frames found by fuzz/worker_frame_fuzz.cpp: the codec refuses each with
// MalformedMessage before allocating for a count or size the frame does not hold.
#include <gtest/gtest.h>

#include "worker/codec.h"

namespace quorum::worker {
namespace {

TEST(CodecMalformed, AnAttributeListLongerThanTheFrameIsRefused) {
  Writer w;
  w.u32(1);
  w.str("axes");
  w.u8(3);           // a list of int64
  w.u64(1ull << 60);  // was: a vector of 2^60 elements
  Reader r(w.bytes());
  EXPECT_THROW(r.attrs(), MalformedMessage);
}

TEST(CodecMalformed, TensorDimensionsWhoseProductOverflowsAreRefused) {
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{
           {int64_t{1} << 40, int64_t{1} << 40}, {int64_t{1} << 40, int64_t{1} << 40, 0}, {1, int64_t{1} << 61}}) {
    Writer w;
    w.u8(1);
    w.type({core::DType::F32, shape});
    w.u64(0);
    Reader r(w.bytes());
    EXPECT_THROW(r.tensor(), MalformedMessage);
  }
}

TEST(CodecMalformed, AWellFormedTensorStillReads) {
  Writer w;
  core::Tensor t = core::Tensor::f64({2, 0}, {});
  w.tensor(t);
  w.tensor(core::Tensor::f64({2}, {1, 2}));
  Reader r(w.bytes());
  EXPECT_EQ(r.tensor().shape(), (core::Shape{2, 0}));
  EXPECT_EQ(r.tensor().numel(), 2);
  EXPECT_TRUE(r.done());
}

}  // namespace
}  // namespace quorum::worker
