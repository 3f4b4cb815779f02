// Tensor storage and conversions.
#include "core/tensor.h"

#include <cmath>
#include <iostream>
#include <sstream>

#include "core/error.h"

namespace quorum::core {

[[noreturn]] void internal_error(const std::string& msg) {
  std::cerr << "quorum: internal error: " << msg << std::endl;
  std::abort();
}

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string to_string(const Shape& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? "," : "") << shape[i];
  os << "]";
  return os.str();
}

std::string to_string(DType dtype) {
  switch (dtype) {
    case DType::F32: return "float32";
    case DType::F64: return "float64";
    case DType::I64: return "int64";
    case DType::I8: return "int8";
    case DType::U8: return "uint8";
    case DType::I32: return "int32";
  }
  return "?";
}

DType dtype_from_string(const std::string& s) {
  if (s == "float32" || s == "f32") return DType::F32;
  if (s == "float64" || s == "f64") return DType::F64;
  if (s == "int64" || s == "i64") return DType::I64;
  if (s == "int8" || s == "i8") return DType::I8;
  if (s == "uint8" || s == "u8") return DType::U8;
  if (s == "int32" || s == "i32") return DType::I32;
  throw UserError("unknown dtype '" + s + "' (expected float32, float64, int64, int8, uint8 or int32)");
}

std::pair<double, double> dtype_range(DType dtype) {
  switch (dtype) {
    case DType::I8: return {-128, 127};
    case DType::U8: return {0, 255};
    case DType::I32: return {-2147483648.0, 2147483647.0};
    case DType::I64: return {-0x1p63, 0x1p63 - 1024};
    default: return {-HUGE_VAL, HUGE_VAL};
  }
}

bool representable(DType dtype, double v) {
  if (is_float(dtype)) return true;
  const auto [lo, hi] = dtype_range(dtype);
  return v == std::nearbyint(v) && v >= lo && v <= hi;
}

std::string to_string(const TensorType& t) { return to_string(t.dtype) + to_string(t.shape); }

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)), defined_(true) {
  for (int64_t d : shape_) QUORUM_CHECK(d >= 0, "negative dimension");
  data_.assign(static_cast<size_t>(core::numel(shape_)) * dtype_size(dtype_), std::byte{0});
}

Tensor Tensor::f64(Shape shape, const std::vector<double>& values) {
  Tensor t(DType::F64, std::move(shape));
  QUORUM_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "value count does not match shape");
  if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * sizeof(double));
  return t;
}

int64_t Tensor::dim(int i) const {
  if (i < 0) i += rank();
  QUORUM_CHECK(i >= 0 && i < rank(), "dim out of range");
  return shape_[static_cast<size_t>(i)];
}

double* Tensor::f64() {
  QUORUM_CHECK(dtype_ == DType::F64, "tensor is not float64");
  return reinterpret_cast<double*>(data_.data());
}
const double* Tensor::f64() const {
  QUORUM_CHECK(dtype_ == DType::F64, "tensor is not float64");
  return reinterpret_cast<const double*>(data_.data());
}
float* Tensor::f32() {
  QUORUM_CHECK(dtype_ == DType::F32, "tensor is not float32");
  return reinterpret_cast<float*>(data_.data());
}
const float* Tensor::f32() const {
  QUORUM_CHECK(dtype_ == DType::F32, "tensor is not float32");
  return reinterpret_cast<const float*>(data_.data());
}
int64_t* Tensor::i64() {
  QUORUM_CHECK(dtype_ == DType::I64, "tensor is not int64");
  return reinterpret_cast<int64_t*>(data_.data());
}
const int64_t* Tensor::i64() const {
  QUORUM_CHECK(dtype_ == DType::I64, "tensor is not int64");
  return reinterpret_cast<const int64_t*>(data_.data());
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_ || !defined_) return *this;
  Tensor out(dtype, shape_);
  const int64_t n = numel();
  if (dtype_ == DType::F32 && dtype == DType::F64) {
    const float* a = f32();
    double* b = out.f64();
    for (int64_t i = 0; i < n; ++i) b[i] = a[i];
  } else if (dtype_ == DType::F64 && dtype == DType::F32) {
    const double* a = f64();
    float* b = out.f32();
    for (int64_t i = 0; i < n; ++i) b[i] = static_cast<float>(a[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out.set(i, get(i));
  }
  return out;
}

Tensor Tensor::reshaped(Shape shape) const {
  QUORUM_CHECK(core::numel(shape) == numel(), "reshape changes element count");
  Tensor out = *this;
  out.shape_ = std::move(shape);
  return out;
}

std::vector<double> Tensor::values() const {
  std::vector<double> v(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) v[static_cast<size_t>(i)] = get(i);
  return v;
}

void Tensor::fill(double v) {
  for (int64_t i = 0; i < numel(); ++i) set(i, v);
}

std::vector<int64_t> strides_of(const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i)
    s[static_cast<size_t>(i)] = s[static_cast<size_t>(i) + 1] * shape[static_cast<size_t>(i) + 1];
  return s;
}

Tensor slab(const Tensor& t, size_t axis, int64_t from, int64_t n) {
  const Tensor x = t.to(DType::F64);
  Shape shape = x.shape();
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < shape.size(); ++i) (i < axis ? outer : inner) *= i == axis ? 1 : shape[i];
  const int64_t length = shape[axis];
  shape[axis] = n;
  Tensor out(DType::F64, shape);
  for (int64_t o = 0; o < outer; ++o)
    std::copy(x.f64() + (o * length + from) * inner, x.f64() + (o * length + from + n) * inner,
              out.f64() + o * n * inner);
  return out;
}

}  // namespace quorum::core
