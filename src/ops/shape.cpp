// Reshaping operators. reshape, flatten, squeeze and unsqueeze keep the row-major data order and
// change only the shape, so forward and VJP are reshapes. transpose, slice and pad copy each
// output element from one input element (or, for constant padding, from the fill value); they
// are written as a gather map, and the VJP scatter-adds the output gradient through the same map,
// which makes it exact (reflect/edge padding sends several outputs to one input).
#include <algorithm>
#include <limits>
#include <numeric>

#include "ops/kernel_util.h"
#include "ops/onnx_map.h"
#include "ops/registry.h"

namespace quorum::ops {
namespace {

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

std::string str(const std::vector<int64_t>& v) { return core::to_string(AttrValue(v)); }

// Product of non-negative sizes that saturates instead of overflowing, so absurd attribute values
// fail the element-count check rather than wrapping around.
int64_t sat_mul(int64_t a, int64_t b) {
  if (a != 0 && b > kI64Max / a) return kI64Max;
  return a * b;
}

// Normalises each axis against `rank` and rejects repeats.
std::vector<int> unique_axes(const std::vector<int64_t>& axes, int rank) {
  std::vector<int> out;
  for (int64_t ax : axes) {
    const int d = norm_axis(ax, rank);
    QUORUM_REQUIRE(std::find(out.begin(), out.end(), d) == out.end(),
                   "axis " + std::to_string(d) + " is listed twice in axes " + str(axes));
    out.push_back(d);
  }
  return out;
}

// ---- shape-only operators ----

Shape reshape_shape(const Shape& in, const Attrs& a) {
  const auto& target = core::attr_ints(a, "shape");
  Shape out(target.begin(), target.end());
  int64_t known = 1;
  int inferred = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    const int64_t v = target[i];
    QUORUM_REQUIRE(v != 0, "reshape size 0 is not allowed (0 does not copy the input size here, unlike ONNX): shape " +
                               str(target));
    QUORUM_REQUIRE(v == -1 || v >= 1, "reshape sizes must be >= 1 or -1, got " + std::to_string(v));
    if (v == -1) {
      QUORUM_REQUIRE(inferred < 0, "reshape shape " + str(target) + " has more than one -1");
      inferred = static_cast<int>(i);
    } else {
      known = sat_mul(known, v);
    }
  }
  const int64_t n = core::numel(in);
  if (inferred >= 0) {
    QUORUM_REQUIRE(known > 0 && n % known == 0, "cannot reshape " + core::to_string(in) + " (" + std::to_string(n) +
                                                    " elements) to " + str(target) + ": the -1 cannot be inferred");
    out[static_cast<size_t>(inferred)] = n / known;
  } else {
    QUORUM_REQUIRE(known == n, "cannot reshape " + core::to_string(in) + " (" + std::to_string(n) + " elements) to " +
                                   str(target) + " (" + std::to_string(known) + " elements)");
  }
  return out;
}

Shape flatten_shape(const Shape& in, const Attrs& a) {
  const int64_t rank = static_cast<int64_t>(in.size());
  int64_t axis = core::attr_i(a, "axis");
  QUORUM_REQUIRE(axis >= -rank && axis <= rank, "flatten axis " + std::to_string(axis) +
                                                    " out of range [-rank, rank] for rank " + std::to_string(rank));
  if (axis < 0) axis += rank;
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? rows : cols) *= in[static_cast<size_t>(d)];
  return {rows, cols};
}

Shape squeeze_shape(const Shape& in, const Attrs& a) {
  const auto& axes = core::attr_ints(a, "axes");
  std::vector<bool> drop(in.size(), false);
  if (axes.empty()) {
    for (size_t d = 0; d < in.size(); ++d) drop[d] = in[d] == 1;
  } else {
    for (int d : unique_axes(axes, static_cast<int>(in.size()))) {
      QUORUM_REQUIRE(in[static_cast<size_t>(d)] == 1, "cannot squeeze axis " + std::to_string(d) + " of size " +
                                                          std::to_string(in[static_cast<size_t>(d)]) + " in " +
                                                          core::to_string(in));
      drop[static_cast<size_t>(d)] = true;
    }
  }
  Shape out;
  for (size_t d = 0; d < in.size(); ++d)
    if (!drop[d]) out.push_back(in[d]);
  return out;
}

Shape unsqueeze_shape(const Shape& in, const Attrs& a) {
  const auto& axes = core::attr_ints(a, "axes");
  QUORUM_REQUIRE(!axes.empty(), "unsqueeze needs at least one axis");
  const int out_rank = static_cast<int>(in.size() + axes.size());
  std::vector<bool> added(static_cast<size_t>(out_rank), false);
  for (int d : unique_axes(axes, out_rank)) added[static_cast<size_t>(d)] = true;
  Shape out;
  size_t next = 0;  // next input dimension to place
  for (int d = 0; d < out_rank; ++d) out.push_back(added[static_cast<size_t>(d)] ? 1 : in[next++]);
  return out;
}

// ---- gather operators ----

// For every output element (row-major), the flat input index it copies, or -1 for the fill value.
using SrcFn = std::function<int64_t(const std::vector<int64_t>& out_index)>;
std::vector<int64_t> gather_map(const Shape& out, const SrcFn& src) {
  const int64_t n = core::numel(out);
  std::vector<int64_t> map(static_cast<size_t>(n));
  std::vector<int64_t> idx(out.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    map[static_cast<size_t>(flat)] = src(idx);
    for (size_t d = out.size(); d-- > 0;) {
      if (++idx[d] < out[d]) break;
      idx[d] = 0;
    }
  }
  return map;
}

struct TransposePlan {
  std::vector<size_t> perm;  // output axis i is input axis perm[i]
  Shape out;
};

TransposePlan transpose_plan(const Shape& in, const Attrs& a) {
  const auto& perm = core::attr_ints(a, "perm");
  const size_t rank = in.size();
  TransposePlan p;
  if (perm.empty()) {
    for (size_t i = rank; i-- > 0;) p.perm.push_back(i);
  } else {
    QUORUM_REQUIRE(perm.size() == rank, "transpose perm " + str(perm) + " has " + std::to_string(perm.size()) +
                                            " entries for an input of rank " + std::to_string(rank));
    std::vector<bool> seen(rank, false);
    for (int64_t v : perm) {
      QUORUM_REQUIRE(v >= 0 && v < static_cast<int64_t>(rank) && !seen[static_cast<size_t>(v)],
                     "transpose perm " + str(perm) + " is not a permutation of 0.." + std::to_string(rank - 1));
      seen[static_cast<size_t>(v)] = true;
      p.perm.push_back(static_cast<size_t>(v));
    }
  }
  for (size_t i = 0; i < rank; ++i) p.out.push_back(in[p.perm[i]]);
  return p;
}

std::vector<int64_t> transpose_map(const Shape& in, const Attrs& a) {
  const TransposePlan p = transpose_plan(in, a);
  const auto strides = core::strides_of(in);
  return gather_map(p.out, [&](const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (size_t i = 0; i < idx.size(); ++i) off += idx[i] * strides[p.perm[i]];
    return off;
  });
}

struct SlicePlan {
  std::vector<int64_t> start, step;  // per input axis
  Shape out;
};

// ONNX Slice: a negative start/end counts from the end; with a positive step both then clamp to [0, dim] and
// the axis keeps ceil((end - start) / step) elements, with a negative step start clamps to [0, dim - 1], end to
// [-1, dim - 1] (-1: through element 0) and the axis keeps ceil((start - end) / -step), from start down.
}  // namespace

std::vector<int64_t> backward_slice(int64_t n, core::Rng& rng) {
  // start s in [0, n-1], end e in [-1, s-1] in normal form, then spelled in one of ONNX's ways.
  const int64_t s = rng.randint(0, n - 1), e = rng.randint(-1, s - 1);
  int64_t start = s;
  switch (rng.randint(0, 2)) {
    case 0: break;
    case 1: start = s - n; break;                             // counts from the end
    default: start = s == n - 1 ? int64_t{100} : s; break;  // clamps to n - 1
  }
  int64_t end = e;
  if (e == -1) {  // through element 0: -1 itself would count from the end
    const int k = static_cast<int>(rng.randint(0, 2));
    end = k == 0 ? -n - 1 : k == 1 ? int64_t{-100} : std::numeric_limits<int64_t>::min();
  } else if (rng.bernoulli(0.5)) {
    end = e - n;
  }
  return {start, end, -rng.randint(1, 3)};
}

namespace {

SlicePlan slice_plan(const Shape& in, const Attrs& a) {
  const auto& starts = core::attr_ints(a, "starts");
  const auto& ends = core::attr_ints(a, "ends");
  const auto& axes_attr = core::attr_ints(a, "axes");
  const auto& steps = core::attr_ints(a, "steps");
  const size_t k = starts.size();
  QUORUM_REQUIRE(ends.size() == k, "slice starts " + str(starts) + " and ends " + str(ends) + " differ in length");
  QUORUM_REQUIRE(axes_attr.empty() || axes_attr.size() == k,
                 "slice axes " + str(axes_attr) + " must be empty or as long as starts " + str(starts));
  QUORUM_REQUIRE(steps.empty() || steps.size() == k,
                 "slice steps " + str(steps) + " must be empty or as long as starts " + str(starts));
  const int rank = static_cast<int>(in.size());
  std::vector<int64_t> axes = axes_attr;
  if (axes.empty()) {
    axes.resize(k);
    std::iota(axes.begin(), axes.end(), 0);
  }
  const std::vector<int> dims = unique_axes(axes, rank);
  SlicePlan p{std::vector<int64_t>(in.size(), 0), std::vector<int64_t>(in.size(), 1), in};
  for (size_t i = 0; i < k; ++i) {
    const auto d = static_cast<size_t>(dims[i]);
    const int64_t n = in[d];
    const int64_t step = steps.empty() ? 1 : steps[i];
    QUORUM_REQUIRE(step != 0, "slice steps must not be 0");
    QUORUM_REQUIRE(step > -kI64Max, "slice step " + std::to_string(step) + " is too large");
    // (v + n first where v is negative: it cannot overflow, and the clamp bounds everything after it.)
    auto wrapped = [n](int64_t v) { return v < 0 ? v + n : v; };
    const int64_t start = step > 0 ? std::clamp<int64_t>(wrapped(starts[i]), 0, n)
                                   : std::clamp<int64_t>(wrapped(starts[i]), 0, n - 1);
    const int64_t end = step > 0 ? std::clamp<int64_t>(wrapped(ends[i]), 0, n)
                                 : std::clamp<int64_t>(wrapped(ends[i]), -1, n - 1);
    const int64_t count = step > 0 ? (end > start ? (end - start - 1) / step + 1 : 0)
                                   : (start > end ? (start - end - 1) / -step + 1 : 0);
    QUORUM_REQUIRE(count > 0, "slice along axis " + std::to_string(d) + " (size " + std::to_string(n) + ") from " +
                                  std::to_string(starts[i]) + " to " + std::to_string(ends[i]) + " is empty");
    p.start[d] = start;
    p.step[d] = step;
    p.out[d] = count;
  }
  return p;
}

std::vector<int64_t> slice_map(const Shape& in, const Attrs& a) {
  const SlicePlan p = slice_plan(in, a);
  const auto strides = core::strides_of(in);
  return gather_map(p.out, [&](const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += (p.start[d] + idx[d] * p.step[d]) * strides[d];
    return off;
  });
}

struct PadPlan {
  std::vector<int64_t> begin;
  std::string mode;
  Shape out;
};

PadPlan pad_plan(const Shape& in, const Attrs& a) {
  const auto& pads_attr = core::attr_ints(a, "pads");
  const size_t rank = in.size();
  PadPlan p{{}, core::attr_s(a, "mode"), in};
  QUORUM_REQUIRE(p.mode == "constant" || p.mode == "reflect" || p.mode == "edge",
                 "unknown pad mode '" + p.mode + "' (expected constant, reflect or edge)");
  std::vector<int64_t> pads = pads_attr.empty() ? std::vector<int64_t>(2 * rank, 0) : pads_attr;
  QUORUM_REQUIRE(pads.size() == 2 * rank, "pads " + str(pads_attr) + " must have 2*rank = " + std::to_string(2 * rank) +
                                              " entries [begin per axis..., end per axis...]");
  for (size_t d = 0; d < rank; ++d) {
    const int64_t b = pads[d], e = pads[d + rank], n = in[d];
    QUORUM_REQUIRE(b >= 0 && e >= 0, "negative pads (cropping) are not supported: pads " + str(pads));
    QUORUM_REQUIRE(b <= kI64Max / 4 && e <= kI64Max / 4, "pads " + str(pads) + " are too large");
    if (p.mode == "reflect")
      QUORUM_REQUIRE(b < n && e < n, "reflect padding on axis " + std::to_string(d) +
                                         " needs pads smaller than its size " + std::to_string(n) + ", got " +
                                         std::to_string(b) + " and " + std::to_string(e));
    if (p.mode == "edge")
      QUORUM_REQUIRE(n > 0 || (b == 0 && e == 0), "edge padding of the empty axis " + std::to_string(d));
    p.begin.push_back(b);
    p.out[d] = n + b + e;
  }
  return p;
}

std::vector<int64_t> pad_map(const Shape& in, const Attrs& a) {
  const PadPlan p = pad_plan(in, a);
  const auto strides = core::strides_of(in);
  return gather_map(p.out, [&](const std::vector<int64_t>& idx) -> int64_t {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      const int64_t n = in[d];
      int64_t j = idx[d] - p.begin[d];
      if (j < 0 || j >= n) {
        if (p.mode == "constant") return -1;
        if (p.mode == "reflect")
          j = j < 0 ? -j : 2 * (n - 1) - j;  // mirror without repeating the edge
        else
          j = std::clamp<int64_t>(j, 0, n - 1);  // edge: repeat the border element
      }
      off += j * strides[d];
    }
    return off;
  });
}

// ---- the OpSpec builder ----

using ShapeFn = std::function<Shape(const Shape&, const Attrs&)>;
using MapFn = std::function<std::vector<int64_t>(const Shape&, const Attrs&)>;

struct ReshapingDef {
  std::string name;
  std::string doc;
  std::vector<AttrSpec> attrs;
  ShapeFn shape;  // the validating shape rule
  MapFn gather;   // null: the data order is unchanged (a pure reshape)
  std::function<Case(core::Rng&)> sample;
  std::function<void(const Shape&, core::Rng&, int, Attrs&)> fit;  // OpSpec::fit_attrs, may be null
  std::function<void(OnnxExport&)> onnx_export;                    // OpSpec::onnx_export
  std::vector<OpSpec::OnnxImportEntry> onnx_import;                // OpSpec::onnx_import
};

OpSpec make_reshaping(ReshapingDef def) {
  OpSpec s;
  s.name = def.name;
  s.family = "shape";
  s.doc = def.doc;
  s.attrs = def.attrs;
  s.tags = {"reshaping"};
  // Every output element is an input element (or, for constant padding, the fill value).
  s.range = [](const std::vector<Interval>& in, const std::vector<TensorType>&, const Attrs& a) {
    Interval r = in[0];
    if (a.count("value") && core::attr_s(a, "mode") == "constant")
      r = hull(r, Interval{core::attr_f(a, "value"), core::attr_f(a, "value")});
    return std::vector<Interval>{r};
  };
  const ShapeFn shape = def.shape;
  const MapFn gather = def.gather;
  s.infer = [shape](const std::vector<TensorType>& in, const Attrs& a) {
    QUORUM_REQUIRE(in.size() == 1, "takes exactly 1 input, got " + std::to_string(in.size()));
    const DType dt = common_float_dtype(in);
    return Signature{{TensorType{dt, shape(in[0].shape, a)}}, {}};
  };
  s.forward = [shape, gather](const Inputs& in, const Attrs& a) {
    const Tensor& x = *in[0];
    const Shape out_shape = shape(x.shape(), a);
    if (!gather) return std::vector<Tensor>{x.reshaped(out_shape)};
    const auto map = gather(x.shape(), a);
    const double fill = a.count("value") ? core::attr_f(a, "value") : 0.0;
    Tensor y(DType::F64, out_shape);
    const double* xp = x.f64();
    double* yp = y.f64();
    for (size_t i = 0; i < map.size(); ++i) yp[i] = map[i] >= 0 ? xp[map[i]] : fill;
    return std::vector<Tensor>{y};
  };
  s.vjp = [gather](const Inputs& in, const Attrs& a, const std::vector<Tensor>&, const std::vector<Tensor>& g) {
    const Tensor& x = *in[0];
    if (!gather) return std::vector<Tensor>{g[0].reshaped(x.shape())};
    return std::vector<Tensor>{fold(g[0], gather(x.shape(), a), x.shape())};
  };
  s.sample = def.sample;
  s.fit_attrs = def.fit;
  s.onnx_export = def.onnx_export;
  s.onnx_import = def.onnx_import;
  return s;
}

// ---- generator fits (OpSpec::fit_attrs) ----

// Flatten at any axis; axis 0 ([1, n]) half as often as drawn.
void fit_flatten(const Shape& x, core::Rng& rng, int, Attrs& a) {
  const auto rank = static_cast<int64_t>(x.size());
  if (rank < 1) return;
  a["axis"] = maybe_negative(rng, rng.randint(0, rank), rank);
  if (std::get<int64_t>(a["axis"]) == 0 && rng.bernoulli(0.5)) a["axis"] = int64_t{1};
}

// Some of the input's size-1 axes, or [] (every one).
void fit_squeeze(const Shape& x, core::Rng& rng, int, Attrs& a) {
  const auto rank = static_cast<int64_t>(x.size());
  std::vector<int64_t> ones;
  for (int64_t d = 0; d < rank; ++d)
    if (x[static_cast<size_t>(d)] == 1) ones.push_back(d);
  std::vector<int64_t> axes;
  // Squeezing every axis of a [1] or [1, 1] tensor would leave a scalar: name one axis to keep rank.
  if (!ones.empty() && (static_cast<int64_t>(ones.size()) == rank || rng.bernoulli(0.6))) {
    rng.shuffle(ones);
    ones.resize(static_cast<size_t>(rng.randint(1, static_cast<int64_t>(ones.size()))));
    if (static_cast<int64_t>(ones.size()) == rank) ones.pop_back();
    for (int64_t d : ones) axes.push_back(maybe_negative(rng, d, rank));
    if (axes.empty()) axes = {rank};  // nothing may go: an invalid axis makes the op unplaceable here
  }
  a["axes"] = axes;
}

// One new axis (sometimes two) at random positions of the output, within max_rank.
void fit_unsqueeze(const Shape& x, core::Rng& rng, int max_rank, Attrs& a) {
  const auto rank = static_cast<int64_t>(x.size());
  int64_t k = rng.bernoulli(0.8) ? 1 : 2;
  k = std::min<int64_t>(k, max_rank - rank);
  if (k < 1) k = 1;  // exceeds max_rank: the placement's limit check rejects it
  const int64_t out_rank = rank + k;
  std::vector<int64_t> pos(static_cast<size_t>(out_rank));
  std::iota(pos.begin(), pos.end(), 0);
  rng.shuffle(pos);
  pos.resize(static_cast<size_t>(k));
  for (auto& p : pos) p = maybe_negative(rng, p, out_rank);
  a["axes"] = pos;
}

// ---- samplers ----

Shape small_shape(core::Rng& rng, int min_rank, int max_rank, int64_t max_dim) {
  return random_shape(rng, static_cast<int>(rng.randint(min_rank, max_rank)), 1, max_dim);
}

Case one_input(const Shape& s) {
  Case c;
  c.inputs = {f64t(s)};
  c.gen = {InputGen{}};
  return c;
}

// A random shape with `n` elements: n's prime factors dealt into 1-4 dimensions.
Shape random_factorisation(core::Rng& rng, int64_t n) {
  std::vector<int64_t> primes;
  for (int64_t p = 2; p * p <= n; ++p)
    while (n % p == 0) {
      primes.push_back(p);
      n /= p;
    }
  if (n > 1) primes.push_back(n);
  Shape s(static_cast<size_t>(rng.randint(1, 4)), 1);
  for (int64_t p : primes) s[rng.index(s.size())] *= p;
  return s;
}

Case sample_reshape(core::Rng& rng) {
  const Shape in = small_shape(rng, 1, 4, 4);
  Case c = one_input(in);
  Shape target = random_factorisation(rng, core::numel(in));
  if (rng.bernoulli(0.5)) target[rng.index(target.size())] = -1;
  c.attrs["shape"] = target;
  return c;
}

Case sample_flatten(core::Rng& rng) {
  const Shape in = small_shape(rng, 1, 4, 4);
  const auto rank = static_cast<int64_t>(in.size());
  Case c = one_input(in);
  c.attrs["axis"] = rng.randint(-rank, rank);
  return c;
}

// Input axes 0..rank-1 in random order, some spelled negatively.
std::vector<int64_t> shuffled_axes(core::Rng& rng, int rank, bool allow_negative) {
  std::vector<int64_t> axes(static_cast<size_t>(rank));
  std::iota(axes.begin(), axes.end(), 0);
  rng.shuffle(axes);
  if (allow_negative)
    for (auto& ax : axes)
      if (rng.bernoulli(0.3)) ax -= rank;
  return axes;
}

Case sample_transpose(core::Rng& rng) {
  const Shape in = small_shape(rng, 1, 4, 4);
  Case c = one_input(in);
  c.attrs["perm"] =
      rng.bernoulli(0.25) ? std::vector<int64_t>{} : shuffled_axes(rng, static_cast<int>(in.size()), false);
  return c;
}

Case sample_slice(core::Rng& rng) {
  const Shape in = small_shape(rng, 1, 4, 6);
  const int rank = static_cast<int>(in.size());
  Case c = one_input(in);
  const auto k = static_cast<size_t>(rng.randint(1, rank));
  std::vector<int64_t> axes = shuffled_axes(rng, rank, true);
  axes.resize(k);
  const bool explicit_axes = rng.bernoulli(0.7);
  if (!explicit_axes) std::iota(axes.begin(), axes.end(), 0);  // the default: the first k axes in order
  std::vector<int64_t> starts, ends, steps;
  for (int64_t ax : axes) {
    const int64_t n = in[static_cast<size_t>(ax < 0 ? ax + rank : ax)];
    if (rng.bernoulli(0.25)) {  // backwards: a negative step
      const std::vector<int64_t> s = backward_slice(n, rng);
      starts.push_back(s[0]);
      ends.push_back(s[1]);
      steps.push_back(s[2]);
      continue;
    }
    // A non-empty [s, e) in normal form, then spelled in one of ONNX's equivalent ways.
    const int64_t s = rng.randint(0, n - 1), e = rng.randint(s + 1, n);
    switch (rng.randint(0, 2)) {
      case 0:
        starts.push_back(s);
        break;
      case 1:
        starts.push_back(s - n);
        break;  // counts from the end
      default:
        starts.push_back(s == 0 ? -100 : s);
        break;  // clamps to 0
    }
    switch (rng.randint(0, 2)) {
      case 0:
        ends.push_back(e);
        break;
      case 1:
        ends.push_back(e < n ? e - n : e);
        break;
      default:
        ends.push_back(e == n ? (rng.bernoulli(0.5) ? int64_t{100} : kI64Max) : e);
        break;  // clamps to n
    }
    steps.push_back(rng.bernoulli(0.5) ? 1 : rng.randint(1, 3));
  }
  const bool all_ones = std::all_of(steps.begin(), steps.end(), [](int64_t v) { return v == 1; });
  c.attrs["starts"] = starts;
  c.attrs["ends"] = ends;
  c.attrs["axes"] = explicit_axes ? axes : std::vector<int64_t>{};
  c.attrs["steps"] = all_ones && rng.bernoulli(0.5) ? std::vector<int64_t>{} : steps;
  return c;
}

Case sample_pad(core::Rng& rng) {
  const Shape in = small_shape(rng, 1, 4, 5);
  const size_t rank = in.size();
  Case c = one_input(in);
  const std::string mode = rng.pick(std::vector<std::string>{"constant", "reflect", "edge"});
  std::vector<int64_t> pads(2 * rank);
  for (size_t i = 0; i < pads.size(); ++i) {
    const int64_t n = in[i % rank];
    pads[i] = rng.randint(0, mode == "reflect" ? std::min<int64_t>(2, n - 1) : 2);
  }
  c.attrs["pads"] = pads;
  c.attrs["mode"] = mode;
  if (mode == "constant") c.attrs["value"] = random_float(rng, -1.0, 1.0);
  return c;
}

Case sample_squeeze(core::Rng& rng) {
  Shape in = small_shape(rng, 1, 4, 4);
  const int rank = static_cast<int>(in.size());
  for (auto& d : in)
    if (rng.bernoulli(0.4)) d = 1;
  in[rng.index(in.size())] = 1;  // at least one squeezable axis
  Case c = one_input(in);
  std::vector<int64_t> axes;
  if (!rng.bernoulli(0.3)) {
    for (int64_t ax : shuffled_axes(rng, rank, true))
      if (in[static_cast<size_t>(ax < 0 ? ax + rank : ax)] == 1 && (axes.empty() || rng.bernoulli(0.5)))
        axes.push_back(ax);
  }
  c.attrs["axes"] = axes;
  return c;
}

Case sample_unsqueeze(core::Rng& rng) {
  const Shape in = small_shape(rng, 1, 3, 4);
  Case c = one_input(in);
  const int out_rank = static_cast<int>(in.size()) + static_cast<int>(rng.randint(1, 2));
  std::vector<int64_t> axes = shuffled_axes(rng, out_rank, true);
  axes.resize(static_cast<size_t>(out_rank) - in.size());
  c.attrs["axes"] = axes;
  return c;
}

// ---- ONNX mapping

void import_reshape(OnnxImport& m) {
  const Shape x = m.type_of(m.in(0)).shape;
  std::vector<int64_t> shape = m.opset() >= 5 ? m.const_ints(1, "shape") : m.getints("shape");
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != 0) continue;
    if (m.geti("allowzero", 0) != 0) m.fail("a zero size with allowzero=1 (an empty tensor) is not supported");
    if (i >= x.size())
      m.fail("shape entry " + std::to_string(i) + " is 0 (copy) but the input has rank " + std::to_string(x.size()));
    shape[i] = x[i];
  }
  m.emit_final("reshape", {m.in(0)}, {{"shape", shape}});
}

// Squeeze and Unsqueeze take their axes as an input from opset 13.
void import_squeeze(OnnxImport& m) {
  const bool squeeze = m.op_type() == "Squeeze";
  std::vector<int64_t> axes =
      m.opset() >= 13 ? (m.present(1) ? m.const_ints(1, "axes") : std::vector<int64_t>{}) : m.getints("axes");
  if (!squeeze && axes.empty()) m.fail("needs axes");
  m.emit_final(squeeze ? "squeeze" : "unsqueeze", {m.in(0)}, {{"axes", axes}});
}

void export_slice(OnnxExport& e) {
  std::vector<int64_t> starts = e.aints("starts"), ends = e.aints("ends"), axes = e.aints("axes"),
                       steps = e.aints("steps");
  if (starts.empty()) {  // slices nothing: the whole first axis
    starts = {0};
    ends = {kI64Max};
    axes = {0};
    steps = {1};
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  // Forms: every input given | axes 0..n-1 and unit steps left out (the optional inputs' defaults) | with
  // unit steps, a Pad with negative pads (ONNX's crop: "remove (if negative)").
  bool default_axes = true, unit_steps = true;
  for (size_t i = 0; i < axes.size(); ++i) default_axes = default_axes && axes[i] == static_cast<int64_t>(i);
  for (int64_t st : steps) unit_steps = unit_steps && st == 1;
  if (unit_steps && e.choose2("slice", "slice", "crop")) {
    // What the slice removes before and after its window on each axis (slice_plan's clamped bounds).
    const Shape& x = e.in_shape();
    const SlicePlan p = slice_plan(x, e.attrs());
    std::vector<int64_t> crop(2 * x.size(), 0);
    for (size_t d = 0; d < x.size(); ++d) {
      crop[d] = -p.start[d];
      crop[d + x.size()] = -(x[d] - p.start[d] - p.out[d]);
    }
    e.final_node("Pad", {e.in(0), e.ints(crop, "pads")});
    return;
  }
  std::vector<std::string> ins = {e.in(0), e.ints(starts, "starts"), e.ints(ends, "ends")};
  if (unit_steps && e.choose2("inputs", "all", "minimal")) {
    if (!default_axes) ins.push_back(e.ints(axes, "axes"));
  } else {
    ins.push_back(e.ints(axes, "axes"));
    ins.push_back(e.ints(steps, "steps"));
  }
  e.final_node("Slice", ins);
}

void import_slice(OnnxImport& m) {
  Attrs a;
  if (m.opset() < 10) {
    a["starts"] = m.getints("starts");
    a["ends"] = m.getints("ends");
    if (m.has("axes")) a["axes"] = m.getints("axes");
  } else {
    a["starts"] = m.const_ints(1, "starts");
    a["ends"] = m.const_ints(2, "ends");
    if (m.present(3)) a["axes"] = m.const_ints(3, "axes");
    if (m.present(4)) a["steps"] = m.const_ints(4, "steps");
  }
  m.emit_final("slice", {m.in(0)}, a);
}

void export_pad(OnnxExport& e) {
  std::vector<int64_t> pads = e.aints("pads");
  if (pads.empty()) pads.assign(2 * e.in_shape().size(), 0);
  std::vector<std::string> ins = {e.in(0), e.ints(pads, "pads")};
  // Forms: a zero constant_value given or left to its default; mode=constant written or default.
  const bool constant = e.as("mode") == "constant";
  if (constant && (e.af("value") != 0.0 || !e.choose2("value", "given", "default")))
    ins.push_back(e.scalar(e.af("value"), "value"));
  OnnxNode& p = e.final_node("Pad", ins);
  if (!constant || !e.choose2("mode", "written", "default")) p.set_s("mode", e.as("mode"));
}

// Negative pads remove elements ("add or remove (if negative)"): a slice of what they remove, then a pad of
// what the others add (reflect and edge read the cropped tensor).
void import_pad(OnnxImport& m) {
  Attrs a;
  a["mode"] = m.gets("mode", "constant");
  std::vector<int64_t> pads;
  if (m.opset() < 11) {
    pads = m.getints("pads");
    a["value"] = m.getf("value", 0.0);
  } else {
    if (m.present(3)) m.fail("the axes input is not supported");
    pads = m.const_ints(1, "pads");
    a["value"] = m.present(2) ? m.const_scalar(2, "constant_value") : 0.0;
  }
  const Shape x = m.type_of(m.in(0)).shape;
  if (pads.size() != 2 * x.size()) m.fail("pads must hold 2 * rank entries");
  std::vector<int64_t> starts, ends, axes;
  bool adds = false;
  for (size_t i = 0; i < x.size(); ++i) {
    const int64_t b = pads[i], e = pads[i + x.size()];
    adds = adds || b > 0 || e > 0;
    if (b >= 0 && e >= 0) continue;
    if (std::max<int64_t>(0, -b) + std::max<int64_t>(0, -e) >= x[i]) m.fail("negative pads remove a whole axis");
    starts.push_back(std::max<int64_t>(0, -b));
    ends.push_back(x[i] - std::max<int64_t>(0, -e));
    axes.push_back(static_cast<int64_t>(i));
  }
  if (starts.empty()) {
    a["pads"] = pads;
    m.emit_final("pad", {m.in(0)}, a);
    return;
  }
  const Attrs sliced = {{"starts", starts}, {"ends", ends}, {"axes", axes}};
  if (!adds) {
    m.emit_final("slice", {m.in(0)}, sliced);
    return;
  }
  for (auto& p : pads) p = std::max<int64_t>(0, p);
  a["pads"] = pads;
  m.emit_final("pad", {m.emit("slice", {m.in(0)}, sliced)}, a);
}

// Forms: the shape as the node gives it | every size explicit | the largest size inferred (-1) |
// sizes equal to the input's at the same position copied (0, allowzero=0).
void export_reshape(OnnxExport& e) {
  const Shape& in = e.in_shape();
  std::vector<int64_t> out = reshape_shape(in, e.attrs());
  std::vector<std::string> forms = {"as_given", "explicit"};
  if (!out.empty()) forms.push_back("inferred");
  bool copyable = false;
  for (size_t i = 0; i < out.size() && i < in.size(); ++i) copyable = copyable || out[i] == in[i];
  if (copyable && core::numel(in) > 0) forms.push_back("copy_zero");
  const std::string form = forms[e.choose("shape", forms)];
  std::vector<int64_t> shape = e.aints("shape");
  if (form == "explicit") {
    shape = out;
  } else if (form == "inferred") {
    shape = out;
    const auto it = std::max_element(shape.begin(), shape.end());
    *it = -1;
  } else if (form == "copy_zero") {
    shape = out;
    for (size_t i = 0; i < out.size() && i < in.size(); ++i)
      if (out[i] == in[i]) shape[i] = 0;
  }
  e.final_node("Reshape", {e.in(0), e.ints(shape, "shape")});
}

void export_flatten(OnnxExport& e) { e.final_node("Flatten", {e.in(0)}).set_i("axis", e.ai("axis")); }

void import_flatten(OnnxImport& m) { m.emit_final("flatten", {m.in(0)}, {{"axis", m.geti("axis", 1)}}); }

// Forms: a reversing perm written or left to its default.
void export_transpose(OnnxExport& e) {
  std::vector<int64_t> perm = e.aints("perm");
  const int64_t r = static_cast<int64_t>(e.in_shape().size());
  bool reverse = true;
  for (size_t i = 0; i < perm.size(); ++i) reverse = reverse && perm[i] == r - 1 - static_cast<int64_t>(i);
  if (perm.empty()) {
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  }
  OnnxNode& p = e.final_node("Transpose", {e.in(0)});
  if (!(reverse && e.choose2("perm", "written", "default"))) p.set_ints("perm", perm);
}

void import_transpose(OnnxImport& m) {
  Attrs a;
  if (m.has("perm")) a["perm"] = m.getints("perm");
  m.emit_final("transpose", {m.in(0)}, a);
}

// Squeeze and Unsqueeze take their axes as an input from opset 13, as an attribute before.
void export_squeeze(OnnxExport& e) {
  const std::string type = e.op() == "squeeze" ? "Squeeze" : "Unsqueeze";
  const auto& axes = e.aints("axes");
  if (axes.empty())
    e.final_node(type, {e.in(0)});
  else if (e.opset() >= 13)
    e.final_node(type, {e.in(0), e.ints(axes, "axes")});
  else
    e.final_node(type, {e.in(0)}).set_ints("axes", axes);
}

std::vector<ReshapingDef> reshaping_ops() {
  using V = std::vector<int64_t>;
  const AttrValue any_axis_bad_hi(int64_t{64}), any_axis_bad_lo(int64_t{-65});
  return {
      {"reshape",
       "same elements in row-major order with a new shape (ONNX Reshape with allowzero=1: a 0 is never a copy)",
       {ints_attr("shape", {-1}, -1, kInf, {AttrValue(V{0}), AttrValue(V{-1, -1}), AttrValue(V{-2})},
                  "target shape: sizes >= 1 and at most one -1, inferred from the element count; 0 is invalid "
                  "(no ONNX copy semantics); the default [-1] flattens to 1-D")},
       reshape_shape,
       nullptr,
       sample_reshape,
       nullptr,
       export_reshape,
       {{{"Reshape"}, import_reshape}}},
      {"flatten",
       "2-D [prod(dims[:axis]), prod(dims[axis:])] (ONNX Flatten)",
       {int_attr("axis", 1, -kInf, kInf, {any_axis_bad_hi, any_axis_bad_lo},
                 "first axis of the second output dimension; must lie in [-rank, rank]")},
       flatten_shape,
       nullptr,
       sample_flatten,
       fit_flatten,
       export_flatten,
       {{{"Flatten"}, import_flatten}}},
      {"squeeze",
       "removes size-1 axes (ONNX Squeeze)",
       {ints_attr("axes", {}, -kInf, kInf, {AttrValue(V{64}), AttrValue(V{0, 0})},
                  "axes to remove, each of size 1, negative counts from the end; [] (the default) removes every "
                  "size-1 axis")},
       squeeze_shape,
       nullptr,
       sample_squeeze,
       fit_squeeze,
       export_squeeze,
       {{{"Squeeze"}, import_squeeze}}},
      {"unsqueeze",
       "inserts size-1 axes (ONNX Unsqueeze)",
       {ints_attr("axes", {0}, -kInf, kInf, {AttrValue(V{}), AttrValue(V{0, 0}), AttrValue(V{64})},
                  "positions of the new axes in the output (rank + len(axes)), negative counts from the end; "
                  "required non-empty in ONNX, here the default [0] adds a leading axis")},
       unsqueeze_shape,
       nullptr,
       sample_unsqueeze,
       fit_unsqueeze,
       export_squeeze,
       {{{"Unsqueeze"}, import_squeeze}}},
      {"transpose",
       "permutes axes: output axis i is input axis perm[i] (ONNX Transpose)",
       {ints_attr("perm", {}, 0, kInf, {AttrValue(V{-1}), AttrValue(V{0, 0})},
                  "a permutation of 0..rank-1; [] (the default) is derived as the reversal rank-1..0")},
       [](const Shape& in, const Attrs& a) { return transpose_plan(in, a).out; },
       transpose_map,
       sample_transpose,
       nullptr,
       export_transpose,
       {{{"Transpose"}, import_transpose}}},
      {"slice",
       "ONNX Slice: for each listed axis, elements start, start+step, ... before end (a negative step walks "
       "backwards); negative start/end count from the end, then clamp to [0, dim] (a negative step: start to "
       "[0, dim-1], end to [-1, dim-1]); an empty result is rejected",
       {ints_attr("starts", {}, -kInf, kInf, {}, "first index per sliced axis; [] (the default) slices nothing"),
        ints_attr("ends", {}, -kInf, kInf, {}, "exclusive end per sliced axis, same length as starts"),
        ints_attr("axes", {}, -kInf, kInf, {AttrValue(V{0, 0})},
                  "the sliced axes, distinct, negative counts from the end; [] (the default) is derived as "
                  "0..len(starts)-1"),
        ints_attr("steps", {}, -kInf, kInf, {AttrValue(V{0})},
                  "stride per sliced axis, not 0, negative walks backwards; [] (the default) is derived as all "
                  "ones")},
       [](const Shape& in, const Attrs& a) { return slice_plan(in, a).out; },
       slice_map,
       sample_slice,
       nullptr,
       export_slice,
       {{{"Slice"}, import_slice}}},
      {"pad",
       "pads each axis (ONNX Pad): constant fills `value`; reflect mirrors without repeating the border "
       "(numpy 'reflect'); edge repeats the border element",
       {ints_attr("pads", {}, 0, kInf, {AttrValue(V{-1})},
                  "ONNX order [x1_begin, x2_begin, ..., x1_end, x2_end, ...], each >= 0 (no cropping); [] (the "
                  "default) is derived as all zeros"),
        enum_attr("mode", "constant", {"constant", "reflect", "edge"}, {"wrap", "symmetric"},
                  "constant, reflect (needs pads < the axis size) or edge"),
        float_attr("value", 0.0, -kInf, kInf, {}, "fill value for mode constant")},
       [](const Shape& in, const Attrs& a) { return pad_plan(in, a).out; },
       pad_map,
       sample_pad,
       nullptr,
       export_pad,
       {{{"Pad"}, import_pad}}},
  };
}

}  // namespace

void register_shape(Registry& r) {
  for (auto& d : reshaping_ops()) {
    OpSpec s = make_reshaping(std::move(d));
    // A target shape that starts with the batch keeps it first.
    if (s.name == "reshape")
      s.widen_batch = [](int64_t from, int64_t to, Attrs& a) {
        std::vector<int64_t> shape = core::attr_ints(a, "shape");
        if (!shape.empty() && shape[0] == from) shape[0] = to, a["shape"] = core::AttrValue(shape);
      };
    r.add(std::move(s));
  }
}

}  // namespace quorum::ops
