// ArmNN lowering, elementwise operators on ArmNN 20.08 layers: Activation functions (ReLu, BoundedReLu, LeakyReLu,
// Elu, HardSwish, Sigmoid, TanH, SoftReLu, Square, Linear), ElementwiseUnary (Abs, Exp, Sqrt,
// Rsqrt, Neg), the broadcasting binary layers (Addition, Subtraction, Multiplication, Division,
// Maximum, Minimum) and Concat. Operators ArmNN has no single layer for are composed of these
// where the composition is exact up to float32 rounding (selu, hard_sigmoid, softsign, reciprocal,
// the pow exponents listed below).
#include <cmath>

#include "backends/armnn/lower_builder.h"

namespace quorum::backends::armnn_lower {
namespace {

using AF = Act;
using UO = UnaryOp;
using BO = BinaryOp;

constexpr float kSeluAlpha = 1.6732632423543772f;
constexpr float kSeluGamma = 1.0507009873554805f;

float f(const ir::Node& n, const char* attr) { return attr_float(n, attr); }

// One-input operators: out = fn(builder, x).
using UnaryFn = std::function<Value(Builder&, const Value&, const ir::Node&)>;

void unary_op(OpTable& t, const std::string& name, UnaryFn fn,
              std::function<Support(const ir::Graph&, const ir::Node&)> supports = {}) {
  t[name] = OpEntry{std::move(supports), [fn](Builder& b, const ir::Node& n) {
                      b.define(n.outputs[0], fn(b, b.value(n.inputs[0]), n));
                    }};
}

UnaryFn act(AF fn, float a = 0, float b = 0) {
  return [=](Builder& bl, const Value& x, const ir::Node&) { return bl.activation(x, fn, a, b); };
}

UnaryFn elementwise(UO op) {
  return [=](Builder& b, const Value& x, const ir::Node&) { return b.unary(x, op); };
}

// x^e for the exponents ArmNN layers express: ArmNN 20.08 has no power layer.
bool pow_mapped(double e) { return e == 1 || e == 2 || e == 3 || e == 0.5 || e == 1.5 || e == -1 || e == -0.5; }

Value power(Builder& b, const Value& x, const ir::Node& n) {
  const double e = core::attr_f(n.attrs, "exponent");
  if (e == 1) return b.activation(x, AF::Linear, 1, 0);
  if (e == 2) return b.activation(x, AF::Square);
  if (e == 3) return b.binary(BO::Multiplication, b.activation(x, AF::Square), x);
  if (e == 0.5) return b.unary(x, UO::Sqrt);
  if (e == 1.5) return b.binary(BO::Multiplication, x, b.unary(x, UO::Sqrt));
  if (e == -1) return b.binary(BO::Division, b.scalar_like(1, x.shape.size()), x);
  return b.unary(x, UO::Rsqrt);
}

void binary_op(OpTable& t, const std::string& name, BinaryOp armnn_op) {
  t[name] = OpEntry{{}, [armnn_op](Builder& b, const ir::Node& n) {
                      b.define(n.outputs[0], b.binary(armnn_op, b.value(n.inputs[0]), b.value(n.inputs[1])));
                    }};
}

}  // namespace

void register_elementwise(OpTable& t) {
  unary_op(t, "relu", act(AF::ReLu));
  unary_op(t, "relu6", act(AF::BoundedReLu, 6, 0));
  unary_op(t, "sigmoid", act(AF::Sigmoid));
  unary_op(t, "tanh", act(AF::TanH, 1, 1));  // a * tanh(b * x)
  unary_op(t, "softplus", act(AF::SoftReLu));
  unary_op(t, "square", act(AF::Square));
  unary_op(t, "hardswish", act(AF::HardSwish));
  unary_op(t, "abs", elementwise(UO::Abs));
  unary_op(t, "exp", elementwise(UO::Exp));
  unary_op(t, "sqrt", elementwise(UO::Sqrt));
  unary_op(t, "rsqrt", elementwise(UO::Rsqrt));
  unary_op(t, "neg", elementwise(UO::Neg));
  // BoundedReLu is min(a, max(b, x)), the catalogue's min(max(x, min), max).
  unary_op(t, "clip", [](Builder& b, const Value& x, const ir::Node& n) {
    b.comment("BoundedReLu is min(a, max(b, x))");
    return b.activation(x, AF::BoundedReLu, f(n, "max"), f(n, "min"));
  });
  unary_op(t, "leaky_relu", [](Builder& b, const Value& x, const ir::Node& n) {
    return b.activation(x, AF::LeakyReLu, f(n, "alpha"));
  });
  unary_op(t, "elu", [](Builder& b, const Value& x, const ir::Node& n) {
    return b.activation(x, AF::Elu, f(n, "alpha"));
  });
  unary_op(t, "selu", [](Builder& b, const Value& x, const ir::Node&) {
    return b.activation(b.activation(x, AF::Elu, kSeluAlpha), AF::Linear, kSeluGamma, 0);
  });
  unary_op(t, "hard_sigmoid", [](Builder& b, const Value& x, const ir::Node& n) {
    b.comment("min(1, max(0, alpha * x + beta)): Linear then BoundedReLu");
    return b.activation(b.activation(x, AF::Linear, f(n, "alpha"), f(n, "beta")), AF::BoundedReLu, 1, 0);
  });
  unary_op(t, "softsign", [](Builder& b, const Value& x, const ir::Node&) {
    return b.binary(BO::Division, x, b.activation(b.unary(x, UO::Abs), AF::Linear, 1, 1));
  });
  unary_op(t, "reciprocal", [](Builder& b, const Value& x, const ir::Node&) {
    return b.binary(BO::Division, b.scalar_like(1, x.shape.size()), x);
  });
  unary_op(t, "pow", power, [](const ir::Graph&, const ir::Node& n) {
    const double e = core::attr_f(n.attrs, "exponent");
    if (pow_mapped(e)) return Support::yes();
    return Support::no("ArmNN 20.08 has no power layer; exponent " + std::to_string(e) +
                       " is not one of 1, 2, 3, 0.5, 1.5, -1, -0.5 (composed of Square, Sqrt, Rsqrt, Multiplication, "
                       "Division)");
  });

  binary_op(t, "add", BO::Addition);
  binary_op(t, "sub", BO::Subtraction);
  binary_op(t, "mul", BO::Multiplication);
  binary_op(t, "div", BO::Division);
  binary_op(t, "maximum", BO::Maximum);
  binary_op(t, "minimum", BO::Minimum);
  t["sum"] = OpEntry{{}, [](Builder& b, const ir::Node& n) {
                       Value acc = b.value(n.inputs[0]);
                       for (size_t i = 1; i < n.inputs.size(); ++i)
                         acc = b.binary(BO::Addition, acc, b.value(n.inputs[i]));
                       b.define(n.outputs[0], acc);
                     }};
  t["concat"] = OpEntry{{}, [](Builder& b, const ir::Node& n) {
                          std::vector<Value> parts;
                          for (const auto& in : n.inputs) parts.push_back(b.value(in));
                          const size_t axis = ops::norm_axis(core::attr_i(n.attrs, "axis"), parts[0].shape.size());
                          b.define(n.outputs[0], b.concat(parts, axis));
                        }};
}

}  // namespace quorum::backends::armnn_lower
