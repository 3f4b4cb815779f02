// Kernel helpers.
#include "ops/kernel_util.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace quorum::ops {

std::pair<int64_t, int64_t> same_pads(const std::string& auto_pad, int64_t in, int64_t extent, int64_t stride) {
  const int64_t out = (in + stride - 1) / stride;
  const int64_t total = std::max<int64_t>(0, (out - 1) * stride + extent - in);
  const int64_t begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
  return {begin, total - begin};
}

Pads resolve_pads(const std::string& auto_pad, const std::vector<int64_t>& pads, const Shape& x,
                  const std::vector<int64_t>& extent, const std::vector<int64_t>& strides) {
  const auto r = static_cast<std::ptrdiff_t>(extent.size());
  Pads p{{pads.begin(), pads.begin() + r}, {pads.begin() + r, pads.end()}};
  if (auto_pad == "VALID") {
    p.begin.assign(extent.size(), 0);
    p.end.assign(extent.size(), 0);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < extent.size(); ++i)
      std::tie(p.begin[i], p.end[i]) = same_pads(auto_pad, x[i + 2], extent[i], strides[i]);
  }
  return p;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    QUORUM_REQUIRE(da == db || da == 1 || db == 1,
                   "shapes " + core::to_string(a) + " and " + core::to_string(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> broadcast_map(const Shape& in, const Shape& out) {
  const size_t r = out.size();
  QUORUM_CHECK(in.size() <= r, "broadcast_map: input rank exceeds output rank");
  Shape padded(r - in.size(), 1);
  padded.insert(padded.end(), in.begin(), in.end());
  const int64_t n = core::numel(out);
  std::vector<int64_t> map(static_cast<size_t>(n));
  if (padded == out) {  // no broadcast: the identity
    for (int64_t i = 0; i < n; ++i) map[static_cast<size_t>(i)] = i;
    return map;
  }
  const auto in_strides = core::strides_of(padded);
  std::vector<int64_t> idx(r, 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t off = 0;
    for (size_t d = 0; d < r; ++d)
      if (padded[d] != 1) off += idx[d] * in_strides[d];
    map[static_cast<size_t>(flat)] = off;
    for (int d = static_cast<int>(r) - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < out[static_cast<size_t>(d)]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
  return map;
}

Tensor fold(const Tensor& g, const std::vector<int64_t>& map, const Shape& shape) {
  Tensor out(DType::F64, shape);
  const double* gp = g.f64();
  double* op = out.f64();
  // Each value that receives several is a float32 sum in a float32 implementation
  // (ops::stored_sum): terms that cancel keep its rounding error, terms beyond float32's range
  // make it inf - inf.
  std::vector<double> magnitude(static_cast<size_t>(out.numel()));
  std::vector<int64_t> terms(static_cast<size_t>(out.numel()));
  for (size_t i = 0; i < map.size(); ++i) {
    if (map[i] < 0) continue;
    const auto o = static_cast<size_t>(map[i]);
    op[o] += gp[i];
    magnitude[o] += std::abs(gp[i]);
    ++terms[o];
  }
  for (int64_t o = 0; o < out.numel(); ++o)
    op[o] = stored_sum(op[o], magnitude[static_cast<size_t>(o)], terms[static_cast<size_t>(o)]);
  return out;
}

Tensor sum_to(const Tensor& g, const Shape& in_shape) {
  if (g.shape() == in_shape) return g;
  return fold(g, broadcast_map(in_shape, g.shape()), in_shape);
}

int norm_axis(int64_t axis, int rank) {
  QUORUM_REQUIRE(axis >= -rank && axis < rank,
                 "axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

size_t norm_axis(int64_t axis, size_t rank) { return static_cast<size_t>(norm_axis(axis, static_cast<int>(rank))); }

Tensor map1(const Tensor& x, const std::function<double(double)>& f) {
  Tensor y(DType::F64, x.shape());
  const double* xp = x.f64();
  double* yp = y.f64();
  for (int64_t i = 0; i < x.numel(); ++i) yp[i] = f(xp[i]);
  return y;
}

Signature same_type_as_input(const std::vector<TensorType>& in, const Attrs&) {
  common_float_dtype(in);
  return Signature{{in[0]}, {}};
}

Shape random_shape(core::Rng& rng, int rank, int64_t lo, int64_t hi) {
  Shape s(static_cast<size_t>(rank));
  for (auto& d : s) d = rng.randint(lo, hi);
  return s;
}

int64_t maybe_negative(core::Rng& rng, int64_t axis, int64_t rank) { return rng.bernoulli(0.3) ? axis - rank : axis; }

double random_float(core::Rng& rng, double lo, double hi, int digits) {
  const double scale = std::pow(10.0, digits);
  return std::round(rng.uniform(lo, hi) * scale) / scale;
}

DType common_float_dtype(const std::vector<TensorType>& in) {
  QUORUM_CHECK(!in.empty(), "no inputs");
  for (const auto& t : in) {
    QUORUM_REQUIRE(core::is_float(t.dtype), "input must be floating point, got " + core::to_string(t.dtype));
    QUORUM_REQUIRE(t.dtype == in[0].dtype,
                   "inputs mix " + core::to_string(in[0].dtype) + " and " + core::to_string(t.dtype));
  }
  return in[0].dtype;
}

double resize_source_coord(const std::string& mode, int64_t o, int64_t in, int64_t out, double scale) {
  const auto od = static_cast<double>(o), ind = static_cast<double>(in), outd = static_cast<double>(out);
  if (mode == "align_corners") return out == 1 ? 0.0 : od * (ind - 1.0) / (outd - 1.0);
  if (mode == "pytorch_half_pixel" && out == 1) return 0.0;
  if (scale > 0) {
    if (mode == "asymmetric") return od / scale;
    if (mode == "tf_half_pixel_for_nn") return (od + 0.5) / scale;
    return (od + 0.5) / scale - 0.5;  // half_pixel, pytorch_half_pixel
  }
  if (mode == "asymmetric") return od * ind / outd;
  if (mode == "tf_half_pixel_for_nn") return (2.0 * od + 1.0) * ind / (2.0 * outd);
  return (2.0 * od + 1.0) * ind / (2.0 * outd) - 0.5;  // half_pixel, pytorch_half_pixel
}

double resize_given_scale(const core::Attrs& a, size_t axis) {
  const auto it = a.find("scales");
  if (it == a.end()) return 0;
  const auto& s = std::get<std::vector<double>>(it->second);
  return axis < s.size() ? s[axis] : 0;
}

double resize_coord(const core::Attrs& a, size_t axis, int64_t o, int64_t in, int64_t out) {
  const std::string& ctm = core::attr_s(a, "coordinate_transformation_mode");
  if (ctm != "tf_crop_and_resize") return resize_source_coord(ctm, o, in, out, resize_given_scale(a, axis));
  const auto it = a.find("roi");
  const std::vector<double> none{0.0, 0.0, 1.0, 1.0};
  const auto& roi = it == a.end() || std::get<std::vector<double>>(it->second).empty()
                        ? none
                        : std::get<std::vector<double>>(it->second);
  const double start = roi[axis], end = roi[axis + 2], span = static_cast<double>(in - 1);
  if (out == 1) return 0.5 * (start + end) * span;
  return start * span + static_cast<double>(o) * (end - start) * span / static_cast<double>(out - 1);
}

bool resize_extrapolates(const core::Attrs& a, double coord, int64_t in) {
  return core::attr_s(a, "coordinate_transformation_mode") == "tf_crop_and_resize" &&
         (coord < 0.0 || coord > static_cast<double>(in - 1));
}

bool resize_scale_matters(const core::Attrs& a, size_t axis, int64_t in, int64_t out) {
  const double s = resize_given_scale(a, axis);
  if (s <= 0 || in == 1 || core::attr_s(a, "coordinate_transformation_mode") == "align_corners") return false;
  return s != static_cast<double>(out) / static_cast<double>(in);
}

int64_t resize_round_nearest(const std::string& mode, double x) {
  if (mode == "floor") return static_cast<int64_t>(std::floor(x));
  if (mode == "ceil") return static_cast<int64_t>(std::ceil(x));
  const double fl = std::floor(x);
  if (x - fl == 0.5) return static_cast<int64_t>(mode == "round_prefer_ceil" ? fl + 1.0 : fl);
  return static_cast<int64_t>(std::round(x));
}

std::vector<double> float32_slot_sums(const Tensor& x, const std::vector<int64_t>& slot, int64_t count,
                                      Float32Order order) {
  const size_t n = static_cast<size_t>(count);
  const size_t lanes = order == Float32Order::kLanes ? kSumLanes : 1;
  std::vector<float> partial(n * lanes, 0.0f);
  std::vector<size_t> taken(n, 0);  // terms each sum has taken so far
  for (size_t i = 0; i < slot.size(); ++i) {
    const size_t k = static_cast<size_t>(slot[i]);
    partial[k * lanes + taken[k]++ % lanes] += static_cast<float>(x.get(static_cast<int64_t>(i)));
  }
  std::vector<double> out(n);
  for (size_t k = 0; k < n; ++k) {
    float sum = 0.0f;
    for (size_t l = 0; l < lanes; ++l) sum += partial[k * lanes + l];
    out[k] = static_cast<double>(sum);
  }
  return out;
}

}  // namespace quorum::ops
