// Normalisation operators: batch_norm (stored or batch statistics), layer_norm (ONNX
// LayerNormalization) and lrn (ONNX LRN across channels).
// batch_norm in training mode and layer_norm share one backward: with xhat = (x - mu) * rstd over a
// group of m values (biased variance), dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
#include <algorithm>
#include <cmath>

#include "ops/kernel_util.h"
#include "ops/onnx_map.h"
#include "ops/registry.h"

namespace quorum::ops {
namespace {

// The smallest epsilon the domain accepts: epsilon must be strictly positive so that a zero
// variance never reaches the square root.
constexpr double kEpsLo = 1e-12;

AttrSpec epsilon_attr() {
  return float_attr("epsilon", 1e-5, kEpsLo, kInf, {AttrValue(-1.0), AttrValue(0.0)},
                    "added to the variance under the square root (> 0)");
}

double sample_epsilon(core::Rng& rng) { return rng.pick(std::vector<double>{1e-5, 1e-3, 1e-2, 0.1}); }

// Mean and reciprocal standard deviation (biased variance) of one group of values.
struct GroupStats {
  double mean = 0, rstd = 0;
};

GroupStats group_stats(const double* x, const std::vector<int64_t>& idx, double eps) {
  const double m = static_cast<double>(idx.size());
  // The mean, variance and rstd are rounded as a float32 implementation stores them. The mean's sum
  // is a statistic (ops::statistic_sum): trials move it by its rounding error, which for a constant
  // row adds up and the operands' independent perturbation does not cover. The variance is a
  // statistic too: float32 moment formulas (E[x^2] - E[x]^2, or running moments around a large
  // mean) lose whatever is below the rounding of the squares, so values of 2e6 that differ by 0.25
  // may have a float32 variance of 0 (implementations clamp a negative one to 0): the trials that
  // move statistics take up to that much off it. rstd's rounding error the perturbation covers.
  const auto terms = static_cast<int64_t>(idx.size());
  double sum = 0, magnitude = 0, squares = 0;
  for (int64_t i : idx) sum += x[i], magnitude += std::abs(x[i]), squares += x[i] * x[i];
  const double mean = rounded(statistic_sum(sum, magnitude, terms) / m);
  double var = 0;
  for (int64_t i : idx) var += (x[i] - mean) * (x[i] - mean);
  var = rounded(std::max(0.0, var - std::abs(statistic_sum(0.0, squares, terms))) / m);
  return {mean, rounded(1.0 / std::sqrt(var + eps))};
}

// The normalised value (x - mean) * rstd, marked stored with the magnitude (|x| + |mean|) * rstd:
// float32 implementations that compute it as x * rstd - mean * rstd (libtorch) round each product,
// so a row of equal large values gives a few units of x * rstd, not 0.
double normalized(double x, const GroupStats& s) {
  return stored_sum((x - s.mean) * s.rstd, (std::abs(x) + std::abs(s.mean)) * s.rstd, 2);
}

// The magnitude of the sums of raw values a float32 normalisation backward holds over one group:
// libtorch sums dy * x and multiplies sum(dy) by the mean, oneDNN sums dy * (x - mean), where the
// catalogue sums dy * xhat. With large values and gradients (x ~ 1e12, dy ~ 1e30) they overflow
// float32 although the gradients fit (ops::float32_range).
double raw_magnitude(const double* x, const double* dy, const std::vector<int64_t>& idx, const GroupStats& s) {
  double m = 0;
  for (int64_t i : idx) m += std::abs(dy[i]) * (std::abs(x[i]) + std::abs(s.mean));
  return m;
}

// The backward of xhat = (x - mean(x)) * rstd(x) over one group, given dL/dxhat; accumulates dL/dx.
// dL/dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) is a sum whose terms cancel
// (exactly, for a one-element group); float32 implementations that expand it (libtorch:
// rstd * dy * scale + b * x + c) keep a rounding error of the terms' size, so it is a stored sum.
void group_backward(const double* x, const double* dxhat, const std::vector<int64_t>& idx, const GroupStats& s,
                    double* dx) {
  const double m = static_cast<double>(idx.size());
  const auto terms = static_cast<int64_t>(idx.size());
  std::vector<double> xh(idx.size());
  double mean_d = 0, mean_dx = 0, mag_d = 0, mag_dx = 0;
  for (size_t j = 0; j < idx.size(); ++j) {
    const int64_t i = idx[j];
    xh[j] = normalized(x[i], s);
    mean_d += dxhat[i];
    mean_dx += dxhat[i] * xh[j];
    mag_d += std::abs(dxhat[i]);
    mag_dx += std::abs(dxhat[i] * xh[j]);
  }
  mean_d = stored_sum(mean_d / m, mag_d / m, terms);
  const double raw = raw_magnitude(x, dxhat, idx, s);
  // libtorch's layer_norm multiplies that raw sum by rstd three times ((db * mean - ds) * a * a * a / N)
  // before dividing by N, in float32: with rstd up to 1/sqrt(eps) the product overflows where the
  // gradient fits (batch_norm's own order: batch_norm_vjp).
  mean_dx = stored_sum(mean_dx / m, mag_dx / m, terms) + float32_range(raw) +
            float32_range(raw * s.rstd * s.rstd * std::max(1.0, s.rstd));
  for (size_t j = 0; j < idx.size(); ++j) {
    const int64_t i = idx[j];
    // Each element's term multiplies that raw sum by its own x (libtorch: b * x) or x - mean
    // (oneDNN: (x - mean) * diff_gamma) before the small factors rstd^2 / N: 2e6 * 2.7e38 overflows.
    dx[i] += stored_sum(s.rstd * (dxhat[i] - mean_d - xh[j] * mean_dx),
                        s.rstd * (std::abs(dxhat[i]) + std::abs(mean_d) + std::abs(xh[j] * mean_dx)), 3) +
             float32_range(raw * (std::abs(x[i]) + std::abs(s.mean)));
  }
}

// ---- the float32 evaluation (ops::Float32Evaluation) of a normalisation's forward ------------------
// The libraries' own float32 formula, not the catalogue's: the group's mean and (two-pass, biased)
// variance summed in order in float32, rstd = 1 / sqrt(var + epsilon), and the affine map applied as they
// apply it. batch_norm folds it (libtorch, oneDNN, OpenCV, ArmNN: a = scale * rstd, b = bias - mean * a,
// y = x * a + b); layer_norm normalises first (libtorch: xhat = x * rstd + (-mean * rstd), y = xhat * scale +
// bias). Each product-and-sum is rounded twice (in order) or once (fused). So a folded factor past FLT_MAX
// gives the library's inf, and its NaN where x * a = inf meets b = -inf, although the float64 result fits.
// The statistics' marks (group_stats) stay on the float64 kernel: a library's Welford or vectorised moments
// round otherwise than this one order does, and the trials cover that.
struct Float32Stats {
  float mean = 0, rstd = 0;
};

Float32Stats float32_stats(const double* x, const std::vector<int64_t>& idx, double eps) {
  const auto m = static_cast<float>(idx.size());
  float sum = 0;
  for (int64_t i : idx) sum += static_cast<float>(x[i]);
  const float mean = sum / m;
  float var = 0;
  for (int64_t i : idx) {
    const float d = static_cast<float>(x[i]) - mean;
    var += d * d;
  }
  return {mean, 1.0f / std::sqrt(var / m + static_cast<float>(eps))};
}

float multiply_add(float a, float b, float c, bool fused) { return fused ? std::fma(a, b, c) : a * b + c; }

// ---- batch_norm ----------------------------------------------------------------------------------

int64_t spatial_size(const Shape& s) {
  int64_t n = 1;
  for (size_t d = 2; d < s.size(); ++d) n *= s[d];
  return n;
}

// Flat indices of every element of channel c in an [N, C, ...] tensor.
std::vector<int64_t> channel_indices(const Shape& s, int64_t c) {
  const int64_t n = s[0], ch = s[1], sp = spatial_size(s);
  std::vector<int64_t> idx;
  idx.reserve(static_cast<size_t>(n * sp));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < sp; ++k) idx.push_back((b * ch + c) * sp + k);
  return idx;
}

// The statistics channel c is normalised with: the stored mean/var, or the batch's own.
GroupStats bn_stats(const Inputs& in, const Attrs& a, int64_t c, const std::vector<int64_t>& idx) {
  const double eps = core::attr_f(a, "epsilon");
  if (core::attr_i(a, "training") == 1) return group_stats(in[0]->f64(), idx, eps);
  return {in[3]->f64()[c], 1.0 / std::sqrt(in[4]->f64()[c] + eps)};
}

Signature batch_norm_infer(const std::vector<TensorType>& in, const Attrs& a) {
  const DType dt = common_float_dtype(in);
  const Shape& s = in[0].shape;
  QUORUM_REQUIRE(s.size() >= 2 && s.size() <= 5,
                 "batch_norm expects X [N, C, ...] of rank 2 to 5, got rank " + std::to_string(s.size()));
  QUORUM_REQUIRE(s[0] >= 1 && s[1] >= 1 && spatial_size(s) >= 1, "batch_norm needs at least one value per channel");
  // With one value per channel the batch variance is 0 and the output is just the bias; PyTorch
  // rejects this, so the catalogue does too.
  if (core::attr_i(a, "training") == 1)
    QUORUM_REQUIRE(s[0] * spatial_size(s) > 1, "batch_norm in training mode needs more than one value per channel");
  const TensorType p{dt, {s[1]}};
  return Signature{
      {in[0]},
      {{"scale", p, Init::Ones}, {"bias", p, Init::Zeros}, {"mean", p, Init::Zeros}, {"var", p, Init::Positive}}};
}

// batch_norm in float32, folded (the evaluation above).
std::vector<Tensor> batch_norm_float32(const Inputs& in, const Attrs& a, bool fused) {
  const Tensor& x = *in[0];
  const double eps = core::attr_f(a, "epsilon");
  Tensor y(DType::F64, x.shape());
  for (int64_t c = 0; c < x.dim(1); ++c) {
    const auto idx = channel_indices(x.shape(), c);
    const Float32Stats s =
        core::attr_i(a, "training") == 1
            ? float32_stats(x.f64(), idx, eps)
            : Float32Stats{static_cast<float>(in[3]->f64()[c]),
                           1.0f / std::sqrt(static_cast<float>(in[4]->f64()[c]) + static_cast<float>(eps))};
    const float fold = static_cast<float>(in[1]->f64()[c]) * s.rstd;
    const float shift = multiply_add(-s.mean, fold, static_cast<float>(in[2]->f64()[c]), fused);
    for (int64_t i : idx)
      y.f64()[i] = static_cast<double>(multiply_add(static_cast<float>(x.f64()[i]), fold, shift, fused));
  }
  return {y};
}

std::vector<Tensor> batch_norm_forward(const Inputs& in, const Attrs& a) {
  if (const std::optional<Float32Order> order = float32_evaluation())
    return batch_norm_float32(in, a, *order == Float32Order::kFused);
  const Tensor& x = *in[0];
  const double* scale = in[1]->f64();
  const double* bias = in[2]->f64();
  Tensor y(DType::F64, x.shape());
  for (int64_t c = 0; c < x.dim(1); ++c) {
    const auto idx = channel_indices(x.shape(), c);
    const GroupStats s = bn_stats(in, a, c, idx);
    // Implementations fold the statistics into one affine map (oneDNN, OpenCV, ArmNN: y = x * a + b with
    // a = scale * rstd, b = bias - mean * a): a, x * a and mean * a overflow float32 where the normalised value
    // times scale fits (scale 1e30 and var 1e-20: a = 1e40), so the result there may be inf or NaN.
    // The mark also bounds the unfolded product scale * xhat (libtorch), |xhat| <= rstd * (|x| + |mean|)
    // whatever the statistics' rounding, so its float32 overflow is in the spread too (unlike layer_norm's).
    const double fold = std::abs(scale[c]) * s.rstd;
    for (int64_t i : idx)
      y.f64()[i] = scale[c] * normalized(x.f64()[i], s) + bias[c] +
                   float32_range(fold * std::max(1.0, std::abs(x.f64()[i]) + std::abs(s.mean)));
  }
  return {y};
}

// batch_norm's backward in training mode in float32, as libtorch writes it: per channel sum = sum(dy),
// dotp = sum(dy * (x - mean)), k = dotp * invstd^2 / N, dx = (dy - sum / N - (x - mean) * k) * invstd * scale,
// dscale = dotp * invstd, dbias = sum. The unscaled (dy - mean(dy)) * invstd overflows before the scale where dx
// fits (seed 14201: 15 zeros, so var 0 and invstd 316, dy 6e37: libtorch's +-inf). The stored statistics get
// no gradient in this mode.
std::vector<Tensor> batch_norm_training_vjp_float32(const Inputs& in, const Attrs& a, const Tensor& gy, bool fused) {
  const Tensor& x = *in[0];
  const Shape cs{x.dim(1)};
  Tensor gx(DType::F64, x.shape()), gscale(DType::F64, cs), gbias(DType::F64, cs), gmean(DType::F64, cs),
      gvar(DType::F64, cs);
  for (int64_t c = 0; c < x.dim(1); ++c) {
    const auto idx = channel_indices(x.shape(), c);
    const Float32Stats s = float32_stats(x.f64(), idx, core::attr_f(a, "epsilon"));
    float sum = 0, dotp = 0;
    for (int64_t i : idx) {
      const auto dy = static_cast<float>(gy.f64()[i]);
      sum += dy;
      dotp = multiply_add(dy, static_cast<float>(x.f64()[i]) - s.mean, dotp, fused);
    }
    const auto n = static_cast<float>(idx.size());
    const float k = dotp * s.rstd * s.rstd / n, mean_dy = sum / n, w = static_cast<float>(in[1]->f64()[c]);
    for (int64_t i : idx) {
      const float centred = static_cast<float>(gy.f64()[i]) - mean_dy;
      const float d = multiply_add(-(static_cast<float>(x.f64()[i]) - s.mean), k, centred, fused);
      gx.f64()[i] = static_cast<double>(d * s.rstd * w);
    }
    gscale.f64()[c] = static_cast<double>(dotp * s.rstd);
    gbias.f64()[c] = static_cast<double>(sum);
  }
  return {gx, gscale, gbias, gmean, gvar};
}

std::vector<Tensor> batch_norm_vjp(const Inputs& in, const Attrs& a, const std::vector<Tensor>&,
                                   const std::vector<Tensor>& g) {
  if (const std::optional<Float32Order> order = float32_evaluation())
    if (core::attr_i(a, "training") == 1)
      return batch_norm_training_vjp_float32(in, a, g[0], *order == Float32Order::kFused);
  const Tensor& x = *in[0];
  const double* xp = x.f64();
  const double* scale = in[1]->f64();
  const double* gy = g[0].f64();
  const bool training = core::attr_i(a, "training") == 1;
  const Shape cs{x.dim(1)};
  Tensor gx(DType::F64, x.shape()), gscale(DType::F64, cs), gbias(DType::F64, cs), gmean(DType::F64, cs),
      gvar(DType::F64, cs);
  Tensor dxhat(DType::F64, x.shape());
  for (int64_t c = 0; c < x.dim(1); ++c) {
    const auto idx = channel_indices(x.shape(), c);
    const GroupStats s = bn_stats(in, a, c, idx);
    for (int64_t i : idx) {
      const double xh = normalized(xp[i], s);
      gscale.f64()[c] += gy[i] * xh;
      gbias.f64()[c] += gy[i];
      dxhat.f64()[i] = gy[i] * scale[c];
    }
    // libtorch (either mode) and oneDNN sum dy * (x - mean) before multiplying by rstd: that raw dot overflows
    // float32 where the gradient fits (seed 9941: var FLT_MAX, dy 1.6e38, x - mean -9137: -inf for -7.8e22).
    const double raw_overflow = float32_range(raw_magnitude(xp, gy, idx, s));
    gscale.f64()[c] += raw_overflow;
    if (training) {
      // The statistics depend on x; the stored mean/var are unused, so their gradient stays 0.
      group_backward(xp, dxhat.f64(), idx, s, gx.f64());
      // libtorch computes k = dotp * invstd * invstd / N in float32 from the unscaled gradient (dotp =
      // sum(dy * (x - mean))) and multiplies by the scale last: with rstd^2 near 1/eps and dy near 1e37
      // the product overflows where the gradient fits (seed 9833: a scale of 1e-45, every element NaN).
      const double k_overflow = float32_range(raw_magnitude(xp, gy, idx, s) * s.rstd * s.rstd);
      for (int64_t i : idx) gx.f64()[i] += k_overflow;
    } else {
      // Implementations fold scale * rstd into one factor (oneDNN) or multiply gy by the scale first
      // (libtorch): either overflows float32 where the gradient fits (scale FLT_MAX, var 0.82: the
      // fold is 3.7e38, and a channel's gradient inf, or NaN where gy is 0).
      for (int64_t i : idx) {
        const double d = dxhat.f64()[i];
        gx.f64()[i] = d * s.rstd + float32_range(std::abs(scale[c]) * std::max(s.rstd, std::abs(gy[i])));
        gmean.f64()[c] -= d * s.rstd;
        // d rstd / d var = -rstd^3 / 2.
        gvar.f64()[c] += d * (xp[i] - s.mean) * -0.5 * s.rstd * s.rstd * s.rstd;
      }
      gvar.f64()[c] += raw_overflow;
    }
  }
  return {gx, gscale, gbias, gmean, gvar};
}

// A value normalised by its own statistics over n elements (biased variance, epsilon >= 0) lies in
// [-sqrt(n-1), sqrt(n-1)]; then scale and bias.
Interval normalised_range(int64_t n, const Interval& scale, const Interval& bias) {
  const double r = std::sqrt(static_cast<double>(std::max<int64_t>(n, 1) - 1));
  return add(mul(Interval{-r, r}, scale), bias);
}

OpSpec batch_norm_spec() {
  OpSpec s;
  s.name = "batch_norm";
  s.family = "norm";
  s.doc =
      "y = scale*(x-mean)/sqrt(var+epsilon)+bias per channel of X [N, C, ...]; training=1 normalises with the "
      "batch statistics over N and the spatial dims (biased variance) and ignores the mean/var params";
  s.mixes_batch = [](const std::vector<TensorType>&, const Attrs& a) { return core::attr_i(a, "training") == 1; };
  s.attrs = {epsilon_attr(), int_enum_attr("training", 0, {0, 1}, {2, -1}, "0: stored mean/var; 1: batch statistics")};
  s.infer = batch_norm_infer;
  s.forward = batch_norm_forward;
  s.vjp = batch_norm_vjp;
  s.float32_orders = {Float32Order::kInOrder, Float32Order::kFused};
  s.reduction_length = [](const std::vector<TensorType>& in, const Attrs& a) -> int64_t {
    return core::attr_i(a, "training") == 1 ? in[0].shape[0] * spatial_size(in[0].shape) : 1;
  };
  s.valid_ranges = {ValidRange{4, 0, kInf, true, false, "var + epsilon <= 0 puts a non-positive value under sqrt"}};
  s.tags = {"norm", "vulnerable", "squares"};
  // Inputs x, scale, bias, mean, var. Stored statistics: the interval arithmetic of the formula
  // (unbounded once var + epsilon may reach 0); batch statistics: normalised_range.
  s.range = [](const std::vector<Interval>& in, const std::vector<TensorType>& t, const Attrs& a) {
    if (core::attr_i(a, "training") == 1)
      return std::vector<Interval>{normalised_range(t[0].shape[0] * spatial_size(t[0].shape), in[1], in[2])};
    const double eps = core::attr_f(a, "epsilon");
    const Interval sd = increasing(add(in[4], Interval{eps, eps}), [](double v) { return std::sqrt(v); });
    return std::vector<Interval>{add(mul(in[1], div(sub(in[0], in[3]), sd)), in[2])};
  };
  s.sample = [](core::Rng& rng) {
    Case c;
    const int rank = static_cast<int>(rng.randint(2, 5));
    Shape shape{rng.randint(1, 2), rng.randint(1, 4)};
    // Higher ranks get smaller spatial extents so the tensor stays small.
    const int64_t hi = rank <= 3 ? 7 : rank == 4 ? 5 : 3;
    for (int d = 2; d < rank; ++d) shape.push_back(rng.randint(2, hi));
    const bool training = rng.bernoulli(0.5);
    if (training && rank == 2 && shape[0] == 1) shape[0] = 2;  // more than one value per channel
    c.inputs = {f64t(shape)};
    c.attrs["epsilon"] = sample_epsilon(rng);
    c.attrs["training"] = int64_t{training ? 1 : 0};
    return c;
  };
  return s;
}

// ---- layer_norm ----------------------------------------------------------------------------------

// Rows (the leading dims before axis) and their length K (the product of dims axis..end).
std::pair<int64_t, int64_t> ln_split(const Shape& s, int axis) {
  int64_t rows = 1, k = 1;
  for (int d = 0; d < static_cast<int>(s.size()); ++d) (d < axis ? rows : k) *= s[static_cast<size_t>(d)];
  return {rows, k};
}

std::vector<int64_t> row_indices(int64_t row, int64_t k) {
  std::vector<int64_t> idx(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) idx[static_cast<size_t>(j)] = row * k + j;
  return idx;
}

int ln_axis(const Shape& s, const Attrs& a) { return norm_axis(core::attr_i(a, "axis"), static_cast<int>(s.size())); }

Signature layer_norm_infer(const std::vector<TensorType>& in, const Attrs& a) {
  const DType dt = common_float_dtype(in);
  const Shape& s = in[0].shape;
  QUORUM_REQUIRE(s.size() >= 2, "layer_norm expects X of rank >= 2, got rank " + std::to_string(s.size()));
  const int axis = ln_axis(s, a);
  QUORUM_REQUIRE(ln_split(s, axis).second >= 1, "layer_norm over an empty slice");
  const TensorType p{dt, Shape(s.begin() + axis, s.end())};
  return Signature{{in[0]}, {{"scale", p, Init::Ones}, {"bias", p, Init::Zeros}}};
}

// layer_norm in float32, normalised first (the evaluation above).
std::vector<Tensor> layer_norm_float32(const Inputs& in, const Attrs& a, bool fused) {
  const Tensor& x = *in[0];
  const auto [rows, k] = ln_split(x.shape(), ln_axis(x.shape(), a));
  Tensor y(DType::F64, x.shape());
  for (int64_t r = 0; r < rows; ++r) {
    const Float32Stats s = float32_stats(x.f64(), row_indices(r, k), core::attr_f(a, "epsilon"));
    for (int64_t j = 0; j < k; ++j) {
      const int64_t i = r * k + j;
      const float xhat = multiply_add(static_cast<float>(x.f64()[i]), s.rstd, -s.mean * s.rstd, fused);
      y.f64()[i] = static_cast<double>(
          multiply_add(xhat, static_cast<float>(in[1]->f64()[j]), static_cast<float>(in[2]->f64()[j]), fused));
    }
  }
  return {y};
}

std::vector<Tensor> layer_norm_forward(const Inputs& in, const Attrs& a) {
  if (const std::optional<Float32Order> order = float32_evaluation())
    return layer_norm_float32(in, a, *order == Float32Order::kFused);
  const Tensor& x = *in[0];
  const double* scale = in[1]->f64();
  const double* bias = in[2]->f64();
  const double eps = core::attr_f(a, "epsilon");
  const auto [rows, k] = ln_split(x.shape(), ln_axis(x.shape(), a));
  Tensor y(DType::F64, x.shape());
  for (int64_t r = 0; r < rows; ++r) {
    const auto idx = row_indices(r, k);
    const GroupStats s = group_stats(x.f64(), idx, eps);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t i = r * k + j;
      // The affine step is float32 arithmetic (ops::rounded): the product scale * xhat, and its sum
      // with the bias, overflow float32 where the normalised value a float32 statistic gives (a
      // constant row's xhat a few units off 0) times a large scale leaves its range (FLT_MAX * 40).
      y.f64()[i] = rounded(rounded(scale[j] * normalized(x.f64()[i], s)) + bias[j]);
    }
  }
  return {y};
}

// layer_norm's backward in float32, in libtorch's order: per row, with dyg = dy * scale, ds = sum(dyg * x),
// db = sum(dyg), b = (db * mean - ds) * rstd * rstd * rstd / N, c = -b * mean - db * rstd / N and
// dx = rstd * dyg + b * x + c; dscale += dy * (rstd * x - rstd * mean), dbias += dy. The raw sum times rstd three
// times overflows where dx fits (x = {0, 2e-3}, dy = {1e36, -1e36}: libtorch's NaN, the float64 gradient
// +-2.74e38).
std::vector<Tensor> layer_norm_vjp_float32(const Inputs& in, const Attrs& a, const Tensor& gy, bool fused) {
  const Tensor& x = *in[0];
  const auto [rows, k] = ln_split(x.shape(), ln_axis(x.shape(), a));
  Tensor gx(DType::F64, x.shape());
  std::vector<float> gscale(static_cast<size_t>(k), 0.0f), gbias(static_cast<size_t>(k), 0.0f);
  const auto at = [](const Tensor& t, int64_t i) { return static_cast<float>(t.f64()[i]); };
  const float inv_n = 1.0f / static_cast<float>(k);
  std::vector<float> dyg(static_cast<size_t>(k));  // the row's dy * scale
  for (int64_t r = 0; r < rows; ++r) {
    const Float32Stats s = float32_stats(x.f64(), row_indices(r, k), core::attr_f(a, "epsilon"));
    float ds = 0, db = 0;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t i = r * k + j;
      const auto jj = static_cast<size_t>(j);
      dyg[jj] = at(gy, i) * at(*in[1], j);
      ds = multiply_add(dyg[jj], at(x, i), ds, fused);
      db += dyg[jj];
    }
    const float b = (db * s.mean - ds) * s.rstd * s.rstd * s.rstd * inv_n;
    const float c = -b * s.mean - db * s.rstd * inv_n;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t i = r * k + j;
      const auto jj = static_cast<size_t>(j);
      gx.f64()[i] = static_cast<double>(multiply_add(b, at(x, i), s.rstd * dyg[jj], fused) + c);
      gscale[jj] = multiply_add(at(gy, i), multiply_add(s.rstd, at(x, i), -s.rstd * s.mean, fused), gscale[jj], fused);
      gbias[jj] += at(gy, i);
    }
  }
  return {gx, widened(gscale, in[1]->shape()), widened(gbias, in[2]->shape())};
}

std::vector<Tensor> layer_norm_vjp(const Inputs& in, const Attrs& a, const std::vector<Tensor>&,
                                   const std::vector<Tensor>& g) {
  if (const std::optional<Float32Order> order = float32_evaluation())
    return layer_norm_vjp_float32(in, a, g[0], *order == Float32Order::kFused);
  const Tensor& x = *in[0];
  const double* xp = x.f64();
  const double* scale = in[1]->f64();
  const double* gy = g[0].f64();
  const double eps = core::attr_f(a, "epsilon");
  const auto [rows, k] = ln_split(x.shape(), ln_axis(x.shape(), a));
  Tensor gx(DType::F64, x.shape()), dxhat(DType::F64, x.shape());
  Tensor gscale(DType::F64, in[1]->shape()), gbias(DType::F64, in[2]->shape());
  for (int64_t r = 0; r < rows; ++r) {
    const auto idx = row_indices(r, k);
    const GroupStats s = group_stats(xp, idx, eps);
    const double raw = float32_range(raw_magnitude(xp, gy, idx, s));
    for (int64_t j = 0; j < k; ++j) {
      const int64_t i = r * k + j;
      gscale.f64()[j] += gy[i] * normalized(xp[i], s) + raw;
      gbias.f64()[j] += gy[i];
      dxhat.f64()[i] = gy[i] * scale[j];
    }
    group_backward(xp, dxhat.f64(), idx, s, gx.f64());
  }
  return {gx, gscale, gbias};
}

OpSpec layer_norm_spec() {
  OpSpec s;
  s.name = "layer_norm";
  s.family = "norm";
  s.doc =
      "ONNX LayerNormalization: normalise over dims axis..end (biased variance), then scale and bias shaped "
      "X.shape[axis:]";
  s.mixes_batch = [](const std::vector<TensorType>& in, const Attrs& a) { return ln_axis(in[0].shape, a) == 0; };
  s.attrs = {int_attr("axis", -1, -kInf, kInf, {AttrValue(int64_t{10}), AttrValue(int64_t{-10})},
                      "first normalised dim; dims axis..end are normalised (negative counts from the end)"),
             epsilon_attr()};
  s.infer = layer_norm_infer;
  s.forward = layer_norm_forward;
  s.vjp = layer_norm_vjp;
  s.float32_orders = {Float32Order::kInOrder, Float32Order::kFused};
  s.reduction_length = [](const std::vector<TensorType>& in, const Attrs& a) -> int64_t {
    return ln_split(in[0].shape, ln_axis(in[0].shape, a)).second;
  };
  s.tags = {"norm", "squares"};
  s.range = [](const std::vector<Interval>& in, const std::vector<TensorType>& t, const Attrs& a) {
    return std::vector<Interval>{normalised_range(ln_split(t[0].shape, ln_axis(t[0].shape, a)).second, in[1], in[2])};
  };
  s.sample = [](core::Rng& rng) {
    Case c;
    const int rank = static_cast<int>(rng.randint(2, 4));
    c.inputs = {f64t(random_shape(rng, rank, 1, 5))};
    // Mostly the common trailing-dims forms; axis 0 (normalise everything) now and then.
    const int64_t first = rng.bernoulli(0.15) ? 0 : rng.randint(1, rank - 1);
    c.attrs["axis"] = rng.bernoulli(0.5) ? first : first - rank;
    c.attrs["epsilon"] = sample_epsilon(rng);
    return c;
  };
  // Generators normalise past the batch axis (an axis of 0 would mix the batch).
  s.fit_attrs = [](const Shape& x, core::Rng& rng, int, Attrs& a) {
    const auto rank = static_cast<int64_t>(x.size());
    if (rank >= 2)
      a["axis"] = maybe_negative(rng, rng.randint(1, rank - 1), rank);
    else if (rank == 1)
      a["axis"] = maybe_negative(rng, 0, rank);
  };
  return s;
}

// ---- lrn -----------------------------------------------------------------------------------------

struct LrnGeom {
  int64_t n, c, sp;            // batch, channels, H*W
  int64_t before, after;       // window is [ch - before, ch + after], clipped to the channels
  double alpha_n, beta, bias;  // alpha_n = alpha / size
};

LrnGeom lrn_geom(const Shape& s, const Attrs& a) {
  const int64_t size = core::attr_i(a, "size");
  return {s[0],
          s[1],
          s[2] * s[3],
          (size - 1) / 2,
          size - 1 - (size - 1) / 2,
          core::attr_f(a, "alpha") / static_cast<double>(size),
          core::attr_f(a, "beta"),
          core::attr_f(a, "bias")};
}

// The denominator base d = bias + alpha/size * (sum of squares over the channel window), a stored sum of
// the window's own squares. An implementation that slides the sum along the channel axis as a running
// sum (the entering square added, the leaving one subtracted) carries the rounding of squares outside
// the window: a 1e4 two channels before moves a 0.5 by 8 % (OpenCV), and from 1e6 the sum cancels to
// inf or NaN (ONNX Runtime). That is no rounding of this formula, so it is judged (ledger entries
// ort-lrn-running-sum, opencv-lrn-running-sum; the position relation found it).
Tensor lrn_base(const Tensor& x, const LrnGeom& g) {
  Tensor d(DType::F64, x.shape());
  const double* xp = x.f64();
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t k = 0; k < g.sp; ++k)
      for (int64_t ch = 0; ch < g.c; ++ch) {
        double sum = 0;
        const int64_t from = std::max<int64_t>(0, ch - g.before), to = std::min(g.c - 1, ch + g.after);
        for (int64_t j = from; j <= to; ++j) {
          const double v = xp[(b * g.c + j) * g.sp + k];
          sum += v * v;
        }
        d.f64()[(b * g.c + ch) * g.sp + k] = g.bias + g.alpha_n * stored_sum(sum, sum, to - from + 1);
      }
  return d;
}

// d^e as float32 implementations compute it, exp(e * log d) with log d held in float32: the
// result's relative error grows with |log d| (OpenCV's LRN measured 3.3e-6 at d = 2.1e23, beta 0.52,
// 1.4e-6 at 2.1e9, 1e-8 near d = 1).
double lrn_power(double d, double e) { return std::exp(e * stored(std::log(d))); }

Signature lrn_infer(const std::vector<TensorType>& in, const Attrs&) {
  common_float_dtype(in);
  QUORUM_REQUIRE(in[0].shape.size() == 4, "lrn expects X [N, C, H, W], got rank " + std::to_string(in[0].shape.size()));
  return Signature{{in[0]}, {}};
}

std::vector<Tensor> lrn_forward(const Inputs& in, const Attrs& a) {
  const Tensor& x = *in[0];
  const LrnGeom g = lrn_geom(x.shape(), a);
  const Tensor d = lrn_base(x, g);
  Tensor y(DType::F64, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) y.f64()[i] = x.f64()[i] * lrn_power(d.f64()[i], -g.beta);
  return {y};
}

std::vector<Tensor> lrn_vjp(const Inputs& in, const Attrs& a, const std::vector<Tensor>&,
                            const std::vector<Tensor>& grad) {
  const Tensor& x = *in[0];
  const double* xp = x.f64();
  const double* gy = grad[0].f64();
  const LrnGeom g = lrn_geom(x.shape(), a);
  const Tensor d = lrn_base(x, g);
  const double* dp = d.f64();
  Tensor gx(DType::F64, x.shape());
  double* gxp = gx.f64();
  // y_c = x_c * d_c^-beta: a direct term, plus each x_j in c's window reaching y_c through d_c. The
  // terms cancel where alpha x^2 dominates the bias (size 1: d^-beta - 2 alpha beta x^2 d^-beta-1 is
  // bias * d^-beta-1 for beta 1/2, the difference of two terms 1e11 times larger for x = 1e6), and
  // float32 implementations keep their rounding: the gradient is a stored sum of their magnitude.
  std::vector<double> mag(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) {
    gxp[i] = gy[i] * lrn_power(dp[i], -g.beta);
    mag[static_cast<size_t>(i)] = std::abs(gxp[i]);
  }
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t ch = 0; ch < g.c; ++ch)
      for (int64_t k = 0; k < g.sp; ++k) {
        const int64_t i = (b * g.c + ch) * g.sp + k;
        // gy * x, the product oneDNN's backward holds in float32 before scaling it by d^-beta-1 (seed 14005:
        // 1.5e38 * 10 is inf there, the gradient -inf where 2.4e36 is exact): NaN in the float32 trials where it
        // passes FLT_MAX.
        const double gyx = gy[i] * xp[i] + float32_range(std::abs(gy[i] * xp[i]));
        const double coef = gyx * -g.beta * lrn_power(dp[i], -g.beta - 1.0) * g.alpha_n * 2.0;
        for (int64_t j = std::max<int64_t>(0, ch - g.before); j <= std::min(g.c - 1, ch + g.after); ++j) {
          const int64_t ij = (b * g.c + j) * g.sp + k;
          gxp[ij] += coef * xp[ij];
          mag[static_cast<size_t>(ij)] += std::abs(coef * xp[ij]);
        }
      }
  const int64_t terms = g.before + g.after + 2;
  for (int64_t i = 0; i < x.numel(); ++i) gxp[i] = stored_sum(gxp[i], mag[static_cast<size_t>(i)], terms);
  return {gx};
}

OpSpec lrn_spec() {
  OpSpec s;
  s.name = "lrn";
  s.family = "norm";
  s.doc =
      "ONNX LRN across channels of X [N, C, H, W]: y = x / (bias + alpha/size * sum of x^2 over channels "
      "[c - floor((size-1)/2), c + ceil((size-1)/2)] clipped to [0, C-1])^beta";
  const double nan = std::nan("");
  // ONNX LRN takes any size: an even window has one channel more after c than before it.
  s.attrs = {int_attr("size", 5, 1, kInf, {AttrValue(int64_t{0}), AttrValue(int64_t{-1})},
                      "number of channels in the window (an even size reaches one further after c)"),
             float_attr("alpha", 1e-4, 0, kInf, {AttrValue(-1.0), AttrValue(nan)}, "scale of the sum of squares"),
             float_attr("beta", 0.75, 0, kInf, {AttrValue(nan)}, "exponent"),
             float_attr("bias", 1.0, kEpsLo, kInf, {AttrValue(0.0), AttrValue(-1.0)},
                        "additive constant in the base (> 0 keeps the base positive)")};
  s.infer = lrn_infer;
  s.forward = lrn_forward;
  s.vjp = lrn_vjp;
  s.reduction_length = [](const std::vector<TensorType>&, const Attrs& a) -> int64_t {
    return core::attr_i(a, "size");
  };
  s.tags = {"norm", "squares"};
  s.sample = [](core::Rng& rng) {
    Case c;
    c.inputs = {f64t({rng.randint(1, 2), rng.randint(1, 6), rng.randint(2, 4), rng.randint(2, 4)})};
    c.attrs["size"] = rng.pick(std::vector<int64_t>{1, 2, 3, 4, 5});
    // Much larger than the 1e-4 default, so the window term matters in the gradient check.
    c.attrs["alpha"] = random_float(rng, 0.01, 0.5);
    c.attrs["beta"] = random_float(rng, 0.5, 1.0);
    c.attrs["bias"] = random_float(rng, 0.5, 2.0);
    return c;
  };
  return s;
}

// ---- ONNX mapping

// (x - mean) * (1 / sqrt(var + eps)) over `axes`, the reference's normalisation, for the forms
// without an ONNX operator (batch_norm training=1, layer_norm below opset 17).
std::string onnx_normalise(OnnxExport& e, const std::vector<int64_t>& axes, double eps) {
  auto reduce_mean = [&](const std::string& v, const std::string& what) {
    auto [p, o] = e.helper("ReduceMean", {v}, what);
    p->set_ints("axes", axes);
    p->set_i("keepdims", 1);
    return o;
  };
  const std::string d = e.h("Sub", {e.in(0), reduce_mean(e.in(0), "mean")}, "centered");
  const std::string var = reduce_mean(e.h("Mul", {d, d}, "squared"), "var");
  const std::string rstd =
      e.h("Reciprocal", {e.h("Sqrt", {e.h("Add", {var, e.scalar(eps, "epsilon")}, "var_eps")}, "std")}, "rstd");
  return e.h("Mul", {d, rstd}, "normalized");
}

void export_batch_norm(OnnxExport& e) {
  const double eps = e.af("epsilon");
  if (e.ai("training") == 0) {
    e.final_node("BatchNormalization", {e.in(0), e.in(1), e.in(2), e.in(3), e.in(4)}).set_f("epsilon", eps);
    return;
  }
  // Batch statistics over N and the spatial dims, then scale and bias per channel.
  const int64_t rank = static_cast<int64_t>(e.in_shape().size());
  std::vector<int64_t> axes = {0}, pshape = {e.in_shape()[1]};
  for (int64_t a = 2; a < rank; ++a) {
    axes.push_back(a);
    pshape.push_back(1);
  }
  const std::string xn = onnx_normalise(e, axes, eps);
  const std::string shape = e.ints(pshape, "param_shape");
  const std::string scale = e.h("Reshape", {e.in(1), shape}, "scale");
  const std::string bias = e.h("Reshape", {e.in(2), shape}, "bias");
  e.final_node("Add", {e.h("Mul", {scale, xn}, "scaled"), bias});
}

void export_layer_norm(OnnxExport& e) {
  const int64_t rank = static_cast<int64_t>(e.in_shape().size());
  int64_t axis = e.ai("axis");
  if (axis < 0) axis += rank;
  if (e.opset() >= 17 && !e.choose2("layer_norm", "fused", "decomposed")) {
    e.final_node("LayerNormalization", {e.in(0), e.in(1), e.in(2)})
        .set_i("axis", axis)
        .set_f("epsilon", e.af("epsilon"));
    return;
  }
  std::vector<int64_t> axes;
  for (int64_t a = axis; a < rank; ++a) axes.push_back(a);
  const std::string xn = onnx_normalise(e, axes, e.af("epsilon"));
  e.final_node("Add", {e.h("Mul", {xn, e.in(1)}, "scaled"), e.in(2)});
}

void import_batch_norm(OnnxImport& m) {
  if (m.geti("training_mode", 0) != 0) m.fail("training_mode=1 is not supported");
  if (m.input_count() != 5) m.fail("expects 5 inputs");
  m.emit_final("batch_norm", m.inputs(), {{"epsilon", m.getf("epsilon", 1e-5)}, {"training", int64_t{0}}});
}

void import_layer_norm(OnnxImport& m) {
  const std::string x = m.in(0), scale = m.in(1);
  std::string bias = m.present(2) ? m.in(2) : "";
  if (bias.empty()) bias = m.new_initializer("bias", Tensor(m.type_of(scale)));
  m.emit_final("layer_norm", {x, scale, bias}, {{"axis", m.geti("axis", -1)}, {"epsilon", m.getf("epsilon", 1e-5)}});
}

void export_lrn(OnnxExport& e) {
  e.final_node("LRN", {e.in(0)})
      .set_i("size", e.ai("size"))
      .set_f("alpha", e.af("alpha"))
      .set_f("beta", e.af("beta"))
      .set_f("bias", e.af("bias"));
}

void import_lrn(OnnxImport& m) {
  m.emit_final("lrn", {m.in(0)},
               {{"size", m.geti("size", 0)},
                {"alpha", m.getf("alpha", 1e-4)},
                {"beta", m.getf("beta", 0.75)},
                {"bias", m.getf("bias", 1.0)}});
}

}  // namespace

void register_norm(Registry& r) {
  OpSpec bn = batch_norm_spec();
  bn.onnx_export = export_batch_norm;
  bn.onnx_import = {{{"BatchNormalization"}, import_batch_norm}};
  r.add(std::move(bn));
  OpSpec ln = layer_norm_spec();
  ln.onnx_export = export_layer_norm;
  ln.onnx_import = {{{"LayerNormalization"}, import_layer_norm}};
  r.add(std::move(ln));
  OpSpec lrn = lrn_spec();
  lrn.onnx_export = export_lrn;
  lrn.onnx_import = {{{"LRN"}, import_lrn}};
  r.add(std::move(lrn));
}

}  // namespace quorum::ops
