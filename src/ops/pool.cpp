// Pooling operators (layout NCL / NCHW, ONNX MaxPool / AveragePool / Global*Pool semantics).
// A window pool is described per spatial axis by its geometry (kernel, stride, begin/end padding,
// output length); the kernels enumerate each output's window once, as a list of input cells, and
// the forward and backward passes both walk that list.
#include <algorithm>
#include <cmath>
#include <tuple>

#include "ops/kernel_util.h"
#include "ops/onnx_map.h"
#include "ops/registry.h"

namespace quorum::ops {
namespace {

// One spatial axis of a window pool.
struct Axis {
  int64_t in = 1;   // input length
  int64_t k = 1;    // kernel length
  int64_t s = 1;    // stride
  int64_t dl = 1;   // dilation (MaxPool): window cells start, start+dl, ..., start+(k-1)*dl
  int64_t pb = 0;   // padding before
  int64_t pe = 0;   // padding after
  int64_t out = 1;  // output length
  int64_t extent() const { return dl * (k - 1) + 1; }  // the span a window covers
};

std::string ints_text(const std::vector<int64_t>& v) { return core::to_string(AttrValue(v)); }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }  // a >= 0, b > 0

// The geometry of a window pool over `x`, with every requirement checked. Shared by the shape rule
// and the kernels, so they can never disagree.
std::vector<Axis> window_geometry(const std::string& op, const Shape& x, const Attrs& a, int d) {
  QUORUM_REQUIRE(static_cast<int>(x.size()) == d + 2, op + " expects input of rank " + std::to_string(d + 2) +
                                                          (d == 1 ? " [N, C, L]" : " [N, C, H, W]") + ", got rank " +
                                                          std::to_string(x.size()));
  const auto& kernel = core::attr_ints(a, "kernel_shape");
  const auto& strides = core::attr_ints(a, "strides");
  const auto& pads = core::attr_ints(a, "pads");
  const std::string& auto_pad = core::attr_s(a, "auto_pad");
  const bool ceil_mode = core::attr_i(a, "ceil_mode") == 1;
  // MaxPool's dilations (ONNX since opset 10); AveragePool has none before opset 19.
  const std::vector<int64_t> dilations =
      a.count("dilations") ? core::attr_ints(a, "dilations") : std::vector<int64_t>(static_cast<size_t>(d), 1);
  QUORUM_REQUIRE(static_cast<int>(kernel.size()) == d, "kernel_shape " + ints_text(kernel) + " must have " +
                                                           std::to_string(d) + " entries (one per spatial axis)");
  QUORUM_REQUIRE(static_cast<int>(strides.size()) == d, "strides " + ints_text(strides) + " must have " +
                                                            std::to_string(d) + " entries (one per spatial axis)");
  QUORUM_REQUIRE(static_cast<int>(dilations.size()) == d, "dilations " + ints_text(dilations) + " must have " +
                                                              std::to_string(d) + " entries (one per spatial axis)");
  QUORUM_REQUIRE(static_cast<int>(pads.size()) == 2 * d,
                 "pads " + ints_text(pads) + " must have " + std::to_string(2 * d) + " entries [begin..., end...]");
  const bool explicit_pads = auto_pad == "NOTSET";
  std::vector<Axis> g(static_cast<size_t>(d));
  for (int i = 0; i < d; ++i) {
    const auto ui = static_cast<size_t>(i);
    Axis& ax = g[ui];
    ax.in = x[ui + 2];
    ax.k = kernel[ui];
    ax.s = strides[ui];
    ax.pb = pads[ui];
    ax.pe = pads[ui + static_cast<size_t>(d)];
    ax.dl = dilations[ui];
    const std::string axis = "spatial axis " + std::to_string(i);
    QUORUM_REQUIRE(ax.in >= 1,
                   op + " requires non-empty spatial dims, " + axis + " has length " + std::to_string(ax.in));
    QUORUM_REQUIRE(ax.k >= 1, "kernel_shape entries must be >= 1, got " + ints_text(kernel));
    QUORUM_REQUIRE(ax.s >= 1, "strides entries must be >= 1, got " + ints_text(strides));
    QUORUM_REQUIRE(ax.dl >= 1, "dilations entries must be >= 1, got " + ints_text(dilations));
    QUORUM_REQUIRE(ax.pb >= 0 && ax.pe >= 0, "pads entries must be >= 0, got " + ints_text(pads));
    QUORUM_REQUIRE(explicit_pads || (ax.pb == 0 && ax.pe == 0),
                   "pads must be zero when auto_pad is " + auto_pad + ", got " + ints_text(pads));
    if (auto_pad == "NOTSET") {
      // ONNX / PyTorch: a pad as large as the kernel would allow windows made only of padding.
      // With dilations, the kernel's extent dl*(k-1)+1.
      QUORUM_REQUIRE(ax.pb < ax.extent() && ax.pe < ax.extent(),
                     "pads must be smaller than the kernel: " + axis + " has pads (" + std::to_string(ax.pb) + ", " +
                         std::to_string(ax.pe) + ") for kernel extent " + std::to_string(ax.extent()));
      const int64_t span = ax.in + ax.pb + ax.pe - ax.extent();
      QUORUM_REQUIRE(span >= 0, "kernel larger than the padded input: " + axis + " has kernel extent " +
                                    std::to_string(ax.extent()) + " over padded length " +
                                    std::to_string(ax.in + ax.pb + ax.pe));
      ax.out = (ceil_mode ? ceil_div(span, ax.s) : span / ax.s) + 1;
      // A ceil-mode window that would start in the right padding is dropped (PyTorch, ONNX).
      if (ceil_mode && (ax.out - 1) * ax.s >= ax.in + ax.pb) --ax.out;
    } else if (auto_pad == "VALID") {
      QUORUM_REQUIRE(ax.in >= ax.extent(), "kernel larger than the input with auto_pad VALID: " + axis +
                                               " has kernel extent " + std::to_string(ax.extent()) + " over length " +
                                               std::to_string(ax.in));
      ax.out = (ax.in - ax.extent()) / ax.s + 1;
    } else {
      ax.out = ceil_div(ax.in, ax.s);
      std::tie(ax.pb, ax.pe) = same_pads(auto_pad, ax.in, ax.extent(), ax.s);
    }
    QUORUM_REQUIRE(ax.out >= 1, op + " output would be empty along " + axis);
    // A dilated window may step over every input cell (all its taps in the padding).
    for (int64_t o = 0; ax.dl > 1 && o < ax.out; ++o) {
      const int64_t start = o * ax.s - ax.pb;
      const int64_t first = start >= 0 ? start : start + ((-start + ax.dl - 1) / ax.dl) * ax.dl;
      QUORUM_REQUIRE(first < ax.in && first <= start + (ax.k - 1) * ax.dl,
                     op + ": window " + std::to_string(o) + " along " + axis + " holds only padding (dilation " +
                         std::to_string(ax.dl) + ")");
    }
  }
  return g;
}

// One output position's window: its input cells (offsets within a [spatial...] plane, in row-major
// window order) and the divisor an average uses with and without the padded cells.
struct Window {
  std::vector<int64_t> cells;
  int64_t with_pad = 1;  // cells inside [-pad_begin, in + pad_end): never beyond the padded input
};

// Advances a row-major multi-index over the box [lo, hi); false once it wraps.
bool next_index(std::vector<int64_t>& idx, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi) {
  for (int d = static_cast<int>(idx.size()) - 1; d >= 0; --d) {
    const auto ud = static_cast<size_t>(d);
    if (++idx[ud] < hi[ud]) return true;
    idx[ud] = lo[ud];
  }
  return false;
}

std::vector<Window> windows_of(const std::vector<Axis>& g) {
  const size_t d = g.size();
  std::vector<int64_t> in_strides(d, 1);
  for (int i = static_cast<int>(d) - 2; i >= 0; --i)
    in_strides[static_cast<size_t>(i)] = in_strides[static_cast<size_t>(i) + 1] * g[static_cast<size_t>(i) + 1].in;
  std::vector<int64_t> out_lo(d, 0), out_hi(d);
  for (size_t i = 0; i < d; ++i) out_hi[i] = g[i].out;
  std::vector<Window> ws;
  std::vector<int64_t> o = out_lo;
  do {
    Window w;
    // Per axis, the window's tap indices j in [lo, hi) whose cell start + j*dl lies in the input.
    std::vector<int64_t> lo(d), hi(d), start(d);
    bool empty = false;
    for (size_t i = 0; i < d; ++i) {
      start[i] = o[i] * g[i].s - g[i].pb;
      const int64_t dl = g[i].dl;
      lo[i] = start[i] >= 0 ? 0 : (-start[i] + dl - 1) / dl;
      hi[i] = std::min(g[i].k, (g[i].in - 1 - start[i]) / dl + 1);
      empty = empty || hi[i] <= lo[i];
      w.with_pad *= std::min(start[i] + g[i].k, g[i].in + g[i].pe) - start[i];  // average pools: dl = 1
    }
    QUORUM_REQUIRE(!empty, "a pooling window holds no input cell");
    std::vector<int64_t> c = lo;
    do {
      int64_t off = 0;
      for (size_t i = 0; i < d; ++i) off += (start[i] + c[i] * g[i].dl) * in_strides[i];
      w.cells.push_back(off);
    } while (next_index(c, lo, hi));
    ws.push_back(std::move(w));
  } while (next_index(o, out_lo, out_hi));
  return ws;
}

// Index (into w.cells) of the first maximal input cell of a window.
size_t first_max(const double* plane, const Window& w) {
  size_t best = 0;
  for (size_t j = 1; j < w.cells.size(); ++j)
    if (beats_extreme(plane[w.cells[j]], plane[w.cells[best]], true)) best = j;
  return best;
}

// Index of the first maximal element of a plane of n values (a NaN is the maximum).
int64_t first_max(const double* plane, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (beats_extreme(plane[i], plane[best], true)) best = i;
  return best;
}

Shape pooled_shape(const Shape& x, const std::vector<Axis>& g) {
  Shape s{x[0], x[1]};
  for (const auto& ax : g) s.push_back(ax.out);
  return s;
}

std::vector<int64_t> zeros(int n) { return std::vector<int64_t>(static_cast<size_t>(n), 0); }
std::vector<int64_t> filled(int n, int64_t v) { return std::vector<int64_t>(static_cast<size_t>(n), v); }

OpSpec make_window_pool(int d, bool is_max) {
  OpSpec s;
  const std::string name = std::string(is_max ? "max_pool" : "avg_pool") + std::to_string(d) + "d";
  s.name = name;
  s.family = "pool";
  s.doc = std::string(is_max ? "Max" : "Average") + " pooling over " + (d == 1 ? "[N, C, L]" : "[N, C, H, W]") +
          " (ONNX " + (is_max ? "MaxPool" : "AveragePool") + "): pads are [x1_begin, x2_begin, ..., x1_end, x2_end]" +
          (is_max ? "; padded cells never win (-inf)" : "; count_include_pad chooses the divisor");
  const std::vector<int64_t> bad_len(static_cast<size_t>(d + 1), 2);
  s.attrs = {
      ints_attr("kernel_shape", filled(d, 2), 1, kInf,
                {AttrValue(zeros(d)), AttrValue(filled(d, -1)), AttrValue(bad_len)}, "window length per spatial axis"),
      ints_attr("strides", filled(d, 1), 1, kInf, {AttrValue(zeros(d)), AttrValue(filled(d, -2))},
                "step per spatial axis"),
      ints_attr("pads", zeros(2 * d), 0, kInf, {AttrValue(filled(2 * d, -1)), AttrValue(zeros(d))},
                "[x1_begin, x2_begin, ..., x1_end, x2_end]; each < kernel along its axis; zero unless auto_pad is "
                "NOTSET"),
      enum_attr("auto_pad", "NOTSET", {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"}, {"same", "FULL"},
                "ONNX auto_pad: SAME_* gives out = ceil(in/stride) with the odd pad cell at the end (UPPER) or "
                "beginning (LOWER); VALID pads nothing"),
      int_enum_attr("ceil_mode", 0, {0, 1}, {2, -1},
                    "1: output length ceil((in+pads-k)/s)+1 instead of floor, dropping a window that would start "
                    "in the right padding; no effect unless auto_pad is NOTSET"),
  };
  if (is_max)
    s.attrs.push_back(ints_attr("dilations", filled(d, 1), 1, kInf, {AttrValue(zeros(d)), AttrValue(filled(d, -1))},
                                "spacing of the window's cells per spatial axis (ONNX MaxPool); the window "
                                "covers dilation*(kernel-1)+1 cells"));
  if (!is_max)
    s.attrs.push_back(int_enum_attr("count_include_pad", 0, {0, 1}, {2, -1},
                                    "1: the divisor counts padded cells (never cells beyond the padded input)"));
  s.tags = {"pool"};
  s.infer = [name, d](const std::vector<TensorType>& in, const Attrs& a) {
    const DType dt = common_float_dtype(in);
    const auto g = window_geometry(name, in[0].shape, a, d);
    return Signature{{TensorType{dt, pooled_shape(in[0].shape, g)}}, {}};
  };
  s.forward = [name, d, is_max](const Inputs& in, const Attrs& a) {
    const Tensor& x = *in[0];
    const auto g = window_geometry(name, x.shape(), a, d);
    const auto ws = windows_of(g);
    const bool include_pad = !is_max && core::attr_i(a, "count_include_pad") == 1;
    Tensor y(DType::F64, pooled_shape(x.shape(), g));
    const int64_t planes = x.dim(0) * x.dim(1);
    const int64_t in_plane = x.numel() / std::max<int64_t>(planes, 1);
    const auto out_plane = static_cast<int64_t>(ws.size());
    const bool in_float32 = float32_evaluation().has_value();  // the window's sum in float32, in order
    for (int64_t p = 0; p < planes; ++p) {
      const double* xp = x.f64() + p * in_plane;
      double* yp = y.f64() + p * out_plane;
      for (size_t o = 0; o < ws.size(); ++o) {
        const Window& w = ws[o];
        const auto divisor = include_pad ? w.with_pad : static_cast<int64_t>(w.cells.size());
        if (is_max) {
          yp[o] = xp[w.cells[first_max(xp, w)]];
        } else if (in_float32) {
          float sum = 0.0f;
          for (int64_t c : w.cells) sum += static_cast<float>(xp[c]);
          yp[o] = quotient(static_cast<double>(sum), divisor, true);
        } else {
          // A float32 sum, as the global pool's (ops::stored_sum): beyond float32's range where it may
          // round past FLT_MAX although the exact sum fits.
          double sum = 0, magnitude = 0;
          for (int64_t c : w.cells) {
            sum += xp[c];
            if (std::isfinite(xp[c])) magnitude += std::abs(xp[c]);
          }
          yp[o] = stored_sum(sum, magnitude, static_cast<int64_t>(w.cells.size())) / static_cast<double>(divisor);
        }
      }
    }
    return std::vector<Tensor>{y};
  };
  s.vjp = [name, d, is_max](const Inputs& in, const Attrs& a, const std::vector<Tensor>&,
                            const std::vector<Tensor>& grad) {
    const Tensor& x = *in[0];
    const auto g = window_geometry(name, x.shape(), a, d);
    const auto ws = windows_of(g);
    const bool include_pad = !is_max && core::attr_i(a, "count_include_pad") == 1;
    Tensor gx(DType::F64, x.shape());
    const int64_t planes = x.dim(0) * x.dim(1);
    const int64_t in_plane = x.numel() / std::max<int64_t>(planes, 1);
    const auto out_plane = static_cast<int64_t>(ws.size());
    const bool in_float32 = float32_evaluation().has_value();
    for (int64_t p = 0; p < planes; ++p) {
      const double* xp = x.f64() + p * in_plane;
      const double* gy = grad[0].f64() + p * out_plane;
      double* gp = gx.f64() + p * in_plane;
      for (size_t o = 0; o < ws.size(); ++o) {
        const Window& w = ws[o];
        if (is_max) {
          gp[w.cells[first_max(xp, w)]] += gy[o];
        } else {
          const auto divisor = include_pad ? w.with_pad : static_cast<int64_t>(w.cells.size());
          const double share = quotient(gy[o], divisor, in_float32);
          if (in_float32) {  // each share added to its cell's float32 gradient
            for (int64_t c : w.cells)
              gp[c] = static_cast<double>(static_cast<float>(gp[c]) + static_cast<float>(share));
            continue;
          }
          for (int64_t c : w.cells) gp[c] += share;
        }
      }
    }
    return std::vector<Tensor>{gx};
  };
  if (!is_max) s.float32_orders = {Float32Order::kInOrder};
  if (is_max) {
    // The cells equal to their window's maximum: sole, or tied when two or more are.
    s.extremes = [name, d](const Inputs& in, const Attrs& a, size_t) {
      const Tensor& x = *in[0];
      const auto geo = window_geometry(name, x.shape(), a, d);
      const auto ws = windows_of(geo);
      size_t kernel_cells = 1;
      for (const Axis& ax : geo) kernel_cells *= static_cast<size_t>(ax.k);
      const int64_t planes = x.dim(0) * x.dim(1);
      const int64_t in_plane = x.numel() / std::max<int64_t>(planes, 1);
      std::vector<int8_t> ext(static_cast<size_t>(x.numel()), OpSpec::kNotExtreme);
      for (int64_t p = 0; p < planes; ++p) {
        const double* xp = x.f64() + p * in_plane;
        for (const Window& w : ws) {
          const double m = xp[w.cells[first_max(xp, w)]];
          const auto n =
              std::count_if(w.cells.begin(), w.cells.end(), [&](int64_t c) { return attains_extreme(xp[c], m); });
          // A window that reaches into the padding ties its -inf cells with the padded ones.
          const bool padding_ties = std::isinf(m) && m < 0 && w.cells.size() < kernel_cells;
          const int8_t mark = padding_ties ? int8_t{OpSpec::kTiedWithPadding}
                              : n > 1      ? int8_t{OpSpec::kTiedExtreme}
                                           : int8_t{OpSpec::kSoleExtreme};
          for (int64_t c : w.cells) {
            int8_t& e = ext[static_cast<size_t>(p * in_plane + c)];
            if (attains_extreme(xp[c], m)) e = std::max(e, mark);
          }
        }
      }
      return ext;
    };
  }
  // A maximum is an input element (padding never wins); an average lies within the inputs' hull, or
  // between 0 and it when padded cells count.
  s.range = is_max ? RangeFn(hull_of_inputs) : RangeFn(hull_of_inputs_and_zero);
  if (!is_max) {
    s.reduction_length = [](const std::vector<TensorType>&, const Attrs& a) {
      int64_t area = 1;
      for (int64_t k : core::attr_ints(a, "kernel_shape")) area *= k;
      return area;
    };
  }
  s.sample = [d, is_max](core::Rng& rng) {
    Case c;
    Shape x{rng.randint(1, 2), rng.randint(1, 3)};
    for (int i = 0; i < d; ++i) x.push_back(rng.randint(3, 7));
    c.inputs = {f64t(x)};
    const std::string auto_pad =
        rng.pick(std::vector<std::string>{"NOTSET", "NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"});
    std::vector<int64_t> kernel, strides, dilations, pads(static_cast<size_t>(2 * d), 0);
    const bool dilated = is_max && rng.bernoulli(0.4);
    for (int i = 0; i < d; ++i) {
      kernel.push_back(rng.randint(1, 3));
      strides.push_back(rng.randint(1, 3));
      // A dilated window must fit the input.
      dilations.push_back(dilated ? rng.randint(1, kernel.back() == 1 ? 3 : 2) : 1);
      if (dilations.back() * (kernel.back() - 1) + 1 > x[static_cast<size_t>(i) + 2]) dilations.back() = 1;
    }
    auto extent = [&](size_t i) { return dilations[i] * (kernel[i] - 1) + 1; };
    if (auto_pad == "NOTSET")
      for (int i = 0; i < 2 * d; ++i)
        pads[static_cast<size_t>(i)] = rng.randint(0, std::min<int64_t>(extent(static_cast<size_t>(i % d)) - 1, 2));
    if (is_max) c.attrs["dilations"] = dilations;
    c.attrs["kernel_shape"] = kernel;
    c.attrs["strides"] = strides;
    c.attrs["pads"] = pads;
    c.attrs["auto_pad"] = auto_pad;
    // ceil_mode only matters with explicit pads (ONNX); backends disagree on it under auto_pad.
    c.attrs["ceil_mode"] = int64_t{auto_pad == "NOTSET" && rng.bernoulli(0.5) ? 1 : 0};
    if (!is_max) c.attrs["count_include_pad"] = int64_t{rng.bernoulli(0.5) ? 1 : 0};
    c.gen = {InputGen{}};
    return c;
  };
  return s;
}

// Global pools reduce every spatial axis to length 1 (the dims are kept, as in ONNX).
Shape global_shape(const Shape& x) {
  Shape out(x.size(), 1);
  out[0] = x[0];
  out[1] = x[1];
  return out;
}

OpSpec make_global_pool(bool is_max) {
  OpSpec s;
  s.name = is_max ? "global_max_pool" : "global_avg_pool";
  s.family = "pool";
  s.doc = std::string(is_max ? "Maximum" : "Mean") +
          " over every spatial axis of [N, C, spatial...] (rank 3..5); output [N, C, 1, ...] (ONNX " +
          (is_max ? "GlobalMaxPool" : "GlobalAveragePool") + ")";
  s.tags = {"pool"};
  s.range = hull_of_inputs;  // a maximum or a mean of the input's elements
  const std::string name = s.name;
  s.infer = [name](const std::vector<TensorType>& in, const Attrs&) {
    const DType dt = common_float_dtype(in);
    const Shape& x = in[0].shape;
    QUORUM_REQUIRE(x.size() >= 3 && x.size() <= 5,
                   name + " expects input of rank 3..5 [N, C, spatial...], got rank " + std::to_string(x.size()));
    for (size_t i = 2; i < x.size(); ++i)
      QUORUM_REQUIRE(x[i] >= 1, name + " requires non-empty spatial dims, got " + core::to_string(x));
    return Signature{{TensorType{dt, global_shape(x)}}, {}};
  };
  s.forward = [is_max](const Inputs& in, const Attrs&) {
    const Tensor& x = *in[0];
    Tensor y(DType::F64, global_shape(x.shape()));
    const int64_t planes = x.dim(0) * x.dim(1);
    const int64_t plane = x.numel() / std::max<int64_t>(planes, 1);
    if (const std::optional<Float32Order> order = float32_evaluation(); order && !is_max) {
      // The float32 evaluation: each plane's sum in float32, in order or in lanes, then the division.
      std::vector<int64_t> slot(static_cast<size_t>(x.numel()));
      for (int64_t i = 0; i < x.numel(); ++i) slot[static_cast<size_t>(i)] = i / std::max<int64_t>(plane, 1);
      const std::vector<double> sums = float32_slot_sums(x, slot, planes, *order);
      for (int64_t p = 0; p < planes; ++p)
        y.f64()[p] = quotient(sums[static_cast<size_t>(p)], plane, true);
      return std::vector<Tensor>{y};
    }
    for (int64_t p = 0; p < planes; ++p) {
      const double* xp = x.f64() + p * plane;
      double acc = is_max ? -kInf : 0.0, magnitude = 0;
      for (int64_t i = 0; i < plane; ++i) {
        acc = is_max ? (beats_extreme(xp[i], acc, true) ? xp[i] : acc) : acc + xp[i];
        if (std::isfinite(xp[i])) magnitude += std::abs(xp[i]);  // an infinite term's sum is exact
      }
      // The mean's sum is a float32 sum in a float32 implementation (ops::stored_sum): rounded and
      // moved by its rounding error, and beyond float32's range where it may round past FLT_MAX
      // (60 copies of FLT_MAX / 60 sum to FLT_MAX exactly; a vectorised float32 sum gives inf).
      y.f64()[p] = is_max ? acc : stored_sum(acc, magnitude, plane) / static_cast<double>(plane);
    }
    return std::vector<Tensor>{y};
  };
  s.vjp = [is_max](const Inputs& in, const Attrs&, const std::vector<Tensor>&, const std::vector<Tensor>& grad) {
    const Tensor& x = *in[0];
    Tensor gx(DType::F64, x.shape());
    const int64_t planes = x.dim(0) * x.dim(1);
    const int64_t plane = x.numel() / std::max<int64_t>(planes, 1);
    const bool in_float32 = float32_evaluation().has_value();
    for (int64_t p = 0; p < planes; ++p) {
      const double* xp = x.f64() + p * plane;
      double* gp = gx.f64() + p * plane;
      const double gy = grad[0].f64()[p];
      if (is_max) {
        gp[first_max(xp, plane)] = gy;
      } else {
        const double share = quotient(gy, plane, in_float32);
        for (int64_t i = 0; i < plane; ++i) gp[i] = share;
      }
    }
    return std::vector<Tensor>{gx};
  };
  if (!is_max) s.float32_orders = {Float32Order::kInOrder, Float32Order::kLanes};
  if (is_max) {
    // The cells equal to their plane's maximum: sole, or tied when two or more are.
    s.extremes = [](const Inputs& in, const Attrs&, size_t) {
      const Tensor& x = *in[0];
      const int64_t planes = x.dim(0) * x.dim(1);
      const int64_t plane = x.numel() / std::max<int64_t>(planes, 1);
      std::vector<int8_t> ext(static_cast<size_t>(x.numel()), OpSpec::kNotExtreme);
      for (int64_t p = 0; p < planes; ++p) {
        const double* xp = x.f64() + p * plane;
        const double m = xp[first_max(xp, plane)];
        const auto n = std::count_if(xp, xp + plane, [&](double v) { return attains_extreme(v, m); });
        const int8_t code = n > 1 ? OpSpec::kTiedExtreme : OpSpec::kSoleExtreme;
        for (int64_t i = 0; i < plane; ++i)
          if (attains_extreme(xp[i], m)) ext[static_cast<size_t>(p * plane + i)] = code;
      }
      return ext;
    };
  }
  if (!is_max) {
    s.reduction_length = [](const std::vector<TensorType>& in, const Attrs&) {
      int64_t n = 1;
      for (size_t i = 2; i < in[0].shape.size(); ++i) n *= in[0].shape[i];
      return n;
    };
  }
  s.sample = [](core::Rng& rng) {
    Case c;
    const int spatial = static_cast<int>(rng.randint(1, 3));
    Shape x{rng.randint(1, 2), rng.randint(1, 3)};
    // Fewer cells per axis at higher rank keeps the finite-difference check cheap.
    const int64_t hi = spatial == 3 ? 3 : 6;
    for (int i = 0; i < spatial; ++i) x.push_back(rng.randint(2, hi));
    c.inputs = {f64t(x)};
    c.gen = {InputGen{}};
    return c;
  };
  return s;
}

// ---- ONNX mapping

// ceil_mode=1 drops a last window that would start in the right padding (PyTorch, later ONNX);
// ONNX 1.12 keeps it. Returns the ceil_mode to write, adjusting the end pads so that the window
// count and the windows stay the Quorum ones.
int64_t ceil_to_onnx(OnnxExport& e, bool avg, std::vector<int64_t>& pads) {
  const auto& k = e.aints("kernel_shape");
  const auto& st = e.aints("strides");
  const size_t d = k.size();
  std::vector<int64_t> ext(d);  // the window's extent: dilations (MaxPool) spread it
  const bool dilated = !avg && e.attrs().count("dilations");
  for (size_t i = 0; i < d; ++i) ext[i] = (dilated ? e.aints("dilations")[i] : 1) * (k[i] - 1) + 1;
  std::vector<int64_t> want(d), floor_out(d), ceil_out(d);
  bool all_ceil = true, all_floor = true;
  for (size_t i = 0; i < d; ++i) {
    const int64_t in = e.in_shape()[2 + i], pb = pads[i], pe = pads[d + i];
    const int64_t span = in + pb + pe - ext[i];
    floor_out[i] = span / st[i] + 1;
    ceil_out[i] = (span + st[i] - 1) / st[i] + 1;
    want[i] = ceil_out[i];
    if ((want[i] - 1) * st[i] >= in + pb) --want[i];
    all_ceil = all_ceil && want[i] == ceil_out[i];
    all_floor = all_floor && want[i] == floor_out[i];
  }
  if (all_ceil) return 1;
  if (all_floor) return 0;
  // Mixed: floor mode with end pads that just fit the wanted windows. Exact unless the divisor
  // counts padding (cells past the padded input would become padding).
  if (avg && e.ai("count_include_pad") == 1)
    e.refuse("ceil_mode=1 with count_include_pad=1 where only some axes drop their last window has no ONNX 1.12 form");
  for (size_t i = 0; i < d; ++i)
    if (want[i] != floor_out[i]) pads[d + i] = (want[i] - 1) * st[i] + ext[i] - e.in_shape()[2 + i] - pads[i];
  return 0;
}

// Forms: every attribute written | defaults left out (strides 1, pads 0, ceil_mode 0,
// count_include_pad 0); zero pads without ceil_mode as explicit pads or auto_pad=VALID.
void export_window_pool(OnnxExport& e) {
  const bool avg = e.op().rfind("avg", 0) == 0;
  std::vector<int64_t> pads = e.aints("pads");
  int64_t ceil_mode = e.ai("ceil_mode");
  // Under SAME or VALID the catalogue's window count ignores ceil_mode, while ONNX's shape inference
  // applies it to the padded span; ceil_mode=0 there gives the catalogue's count exactly.
  if (e.as("auto_pad") != "NOTSET")
    ceil_mode = 0;
  else if (ceil_mode == 1)
    ceil_mode = ceil_to_onnx(e, avg, pads);
  auto zeros = [](const std::vector<int64_t>& v, int64_t x) {
    return std::all_of(v.begin(), v.end(), [x](int64_t y) { return y == x; });
  };
  const bool minimal = e.choose2("attrs", "all", "minimal");
  const bool valid = e.as("auto_pad") == "NOTSET" && ceil_mode == 0 && zeros(pads, 0) &&
                     e.choose2("zero_pads", "pads", "auto_pad_valid");
  OnnxNode& p = e.final_node(avg ? "AveragePool" : "MaxPool", {e.in(0)});
  p.set_ints("kernel_shape", e.aints("kernel_shape"));
  if (!minimal || !zeros(e.aints("strides"), 1)) p.set_ints("strides", e.aints("strides"));
  if (!avg && e.attrs().count("dilations") && (!minimal || !zeros(e.aints("dilations"), 1)))
    p.set_ints("dilations", e.aints("dilations"));
  if (valid)
    p.set_s("auto_pad", "VALID");
  else if (e.as("auto_pad") == "NOTSET") {
    if (!minimal || !zeros(pads, 0)) p.set_ints("pads", pads);
  } else {
    p.set_s("auto_pad", e.as("auto_pad"));
  }
  if (!minimal || ceil_mode != 0) p.set_i("ceil_mode", ceil_mode);
  if (avg && (!minimal || e.ai("count_include_pad") != 0)) p.set_i("count_include_pad", e.ai("count_include_pad"));
}

// MaxPool / AveragePool of 1 or 2 spatial dims.
void import_window_pool(OnnxImport& m) {
  const bool avg = m.op_type() == "AveragePool";
  const size_t rank = m.type_of(m.in(0)).shape.size();
  if (rank != 3 && rank != 4) m.fail("input of rank " + std::to_string(rank) + " (the catalogue pools 1-D and 2-D)");
  Attrs a;
  if (!avg && m.has("dilations")) a["dilations"] = m.getints("dilations");
  for (const char* k : {"kernel_shape", "strides", "pads"})
    if (m.has(k)) a[k] = m.getints(k);
  a["auto_pad"] = m.gets("auto_pad", "NOTSET");
  if (std::get<std::string>(a["auto_pad"]) != "NOTSET") a.erase("pads");
  a["ceil_mode"] = m.geti("ceil_mode", 0);
  if (avg) a["count_include_pad"] = m.geti("count_include_pad", 0);
  m.emit_final(std::string(avg ? "avg_pool" : "max_pool") + (rank == 3 ? "1d" : "2d"), {m.in(0)}, a);
}

}  // namespace

void register_pool(Registry& r) {
  for (int d : {1, 2}) {
    for (bool is_max : {true, false}) {
      OpSpec s = make_window_pool(d, is_max);
      s.onnx_export = export_window_pool;
      if (d == 2) s.onnx_import = {{{is_max ? "MaxPool" : "AveragePool"}, import_window_pool}};  // 1-D too
      r.add(std::move(s));
    }
  }
  for (bool is_max : {false, true}) {
    OpSpec s = make_global_pool(is_max);
    const std::string op = s.name, type = is_max ? "GlobalMaxPool" : "GlobalAveragePool";
    s.onnx_export = [type](OnnxExport& e) { e.final_node(type, {e.in(0)}); };
    s.onnx_import = {{{type}, [op](OnnxImport& m) { m.emit_final(op, {m.in(0)}); }}};
    r.add(std::move(s));
  }
}

}  // namespace quorum::ops
