#include "oracle/spread.h"

#include <algorithm>
#include <cmath>

#include "core/rng.h"
#include "ops/op_spec.h"
#include "ops/registry.h"

namespace quorum::oracle {

using core::DType;
using core::Tensor;

namespace {
Tensor zeros_like(const Tensor& t) { return Tensor(DType::F64, t.shape()); }
}  // namespace

double perturbation_ulps(const ir::Node& n, const std::vector<Tensor>& held) {
  const ops::OpSpec& spec = ops::op(n.op);
  // A quantized operator's operands are held exactly (integers, or the float32 value quantize_linear divides):
  // its float32 roundings are its kernel's marks (ops::real_to_round), and a moved operand would move a tie.
  if (spec.is_quantized) return 0;
  if (!spec.reduction_length) return kUlps;
  std::vector<core::TensorType> data;
  for (size_t i = 0; i < ir::data_input_count(n) && i < held.size(); ++i) data.push_back(held[i].type());
  try {
    return kUlps * std::sqrt(static_cast<double>(std::max<int64_t>(1, spec.reduction_length(data, n.attrs))));
  } catch (const std::exception&) {
    return kUlps;
  }
}

double unit_roundoff(DType dtype) { return dtype == DType::F32 ? 0x1p-24 : 0x1p-53; }

namespace {

// The spread's seed: the operator (with what is judged: an output, an input's gradient) and every
// operand's shape and values; never a node's name.
uint64_t spread_seed(const std::string& what, const std::vector<Tensor>& operands) {
  uint64_t h = core::fnv1a(what);
  auto mix = [&](const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  for (const auto& o : operands) {
    for (const int64_t d : o.shape()) mix(&d, sizeof d);
    for (int64_t i = 0; i < o.numel(); ++i) {
      const double v = o.get(i);
      mix(&v, sizeof v);
    }
  }
  return h;
}

}  // namespace

std::vector<Float32Run> float32_runs(const std::vector<Tensor>& operands, const std::vector<ops::Float32Order>& orders,
                                    const SpreadKernel& f) {
  std::vector<Float32Run> runs;
  for (const ops::Float32Order order : orders) {
    Float32Run r{order, {}};
    try {
      const ops::Float32Evaluation scope(order);
      r.out = f(operands);
    } catch (const std::exception&) {
      // The kernel refuses these operands in float32: the run stays empty.
    }
    runs.push_back(std::move(r));
  }
  return runs;
}

std::vector<Tensor> spread(const std::vector<Tensor>& operands, const std::vector<Tensor>& base, DType dtype,
                           double ulps, const std::string& what, const SpreadKernel& f,
                           const std::vector<ops::Float32Order>& orders) {
  const double u = unit_roundoff(dtype);
  std::vector<Tensor> s;
  for (const auto& b : base) s.push_back(zeros_like(b));
  // One trial's results against the base; false when they change shape.
  auto take = [&](const std::vector<Tensor>& out) {
    for (size_t k = 0; k < s.size() && k < out.size(); ++k) {
      if (out[k].shape() != s[k].shape()) return false;
      for (int64_t i = 0; i < s[k].numel(); ++i) {
        const double d = std::abs(out[k].get(i) - base[k].get(i));
        if (std::isfinite(base[k].get(i))) s[k].f64()[i] = std::max(s[k].f64()[i], std::isnan(d) ? INFINITY : d);
        // An infinite kernel result that a trial makes anything else is not exact: NaN (a product
        // whose partial products leave float32's range in some order, the float64 product itself
        // overflowing) or a number (a discrete choice moved off an infinite operand: a nearest
        // resize's tie beside an inf cell); nor is a NaN that a trial makes a number (the same
        // choice moved off a NaN operand). (|trial - base| is NaN or inf there, so it is not taken.)
        else if ((std::isinf(base[k].get(i)) && out[k].get(i) != base[k].get(i)) ||
                 (std::isnan(base[k].get(i)) && !std::isnan(out[k].get(i))))
          s[k].f64()[i] = INFINITY;
      }
    }
    return true;
  };
  core::Rng rng(spread_seed(what, operands));
  for (int t = 0; t < kTrials; ++t) {
    // 1: every stored value down; 2: up, statistics too; 3 and 4: the same with odd lanes the other way.
    const int direction = t == 1 || t == 3 ? -1 : t == 2 || t == 4 ? 1 : 0;
    ops::StoredPrecision stored(dtype == DType::F32, u, t > 0, t == 2 || t == 4 || t >= kExactOperandTrials, rng,
                                direction, t == 3 || t == 4);
    std::vector<Tensor> p;
    for (const auto& o : operands) {
      Tensor q = o.to(DType::F64);
      if (t >= kExactOperandTrials)
        for (int64_t i = 0; i < q.numel(); ++i) q.f64()[i] *= 1 + rng.uniform(-1.0, 1.0) * ulps * u;
      p.push_back(std::move(q));
    }
    std::vector<Tensor> out;
    try {
      out = f(p);
    } catch (const std::exception&) {
      return {};
    }
    if (!take(out)) return {};
  }
  // The kernel's own float32 evaluations on the exact operands: what float32 arithmetic makes of the formula.
  if (dtype == DType::F32)
    for (const Float32Run& r : float32_runs(operands, orders, f))
      if (!r.out.empty() && !take(r.out)) return {};
  return s;
}

}  // namespace quorum::oracle
