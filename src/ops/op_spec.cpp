// OpSpec helpers: attribute builders, canonicalisation, tolerances.
#include "ops/op_spec.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <map>

namespace quorum::ops {

namespace {
struct StoredState {
  bool round_to_f32;
  double unit;
  bool jitter, move_statistics;
  core::Rng* rng;
  int direction;
  bool by_lane;
};
thread_local StoredState g_state{false, 0, false, false, nullptr, 0, false};
thread_local const StoredState* g_stored = nullptr;

// How far, in rounding errors, a stored value moves in the current scope.
double draw(int lane = 0) {
  if (g_stored->direction == 0) return g_stored->rng->uniform(-1.0, 1.0);
  return g_stored->by_lane && (lane & 1) ? -g_stored->direction : g_stored->direction;
}

double moved_sum(double sum, double magnitude, int64_t terms, bool moves, int lane = 0) {
  // A partial sum may overflow in some order where the terms' magnitude, with the sum's own rounding
  // error (sum_units(terms) units of it), passes FLT_MAX: 60 copies of FLT_MAX / 60 sum to FLT_MAX
  // exactly, and a vectorised float32 sum rounds that up to inf.
  if (g_stored && g_stored->round_to_f32 && !(magnitude * (1 + sum_units(terms) * g_stored->unit) <= FLT_MAX))
    return std::nan("");
  const double r = rounded(sum);
  if (!g_stored || !moves || !std::isfinite(r)) return r;
  return r + draw(lane) * sum_units(terms) * g_stored->unit * magnitude;
}
}  // namespace

StoredPrecision::StoredPrecision(bool round_to_f32, double unit, bool jitter, bool move_statistics, core::Rng& rng,
                                 int direction, bool by_lane) {
  g_state = StoredState{round_to_f32, unit, jitter, move_statistics, &rng, direction, by_lane};
  g_stored = &g_state;
}

StoredPrecision::~StoredPrecision() { g_stored = nullptr; }

namespace {
thread_local std::optional<Float32Order> g_float32;
}  // namespace

const char* float32_order_name(Float32Order order) {
  switch (order) {
    case Float32Order::kFused:
      return "float32, fused multiply-add";
    case Float32Order::kLanes:
      return "float32, 16 lanes then a horizontal sum";
    case Float32Order::kInOrder:
      break;
  }
  return "float32, products summed in order";
}

Float32Evaluation::Float32Evaluation(Float32Order order) { g_float32 = order; }

Float32Evaluation::~Float32Evaluation() { g_float32.reset(); }

std::optional<Float32Order> float32_evaluation() { return g_float32; }

double rounded(double v) {
  return g_stored && g_stored->round_to_f32 ? static_cast<double>(static_cast<float>(v)) : v;
}

double stored(double v) {
  const double r = rounded(v);
  if (!g_stored || !g_stored->jitter || !std::isfinite(r)) return r;
  return r * (1 + draw() * g_stored->unit);
}

namespace {
// Whether the range marks (float32_range, float32_underflow, stored_product) apply: in float32
// scopes, except those that move stored values down, which compute the kernel's own formula: an
// implementation that holds no such intermediate. Where the kernel's result is NaN (0 * inf), a
// mark's NaN in every trial would hide that rounding makes the result a number there (a constant
// channel's float32 mean, x - mean a few units, times an infinite scale: -inf).
bool range_marked() { return g_stored && g_stored->round_to_f32 && g_stored->direction >= 0; }
}  // namespace

double float32_underflow(double log_v) {
  return range_marked() && log_v < std::log(0x1p-118) ? std::nan("") : 0.0;
}

double float32_range(double magnitude) { return range_marked() && !(magnitude <= FLT_MAX) ? std::nan("") : 0.0; }

double stored_product(double product, double largest, double smallest) {
  if (range_marked() && !(largest <= FLT_MAX && smallest >= FLT_MIN)) return std::nan("");
  return rounded(product);
}

double sum_units(int64_t terms) {
  if (terms <= 1) return 0;
  const auto n = static_cast<double>(terms);
  return std::max(std::sqrt(n), n / 4);
}

double stored_sum(double sum, double magnitude, int64_t terms, int lane) {
  return moved_sum(sum, magnitude, terms, g_stored && g_stored->jitter, lane);
}

double statistic_sum(double sum, double magnitude, int64_t terms) {
  // A scope that keeps statistics keeps them exact, as implementations whose mean of equal values
  // is exact (Welford, pairwise or wider sums) do: a constant row's variance is then exactly 0.
  if (g_stored && !g_stored->move_statistics)
    return g_stored->round_to_f32 && !(magnitude <= FLT_MAX) ? std::nan("") : sum;
  return moved_sum(sum, magnitude, terms, g_stored != nullptr);
}

bool OpSpec::has_tag(const std::string& t) const { return std::find(tags.begin(), tags.end(), t) != tags.end(); }

const AttrSpec* OpSpec::attr(const std::string& n) const {
  for (const auto& a : attrs)
    if (a.name == n) return &a;
  return nullptr;
}

namespace {

// Float32 tolerances calibrated from agreement sweeps over the libraries (quorum calibrate).
struct Calibrated {
  const char* name;
  double atol, rtol;
};
const Calibrated kCalibrated[] = {
#include "ops/calibrated_tolerances.inc"
    {nullptr, 0, 0}};

const Tolerance* calibrated(const std::string& op) {
  static const std::map<std::string, Tolerance> table = [] {
    std::map<std::string, Tolerance> m;
    for (const Calibrated& c : kCalibrated)
      if (c.name) m[c.name] = Tolerance{c.atol, c.rtol};
    return m;
  }();
  auto it = table.find(op);
  return it == table.end() ? nullptr : &it->second;
}

}  // namespace

Tolerance OpSpec::tolerance(DType dtype, const std::vector<TensorType>& data_in, const Attrs& a) const {
  Tolerance t = dtype == DType::F32 ? tol_f32 : tol_f64;
  if (dtype == DType::F32)
    if (const Tolerance* c = calibrated(name)) t = *c;
  if (dtype == DType::I64) return {0, 0};
  if (reduction_length) {
    const double scale = std::sqrt(static_cast<double>(std::max<int64_t>(1, reduction_length(data_in, a))));
    t.atol *= scale;
    t.rtol *= scale;
  }
  return t;
}

Tolerance backward_tolerance(Tolerance forward) { return {forward.atol * 10, forward.rtol * 10}; }

AttrSpec int_attr(std::string name, int64_t def, double lo, double hi, std::vector<AttrValue> invalid,
                  std::string doc) {
  return AttrSpec{std::move(name), AttrKind::Int, def, std::move(doc), {}, lo, hi, std::move(invalid)};
}
AttrSpec float_attr(std::string name, double def, double lo, double hi, std::vector<AttrValue> invalid,
                    std::string doc) {
  return AttrSpec{std::move(name), AttrKind::Float, def, std::move(doc), {}, lo, hi, std::move(invalid)};
}
AttrSpec ints_attr(std::string name, std::vector<int64_t> def, double lo, double hi,
                   std::vector<AttrValue> invalid, std::string doc) {
  return AttrSpec{std::move(name), AttrKind::Ints, std::move(def), std::move(doc), {}, lo, hi, std::move(invalid)};
}
AttrSpec enum_attr(std::string name, std::string def, std::vector<std::string> choices,
                   std::vector<std::string> invalid, std::string doc) {
  AttrSpec s{std::move(name), AttrKind::String, std::move(def), std::move(doc), {}, -kInf, kInf, {}};
  for (auto& c : choices) s.choices.emplace_back(std::move(c));
  for (auto& c : invalid) s.invalid.emplace_back(std::move(c));
  return s;
}
AttrSpec int_enum_attr(std::string name, int64_t def, std::vector<int64_t> choices, std::vector<int64_t> invalid,
                       std::string doc) {
  AttrSpec s{std::move(name), AttrKind::Int, def, std::move(doc), {}, -kInf, kInf, {}};
  for (auto c : choices) s.choices.emplace_back(c);
  for (auto c : invalid) s.invalid.emplace_back(c);
  return s;
}

namespace {
bool in_range(double v, const AttrSpec& s) { return v >= s.lo && v <= s.hi; }

std::string range_text(const AttrSpec& s) {
  auto f = [](double d) {
    if (std::isinf(d)) return std::string(d > 0 ? "inf" : "-inf");
    return core::to_string(AttrValue(d));
  };
  return "[" + f(s.lo) + ", " + f(s.hi) + "]";
}

void check_domain(const AttrSpec& s, const AttrValue& v) {
  if (!s.choices.empty()) {
    if (std::find(s.choices.begin(), s.choices.end(), v) == s.choices.end()) {
      std::string allowed;
      for (const auto& c : s.choices) allowed += (allowed.empty() ? "" : ", ") + core::to_string(c);
      throw core::OpError("attribute '" + s.name + "' value " + core::to_string(v) + " not one of " + allowed);
    }
    return;
  }
  auto bad = [&](double x) {
    throw core::OpError("attribute '" + s.name + "' value " + core::to_string(AttrValue(x)) + " outside " +
                        range_text(s));
  };
  switch (s.kind) {
    case AttrKind::Int:
      if (!in_range(static_cast<double>(std::get<int64_t>(v)), s)) bad(static_cast<double>(std::get<int64_t>(v)));
      break;
    case AttrKind::Float: {
      double x = std::get<double>(v);
      if (std::isnan(x) || !in_range(x, s)) bad(x);
      break;
    }
    case AttrKind::Ints:
      for (int64_t x : std::get<std::vector<int64_t>>(v))
        if (!in_range(static_cast<double>(x), s)) bad(static_cast<double>(x));
      break;
    case AttrKind::Floats:
      for (double x : std::get<std::vector<double>>(v))
        if (std::isnan(x) || !in_range(x, s)) bad(x);
      break;
    case AttrKind::String: break;
  }
}
}  // namespace

Attrs canonical_attrs(const OpSpec& spec, const Attrs& given, bool allow_invalid) {
  Attrs out;
  for (const auto& [name, value] : given) {
    const AttrSpec* s = spec.attr(name);
    if (!s) throw core::OpError("unknown attribute '" + name + "' for operator '" + spec.name + "'");
    AttrValue v = value;
    // JSON spells non-finite floats as strings.
    if (s->kind == AttrKind::Float && core::kind_of(v) == AttrKind::String) {
      const auto& t = std::get<std::string>(v);
      if (t == "nan") v = std::nan("");
      else if (t == "inf") v = kInf;
      else if (t == "-inf") v = -kInf;
    }
    if (s->kind == AttrKind::Float && core::kind_of(v) == AttrKind::Int)
      v = static_cast<double>(std::get<int64_t>(v));
    if (s->kind == AttrKind::Floats && core::kind_of(v) == AttrKind::Ints) {
      const auto& xs = std::get<std::vector<int64_t>>(v);
      v = std::vector<double>(xs.begin(), xs.end());
    }
    // An empty JSON list reads as ints; accept it for floats too.
    if (s->kind != core::kind_of(v))
      throw core::OpError("attribute '" + name + "' must be " + core::to_string(s->kind) + ", got " +
                          core::to_string(core::kind_of(v)) + " " + core::to_string(v));
    if (!allow_invalid) check_domain(*s, v);
    out[name] = std::move(v);
  }
  for (const auto& s : spec.attrs)
    if (!out.count(s.name)) out[s.name] = s.default_value;
  return out;
}

// ---- interval arithmetic for the range rules

namespace {

// A NaN bound (inf - inf, a function undefined there) widened to the side's infinity.
Interval widen_nan(double lo, double hi) {
  return Interval{std::isnan(lo) ? -kInf : lo, std::isnan(hi) ? kInf : hi};
}

// a * b with 0 * inf = 0: the limit of products of finite elements, one of them exactly 0.
double times(double a, double b) { return a == 0 || b == 0 ? 0.0 : a * b; }

double at_finite(const std::function<double(double)>& f, double x) {
  return f(std::clamp(x, -1e300, 1e300));
}

}  // namespace

Interval hull(const Interval& a, const Interval& b) { return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)}; }

Interval add(const Interval& a, const Interval& b) {
  // -inf + inf: one side unbounded below and the other above; the sum is unbounded on both.
  const double lo = a.lo == -kInf || b.lo == -kInf ? -kInf : a.lo + b.lo;
  const double hi = a.hi == kInf || b.hi == kInf ? kInf : a.hi + b.hi;
  return widen_nan(lo, hi);
}

Interval sub(const Interval& a, const Interval& b) { return add(a, Interval{-b.hi, -b.lo}); }

Interval mul(const Interval& a, const Interval& b) {
  const double p[4] = {times(a.lo, b.lo), times(a.lo, b.hi), times(a.hi, b.lo), times(a.hi, b.hi)};
  return widen_nan(*std::min_element(p, p + 4), *std::max_element(p, p + 4));
}

Interval div(const Interval& a, const Interval& b) {
  if (b.lo <= 0 && b.hi >= 0) return Interval{};
  return mul(a, Interval{1.0 / b.hi, 1.0 / b.lo});
}

Interval sum_of(const Interval& a, double terms) {
  if (terms <= 0) return Interval{0, 0};
  return widen_nan(times(a.lo, terms), times(a.hi, terms));
}

Interval increasing(const Interval& x, const std::function<double(double)>& f) {
  return widen_nan(at_finite(f, x.lo), at_finite(f, x.hi));
}

Interval decreasing(const Interval& x, const std::function<double(double)>& f) {
  return widen_nan(at_finite(f, x.hi), at_finite(f, x.lo));
}

Interval valley(const Interval& x, const std::function<double(double)>& f, double at, double min_value) {
  const double a = at_finite(f, x.lo), b = at_finite(f, x.hi);
  double lo = std::min(a, b);
  if (x.contains(at)) lo = min_value;
  return widen_nan(lo, std::isnan(a) || std::isnan(b) ? kInf : std::max(a, b));
}

std::vector<Interval> hull_of_inputs(const std::vector<Interval>& in, const std::vector<TensorType>&, const Attrs&) {
  Interval h{kInf, -kInf};
  for (const auto& i : in) h = hull(h, i);
  if (in.empty()) h = Interval{};
  return {h};
}

std::vector<Interval> hull_of_inputs_and_zero(const std::vector<Interval>& in, const std::vector<TensorType>& types,
                                              const Attrs& attrs) {
  return {hull(hull_of_inputs(in, types, attrs)[0], Interval{0, 0})};
}

}  // namespace quorum::ops
