// Unary elementwise operators as chains of oneDNN eltwise algorithms; backward runs the library's
// eltwise backward kernels in reverse order. Operators oneDNN 2.6 has no algorithm for are
// composed from ones it has (a composition is still computed entirely by the library):
//   relu6 = clip_v2(0, 6); selu = linear(gamma) . elu(alpha); hard_sigmoid = clip_v2(0, 1) . linear(a, b)
//   (2.6 has no hardsigmoid algorithm); rsqrt = sqrt then pow(x, -1); reciprocal = pow(x, -1); neg = linear(-1);
//   softsign = x / linear(1, 1)(abs(x)) with a binary division.
#include "backends/onednn/onednn_common.h"

namespace quorum::backends::onednn {
namespace {

struct Step {
  algorithm alg;
  float alpha = 0, beta = 0;
};

using StepsFn = std::function<std::vector<Step>(const core::Attrs&)>;

float attr_float(const core::Attrs& a, const char* name) { return static_cast<float>(core::attr_f(a, name)); }

constexpr float kSeluAlpha = 1.6732632423543772f;
constexpr float kSeluGamma = 1.0507009873554805f;

const std::map<std::string, StepsFn>& chains() {
  using A = core::Attrs;
  static const std::map<std::string, StepsFn> m = {
      {"relu",
       [](const A&) {
         return std::vector<Step>{{algorithm::eltwise_relu, 0, 0}};
       }},
      {"relu6",
       [](const A&) {
         return std::vector<Step>{{algorithm::eltwise_clip_v2, 0, 6}};
       }},
      {"leaky_relu",
       [](const A& a) {
         return std::vector<Step>{{algorithm::eltwise_relu, attr_float(a, "alpha"), 0}};
       }},
      {"elu",
       [](const A& a) {
         return std::vector<Step>{{algorithm::eltwise_elu, attr_float(a, "alpha"), 0}};
       }},
      {"selu",
       [](const A&) {
         return std::vector<Step>{{algorithm::eltwise_elu, kSeluAlpha, 0}, {algorithm::eltwise_linear, kSeluGamma, 0}};
       }},
      {"gelu",
       [](const A& a) {
         return std::vector<Step>{
             {core::attr_s(a, "approximate") == "tanh" ? algorithm::eltwise_gelu_tanh : algorithm::eltwise_gelu_erf, 0,
              0}};
       }},
      {"sigmoid",
       [](const A&) {
         return std::vector<Step>{{algorithm::eltwise_logistic, 0, 0}};
       }},
      {"tanh",
       [](const A&) {
         return std::vector<Step>{{algorithm::eltwise_tanh, 0, 0}};
       }},
      {"softplus",
       [](const A&) {
         return std::vector<Step>{{algorithm::eltwise_soft_relu, 0, 0}};
       }},
      {"hard_sigmoid",
       [](const A& a) {
         return std::vector<Step>{{algorithm::eltwise_linear, attr_float(a, "alpha"), attr_float(a, "beta")},
                                  {algorithm::eltwise_clip_v2, 0, 1}};
       }},
      {"hardswish",
       [](const A&) {
         return std::vector<Step>{{algorithm::eltwise_hardswish, 0, 0}};
       }},
      {"exp",
       [](const A&) {
         return std::vector<Step>{{algorithm::eltwise_exp, 0, 0}};
       }},
      {"log",
       [](const A&) {
         return std::vector<Step>{{algorithm::eltwise_log, 0, 0}};
       }},
      {"sqrt",
       [](const A&) {
         return std::vector<Step>{{algorithm::eltwise_sqrt, 0, 0}};
       }},
      {"rsqrt",
       [](const A&) {
         // sqrt, then 1/x: pow(x, -0.5) gives +0 at -inf where rsqrt is NaN (a mapping of Quorum's
         // own that campaigns reported as oneDNN's).
         return std::vector<Step>{{algorithm::eltwise_sqrt, 0, 0}, {algorithm::eltwise_pow, 1, -1}};
       }},
      {"reciprocal",
       [](const A&) {
         return std::vector<Step>{{algorithm::eltwise_pow, 1, -1}};
       }},
      {"abs",
       [](const A&) {
         return std::vector<Step>{{algorithm::eltwise_abs, 0, 0}};
       }},
      {"neg",
       [](const A&) {
         return std::vector<Step>{{algorithm::eltwise_linear, -1, 0}};
       }},
      {"square",
       [](const A&) {
         return std::vector<Step>{{algorithm::eltwise_square, 0, 0}};
       }},
      {"pow",
       [](const A& a) {
         return std::vector<Step>{{algorithm::eltwise_pow, 1, attr_float(a, "exponent")}};
       }},
      {"clip",
       [](const A& a) {
         return std::vector<Step>{{algorithm::eltwise_clip_v2, attr_float(a, "min"), attr_float(a, "max")}};
       }},
  };
  return m;
}

class ChainKernel : public Kernel {
 public:
  ChainKernel(const ir::Graph& g, const ir::Node& n) : Kernel(g, n), steps_(chains().at(n.op)(n.attrs)) {}

  void forward(Env& env, bool training) override {
    step_inputs_.clear();
    Buf cur = in(env, 0);
    for (const Step& s : steps_) {
      Buf next = eltwise(s.alg, s.alpha, s.beta, cur);
      if (training) step_inputs_.push_back(std::move(cur));
      cur = std::move(next);
    }
    set_out(env, 0, std::move(cur));
  }

  void backward(Env& env) override {
    Buf g = *gout(env, 0);
    for (size_t i = steps_.size(); i-- > 0;) {
      const Step& s = steps_[i];
      g = eltwise_backward(s.alg, s.alpha, s.beta, step_inputs_[i], g);
    }
    add_gin(env, 0, std::move(g));
  }

 private:
  std::vector<Step> steps_;
  std::vector<Buf> step_inputs_;
};

// softsign(x) = x / (1 + |x|); d/dx = 1 / (1 + |x|)^2.
class SoftsignKernel : public Kernel {
 public:
  using Kernel::Kernel;

  void forward(Env& env, bool) override {
    const Buf& x = in(env, 0);
    denom_ = linear(eltwise(algorithm::eltwise_abs, 0, 0, x), 1, 1);
    set_out(env, 0, binary(algorithm::binary_div, x, denom_));
  }

  void backward(Env& env) override {
    add_gin(env, 0, binary(algorithm::binary_div, *gout(env, 0), eltwise(algorithm::eltwise_square, 0, 0, denom_)));
  }

 private:
  Buf denom_;
};

}  // namespace

void register_eltwise(OpTable& t) {
  for (const auto& [name, fn] : chains()) t[name] = OpEntry{maker<ChainKernel>(), {}, {}};
  t["softsign"] = OpEntry{maker<SoftsignKernel>(), {}, {}};
}

}  // namespace quorum::backends::onednn
