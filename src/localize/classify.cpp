#include "localize/classify.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "ops/registry.h"
#include "oracle/spread.h"

namespace quorum::localize {

namespace {


bool categorical(const ir::Node& n, const std::string& attr) {
  for (const auto& a : ops::op(n.op).attrs)
    if (a.name == attr) return !a.choices.empty();
  return false;
}

bool subnormal(double v, core::DType dtype) {
  const double least_normal = dtype == core::DType::F32 ? 0x1p-126 : 0x1p-1022;
  return v != 0 && std::isfinite(v) && std::abs(v) < least_normal;
}

// Whether the library's results equal the kernel's on `replaced` operands wherever they differ
// from the kernel's on the recorded ones (at least one such element), results flushed as `flush`.
bool explained_by(const Kernel& kernel, const std::vector<core::Tensor>& operands,
                  const std::vector<core::Tensor>& replaced, const std::vector<core::Tensor>& got,
                  const ops::Tolerance& tol, const std::function<double(double)>& flush) {
  std::vector<core::Tensor> want, alt;
  try {
    want = kernel(operands);
    alt = kernel(replaced);
  } catch (const std::exception&) {
    return false;
  }
  if (want.size() < got.size() || alt.size() < got.size()) return false;
  auto same = [&](double a, double r) {
    if (std::isnan(a) || std::isnan(r)) return std::isnan(a) && std::isnan(r);
    return a == r || std::abs(a - r) <= tol.atol + tol.rtol * std::abs(r);
  };
  int64_t differing = 0;
  for (size_t k = 0; k < got.size(); ++k) {
    if (got[k].numel() != want[k].numel() || alt[k].numel() != want[k].numel()) return false;
    for (int64_t i = 0; i < got[k].numel(); ++i) {
      const double a = got[k].get(i);
      if (same(a, want[k].get(i))) continue;
      ++differing;
      if (!same(a, flush(alt[k].get(i)))) return false;
    }
  }
  return differing > 0;
}

// Whether `run` gives the same NaN or infinity at every element where `got` is non-finite (at least one),
// shapes alike.
bool nonfinite_where(const std::vector<core::Tensor>& run, const std::vector<core::Tensor>& got) {
  if (run.size() < got.size()) return false;
  int64_t nonfinite = 0;
  for (size_t k = 0; k < got.size(); ++k) {
    if (run[k].numel() != got[k].numel()) return false;
    for (int64_t i = 0; i < got[k].numel(); ++i) {
      const double a = got[k].get(i), r = run[k].get(i);
      if (std::isfinite(a)) continue;
      if (!(a == r || (std::isnan(a) && std::isnan(r)))) return false;
      ++nonfinite;
    }
  }
  return nonfinite > 0;
}

}  // namespace

ClassGuess guess_class(core::FindingKind kind, const ir::Node& node, const Kernel& kernel,
                       const std::vector<core::Tensor>& operands, const std::vector<core::Tensor>& got,
                       const ops::Tolerance& tol, core::DType dtype, const std::vector<std::string>& causes) {
  ClassGuess g;
  const bool all_categorical = !causes.empty() && std::all_of(causes.begin(), causes.end(), [&](const std::string& a) {
    return categorical(node, a);
  });
  // Denormals are zero / flush to zero: the library's results are the kernel's with subnormal
  // operands taken as 0 and subnormal results flushed (a CPU mode many engines set, by design).
  if (core::info(kind).numeric) {
    std::vector<core::Tensor> daz = operands;
    bool any = false;
    for (auto& o : daz) {
      o = o.to(core::DType::F64);
      for (int64_t i = 0; i < o.numel(); ++i)
        if (subnormal(o.get(i), dtype)) o.f64()[i] = std::copysign(0.0, o.get(i)), any = true;
    }
    auto ftz = [dtype](double v) { return subnormal(v, dtype) ? std::copysign(0.0, v) : v; };
    if ((any && explained_by(kernel, operands, daz, got, tol, ftz)) ||
        (!any && explained_by(kernel, operands, operands, got, tol, ftz))) {
      g.cls = "convention";
      g.why = "the results are those with subnormal operands taken as 0 and subnormal results flushed to 0 "
              "(denormals-are-zero / flush-to-zero, a floating-point mode set by design)";
      return g;
    }
  }
  if (kind == core::FindingKind::Crash) {
    g.cls = "bug";
    g.why = "the library fails (crash, abort or error) on a model the catalogue defines";
    return g;
  }
  if (kind == core::FindingKind::NaNSwallowed) {
    // A library that treats a NaN operand as -inf (IEEE maxNum / fmax semantics: relu(NaN) = 0, a max
    // pool skipping NaN, clip to its lower bound) follows a documented convention; any other number
    // (inf from exp(NaN), a running maximum reset by NaN) is a bug.
    std::vector<core::Tensor> want, as_neg_inf;
    std::vector<core::Tensor> replaced = operands;
    for (auto& o : replaced) {
      o = o.to(core::DType::F64);
      for (int64_t i = 0; i < o.numel(); ++i)
        if (std::isnan(o.get(i))) o.f64()[i] = -INFINITY;
    }
    try {
      want = kernel(operands);
      as_neg_inf = kernel(replaced);
    } catch (const std::exception&) {
    }
    bool convention = want.size() >= got.size() && as_neg_inf.size() >= got.size();
    int64_t swallowed = 0;
    for (size_t k = 0; convention && k < got.size(); ++k)
      for (int64_t i = 0; i < got[k].numel() && i < want[k].numel(); ++i) {
        if (!std::isnan(want[k].get(i)) || std::isnan(got[k].get(i))) continue;
        ++swallowed;
        const double a = got[k].get(i), r = as_neg_inf[k].get(i);
        if (!(a == r || std::abs(a - r) <= tol.atol + tol.rtol * std::abs(r))) convention = false;
      }
    g.cls = convention && swallowed > 0 ? "convention" : "bug";
    g.why =
        g.cls == "convention"
            ? "a NaN operand is treated as -inf (IEEE maxNum/fmax semantics): a documented NaN policy, not an error"
            : "a NaN operand gives a number that no NaN policy explains (not the result with the NaN taken as -inf)";
    return g;
  }
  if (kind == core::FindingKind::NaN) {
    // The kernel's own float32 evaluation (ops::Float32Evaluation) gives NaN/Inf wherever the library does.
    if (dtype == core::DType::F32)
      for (const oracle::Float32Run& r : oracle::float32_runs(operands, ops::op(node.op).float32_orders, kernel))
        if (nonfinite_where(r.out, got)) {
          g.cls = "precision";
          g.why = std::string("the kernel evaluated in ") + ops::float32_order_name(r.order) +
                  " gives the library's NaN/Inf wherever it has one: an intermediate leaves float32's range "
                  "although the exact result does not";
          return g;
        }
    double biggest = 0;
    for (const auto& o : operands)
      for (int64_t i = 0; i < o.numel(); ++i)
        if (std::isfinite(o.get(i))) biggest = std::max(biggest, std::abs(o.get(i)));
    if (dtype == core::DType::F32 && biggest >= kRangeEdge) {
      g.cls = "precision";
      g.why = "NaN/Inf from operands as large as " + std::to_string(biggest) +
              ": an intermediate (a square, a product, a scaled value) leaves float32's range although the exact "
              "result does not";
    } else {
      g.cls = "bug";
      g.why = "NaN/Inf where the float64 result on the same operands is finite and within float32's range";
    }
    return g;
  }
  // Inconsistency: how far beyond float32's own spread at these operands.
  std::vector<core::Tensor> want;
  try {
    want = kernel(operands);
  } catch (const std::exception&) {
  }
  if (want.size() < got.size()) {
    g.cls = "bug";
    g.why = "the kernel could not be re-run on the recorded operands";
    return g;
  }
  // The oracle's float32 spread (oracle/spread.h), the one every verdict uses.
  const double u = oracle::unit_roundoff(dtype);
  std::vector<core::Tensor> spread =
      oracle::spread(operands, want, dtype, oracle::perturbation_ulps(node, operands), node.op + "/classify", kernel,
                     ops::op(node.op).float32_orders);
  if (spread.size() < got.size()) {
    spread.clear();
    for (size_t k = 0; k < got.size(); ++k) spread.emplace_back(core::DType::F64, want[k].shape());
  }
  double worst = 0;
  bool nonfinite = false;
  for (size_t k = 0; k < got.size(); ++k) {
    if (got[k].numel() != want[k].numel()) return {"bug", "the library's result has another shape", INFINITY};
    for (int64_t i = 0; i < got[k].numel(); ++i) {
      const double a = got[k].get(i), w = want[k].get(i);
      if (!std::isfinite(a) || !std::isfinite(w)) {
        nonfinite |= (std::isnan(a) != std::isnan(w)) || (std::isinf(a) && a != w);
        continue;
      }
      const double d = std::abs(a - w);
      const double allowed = tol.atol + tol.rtol * std::abs(w);
      if (d <= allowed) continue;
      // The spread float32 allows here: the perturbation's, and at least one unit in the last place of the result.
      const double s = std::max({spread[k].get(i), u * std::abs(w), allowed});
      worst = std::max(worst, d / s);
    }
  }
  g.excess = nonfinite ? INFINITY : worst;
  std::ostringstream why;
  if (!nonfinite && worst <= kPrecisionSpreads) {
    g.cls = "precision";
    why << "the largest difference is " << std::setprecision(3) << worst
        << " times what float32 allows at these operands (the float32 spread: operands moved by a few ulps, "
           "intermediates held in float32): the operator is ill-conditioned here";
  } else if (all_categorical) {
    g.cls = "convention";
    why << "only a mode or flag of the operator selects it (" << causes.front()
        << "): an implementation difference to document, unless the library's own documentation says otherwise";
  } else {
    g.cls = "bug";
    if (nonfinite) why << "a NaN/Inf differs from the float64 result";
    else
      why << "the largest difference is " << std::setprecision(3) << worst
          << " times what float32 allows at these operands";
    if (!causes.empty()) why << "; the parameter " << causes.front() << " selects it";
  }
  g.why = why.str();
  return g;
}

}  // namespace quorum::localize
