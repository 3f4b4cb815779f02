// Losses: a prediction and a target of the same shape reduced to one scalar (shape []), the mean
// over the batch or over every element. The target is data, not a variable: its gradient is not
// computed (nondiff input 1), so the VJP returns an undefined Tensor for it.
#include <algorithm>
#include <cmath>

#include "ops/kernel_util.h"
#include "ops/registry.h"

namespace quorum::ops {
namespace {

// A loss as two functions of the prediction p and target t (both float64, same shape): its value
// and dL/dp.
using LossFn = std::function<double(const Tensor& p, const Tensor& t)>;
using LossGradFn = std::function<Tensor(const Tensor& p, const Tensor& t)>;

struct Loss {
  std::string name;
  std::string doc;
  int rank;  // required rank of the prediction; -1 for any
  LossFn value;
  LossGradFn grad;
  InputGen pred_gen;
  InputGen target_gen;
  std::vector<ValidRange> ranges = {};
};

Signature loss_infer(const std::string& name, int rank, const std::vector<TensorType>& in) {
  const DType dt = common_float_dtype(in);
  const Shape& p = in[0].shape;
  if (rank >= 0)
    QUORUM_REQUIRE(static_cast<int>(p.size()) == rank, name + " expects a prediction [N, C] of rank " +
                                                           std::to_string(rank) + ", got rank " +
                                                           std::to_string(p.size()));
  QUORUM_REQUIRE(in[1].shape == p, "target shape " + core::to_string(in[1].shape) + " differs from prediction shape " +
                                       core::to_string(p));
  QUORUM_REQUIRE(core::numel(p) > 0, name + " of an empty prediction is undefined (mean over zero elements)");
  return Signature{{TensorType{dt, {}}}, {}};
}

OpSpec make_loss(Loss l) {
  OpSpec s;
  s.name = l.name;
  s.family = "loss";
  s.doc = l.doc;
  s.min_inputs = s.max_inputs = 2;
  s.is_loss = true;
  s.nondiff_inputs = {1};
  s.valid_ranges = l.ranges;
  s.tags = {"loss"};
  if (l.name == "mse_loss") s.tags.push_back("squares");
  if (!l.ranges.empty()) s.tags.push_back("vulnerable");
  const std::string name = l.name;
  const int rank = l.rank;
  s.infer = [name, rank](const std::vector<TensorType>& in, const Attrs&) { return loss_infer(name, rank, in); };
  LossFn value = l.value;
  s.forward = [value](const Inputs& in, const Attrs&) {
    return std::vector<Tensor>{Tensor::scalar(value(*in[0], *in[1]))};
  };
  LossGradFn grad = l.grad;
  s.vjp = [grad](const Inputs& in, const Attrs&, const std::vector<Tensor>&, const std::vector<Tensor>& g) {
    Tensor gp = grad(*in[0], *in[1]);
    const double seed = g[0].f64()[0];
    for (int64_t i = 0; i < gp.numel(); ++i) gp.f64()[i] *= seed;
    return std::vector<Tensor>{gp, Tensor()};
  };
  // The mean sums every element.
  s.reduction_length = [](const std::vector<TensorType>& in, const Attrs&) { return core::numel(in[0].shape); };
  const int sample_rank = rank;
  const InputGen pg = l.pred_gen, tg = l.target_gen;
  const bool soft_or_hard = l.target_gen.fill == Fill::Probability;
  s.sample = [sample_rank, pg, tg, soft_or_hard](core::Rng& rng) {
    Case c;
    const int r = sample_rank >= 0 ? sample_rank : static_cast<int>(rng.randint(1, 3));
    const Shape shape = sample_rank == 2 ? Shape{rng.randint(1, 3), rng.randint(2, 5)} : random_shape(rng, r, 1, 4);
    c.inputs = {f64t(shape), f64t(shape)};
    InputGen t = tg;
    // Soft targets and hard (one-hot) labels both count as probabilities.
    if (soft_or_hard && rng.bernoulli(0.5)) t.fill = Fill::OneHot;
    c.gen = {pg, t};
    return c;
  };
  return s;
}

// Per-row view of an [N, C] tensor.
int64_t rows(const Tensor& p) { return p.dim(0); }
int64_t cols(const Tensor& p) { return p.dim(1); }

// c * v where a zero coefficient gives 0 whatever v is (a target's 0 times log 0 or an infinite
// logit: the term is absent, its limit 0, not 0 * inf = NaN).
double scaled(double c, double v) { return c == 0 ? 0.0 : c * v; }

// log_softmax of one row at j, with the maximum subtracted first, so large logits do not overflow;
// where the maximum is +inf, the limit: -log(k) at the k +inf entries, -inf at the others.
struct RowLogSoftmax {
  double m = 0, lse_shift = 0;  // max, log(sum(exp(row - max)))
  int64_t at_inf = 0;
  RowLogSoftmax(const double* row, int64_t c) {
    m = row[0];
    for (int64_t j = 1; j < c; ++j) m = std::isnan(row[j]) || row[j] > m ? row[j] : m;
    double s = 0;
    if (m == INFINITY) {
      for (int64_t j = 0; j < c; ++j) at_inf += row[j] == INFINITY;
      s = static_cast<double>(at_inf);
    } else {
      for (int64_t j = 0; j < c; ++j) s += std::exp(row[j] - m);
    }
    lse_shift = std::log(s);
  }
  double operator()(double x) const {
    if (m == INFINITY && !std::isnan(x)) return x == INFINITY ? -lse_shift : -INFINITY;
    return x - m - lse_shift;
  }
};

// The margin's terms as a float32 implementation holds them (ops::stored): a margin next to 0 (the hinge's kink),
// or two negatives that tie to a few units, go either way in float32.
std::vector<double> hinge_neg_terms(const double* p, const double* t, int64_t c) {
  std::vector<double> neg(static_cast<size_t>(c));
  for (int64_t j = 0; j < c; ++j) neg[static_cast<size_t>(j)] = stored(scaled(1.0 - t[j], p[j]));
  return neg;
}

// The first index attaining the maximum of (1 - t) * p in a row (categorical_hinge's negative); a
// NaN term is the maximum (it propagates), the first NaN as reduce_max's kernel picks it.
int64_t hinge_neg_index(const std::vector<double>& neg) {
  for (size_t j = 0; j < neg.size(); ++j)
    if (std::isnan(neg[j])) return static_cast<int64_t>(j);
  size_t best = 0;
  for (size_t j = 1; j < neg.size(); ++j)
    if (neg[j] > neg[best]) best = j;
  return static_cast<int64_t>(best);
}

struct HingeMargin {
  double margin;
  int64_t neg_index;
};

HingeMargin hinge_margin(const double* p, const double* t, int64_t c) {
  double pos = 0;
  for (int64_t j = 0; j < c; ++j) pos += stored(scaled(t[j], p[j]));
  const auto neg = hinge_neg_terms(p, t, c);
  const int64_t k = hinge_neg_index(neg);
  return {neg[static_cast<size_t>(k)] - pos + 1.0, k};
}

std::vector<Loss> losses() {
  return {
      {"mse_loss", "mean over all elements of (p - t)^2", -1,
       [](const Tensor& p, const Tensor& t) {
         double s = 0;
         for (int64_t i = 0; i < p.numel(); ++i) s += (p.f64()[i] - t.f64()[i]) * (p.f64()[i] - t.f64()[i]);
         return s / static_cast<double>(p.numel());
       },
       [](const Tensor& p, const Tensor& t) {
         Tensor g(DType::F64, p.shape());
         const double n = static_cast<double>(p.numel());
         for (int64_t i = 0; i < p.numel(); ++i) g.f64()[i] = 2.0 * (p.f64()[i] - t.f64()[i]) / n;
         return g;
       },
       InputGen{}, InputGen{}},
      {"softmax_cross_entropy",
       "logits p [N, C], target probabilities t [N, C]: mean over N of -sum_c t * log_softmax(p)", 2,
       [](const Tensor& p, const Tensor& t) {
         double s = 0;
         for (int64_t b = 0; b < rows(p); ++b) {
           const double* pr = p.f64() + b * cols(p);
           const double* tr = t.f64() + b * cols(p);
           const RowLogSoftmax ls(pr, cols(p));
           for (int64_t j = 0; j < cols(p); ++j) s -= scaled(tr[j], ls(pr[j]));
         }
         return s / static_cast<double>(rows(p));
       },
       [](const Tensor& p, const Tensor& t) {
         // d/dp_j = (sum_c t_c) * softmax_j - t_j: exact even when a target row does not sum to 1.
         Tensor g(DType::F64, p.shape());
         const double n = static_cast<double>(rows(p));
         for (int64_t b = 0; b < rows(p); ++b) {
           const double* pr = p.f64() + b * cols(p);
           const double* tr = t.f64() + b * cols(p);
           const RowLogSoftmax ls(pr, cols(p));
           double tsum = 0;
           for (int64_t j = 0; j < cols(p); ++j) tsum += tr[j];
           for (int64_t j = 0; j < cols(p); ++j)
             g.f64()[b * cols(p) + j] = (tsum * std::exp(ls(pr[j])) - tr[j]) / n;
         }
         return g;
       },
       InputGen{-3, 3}, InputGen{0, 1, Fill::Probability}},
      {"binary_cross_entropy",
       "probabilities p, targets t in [0, 1] of the same shape: mean of -(t log p + (1-t) log(1-p))",
       -1,
       [](const Tensor& p, const Tensor& t) {
         double s = 0;
         for (int64_t i = 0; i < p.numel(); ++i) {
           const double pi = p.f64()[i], ti = t.f64()[i];
           s -= scaled(ti, std::log(pi)) + scaled(1.0 - ti, std::log1p(-pi));
         }
         return s / static_cast<double>(p.numel());
       },
       [](const Tensor& p, const Tensor& t) {
         Tensor g(DType::F64, p.shape());
         const double n = static_cast<double>(p.numel());
         for (int64_t i = 0; i < p.numel(); ++i) {
           const double pi = p.f64()[i], ti = t.f64()[i];
           // At p = 0 or 1 the terms apart, a zero coefficient's term absent (its limit): t = 0 at
           // p = 0 gives 1, not 0 / 0.
           const bool edge = pi == 0 || pi == 1;
           g.f64()[i] =
               (edge ? scaled(-ti, 1.0 / pi) + scaled(1.0 - ti, 1.0 / (1.0 - pi)) : (pi - ti) / (pi * (1.0 - pi))) / n;
         }
         return g;
       },
       InputGen{0.05, 0.95},
       InputGen{0, 1},
       {ValidRange{0, 0, 1, false, false, "log(p) or log(1 - p) is -inf or NaN for p outside (0, 1)"}}},
      {"categorical_hinge",
       "Keras categorical hinge, p [N, C], one-hot t [N, C]: pos = sum(t*p), neg = max((1-t)*p) over C, "
       "mean over N of max(0, neg - pos + 1)",
       2,
       [](const Tensor& p, const Tensor& t) {
         double s = 0;
         for (int64_t b = 0; b < rows(p); ++b) {
           // An indeterminate margin (inf - inf) stays NaN: std::max(0, NaN) would be 0.
           const double m = hinge_margin(p.f64() + b * cols(p), t.f64() + b * cols(p), cols(p)).margin;
           s += std::isnan(m) ? m : std::max(0.0, m);
         }
         return s / static_cast<double>(rows(p));
       },
       [](const Tensor& p, const Tensor& t) {
         Tensor g(DType::F64, p.shape());
         const double n = static_cast<double>(rows(p));
         for (int64_t b = 0; b < rows(p); ++b) {
           const double* pr = p.f64() + b * cols(p);
           const double* tr = t.f64() + b * cols(p);
           // The hinge is flat here. A NaN margin keeps the gradient, as the libraries' hinges do
           // (libtorch's relu backward masks x <= 0 only; oneDNN's binary_gt(NaN, 0) is 1).
           const HingeMargin h = hinge_margin(pr, tr, cols(p));
           if (h.margin <= 0) continue;
           double* gr = g.f64() + b * cols(p);
           for (int64_t j = 0; j < cols(p); ++j) gr[j] = -tr[j] / n;
           const int64_t k = h.neg_index;
           gr[k] += (1.0 - tr[k]) / n;
         }
         return g;
       },
       InputGen{-2, 2}, InputGen{0, 1, Fill::OneHot}},
  };
}

}  // namespace

void register_loss(Registry& r) {
  for (auto& l : losses()) r.add(make_loss(std::move(l)));
}

}  // namespace quorum::ops
