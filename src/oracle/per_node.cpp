// The per-node rule: each library is judged on its own. Every node it ran is recomputed by the
// catalogue's float64 kernel from the library's own values of the node's inputs; every gradient it
// returned is recomputed by the consumers' VJPs from its own forward values and its own incoming
// gradients; its loss by the loss operator on its own output. A node whose result lies outside the
// operator's tolerance at the run's dtype is where a bug was born, with no vote: upstream
// differences are the node's inputs, so they cannot make it look wrong, and a single library
// suffices. The reference is blamed only when every library that ran a node disagrees with the
// kernel in the same way (then the kernel, or a convention all libraries share, is suspect).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "ops/registry.h"
#include "oracle/compare.h"
#include "oracle/judge_util.h"
#include "oracle/node_kernel.h"
#include "oracle/spread.h"

namespace quorum::oracle::detail {

namespace {

using core::DType;
using core::Tensor;

std::string num(double v) {
  std::ostringstream os;
  os.precision(4);
  os << v;
  return os.str();
}

// How one tensor a library returned compares with what the kernel gives on the library's inputs.
struct Verdict {
  int64_t produced = 0;   // NaN where the kernel gives a number (judged on operands without NaN), Inf
                          // where the kernel is finite (judged on finite operands)
  int64_t swallowed = 0;  // the kernel propagates a NaN, the library returned a number
  int64_t wrong = 0;      // beyond the tolerance (or the wrong infinity)
  double distance = 0;    // max |got - want| over elements finite in both
  int64_t worst = -1, first_nonfinite = -1, first_swallowed = -1;
  bool shape_mismatch = false;
  double got_at_worst = 0, want_at_worst = 0;
  bool subnormals_flushed = false;  // Finding::subnormals_flushed
};

// `explained(i, got)`: a deviation at element i that a convention allows (ties, kinks). `exact`:
// the kernel's float64 result before rounding to the run's dtype (null: not known).
// The operands: `operands_finite` every one finite, `operands_nan_free` none NaN (infinities
// allowed). A NaN where the kernel gives a number is judged whenever no operand is NaN: the kernels
// give the IEEE/limit result on infinite operands (tests/ops/edge_sweep_test.cpp), so a library
// that turns an infinite operand into NaN where that limit is a number has a finding. An infinity
// where the kernel is finite is judged on finite operands only.
template <class Explained>
Verdict verdict(const Tensor& got, const Tensor& want, const ops::Tolerance& tol, bool operands_finite,
                bool operands_nan_free, const Explained& explained, const Tensor* exact = nullptr) {
  Verdict v;
  if (got.shape() != want.shape()) {
    v.shape_mismatch = true;
    v.wrong = 1;
    v.distance = INFINITY;
    return v;
  }
  const double scale = tolerance_scale(want);
  double worst_excess = -1;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double a = got.get(i), w = want.get(i);
    if (std::isnan(w)) {
      // A number is float32's where a trial of the kernel gives one too (a nearest resize's tie
      // picking the neighbour of a NaN cell).
      if (!std::isnan(a) && !explained(i, a)) {
        ++v.swallowed;
        if (v.first_swallowed < 0) v.first_swallowed = i;
      }
      continue;
    }
    if (std::isinf(w)) {
      // The same infinity, or the other one: 1/±0 by a library that does not keep zero's sign
      // (rsqrt(-0), pow(-0, -1)) is a signed-zero convention.
      if (std::isinf(a)) continue;
      if (std::isnan(a)) {
        if (operands_nan_free && !explained(i, a)) {
          ++v.produced;
          if (v.first_nonfinite < 0) v.first_nonfinite = i;
        }
        continue;
      }
      // A finite value at the top of float32's range where the exact result overflows float32 (or
      // float64, from finite operands) is rounding; where the exact result is an infinity an
      // infinite operand gives (the min of {inf, inf}), FLT_MAX is a wrong answer.
      const bool overflowed = !exact || operands_finite || (i < exact->numel() && std::isfinite(exact->get(i)));
      if (overflowed && std::isfinite(a) && (a > 0) == (w > 0) && std::abs(a) >= FLT_MAX / 2) continue;
      if (explained(i, a)) continue;
      ++v.wrong;
      v.distance = INFINITY;
      if (worst_excess < INFINITY) worst_excess = INFINITY, v.worst = i, v.got_at_worst = a, v.want_at_worst = w;
      continue;
    }
    if (!std::isfinite(a)) {
      // NaN for an exact 0 from finite operands is 0 * inf inside a float32 computation (a zero
      // incoming gradient times a derivative that overflowed): float32 range, not a library bug.
      // From an infinite operand it is judged: the exact 0 is a limit (gelu(-inf), hardswish(-inf)),
      // and only a float32 evaluation the spread models (a trial NaN there, `explained`) excuses it.
      // So is an infinity of the exact result's sign where that result is at the top of float32's
      // range (the mirror of the rule above: within a factor of 2 of overflow, a product of another
      // evaluation order, g * y / x for g * (y / x), overflows first).
      const bool at_top = std::isinf(a) && (a > 0) == (w > 0) && std::abs(w) >= FLT_MAX / 2;
      const bool judged = std::isnan(a) ? operands_nan_free : operands_finite;
      const bool zero_times_overflow = std::isnan(a) && w == 0 && operands_finite;
      if (judged && !zero_times_overflow && !at_top && !explained(i, a)) {
        ++v.produced;
        if (v.first_nonfinite < 0) v.first_nonfinite = i;
      }
      continue;
    }
    const double d = std::abs(a - w);
    if (element_within(a, w, scale, tol) || explained(i, a)) continue;
    ++v.wrong;
    v.distance = std::max(v.distance, d);
    const double excess = d - (tol.atol * scale + tol.rtol * std::abs(w));
    if (excess > worst_excess) worst_excess = excess, v.worst = i, v.got_at_worst = a, v.want_at_worst = w;
  }
  return v;
}

bool never_explained(int64_t, double) { return false; }

// verdict()'s plain check where every element is finite, in one pass and without copies: `got`
// within `tol` of `exact` rounded to `dtype`, element by element, both finite everywhere.
bool plainly_within(const Tensor& got, const Tensor& exact, const ops::Tolerance& tol, DType dtype) {
  const int64_t n = exact.numel();
  if (got.numel() != n) return false;
  const auto rounded = [&](int64_t i) {
    const double w = exact.get(i);
    return dtype == DType::F32 ? static_cast<double>(static_cast<float>(w)) : w;
  };
  double scale = 1.0;
  for (int64_t i = 0; i < n; ++i) {
    const double w = rounded(i), a = got.get(i);
    if (!std::isfinite(w) || !std::isfinite(a) || !std::isfinite(exact.get(i))) return false;
    scale = std::max(scale, std::abs(w));
  }
  for (int64_t i = 0; i < n; ++i)
    if (!element_within(got.get(i), rounded(i), scale, tol)) return false;
  return true;
}

// Whether input k of node c carries a gradient (not one of its operator's nondiff_inputs: a loss's target).
bool differentiable_input(const ir::Node& c, size_t k) {
  const std::vector<int>& nd = ops::op(c.op).nondiff_inputs;
  return std::find(nd.begin(), nd.end(), static_cast<int>(k)) == nd.end();
}

bool all_finite(const std::vector<Tensor>& ts) {
  for (const auto& t : ts)
    if (has_nonfinite(t)) return false;
  return true;
}

bool nan_free(const std::vector<Tensor>& ts) {
  for (const auto& t : ts)
    if (has_nan(t)) return false;
  return true;
}

Tensor zeros_like(const Tensor& t) { return Tensor(DType::F64, t.shape()); }

// The verdict where the plain tolerance failed: an element may also differ by kMargin spreads
// (`sens`; undefined: none) plus `u` times its sum bound (`bound`; undefined: none), and anything
// goes where the spread is infinite (a trial non-finite where the kernel is finite).
template <class Explained>
Verdict within_spread(const Tensor& got, const Tensor& w, const ops::Tolerance& tol, bool finite, bool nan_free,
                      const Tensor& sens, const Tensor& bound, double u, const Explained& explained,
                      const Tensor* exact) {
  return verdict(
      got, w, tol, finite, nan_free,
      [&](int64_t i, double a) {
        // A sum bound infinite from finite operands (the magnitudes' product overflows float64)
        // allows anything; from an infinite operand, whose result is exact, nothing.
        const double b = bound.defined() && i < bound.numel() ? bound.get(i) : 0;
        const double allowed = (sens.defined() ? kMargin * sens.get(i) : 0) +
                               (std::isfinite(b) ? u * b : finite ? INFINITY : 0);
        // The spread is float64's: where the exact value is finite but overflows float32 (w is inf),
        // a float32 evaluation that keeps it finite (a kink moved by rounding) is measured from it.
        const double want = std::isinf(w.get(i)) && exact && std::isfinite(exact->get(i)) ? exact->get(i) : w.get(i);
        return allowed == INFINITY || std::abs(a - want) <= allowed || explained(i, a);
      },
      exact);
}

// One tensor a library returned against the float64 kernel on the library's own operands: the one
// verdict pipeline of the forward, the loss and the backward. Operands whose float32 sums of
// squares overflow are not judged at all (each stage skips them first). Then, in this order:
//  1. the plain verdict: within the operator's tolerance at the run's dtype, or a convention
//     (`explained`: a gradient at tied extremes or at a kink); a stage that does not judge
//     swallowed NaNs (the backward: masking a NaN gradient is a library's choice) drops them;
//  2. where it still fails and the shapes agree: within kMargin float32 spreads (`spread`, the
//     stage's kernel on its operands, oracle/spread.h) plus the unit roundoff times the float32
//     sum bound (`bound`, summing operators); anything where a trial is non-finite;
//  3. float32's range: NaN/Inf produced where an intermediate of the float32 computation overflows
//     although the result does not (`overflows`).
struct Judging {
  const Tensor& got;
  const Tensor& exact;  // the kernel's float64 result
  ops::Tolerance tol;
  bool finite;  // every operand finite
  bool nan_free;  // no operand NaN (infinities allowed)
  bool judge_swallowed = true;
  std::function<bool(int64_t, double)> explained = never_explained;
  std::function<Tensor()> spread = nullptr;    // this result's spread; undefined: none
  std::function<Tensor()> bound = nullptr;     // undefined: none
  std::function<bool()> overflows = nullptr;
};

Verdict judge_tensor(const Judging& j, DType dtype) {
  const Tensor w = rounded_to(j.exact, dtype);
  Verdict v = verdict(j.got, w, j.tol, j.finite, j.nan_free, j.explained, &j.exact);
  if (!j.judge_swallowed) v.swallowed = 0;
  if ((v.wrong || v.produced || v.swallowed) && !v.shape_mismatch) {
    const Tensor sens = j.spread ? j.spread() : Tensor();
    const Tensor bound = j.bound ? j.bound() : Tensor();
    if (sens.defined() || bound.defined()) {
      v = within_spread(j.got, w, j.tol, j.finite, j.nan_free, sens, bound, unit_roundoff(dtype), j.explained,
                        &j.exact);
      if (!j.judge_swallowed) v.swallowed = 0;
    }
  }
  if (v.produced && dtype == DType::F32 && j.overflows && j.overflows()) v.produced = 0;
  return v;
}

struct Judged {
  Stage stage;
  std::string node, value;
  size_t run;
  Verdict v;
  bool operator<(const Judged& o) const {
    return std::tie(stage, node, value, run) < std::tie(o.stage, o.node, o.value, o.run);
  }
};

struct PerNode {
  const ir::Graph& g;
  const std::vector<BackendRun>& runs;
  const Thresholds& th;
  const backends::ValueMap* inputs;
  const core::Tensor* target;
  const BackendRun* ref = nullptr;  // the reference's run, for the fast path (Thresholds::fast_path)
  std::vector<Finding> out;
  // (stage, node, value) -> runs that were judged there; failing ones with their verdicts.
  std::map<std::tuple<Stage, std::string, std::string>, std::vector<size_t>> judged;
  std::vector<Judged> failed;

  void note(Stage s, const ir::Node* n, const std::string& value, size_t run, const Verdict& v) {
    const std::string node = n ? n->name : "loss";
    judged[{s, node, value}].push_back(run);
    if (v.produced || v.swallowed || v.wrong) failed.push_back({s, node, value, run, v});
  }

  // The fast path (Thresholds::fast_path): every one of `names` the library returned lies within the
  // plain tolerance `tol` of the reference's value at the same place, both finite (none returned:
  // true). Checked for a node's outputs and for everything it computed them from (its operands, and
  // for a gradient the consumers' incoming gradients), such a value cannot be a finding of its own:
  // the kernels on the library's operands are only needed where the library's values leave the
  // reference's. (Outputs alone would not do: a wrong gradient can meet the reference's where the
  // library's own incoming gradient differs from the reference's, a dropped one where the reference's
  // is zero.)
  bool close_to_reference(const std::vector<std::string>& names, const backends::ValueMap& got,
                          const backends::ValueMap& want, const ops::Tolerance& tol, bool* any = nullptr) const {
    for (const auto& name : names) {
      const auto g1 = got.find(name);
      if (g1 == got.end()) continue;
      const auto w1 = want.find(name);
      if (w1 == want.end() || w1->second.shape() != g1->second.shape()) return false;
      if (!plainly_within(g1->second, w1->second, tol, th.dtype)) return false;
      if (any) *any = true;
    }
    return true;
  }

  // A node's outputs and operands (the forward's fast path).
  bool agrees_with_reference(const ir::Node& n, const BackendRun& r, const ops::Tolerance& tol) const {
    if (!th.fast_path || !ref) return false;
    bool any = false;
    return close_to_reference(n.outputs, r.values, ref->values, tol, &any) && any &&
           close_to_reference(n.inputs, r.values, ref->values, tol);
  }

  // Forward: every node on the library's own inputs.
  void forward(size_t ri) {
    const BackendRun& r = runs[ri];
    for (const auto& n : g.nodes) {
      bool ran = false;
      for (const auto& o : n.outputs) ran |= r.values.count(o) > 0;
      if (!ran) continue;
      const std::vector<Tensor> held = own_inputs(g, n, r.values, inputs, th.dtype);
      if (held.size() != n.inputs.size()) continue;
      const ops::Tolerance tol = node_tolerance(g, n, th.dtype, false);
      const bool finite = all_finite(held);
      if (squares_overflow(n.op, held, n)) continue;  // its float32 sums of squares overflow: float32 range
      // The fast path before the kernel: a node that agrees with the reference needs no kernel run on
      // the library's operands.
      if (finite && agrees_with_reference(n, r, tol)) {
        for (const auto& o : n.outputs)
          if (r.values.count(o)) note(Stage::Forward, &n, o, ri, Verdict{});
        continue;
      }
      std::vector<Tensor> want;
      try {
        want = node_forward(n, held);
      } catch (const std::exception&) {
        continue;  // the kernel refuses the library's values (cannot judge)
      }
      std::vector<Tensor> sens;  // every output's, computed on the first output beyond the plain tolerance
      for (size_t k = 0; k < n.outputs.size() && k < want.size(); ++k) {
        auto got = r.values.find(n.outputs[k]);
        if (got == r.values.end()) continue;
        Judging j = forward_judging(n, held, want, sens, got->second, k, tol);
        j.overflows = [&, k] { return intermediate_overflow(n, held, k); };
        Verdict v = judge_tensor(j, th.dtype);
        if (v.produced || v.swallowed || v.wrong)
          v.subnormals_flushed = explained_by_flushing(n, held, got->second, k, tol);
        note(Stage::Forward, &n, n.outputs[k], ri, v);
      }
    }
  }

  // How the library's output k of node n is judged against the kernel's `want` on `operands`: the plain
  // tolerance, then the spread (every output's at once, kept in `sens`) and the sum bound.
  Judging forward_judging(const ir::Node& n, const std::vector<Tensor>& operands, const std::vector<Tensor>& want,
                          std::vector<Tensor>& sens, const Tensor& got, size_t k, const ops::Tolerance& tol) const {
    Judging j{got, want[k], tol, all_finite(operands), nan_free(operands)};
    // An integer output holds no NaN: what quantizing one gives is undefined (ONNX QuantizeLinear).
    j.judge_swallowed = core::is_float(got.dtype());
    j.spread = [&, k] {
      if (sens.empty())
        sens = spread(operands, want, th.dtype, perturbation_ulps(n, operands), n.op + "#" + std::to_string(k),
                      forward_kernel(n), ops::op(n.op).float32_orders);
      return k < sens.size() ? sens[k] : Tensor();
    };
    j.bound = [&, k] { return sum_magnitude(n, operands, k); };
    return j;
  }

  // Whether the library's output k of node n is what the kernel gives on its float32 operands with their
  // subnormals read as signed zeros (Finding::subnormals_flushed), judged as the output itself is but for
  // the intermediate-overflow excuse (flushing only makes operands smaller).
  bool explained_by_flushing(const ir::Node& n, const std::vector<Tensor>& held, const Tensor& got, size_t k,
                             const ops::Tolerance& tol) const {
    if (th.dtype != DType::F32) return false;
    std::vector<Tensor> flushed;
    bool any = false;
    for (const auto& t : held) {
      Tensor f = t.to(DType::F64);
      for (int64_t i = 0; i < f.numel(); ++i) {
        const double x = f.f64()[i];
        if (x != 0 && std::abs(x) < FLT_MIN) {
          f.f64()[i] = std::copysign(0.0, x);
          any = true;
        }
      }
      flushed.push_back(std::move(f));
    }
    if (!any) return false;
    std::vector<Tensor> want;
    try {
      want = node_forward(n, flushed);
    } catch (const std::exception&) {
      return false;
    }
    if (k >= want.size()) return false;
    std::vector<Tensor> sens;
    const Verdict v = judge_tensor(forward_judging(n, flushed, want, sens, got, k, tol), th.dtype);
    return !v.produced && !v.swallowed && !v.wrong;
  }

  // For a summing operator (dense, conv, reductions, norms: those with a reduction length), the
  // kernel (or, with `gy`, the VJP) on the magnitudes of its operands, times the number of terms
  // per sum: n * sum |terms|, the classical bound of a float32 sum's rounding (times the unit
  // roundoff) and of its intermediates' range. Empty for other operators.
  Tensor sum_magnitude(const ir::Node& n, const std::vector<Tensor>& held, size_t k,
                       const std::vector<Tensor>* gy = nullptr) const {
    const ops::OpSpec& spec = ops::op(n.op);
    if (!spec.reduction_length) return {};
    auto magnitudes = [](const std::vector<Tensor>& ts) {
      std::vector<Tensor> mag;
      for (const auto& t : ts) {
        Tensor a = t.to(DType::F64);
        for (int64_t i = 0; i < a.numel(); ++i) a.f64()[i] = std::abs(a.f64()[i]);
        mag.push_back(std::move(a));
      }
      return mag;
    };
    const std::vector<Tensor> mag = magnitudes(held);
    ops::Inputs in;
    std::vector<core::TensorType> types;
    for (size_t i = 0; i < mag.size(); ++i) {
      in.push_back(&mag[i]);
      if (i < ir::data_input_count(n)) types.push_back(mag[i].type());
    }
    try {
      double len = static_cast<double>(std::max<int64_t>(1, spec.reduction_length(types, n.attrs)));
      std::vector<Tensor> out = spec.forward(in, n.attrs);
      if (gy) {
        const std::vector<Tensor> gmag = magnitudes(*gy);
        out = spec.vjp(in, n.attrs, out, gmag);
        // A gradient's sums run over the incoming gradient's elements (batch and positions).
        if (k < out.size() && out[k].defined() && out[k].numel() > 0)
          for (const auto& t : gmag)
            len = std::max(len, std::ceil(static_cast<double>(t.numel()) / static_cast<double>(out[k].numel())));
      }
      if (k >= out.size() || !out[k].defined()) return {};
      Tensor r = out[k];
      for (int64_t i = 0; i < r.numel(); ++i) r.f64()[i] = std::abs(r.f64()[i]) * len;
      return r;
    } catch (const std::exception&) {
      return {};
    }
  }

  // Whether an operator that sums squares of its operands ("squares" tag: variances, squared
  // errors) overflows float32 on them: an operand beyond sqrt(FLT_MAX / reduction length).
  bool squares_overflow(const std::string& op, const std::vector<Tensor>& held, const ir::Node& n) const {
    const ops::OpSpec& spec = ops::op(op);
    if (th.dtype != DType::F32 || !spec.has_tag("squares")) return false;
    double len = 1;
    if (spec.reduction_length) {
      std::vector<core::TensorType> types;
      for (size_t i = 0; i < ir::data_input_count(n) && i < held.size(); ++i) types.push_back(held[i].type());
      try {
        len = static_cast<double>(std::max<int64_t>(1, spec.reduction_length(types, n.attrs)));
      } catch (const std::exception&) {
      }
    }
    const double limit = std::sqrt(FLT_MAX / len);
    for (size_t i = 0; i < ir::data_input_count(n) && i < held.size(); ++i)
      for (int64_t k = 0; k < held[i].numel(); ++k)
        if (std::abs(held[i].get(k)) > limit) return true;
    return false;
  }

  // Whether a float32 sum inside a summing operator can overflow although its result does not.
  bool intermediate_overflow(const ir::Node& n, const std::vector<Tensor>& held, size_t k,
                             const std::vector<Tensor>* gy = nullptr) const {
    const Tensor m = sum_magnitude(n, held, k, gy);
    for (int64_t i = 0; i < m.numel(); ++i)
      if (!(m.get(i) <= FLT_MAX)) return true;
    return false;
  }

  // The loss and its gradient on the library's own model output.
  void loss(size_t ri) {
    const BackendRun& r = runs[ri];
    if (!r.trained || !target || !target->defined()) return;
    // The training pass's own prediction (the loss is computed in that pass).
    auto pred_it = r.training_values().find(g.outputs[0]);
    if (pred_it == r.training_values().end()) return;
    const ops::OpSpec& spec = ops::op(th.loss_op);
    const Tensor pred = pred_it->second.to(DType::F64);
    const Tensor tgt = rounded_to(target->to(DType::F64), th.dtype);
    std::vector<Tensor> want, want_grad;
    core::Attrs la;
    try {
      la = ops::canonical_attrs(spec, {});
      const ops::Inputs lin{&pred, &tgt};
      want = spec.forward(lin, la);
      want_grad = spec.vjp(lin, la, want, {Tensor::scalar(1.0).reshaped(want[0].shape())});
    } catch (const std::exception&) {
      return;
    }
    const bool finite = !has_nonfinite(pred) && !has_nonfinite(tgt);
    const bool no_nan = !has_nan(pred) && !has_nan(tgt);
    if (th.dtype == DType::F32 && spec.has_tag("squares")) {
      // Squared errors beyond float32's range: the loss overflows in any float32 library.
      double worst = 0;
      for (int64_t i = 0; i < pred.numel() && i < tgt.numel(); ++i)
        worst = std::max(worst, std::abs(pred.get(i) - tgt.get(i)));
      if (!(worst <= std::sqrt(FLT_MAX / static_cast<double>(std::max<int64_t>(1, pred.numel()))))) return;
    }
    // Beyond the plain tolerance, the loss and its gradient get the spread every node gets (the
    // prediction and target moved by a few units: a loss of a difference, p - t, amplifies them).
    double ulps = kUlps;
    if (spec.reduction_length)
      ulps *=
          std::sqrt(static_cast<double>(std::max<int64_t>(1, spec.reduction_length({pred.type(), tgt.type()}, la))));
    auto judged = [&](const Tensor& got, const Tensor& exact, const ops::Tolerance& tol, bool grad) {
      Judging j{got, exact, tol, finite, no_nan};
      j.spread = [&] {
        const std::vector<Tensor> sens = spread(
            {pred, tgt}, {exact}, th.dtype, ulps, spec.name + (grad ? "/grad" : ""), [&](const std::vector<Tensor>& p) {
              const ops::Inputs pin{&p[0], &p[1]};
              std::vector<Tensor> y = spec.forward(pin, la);
              if (!grad) return std::vector<Tensor>{y[0].reshaped(exact.shape())};
              return std::vector<Tensor>{spec.vjp(pin, la, y, {Tensor::scalar(1.0).reshaped(y[0].shape())})[0]};
            },
            spec.float32_orders);
        return sens.empty() ? Tensor() : sens[0];
      };
      // A loss is a mean: its float32 sum of at least one term per sample (the prediction's first axis)
      // overflows where the mean times that count passes float32's range although the mean does not.
      const double samples = pred.shape().empty() ? 1.0 : static_cast<double>(pred.shape()[0]);
      if (!grad) j.overflows = [&exact, samples] { return !(std::abs(exact.get(0)) * samples <= FLT_MAX); };
      return judge_tensor(j, th.dtype);
    };
    Verdict v =
        judged(Tensor::scalar(r.loss), want[0].reshaped({}), loss_tolerance(g, th.loss_op, th.dtype, false), false);
    if (r.loss_grad.defined() && !want_grad.empty()) {
      const Verdict vg = judged(r.loss_grad, want_grad[0], loss_tolerance(g, th.loss_op, th.dtype, true), true);
      v.produced += vg.produced;
      v.swallowed += vg.swallowed;
      if (vg.wrong && vg.distance >= v.distance) {
        v.wrong += vg.wrong;
        v.distance = vg.distance, v.worst = vg.worst, v.got_at_worst = vg.got_at_worst,
        v.want_at_worst = vg.want_at_worst;
      }
    }
    note(Stage::Loss, nullptr, "loss", ri, v);
  }

  // One consumer's VJP on the library's own values: what it sends back to each of its inputs.
  struct Vjp {
    bool ok = false;
    std::vector<Tensor> held, gy, gin;
    bool finite = true;
    bool nan_free = true;  // no operand, no incoming gradient NaN
    bool squares_overflow = false;
  };

  Vjp vjp_of(const ir::Node& n, const BackendRun& r) const {
    Vjp v;
    const ops::OpSpec& spec = ops::op(n.op);
    if (!spec.differentiable()) return v;
    // The training pass's own forward values: its gradients were computed from them.
    const backends::ValueMap& values = r.training_values();
    v.held = own_inputs(g, n, values, inputs, th.dtype);
    if (v.held.size() != n.inputs.size()) return v;
    try {
      // The node's outputs as the library holds them (its own float32 values: a derivative taken
      // from a saturated output, sigmoid's y (1 - y) at y = 1, is then the library's), else the
      // kernel's rounded to the run's dtype.
      std::vector<Tensor> outs = node_forward(n, v.held);
      for (size_t k = 0; k < outs.size() && k < n.outputs.size(); ++k) {
        auto own = values.find(n.outputs[k]);
        if (own != values.end() && own->second.shape() == outs[k].shape()) outs[k] = own->second.to(DType::F64);
        else outs[k] = rounded_to(outs[k], th.dtype);
      }
      bool any = false;
      for (size_t k = 0; k < n.outputs.size() && k < outs.size(); ++k) {
        auto it = r.grads.find(n.outputs[k]);
        if (it != r.grads.end() && it->second.shape() == outs[k].shape()) {
          v.gy.push_back(it->second.to(DType::F64));
          any = true;
        } else {
          v.gy.push_back(zeros_like(outs[k]));
        }
      }
      if (!any) {  // no gradient reaches this node on the library: it sends nothing back
        v.ok = true;
        v.gin.assign(n.inputs.size(), Tensor());
        return v;
      }
      v.gin = node_vjp(n, v.held, outs, v.gy);
    } catch (const std::exception&) {
      return v;
    }
    v.finite = all_finite(v.held) && all_finite(v.gy);
    v.nan_free = nan_free(v.held) && nan_free(v.gy);
    v.squares_overflow = squares_overflow(n.op, v.held, n);
    v.ok = v.gin.size() == n.inputs.size();
    return v;
  }

  // Backward: every gradient the library returned against the sum of its consumers' VJPs (and the
  // loss gradient at the model output), each consumer fed the library's own forward values and
  // incoming gradients. A wrong sum is blamed on the consumer that sends the most at the worst
  // element.
  void backward(size_t ri) {
    const BackendRun& r = runs[ri];
    if (!r.trained) return;
    // Each consumer's VJP, computed when a gradient it contributes to is judged by the kernels.
    std::map<std::string, Vjp> vjps;
    std::map<std::string, std::vector<std::pair<const ir::Node*, size_t>>> consumers;
    for (const auto& n : g.nodes)
      for (size_t k = 0; k < n.inputs.size(); ++k) consumers[n.inputs[k]].push_back({&n, k});
    const auto judge = [&](const std::string& value, const std::vector<std::pair<const ir::Node*, size_t>>& cons,
                           const std::string& key, bool with_loss) {
      const Tensor& got = r.grads.at(key);
      if (gradient_agrees_with_reference(value, cons, key, r)) {
        note(Stage::Backward, first_differentiable(cons), value, ri, Verdict{});
        return;
      }
      for (const auto& [c, k] : cons)
        if (!vjps.count(c->name)) vjps.emplace(c->name, vjp_of(*c, r));
      check_gradient(ri, value, cons, vjps, got, with_loss);
    };
    for (const auto& [value, cons] : consumers) {
      // Where the library separates what each consumer sent back, each consumer is judged on its
      // own; otherwise the total against the sum of the consumers' VJPs.
      std::map<const ir::Node*, std::vector<std::pair<const ir::Node*, size_t>>> by_node;
      for (const auto& e : cons) by_node[e.first].push_back(e);
      bool separated = by_node.size() > 1;
      for (const auto& [c, es] : by_node) separated &= r.grads.count(backends::contribution_key(value, c->name)) > 0;
      if (separated) {
        for (const auto& [c, es] : by_node) judge(value, es, backends::contribution_key(value, c->name), false);
      } else if (r.grads.count(value)) {
        judge(value, cons, value, value == g.outputs[0]);
      }
    }
  }

  // The consumer a passing gradient of `cons` is noted under: the first whose input is differentiable.
  static const ir::Node* first_differentiable(const std::vector<std::pair<const ir::Node*, size_t>>& cons) {
    for (const auto& [c, k] : cons)
      if (differentiable_input(*c, k)) return c;
    return cons[0].first;
  }

  // The tolerance of a gradient `cons` send back: the widest of their backward tolerances, over the
  // consumers whose input is differentiable.
  ops::Tolerance gradient_tolerance(const std::vector<std::pair<const ir::Node*, size_t>>& cons) const {
    ops::Tolerance tol{0, 0};
    for (const auto& [c, k] : cons) {
      if (!differentiable_input(*c, k)) continue;
      const ops::Tolerance t = node_tolerance(g, *c, th.dtype, true);
      tol.atol = std::max(tol.atol, t.atol);
      tol.rtol = std::max(tol.rtol, t.rtol);
    }
    return tol;
  }

  // The fast path for a gradient (`key`: the value's total, or one consumer's contribution): it, and
  // every consumer's operands, outputs and incoming gradients, within the consumers' plain gradient
  // tolerance of the reference's, all finite (close_to_reference). A value whose only consumer
  // routes gradients among tied inputs (max pooling) is judged by the kernels, which also check that
  // the routing keeps the total; so is the model output (the loss gradient joins there).
  bool gradient_agrees_with_reference(const std::string& value,
                                      const std::vector<std::pair<const ir::Node*, size_t>>& cons,
                                      const std::string& key, const BackendRun& r) const {
    if (!th.fast_path || !ref || !ref->trained || value == g.outputs[0]) return false;
    if (cons.size() == 1 && ops::op(cons[0].first->op).extremes) return false;
    for (const auto& [c, k] : cons)
      if (!ops::op(c->op).differentiable()) return false;
    const ops::Tolerance tol = gradient_tolerance(cons);
    if (tol.atol == 0 && tol.rtol == 0) return false;
    bool any = false;
    if (!close_to_reference({key}, r.grads, ref->grads, tol, &any) || !any) return false;
    for (const auto& [c, k] : cons)
      if (!close_to_reference(c->inputs, r.training_values(), ref->training_values(), tol) ||
          !close_to_reference(c->outputs, r.training_values(), ref->training_values(), tol) ||
          !close_to_reference(c->outputs, r.grads, ref->grads, tol))
        return false;
    return true;
  }

  // One gradient a library returned (the total of `value`, or one consumer's contribution) against
  // the sum of `cons`' VJPs on the library's own values (plus the loss gradient at the model output).
  void check_gradient(size_t ri, const std::string& value, const std::vector<std::pair<const ir::Node*, size_t>>& cons,
                      const std::map<std::string, Vjp>& vjps, const Tensor& got, bool with_loss) {
    const BackendRun& r = runs[ri];
    Tensor want;
    bool known = true, finite = true, no_nan = true;
    const ops::Tolerance tol = gradient_tolerance(cons);
    std::vector<std::pair<const ir::Node*, const Tensor*>> contrib;
    for (const auto& [c, k] : cons) {
      const Vjp& v = vjps.at(c->name);
      if (!v.ok) {
        known = false;
        break;
      }
      if (!differentiable_input(*c, k)) continue;
      finite &= v.finite;
      no_nan &= v.nan_free;
      if (!v.gin[k].defined()) continue;
      if (v.gin[k].shape() != got.shape()) {
        known = false;
        break;
      }
      contrib.push_back({c, &v.gin[k]});
      if (!want.defined()) want = zeros_like(v.gin[k]);
      for (int64_t i = 0; i < want.numel(); ++i) want.f64()[i] += v.gin[k].get(i);
    }
    if (!known) return;
    for (const auto& [c, k] : cons)
      if (vjps.at(c->name).squares_overflow) return;  // float32 range in that consumer's backward
    if (with_loss && r.loss_grad.defined()) {
      if (!want.defined()) want = zeros_like(r.loss_grad);
      if (r.loss_grad.shape() != want.shape()) return;
      for (int64_t i = 0; i < want.numel(); ++i) want.f64()[i] += r.loss_grad.get(i);
      finite &= !has_nonfinite(r.loss_grad);
      no_nan &= !has_nan(r.loss_grad);
    }
    if (!want.defined() || contrib.empty()) return;
    if (tol.atol == 0 && tol.rtol == 0) return;
    Judging j{got, want, tol, finite, no_nan};
    j.judge_swallowed = false;  // backward masking of a NaN gradient (relu, where) is a library choice
    Ties ties;
    j.explained = [&](int64_t i, double a) { return convention(cons, vjps, want, i, a, tol, ties); };
    j.spread = [&] {
      const std::vector<Tensor> sens = gradient_spread(cons, vjps, want);
      return sens.empty() ? Tensor() : sens[0];
    };
    // The rounding bound of the consumers' sums (bias and weight gradients sum over the batch and
    // every position).
    j.bound = [&] {
      Tensor bound;
      for (const auto& [c, k] : cons) {
        const Vjp& cv = vjps.at(c->name);
        const Tensor b = sum_magnitude(*c, cv.held, k, &cv.gy);
        if (!b.defined() || b.shape() != want.shape()) continue;
        if (!bound.defined()) bound = zeros_like(want);
        for (int64_t i = 0; i < b.numel(); ++i) bound.f64()[i] += b.get(i);
      }
      return bound;
    };
    j.overflows = [&] {
      for (const auto& [c, k] : cons)
        if (intermediate_overflow(*c, vjps.at(c->name).held, k, &vjps.at(c->name).gy)) return true;
      return false;
    };
    Verdict v = judge_tensor(j, th.dtype);
    if (!v.wrong && !v.produced && !v.swallowed && !keeps_total(value, cons, vjps, got, want, tol)) {
      v.wrong = 1;
      v.distance = std::abs(sum(got) - sum(want));
      v.worst = 0, v.got_at_worst = sum(got), v.want_at_worst = sum(want);
    }
    // Blame: the consumer sending the most where it is worst.
    const int64_t at = v.worst >= 0 ? v.worst : v.first_nonfinite >= 0 ? v.first_nonfinite : v.first_swallowed;
    const ir::Node* blamed = contrib[0].first;
    double most = -1;
    for (const auto& [c, t] : contrib) {
      const double m = at >= 0 && at < t->numel() ? std::abs(t->get(at)) : 0;
      if (std::isnan(m) || m > most) most = std::isnan(m) ? INFINITY : m, blamed = c;
    }
    note(Stage::Backward, blamed, value, ri, v);
  }

  // The spread of a gradient's sum of contributions when every consumer's operands and incoming
  // gradients move by a few units of the run's precision.
  std::vector<Tensor> gradient_spread(const std::vector<std::pair<const ir::Node*, size_t>>& cons,
                                      const std::map<std::string, Vjp>& vjps, const Tensor& want) const {
    Tensor total = zeros_like(want);
    for (const auto& [c, k] : cons) {
      const Vjp& v = vjps.at(c->name);
      if (!v.gin[k].defined()) continue;
      std::vector<Tensor> operands = v.held;
      operands.insert(operands.end(), v.gy.begin(), v.gy.end());
      const std::vector<Tensor> s = spread(operands, {v.gin[k]}, th.dtype, perturbation_ulps(*c, v.held),
                                           c->op + "/grad#" + std::to_string(k), gradient_kernel(*c, k),
                                           ops::op(c->op).float32_orders);
      if (s.empty() || s[0].shape() != total.shape()) return {};
      for (int64_t i = 0; i < total.numel(); ++i) total.f64()[i] += s[0].get(i);
    }
    return {total};
  }

  static double sum(const Tensor& t) {
    double s = 0;
    for (int64_t i = 0; i < t.numel(); ++i) s += t.get(i);
    return s;
  }

  // A deviation at element i that a consumer's convention allows: the element is tied for an
  // extreme (the gradient may go to any of the tied inputs), or sits at a kink whose derivative
  // libraries choose differently and the gradient lies between the two one-sided derivatives.
  // `ties`: each consumer's tied-extreme marks, computed at the first element asked about.
  using Ties = std::map<std::pair<const ir::Node*, size_t>, std::vector<int8_t>>;
  bool convention(const std::vector<std::pair<const ir::Node*, size_t>>& cons,
                  const std::map<std::string, Vjp>& vjps, const Tensor& want, int64_t i, double got,
                  const ops::Tolerance& tol, Ties& ties) const {
    for (const auto& [c, k] : cons) {
      const ops::OpSpec& spec = ops::op(c->op);
      const Vjp& v = vjps.at(c->name);
      if (spec.extremes && k < ir::data_input_count(*c)) {
        auto it = ties.find({c, k});
        if (it == ties.end()) {
          ops::Inputs in;
          for (size_t d = 0; d < ir::data_input_count(*c); ++d) in.push_back(&v.held[d]);
          it = ties.emplace(std::make_pair(c, k), spec.extremes(in, c->attrs, k)).first;
        }
        const std::vector<int8_t>& ext = it->second;
        if (i < static_cast<int64_t>(ext.size()) && ext[static_cast<size_t>(i)] >= ops::OpSpec::kTiedExtreme)
          return true;
      }
      if (spec.kink_derivatives && k == 0 && !v.gy.empty() && v.gin[0].defined() &&
          v.gy[0].shape() == v.held[0].shape() && v.held[0].numel() == want.numel()) {
        const auto range = spec.kink_derivatives(v.held[0].get(i), c->attrs);
        if (!range) continue;
        const double rest = want.get(i) - v.gin[0].get(i);  // what the other consumers send
        const double a = v.gy[0].get(i) * range->first, b = v.gy[0].get(i) * range->second;
        if (std::isnan(a) != std::isnan(b)) {
          // An infinite incoming gradient times one side's zero derivative is NaN, times the other side's derivative
          // infinite: a library's result is either (oneDNN's clip at a bound, 0 * -inf).
          const double side = rest + (std::isnan(a) ? b : a);
          if (std::isnan(got) || got == side) return true;
          continue;
        }
        const double lo = rest + std::min(a, b), hi = rest + std::max(a, b);
        const double scale = std::max({1.0, std::abs(lo), std::abs(hi)});
        if (element_within(got, std::clamp(got, lo, hi), scale, tol)) return true;
      }
    }
    return false;
  }

  // Routing moves gradient among tied inputs, it does not make any: for a value whose only
  // consumer is a one-input operator with ties, the total must be kept, up to the rounding of the
  // incoming gradients' sums (their magnitude: overlapping windows' gradients may cancel).
  bool keeps_total(const std::string& value, const std::vector<std::pair<const ir::Node*, size_t>>& cons,
                   const std::map<std::string, Vjp>& vjps, const Tensor& got, const Tensor& want,
                   const ops::Tolerance& tol) const {
    if (cons.size() != 1 || value == g.outputs[0]) return true;
    const ir::Node& c = *cons[0].first;
    if (!ops::op(c.op).extremes || ir::data_input_count(c) != 1) return true;
    double mass = 0, incoming = 0, sg = 0, sw = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      if (!std::isfinite(want.get(i)) || !std::isfinite(got.get(i))) continue;  // NaN/Inf are judged element-wise
      mass += std::abs(want.get(i));
      sg += got.get(i);
      sw += want.get(i);
    }
    // An infinite or NaN incoming gradient makes the cell it reaches non-finite, and whatever finite gradient a
    // tie routes to that cell in one library and elsewhere in another leaves the finite totals unequal: no total.
    const Vjp& v = vjps.at(c.name);
    for (const Tensor& gy : v.gy)
      for (int64_t i = 0; i < gy.numel(); ++i) {
        if (!std::isfinite(gy.get(i))) return true;
        incoming += std::abs(gy.get(i));
      }
    if (element_within(sg, sw, std::max({1.0, mass, incoming}), tol)) return true;
    // A tie with padding may send a window's gradient nowhere (ops::OpSpec::kTiedWithPadding): no total then.
    if (v.held.empty()) return false;
    const std::vector<int8_t> ext = ops::op(c.op).extremes({&v.held[0]}, c.attrs, 0);
    return std::find(ext.begin(), ext.end(), ops::OpSpec::kTiedWithPadding) != ext.end();
  }

  void findings() {
    // Every library that ran a node disagreeing with the kernel, and agreeing with each other:
    // the reference (or a convention they all share) is suspect; one finding, blamed on it. Two or
    // more libraries: variants of one library (ort, ort:level=all) share its kernels, and their
    // agreement says nothing about the reference.
    std::set<Judged> to_ref;
    std::map<std::tuple<Stage, std::string, std::string>, std::vector<const Judged*>> by_place;
    for (const auto& f : failed)
      if (f.v.wrong && !f.v.produced && !f.v.swallowed) by_place[{f.stage, f.node, f.value}].push_back(&f);
    for (const auto& [place, fs] : by_place) {
      if (fs.size() < 2 || fs.size() != judged[place].size()) continue;
      std::set<std::string> libraries;
      for (const Judged* f : fs) libraries.insert(runs[f->run].backend.substr(0, runs[f->run].backend.find(':')));
      if (libraries.size() < 2) continue;
      const auto& [stage, node, value] = place;
      bool agree = true;
      for (size_t a = 1; a < fs.size() && agree; ++a) {
        const BackendRun &x = runs[fs[0]->run], &y = runs[fs[a]->run];
        const backends::ValueMap& mx = stage == Stage::Backward ? x.grads : x.values;
        const backends::ValueMap& my = stage == Stage::Backward ? y.grads : y.values;
        if (stage == Stage::Loss) {
          agree = std::abs(x.loss - y.loss) <= 1e-3 * std::max(1.0, std::abs(x.loss));
          continue;
        }
        if (!mx.count(value) || !my.count(value)) {
          agree = false;
          continue;
        }
        const ir::Node* n = g.find_node(node);
        const ops::Tolerance tol =
            n ? node_tolerance(g, *n, th.dtype, stage == Stage::Backward) : ops::Tolerance{1e-4, 1e-3};
        agree = compare(mx.at(value), my.at(value), tol).ok;
      }
      if (!agree) continue;
      for (const Judged* f : fs) to_ref.insert(*f);
      Finding r = make(*fs[0], Kind::Inconsistency);
      r.backend = "ref";
      r.against.clear();
      for (const Judged* f : fs) r.against.push_back(runs[f->run].backend);
      r.detail = std::string(to_string(stage)) + " at '" + value + "': every library (" + std::to_string(fs.size()) +
                 ") differs from the float64 kernel on its own inputs in the same way (max " + num(fs[0]->v.distance) +
                 "; at [" + std::to_string(fs[0]->v.worst) + "] " + runs[fs[0]->run].backend + " " +
                 num(fs[0]->v.got_at_worst) + ", kernel " + num(fs[0]->v.want_at_worst) +
                 "): the reference or a shared convention";
      out.push_back(std::move(r));
    }
    // A node whose forward is already wrong on a library computes the gradient of that wrong
    // function: its backward finding is the same bug, not a second one.
    std::set<std::pair<size_t, std::string>> forward_wrong;
    for (const auto& f : failed)
      if (f.stage == Stage::Forward && !to_ref.count(f)) forward_wrong.insert({f.run, f.node});
    // One finding per (run, stage, node, kind): the worst value.
    std::map<std::tuple<size_t, Stage, std::string, Kind>, size_t> seen;
    for (const auto& f : failed) {
      if (to_ref.count(f)) continue;
      if (f.stage == Stage::Backward && forward_wrong.count({f.run, f.node})) continue;
      const Kind kind = f.v.produced ? Kind::NaN : f.v.swallowed ? Kind::NaNSwallowed : Kind::Inconsistency;
      Finding x = make(f, kind);
      auto key = std::make_tuple(f.run, f.stage, f.node, kind);
      auto it = seen.find(key);
      if (it == seen.end()) {
        seen.emplace(key, out.size());
        out.push_back(std::move(x));
      } else if (x.distance > out[it->second].distance) {
        out[it->second] = std::move(x);
      }
    }
  }

  Finding make(const Judged& j, Kind kind) const {
    Finding f;
    f.kind = kind;
    f.stage = j.stage;
    f.backend = runs[j.run].backend;
    f.against = {"ref"};
    const ir::Node* n = j.stage == Stage::Loss ? nullptr : g.find_node(j.node);
    f.node = n ? n->name : "loss";
    f.op = n ? n->op : th.loss_op;
    f.params = n ? key_params(*n) : "";
    f.distance = j.v.distance;
    f.subnormals_flushed = j.v.subnormals_flushed;
    const std::string what = j.stage == Stage::Backward ? "gradient of '" + j.value + "'" : "'" + j.value + "'";
    const std::string stage = to_string(j.stage);
    if (kind == Kind::NaN) {
      f.detail = stage + " NaN/Inf produced at " + what + " (" + std::to_string(j.v.produced) +
                 " elements, first at [" + std::to_string(j.v.first_nonfinite) +
                 "]) where the float64 kernel on the library's own operands (finite, or infinite and none NaN: "
                 "the IEEE/limit result) gives a number";
    } else if (kind == Kind::NaNSwallowed) {
      f.detail = stage + " NaN swallowed at " + what + " (" + std::to_string(j.v.swallowed) +
                 " elements, first at [" + std::to_string(j.v.first_swallowed) +
                 "]): the float64 kernel gives NaN on the library's own operands (it propagates a NaN operand, or "
                 "makes one: 0/0, inf - inf), the library returned a number";
    } else if (j.v.shape_mismatch) {
      f.detail = stage + " wrong shape at " + what;
    } else {
      f.detail = stage + " inconsistency at " + what + ": max |got - want| " + num(j.v.distance) + " (" +
                 std::to_string(j.v.wrong) + " elements beyond the tolerance; at [" + std::to_string(j.v.worst) +
                 "] got " + num(j.v.got_at_worst) + ", want " + num(j.v.want_at_worst) +
                 ") against the float64 kernel on the library's own " +
                 (j.stage == Stage::Backward ? "values and incoming gradients" : "inputs");
    }
    return f;
  }
};

}  // namespace

std::vector<Finding> per_node(const ir::Graph& g, const std::vector<BackendRun>& runs, const Thresholds& th,
                              const backends::ValueMap* inputs, const core::Tensor* target) {
  PerNode p{g, runs, th, inputs, target, nullptr, {}, {}, {}};
  for (const auto& r : runs)
    if (r.is_reference && r.outcome.ok()) p.ref = &r;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].is_reference || runs[i].unsupported) continue;
    p.forward(i);
    p.loss(i);
    p.backward(i);
  }
  p.findings();
  return p.out;
}

}  // namespace quorum::oracle::detail
