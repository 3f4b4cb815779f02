// Binary encoding of everything that crosses the worker pipe: graphs, tensors (raw buffers),
// value maps, attributes. No text parsing on the hot path. Little-endian host order: both ends
// are the same build on the same machine.
#pragma once
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "ir/graph.h"

namespace quorum::worker {

class Writer {
 public:
  void u8(uint8_t v) { buf_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void i64(int64_t v) { raw(&v, 8); }
  void f64(double v) { raw(&v, 8); }
  void str(const std::string& s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  void raw(const void* p, size_t n) { buf_.append(static_cast<const char*>(p), n); }
  void tensor(const core::Tensor& t);
  void type(const core::TensorType& t);
  void attrs(const core::Attrs& a);
  void values(const backends::ValueMap& m);
  void graph(const ir::Graph& g);
  std::string& bytes() { return buf_; }

 private:
  std::string buf_;
};

// What a Reader throws on truncated or inconsistent input ("malformed message: ..."). A count or
// size is checked against the bytes left before anything is allocated for it.
class MalformedMessage : public std::runtime_error {
 public:
  explicit MalformedMessage(const std::string& what) : std::runtime_error("malformed message: " + what) {}
};

class Reader {
 public:
  Reader(const char* p, size_t n) : p_(p), end_(p + n) {}
  explicit Reader(const std::string& s) : Reader(s.data(), s.size()) {}
  uint8_t u8();
  uint32_t u32();
  uint64_t u64();
  int64_t i64();
  double f64();
  std::string str();
  core::Tensor tensor();
  core::TensorType type();
  core::Attrs attrs();
  backends::ValueMap values();
  ir::Graph graph();
  bool done() const { return p_ == end_; }

 private:
  void take(void* dst, size_t n);
  // A count of items each at least `item_bytes` long; refused when they cannot fit in what is left.
  uint64_t count(uint64_t n, size_t item_bytes, const char* what);
  const char* p_;
  const char* end_;
};

}  // namespace quorum::worker
