// Shared pieces of the quantized operators (quant_util.h).
#include "ops/quant_util.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "core/error.h"
#include "ops/kernel_util.h"
#include "ops/onnx_map.h"

namespace quorum::ops {

std::vector<AttrSpec> quant_attrs(const std::string& prefix) {
  AttrSpec zp = int_attr(prefix + "zero_point", 0, -128, 255, {AttrValue(int64_t{256}), AttrValue(int64_t{-129})},
                         "zero point, a value of the quantized type");
  // A weight's zero point other than 0 (asymmetric weights) is its own path in libraries that assume symmetric
  // weights: a finding's signature says so (w_zero_point="given").
  if (prefix == "w_") zp = keyed_when_given(zp);
  return {float_attr(prefix + "scale", 1.0, FLT_MIN, FLT_MAX, {AttrValue(0.0), AttrValue(-1.0)},
                     "quantization scale (float32, > 0)"),
          zp};
}

std::vector<AttrSpec> per_channel_weight_attrs(const std::string& prefix) {
  const std::string channel =
      prefix == "w_" ? "output channel (ONNX's 1-D w_scale)" : "index of axis (ONNX's 1-D y_scale)";
  AttrSpec scales{prefix + "scales", AttrKind::Floats, AttrValue(std::vector<double>{}),
                  "[] (per tensor: " + prefix + "scale) or one float32 scale > 0 per " + channel,
                  {}, FLT_MIN, FLT_MAX,
                  {AttrValue(std::vector<double>{0.0}), AttrValue(std::vector<double>{-1.0})}};
  // A quantized bias's per-channel zero points (int32 zeros, DequantizeLinear of a QDQ convolution's bias) are
  // within these bounds too.
  AttrSpec zps{prefix + "zero_points", AttrKind::Ints, AttrValue(std::vector<int64_t>{}),
               "[] (" + prefix + "zero_point for every channel) or one zero point per channel (needs " + prefix +
                   "scales)",
               {}, -128, 255,
               {AttrValue(std::vector<int64_t>{256}), AttrValue(std::vector<int64_t>{-129})}};
  return {keyed_when_given(scales), keyed_when_given(zps)};
}

bool per_channel_weight(const Attrs& a, const std::string& prefix) {
  auto it = a.find(prefix + "scales");
  return it != a.end() && core::kind_of(it->second) == AttrKind::Floats &&
         !std::get<std::vector<double>>(it->second).empty();
}

namespace {
const std::vector<int64_t>& zero_point_list(const Attrs& a, const std::string& prefix) {
  static const std::vector<int64_t> none;
  auto it = a.find(prefix + "zero_points");
  if (it == a.end() || core::kind_of(it->second) != AttrKind::Ints) return none;
  return std::get<std::vector<int64_t>>(it->second);
}
}  // namespace

void check_weight_quant(const Attrs& a, DType type, int64_t channels, const std::string& prefix) {
  const std::string what = prefix == "w_" ? " output channels" : " indices of the axis";
  check_zero_point(a, prefix + "zero_point", type);
  const std::vector<int64_t>& zps = zero_point_list(a, prefix);
  if (!per_channel_weight(a, prefix)) {
    QUORUM_REQUIRE(zps.empty(), prefix + "zero_points needs " + prefix + "scales (per-channel parameters)");
    return;
  }
  const auto n = static_cast<int64_t>(core::attr_floats(a, prefix + "scales").size());
  QUORUM_REQUIRE(n == channels, prefix + "scales has " + std::to_string(n) + " scales for " +
                                    std::to_string(channels) + what);
  QUORUM_REQUIRE(zps.empty() || static_cast<int64_t>(zps.size()) == channels,
                 prefix + "zero_points has " + std::to_string(zps.size()) + " zero points for " +
                     std::to_string(channels) + what);
  for (int64_t z : zps)
    QUORUM_REQUIRE(core::representable(type, static_cast<double>(z)),
                   prefix + "zero_points value " + std::to_string(z) + " is not a " + core::to_string(type) + " value");
}

std::vector<double> weight_scales(const Attrs& a, int64_t channels, const std::string& prefix) {
  if (!per_channel_weight(a, prefix))
    return std::vector<double>(static_cast<size_t>(channels), quant_scale(a, prefix + "scale"));
  std::vector<double> s;
  for (double v : core::attr_floats(a, prefix + "scales")) s.push_back(static_cast<double>(static_cast<float>(v)));
  return s;
}

std::vector<double> weight_zero_points(const Attrs& a, int64_t channels, const std::string& prefix) {
  const std::vector<int64_t>& zps = zero_point_list(a, prefix);
  if (zps.empty())
    return std::vector<double>(static_cast<size_t>(channels),
                               static_cast<double>(core::attr_i(a, prefix + "zero_point")));
  return std::vector<double>(zps.begin(), zps.end());
}

bool draw_per_channel_weight(core::Rng& rng, Attrs& a, int64_t channels, const std::string& type,
                             const std::string& prefix) {
  if (channels < 2 || !rng.bernoulli(0.3)) return false;  // one channel is per tensor (as ONNX's import reads it)
  const double ws = core::attr_f(a, prefix + "scale");
  std::vector<double> scales;
  for (int64_t c = 0; c < channels; ++c) {
    double s = ws * std::exp2(rng.uniform(-2, 2));
    if (rng.bernoulli(0.1)) s *= std::exp2(static_cast<double>(rng.randint(6, 14) * (rng.bernoulli(0.5) ? 1 : -1)));
    scales.push_back(static_cast<float>(std::clamp(s, static_cast<double>(FLT_MIN), static_cast<double>(FLT_MAX))));
  }
  a[prefix + "scales"] = scales, a[prefix + "scale"] = scales[0];
  if (!rng.bernoulli(0.5)) return true;
  std::vector<int64_t> zps;
  for (int64_t c = 0; c < channels; ++c) zps.push_back(draw_zero_point(rng, type));
  if (std::all_of(zps.begin(), zps.end(), [&](int64_t z) { return z == zps[0]; })) zps[1] = zps[0] == 0 ? 1 : 0;
  a[prefix + "zero_points"] = zps, a[prefix + "zero_point"] = zps[0];
  return true;
}

AttrSpec quant_type_attr(const std::string& name) {
  return enum_attr(name, "int8", {"int8", "uint8"}, {"int4", "int16"}, "quantized type");
}

DType quant_dtype(const Attrs& a, const std::string& name) {
  return core::attr_s(a, name) == "uint8" ? DType::U8 : DType::I8;
}

void check_zero_point(const Attrs& a, const std::string& name, DType type) {
  const int64_t zp = core::attr_i(a, name);
  QUORUM_REQUIRE(core::representable(type, static_cast<double>(zp)),
                 name + " " + std::to_string(zp) + " is not a " + core::to_string(type) + " value");
}

double quant_scale(const Attrs& a, const std::string& name) {
  return static_cast<double>(static_cast<float>(core::attr_f(a, name)));
}

double requantize(double r, double zero_point, DType type) {
  if (std::isnan(r)) return r;
  const auto [lo, hi] = core::dtype_range(type);
  return std::clamp(std::nearbyint(r) + zero_point, lo, hi);
}

namespace {
bool float32_value(double v) { return std::isfinite(v) && static_cast<double>(static_cast<float>(v)) == v; }
}  // namespace

bool exact_in_float32(const std::vector<double>& factors, const std::vector<double>& divisors) {
  std::vector<double> terms;
  for (const double f : factors) {
    if (!float32_value(f)) return false;
    terms.push_back(f);
  }
  for (const double d : divisors) {
    if (!float32_value(d) || d == 0 || !float32_value(1 / d)) return false;
    int e = 0;
    if (std::frexp(std::abs(d), &e) != 0.5) return false;  // a power of two: its reciprocal is exact
    terms.push_back(1 / d);
  }
  // Each subset's product, from a smaller subset's (a float32 value) times one term: exact in float64.
  if (terms.size() > 8) return false;
  std::vector<double> product(size_t{1} << terms.size(), 1.0);
  for (size_t subset = 1; subset < product.size(); ++subset) {
    size_t top = 0;
    while ((subset >> (top + 1)) != 0) ++top;
    product[subset] = product[subset & ~(size_t{1} << top)] * terms[top];
    if (!float32_value(product[subset])) return false;
  }
  return true;
}

double real_to_round(const std::vector<double>& factors, const std::vector<double>& divisors, double stored_form) {
  if (!exact_in_float32(factors, divisors)) return stored_form;
  double r = 1;
  for (const double f : factors) r *= f;
  for (const double d : divisors) r /= d;
  return r;
}

double requant_multiplier(double a_scale, double b_scale, double y_scale) {
  return stored(stored(a_scale * b_scale) / y_scale);
}

double draw_scale(core::Rng& rng) {
  if (rng.bernoulli(1.0 / 3)) return std::exp2(static_cast<double>(rng.randint(-10, 0)));
  return static_cast<float>(std::exp2(rng.uniform(-10, 0)));
}

int64_t draw_zero_point(core::Rng& rng, const std::string& type) {
  const int64_t lo = type == "uint8" ? 0 : -128, hi = lo + 255;
  if (rng.bernoulli(0.25)) return rng.bernoulli(0.5) ? lo : hi;
  if (rng.bernoulli(0.3)) return type == "uint8" ? 128 : 0;
  return rng.randint(lo, hi);
}

void quantized_operator(OpSpec& s) {
  s.family = "quant";
  s.is_quantized = true;
  s.tags = {"quantized", "nondifferentiable"};
}

void quantized_output(OpSpec& s) {
  quantized_operator(s);
  s.tol_f32 = {0, 0};
  s.tol_f64 = {0, 0};
  s.range = [](const std::vector<Interval>&, const std::vector<TensorType>&, const Attrs& a) {
    const auto [lo, hi] = core::dtype_range(quant_dtype(a, "to"));
    return std::vector<Interval>{{lo, hi}};
  };
}

double draw_output_scale(core::Rng& rng, double x_scale, double w_scale, int64_t terms) {
  return static_cast<float>(x_scale * w_scale * 64 * std::sqrt(static_cast<double>(terms)) *
                            std::exp2(static_cast<double>(rng.randint(-3, 3))));
}

std::string weight_scale_constant(OnnxExport& e, const std::string& prefix) {
  if (!per_channel_weight(e.attrs(), prefix)) return scale_constant(e, e.af(prefix + "scale"), prefix + "scale");
  const std::vector<double>& s = core::attr_floats(e.attrs(), prefix + "scales");
  core::Tensor t(DType::F32, {static_cast<int64_t>(s.size())});
  for (size_t i = 0; i < s.size(); ++i) t.set(static_cast<int64_t>(i), s[i]);
  return e.constant(t, prefix + "scale");
}

std::string weight_zero_point_constant(OnnxExport& e, DType type, const std::string& prefix) {
  if (!per_channel_weight(e.attrs(), prefix))
    return zero_point_constant(e, e.ai(prefix + "zero_point"), type, prefix + "zero_point");
  const auto n = static_cast<int64_t>(core::attr_floats(e.attrs(), prefix + "scales").size());
  const std::vector<double> z = weight_zero_points(e.attrs(), n, prefix);
  core::Tensor t(type, {n});
  for (int64_t i = 0; i < n; ++i) t.set(i, z[static_cast<size_t>(i)]);
  return e.constant(t, prefix + "zero_point");
}

DType import_channel_params(OnnxImport& m, int i, const std::string& what, const std::string& prefix, Attrs& a) {
  const core::Tensor& s = m.need_constant(i, what + "_scale");
  if (s.numel() == 1) {
    const auto [scale, zp, type] = import_quant_params(m, i, what);
    a[prefix + "scale"] = scale, a[prefix + "zero_point"] = zp;
    return type;
  }
  if (s.rank() != 1) m.fail(what + "_scale must be a scalar or 1-D (per channel), it has shape " +
                            core::to_string(s.shape()));
  std::vector<double> scales;
  for (int64_t k = 0; k < s.numel(); ++k) scales.push_back(s.get(k));
  a[prefix + "scales"] = scales;
  a[prefix + "scale"] = scales[0];
  DType type = DType::U8;
  std::vector<int64_t> zps(scales.size(), 0);
  if (m.present(i + 1)) {
    const core::Tensor& z = m.need_constant(i + 1, what + "_zero_point");
    bool zeros = true;
    for (int64_t k = 0; k < z.numel(); ++k) zeros = zeros && z.get(k) == 0;
    // int32 zeros (read as int64, as every int32 initializer): a quantized bias's, as in import_quant_params
    const bool bias = (z.dtype() == DType::I32 || z.dtype() == DType::I64) && zeros;
    if (z.numel() != s.numel() || !(core::is_quantized(z.dtype()) || bias))
      m.fail(what + "_zero_point must be int8 or uint8 (or int32 zeros) with " + what + "_scale's shape");
    type = z.dtype();
    for (int64_t k = 0; k < z.numel(); ++k) zps[static_cast<size_t>(k)] = static_cast<int64_t>(z.get(k));
  }
  a[prefix + "zero_point"] = zps[0];
  if (std::any_of(zps.begin(), zps.end(), [&](int64_t z) { return z != zps[0]; })) a[prefix + "zero_points"] = zps;
  return type;
}

std::vector<std::string> qlinear_operands(OnnxExport& e, const std::string& x) {
  const DType w = quant_dtype(e.attrs(), "w_type"), to = quant_dtype(e.attrs(), "to");
  return {e.in(0),
          scale_constant(e, e.af(x + "scale"), x + "scale"),
          zero_point_constant(e, e.ai(x + "zero_point"), e.dtype(), x + "zero_point"),
          e.in(1),
          weight_scale_constant(e, "w_"),
          weight_zero_point_constant(e, w, "w_"),
          scale_constant(e, e.af("y_scale"), "y_scale"),
          zero_point_constant(e, e.ai("y_zero_point"), to, "y_zero_point")};
}

void import_qlinear_params(OnnxImport& m, const std::string& x, const std::string& w, Attrs& a) {
  const auto [xs, xzp, xt] = import_quant_params(m, 1, x.substr(0, x.size() - 1));
  const DType wt = import_channel_params(m, 4, w, "w_", a);
  if (!core::is_quantized(wt)) m.fail(w + "_zero_point must be int8 or uint8");
  a["w_type"] = core::to_string(wt);
  const auto [ys, yzp, yt] = import_quant_params(m, 6, "y");
  a[x + "scale"] = xs, a[x + "zero_point"] = xzp;
  a["y_scale"] = ys, a["y_zero_point"] = yzp, a["to"] = core::to_string(yt);
}

std::string scale_constant(OnnxExport& e, double scale, const std::string& what) {
  core::Tensor t(DType::F32, {});
  t.set(0, scale);
  return e.constant(t, what);
}

std::string zero_point_constant(OnnxExport& e, int64_t zp, DType type, const std::string& what) {
  core::Tensor t(type, {});
  t.set(0, static_cast<double>(zp));
  return e.constant(t, what);
}

std::tuple<double, int64_t, DType> import_quant_params(OnnxImport& m, int i, const std::string& what) {
  if (m.has("axis") && m.type_of(m.in(i)).shape.size() > 0 && core::numel(m.type_of(m.in(i)).shape) > 1)
    m.fail(what + ": per-axis scales are not in the catalogue");
  const core::Tensor& s = m.need_constant(i, what + "_scale");
  if (s.numel() != 1)
    m.fail(what + "_scale must be one value (per tensor), it has shape " + core::to_string(s.shape()));
  const double scale = s.get(0);
  if (!m.present(i + 1)) return {scale, 0, DType::U8};
  const core::Tensor& z = m.need_constant(i + 1, what + "_zero_point");
  // int32 (read as int64, as every int32 initializer): a quantized bias's zero point 0, DequantizeLinear of a QDQ
  // convolution's bias
  const bool bias = (z.dtype() == DType::I32 || z.dtype() == DType::I64) && z.numel() == 1 && z.get(0) == 0;
  if (z.numel() != 1 || !(core::is_quantized(z.dtype()) || bias))
    m.fail(what + "_zero_point must be one int8 or uint8 value (or an int32 0)");
  return {scale, static_cast<int64_t>(z.get(0)), z.dtype()};
}

}  // namespace quorum::ops
