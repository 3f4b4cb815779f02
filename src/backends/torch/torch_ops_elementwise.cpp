// libtorch mappings of the elementwise families: unary activations and math (eltwise) and the
// broadcasting binary / n-ary operators (binary). Each maps to the ATen function of the same
// meaning; where ATen has no function (softsign, hard_sigmoid with ONNX's slope) the operator is
// composed from ATen functions the way torch.nn.functional composes it.
#include <ATen/ops/abs.h>
#include <ATen/ops/add.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/div.h>
#include <ATen/ops/elu.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/hardsigmoid.h>
#include <ATen/ops/hardswish.h>
#include <ATen/ops/hardtanh.h>
#include <ATen/ops/leaky_relu.h>
#include <ATen/ops/log.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/selu.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/softplus.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/square.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/tanh.h>

#include <cmath>

#include "backends/torch/torch_ops.h"

namespace quorum::backends::torch {
namespace {

// A unary operator without attributes.
void unary(OpTable& t, const std::string& name, at::Tensor (*f)(const at::Tensor&)) {
  t[name] = OpImpl{nullptr, [f](const NodeContext&, const TensorList& in) { return TensorList{f(in[0])}; }};
}

template <class F>
void with_attrs(OpTable& t, const std::string& name, F f) {
  t[name] = OpImpl{nullptr, [f](const NodeContext& c, const TensorList& in) { return TensorList{f(c, in[0])}; }};
}

void add_unary(OpTable& t) {
  unary(t, "abs", [](const at::Tensor& x) { return at::abs(x); });
  unary(t, "exp", [](const at::Tensor& x) { return at::exp(x); });
  unary(t, "log", [](const at::Tensor& x) { return at::log(x); });
  unary(t, "neg", [](const at::Tensor& x) { return at::neg(x); });
  unary(t, "reciprocal", [](const at::Tensor& x) { return at::reciprocal(x); });
  unary(t, "relu", [](const at::Tensor& x) { return at::relu(x); });
  unary(t, "relu6", [](const at::Tensor& x) { return at::hardtanh(x, 0.0, 6.0); });  // F.relu6
  unary(t, "rsqrt", [](const at::Tensor& x) { return at::rsqrt(x); });
  unary(t, "selu", [](const at::Tensor& x) { return at::selu(x); });
  unary(t, "sigmoid", [](const at::Tensor& x) { return at::sigmoid(x); });
  unary(t, "softplus", [](const at::Tensor& x) { return at::softplus(x, 1.0, 20.0); });  // F.softplus defaults
  // ATen has no softsign kernel; torch.nn.functional.softsign is x / (1 + |x|).
  unary(t, "softsign", [](const at::Tensor& x) { return at::div(x, at::add(at::abs(x), 1.0)); });
  unary(t, "sqrt", [](const at::Tensor& x) { return at::sqrt(x); });
  unary(t, "square", [](const at::Tensor& x) { return at::square(x); });
  unary(t, "tanh", [](const at::Tensor& x) { return at::tanh(x); });
  unary(t, "hardswish", [](const at::Tensor& x) { return at::hardswish(x); });

  with_attrs(t, "clip", [](const NodeContext& c, const at::Tensor& x) {
    return at::clamp(x, c10::Scalar(c.f("min")), c10::Scalar(c.f("max")));
  });
  with_attrs(t, "elu", [](const NodeContext& c, const at::Tensor& x) { return at::elu(x, c.f("alpha")); });
  with_attrs(t, "leaky_relu",
             [](const NodeContext& c, const at::Tensor& x) { return at::leaky_relu(x, c.f("alpha")); });
  with_attrs(t, "gelu", [](const NodeContext& c, const at::Tensor& x) { return at::gelu(x, c.s("approximate")); });
  with_attrs(t, "pow", [](const NodeContext& c, const at::Tensor& x) { return at::pow(x, c.f("exponent")); });
  with_attrs(t, "hard_sigmoid", [](const NodeContext& c, const at::Tensor& x) {
    const double alpha = c.f("alpha"), beta = c.f("beta");
    // ATen's hardsigmoid is fixed at slope 1/6, offset 1/2 (ONNX defaults to 0.2, 0.5): use it when
    // the attributes match, otherwise clamp(alpha*x + beta, 0, 1) as ONNX defines it.
    if (std::abs(alpha - 1.0 / 6.0) < 1e-12 && beta == 0.5) return at::hardsigmoid(x);
    return at::hardtanh(at::add(at::mul(x, alpha), beta), 0.0, 1.0);
  });
}

void add_binary(OpTable& t) {
  auto binary = [&t](const std::string& name, at::Tensor (*f)(const at::Tensor&, const at::Tensor&)) {
    t[name] = OpImpl{nullptr, [f](const NodeContext&, const TensorList& in) { return TensorList{f(in[0], in[1])}; }};
  };
  binary("add", [](const at::Tensor& a, const at::Tensor& b) { return at::add(a, b); });
  binary("sub", [](const at::Tensor& a, const at::Tensor& b) { return at::sub(a, b); });
  binary("mul", [](const at::Tensor& a, const at::Tensor& b) { return at::mul(a, b); });
  binary("div", [](const at::Tensor& a, const at::Tensor& b) { return at::div(a, b); });
  binary("maximum", [](const at::Tensor& a, const at::Tensor& b) { return at::maximum(a, b); });
  binary("minimum", [](const at::Tensor& a, const at::Tensor& b) { return at::minimum(a, b); });
  t["sum"] = OpImpl{nullptr, [](const NodeContext&, const TensorList& in) {
                      // ONNX Sum: a left fold of broadcasting additions.
                      at::Tensor acc = at::add(in[0], in[1]);
                      for (size_t k = 2; k < in.size(); ++k) acc = at::add(acc, in[k]);
                      return TensorList{acc};
                    }};
  t["concat"] = OpImpl{nullptr, [](const NodeContext& c, const TensorList& in) {
                         return TensorList{at::cat(in, c.i("axis"))};
                       }};
}

}  // namespace

void add_elementwise_ops(OpTable& t) {
  add_unary(t);
  add_binary(t);
}

}  // namespace quorum::backends::torch
