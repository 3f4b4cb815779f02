// Tensors: a dtype, a shape and a contiguous row-major byte buffer.
// The reference computes in float64; backends exchange float32/float64/int64 buffers, and the
// quantized models' int8/uint8 values and int32 biases.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace quorum::core {

enum class DType : uint8_t { F32, F64, I64, I8, U8, I32 };

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& shape);
std::string to_string(const Shape& shape);
std::string to_string(DType dtype);
// Accepts "float32"/"f32", "float64"/"f64", "int64"/"i64", "int8"/"i8", "uint8"/"u8", "int32"/"i32";
// throws UserError otherwise.
DType dtype_from_string(const std::string& s);
inline size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F32: case DType::I32: return 4;
    case DType::I8: case DType::U8: return 1;
    default: return 8;
  }
}
// A floating-point dtype (what a library computes in); the others hold integers.
inline bool is_float(DType dtype) { return dtype == DType::F32 || dtype == DType::F64; }
// A quantized value's dtype: int8 or uint8.
inline bool is_quantized(DType dtype) { return dtype == DType::I8 || dtype == DType::U8; }
// The range of an integer dtype (int64's as far as a double holds it); floats: +-inf.
std::pair<double, double> dtype_range(DType dtype);
// Whether `v` is a value of `dtype` (an integer in its range for the integer dtypes; anything for floats).
bool representable(DType dtype, double v);

struct TensorType {
  DType dtype = DType::F64;
  Shape shape;
  bool operator==(const TensorType&) const = default;
};
std::string to_string(const TensorType& t);

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, Shape shape);  // zero-filled
  explicit Tensor(const TensorType& t) : Tensor(t.dtype, t.shape) {}

  static Tensor f64(Shape shape, const std::vector<double>& values);
  static Tensor scalar(double v) { return f64({}, {v}); }

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  TensorType type() const { return {dtype_, shape_}; }
  int64_t numel() const { return static_cast<int64_t>(data_.size() / dtype_size(dtype_)); }
  int64_t dim(int i) const;  // negative i counts from the end
  int rank() const { return static_cast<int>(shape_.size()); }
  bool defined() const { return defined_; }

  void* raw() { return data_.data(); }
  const void* raw() const { return data_.data(); }
  size_t nbytes() const { return data_.size(); }

  double* f64();
  const double* f64() const;
  float* f32();
  const float* f32() const;
  int64_t* i64();
  const int64_t* i64() const;

  // Element i converted to double, whatever the dtype.
  double get(int64_t i) const {
    const std::byte* p = data_.data();
    switch (dtype_) {
      case DType::F32: return reinterpret_cast<const float*>(p)[i];
      case DType::F64: return reinterpret_cast<const double*>(p)[i];
      case DType::I64: return static_cast<double>(reinterpret_cast<const int64_t*>(p)[i]);
      case DType::I8: return reinterpret_cast<const int8_t*>(p)[i];
      case DType::U8: return reinterpret_cast<const uint8_t*>(p)[i];
      case DType::I32: return reinterpret_cast<const int32_t*>(p)[i];
    }
    return 0;
  }
  void set(int64_t i, double v) {
    std::byte* p = data_.data();
    switch (dtype_) {
      case DType::F32: reinterpret_cast<float*>(p)[i] = static_cast<float>(v); break;
      case DType::F64: reinterpret_cast<double*>(p)[i] = v; break;
      case DType::I64: reinterpret_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); break;
      case DType::I8: reinterpret_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); break;
      case DType::U8: reinterpret_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); break;
      case DType::I32: reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
    }
  }

  Tensor to(DType dtype) const;        // converting copy
  Tensor reshaped(Shape shape) const;  // same data, new shape (numel must match)
  std::vector<double> values() const;  // all elements as double
  void fill(double v);

  bool bit_equal(const Tensor& o) const {
    return dtype_ == o.dtype_ && shape_ == o.shape_ && data_ == o.data_;
  }

 private:
  DType dtype_ = DType::F64;
  Shape shape_;
  std::vector<std::byte> data_;
  bool defined_ = false;
};

// Row-major strides of a shape, in elements.
std::vector<int64_t> strides_of(const Shape& shape);

// The elements [from, from + n) of `t` along `axis` (within its length), in float64.
Tensor slab(const Tensor& t, size_t axis, int64_t from, int64_t n);

}  // namespace quorum::core
