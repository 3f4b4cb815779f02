// Reductions over a set of axes: sum, mean, max, min, prod (ONNX ReduceX with the axes as an
// attribute; an empty list reduces every axis). Every kernel maps each input element to its
// output "slot" (its index in the keepdims=1 output) and folds the slot's elements in row-major
// order, which also fixes "first" for the max/min gradient.
#include <algorithm>

#include "ops/kernel_util.h"
#include "ops/onnx_map.h"
#include "ops/registry.h"

namespace quorum::ops {
namespace {

enum class Kind { Sum, Mean, Max, Min, Prod };

// Which axes are reduced, validated: each in range and listed once; keepdims is 0 or 1.
std::vector<bool> reduced_mask(const Shape& s, const Attrs& a) {
  const int rank = static_cast<int>(s.size());
  const auto& axes = core::attr_ints(a, "axes");
  const int64_t keep = core::attr_i(a, "keepdims");
  QUORUM_REQUIRE(keep == 0 || keep == 1, "keepdims must be 0 or 1, got " + std::to_string(keep));
  std::vector<bool> mask(s.size(), axes.empty());
  for (int64_t ax : axes) {
    const auto d = static_cast<size_t>(norm_axis(ax, rank));
    QUORUM_REQUIRE(!mask[d],
                   "axis " + std::to_string(d) + " is listed twice in axes " + core::to_string(AttrValue(axes)));
    mask[d] = true;
  }
  return mask;
}

// The output shape with reduced axes kept as size 1; its flat layout equals the final output's.
Shape keep_shape(const Shape& s, const std::vector<bool>& mask) {
  Shape k = s;
  for (size_t d = 0; d < s.size(); ++d)
    if (mask[d]) k[d] = 1;
  return k;
}

Shape out_shape(const Shape& s, const Attrs& a) {
  const auto mask = reduced_mask(s, a);
  if (core::attr_i(a, "keepdims") == 1) return keep_shape(s, mask);
  Shape o;
  for (size_t d = 0; d < s.size(); ++d)
    if (!mask[d]) o.push_back(s[d]);
  return o;
}

// For every input element, the flat index of the output element it contributes to.
struct Slots {
  std::vector<int64_t> of;  // per input element
  int64_t count = 1;        // output elements
  int64_t per_slot = 1;     // input elements folded into each
};

Slots slots_of(const Shape& s, const Attrs& a) {
  const Shape k = keep_shape(s, reduced_mask(s, a));
  Slots sl;
  // Broadcasting the keepdims shape back to the input maps each input element to its slot.
  sl.of = broadcast_map(k, s);
  sl.count = core::numel(k);
  sl.per_slot = sl.count == 0 ? 0 : core::numel(s) / sl.count;
  return sl;
}

// Index of the first extreme element of every slot (row-major order, strict comparison).
std::vector<int64_t> first_extreme(const Tensor& x, const Slots& sl, bool max) {
  std::vector<int64_t> arg(static_cast<size_t>(sl.count), -1);
  const double* xp = x.f64();
  for (size_t i = 0; i < sl.of.size(); ++i) {
    int64_t& best = arg[static_cast<size_t>(sl.of[i])];
    const double v = xp[i];
    if (best < 0 || beats_extreme(v, xp[best], max)) best = static_cast<int64_t>(i);
  }
  return arg;
}

// The range of a slot's partial products (ops::stored_product): the product of its factors above 1
// in size, and of its nonzero factors below 1 (1 if a factor is zero: every order gives 0).
struct Extent {
  double largest = 1, smallest = 1;
  bool zero = false;
};
std::vector<Extent> product_extents(const Tensor& x, const Slots& sl) {
  std::vector<Extent> ext(static_cast<size_t>(sl.count));
  const double* xp = x.f64();
  for (size_t i = 0; i < sl.of.size(); ++i) {
    Extent& e = ext[static_cast<size_t>(sl.of[i])];
    const double m = std::abs(xp[i]);
    if (m > 1)
      e.largest *= m;
    else if (m == 0)
      e.zero = true;
    else if (m < 1)
      e.smallest *= m;
  }
  for (auto& e : ext)
    if (e.zero) e.smallest = 1;
  return ext;
}

Tensor reduce_forward(Kind kind, const Tensor& x, const Attrs& a) {
  const Slots sl = slots_of(x.shape(), a);
  Tensor y(DType::F64, out_shape(x.shape(), a));
  double* yp = y.f64();
  const double* xp = x.f64();
  switch (kind) {
    case Kind::Sum:
    case Kind::Mean: {
      if (const std::optional<Float32Order> order = float32_evaluation()) {
        // The float32 evaluation: each slot's sum in float32, in order or in lanes, the mean's division too.
        const std::vector<double> sums = float32_slot_sums(x, sl.of, sl.count, *order);
        for (int64_t k = 0; k < sl.count; ++k) {
          const double sum = sums[static_cast<size_t>(k)];
          yp[k] = kind == Kind::Sum ? sum : quotient(sum, sl.per_slot, true);
        }
        break;
      }
      // Each slot's sum is a float32 sum in a float32 implementation (ops::stored_sum): rounded and moved by
      // its rounding error, which grows with its terms' magnitude, not its result's (a slot holding -1e6 and
      // 1e6 beside small values: ONNX Runtime's ReduceMean sums in an order set by the row's alignment, so a
      // sample's mean moved with its position in the batch by one rounding at 1e6, seed 6271).
      std::vector<double> magnitude(static_cast<size_t>(sl.count), 0.0);
      for (size_t i = 0; i < sl.of.size(); ++i) {
        yp[sl.of[i]] += xp[i];
        if (std::isfinite(xp[i])) magnitude[static_cast<size_t>(sl.of[i])] += std::abs(xp[i]);
      }
      for (int64_t k = 0; k < sl.count; ++k) {
        yp[k] = stored_sum(yp[k], magnitude[static_cast<size_t>(k)], sl.per_slot);
        if (kind == Kind::Mean) yp[k] /= static_cast<double>(sl.per_slot);
      }
      break;
    }
    case Kind::Prod: {
      y.fill(1.0);
      for (size_t i = 0; i < sl.of.size(); ++i) yp[sl.of[i]] *= xp[i];
      const std::vector<Extent> ext = product_extents(x, sl);
      for (int64_t k = 0; k < sl.count; ++k) {
        const Extent& e = ext[static_cast<size_t>(k)];
        yp[k] = stored_product(yp[k], e.largest, e.smallest);
      }
      break;
    }
    case Kind::Max:
    case Kind::Min: {
      const auto arg = first_extreme(x, sl, kind == Kind::Max);
      for (int64_t k = 0; k < sl.count; ++k) yp[k] = xp[arg[static_cast<size_t>(k)]];
      break;
    }
  }
  return y;
}

// d prod / d x_i is the product of the slot's other elements. It is built from prefix and suffix
// products rather than prod / x_i, so zeros in the input are handled exactly.
Tensor prod_vjp(const Tensor& x, const Slots& sl, const double* gy) {
  std::vector<std::vector<int64_t>> members(static_cast<size_t>(sl.count));
  for (size_t i = 0; i < sl.of.size(); ++i) members[static_cast<size_t>(sl.of[i])].push_back(static_cast<int64_t>(i));
  Tensor gx(DType::F64, x.shape());
  const double* xp = x.f64();
  double* gxp = gx.f64();
  // Each gradient is a product of the incoming gradient and the other factors, in an order the
  // implementation chooses (prod / x_i, or prefix and suffix products): a stored product.
  const std::vector<Extent> ext = product_extents(x, sl);
  for (int64_t k = 0; k < sl.count; ++k) {
    const auto& m = members[static_cast<size_t>(k)];
    const Extent& e = ext[static_cast<size_t>(k)];
    const double g = std::abs(gy[k]);
    std::vector<double> suffix(m.size() + 1, 1.0);  // suffix[j] = product of m[j..]
    for (size_t j = m.size(); j-- > 0;) suffix[j] = suffix[j + 1] * xp[m[j]];
    double prefix = 1.0;  // product of m[..j)
    for (size_t j = 0; j < m.size(); ++j) {
      gxp[m[j]] = stored_product(gy[k] * prefix * suffix[j + 1], e.largest * std::max(1.0, g),
                                 g == 0 || e.zero ? 1.0 : e.smallest * std::min(1.0, g));
      prefix *= xp[m[j]];
    }
  }
  return gx;
}

Tensor reduce_vjp(Kind kind, const Tensor& x, const Attrs& a, const Tensor& g) {
  const Slots sl = slots_of(x.shape(), a);
  const double* gy = g.f64();
  if (kind == Kind::Prod) return prod_vjp(x, sl, gy);
  Tensor gx(DType::F64, x.shape());
  double* gxp = gx.f64();
  switch (kind) {
    case Kind::Sum:
      for (size_t i = 0; i < sl.of.size(); ++i) gxp[i] = gy[sl.of[i]];
      break;
    case Kind::Mean: {
      const bool in_float32 = float32_evaluation().has_value();
      for (size_t i = 0; i < sl.of.size(); ++i) gxp[i] = quotient(gy[sl.of[i]], sl.per_slot, in_float32);
      break;
    }
    case Kind::Max:
    case Kind::Min: {
      const auto arg = first_extreme(x, sl, kind == Kind::Max);
      for (int64_t k = 0; k < sl.count; ++k) gxp[arg[static_cast<size_t>(k)]] = gy[k];
      break;
    }
    case Kind::Prod:
      break;  // handled above
  }
  return gx;
}

OpSpec make_reduce(const std::string& name, Kind kind, const std::string& doc) {
  OpSpec s;
  s.name = name;
  s.family = "reduce";
  s.doc = doc;
  s.tags = {"reduce"};
  s.mixes_batch = [](const std::vector<TensorType>& in, const Attrs& a) {
    return !in[0].shape.empty() && reduced_mask(in[0].shape, a)[0];
  };
  s.attrs = {
      ints_attr("axes", {}, -kInf, kInf, {AttrValue(std::vector<int64_t>{64}), AttrValue(std::vector<int64_t>{0, 0})},
                "axes to reduce, negative counts from the end, each at most once; [] (the default) reduces "
                "every axis"),
      int_enum_attr("keepdims", 1, {0, 1}, {2, -1}, "1 keeps reduced axes as size 1, 0 removes them"),
  };
  s.infer = [kind, name](const std::vector<TensorType>& in, const Attrs& a) {
    QUORUM_REQUIRE(in.size() == 1, "takes exactly 1 input, got " + std::to_string(in.size()));
    const DType dt = common_float_dtype(in);
    // An empty slot has no extreme element (sum, mean and prod have identities).
    if (kind == Kind::Max || kind == Kind::Min)
      QUORUM_REQUIRE(core::numel(in[0].shape) > 0, name + " of an empty tensor is undefined");
    return Signature{{TensorType{dt, out_shape(in[0].shape, a)}}, {}};
  };
  s.forward = [kind](const Inputs& in, const Attrs& a) { return std::vector<Tensor>{reduce_forward(kind, *in[0], a)}; };
  if (kind == Kind::Sum || kind == Kind::Mean) s.float32_orders = {Float32Order::kInOrder, Float32Order::kLanes};
  s.vjp = [kind](const Inputs& in, const Attrs& a, const std::vector<Tensor>&, const std::vector<Tensor>& g) {
    return std::vector<Tensor>{reduce_vjp(kind, *in[0], a, g[0])};
  };
  // The number of input elements folded into each output element.
  s.reduction_length = [](const std::vector<TensorType>& in, const Attrs& a) -> int64_t {
    try {
      return slots_of(in[0].shape, a).per_slot;
    } catch (const core::OpError&) {
      return 1;  // invalid attributes: the shape rule reports them
    }
  };
  // Sums grow with the slot's length; means and extremes stay within the input's range; products
  // keep no bound (null: unbounded).
  if (kind != Kind::Prod)
    s.range = [kind](const std::vector<Interval>& in, const std::vector<TensorType>& t, const Attrs& a) {
      if (kind != Kind::Sum) return std::vector<Interval>{in[0]};
      int64_t n = 1;
      try {
        n = slots_of(t[0].shape, a).per_slot;
      } catch (const core::OpError&) {
        return std::vector<Interval>{Interval{}};
      }
      return std::vector<Interval>{sum_of(in[0], static_cast<double>(n))};
    };
  const bool is_prod = kind == Kind::Prod;
  s.sample = [is_prod](core::Rng& rng) {
    // Products of many factors under/overflow, so prod gets smaller tensors and values near 1 in size.
    const int rank = static_cast<int>(rng.randint(1, is_prod ? 3 : 4));
    Case c;
    c.inputs = {f64t(random_shape(rng, rank, 1, is_prod ? 4 : 5))};
    std::vector<int64_t> axes;
    if (!rng.bernoulli(0.25)) {
      for (int d = 0; d < rank; ++d)
        if (rng.bernoulli(0.5)) axes.push_back(rng.bernoulli(0.3) ? d - rank : d);
      if (axes.empty()) axes.push_back(rng.randint(-rank, rank - 1));
      rng.shuffle(axes);
    }
    c.attrs["axes"] = axes;
    c.attrs["keepdims"] = static_cast<int64_t>(rng.randint(0, 1));
    c.gen = {is_prod ? InputGen{-1.5, 1.5} : InputGen{}};
    return c;
  };
  if (kind == Kind::Max || kind == Kind::Min) {
    // The elements equal to their slot's extreme: sole, or tied when two or more are.
    s.extremes = [kind](const Inputs& in, const Attrs& a, size_t) {
      const Tensor& x = *in[0];
      const Slots sl = slots_of(x.shape(), a);
      const auto arg = first_extreme(x, sl, kind == Kind::Max);
      auto is_ext = [&](size_t i) {
        return attains_extreme(x.get(static_cast<int64_t>(i)), x.get(arg[static_cast<size_t>(sl.of[i])]));
      };
      std::vector<int> count(static_cast<size_t>(sl.count), 0);
      for (size_t i = 0; i < sl.of.size(); ++i) count[static_cast<size_t>(sl.of[i])] += is_ext(i);
      std::vector<int8_t> ext(sl.of.size(), OpSpec::kNotExtreme);
      for (size_t i = 0; i < sl.of.size(); ++i)
        if (is_ext(i)) ext[i] = count[static_cast<size_t>(sl.of[i])] > 1 ? OpSpec::kTiedExtreme : OpSpec::kSoleExtreme;
      return ext;
    };
  }
  return s;
}

// ---- ONNX mapping: ReduceX. ReduceSum takes its axes as an input from opset 13, the others from
// opset 18 (as an attribute before). Forms: keepdims=1 written or left to its default.

void set_onnx(OpSpec& s, const std::string& type) {
  const std::string op = s.name;
  s.onnx_export = [type](OnnxExport& e) {
    const auto& axes = e.aints("axes");
    OnnxNode* p = nullptr;
    if (type == "ReduceSum" && e.opset() >= 13) {
      p = axes.empty() ? &e.final_node(type, {e.in(0)}) : &e.final_node(type, {e.in(0), e.ints(axes, "axes")});
    } else {
      p = &e.final_node(type, {e.in(0)});
      if (!axes.empty()) p->set_ints("axes", axes);
    }
    // keepdims=1 written, or left to its default.
    if (e.ai("keepdims") != 1 || !e.choose2("keepdims", "written", "default")) p->set_i("keepdims", e.ai("keepdims"));
  };
  s.onnx_import = {{{type}, [op, type](OnnxImport& m) {
                      const bool axes_input = type == "ReduceSum" ? m.opset() >= 13 : m.opset() >= 18;
                      const std::vector<int64_t> axes =
                          axes_input ? (m.present(1) ? m.const_ints(1, "axes") : std::vector<int64_t>{})
                                     : m.getints("axes");
                      if (axes.empty() && m.geti("noop_with_empty_axes", 0) != 0)
                        m.fail("noop_with_empty_axes=1 is not supported");
                      m.emit_final(op, {m.in(0)}, {{"axes", axes}, {"keepdims", m.geti("keepdims", 1)}});
                    }}};
}

}  // namespace

void register_reduce(Registry& r) {
  auto add = [&r](OpSpec s, const std::string& onnx_type) {
    set_onnx(s, onnx_type);
    r.add(std::move(s));
  };
  add(make_reduce("reduce_sum", Kind::Sum, "sum over `axes`"), "ReduceSum");
  add(make_reduce("reduce_mean", Kind::Mean, "arithmetic mean over `axes`"), "ReduceMean");
  add(make_reduce("reduce_max", Kind::Max,
                  "maximum over `axes`; the gradient goes to the first maximal element in row-major order"),
      "ReduceMax");
  add(make_reduce("reduce_min", Kind::Min,
                  "minimum over `axes`; the gradient goes to the first minimal element in row-major order"),
      "ReduceMin");
  add(make_reduce("reduce_prod", Kind::Prod,
                  "product over `axes`; the gradient is the product of the other elements (exact at zeros)"),
      "ReduceProd");
}

}  // namespace quorum::ops
