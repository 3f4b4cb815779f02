// Elementwise operators on XNNPACK subgraph nodes (part of the lowering: no XNNPACK header): the
// library's unary nodes (abs, negate, clamp, elu, leaky relu, hardswish, sigmoid, square, square
// root), its broadcasting binary nodes (add2, subtract, multiply2, divide, maximum2, minimum2), and
// operators the catalogue names that are short compositions of them with static constants
// (relu/relu6 = clamp, hard_sigmoid = multiply2 + add2 clamped to [0, 1], reciprocal/rsqrt =
// divide(1, .), selu = multiply2(elu), softsign, pow with a few exponents, inference batch_norm =
// multiply2 + add2 with per-channel constants folded when lowering). Elementwise nodes run in
// whatever layout their first input already has in the segment. Values are defined in the order
// the reproducer declares them (operands, then temporaries and constants as each step needs them,
// the output just before the definition that writes it).
#include <cmath>
#include <limits>

#include "backends/xnnpack/lower_ops.h"

namespace quorum::backends::xnnpack {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// ---- unary ----

DefineFn unary(Unary op) {
  return [op](NodeLowering& c) {
    const ValueId x = c.input(0);
    c.sink.unary(op, x, c.output());
  };
}

void define_clamp(NodeLowering& c, float lo, float hi) {
  const ValueId x = c.input(0);
  c.sink.clamp(lo, hi, x, c.output());
}

// 1 / x, or 1 / sqrt(x).
void define_reciprocal(NodeLowering& c, bool of_sqrt) {
  ValueId x = c.input(0);
  if (of_sqrt) {
    const ValueId s = c.temp(c.out_dims());
    c.sink.unary(Unary::SquareRoot, x, s);
    x = s;
  }
  const ValueId one = c.scalar(1.0f);
  c.sink.arithmetic(Arithmetic::Divide, -kInf, kInf, one, x, c.output());
}

Support clip_supports(const ir::Graph&, const ir::Node& n) {
  if (!(static_cast<float>(core::attr_f(n.attrs, "min")) < static_cast<float>(core::attr_f(n.attrs, "max"))))
    return Support::no("XNNPACK clamp requires min < max in float32");
  return Support::yes();
}

Support elu_supports(const ir::Graph&, const ir::Node& n) {
  const double alpha = core::attr_f(n.attrs, "alpha");
  if (!(alpha > 0) || !std::isnormal(static_cast<float>(alpha)))
    return Support::no("XNNPACK elu requires a positive normal float alpha (xnn_status_invalid_parameter for " +
                       core::to_string(core::AttrValue(alpha)) + ")");
  return Support::yes();
}

Support leaky_relu_supports(const ir::Graph&, const ir::Node& n) {
  if (!std::isfinite(static_cast<float>(core::attr_f(n.attrs, "alpha"))))
    return Support::no("XNNPACK leaky relu requires a finite float slope");
  return Support::yes();
}

Support pow_supports(const ir::Graph&, const ir::Node& n) {
  const double e = core::attr_f(n.attrs, "exponent");
  if (e == 2 || e == 3 || e == 0.5 || e == -1 || e == -0.5) return Support::yes();
  return Support::no(
      "XNNPACK 2022-02 has no power operator; only exponents 2, 3, 0.5, -1 and -0.5 map (square, "
      "multiply, square root, divide)");
}

void define_pow(NodeLowering& c) {
  const double e = core::attr_f(c.attrs(), "exponent");
  if (e == 0.5) return unary(Unary::SquareRoot)(c);
  if (e == 2) return unary(Unary::Square)(c);
  if (e == -1 || e == -0.5) return define_reciprocal(c, e == -0.5);
  const ValueId x = c.input(0);  // e == 3: x^2 * x
  const ValueId sq = c.temp(c.out_dims());
  c.sink.unary(Unary::Square, x, sq);
  c.sink.arithmetic(Arithmetic::Multiply, -kInf, kInf, sq, x, c.output());
}

void define_hard_sigmoid(NodeLowering& c) {
  const ValueId x = c.input(0);
  const ValueId t = c.temp(c.out_dims());
  const ValueId alpha = c.scalar(c.attr_float("alpha"));
  c.sink.arithmetic(Arithmetic::Multiply, -kInf, kInf, x, alpha, t);
  const ValueId beta = c.scalar(c.attr_float("beta"));
  c.sink.arithmetic(Arithmetic::Add, 0.0f, 1.0f, t, beta, c.output());
}

void define_selu(NodeLowering& c) {
  constexpr float kAlpha = 1.6732632423543772f, kGamma = 1.0507009873554805f;
  const ValueId x = c.input(0);
  const ValueId e = c.temp(c.out_dims());
  c.sink.elu(kAlpha, x, e);
  const ValueId gamma = c.scalar(kGamma);
  c.sink.arithmetic(Arithmetic::Multiply, -kInf, kInf, e, gamma, c.output());
}

void define_softsign(NodeLowering& c) {
  const ValueId x = c.input(0);
  const ValueId a = c.temp(c.out_dims()), d = c.temp(c.out_dims());
  c.sink.unary(Unary::Abs, x, a);
  const ValueId one = c.scalar(1.0f);
  c.sink.arithmetic(Arithmetic::Add, -kInf, kInf, a, one, d);
  c.sink.arithmetic(Arithmetic::Divide, -kInf, kInf, x, d, c.output());
}

// ---- binary ----

Shape broadcast(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t da = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    const int64_t db = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// sum of n inputs: a chain of add2 nodes through internal values.
void define_sum(NodeLowering& c) {
  const size_t n = c.node.inputs.size();
  ValueId acc = c.input(0);
  Shape acc_shape = c.in_shape(0);
  for (size_t i = 1; i < n; ++i) {
    acc_shape = broadcast(acc_shape, c.in_shape(i));
    const ValueId rhs = c.input(i);
    const ValueId next = i + 1 == n ? c.output() : c.temp(xnn_dims(acc_shape, c.layout));
    c.sink.arithmetic(Arithmetic::Add, -kInf, kInf, acc, rhs, next);
    acc = next;
  }
}

// ---- batch_norm (inference): y = x * s + t, s = scale / sqrt(var + eps), t = bias - mean * s ----

Support batch_norm_supports(const ir::Graph& g, const ir::Node& n) {
  if (core::attr_i(n.attrs, "training") == 1)
    return Support::no(
        "XNNPACK 2022-02 has no batch statistics (no reduction over the batch); only inference "
        "batch_norm maps");
  for (size_t i = 1; i < n.inputs.size(); ++i)
    if (!g.is_initializer(n.inputs[i]))
      return Support::no("batch_norm parameters are folded when compiling; '" + n.inputs[i] + "' is computed");
  return Support::yes();
}

Layout batch_norm_layout(const ir::Graph& g, const ir::Node& n, std::optional<Layout> first) {
  const size_t rank = g.types.at(n.inputs[0]).shape.size();
  return (rank == 3 || rank == 4) && first != Layout::Plain ? Layout::ChannelsLast : Layout::Plain;
}

void define_batch_norm(NodeLowering& c) {
  const core::Tensor &scale = c.weight(1), &bias = c.weight(2), &mean = c.weight(3), &var = c.weight(4);
  const double eps = core::attr_f(c.attrs(), "epsilon");
  const size_t ch = static_cast<size_t>(scale.numel());
  std::vector<float> s(ch), t(ch);
  for (size_t i = 0; i < ch; ++i) {
    const auto k = static_cast<int64_t>(i);
    const double si = scale.get(k) / std::sqrt(var.get(k) + eps);
    s[i] = static_cast<float>(si);
    t[i] = static_cast<float>(bias.get(k) - mean.get(k) * si);
  }
  // Channels-last: [C] broadcasts over the last axis; plain: [C, 1, ...] over axis 1.
  Dims pd{ch};
  if (c.layout == Layout::Plain) pd.resize(c.in_shape(0).size() - 1, 1);
  const ValueId x = c.input(0);
  const ValueId scaled = c.temp(c.out_dims());
  const ValueId sid = c.constant(std::move(s), pd, "batch_norm scale / sqrt(var + eps), per channel");
  c.sink.arithmetic(Arithmetic::Multiply, -kInf, kInf, x, sid, scaled);
  const ValueId tid = c.constant(std::move(t), pd, "batch_norm bias - mean * scale / sqrt(var + eps), per channel");
  c.sink.arithmetic(Arithmetic::Add, -kInf, kInf, scaled, tid, c.output());
}

}  // namespace

void register_elementwise(OpTable& t) {
  auto add = [&t](const char* name, DefineFn def, SupportFn sup = {}) {
    t[name] = OpEntry{std::move(sup), follow_layout, std::move(def), {}};
  };
  add("abs", unary(Unary::Abs));
  add("neg", unary(Unary::Negate));
  add("sigmoid", unary(Unary::Sigmoid));
  add("hardswish", unary(Unary::Hardswish));
  add("square", unary(Unary::Square));
  add("sqrt", unary(Unary::SquareRoot));
  add(
      "elu",
      [](NodeLowering& c) {
        const ValueId x = c.input(0);
        c.sink.elu(c.attr_float("alpha"), x, c.output());
      },
      elu_supports);
  add(
      "leaky_relu",
      [](NodeLowering& c) {
        const ValueId x = c.input(0);
        c.sink.leaky_relu(c.attr_float("alpha"), x, c.output());
      },
      leaky_relu_supports);
  add(
      "clip", [](NodeLowering& c) { define_clamp(c, c.attr_float("min"), c.attr_float("max")); }, clip_supports);
  add("relu", [](NodeLowering& c) { define_clamp(c, 0.0f, kInf); });
  add("relu6", [](NodeLowering& c) { define_clamp(c, 0.0f, 6.0f); });
  add("hard_sigmoid", define_hard_sigmoid);
  add("reciprocal", [](NodeLowering& c) { define_reciprocal(c, false); });
  add("rsqrt", [](NodeLowering& c) { define_reciprocal(c, true); });
  add("selu", define_selu);
  add("softsign", define_softsign);
  add("pow", define_pow, pow_supports);
  for (const auto& [name, op] : std::map<std::string, Arithmetic>{{"add", Arithmetic::Add},
                                                                  {"sub", Arithmetic::Subtract},
                                                                  {"mul", Arithmetic::Multiply},
                                                                  {"div", Arithmetic::Divide}})
    add(name.c_str(), [op = op](NodeLowering& c) {  // (clang < 16: no capture of a structured binding)
      const ValueId x = c.input(0), y = c.input(1);
      c.sink.arithmetic(op, -kInf, kInf, x, y, c.output());
    });
  for (const auto& [name, op] :
       std::map<std::string, Binary>{{"maximum", Binary::Maximum}, {"minimum", Binary::Minimum}})
    add(name.c_str(), [op = op](NodeLowering& c) {  // (clang < 16: no capture of a structured binding)
      const ValueId x = c.input(0), y = c.input(1);
      c.sink.binary(op, x, y, c.output());
    });
  add("sum", define_sum);
  t["batch_norm"] = OpEntry{batch_norm_supports, batch_norm_layout, define_batch_norm, {}};
}

}  // namespace quorum::backends::xnnpack
