// Helpers shared by the family files: broadcasting, axes, element maps and case sampling.
// Kernels here favour clarity over speed: they are the float64 reference.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/op_spec.h"

namespace quorum::ops {

// Whether v takes the place of the current extreme `best` (a maximum when `max`): the first NaN
// wins and stays, so max/min kernels propagate NaN whatever the element order; otherwise a strict
// comparison (ties keep the first).
inline bool beats_extreme(double v, double best, bool max) {
  if (best != best) return false;
  return v != v || (max ? v > best : v < best);
}

// Whether v attains the extreme m a kernel found (beats_extreme): equal, or both NaN. Where the
// extreme is NaN every NaN attains it, and libraries route the gradient to different ones.
inline bool attains_extreme(double v, double m) { return v == m || (v != v && m != m); }

using core::require;

// Throws core::OpError(reason) unless cond holds, like core::require, but formats the reason (often
// built from shapes) only when it throws: generators call the shape rules on every candidate node.
#define QUORUM_REQUIRE(cond, reason)                    \
  do {                                                  \
    if (!(cond)) throw ::quorum::core::OpError(reason); \
  } while (0)

inline TensorType f64t(Shape s) { return TensorType{DType::F64, std::move(s)}; }

// ONNX auto_pad SAME_UPPER / SAME_LOWER along one axis: output ceil(in / stride), total padding
// (out - 1) * stride + extent - in (at least 0), the odd cell at the end (SAME_UPPER) or at the
// beginning (SAME_LOWER). `extent` is the window's (dilated) length. Returns {begin, end}.
std::pair<int64_t, int64_t> same_pads(const std::string& auto_pad, int64_t in, int64_t extent, int64_t stride);

// A window operator's (conv, pool) explicit pads per spatial axis after ONNX auto_pad: `pads`
// ([begin..., end...]) for NOTSET, none for VALID, same_pads for SAME_*. `x` is the input shape
// [N, C, spatial...], `extent` the (dilated) window length per axis.
struct Pads {
  std::vector<int64_t> begin, end;
  bool symmetric() const { return begin == end; }
};
Pads resolve_pads(const std::string& auto_pad, const std::vector<int64_t>& pads, const Shape& x,
                  const std::vector<int64_t>& extent, const std::vector<int64_t>& strides);

// NumPy broadcasting of two shapes; OpError when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b);
// For every flat index of `out`, the flat index of `in` that broadcasts to it.
std::vector<int64_t> broadcast_map(const Shape& in, const Shape& out);
// Sums `g` (shaped like a broadcast result) back down to `in_shape`.
Tensor sum_to(const Tensor& g, const Shape& in_shape);
// The adjoint of a gather: a tensor of `shape` whose element o is the sum of g[i] over map[i] == o
// (map[i] < 0: g[i] goes nowhere), each such sum marked ops::stored_sum.
Tensor fold(const Tensor& g, const std::vector<int64_t>& map, const Shape& shape);

// The recurrent layers' ONNX `direction` (gru, lstm, simple_rnn): how many directions (2 for bidirectional,
// whose weights stack [forward; reverse] along the rows), and whether direction d reads the sequence from its
// end (reverse, and a bidirectional layer's second direction). Defined beside the kernel (rnn.cpp).
int64_t rnn_directions(const Attrs& a);
bool rnn_walks_back(const Attrs& a, int64_t d);
// A recurrent layer's initial state (attribute initial_state 1): the parameters h0 and, for an LSTM, c0, each
// [D*H] (direction d's state in elements [d*H, (d+1)*H)), the state every sample of the batch starts from.
// The input index of h0 (`cell` false) or c0 (`cell` true) among the node's inputs (after x, w_ih, w_hh, b_ih,
// b_hh and LSTM's peepholes p), or -1 where the layer starts from the zero state.
int rnn_state_input(const std::string& op, const Attrs& a, bool cell);

// The float32 range of a product-summing kernel's sums (dense, matmul, convolution): each output's
// finite terms' magnitude; where it passes FLT_MAX, some float32 summation order overflows a partial
// sum (inf, or NaN against a term of the other sign) although the exact sum fits, and the output is
// marked (ops::float32_range: NaN in the float32 trials). Infinite terms are exact: their sum is ±inf
// or NaN in every order.
class SumRange {
 public:
  explicit SumRange(int64_t outputs) : magnitude_(static_cast<size_t>(outputs), 0.0) {}
  void add(int64_t out, double term) {
    if (std::isfinite(term)) magnitude_[static_cast<size_t>(out)] += std::abs(term);
  }
  void mark(Tensor& y) const {
    for (int64_t i = 0; i < y.numel(); ++i) y.f64()[i] += float32_range(magnitude_[static_cast<size_t>(i)]);
  }

 private:
  std::vector<double> magnitude_;
};

// The float32 evaluation (ops::Float32Evaluation) of a kernel written once for a scalar R: `kernel` is a
// generic callable taking (R{}, fused); it runs with double and fused false outside a Float32Evaluation scope
// (the float64 kernel, with its marks) and with float inside one, fused for Float32Order::kFused.
template <class Kernel>
auto in_evaluation_precision(Kernel&& kernel) {
  if (const std::optional<Float32Order> order = float32_evaluation())
    return kernel(float{}, *order == Float32Order::kFused);
  return kernel(double{}, false);
}
// A tensor's values as R (float: as a float32 library holds them), and R values back in a float64 tensor.
template <class R>
std::vector<R> values_as(const Tensor& t) {
  if constexpr (std::is_same_v<R, double>)  // the float64 kernel's path: one copy
    if (t.dtype() == DType::F64) return std::vector<double>(t.f64(), t.f64() + t.numel());
  std::vector<R> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = static_cast<R>(t.get(i));
  return v;
}
template <class R>
Tensor widened(const std::vector<R>& v, const Shape& shape) {
  Tensor t(DType::F64, shape);
  if constexpr (std::is_same_v<R, double>)
    std::copy(v.begin(), v.end(), t.f64());
  else
    for (int64_t i = 0; i < t.numel(); ++i) t.f64()[i] = static_cast<double>(v[static_cast<size_t>(i)]);
  return t;
}
// a / n as the evaluation computes it: both read as float32 and divided in float32 inside a float32
// evaluation (`in_float32`, read once before a loop from float32_evaluation()), else in float64.
inline double quotient(double a, int64_t n, bool in_float32) {
  return in_float32 ? static_cast<double>(static_cast<float>(a) / static_cast<float>(n)) : a / static_cast<double>(n);
}
// Float32 sums (the float32 evaluation of a plain sum): term i, a float32 operand, into sum slot[i] (terms
// taken in index order), in `order`: Float32Order::kLanes deals each sum's terms in turn to kSumLanes running
// sums, then adds the lanes in order; any other order adds each term in turn. Widened to double.
std::vector<double> float32_slot_sums(const Tensor& x, const std::vector<int64_t>& slot, int64_t count,
                                      Float32Order order);
// sum + a * b, rounded once (fused) or twice.
template <class R>
void add_product(R& sum, R a, R b, bool fused) {
  sum = fused ? std::fma(a, b, sum) : sum + a * b;
}

// Normalises a possibly negative axis; OpError "axis A out of range for rank R" otherwise.
int norm_axis(int64_t axis, int rank);
// The same for a rank held as a size (a shape's size()), as an index.
size_t norm_axis(int64_t axis, size_t rank);

// Elementwise map.
Tensor map1(const Tensor& x, const std::function<double(double)>& f);

// Common shape rules.
Signature same_type_as_input(const std::vector<TensorType>& in, const Attrs&);

// Sampling helpers for OpSpec::sample.
Shape random_shape(core::Rng& rng, int rank, int64_t lo, int64_t hi);
// A float in [lo, hi] rounded to `digits` decimals, so cases print readably.
double random_float(core::Rng& rng, double lo, double hi, int digits = 2);
// Sometimes spells an axis from the end, as users do (probability 0.3); the shape rules accept both.
int64_t maybe_negative(core::Rng& rng, int64_t axis, int64_t rank);
// A backwards slice of an axis of size n: {start, end, step} with a negative step (-1 to -3), non-empty,
// spelled in one of ONNX's equivalent ways (from the end, clamped, an end before element 0 as -n-1, -100 or
// INT64_MIN, since -1 counts from the end).
std::vector<int64_t> backward_slice(int64_t n, core::Rng& rng);

// The dtype every input must share; OpError if they differ or are not floating point.
DType common_float_dtype(const std::vector<TensorType>& in);

// ONNX Resize: the source coordinate of output index `o` along an axis of length `in` resized to
// `out` under coordinate_transformation_mode `mode` (scale = out / in; the formulas multiply by
// in / out instead of dividing by the scale and keep exact integer ratios as long as possible, so
// exact half-way points, which decide nearest rounding, stay exact), and nearest_mode's rounding of
// it. The catalogue's kernel and the backends that check their own rule against ONNX's use both.
// `scale` > 0: the scale given to the node (ONNX Resize's `scales` input, out = floor(in * scale)), which
// every mode but align_corners divides by instead (o / scale, (o + 0.5) / scale - 0.5, ...); 0: out / in.
double resize_source_coord(const std::string& mode, int64_t o, int64_t in, int64_t out, double scale = 0);
int64_t resize_round_nearest(const std::string& mode, double x);
// The resize node's given scale along spatial axis `axis` (0 height, 1 width) from its `scales`
// attribute, or 0 when it resizes to `sizes` (scale out / in).
double resize_given_scale(const core::Attrs& a, size_t axis);
// The source coordinate of output `o` along spatial axis `axis` (0 height, 1 width) of a resize node with
// attributes `a`: resize_source_coord with the node's given scale, or under tf_crop_and_resize the crop's
// coordinate from `roi` [h_start, w_start, h_end, w_end] (empty: [0, 0, 1, 1]), start * (in - 1) + o *
// (end - start) * (in - 1) / (out - 1) (out = 1: the crop's centre, (start + end) / 2 * (in - 1)).
double resize_coord(const core::Attrs& a, size_t axis, int64_t o, int64_t in, int64_t out);
// tf_crop_and_resize: a coordinate outside [0, in - 1] gives extrapolation_value (ONNX), on any axis.
bool resize_extrapolates(const core::Attrs& a, double coord, int64_t in);
// Whether that given scale moves a source coordinate away from the one out / in gives: scales given,
// a mode that reads the scale (not align_corners), more than one input cell, and scale != out / in.
// A library that takes only the output size cannot run such an axis.
bool resize_scale_matters(const core::Attrs& a, size_t axis, int64_t in, int64_t out);

}  // namespace quorum::ops
