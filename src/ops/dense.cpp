// Dense (fully connected, PyTorch Linear layout) and matmul (NumPy matmul with batch
// broadcasting). Both reduce to row-times-matrix products; matmul's gradients are summed back
// over broadcast batch dims through the same batch map the forward uses.
#include <cfloat>
#include <cmath>
#include <type_traits>

#include "ops/kernel_util.h"
#include "ops/onnx_map.h"
#include "ops/registry.h"

// The kernels are written once for a scalar R (the float32 evaluation, ops::Float32Evaluation): a float widened
// to double unseen is an error.
#pragma GCC diagnostic error "-Wdouble-promotion"

namespace quorum::ops {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// ---- dense: y = x W^T + b over the last axis --------------------------------------------------

struct DenseGeom {
  int64_t rows = 0, in_features = 0, units = 0;
  bool has_bias = true;
};

DenseGeom dense_geometry(const TensorType& x, const Attrs& a) {
  QUORUM_REQUIRE(x.shape.size() >= 2,
                 "dense expects an input of rank >= 2 [..., in_features], got " + core::to_string(x.shape));
  DenseGeom g;
  g.in_features = x.shape.back();
  g.units = core::attr_i(a, "units");
  const int64_t bias = core::attr_i(a, "bias");
  QUORUM_REQUIRE(g.units >= 1, "units must be >= 1, got " + str(g.units));
  QUORUM_REQUIRE(bias == 0 || bias == 1, "bias must be 0 or 1, got " + str(bias));
  QUORUM_REQUIRE(g.in_features >= 1, "in_features (the last input dim) must be >= 1");
  g.has_bias = bias == 1;
  g.rows = core::numel(x.shape) / g.in_features;
  return g;
}

OpSpec make_dense() {
  OpSpec s;
  s.name = "dense";
  s.family = "dense";
  s.doc =
      "fully connected over the last axis: y = x W^T + b, weight [units, in_features] (PyTorch Linear), "
      "optional bias [units]";
  s.attrs = {
      int_attr("units", 1, 1, kInf, {AttrValue(int64_t{0}), AttrValue(int64_t{-1})}, "output features"),
      int_enum_attr("bias", 1, {0, 1}, {2, -1}, "1 adds a learned bias [units]"),
  };
  s.infer = [](const std::vector<TensorType>& in, const Attrs& a) {
    const DType dt = common_float_dtype(in);
    const DenseGeom g = dense_geometry(in[0], a);
    Shape y = in[0].shape;
    y.back() = g.units;
    Signature sig;
    sig.outputs = {TensorType{dt, y}};
    sig.params = {ParamSpec{"weight", TensorType{dt, {g.units, g.in_features}}, Init::Normal}};
    if (g.has_bias) sig.params.push_back(ParamSpec{"bias", TensorType{dt, {g.units}}, Init::Zeros});
    return sig;
  };
  // Written once for a scalar R: the float64 kernel (its sums' float32 range marked, SumRange: a partial sum
  // overflows in some summation order) and its float32 evaluation (ops::Float32Evaluation, every product and
  // running sum a float32, in order or fused).
  s.forward = [](const Inputs& in, const Attrs& a) {
    return in_evaluation_precision([&](auto zero, bool fused) {
      using R = decltype(zero);
      const DenseGeom g = dense_geometry(in[0]->type(), a);
      Shape ys = in[0]->shape();
      ys.back() = g.units;
      const std::vector<R> x = values_as<R>(*in[0]), w = values_as<R>(*in[1]);
      const std::vector<R> b = g.has_bias ? values_as<R>(*in[2]) : std::vector<R>();
      std::vector<R> y(static_cast<size_t>(g.rows * g.units));
      SumRange range(static_cast<int64_t>(y.size()));
      for (int64_t r = 0; r < g.rows; ++r)
        for (int64_t u = 0; u < g.units; ++u) {
          R acc = g.has_bias ? b[static_cast<size_t>(u)] : R(0);
          if (g.has_bias) range.add(r * g.units + u, static_cast<double>(b[static_cast<size_t>(u)]));
          for (int64_t i = 0; i < g.in_features; ++i) {
            const R xi = x[static_cast<size_t>(r * g.in_features + i)],
                    wi = w[static_cast<size_t>(u * g.in_features + i)];
            add_product(acc, xi, wi, fused);
            range.add(r * g.units + u, static_cast<double>(xi * wi));
          }
          y[static_cast<size_t>(r * g.units + u)] = acc;
        }
      Tensor out = widened(y, ys);
      if constexpr (std::is_same_v<R, double>) range.mark(out);
      return std::vector<Tensor>{out};
    });
  };
  s.vjp = [](const Inputs& in, const Attrs& a, const std::vector<Tensor>&, const std::vector<Tensor>& grad) {
    return in_evaluation_precision([&](auto zero, bool fused) {
      using R = decltype(zero);
      const DenseGeom g = dense_geometry(in[0]->type(), a);
      const std::vector<R> x = values_as<R>(*in[0]), w = values_as<R>(*in[1]), gy = values_as<R>(grad[0]);
      std::vector<R> gx(x.size(), R(0)), gw(w.size(), R(0)), gb(static_cast<size_t>(g.units), R(0));
      for (int64_t r = 0; r < g.rows; ++r)
        for (int64_t u = 0; u < g.units; ++u) {
          const R d = gy[static_cast<size_t>(r * g.units + u)];
          gb[static_cast<size_t>(u)] += d;
          for (int64_t i = 0; i < g.in_features; ++i) {
            add_product(gx[static_cast<size_t>(r * g.in_features + i)], d,
                        w[static_cast<size_t>(u * g.in_features + i)], fused);
            add_product(gw[static_cast<size_t>(u * g.in_features + i)], d,
                        x[static_cast<size_t>(r * g.in_features + i)], fused);
          }
        }
      std::vector<Tensor> grads{widened(gx, in[0]->shape()), widened(gw, in[1]->shape())};
      if (g.has_bias) grads.push_back(widened(gb, {g.units}));
      return grads;
    });
  };
  s.float32_orders = {Float32Order::kInOrder, Float32Order::kFused};
  s.tol_f32 = {1e-5, 1e-4};
  s.reduction_length = [](const std::vector<TensorType>& in, const Attrs&) {
    return in[0].shape.empty() ? int64_t{1} : std::max<int64_t>(1, in[0].shape.back());
  };
  s.tags = {"dense"};
  // Each element a sum of in_features products x * w, plus the bias.
  s.range = [](const std::vector<Interval>& in, const std::vector<TensorType>& t, const Attrs&) {
    const double k = t[0].shape.empty() ? 1.0 : static_cast<double>(t[0].shape.back());
    Interval r = sum_of(mul(in[0], in[1]), k);
    if (in.size() > 2) r = add(r, in[2]);
    return std::vector<Interval>{r};
  };
  s.sample = [](core::Rng& rng) {
    Shape x = random_shape(rng, static_cast<int>(rng.randint(1, 3)), 1, 3);  // leading dims
    x.push_back(rng.randint(1, 6));
    Case c;
    c.inputs = {f64t(x)};
    c.attrs = {{"units", rng.randint(1, 6)}, {"bias", int64_t{rng.bernoulli(0.5) ? 1 : 0}}};
    c.gen = {InputGen{}};
    return c;
  };
  return s;
}

// ---- matmul: A [..., M, K] @ B [..., K, N] with broadcast batch dims -------------------------

struct MatmulGeom {
  int64_t m = 0, k = 0, n = 0;
  Shape batch_a, batch_b, batch_out;
};

MatmulGeom matmul_geometry(const TensorType& a, const TensorType& b) {
  QUORUM_REQUIRE(a.shape.size() >= 2,
                 "matmul input A must have rank >= 2 [..., M, K], got " + core::to_string(a.shape));
  QUORUM_REQUIRE(b.shape.size() >= 2,
                 "matmul input B must have rank >= 2 [..., K, N], got " + core::to_string(b.shape));
  MatmulGeom g;
  g.m = a.shape[a.shape.size() - 2];
  g.k = a.shape.back();
  g.n = b.shape.back();
  const int64_t kb = b.shape[b.shape.size() - 2];
  QUORUM_REQUIRE(g.k == kb, "matmul inner dimensions differ: A " + core::to_string(a.shape) + " has K=" + str(g.k) +
                                ", B " + core::to_string(b.shape) + " has K=" + str(kb));
  g.batch_a.assign(a.shape.begin(), a.shape.end() - 2);
  g.batch_b.assign(b.shape.begin(), b.shape.end() - 2);
  g.batch_out = broadcast_shapes(g.batch_a, g.batch_b);
  return g;
}

Shape matmul_out_shape(const MatmulGeom& g) {
  Shape y = g.batch_out;
  y.push_back(g.m);
  y.push_back(g.n);
  return y;
}

// Calls f(a_index, b_index, y_index) for every product term A[.., i, p] * B[.., p, j] -> Y[.., i, j].
template <class F>
void for_each_matmul_term(const MatmulGeom& g, F f) {
  // Which batch matrix of A and of B feeds each output batch matrix.
  const auto map_a = broadcast_map(g.batch_a, g.batch_out);
  const auto map_b = broadcast_map(g.batch_b, g.batch_out);
  for (size_t bi = 0; bi < map_a.size(); ++bi) {
    const int64_t a0 = map_a[bi] * g.m * g.k, b0 = map_b[bi] * g.k * g.n;
    const int64_t y0 = static_cast<int64_t>(bi) * g.m * g.n;
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j)
        for (int64_t p = 0; p < g.k; ++p) f(a0 + i * g.k + p, b0 + p * g.n + j, y0 + i * g.n + j);
  }
}

// Batch dims for one matmul operand: a suffix of `full`, some dims replaced by 1 to broadcast.
Shape operand_batch(core::Rng& rng, const Shape& full) {
  const auto r = static_cast<size_t>(rng.randint(0, static_cast<int64_t>(full.size())));
  Shape b(full.end() - static_cast<std::ptrdiff_t>(r), full.end());
  for (auto& d : b)
    if (rng.bernoulli(0.3)) d = 1;
  return b;
}

OpSpec make_matmul() {
  OpSpec s;
  s.name = "matmul";
  s.family = "dense";
  s.doc = "NumPy matmul of A [..., M, K] and B [..., K, N] (both rank >= 2), batch dims broadcast";
  s.min_inputs = s.max_inputs = 2;
  s.infer = [](const std::vector<TensorType>& in, const Attrs&) {
    const DType dt = common_float_dtype(in);
    return Signature{{TensorType{dt, matmul_out_shape(matmul_geometry(in[0], in[1]))}}, {}};
  };
  // Written once for a scalar R, as dense is.
  s.forward = [](const Inputs& in, const Attrs&) {
    return in_evaluation_precision([&](auto zero, bool fused) {
      using R = decltype(zero);
      const MatmulGeom g = matmul_geometry(in[0]->type(), in[1]->type());
      const std::vector<R> a = values_as<R>(*in[0]), b = values_as<R>(*in[1]);
      std::vector<R> y(static_cast<size_t>(core::numel(matmul_out_shape(g))), R(0));
      SumRange range(static_cast<int64_t>(y.size()));
      for_each_matmul_term(g, [&](int64_t ai, int64_t bi, int64_t yi) {
        const R av = a[static_cast<size_t>(ai)], bv = b[static_cast<size_t>(bi)];
        add_product(y[static_cast<size_t>(yi)], av, bv, fused);
        range.add(yi, static_cast<double>(av * bv));
      });
      Tensor out = widened(y, matmul_out_shape(g));
      if constexpr (std::is_same_v<R, double>) range.mark(out);
      return std::vector<Tensor>{out};
    });
  };
  s.vjp = [](const Inputs& in, const Attrs&, const std::vector<Tensor>&, const std::vector<Tensor>& grad) {
    return in_evaluation_precision([&](auto zero, bool fused) {
      using R = decltype(zero);
      const MatmulGeom g = matmul_geometry(in[0]->type(), in[1]->type());
      const std::vector<R> a = values_as<R>(*in[0]), b = values_as<R>(*in[1]), gy = values_as<R>(grad[0]);
      std::vector<R> ga(a.size(), R(0)), gb(b.size(), R(0));
      // Accumulating into the mapped (un-broadcast) matrix sums the gradient over broadcast batch
      // dims, as sum_to would on a materialised broadcast gradient.
      for_each_matmul_term(g, [&](int64_t ai, int64_t bi, int64_t yi) {
        const R d = gy[static_cast<size_t>(yi)];
        add_product(ga[static_cast<size_t>(ai)], d, b[static_cast<size_t>(bi)], fused);
        add_product(gb[static_cast<size_t>(bi)], d, a[static_cast<size_t>(ai)], fused);
      });
      return std::vector<Tensor>{widened(ga, in[0]->shape()), widened(gb, in[1]->shape())};
    });
  };
  s.float32_orders = {Float32Order::kInOrder, Float32Order::kFused};
  s.tol_f32 = {1e-5, 1e-4};
  s.reduction_length = [](const std::vector<TensorType>& in, const Attrs&) {
    return in[0].shape.empty() ? int64_t{1} : std::max<int64_t>(1, in[0].shape.back());
  };
  s.tags = {"matmul"};
  s.range = [](const std::vector<Interval>& in, const std::vector<TensorType>& t, const Attrs&) {
    const double k = t[0].shape.empty() ? 1.0 : static_cast<double>(t[0].shape.back());
    return std::vector<Interval>{sum_of(mul(in[0], in[1]), k)};
  };
  s.sample = [](core::Rng& rng) {
    const Shape full = random_shape(rng, static_cast<int>(rng.randint(0, 2)), 2, 3);  // output batch dims
    const int64_t m = rng.randint(1, 4), k = rng.randint(1, 4), n = rng.randint(1, 4);
    Shape a = operand_batch(rng, full), b = operand_batch(rng, full);
    a.insert(a.end(), {m, k});
    b.insert(b.end(), {k, n});
    Case c;
    c.inputs = {f64t(a), f64t(b)};
    c.gen = {InputGen{}, InputGen{}};
    return c;
  };
  // A [..., M, K] @ B [K, N] (or with A's batch dims): B is brought to that shape.
  s.prepare_merge = [](InputShaper& in, Attrs&) {
    if (in.shape(0).size() < 2) in.to_rank(0, 2);
    const Shape a = in.shape(0);
    const int64_t kk = a.back(), nb = core::numel(in.shape(1));
    const int64_t n = nb % kk == 0 && nb / kk <= 16 ? nb / kk : in.rng().randint(1, 8);
    Shape target{kk, n};
    if (a.size() > 2 && in.rng().bernoulli(0.3)) {
      target.assign(a.begin(), a.end() - 2);
      target.insert(target.end(), {kk, n});
    }
    if (core::numel(target) > in.max_elems()) return false;
    in.to_shape(1, target);
    return true;
  };
  return s;
}

// ---- ONNX mapping

// The power of two s among {1, 2, 4} (the form's choice `what`, 1 where no other is exact) for which
// t / s is exact in t's dtype: s * (t / s) = t for every finite element, no quotient below the normal
// numbers. Dividing by s > 1 keeps products and sums in range where the model's are.
double exact_power_of_two(OnnxExport& e, const std::string& what, const Tensor* t) {
  if (!t) return 1.0;
  const double s = std::vector<double>{1.0, 2.0, 4.0}[e.choose(what, {"1", "2", "4"})];
  const bool f32 = t->dtype() == core::DType::F32;
  for (int64_t i = 0; i < t->numel(); ++i) {
    const double v = t->get(i);
    if (!std::isfinite(v) || v == 0) continue;
    const double q = f32 ? static_cast<double>(static_cast<float>(v / s)) : v / s;
    if (std::abs(q) < (f32 ? static_cast<double>(FLT_MIN) : DBL_MIN) || q * s != v) return 1.0;
  }
  return s;
}

// `t` times `s`, element for element.
Tensor scaled(const Tensor& t, double s) {
  Tensor out = t;
  for (int64_t i = 0; i < out.numel(); ++i) out.set(i, t.get(i) * s);
  return out;
}

// 2-D input: Gemm with transB; otherwise MatMul with the transposed weight (+ Add for the bias).
// Forms: Gemm with transB=1 | the weight written transposed (transB=0) | every Gemm attribute
// written (transA=0, alpha=beta=1) | MatMul + Add | alpha and beta powers of two with the constant
// weight and bias written divided by them (exactly) | the input transposed by a node, transA=1;
// beyond 2-D the weight transposed by a node or written transposed.
void export_dense(OnnxExport& e) {
  const bool bias = e.ai("bias") != 0;
  const Tensor* w = e.initializer(e.in(1));
  auto transposed_weight = [&]() {
    const int64_t r = w->dim(0), c = w->dim(1);
    Tensor t(w->dtype(), {c, r});
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) t.set(j * r + i, w->get(i * c + j));
    return e.constant(t, "weight_t");
  };
  auto node_transposed = [&]() {
    auto [tp, wt] = e.helper("Transpose", {e.in(1)}, "weight_t");
    tp->set_ints("perm", {1, 0});
    return wt;
  };
  if (e.in_shape().size() == 2) {
    const Tensor* b = bias ? e.initializer(e.in(2)) : nullptr;
    std::vector<std::string> forms = {"gemm_transB", "gemm_explicit", "matmul_add"};
    if (w) forms.push_back("gemm_pretransposed");
    if (w && (!bias || b)) forms.push_back("gemm_scaled");
    forms.push_back("gemm_transA");
    const std::string form = forms[e.choose("gemm", forms)];
    if (form == "gemm_scaled") {
      const double alpha = exact_power_of_two(e, "alpha", w), beta = bias ? exact_power_of_two(e, "beta", b) : 1.0;
      std::vector<std::string> ins = {e.in(0), alpha == 1 ? e.in(1) : e.constant(scaled(*w, 1 / alpha), "weight_s")};
      if (bias) ins.push_back(beta == 1 ? e.in(2) : e.constant(scaled(*b, 1 / beta), "bias_s"));
      e.final_node("Gemm", ins).set_f("alpha", alpha).set_f("beta", beta).set_i("transB", 1);
      return;
    }
    if (form == "gemm_transA") {
      auto [tp, xt] = e.helper("Transpose", {e.in(0)}, "input_t");
      tp->set_ints("perm", {1, 0});
      std::vector<std::string> ins = {xt, e.in(1)};
      if (bias) ins.push_back(e.in(2));
      e.final_node("Gemm", ins).set_i("transA", 1).set_i("transB", 1);
      return;
    }
    if (form == "matmul_add") {
      const std::string wt = w && e.choose2("weight", "node", "pretransposed") ? transposed_weight()
                                                                                  : node_transposed();
      if (!bias) e.final_node("MatMul", {e.in(0), wt});
      else e.final_node("Add", {e.h("MatMul", {e.in(0), wt}, "matmul"), e.in(2)});
      return;
    }
    const bool pre = form == "gemm_pretransposed";
    std::vector<std::string> ins = {e.in(0), pre ? transposed_weight() : e.in(1)};
    if (bias) ins.push_back(e.in(2));
    OnnxNode& p = e.final_node("Gemm", ins);
    if (form == "gemm_explicit") p.set_f("alpha", 1.0).set_f("beta", 1.0).set_i("transA", 0);
    if (!pre) p.set_i("transB", 1);
    return;
  }
  const std::string wt = w && e.choose2("weight", "node", "pretransposed") ? transposed_weight() : node_transposed();
  if (!bias) {
    e.final_node("MatMul", {e.in(0), wt});
    return;
  }
  e.final_node("Add", {e.h("MatMul", {e.in(0), wt}, "matmul"), e.in(2)});
}

// Gemm → dense, with a transpose when A is transposed or B is not, and an add for a broadcast C. alpha and
// beta scale B and C: folded into them where they are constants, else a mul by the scalar.
void import_gemm(OnnxImport& m) {
  const double alpha = m.getf("alpha", 1.0), beta = m.getf("beta", 1.0);
  auto times = [&](int i, double s, const std::string& what) {
    if (s == 1.0) return m.in(i);
    if (const Tensor* t = m.constant(i)) return m.new_initializer(what, scaled(*t, s));
    return m.emit("mul", {m.in(i), m.scalar_like(m.in(i), s, what + "_factor")}, {});
  };
  std::string x = m.in(0);
  if (m.geti("transA", 0) != 0) x = m.emit("transpose", {x}, {{"perm", std::vector<int64_t>{1, 0}}});
  const Shape ws = m.type_of(m.in(1)).shape;
  if (ws.size() != 2) m.fail("B must be 2-D");
  std::string w = times(1, alpha, "B_alpha");
  if (m.geti("transB", 0) == 0) w = m.emit("transpose", {w}, {{"perm", std::vector<int64_t>{1, 0}}});
  const int64_t units = m.geti("transB", 0) ? ws[0] : ws[1];
  // beta = 0 drops C (ONNX's reference leaves it out: 0 * inf would be NaN).
  if (!m.present(2) || beta == 0) {
    m.emit_final("dense", {x, w}, {{"units", units}, {"bias", int64_t{0}}});
    return;
  }
  const std::string c = times(2, beta, "C_beta");
  if (m.type_of(c).shape == Shape{units}) {
    m.emit_final("dense", {x, w, c}, {{"units", units}, {"bias", int64_t{1}}});
    return;
  }
  const std::string y = m.emit("dense", {x, w}, {{"units", units}, {"bias", int64_t{0}}});
  m.emit_final("add", {y, c});
}

// Forms: MatMul of the two operands | where A is one row ([1, K]) or B one column ([K, 1]), that operand
// squeezed to a vector ([K]) and the product unsqueezed back (NumPy's 1-D promotion, which ONNX's MatMul
// takes). Squeeze and Unsqueeze take their axes as an input from opset 13, as an attribute before.
void export_matmul(OnnxExport& e) {
  const Shape& a = e.in_shape(0);
  const Shape& b = e.in_shape(1);
  std::vector<std::string> forms = {"matrices"};
  if (a.size() == 2 && a[0] == 1) forms.push_back("a_vector");
  if (b.size() == 2 && b[1] == 1) forms.push_back("b_vector");
  const std::string form = forms[e.choose("matmul", forms)];
  if (form == "matrices") {
    e.final_node("MatMul", {e.in(0), e.in(1)});
    return;
  }
  const bool row = form == "a_vector";
  const int64_t axis = row ? 0 : 1;  // the operand's unit axis
  // Where the product gets it back: before B's last axis, or after A's rows (counted from the front).
  const int64_t product_axis = row ? static_cast<int64_t>(b.size()) - 2 : static_cast<int64_t>(a.size()) - 1;
  auto axes_in = [&e](const std::string& v, int64_t ax) {
    return e.opset() >= 13 ? std::vector<std::string>{v, e.ints({ax}, "axes")} : std::vector<std::string>{v};
  };
  auto [q, vec] = e.helper("Squeeze", axes_in(e.in(row ? 0 : 1), axis), row ? "a_vector" : "b_vector");
  if (e.opset() < 13) q->set_ints("axes", {axis});
  const std::vector<std::string> operands = row ? std::vector<std::string>{vec, e.in(1)}
                                                : std::vector<std::string>{e.in(0), vec};
  const std::string p = e.h("MatMul", operands, "product");
  OnnxNode& u = e.final_node("Unsqueeze", axes_in(p, product_axis));
  if (e.opset() < 13) u.set_ints("axes", {product_axis});
}

void import_matmul(OnnxImport& m) {
  std::string a = m.in(0), b = m.in(1);
  const size_t ra = m.type_of(a).shape.size(), rb = m.type_of(b).shape.size();
  if (ra >= 2 && rb >= 2) {
    m.emit_final("matmul", {a, b});
    return;
  }
  // NumPy's 1-D promotion, spelled with unsqueeze and squeeze.
  if (ra == 1) a = m.emit("unsqueeze", {a}, {{"axes", std::vector<int64_t>{0}}});
  if (rb == 1) b = m.emit("unsqueeze", {b}, {{"axes", std::vector<int64_t>{-1}}});
  const std::string p = m.emit("matmul", {a, b}, {});
  std::vector<int64_t> axes;
  if (ra == 1) axes.push_back(-2);
  if (rb == 1) axes.push_back(-1);
  if (ra == 1 && rb == 1) axes = {-2, -1};
  m.emit_final("squeeze", {p}, {{"axes", axes}});
}

}  // namespace

void register_dense(Registry& r) {
  OpSpec dense = make_dense();
  dense.onnx_export = export_dense;
  dense.onnx_import = {{{"Gemm"}, import_gemm}};
  r.add(std::move(dense));
  OpSpec matmul = make_matmul();
  matmul.onnx_export = export_matmul;
  matmul.onnx_import = {{{"MatMul"}, import_matmul}};
  r.add(std::move(matmul));
}

}  // namespace quorum::ops
