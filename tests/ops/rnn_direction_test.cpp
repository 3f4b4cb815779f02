// The recurrent layers' directions (ONNX direction forward / reverse / bidirectional) and simple_rnn's
// activations (ONNX RNN activations Tanh, Relu, Sigmoid): a reverse layer
// is the forward layer on the sequence flipped in time (its outputs flipped back, its final state the
// forward layer's), a bidirectional one is both with their own halves of the stacked weights, outputs
// concatenated; the ONNX export reads back the same layer at every opset. The gradients are checked
// against finite differences by GradCheckWidened (gradcheck_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/rng.h"
#include "ir/graph.h"
#include "ir/onnx_io.h"
#include "ops/registry.h"
#include "ref/interpreter.h"

namespace quorum::ops {
namespace {

constexpr int64_t kN = 2, kT = 4, kF = 3, kH = 2;

int64_t gates(const std::string& op) { return op == "lstm" ? 4 : op == "gru" ? 3 : 1; }

Tensor filled(const core::Shape& s, double phase) {
  Tensor t(core::DType::F64, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.f64()[i] = 0.7 * std::sin(1.3 * static_cast<double>(i) + phase);
  return t;
}

// x flipped along the time axis (axis 1 of [N, T, K]).
Tensor flip_time(const Tensor& x) {
  Tensor y(core::DType::F64, x.shape());
  const int64_t n = x.dim(0), t = x.dim(1), k = x.dim(2);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t s = 0; s < t; ++s)
      for (int64_t j = 0; j < k; ++j) y.f64()[(b * t + s) * k + j] = x.f64()[(b * t + (t - 1 - s)) * k + j];
  return y;
}

// Rows [d*rows, (d+1)*rows) of a stacked parameter.
Tensor half(const Tensor& w, int64_t d) {
  core::Shape s = w.shape();
  s[0] /= 2;
  Tensor out(core::DType::F64, s);
  std::copy_n(w.f64() + d * out.numel(), out.numel(), out.f64());
  return out;
}

struct Layer {
  std::string op;
  Tensor x, w_ih, w_hh, b_ih, b_hh;
  Tensor run(const std::string& direction, int64_t sequences) const { return run_with(direction, sequences, x, 0); }
  // direction's layer on `in`; for a bidirectional layer's halves, the weights of direction `d`.
  Tensor run_with(const std::string& direction, int64_t sequences, const Tensor& in, int64_t d,
                  bool halves = false) const {
    const OpSpec& spec = op_spec();
    const core::Attrs a = canonical_attrs(
        spec, {{"hidden_size", kH}, {"return_sequences", sequences}, {"direction", direction}});
    const Tensor p1 = halves ? half(w_ih, d) : w_ih, p2 = halves ? half(w_hh, d) : w_hh,
                 p3 = halves ? half(b_ih, d) : b_ih, p4 = halves ? half(b_hh, d) : b_hh;
    return spec.forward({&in, &p1, &p2, &p3, &p4}, a)[0];
  }
  const OpSpec& op_spec() const { return ops::op(op); }
};

Layer layer(const std::string& op, int64_t dirs) {
  const int64_t rows = dirs * gates(op) * kH;
  return {op,
          filled({kN, kT, kF}, 0.1),
          filled({rows, kF}, 0.7),
          filled({rows, kH}, 1.9),
          filled({rows}, 2.3),
          filled({rows}, 3.1)};
}

std::vector<double> values(const Tensor& t) { return {t.f64(), t.f64() + t.numel()}; }

TEST(RnnDirection, AReverseLayerIsTheForwardLayerOnTheFlippedSequence) {
  for (const char* op : {"simple_rnn", "lstm", "gru"}) {
    SCOPED_TRACE(op);
    const Layer l = layer(op, 1);
    const Tensor flipped = flip_time(l.x);
    EXPECT_EQ(values(l.run("reverse", 1)), values(flip_time(l.run_with("forward", 1, flipped, 0))));
    EXPECT_EQ(values(l.run("reverse", 0)), values(l.run_with("forward", 0, flipped, 0)));
    EXPECT_NE(values(l.run("reverse", 0)), values(l.run("forward", 0))) << "the direction must matter";
  }
}

TEST(RnnDirection, ABidirectionalLayerConcatenatesBothDirectionsWithTheirOwnWeights) {
  for (const char* op : {"simple_rnn", "lstm", "gru"}) {
    SCOPED_TRACE(op);
    const Layer l = layer(op, 2);
    for (int64_t seq : {0, 1}) {
      const Tensor y = l.run("bidirectional", seq);
      const Tensor fwd = l.run_with("forward", seq, l.x, 0, true), rev = l.run_with("reverse", seq, l.x, 1, true);
      const int64_t rows = seq ? kN * kT : kN;
      ASSERT_EQ(y.numel(), rows * 2 * kH);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < kH; ++j) {
          EXPECT_EQ(y.f64()[r * 2 * kH + j], fwd.f64()[r * kH + j]) << "row " << r;
          EXPECT_EQ(y.f64()[r * 2 * kH + kH + j], rev.f64()[r * kH + j]) << "row " << r;
        }
    }
  }
}

TEST(RnnDirection, ASimpleRnnAppliesItsActivationToEachStep) {
  const Layer l = layer("simple_rnn", 1);
  const OpSpec& spec = l.op_spec();
  for (const char* f : {"tanh", "relu", "sigmoid"}) {
    SCOPED_TRACE(f);
    const Tensor y = spec.forward({&l.x, &l.w_ih, &l.w_hh, &l.b_ih, &l.b_hh},
                                  canonical_attrs(spec, {{"hidden_size", kH}, {"activation", std::string(f)}}))[0];
    // h_t = f(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh), computed here directly.
    auto act = [f](double v) {
      return std::string(f) == "relu" ? std::max(v, 0.0) : std::string(f) == "sigmoid" ? 1 / (1 + std::exp(-v))
                                                                                         : std::tanh(v);
    };
    for (int64_t b = 0; b < kN; ++b) {
      std::vector<double> h(kH, 0.0);
      for (int64_t t = 0; t < kT; ++t) {
        std::vector<double> next(kH);
        for (int64_t j = 0; j < kH; ++j) {
          double v = l.b_ih.f64()[j] + l.b_hh.f64()[j];
          for (int64_t q = 0; q < kF; ++q) v += l.w_ih.f64()[j * kF + q] * l.x.f64()[(b * kT + t) * kF + q];
          for (int64_t q = 0; q < kH; ++q) v += l.w_hh.f64()[j * kH + q] * h[static_cast<size_t>(q)];
          next[static_cast<size_t>(j)] = act(v);
          EXPECT_NEAR(y.f64()[(b * kT + t) * kH + j], act(v), 1e-12) << "row " << b << " step " << t;
        }
        h = next;
      }
    }
  }
}

TEST(RnnDirection, TheOnnxExportReadsBackTheSameLayer) {
  for (const char* op : {"simple_rnn", "lstm", "gru"})
    for (const char* direction : {"forward", "reverse", "bidirectional"})
      for (int64_t seq : {0, 1}) {
        SCOPED_TRACE(std::string(op) + " " + direction + " return_sequences " + std::to_string(seq));
        const Layer l = layer(op, std::string(direction) == "bidirectional" ? 2 : 1);
        ir::Graph g;
        g.inputs.push_back({"x", l.x.type()});
        g.initializers = {{"w_ih", l.w_ih}, {"w_hh", l.w_hh}, {"b_ih", l.b_ih}, {"b_hh", l.b_hh}};
        core::Attrs attrs = {{"hidden_size", kH}, {"return_sequences", seq}, {"direction", std::string(direction)}};
        if (std::string(op) == "simple_rnn") attrs["activation"] = std::string(seq ? "relu" : "sigmoid");
        g.nodes.push_back(
            {"r", op, {"x", "w_ih", "w_hh", "b_ih", "b_hh"}, {"y"}, canonical_attrs(l.op_spec(), attrs)});
        g.outputs = {"y"};
        ir::validate(g, "rnn direction");
        const Tensor want = ref::forward(g, {{"x", l.x}}).at("y");
        for (int opset : {11, 13, 17}) {
          const ir::Graph back = ir::graph_from_onnx(ir::graph_to_onnx(g, ir::OnnxForm{opset, 0}).bytes, "round trip");
          const Tensor got = ref::forward(back, {{"x", l.x}}).at(back.outputs[0]);
          EXPECT_EQ(values(got), values(want)) << "opset " << opset;
          EXPECT_EQ(got.shape(), want.shape());
        }
      }
}

TEST(RnnDirection, TheSamplerDrawsEveryDirection) {
  core::Rng rng(3);
  std::map<std::string, int> seen;
  for (int k = 0; k < 200; ++k) ++seen[core::attr_s(op("gru").sample(rng).attrs, "direction")];
  EXPECT_GT(seen["forward"], 60);
  EXPECT_GT(seen["reverse"], 25);
  EXPECT_GT(seen["bidirectional"], 25);
}

}  // namespace
}  // namespace quorum::ops
