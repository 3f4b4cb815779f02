// Merging operators: elementwise arithmetic on two inputs with NumPy broadcasting (add, sub, mul,
// div, maximum, minimum), the variadic broadcasting sum, and concatenation along an axis.
// The two-input ops are a table of f(a, b) with its partial derivatives; the VJP evaluates them
// on the broadcast grid and sums each gradient back down to its input's shape.
#include <algorithm>
#include <map>
#include <utility>

#include "ops/kernel_util.h"
#include "ops/onnx_map.h"
#include "ops/registry.h"

namespace quorum::ops {
namespace {

using Fn2 = double (*)(double a, double b);

struct BinaryDef {
  std::string name;
  std::string doc;
  Fn2 f;
  Fn2 da;  // df/da
  Fn2 db;  // df/db
  InputGen gen_b = {};
  std::vector<ValidRange> ranges = {};
};

// Two shapes that broadcast together, in one of four patterns: equal; one a lower-rank suffix of
// the other with some sizes set to 1 (e.g. [2,3,4] with [3,1]); a single element [1]; or mutual
// broadcasting where each side is 1 on axes the other keeps (e.g. [2,1,4] with [1,3,4]).
std::pair<Shape, Shape> sample_broadcast_pair(core::Rng& rng) {
  const Shape full = random_shape(rng, static_cast<int>(rng.randint(1, 4)), 1, 4);
  Shape a = full, b = full;
  switch (rng.randint(0, 3)) {
    case 0:
      break;
    case 1: {
      const auto drop = static_cast<size_t>(rng.randint(0, static_cast<int64_t>(full.size()) - 1));
      b.assign(full.begin() + static_cast<std::ptrdiff_t>(drop), full.end());
      for (auto& d : b)
        if (rng.bernoulli(0.4)) d = 1;
      break;
    }
    case 2:
      b = {1};
      break;
    default:
      for (size_t i = 0; i < full.size(); ++i)
        if (rng.bernoulli(0.6)) (rng.bernoulli(0.5) ? a : b)[i] = 1;
      break;
  }
  if (rng.bernoulli(0.5)) std::swap(a, b);
  return {a, b};
}

// Static value ranges (OpSpec::range) of the two-input operators, on the operands' intervals.
using IntervalFn2 = Interval (*)(const Interval& a, const Interval& b);
const std::map<std::string, IntervalFn2>& binary_ranges() {
  static const std::map<std::string, IntervalFn2> m = {
      {"add", add},
      {"sub", sub},
      {"mul", mul},
      {"div", div},
      {"maximum",
       [](const Interval& a, const Interval& b) {
         return Interval{std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
       }},
      {"minimum",
       [](const Interval& a, const Interval& b) {
         return Interval{std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
       }},
  };
  return m;
}

OpSpec make_binary(const BinaryDef& d) {
  OpSpec s;
  s.name = d.name;
  s.family = "binary";
  s.doc = d.doc + " (NumPy broadcasting)";
  s.min_inputs = s.max_inputs = 2;
  s.tags = {"merge"};
  s.valid_ranges = d.ranges;
  if (!d.ranges.empty()) s.tags.push_back("vulnerable");
  const IntervalFn2 rule = binary_ranges().at(d.name);
  s.range = [rule](const std::vector<Interval>& in, const std::vector<TensorType>&, const Attrs&) {
    return std::vector<Interval>{rule(in[0], in[1])};
  };
  const std::string name = d.name;
  s.infer = [name](const std::vector<TensorType>& in, const Attrs&) {
    QUORUM_REQUIRE(in.size() == 2, name + " takes exactly 2 inputs, got " + std::to_string(in.size()));
    const DType dt = common_float_dtype(in);
    return Signature{{TensorType{dt, broadcast_shapes(in[0].shape, in[1].shape)}}, {}};
  };
  const Fn2 f = d.f, da = d.da, db = d.db;
  s.forward = [f](const Inputs& in, const Attrs&) {
    const Shape out_shape = broadcast_shapes(in[0]->shape(), in[1]->shape());
    const auto ma = broadcast_map(in[0]->shape(), out_shape);
    const auto mb = broadcast_map(in[1]->shape(), out_shape);
    Tensor y(DType::F64, out_shape);
    const double* a = in[0]->f64();
    const double* b = in[1]->f64();
    double* yp = y.f64();
    for (size_t i = 0; i < ma.size(); ++i) yp[i] = f(a[ma[i]], b[mb[i]]);
    return std::vector<Tensor>{y};
  };
  s.vjp = [da, db](const Inputs& in, const Attrs&, const std::vector<Tensor>& out, const std::vector<Tensor>& g) {
    const Shape& out_shape = out[0].shape();
    const auto ma = broadcast_map(in[0]->shape(), out_shape);
    const auto mb = broadcast_map(in[1]->shape(), out_shape);
    // Gradients on the broadcast grid first; sum_to then folds the broadcast axes.
    Tensor ga(DType::F64, out_shape), gb(DType::F64, out_shape);
    const double* a = in[0]->f64();
    const double* b = in[1]->f64();
    const double* gy = g[0].f64();
    for (size_t i = 0; i < ma.size(); ++i) {
      const double av = a[ma[i]], bv = b[mb[i]];
      ga.f64()[i] = gy[i] * da(av, bv);
      gb.f64()[i] = gy[i] * db(av, bv);
    }
    return std::vector<Tensor>{sum_to(ga, in[0]->shape()), sum_to(gb, in[1]->shape())};
  };
  const InputGen gen_b = d.gen_b;
  s.sample = [gen_b](core::Rng& rng) {
    auto [a, b] = sample_broadcast_pair(rng);
    Case c;
    c.inputs = {f64t(a), f64t(b)};
    c.gen = {InputGen{}, gen_b};
    return c;
  };
  if (d.name == "maximum" || d.name == "minimum") {
    // An operand is the sole extreme where it is > (maximum) or < (minimum) the other, tied where
    // they are equal, after broadcasting.
    const bool is_max = d.name == "maximum";
    s.extremes = [is_max](const Inputs& in, const Attrs&, size_t input) {
      const Shape out = broadcast_shapes(in[0]->shape(), in[1]->shape());
      const std::vector<int64_t> ma = broadcast_map(in[0]->shape(), out), mb = broadcast_map(in[1]->shape(), out);
      std::vector<int8_t> ext(static_cast<size_t>(in[input]->numel()), OpSpec::kNotExtreme);
      for (size_t o = 0; o < ma.size(); ++o) {
        const double mine = input == 0 ? in[0]->get(ma[o]) : in[1]->get(mb[o]);
        const double other = input == 0 ? in[1]->get(mb[o]) : in[0]->get(ma[o]);
        int8_t& e = ext[static_cast<size_t>(input == 0 ? ma[o] : mb[o])];
        if (mine == other)
          e = OpSpec::kTiedExtreme;
        else if (is_max ? mine > other : mine < other)
          e = std::max(e, int8_t{OpSpec::kSoleExtreme});
      }
      return ext;
    };
  }
  return s;
}

std::vector<BinaryDef> binaries() {
  const std::string div_why = "division by zero gives inf or NaN";
  return {
      {"add", "a + b", [](double a, double b) { return a + b; }, [](double, double) { return 1.0; },
       [](double, double) { return 1.0; }},
      {"sub", "a - b", [](double a, double b) { return a - b; }, [](double, double) { return 1.0; },
       [](double, double) { return -1.0; }},
      {"mul", "a * b", [](double a, double b) { return a * b; }, [](double, double b) { return b; },
       [](double a, double) { return a; }},
      {"div",
       "a / b",
       [](double a, double b) { return a / b; },
       [](double, double b) { return 1.0 / b; },
       // The quotient a / b / b is held in float32 (libtorch: -grad * ((a / b) / b)): it overflows
       // for a subnormal b where the gradient does not (ops::stored).
       [](double a, double b) { return -stored(a / b / b); },
       InputGen{0.5, 2.0},
       {ValidRange{1, -kInf, 0, false, false, div_why}, ValidRange{1, 0, kInf, false, false, div_why}}},
      // On ties the whole gradient goes to the first input (a >= b counts as "a is the maximum").
      {"maximum", "elementwise max(a, b); on ties the gradient goes to a",
       [](double a, double b) { return a >= b || a != a ? a : b; },
       [](double a, double b) { return a >= b ? 1.0 : 0.0; }, [](double a, double b) { return a >= b ? 0.0 : 1.0; }},
      {"minimum", "elementwise min(a, b); on ties the gradient goes to a",
       [](double a, double b) { return a <= b || a != a ? a : b; },
       [](double a, double b) { return a <= b ? 1.0 : 0.0; }, [](double a, double b) { return a <= b ? 0.0 : 1.0; }},
  };
}

// ---- sum: any number of inputs, broadcast together ----

Shape broadcast_all(const std::vector<Shape>& shapes) {
  Shape out = shapes[0];
  for (size_t i = 1; i < shapes.size(); ++i) out = broadcast_shapes(out, shapes[i]);
  return out;
}

OpSpec make_sum() {
  OpSpec s;
  s.name = "sum";
  s.family = "binary";
  s.doc = "elementwise sum of 2..n inputs with NumPy broadcasting (ONNX Sum)";
  s.range = [](const std::vector<Interval>& in, const std::vector<TensorType>&, const Attrs&) {
    Interval r{0, 0};
    for (const auto& i : in) r = add(r, i);
    return std::vector<Interval>{r};
  };
  s.min_inputs = 2;
  s.max_inputs = kUnbounded;
  s.tags = {"merge"};
  s.infer = [](const std::vector<TensorType>& in, const Attrs&) {
    QUORUM_REQUIRE(in.size() >= 2, "sum takes at least 2 inputs, got " + std::to_string(in.size()));
    const DType dt = common_float_dtype(in);
    std::vector<Shape> shapes;
    for (const auto& t : in) shapes.push_back(t.shape);
    return Signature{{TensorType{dt, broadcast_all(shapes)}}, {}};
  };
  s.forward = [](const Inputs& in, const Attrs&) {
    std::vector<Shape> shapes;
    for (const Tensor* t : in) shapes.push_back(t->shape());
    Tensor y(DType::F64, broadcast_all(shapes));
    double* yp = y.f64();
    for (const Tensor* t : in) {
      const auto m = broadcast_map(t->shape(), y.shape());
      const double* xp = t->f64();
      for (size_t i = 0; i < m.size(); ++i) yp[i] += xp[m[i]];
    }
    return std::vector<Tensor>{y};
  };
  s.vjp = [](const Inputs& in, const Attrs&, const std::vector<Tensor>&, const std::vector<Tensor>& g) {
    std::vector<Tensor> grads;
    for (const Tensor* t : in) grads.push_back(sum_to(g[0], t->shape()));
    return grads;
  };
  // Each output element adds one term per input.
  s.reduction_length = [](const std::vector<TensorType>& in, const Attrs&) { return static_cast<int64_t>(in.size()); };
  s.sample = [](core::Rng& rng) {
    const Shape full = random_shape(rng, static_cast<int>(rng.randint(1, 4)), 1, 4);
    const int n = static_cast<int>(rng.randint(2, 4));
    Case c;
    for (int k = 0; k < n; ++k) {
      Shape sh = full;
      // Mostly equal shapes; sometimes a broadcastable suffix with some sizes set to 1.
      if (rng.bernoulli(0.3)) {
        sh.erase(sh.begin(), sh.begin() + rng.randint(0, static_cast<int64_t>(full.size()) - 1));
        for (auto& d : sh)
          if (rng.bernoulli(0.4)) d = 1;
      }
      c.inputs.push_back(f64t(sh));
      c.gen.push_back(InputGen{});
    }
    return c;
  };
  return s;
}

// ---- concat ----

// Sizes of the blocks concat copies: `outer` rows (the axes before `axis`), each holding
// dim(axis) * inner contiguous elements per input.
struct ConcatLayout {
  int axis = 0;
  int64_t outer = 1, inner = 1;
  std::vector<int64_t> lens;  // each input's size along axis
  int64_t total = 0;
};

ConcatLayout concat_layout(const std::vector<Shape>& shapes, int64_t axis_attr) {
  QUORUM_REQUIRE(shapes.size() >= 2, "concat takes at least 2 inputs, got " + std::to_string(shapes.size()));
  const Shape& first = shapes[0];
  const int rank = static_cast<int>(first.size());
  QUORUM_REQUIRE(rank >= 1, "concat needs inputs of rank >= 1");
  ConcatLayout l;
  l.axis = norm_axis(axis_attr, rank);
  for (size_t k = 0; k < shapes.size(); ++k) {
    const Shape& s = shapes[k];
    QUORUM_REQUIRE(static_cast<int>(s.size()) == rank, "concat inputs must have equal rank: input 0 is " +
                                                           core::to_string(first) + ", input " + std::to_string(k) +
                                                           " is " + core::to_string(s));
    for (int d = 0; d < rank; ++d)
      QUORUM_REQUIRE(d == l.axis || s[static_cast<size_t>(d)] == first[static_cast<size_t>(d)],
                     "concat inputs must match on every axis but " + std::to_string(l.axis) + ": input 0 is " +
                         core::to_string(first) + ", input " + std::to_string(k) + " is " + core::to_string(s));
    l.lens.push_back(s[static_cast<size_t>(l.axis)]);
    l.total += s[static_cast<size_t>(l.axis)];
  }
  for (int d = 0; d < l.axis; ++d) l.outer *= first[static_cast<size_t>(d)];
  for (int d = l.axis + 1; d < rank; ++d) l.inner *= first[static_cast<size_t>(d)];
  return l;
}

std::vector<Shape> shapes_of(const Inputs& in) {
  std::vector<Shape> v;
  for (const Tensor* t : in) v.push_back(t->shape());
  return v;
}

OpSpec make_concat() {
  OpSpec s;
  s.name = "concat";
  s.family = "binary";
  s.doc = "concatenation of 2..n inputs along `axis`; every other dimension must match (ONNX Concat)";
  s.range = hull_of_inputs;
  s.min_inputs = 2;
  s.max_inputs = kUnbounded;
  s.tags = {"merge"};
  // Any integer is a well-formed axis; whether it is in range depends on the rank, so infer checks.
  s.attrs = {int_attr("axis", 1, -kInf, kInf, {AttrValue(int64_t{64}), AttrValue(int64_t{-65})},
                      "axis to join along, negative counts from the end; must lie in [-rank, rank-1]")};
  s.infer = [](const std::vector<TensorType>& in, const Attrs& a) {
    const DType dt = common_float_dtype(in);
    std::vector<Shape> shapes;
    for (const auto& t : in) shapes.push_back(t.shape);
    const ConcatLayout l = concat_layout(shapes, core::attr_i(a, "axis"));
    Shape out = in[0].shape;
    out[static_cast<size_t>(l.axis)] = l.total;
    return Signature{{TensorType{dt, out}}, {}};
  };
  s.forward = [](const Inputs& in, const Attrs& a) {
    const ConcatLayout l = concat_layout(shapes_of(in), core::attr_i(a, "axis"));
    Shape out_shape = in[0]->shape();
    out_shape[static_cast<size_t>(l.axis)] = l.total;
    Tensor y(DType::F64, out_shape);
    double* yp = y.f64();
    for (int64_t o = 0; o < l.outer; ++o) {
      int64_t offset = 0;  // position along axis where input k starts
      for (size_t k = 0; k < in.size(); ++k) {
        const int64_t block = l.lens[k] * l.inner;
        std::copy_n(in[k]->f64() + o * block, block, yp + (o * l.total + offset) * l.inner);
        offset += l.lens[k];
      }
    }
    return std::vector<Tensor>{y};
  };
  s.vjp = [](const Inputs& in, const Attrs& a, const std::vector<Tensor>&, const std::vector<Tensor>& g) {
    const ConcatLayout l = concat_layout(shapes_of(in), core::attr_i(a, "axis"));
    std::vector<Tensor> grads;
    for (const Tensor* t : in) grads.emplace_back(DType::F64, t->shape());
    const double* gp = g[0].f64();
    for (int64_t o = 0; o < l.outer; ++o) {
      int64_t offset = 0;
      for (size_t k = 0; k < in.size(); ++k) {
        const int64_t block = l.lens[k] * l.inner;
        std::copy_n(gp + (o * l.total + offset) * l.inner, block, grads[k].f64() + o * block);
        offset += l.lens[k];
      }
    }
    return grads;
  };
  s.sample = [](core::Rng& rng) {
    const int rank = static_cast<int>(rng.randint(1, 4));
    const Shape base = random_shape(rng, rank, 1, 4);
    const int64_t axis = rng.randint(-rank, rank - 1);
    const auto ax = static_cast<size_t>(axis < 0 ? axis + rank : axis);
    const int n = static_cast<int>(rng.randint(2, 4));
    Case c;
    for (int k = 0; k < n; ++k) {
      Shape sh = base;
      sh[ax] = rng.randint(1, 4);
      c.inputs.push_back(f64t(sh));
      c.gen.push_back(InputGen{});
    }
    c.attrs["axis"] = axis;
    return c;
  };
  // Every input matches the first on every axis but the joined one.
  s.prepare_merge = [](InputShaper& in, Attrs& fixed) {
    const int r = std::max(static_cast<int>(in.shape(0).size()), 1);
    if (static_cast<int>(in.shape(0).size()) != r) in.to_rank(0, r);
    int64_t axis = fixed.count("axis") ? std::get<int64_t>(fixed.at("axis")) : in.rng().randint(0, r - 1);
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) return false;
    const Shape base = in.shape(0);
    for (size_t i = 1; i < in.count(); ++i) {
      if (static_cast<int>(in.shape(i).size()) != r) in.to_rank(i, r);
      Shape t = base;
      t[static_cast<size_t>(axis)] = in.shape(i)[static_cast<size_t>(axis)];
      if (core::numel(t) > in.max_elems()) return false;
      in.to_shape(i, t);
    }
    if (!fixed.count("axis")) fixed["axis"] = in.rng().bernoulli(0.3) ? axis - r : axis;
    return true;
  };
  return s;
}

// ---- ONNX mapping

// Max/Min take any number of inputs: a chain of maximum/minimum.
void import_extreme(OnnxImport& m, const std::string& op) {
  const auto ins = m.inputs();
  if (ins.size() < 2) m.fail("needs at least 2 inputs");
  std::string acc = ins[0];
  for (size_t i = 1; i + 1 < ins.size(); ++i) acc = m.emit(op, {acc, ins[i]}, {});
  m.emit_final(op, {acc, ins.back()});
}

void set_onnx_binary(OpSpec& s) {
  static const std::map<std::string, std::string> kType = {{"add", "Add"}, {"sub", "Sub"},     {"mul", "Mul"},
                                                           {"div", "Div"}, {"maximum", "Max"}, {"minimum", "Min"}};
  const std::string op = s.name, type = kType.at(op);
  // Forms: Add and Mul (commutative, NaN included) with their operands in order or swapped.
  s.onnx_export = [type](OnnxExport& e) {
    const bool swap = (type == "Add" || type == "Mul") && e.choose2("operands_order", "given", "swapped");
    e.final_node(type, swap ? std::vector<std::string>{e.in(1), e.in(0)} : std::vector<std::string>{e.in(0), e.in(1)});
  };
  if (op == "maximum" || op == "minimum")
    s.onnx_import = {{{type}, [op](OnnxImport& m) { import_extreme(m, op); }}};
  else
    s.onnx_import = {{{type}, [op](OnnxImport& m) { m.emit_final(op, {m.in(0), m.in(1)}); }}};
}

}  // namespace

void register_binary(Registry& r) {
  for (const auto& d : binaries()) {
    OpSpec s = make_binary(d);
    set_onnx_binary(s);
    r.add(std::move(s));
  }
  OpSpec sum = make_sum();
  sum.onnx_export = [](OnnxExport& e) { e.final_node("Sum", e.inputs()); };
  sum.onnx_import = {{{"Sum"}, [](OnnxImport& m) { m.emit_final("sum", m.inputs()); }}};
  r.add(std::move(sum));
  OpSpec concat = make_concat();
  concat.onnx_export = [](OnnxExport& e) { e.final_node("Concat", e.inputs()).set_i("axis", e.ai("axis")); };
  concat.onnx_import = {{{"Concat"}, [](OnnxImport& m) {
                           m.emit_final("concat", m.inputs(), {{"axis", m.geti("axis", 1)}});
                         }}};
  r.add(std::move(concat));
}

}  // namespace quorum::ops
