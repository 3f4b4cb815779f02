// Elementwise operators on XNNPACK subgraph nodes: the library's unary nodes (abs, negate, clamp,
// elu, leaky relu, hardswish, sigmoid, square, square root), its broadcasting binary nodes (add2,
// subtract, multiply2, divide, maximum2, minimum2), and operators the catalogue names that are short
// compositions of them with static constants (relu/relu6 = clamp, hard_sigmoid = multiply2 + add2
// clamped to [0, 1], reciprocal/rsqrt = divide(1, .), selu = multiply2(elu), softsign, pow with a few
// exponents, inference batch_norm = multiply2 + add2 with per-channel constants folded at compile).
// Elementwise nodes run in whatever layout their first input already has in the segment.
#include <cmath>
#include <limits>

#include "backends/xnnpack/xnnpack_common.h"

namespace quorum::backends::xnnpack {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

float attr_float(const NodeCtx& c, const char* name) { return static_cast<float>(core::attr_f(c.attrs(), name)); }

Dims out_dims(const NodeCtx& c) { return xnn_dims(c.out_shape(), c.layout); }

// ---- unary ----

using UnaryFn = xnn_status (*)(xnn_subgraph_t, uint32_t, uint32_t, uint32_t);

DefineFn unary(UnaryFn fn, const char* call) {
  return [fn, call](NodeCtx& c) {
    const uint32_t x = c.input(0);
    c.check(fn(c.subgraph(), x, c.output(), 0), call);
  };
}

void define_clamp(NodeCtx& c, float lo, float hi) {
  const uint32_t x = c.input(0);
  c.check(xnn_define_clamp(c.subgraph(), lo, hi, x, c.output(), 0), "xnn_define_clamp");
}

void define_divide(NodeCtx& c, uint32_t a, uint32_t b, uint32_t out) {
  c.check(xnn_define_divide(c.subgraph(), -kInf, kInf, a, b, out, 0), "xnn_define_divide");
}

// 1 / x, or 1 / sqrt(x).
void define_reciprocal(NodeCtx& c, bool of_sqrt) {
  uint32_t x = c.input(0);
  if (of_sqrt) {
    const uint32_t s = c.temp(out_dims(c));
    c.check(xnn_define_square_root(c.subgraph(), x, s, 0), "xnn_define_square_root");
    x = s;
  }
  define_divide(c, c.scalar(1.0f), x, c.output());
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
  return Support::no("XNNPACK 2022-02 has no power operator; only exponents 2, 3, 0.5, -1 and -0.5 map (square, "
                     "multiply, square root, divide)");
}

void define_pow(NodeCtx& c) {
  const double e = core::attr_f(c.attrs(), "exponent");
  if (e == 0.5) return unary(xnn_define_square_root, "xnn_define_square_root")(c);
  if (e == -1 || e == -0.5) return define_reciprocal(c, e == -0.5);
  const uint32_t x = c.input(0);
  if (e == 2) {
    c.check(xnn_define_square(c.subgraph(), x, c.output(), 0), "xnn_define_square");
    return;
  }
  const uint32_t sq = c.temp(out_dims(c));  // e == 3: x^2 * x
  c.check(xnn_define_square(c.subgraph(), x, sq, 0), "xnn_define_square");
  c.check(xnn_define_multiply2(c.subgraph(), -kInf, kInf, sq, x, c.output(), 0), "xnn_define_multiply2");
}

void define_hard_sigmoid(NodeCtx& c) {
  const uint32_t x = c.input(0);
  const uint32_t t = c.temp(out_dims(c));
  c.check(xnn_define_multiply2(c.subgraph(), -kInf, kInf, x, c.scalar(attr_float(c, "alpha")), t, 0),
          "xnn_define_multiply2");
  c.check(xnn_define_add2(c.subgraph(), 0.0f, 1.0f, t, c.scalar(attr_float(c, "beta")), c.output(), 0),
          "xnn_define_add2");
}

void define_selu(NodeCtx& c) {
  constexpr float kAlpha = 1.6732632423543772f, kGamma = 1.0507009873554805f;
  const uint32_t x = c.input(0);
  const uint32_t e = c.temp(out_dims(c));
  c.check(xnn_define_elu(c.subgraph(), kAlpha, x, e, 0), "xnn_define_elu");
  c.check(xnn_define_multiply2(c.subgraph(), -kInf, kInf, e, c.scalar(kGamma), c.output(), 0), "xnn_define_multiply2");
}

void define_softsign(NodeCtx& c) {
  const uint32_t x = c.input(0);
  const uint32_t a = c.temp(out_dims(c)), d = c.temp(out_dims(c));
  c.check(xnn_define_abs(c.subgraph(), x, a, 0), "xnn_define_abs");
  c.check(xnn_define_add2(c.subgraph(), -kInf, kInf, a, c.scalar(1.0f), d, 0), "xnn_define_add2");
  define_divide(c, x, d, c.output());
}

// ---- binary ----

enum class Binary { Add, Sub, Mul, Div, Max, Min };

void define_binary_node(NodeCtx& c, Binary op, uint32_t a, uint32_t b, uint32_t out) {
  xnn_subgraph_t sg = c.subgraph();
  switch (op) {
    case Binary::Add:
      return c.check(xnn_define_add2(sg, -kInf, kInf, a, b, out, 0), "xnn_define_add2");
    case Binary::Sub:
      return c.check(xnn_define_subtract(sg, -kInf, kInf, a, b, out, 0), "xnn_define_subtract");
    case Binary::Mul:
      return c.check(xnn_define_multiply2(sg, -kInf, kInf, a, b, out, 0), "xnn_define_multiply2");
    case Binary::Div:
      return c.check(xnn_define_divide(sg, -kInf, kInf, a, b, out, 0), "xnn_define_divide");
    case Binary::Max:
      return c.check(xnn_define_maximum2(sg, a, b, out, 0), "xnn_define_maximum2");
    case Binary::Min:
      return c.check(xnn_define_minimum2(sg, a, b, out, 0), "xnn_define_minimum2");
  }
}

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
void define_sum(NodeCtx& c) {
  const size_t n = c.node.inputs.size();
  uint32_t acc = c.input(0);
  Shape acc_shape = c.in_shape(0);
  for (size_t i = 1; i < n; ++i) {
    acc_shape = broadcast(acc_shape, c.in_shape(i));
    const uint32_t next = i + 1 == n ? c.output() : c.temp(xnn_dims(acc_shape, c.layout));
    define_binary_node(c, Binary::Add, acc, c.input(i), next);
    acc = next;
  }
}

// ---- batch_norm (inference): y = x * s + t, s = scale / sqrt(var + eps), t = bias - mean * s ----

Support batch_norm_supports(const ir::Graph& g, const ir::Node& n) {
  if (core::attr_i(n.attrs, "training") == 1)
    return Support::no("XNNPACK 2022-02 has no batch statistics (no reduction over the batch); only inference "
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

void define_batch_norm(NodeCtx& c) {
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
  const uint32_t x = c.input(0);
  const uint32_t scaled = c.temp(out_dims(c));
  c.check(xnn_define_multiply2(c.subgraph(), -kInf, kInf, x, c.constant(std::move(s), pd), scaled, 0),
          "xnn_define_multiply2");
  c.check(xnn_define_add2(c.subgraph(), -kInf, kInf, scaled, c.constant(std::move(t), pd), c.output(), 0),
          "xnn_define_add2");
}

}  // namespace

void register_elementwise(OpTable& t) {
  auto add = [&t](const char* name, DefineFn def, SupportFn sup = {}) {
    t[name] = OpEntry{std::move(sup), follow_layout, std::move(def), {}};
  };
  add("abs", unary(xnn_define_abs, "xnn_define_abs"));
  add("neg", unary(xnn_define_negate, "xnn_define_negate"));
  add("sigmoid", unary(xnn_define_sigmoid, "xnn_define_sigmoid"));
  add("hardswish", unary(xnn_define_hardswish, "xnn_define_hardswish"));
  add("square", unary(xnn_define_square, "xnn_define_square"));
  add("sqrt", unary(xnn_define_square_root, "xnn_define_square_root"));
  add("elu", [](NodeCtx& c) {
    const uint32_t x = c.input(0);
    c.check(xnn_define_elu(c.subgraph(), attr_float(c, "alpha"), x, c.output(), 0), "xnn_define_elu");
  }, elu_supports);
  add("leaky_relu", [](NodeCtx& c) {
    const uint32_t x = c.input(0);
    c.check(xnn_define_leaky_relu(c.subgraph(), attr_float(c, "alpha"), x, c.output(), 0), "xnn_define_leaky_relu");
  }, leaky_relu_supports);
  add("clip", [](NodeCtx& c) { define_clamp(c, attr_float(c, "min"), attr_float(c, "max")); }, clip_supports);
  add("relu", [](NodeCtx& c) { define_clamp(c, 0.0f, kInf); });
  add("relu6", [](NodeCtx& c) { define_clamp(c, 0.0f, 6.0f); });
  add("hard_sigmoid", define_hard_sigmoid);
  add("reciprocal", [](NodeCtx& c) { define_reciprocal(c, false); });
  add("rsqrt", [](NodeCtx& c) { define_reciprocal(c, true); });
  add("selu", define_selu);
  add("softsign", define_softsign);
  add("pow", define_pow, pow_supports);
  for (const auto& [name, op] : std::map<std::string, Binary>{{"add", Binary::Add},
                                                              {"sub", Binary::Sub},
                                                              {"mul", Binary::Mul},
                                                              {"div", Binary::Div},
                                                              {"maximum", Binary::Max},
                                                              {"minimum", Binary::Min}}) {
    const Binary b = op;
    t[name] = OpEntry{{}, follow_layout,
                      [b](NodeCtx& c) {
                        const uint32_t x = c.input(0), y = c.input(1);
                        define_binary_node(c, b, x, y, c.output());
                      },
                      {}};
  }
  add("sum", define_sum);
  t["batch_norm"] = OpEntry{batch_norm_supports, batch_norm_layout, define_batch_norm, {}};
}

}  // namespace quorum::backends::xnnpack
