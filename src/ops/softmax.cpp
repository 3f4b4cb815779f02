// Softmax and log-softmax along one axis (ONNX opset 13 semantics: the normalisation runs over the
// single axis `axis`, not over all trailing axes). Both subtract the row maximum before
// exponentiating, so large inputs do not overflow. The normalising sum and the backward's dot
// product are marked stored (ops::stored): a float32 implementation rounds them.
#include <algorithm>
#include <cmath>

#include "ops/kernel_util.h"
#include "ops/onnx_map.h"
#include "ops/registry.h"

namespace quorum::ops {
namespace {

// A tensor viewed as [outer, len, inner] around the normalised axis: row (o, i) holds the `len`
// elements at o*len*inner + j*inner + i for j in [0, len).
struct Rows {
  int64_t outer = 1, len = 1, inner = 1;
  int64_t at(int64_t o, int64_t i, int64_t j) const { return (o * len + j) * inner + i; }
};

Rows rows_of(const Shape& s, int64_t axis_attr) {
  const int rank = static_cast<int>(s.size());
  const int axis = norm_axis(axis_attr, rank);
  Rows r;
  for (int d = 0; d < axis; ++d) r.outer *= s[static_cast<size_t>(d)];
  r.len = s[static_cast<size_t>(axis)];
  for (int d = axis + 1; d < rank; ++d) r.inner *= s[static_cast<size_t>(d)];
  return r;
}

// Applies fn(row_offset_function) to every row.
template <class Fn>
void for_each_row(const Rows& r, Fn fn) {
  for (int64_t o = 0; o < r.outer; ++o)
    for (int64_t i = 0; i < r.inner; ++i) fn([&](int64_t j) { return r.at(o, i, j); });
}

Tensor softmax_forward(const Tensor& x, int64_t axis, bool log) {
  const Rows r = rows_of(x.shape(), axis);
  Tensor y(DType::F64, x.shape());
  const double* xp = x.f64();
  double* yp = y.f64();
  for_each_row(r, [&](auto idx) {
    double m = -kInf;
    for (int64_t j = 0; j < r.len; ++j) m = std::max(m, xp[idx(j)]);
    // x - max, with the limit where the maximum is +inf: 0 at the +inf entries, -inf elsewhere (the
    // row's probability shared by its +inf entries, not inf - inf = NaN).
    // A row all -inf: its entries equal, so the limit is uniform (1 for a one-element row).
    const auto shifted = [&](int64_t j) {
      const double x = xp[idx(j)];
      if (m == -kInf && x == -kInf) return 0.0;
      return m == kInf && !std::isnan(x) ? (x == kInf ? 0.0 : -kInf) : x - m;
    };
    double sum = 0;
    for (int64_t j = 0; j < r.len; ++j) sum += std::exp(shifted(j));
    sum = stored_sum(sum, sum, r.len);
    const double log_sum = stored(std::log(sum));
    for (int64_t j = 0; j < r.len; ++j) {
      const double z = shifted(j);
      // log_softmax computed as log(softmax(x)) (OpenCV) holds the probability in float32.
      yp[idx(j)] = log ? z - log_sum + float32_underflow(z - log_sum) : std::exp(z) / sum;
    }
  });
  return y;
}

// softmax:     dx = y * (g - sum_j g_j y_j)
// log_softmax: dx = g - softmax(x) * sum_j g_j, with softmax(x) = exp(y)
Tensor softmax_vjp(const Tensor& y, const Tensor& g, int64_t axis, bool log) {
  const Rows r = rows_of(y.shape(), axis);
  Tensor gx(DType::F64, y.shape());
  const double* yp = y.f64();
  const double* gp = g.f64();
  double* gxp = gx.f64();
  for_each_row(r, [&](auto idx) {
    double dot = 0, mag = 0;
    for (int64_t j = 0; j < r.len; ++j) {
      const double t = log ? gp[idx(j)] : gp[idx(j)] * yp[idx(j)];
      dot += t, mag += std::abs(t);
    }
    dot = stored_sum(dot, mag, r.len);
    for (int64_t j = 0; j < r.len; ++j) {
      const int64_t k = idx(j);
      gxp[k] = log ? gp[k] - stored(std::exp(yp[k])) * dot : yp[k] * (gp[k] - dot);
    }
  });
  return gx;
}

OpSpec make_softmax(const std::string& name, bool log) {
  OpSpec s;
  s.name = name;
  s.family = "softmax";
  s.doc = log ? "log(softmax(x)) along `axis`, computed as x - max - log(sum(exp(x - max)))"
              : "exp(x - max) / sum(exp(x - max)) along `axis`";
  s.tags = {"activation"};
  s.mixes_batch = [](const std::vector<TensorType>& in, const Attrs& a) {
    return norm_axis(core::attr_i(a, "axis"), static_cast<int>(in[0].shape.size())) == 0;
  };
  // With the inputs in [lo, hi] and n elements along the axis, a probability lies between
  // 1 / (1 + (n-1) e^(hi-lo)) and 1 / (1 + (n-1) e^(lo-hi)) (one element at an end, the rest at the
  // other); log_softmax is its log, computed as -(w + log(n-1 + e^-w)), w = hi - lo, for the least.
  s.range = [log](const std::vector<Interval>& in, const std::vector<TensorType>& t, const Attrs& a) {
    const Shape& sh = t[0].shape;
    const int axis = norm_axis(core::attr_i(a, "axis"), static_cast<int>(sh.size()));
    const double m = static_cast<double>(sh.empty() ? 1 : sh[static_cast<size_t>(axis)]) - 1;
    if (!in[0].bounded()) return std::vector<Interval>{log ? Interval{-kInf, 0} : Interval{0, 1}};
    const double w = in[0].hi - in[0].lo;
    if (log) return std::vector<Interval>{{-(w + std::log(m + std::exp(-w))), -std::log1p(m * std::exp(-w))}};
    return std::vector<Interval>{{1.0 / (1.0 + m * std::exp(w)), 1.0 / (1.0 + m * std::exp(-w))}};
  };
  s.attrs = {int_attr("axis", -1, -kInf, kInf, {AttrValue(int64_t{64}), AttrValue(int64_t{-65})},
                      "the axis normalised over (only that one axis, as in ONNX opset 13); must lie in "
                      "[-rank, rank-1]")};
  s.infer = [](const std::vector<TensorType>& in, const Attrs& a) {
    QUORUM_REQUIRE(in.size() == 1, "takes exactly 1 input, got " + std::to_string(in.size()));
    const DType dt = common_float_dtype(in);
    norm_axis(core::attr_i(a, "axis"), static_cast<int>(in[0].shape.size()));
    return Signature{{TensorType{dt, in[0].shape}}, {}};
  };
  s.forward = [log](const Inputs& in, const Attrs& a) {
    return std::vector<Tensor>{softmax_forward(*in[0], core::attr_i(a, "axis"), log)};
  };
  s.vjp = [log](const Inputs&, const Attrs& a, const std::vector<Tensor>& out, const std::vector<Tensor>& g) {
    return std::vector<Tensor>{softmax_vjp(out[0], g[0], core::attr_i(a, "axis"), log)};
  };
  // The normalising sum runs over the softmax axis.
  s.reduction_length = [](const std::vector<TensorType>& in, const Attrs& a) -> int64_t {
    const int64_t rank = static_cast<int64_t>(in[0].shape.size());
    int64_t axis = core::attr_i(a, "axis");
    if (axis < 0) axis += rank;
    return axis >= 0 && axis < rank ? in[0].shape[static_cast<size_t>(axis)] : 1;
  };
  s.sample = [](core::Rng& rng) {
    const int rank = static_cast<int>(rng.randint(1, 4));
    Case c;
    c.inputs = {f64t(random_shape(rng, rank, 1, 5))};
    // Half the cases keep the default last axis; the rest pick any axis, either sign.
    c.attrs["axis"] = rng.bernoulli(0.5) ? int64_t{-1} : rng.randint(-rank, rank - 1);
    c.gen = {InputGen{-4, 4}};
    return c;
  };
  return s;
}

// ---- ONNX mapping: Softmax / LogSoftmax. Before opset 13 they normalise over the flattened
// trailing dims from `axis` (default 1), which is this operator only for the last axis.

void set_onnx(OpSpec& s, const std::string& type) {
  const std::string op = s.name;
  s.onnx_export = [type](OnnxExport& e) {
    const int64_t rank = static_cast<int64_t>(e.in_shape().size());
    const int64_t axis = e.ai("axis") < 0 ? e.ai("axis") + rank : e.ai("axis");
    // Before opset 13 only the last axis is this operator; elsewhere (and seeded) the decomposition
    // exp(x - max) / sum, log: (x - max) - log(sum).
    const bool fused_ok = e.opset() >= 13 || axis == rank - 1;
    if (fused_ok && !e.choose2("softmax", "fused", "decomposed")) {
      e.final_node(type, {e.in(0)}).set_i("axis", e.ai("axis"));
      return;
    }
    if (!fused_ok) e.choose("softmax", {"decomposed"});
    auto reduce = [&](const std::string& t, const std::string& v, const std::string& what) {
      const bool input = t == "ReduceSum" && e.opset() >= 13;
      std::vector<std::string> ins = {v};
      if (input) ins.push_back(e.ints({axis}, "axes"));
      auto [p, o] = e.helper(t, ins, what);
      if (!input) p->set_ints("axes", {axis});
      p->set_i("keepdims", 1);
      return o;
    };
    const std::string d = e.h("Sub", {e.in(0), reduce("ReduceMax", e.in(0), "max")}, "shifted");
    const std::string ex = e.h("Exp", {d}, "exp");
    const std::string sum = reduce("ReduceSum", ex, "sum");
    if (type == "Softmax") e.final_node("Div", {ex, sum});
    else e.final_node("Sub", {d, e.h("Log", {sum}, "log")});
  };
  s.onnx_import = {{{type}, [op](OnnxImport& m) {
                      const int64_t rank = static_cast<int64_t>(m.type_of(m.in(0)).shape.size());
                      int64_t axis = m.geti("axis", m.opset() >= 13 ? -1 : 1);
                      if (m.opset() < 13) {
                        const int64_t a = axis < 0 ? axis + rank : axis;
                        if (a != rank - 1)
                          m.fail("axis " + std::to_string(axis) +
                                 " before opset 13 normalises over the flattened dims " + std::to_string(a) + ".." +
                                 std::to_string(rank - 1) + "; only the last axis is supported");
                      }
                      m.emit_final(op, {m.in(0)}, {{"axis", axis}});
                    }}};
}

}  // namespace

void register_softmax(Registry& r) {
  OpSpec sm = make_softmax("softmax", false);
  set_onnx(sm, "Softmax");
  r.add(std::move(sm));
  OpSpec lsm = make_softmax("log_softmax", true);
  set_onnx(lsm, "LogSoftmax");
  r.add(std::move(lsm));
}

}  // namespace quorum::ops
