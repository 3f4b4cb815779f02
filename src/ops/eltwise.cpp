// Elementwise unary operators: activations and math functions.
// Each is a scalar function f(x) and its derivative f'(x) (given x and y = f(x)); the table builds
// the OpSpec, the forward kernel and the VJP from them.
#include <cfloat>
#include <cmath>
#include <limits>
#include <map>
#include <numbers>

#include "ops/kernel_util.h"
#include "ops/onnx_map.h"
#include "ops/registry.h"

namespace quorum::ops {
namespace {

using Fn = std::function<double(double x, const Attrs& a)>;
using DFn = std::function<double(double x, double y, const Attrs& a)>;

struct Unary {
  // What every unary operator has; the fields after it are optional (designated where given).
  struct Required {
    std::string name;
    std::string doc;
    Fn f;
    DFn df;
  } fn;
  std::vector<AttrSpec> attrs = {};
  InputGen gen = {};
  std::vector<ValidRange> ranges = {};
  std::vector<std::string> tags = {"activation"};
  std::function<void(core::Rng&, Attrs&)> sample_attrs = nullptr;
  std::function<void(const Attrs&)> check = nullptr;  // extra attribute requirements
  // Where f' jumps, for the operators whose derivative there differs between real libraries by
  // convention: libtorch passes the gradient of clip (and of relu6, a clip to [0, 6]) at its bounds
  // and uses the middle formula of hardswish at -3 and 3, and abs has no agreed derivative at 0.
  // relu, leaky_relu, elu, selu and hard_sigmoid stay strict (null): the libraries agree at their
  // kinks (0 at relu's), so a different value there is a finding.
  std::function<std::vector<double>(const Attrs&)> kinks = nullptr;
  std::function<bool(Attrs&)> repair = nullptr;  // OpSpec::repair_attrs
  // A factor float32 implementations multiply the incoming gradient by before the rest of the
  // derivative (softplus: libtorch's gy * e^x / (e^x + 1)): where |gy| times it leaves float32's
  // range the library's gradient may be inf or NaN although the exact one fits (ops::float32_range);
  // where it falls below the normal range, the rest multiplies its subnormal rounding (rsqrt).
  std::function<double(double x, const Attrs&)> gy_factor = nullptr;
};

// Kinks at fixed points.
std::function<std::vector<double>(const Attrs&)> kinks_at(std::vector<double> points) {
  return [points](const Attrs&) { return points; };
}

// x is at kink k as float32 sees it too (a float32 input equals a bound rounded to float32).
bool at_point(double x, double k) { return x == k || static_cast<float>(x) == static_cast<float>(k); }

double sigmoid(double x) { return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x)); }

// ---- static value ranges (OpSpec::range): how each unary maps an interval, over its own f.
using Scalar = std::function<double(double)>;
using UnaryRange = std::function<Interval(const Interval& x, const Attrs& a, const Scalar& f)>;

UnaryRange up() {
  return [](const Interval& x, const Attrs&, const Scalar& f) { return increasing(x, f); };
}
UnaryRange down() {
  return [](const Interval& x, const Attrs&, const Scalar& f) { return decreasing(x, f); };
}
// f monotone (either way) on each side of 0, as leaky_relu, elu and hard_sigmoid are for any sign of
// their alpha: the hull of f at the interval's ends and at 0 when it holds 0.
UnaryRange pieces_at_zero() {
  return [](const Interval& x, const Attrs&, const Scalar& f) {
    auto piece = [&](const Interval& p) {
      const Interval r = increasing(p, f);
      return Interval{std::min(r.lo, r.hi), std::max(r.lo, r.hi)};
    };
    if (!x.contains(0)) return piece(x);
    return hull(piece(Interval{x.lo, 0}), piece(Interval{0, x.hi}));
  };
}
UnaryRange valley_at(double at, double min_value) {
  return [at, min_value](const Interval& x, const Attrs&, const Scalar& f) { return valley(x, f, at, min_value); };
}

// gelu decreases up to about -0.752 (both forms), where it is about -0.170, and increases after.
Interval gelu_range(const Interval& x, const Attrs&, const Scalar& f) {
  Interval r = valley(x, f, -0.75, -0.171);
  if (x.lo <= -0.7 && x.hi >= -0.8) r.lo = -0.171;
  return r;
}

// 1/x: decreasing on each side of 0, unbounded across it.
Interval reciprocal_range(const Interval& x, const Attrs&, const Scalar& f) {
  if (x.contains(0)) return Interval{};
  return decreasing(x, f);
}

// x^e: a NaN for x < 0 with a fractional e is no element, so only x >= 0 counts there.
Interval pow_range(const Interval& x, const Attrs& a, const Scalar& f) {
  const double e = core::attr_f(a, "exponent");
  if (e == 0) return Interval{1, 1};
  const bool integer = std::floor(e) == e;
  Interval d = x;
  if (!integer) {
    if (x.hi < 0) return Interval{};
    d.lo = std::max(d.lo, 0.0);
  }
  const bool even = integer && std::fmod(std::abs(e), 2.0) == 0;
  if (e > 0) return even ? valley(d, f, 0.0, 0.0) : increasing(d, f);
  if (d.contains(0)) return Interval{};
  if (d.lo > 0) return decreasing(d, f);
  return even ? increasing(d, f) : decreasing(d, f);  // x < 0: x^-2 increases, x^-1 decreases
}

const std::map<std::string, UnaryRange>& unary_ranges() {
  static const std::map<std::string, UnaryRange> m = {
      {"relu", up()},
      {"relu6", up()},
      {"leaky_relu", pieces_at_zero()},
      {"elu", pieces_at_zero()},
      {"selu", up()},
      {"gelu", gelu_range},
      {"sigmoid", up()},
      {"tanh", up()},
      {"softplus", up()},
      {"softsign", up()},
      {"hard_sigmoid", pieces_at_zero()},
      {"hardswish", valley_at(-1.5, -0.375)},
      {"exp", up()},
      {"log", up()},
      {"sqrt", up()},
      {"rsqrt", down()},
      {"reciprocal", reciprocal_range},
      {"abs", valley_at(0, 0)},
      {"neg", down()},
      {"square", valley_at(0, 0)},
      {"pow", pow_range},
      {"clip", up()},
  };
  return m;
}

OpSpec make_unary(Unary u) {
  OpSpec s;
  s.name = u.fn.name;
  s.family = "eltwise";
  s.doc = u.fn.doc;
  s.attrs = u.attrs;
  s.tags = u.tags;
  s.valid_ranges = u.ranges;
  if (!u.ranges.empty()) s.tags.push_back("vulnerable");
  if (auto it = unary_ranges().find(s.name); it != unary_ranges().end()) {
    const UnaryRange rule = it->second;
    const Fn fx = u.fn.f;
    s.range = [rule, fx](const std::vector<Interval>& in, const std::vector<TensorType>&, const Attrs& a) {
      return std::vector<Interval>{rule(in[0], a, [&](double v) { return fx(v, a); })};
    };
  }
  auto check = u.check;
  s.infer = [check](const std::vector<TensorType>& in, const Attrs& a) {
    if (check) check(a);
    return same_type_as_input(in, a);
  };
  Fn f = u.fn.f;
  DFn df = u.fn.df;
  auto gy_factor = u.gy_factor;
  // NaN in, NaN out, for every unary operator (a comparison-based kernel like relu's would
  // otherwise turn it into a number).
  s.forward = [f](const Inputs& in, const Attrs& a) {
    return std::vector<Tensor>{map1(*in[0], [&](double x) { return std::isnan(x) ? x : f(x, a); })};
  };
  s.vjp = [df, gy_factor](const Inputs& in, const Attrs& a, const std::vector<Tensor>& out,
                          const std::vector<Tensor>& g) {
    Tensor gx(DType::F64, in[0]->shape());
    const double* x = in[0]->f64();
    const double* y = out[0].f64();
    const double* gy = g[0].f64();
    double* gxp = gx.f64();
    for (int64_t i = 0; i < gx.numel(); ++i) {
      if (std::isnan(x[i])) {
        gxp[i] = x[i];
        continue;
      }
      const double d = df(x[i], y[i], a);
      gxp[i] = gy[i] * d;
      if (!gy_factor) continue;
      const double k = gy_factor(x[i], a), t = gy[i] * k;
      gxp[i] += float32_range(std::abs(t));
      // Below float32's normal range the product gy * k keeps only the digits of its subnormal grid
      // (libtorch's rsqrt: -0.5 * gy for the smallest subnormal gy is 0, times an infinite y^3 NaN):
      // the rest of the derivative multiplies the rounded product. Outside a float32 scope rounded()
      // is the identity, so the kernel's own value is gy * f'.
      if (t != 0 && std::abs(t) < FLT_MIN && rounded(t) != t) gxp[i] = rounded(t) * (d / k);
    }
    return std::vector<Tensor>{gx};
  };
  s.repair_attrs = u.repair;
  if (u.kinks) {
    auto kinks = u.kinks;
    s.kink_derivatives = [kinks, f, df](double x, const Attrs& a) -> std::optional<std::pair<double, double>> {
      for (double k : kinks(a)) {
        if (!at_point(x, k)) continue;
        const double h = 1e-9 * std::max(std::abs(k), 1.0);
        const double left = df(k - h, f(k - h, a), a), right = df(k + h, f(k + h, a), a);
        return std::make_pair(std::min(left, right), std::max(left, right));
      }
      return std::nullopt;
    };
  }
  InputGen gen = u.gen;
  auto sample_attrs = u.sample_attrs;
  std::vector<AttrSpec> attrs = u.attrs;
  s.sample = [gen, sample_attrs, attrs](core::Rng& rng) {
    Case c;
    c.inputs = {f64t(random_shape(rng, static_cast<int>(rng.randint(1, 4)), 1, 5))};
    for (const auto& a : attrs) c.attrs[a.name] = a.default_value;
    if (sample_attrs) sample_attrs(rng, c.attrs);
    c.gen = {gen};
    return c;
  };
  return s;
}

constexpr double kSeluAlpha = 1.6732632423543772;
constexpr double kSeluGamma = 1.0507009873554805;

double gelu_tanh_inner(double x) { return std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x); }

std::vector<Unary> unaries() {
  const double nan = std::nan("");
  std::vector<Unary> u = {
      {"relu", "max(x, 0)", [](double x, const Attrs&) { return x > 0 ? x : 0.0; },
       [](double x, double, const Attrs&) { return x > 0 ? 1.0 : 0.0; }},
      {.fn = {"relu6", "min(max(x, 0), 6)", [](double x, const Attrs&) { return std::min(std::max(x, 0.0), 6.0); },
              [](double x, double, const Attrs&) { return x > 0 && x < 6 ? 1.0 : 0.0; }},
       .gen = InputGen{-8, 8},
       .kinks = kinks_at({0.0, 6.0})},
      {.fn = {"leaky_relu", "x if x > 0 else alpha*x",
              // alpha * x with alpha 0 is 0 for every x, -inf too (not 0 * -inf = NaN).
              [](double x, const Attrs& a) {
                const double alpha = core::attr_f(a, "alpha");
                return x > 0 ? x : alpha == 0 ? 0.0 : alpha * x;
              },
              [](double x, double, const Attrs& a) { return x > 0 ? 1.0 : core::attr_f(a, "alpha"); }},
       // ONNX: any float. A negative slope (not monotone) or one above 1 are legal values libraries
       // special-case (in-place or fused forms that assume 0 <= alpha <= 1).
       .attrs = {float_attr("alpha", 0.01, -kInf, kInf, {AttrValue(nan)}, "slope for x < 0 (any float, ONNX)")},
       .sample_attrs =
           [](core::Rng& r, Attrs& a) {
             const double u = r.uniform(0.0, 1.0);
             a["alpha"] = u < 0.6   ? random_float(r, 0.0, 1.0)
                          : u < 0.8 ? random_float(r, -1.5, 0.0)
                                    : random_float(r, 1.0, 3.0);
           }},
      {.fn = {"elu", "x if x > 0 else alpha*(exp(x)-1)",
              [](double x, const Attrs& a) { return x > 0 ? x : core::attr_f(a, "alpha") * std::expm1(x); },
              [](double x, double, const Attrs& a) { return x > 0 ? 1.0 : core::attr_f(a, "alpha") * std::exp(x); }},
       // ONNX: any float; 0 makes it relu, a negative alpha folds the negative side up.
       .attrs = {float_attr("alpha", 1.0, -kInf, kInf, {AttrValue(nan)}, "scale for x < 0 (any float, ONNX)")},
       .sample_attrs =
           [](core::Rng& r, Attrs& a) {
             a["alpha"] = r.uniform(0.0, 1.0) < 0.75 ? random_float(r, 0.1, 2.0) : random_float(r, -1.5, 0.0);
           },
       // libtorch's elu backward for x <= 0 is gy * alpha * exp(x), left to right: gy * alpha overflows
       // float32 where the gradient fits (gy = -3e38, alpha 1.59, x = -2.87: -inf, want -2.7e37).
       .gy_factor = [](double x, const Attrs& a) { return x > 0 ? 1.0 : std::abs(core::attr_f(a, "alpha")); }},
      {.fn = {"selu", "gamma*(x if x > 0 else alpha*(exp(x)-1)) with the SELU constants",
              [](double x, const Attrs&) { return kSeluGamma * (x > 0 ? x : kSeluAlpha * std::expm1(x)); },
              [](double x, double, const Attrs&) { return kSeluGamma * (x > 0 ? 1.0 : kSeluAlpha * std::exp(x)); }},
       // As elu's (libtorch's selu is its elu with scale gamma): gy * gamma * alpha first for x <= 0.
       .gy_factor = [](double x, const Attrs&) { return x > 0 ? 1.0 : kSeluGamma * kSeluAlpha; }},
      {.fn = {"gelu", "x*Phi(x); approximate='tanh' uses the tanh formula",
              [](double x, const Attrs& a) {
                // The limits at the infinities (both forms): x * Phi(x) tends to 0 at -inf, to x at +inf.
                if (std::isinf(x)) return x > 0 ? x : 0.0;
                // The tanh form holds tanh(inner) in float32 (stored): near -1 its rounding is the whole of
                // 1 + tanh (x = -5: 1.19e-7 where 9.1e-8 is exact), and below x = -5.5 it is -1 exactly.
                if (core::attr_s(a, "approximate") == "tanh")
                  return 0.5 * x * (1.0 + stored(std::tanh(gelu_tanh_inner(x))));
                // ONNX's form (Quorum's export, OpenCV) multiplies x by 1 + erf before halving: beyond
                // FLT_MAX / 2 that product leaves float32's range where the result does not.
                const double one_plus_erf = 1.0 + std::erf(x / std::numbers::sqrt2);
                return 0.5 * x * one_plus_erf + float32_range(std::abs(x) * one_plus_erf);
              },
              [](double x, double, const Attrs& a) {
                if (std::isinf(x)) return x > 0 ? 1.0 : 0.0;  // the derivative's limits
                if (core::attr_s(a, "approximate") == "tanh") {
                  const double t = stored(std::tanh(gelu_tanh_inner(x)));
                  return 0.5 * (1.0 + t) +
                         0.5 * x * (1.0 - t * t) * std::sqrt(2.0 / std::numbers::pi) * (1.0 + 3.0 * 0.044715 * x * x);
                }
                return 0.5 * (1.0 + std::erf(x / std::numbers::sqrt2)) +
                       x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi);
              }},
       .attrs = {enum_attr("approximate", "none", {"none", "tanh"}, {"erf", ""}, "erf form or tanh approximation")},
       .sample_attrs = [](core::Rng& r,
                          Attrs& a) { a["approximate"] = std::string(r.bernoulli(0.5) ? "none" : "tanh"); }},
      {"sigmoid", "1/(1+exp(-x))", [](double x, const Attrs&) { return sigmoid(x); },
       [](double, double y, const Attrs&) { return y * (1.0 - y); }},
      {"tanh", "tanh(x)", [](double x, const Attrs&) { return std::tanh(x); },
       [](double, double y, const Attrs&) { return 1.0 - y * y; }},
      {.fn = {"softplus", "log(1+exp(x))",
              [](double x, const Attrs&) { return std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x))); },
              [](double x, double, const Attrs&) { return sigmoid(x); }},
       .gen = InputGen{-4, 4},
       .ranges = {ValidRange{0, -kInf, 88.72, false, false,
                             "exp overflows float32 above ~88.7 in a naive implementation"}},
       // libtorch: gy * z / (z + 1), z = e^x, below its threshold 20.
       .gy_factor = [](double x, const Attrs&) { return x <= 20 ? std::exp(x) : 0.0; }},
      // The derivative 1/(1+|x|)^2, which implementations differentiating x / (1 + |x|) (libtorch)
      // get as 1/(1+|x|) - |x|/(1+|x|)^2: a difference of terms (1+|x|) times larger (stored_sum).
      {"softsign", "x/(1+|x|)",
       [](double x, const Attrs&) { return std::isinf(x) ? std::copysign(1.0, x) : x / (1.0 + std::abs(x)); },
       [](double x, double, const Attrs&) {
         if (std::isinf(x)) return 0.0;  // the limit of 1/(1+|x|)^2
         const double q = 1.0 / (1.0 + std::abs(x));
         return stored_sum(q * q, q + std::abs(x) * q * q, 2);
       }},
      {.fn = {"hard_sigmoid", "max(0, min(1, alpha*x+beta))",
              [](double x, const Attrs& a) {
                return std::max(0.0, std::min(1.0, core::attr_f(a, "alpha") * x + core::attr_f(a, "beta")));
              },
              [](double x, double, const Attrs& a) {
                // alpha * x + beta as float32 computes it, with float32 attributes: 0.4f * 0.99999988f +
                // 0.6f rounds to 1, the bound, where float64 keeps 0.99999996 and the derivative 0.4.
                const double alpha = rounded(core::attr_f(a, "alpha"));
                const double v = stored(rounded(alpha * x) + rounded(core::attr_f(a, "beta")));
                return v > 0 && v < 1 ? core::attr_f(a, "alpha") : 0.0;
              }},
       .attrs = {float_attr("alpha", 0.2, -kInf, kInf, {AttrValue(nan)}, "slope (any float, ONNX: negative decreases)"),
                 float_attr("beta", 0.5, -kInf, kInf, {AttrValue(nan)}, "offset")},
       .gen = InputGen{-4, 4},
       .sample_attrs =
           [](core::Rng& r, Attrs& a) {
             a["alpha"] = r.uniform(0.0, 1.0) < 0.75 ? random_float(r, 0.1, 0.5) : random_float(r, -0.5, -0.1);
             a["beta"] = random_float(r, 0.2, 0.8);
           }},
      // Computed as x * relu6(x + 3) / 6 with the product marked stored: float32 implementations of
      // that form overflow there for |x| > FLT_MAX / 6 although the result fits.
      {.fn = {"hardswish", "x*max(0, min(1, x/6+1/2))",
              // 0 for x <= -3, -inf too (not -inf * 0 = NaN).
              [](double x, const Attrs&) { return x <= -3 ? 0.0 : stored(x * std::min(6.0, x + 3.0)) / 6.0; },
              [](double x, double, const Attrs&) { return x <= -3  ? 0.0
                                                          : x >= 3 ? 1.0
                                                                   : x / 3.0 + 0.5; }},
       .gen = InputGen{-5, 5},
       .kinks = kinks_at({-3.0, 3.0})},
      {.fn = {"exp", "e^x", [](double x, const Attrs&) { return std::exp(x); },
              [](double, double y, const Attrs&) { return y; }},
       .ranges = {ValidRange{0, -kInf, 88.72, false, false, "float32 overflow to inf above ~88.72"}},
       .tags = {"math"}},
      {.fn = {"log", "natural logarithm", [](double x, const Attrs&) { return std::log(x); },
              // Derivatives that can leave float32's range where the gradient (times gy) does not are stored:
              // a float32 implementation computes dy * (1 / x) (oneDNN: inf for x = 1e-40, dy = 0.005).
              [](double x, double, const Attrs&) { return stored(1.0 / x); }},
       .gen = InputGen{0.1, 3},
       .ranges = {ValidRange{0, 0, kInf, false, false, "log of x <= 0 is -inf or NaN"}},
       .tags = {"math"}},
      {.fn = {"sqrt", "square root", [](double x, const Attrs&) { return std::sqrt(x); },
              [](double, double y, const Attrs&) { return stored(0.5 / y); }},
       .gen = InputGen{0.1, 3},
       .ranges = {ValidRange{0, 0, kInf, true, false, "sqrt of x < 0 is NaN; its derivative is inf at 0"}},
       .tags = {"math"}},
      {.fn = {"rsqrt", "1/sqrt(x)", [](double x, const Attrs&) { return 1.0 / std::sqrt(x); },
              // -0.5 y^3 (libtorch), -0.5 / (x sqrt x): 5e59 for x = 1e-40 (oneDNN: inf times gy = -4e-44).
              [](double x, double y, const Attrs&) { return stored(-0.5 * y / x); }},
       .gen = InputGen{0.2, 3},
       .ranges = {ValidRange{0, 0, kInf, false, false, "rsqrt of x <= 0 is inf or NaN"}},
       .tags = {"math"},
       // libtorch: (-0.5 * gy) * y^3, so the smallest subnormal gy (-1.4e-45) gives 0 there and NaN at
       // x = 0 (y = inf), where the gradient is +inf (seed 2026).
       .gy_factor = [](double, const Attrs&) { return 0.5; }},
      {.fn = {"reciprocal", "1/x", [](double x, const Attrs&) { return 1.0 / x; },
              // -y * y, a product float32 implementations hold (libtorch: -gy * (y * y)): it overflows for
              // |y| > 1.8e19, and times a zero incoming gradient gives NaN.
              [](double, double y, const Attrs&) { return stored(-y * y); }},
       .gen = InputGen{0.2, 3},
       .ranges = {ValidRange{0, -kInf, 0, false, false, "division by zero"},
                  ValidRange{0, 0, kInf, false, false, "division by zero"}},
       .tags = {"math"}},
      {.fn = {"abs", "|x|", [](double x, const Attrs&) { return std::abs(x); },
              [](double x, double, const Attrs&) { return x > 0   ? 1.0
                                                          : x < 0 ? -1.0
                                                                  : 0.0; }},
       .tags = {"math"},
       .kinks = kinks_at({0.0})},
      {.fn = {"neg", "-x", [](double x, const Attrs&) { return -x; },
              [](double, double, const Attrs&) { return -1.0; }},
       .tags = {"math"}},
      {.fn = {"square", "x*x", [](double x, const Attrs&) { return x * x; },
              // 2x overflows float32 for |x| > 1.7e38 where x*x already did (libtorch: gy * 2x).
              [](double x, double, const Attrs&) { return stored(2.0 * x); }},
       .tags = {"math"}},
      {.fn = {"pow", "x^exponent (scalar exponent)",
              // IEEE 754's pow: pow(-inf, y) is +inf for y > 0 not an odd integer (|x|^y), though a fractional
              // power of a finite x < 0 is NaN. Libraries that compute exp(y log x) or sqrt give NaN there
              // (ledgers: *-pow-minus-inf-nan).
              [](double x, const Attrs& a) { return std::pow(x, core::attr_f(a, "exponent")); },
              [](double x, double, const Attrs& a) {
                const double e = core::attr_f(a, "exponent");
                return e == 0 ? 0.0 : stored(e * std::pow(x, e - 1.0));
              }},
       .attrs = {float_attr("exponent", 2.0, -kInf, kInf, {AttrValue(nan)}, "scalar exponent")},
       .gen = InputGen{0.2, 2},
       .ranges = {ValidRange{0, 0, kInf, true, false, "a fractional power of x < 0 is NaN"}},
       .tags = {"math"},
       .sample_attrs =
           [](core::Rng& r, Attrs& a) {
             a["exponent"] = r.pick(std::vector<double>{2.0, 3.0, 0.5, 1.5, -1.0, -0.5});
           }},
      {.fn = {"clip", "min(max(x, min), max)",
              [](double x, const Attrs& a) {
                return std::min(std::max(x, core::attr_f(a, "min")), core::attr_f(a, "max"));
              },
              [](double x, double, const Attrs& a) {
                return x > core::attr_f(a, "min") && x < core::attr_f(a, "max") ? 1.0 : 0.0;
              }},
       .attrs = {float_attr("min", -1.0, -kInf, kInf, {AttrValue(nan)}, "lower bound"),
                 float_attr("max", 1.0, -kInf, kInf, {AttrValue(nan)}, "upper bound (>= min)")},
       .sample_attrs =
           [](core::Rng& r, Attrs& a) {
             const double lo = random_float(r, -1.5, 0.0);
             a["min"] = lo;
             a["max"] = lo + random_float(r, 0.5, 2.0);
           },
       .check =
           [](const Attrs& a) {
             QUORUM_REQUIRE(core::attr_f(a, "min") <= core::attr_f(a, "max"), "clip requires min <= max");
           },
       .kinks =
           [](const Attrs& a) {
             return std::vector<double>{core::attr_f(a, "min"), core::attr_f(a, "max")};
           },
       .repair =
           [](Attrs& a) {  // min > max: the bounds swapped
             if (core::attr_f(a, "min") <= core::attr_f(a, "max")) return false;
             std::swap(a["min"], a["max"]);
             return true;
           }},
  };
  return u;
}

// ---- ONNX mapping

void export_gelu(OnnxExport& e) {
  const std::string x = e.in(0);
  if (e.as("approximate") == "tanh") {
    // 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x*x*x))), in the reference's order.
    std::string p = e.h("Mul", {e.scalar(0.044715, "k"), x}, "cube0");
    p = e.h("Mul", {p, x}, "cube1");
    p = e.h("Mul", {p, x}, "cube2");
    const std::string inner =
        e.h("Mul", {e.scalar(std::sqrt(2.0 / std::numbers::pi), "c"), e.h("Add", {x, p}, "poly")}, "inner");
    const std::string a = e.h("Add", {e.scalar(1, "one"), e.h("Tanh", {inner}, "tanh")}, "add");
    e.final_node("Mul", {e.h("Mul", {e.scalar(0.5, "half"), x}, "halfx"), a});
    return;
  }
  // (0.5*x)*(1 + erf(x/sqrt(2))): a form the importer fuses back to gelu; or x*(1/sqrt(2)) inside. Halving
  // first keeps every float32 intermediate finite where gelu is (x*(1 + erf) overflows for x > FLT_MAX/2),
  // so a library that runs the form node by node computes what the reference does.
  const std::string scaled = e.choose2("erf_arg", "div_sqrt2", "mul_rsqrt2")
                                 ? e.h("Mul", {x, e.scalar(1.0 / std::numbers::sqrt2, "rsqrt2")}, "scaled")
                                 : e.h("Div", {x, e.scalar(std::numbers::sqrt2, "sqrt2")}, "div");
  const std::string er = e.h("Erf", {scaled}, "erf");
  const std::string a = e.h("Add", {er, e.scalar(1, "one")}, "add");
  e.final_node("Mul", {e.h("Mul", {x, e.scalar(0.5, "half")}, "halfx"), a});
}

void export_hardswish(OnnxExport& e) {
  if (e.opset() >= 14 && !e.choose2("hardswish", "fused", "decomposed")) {
    e.final_node("HardSwish", {e.in(0)});
    return;
  }
  // x * clip(x + 3, 0, 6) / 6
  const std::string c = e.h(
      "Clip", {e.h("Add", {e.in(0), e.scalar(3, "three")}, "add"), e.scalar(0, "zero"), e.scalar(6, "six")}, "clip");
  e.final_node("Div", {e.h("Mul", {e.in(0), c}, "mul"), e.scalar(6, "six")});
}

void import_selu(OnnxImport& m) {
  const double alpha = m.getf("alpha", 1.67326319217681884765625), gamma = m.getf("gamma", 1.05070102214813232421875);
  if (std::abs(alpha - 1.6732632423543772) < 1e-6 && std::abs(gamma - 1.0507009873554805) < 1e-6) {
    m.emit_final("selu", {m.in(0)});
    return;
  }
  const std::string el = m.emit("elu", {m.in(0)}, {{"alpha", alpha}});
  m.emit_final("mul", {el, m.scalar_like(m.in(0), gamma, "gamma")});
}

void import_clip(OnnxImport& m) {
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  if (m.opset() < 11) {
    lo = m.getf("min", lo);
    hi = m.getf("max", hi);
  } else {
    if (m.present(1)) lo = m.const_scalar(1, "min");
    if (m.present(2)) hi = m.const_scalar(2, "max");
  }
  if (lo == 0 && hi == 6) {
    m.emit_final("relu6", {m.in(0)});
    return;
  }
  m.emit_final("clip", {m.in(0)}, {{"min", lo}, {"max", hi}});
}

// The ONNX form of each operator: a one-to-one unary pair, or hooks.
void set_onnx(OpSpec& s) {
  static const std::map<std::string, std::string> kUnary = {{"relu", "Relu"},
                                                            {"sigmoid", "Sigmoid"},
                                                            {"tanh", "Tanh"},
                                                            {"softplus", "Softplus"},
                                                            {"softsign", "Softsign"},
                                                            {"exp", "Exp"},
                                                            {"log", "Log"},
                                                            {"sqrt", "Sqrt"},
                                                            {"reciprocal", "Reciprocal"},
                                                            {"abs", "Abs"},
                                                            {"neg", "Neg"}};
  const std::string& op = s.name;
  if (auto it = kUnary.find(op); it != kUnary.end()) {
    const std::string type = it->second;
    s.onnx_export = [type](OnnxExport& e) { e.final_node(type, {e.in(0)}); };
    s.onnx_import = {{{type}, [op](OnnxImport& m) { m.emit_final(op, {m.in(0)}); }}};
  } else if (op == "relu6") {
    s.onnx_export = [](OnnxExport& e) { e.final_node("Clip", {e.in(0), e.scalar(0, "min"), e.scalar(6, "max")}); };
  } else if (op == "clip") {
    s.onnx_export = [](OnnxExport& e) {
      e.final_node("Clip", {e.in(0), e.scalar(e.af("min"), "min"), e.scalar(e.af("max"), "max")});
    };
    s.onnx_import = {{{"Clip"}, import_clip}};
  } else if (op == "leaky_relu" || op == "elu") {
    const std::string type = op == "elu" ? "Elu" : "LeakyRelu";
    const double def = op == "elu" ? 1.0 : 0.01;
    // Forms: an alpha equal to ONNX's default written or left out.
    s.onnx_export = [type, def](OnnxExport& e) {
      OnnxNode& p = e.final_node(type, {e.in(0)});
      if (static_cast<float>(e.af("alpha")) != static_cast<float>(def) || !e.choose2("defaults", "written", "omitted"))
        p.set_f("alpha", e.af("alpha"));
    };
    s.onnx_import = {{{type}, [op, def](OnnxImport& m) {
                        m.emit_final(op, {m.in(0)}, {{"alpha", m.getf("alpha", def)}});
                      }}};
  } else if (op == "selu") {
    // ONNX's default alpha and gamma are the SELU constants.
    s.onnx_export = [](OnnxExport& e) {
      OnnxNode& p = e.final_node("Selu", {e.in(0)});
      if (e.choose2("defaults", "omitted", "written"))
        p.set_f("alpha", 1.6732632423543772).set_f("gamma", 1.0507009873554805);
    };
    s.onnx_import = {{{"Selu"}, import_selu}};
  } else if (op == "hard_sigmoid") {
    s.onnx_export = [](OnnxExport& e) {
      OnnxNode& p = e.final_node("HardSigmoid", {e.in(0)});
      const bool defaults = static_cast<float>(e.af("alpha")) == 0.2f && static_cast<float>(e.af("beta")) == 0.5f;
      if (!defaults || !e.choose2("defaults", "written", "omitted"))
        p.set_f("alpha", e.af("alpha")).set_f("beta", e.af("beta"));
    };
    s.onnx_import = {
        {{"HardSigmoid"}, [](OnnxImport& m) {
           m.emit_final("hard_sigmoid", {m.in(0)}, {{"alpha", m.getf("alpha", 0.2)}, {"beta", m.getf("beta", 0.5)}});
         }}};
  } else if (op == "hardswish") {
    s.onnx_export = export_hardswish;
    s.onnx_import = {{{"HardSwish"}, [](OnnxImport& m) { m.emit_final("hardswish", {m.in(0)}); }}};
  } else if (op == "gelu") {
    // Import: the importer fuses the Div/Erf/Add/Mul/Mul form back to gelu (a graph pattern).
    s.onnx_export = export_gelu;
  } else if (op == "rsqrt") {
    s.onnx_export = [](OnnxExport& e) { e.final_node("Reciprocal", {e.h("Sqrt", {e.in(0)}, "sqrt")}); };
  } else if (op == "square") {
    s.onnx_export = [](OnnxExport& e) { e.final_node("Mul", {e.in(0), e.in(0)}); };
  } else if (op == "pow") {
    s.onnx_export = [](OnnxExport& e) { e.final_node("Pow", {e.in(0), e.scalar(e.af("exponent"), "exponent")}); };
    s.onnx_import = {{{"Pow"}, [](OnnxImport& m) {
                        m.emit_final("pow", {m.in(0)}, {{"exponent", m.const_scalar(1, "exponent")}});
                      }}};
  }
}

}  // namespace

void register_eltwise(Registry& r) {
  for (auto& u : unaries()) {
    OpSpec s = make_unary(std::move(u));
    set_onnx(s);
    r.add(std::move(s));
  }
}

}  // namespace quorum::ops
