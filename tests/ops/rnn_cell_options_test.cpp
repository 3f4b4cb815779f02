// ONNX's recurrent cell options: `clip` (each gate's pre-activation clamped to [-clip, clip] before its
// activation), LSTM's `input_forget` (f = 1 - i) and `peepholes` (ONNX's P: p_i * c and p_f * c added to
// i and f, p_o * c' to o), GRU's `linear_before_reset` 0 (n = tanh(W_in x + b_in + W_hn (r * h) +
// b_hn)), the gated cells' `activation` (LSTM's g and h, GRU's g: tanh, relu or sigmoid) and `initial_state`
// (parameters h0 and LSTM's c0 every sample starts from: ONNX's initial_h, initial_c). The kernel is
// checked against ONNX's equations written out here step by step, the export against its own read-back at
// three opsets, and the signature key against the default rule's (an option in its default state leaves a
// finding's signature as it was). Gradients are checked
// against finite differences by GradCheckWidened (gradcheck_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/rng.h"
#include "ir/graph.h"
#include "ir/onnx_io.h"
#include "ops/registry.h"
#include "oracle/judge_util.h"
#include "ref/interpreter.h"

namespace quorum::ops {
namespace {

constexpr int64_t kN = 2, kT = 4, kF = 3, kH = 2;

int64_t gates(const std::string& op) { return op == "lstm" ? 4 : op == "gru" ? 3 : 1; }

Tensor filled(const core::Shape& s, double phase, double scale) {
  Tensor t(core::DType::F64, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.f64()[i] = scale * std::sin(1.3 * static_cast<double>(i) + phase);
  return t;
}

struct Layer {
  std::string op;
  Tensor x, w_ih, w_hh, b_ih, b_hh, p;  // p: the LSTM's peepholes (i, f, o), used where the attrs say so
  Tensor h0, c0;                        // the initial state (initial_state 1)
  Tensor run(const core::Attrs& extra) const {
    const OpSpec& spec = ops::op(op);
    core::Attrs a = {{"hidden_size", kH}};
    for (const auto& [k, v] : extra) a[k] = v;
    a = canonical_attrs(spec, a);
    Inputs in = {&x, &w_ih, &w_hh, &b_ih, &b_hh};
    if (op == "lstm" && core::attr_i(a, "peepholes") == 1) in.push_back(&p);
    if (core::attr_i(a, "initial_state") == 1) in.push_back(&h0);
    if (op == "lstm" && core::attr_i(a, "initial_state") == 1) in.push_back(&c0);
    return spec.forward(in, a)[0];
  }
};

// Large weights, so a clip of 1 holds many pre-activations at its bounds.
Layer layer(const std::string& op) {
  const int64_t rows = gates(op) * kH;
  return {op, filled({kN, kT, kF}, 0.1, 1.5), filled({rows, kF}, 0.7, 2.0), filled({rows, kH}, 1.9, 2.0),
          filled({rows}, 2.3, 1.0), filled({rows}, 3.1, 1.0), filled({3 * kH}, 0.4, 1.5),
          filled({kH}, 1.1, 0.8),   filled({kH}, 2.6, 1.7)};
}

double sig(double v) { return 1 / (1 + std::exp(-v)); }

// ONNX's Tanh, Relu and Sigmoid by the catalogue's names.
double act(const std::string& f, double v) {
  return f == "relu" ? std::max(v, 0.0) : f == "sigmoid" ? sig(v) : std::tanh(v);
}

// Row j of W [rows, k] times v, plus b_j.
double affine(const Tensor& w, const Tensor& b, int64_t j, const std::vector<double>& v) {
  double s = b.f64()[j];
  const auto k = static_cast<int64_t>(v.size());
  for (int64_t q = 0; q < k; ++q) s += w.f64()[j * k + q] * v[static_cast<size_t>(q)];
  return s;
}

std::vector<double> step_x(const Tensor& x, int64_t b, int64_t t) {
  return {x.f64() + (b * kT + t) * kF, x.f64() + (b * kT + t + 1) * kF};
}

TEST(RnnCellOptions, AClippedCoupledLstmFollowsOnnxsEquations) {
  const Layer l = layer("lstm");
  for (const std::string fn : {"tanh", "relu", "sigmoid"})
  for (double clip : {0.0, 1.0})
    for (int64_t coupled : {0, 1})
      for (int64_t peep : {0, 1})
      for (int64_t init : {0, 1}) {
      SCOPED_TRACE("clip " + std::to_string(clip) + " input_forget " + std::to_string(coupled) + " peepholes " +
                   std::to_string(peep) + " activation " + fn + " initial_state " + std::to_string(init));
      const Tensor y = l.run({{"clip", clip}, {"input_forget", coupled}, {"peepholes", peep}, {"activation", fn},
                              {"initial_state", init}});
      auto pp = [&](int64_t k, int64_t j) { return peep ? l.p.f64()[k * kH + j] : 0.0; };
      auto cl = [clip](double v) { return clip > 0 ? std::clamp(v, -clip, clip) : v; };
      for (int64_t b = 0; b < kN; ++b) {
        std::vector<double> h(kH, 0.0), c(kH, 0.0);
        if (init) {
          h.assign(l.h0.f64(), l.h0.f64() + kH);
          c.assign(l.c0.f64(), l.c0.f64() + kH);
        }
        for (int64_t t = 0; t < kT; ++t) {
          const std::vector<double> xt = step_x(l.x, b, t);
          std::vector<double> hn(kH), cn(kH);
          for (int64_t j = 0; j < kH; ++j) {
            auto pre = [&](int64_t gate) {
              return affine(l.w_ih, l.b_ih, gate * kH + j, xt) + affine(l.w_hh, l.b_hh, gate * kH + j, h);
            };
            const auto uj = static_cast<size_t>(j);
            const double i = sig(cl(pre(0) + pp(0, j) * c[uj])),
                         f = coupled ? 1 - i : sig(cl(pre(1) + pp(1, j) * c[uj])), g = act(fn, cl(pre(2)));
            cn[uj] = f * c[uj] + i * g;
            const double o = sig(cl(pre(3) + pp(2, j) * cn[uj]));
            hn[uj] = o * act(fn, cn[uj]);
            EXPECT_NEAR(y.f64()[(b * kT + t) * kH + j], hn[uj], 1e-12) << "row " << b << " step " << t;
          }
          h = hn;
          c = cn;
        }
      }
    }
}

TEST(RnnCellOptions, AGruWithTheResetBeforeItsLinearStepFollowsOnnxsEquations) {
  const Layer l = layer("gru");
  for (const std::string fn : {"tanh", "relu", "sigmoid"})
  for (double clip : {0.0, 0.5})
    for (int64_t lbr : {0, 1})
    for (int64_t init : {0, 1}) {
      SCOPED_TRACE("clip " + std::to_string(clip) + " linear_before_reset " + std::to_string(lbr) + " activation " +
                   fn + " initial_state " + std::to_string(init));
      const Tensor y =
          l.run({{"clip", clip}, {"linear_before_reset", lbr}, {"activation", fn}, {"initial_state", init}});
      auto cl = [clip](double v) { return clip > 0 ? std::clamp(v, -clip, clip) : v; };
      for (int64_t b = 0; b < kN; ++b) {
        std::vector<double> h(kH, 0.0);
        if (init) h.assign(l.h0.f64(), l.h0.f64() + kH);
        for (int64_t t = 0; t < kT; ++t) {
          const std::vector<double> xt = step_x(l.x, b, t);
          std::vector<double> r(kH), z(kH), rh(kH), hn(kH);
          for (int64_t j = 0; j < kH; ++j) {
            const auto uj = static_cast<size_t>(j);
            r[uj] = sig(cl(affine(l.w_ih, l.b_ih, j, xt) + affine(l.w_hh, l.b_hh, j, h)));
            z[uj] = sig(cl(affine(l.w_ih, l.b_ih, kH + j, xt) + affine(l.w_hh, l.b_hh, kH + j, h)));
            rh[uj] = r[uj] * h[uj];
          }
          for (int64_t j = 0; j < kH; ++j) {
            const auto uj = static_cast<size_t>(j);
            const double hidden = lbr ? r[uj] * affine(l.w_hh, l.b_hh, 2 * kH + j, h)
                                      : affine(l.w_hh, l.b_hh, 2 * kH + j, rh);
            const double n = act(fn, cl(affine(l.w_ih, l.b_ih, 2 * kH + j, xt) + hidden));
            hn[uj] = (1 - z[uj]) * n + z[uj] * h[uj];
            EXPECT_NEAR(y.f64()[(b * kT + t) * kH + j], hn[uj], 1e-12) << "row " << b << " step " << t;
          }
          h = hn;
        }
      }
    }
}

TEST(RnnCellOptions, EachOptionChangesTheLayerAndAClipAboveEveryPreActivationDoesNot) {
  for (const char* op : {"simple_rnn", "lstm", "gru"}) {
    SCOPED_TRACE(op);
    const Layer l = layer(op);
    const std::vector<double> plain = [&] {
      const Tensor y = l.run({});
      return std::vector<double>(y.f64(), y.f64() + y.numel());
    }();
    auto values = [&](const core::Attrs& a) {
      const Tensor y = l.run(a);
      return std::vector<double>(y.f64(), y.f64() + y.numel());
    };
    EXPECT_EQ(values({{"clip", 1000.0}}), plain);
    EXPECT_NE(values({{"clip", 0.25}}), plain);
    EXPECT_NE(values({{"activation", std::string("relu")}}), plain);
    EXPECT_NE(values({{"activation", std::string("sigmoid")}}), plain);
    if (std::string(op) == "lstm") {
      EXPECT_NE(values({{"input_forget", int64_t{1}}}), plain);
      EXPECT_NE(values({{"peepholes", int64_t{1}}}), plain);
    }
    if (std::string(op) == "gru") {
      EXPECT_NE(values({{"linear_before_reset", int64_t{0}}}), plain);
    }
    EXPECT_NE(values({{"initial_state", int64_t{1}}}), plain);
  }
}

TEST(RnnCellOptions, TheOnnxExportReadsBackTheSameLayer) {
  const std::vector<std::pair<std::string, core::Attrs>> cases = {
      {"lstm", {{"clip", 1.5}, {"input_forget", int64_t{1}}}},
      {"lstm", {{"clip", 0.5}, {"direction", std::string("reverse")}}},
      {"lstm", {{"peepholes", int64_t{1}}}},
      {"lstm", {{"peepholes", int64_t{1}}, {"input_forget", int64_t{1}}, {"direction", std::string("bidirectional")}}},
      {"gru", {{"linear_before_reset", int64_t{0}}}},
      {"gru", {{"linear_before_reset", int64_t{0}}, {"clip", 3.0}, {"direction", std::string("bidirectional")}}},
      {"simple_rnn", {{"clip", 0.25}, {"activation", std::string("relu")}}},
      {"lstm", {{"activation", std::string("relu")}, {"direction", std::string("bidirectional")}}},
      {"lstm", {{"activation", std::string("sigmoid")}, {"peepholes", int64_t{1}}}},
      {"gru", {{"activation", std::string("relu")}, {"linear_before_reset", int64_t{0}}}},
      {"gru", {{"activation", std::string("sigmoid")}, {"direction", std::string("bidirectional")}}},
      {"lstm", {{"initial_state", int64_t{1}}, {"peepholes", int64_t{1}}, {"direction", std::string("bidirectional")}}},
      {"lstm", {{"initial_state", int64_t{1}}, {"direction", std::string("reverse")}}},
      {"gru", {{"initial_state", int64_t{1}}, {"linear_before_reset", int64_t{0}}}},
      {"simple_rnn", {{"initial_state", int64_t{1}}, {"direction", std::string("bidirectional")}}},
  };
  for (const auto& [op, extra] : cases) {
    SCOPED_TRACE(op + " " + core::to_string(extra));
    const int64_t dirs = extra.count("direction") && core::attr_s(extra, "direction") == "bidirectional" ? 2 : 1;
    Layer l = layer(op);
    auto stack = [dirs](const Tensor& w) {
      core::Shape s = w.shape();
      s[0] *= dirs;
      Tensor out(core::DType::F64, s);
      for (int64_t i = 0; i < out.numel(); ++i) out.f64()[i] = w.f64()[i % w.numel()] * (i < w.numel() ? 1 : -0.5);
      return out;
    };
    ir::Graph g;
    g.inputs.push_back({"x", l.x.type()});
    g.initializers = {{"w_ih", stack(l.w_ih)}, {"w_hh", stack(l.w_hh)}, {"b_ih", stack(l.b_ih)},
                      {"b_hh", stack(l.b_hh)}, {"p", stack(l.p)}, {"h0", stack(l.h0)}, {"c0", stack(l.c0)}};
    core::Attrs attrs = {{"hidden_size", kH}};
    for (const auto& [k, v] : extra) attrs[k] = v;
    std::vector<std::string> ins = {"x", "w_ih", "w_hh", "b_ih", "b_hh"};
    if (extra.count("peepholes")) ins.push_back("p");
    else g.initializers.erase("p");
    if (extra.count("initial_state")) ins.push_back("h0");
    else g.initializers.erase("h0");
    if (extra.count("initial_state") && op == "lstm") ins.push_back("c0");
    else g.initializers.erase("c0");
    g.nodes.push_back({"r", op, ins, {"y"}, canonical_attrs(ops::op(op), attrs)});
    g.outputs = {"y"};
    ir::validate(g, "rnn cell options");
    const Tensor want = ref::forward(g, {{"x", l.x}}).at("y");
    for (int opset : {11, 13, 17})
      for (bool written_state : {false, true}) {
      // The exchange form rnn_inputs=initial_h writes the zero initial state out (OpenCV's six-input GRU).
      ir::OnnxForm form{opset, 0};
      if (written_state) form.force = {"rnn_inputs=initial_h"};
      const ir::OnnxExported out = ir::graph_to_onnx(g, form);
      // A given initial state is always written (initial_h, initial_c), whatever the form asks.
      EXPECT_EQ(out.str().find("rnn_inputs=initial_h") != std::string::npos,
                written_state && !extra.count("initial_state"))
          << out.str();
      const ir::Graph back = ir::graph_from_onnx(out.bytes, "round trip");
      const Tensor got = ref::forward(back, {{"x", l.x}}).at(back.outputs[0]);
      ASSERT_EQ(got.numel(), want.numel());
      EXPECT_EQ(std::vector<double>(got.f64(), got.f64() + got.numel()),
                std::vector<double>(want.f64(), want.f64() + want.numel()))
          << "opset " << opset;
    }
  }
}

// An option in its default state leaves a finding's signature as the default rule's; a used one
// names itself (clip="given", input_forget=1, linear_before_reset=0).
TEST(RnnCellOptions, OnlyAUsedOptionEntersTheSignature) {
  auto key = [](const std::string& op, const core::Attrs& extra) {
    core::Attrs a = {{"hidden_size", int64_t{2}}};
    for (const auto& [k, v] : extra) a[k] = v;
    const ir::Node n{"r", op, {"x", "w_ih", "w_hh", "b_ih", "b_hh"}, {"y"}, canonical_attrs(ops::op(op), a)};
    return oracle::detail::key_params(n);
  };
  EXPECT_EQ(key("gru", {}), "{direction=\"forward\", return_sequences=1}");
  EXPECT_EQ(key("lstm", {{"input_forget", int64_t{0}}, {"clip", 0.0}}), "{direction=\"forward\", return_sequences=1}");
  EXPECT_EQ(key("gru", {{"linear_before_reset", int64_t{0}}}),
            "{direction=\"forward\", linear_before_reset=0, return_sequences=1}");
  EXPECT_EQ(key("lstm", {{"input_forget", int64_t{1}}, {"clip", 0.5}}),
            "{clip=\"given\", direction=\"forward\", input_forget=1, return_sequences=1}");
  EXPECT_EQ(key("gru", {{"activation", std::string("tanh")}}), "{direction=\"forward\", return_sequences=1}");
  EXPECT_EQ(key("lstm", {{"activation", std::string("relu")}}),
            "{activation=\"relu\", direction=\"forward\", return_sequences=1}");
  EXPECT_EQ(key("lstm", {{"initial_state", int64_t{0}}}), "{direction=\"forward\", return_sequences=1}");
  EXPECT_EQ(key("gru", {{"initial_state", int64_t{1}}}),
            "{direction=\"forward\", initial_state=1, return_sequences=1}");
}

TEST(RnnCellOptions, TheSamplerDrawsEveryOption) {
  core::Rng rng(5);
  std::map<std::string, int> seen;
  for (int k = 0; k < 300; ++k) {
    const Case l = op("lstm").sample(rng), g = op("gru").sample(rng);
    if (core::attr_f(canonical_attrs(op("lstm"), l.attrs), "clip") > 0) ++seen["clip"];
    if (core::attr_i(l.attrs, "input_forget") == 1) ++seen["input_forget"];
    if (core::attr_i(l.attrs, "peepholes") == 1) ++seen["peepholes"];
    if (core::attr_i(g.attrs, "linear_before_reset") == 0) ++seen["lbr0"];
    if (core::attr_i(l.attrs, "initial_state") == 1) ++seen["lstm initial_state"];
    if (core::attr_i(g.attrs, "initial_state") == 1) ++seen["gru initial_state"];
    if (core::attr_s(l.attrs, "activation") != "tanh") ++seen["lstm activation"];
    if (core::attr_s(g.attrs, "activation") == "sigmoid") ++seen["gru sigmoid"];
  }
  EXPECT_GT(seen["lstm activation"], 30);
  EXPECT_GT(seen["gru sigmoid"], 10);
  EXPECT_GT(seen["clip"], 30);
  EXPECT_GT(seen["input_forget"], 30);
  EXPECT_GT(seen["peepholes"], 40);
  EXPECT_GT(seen["lbr0"], 80);
  EXPECT_GT(seen["lstm initial_state"], 40);
  EXPECT_GT(seen["gru initial_state"], 40);
}

}  // namespace
}  // namespace quorum::ops
