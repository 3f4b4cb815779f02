// Recurrent layers: simple_rnn, lstm and gru over a batch-first X [N, T, F] from a zero state.
// Weights use PyTorch's layout and gate order (w_ih [G*H, F], w_hh [G*H, H], b_ih, b_hh [G*H]), so a
// libtorch backend maps them one to one. One driver runs every cell: each step computes the
// input and hidden pre-activations gi = W_ih x + b_ih and gh = W_hh h + b_hh, and the cell turns
// them into the new state; the VJP replays the forward and back-propagates through time.
#include <algorithm>
#include <cmath>

#include "ops/kernel_util.h"
#include "ops/registry.h"

namespace quorum::ops {
namespace {

enum class Cell { Rnn, Lstm, Gru };

int gate_count(Cell k) { return k == Cell::Rnn ? 1 : k == Cell::Lstm ? 4 : 3; }

double sigmoid(double x) { return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x)); }

// One step of one batch row. gi, gh hold G*H pre-activations; c is used by the LSTM only.
void cell_forward(Cell k, int64_t hs, const double* gi, const double* gh, const double* h_prev, const double* c_prev,
                  double* h, double* c) {
  for (int64_t j = 0; j < hs; ++j) {
    switch (k) {
      case Cell::Rnn: h[j] = std::tanh(gi[j] + gh[j]); break;
      case Cell::Lstm: {
        const double i = sigmoid(gi[j] + gh[j]);
        const double f = sigmoid(gi[hs + j] + gh[hs + j]);
        const double g = std::tanh(gi[2 * hs + j] + gh[2 * hs + j]);
        const double o = sigmoid(gi[3 * hs + j] + gh[3 * hs + j]);
        c[j] = f * c_prev[j] + i * g;
        h[j] = o * std::tanh(c[j]);
        break;
      }
      case Cell::Gru: {
        const double r = sigmoid(gi[j] + gh[j]);
        const double z = sigmoid(gi[hs + j] + gh[hs + j]);
        // The reset gate multiplies the hidden pre-activation including b_hn (PyTorch, ONNX
        // linear_before_reset=1).
        const double n = std::tanh(gi[2 * hs + j] + r * gh[2 * hs + j]);
        h[j] = (1.0 - z) * n + z * h_prev[j];
        break;
      }
    }
  }
}

// The backward of cell_forward. Given dL/dh and dL/dc of the new state, writes dL/dgi, dL/dgh,
// the part of dL/dh_prev that bypasses W_hh (GRU's z*h term) and dL/dc_prev.
void cell_backward(Cell k, int64_t hs, const double* gi, const double* gh, const double* h_prev, const double* c_prev,
                   const double* dh, const double* dc, double* dgi, double* dgh, double* dh_direct, double* dc_prev) {
  for (int64_t j = 0; j < hs; ++j) {
    dh_direct[j] = 0;
    dc_prev[j] = 0;
    switch (k) {
      case Cell::Rnn: {
        const double y = std::tanh(gi[j] + gh[j]);
        dgi[j] = dgh[j] = dh[j] * (1.0 - y * y);
        break;
      }
      case Cell::Lstm: {
        const double i = sigmoid(gi[j] + gh[j]);
        const double f = sigmoid(gi[hs + j] + gh[hs + j]);
        const double g = std::tanh(gi[2 * hs + j] + gh[2 * hs + j]);
        const double o = sigmoid(gi[3 * hs + j] + gh[3 * hs + j]);
        const double tc = std::tanh(f * c_prev[j] + i * g);
        const double dct = dc[j] + dh[j] * o * (1.0 - tc * tc);
        dgi[j] = dgh[j] = dct * g * i * (1.0 - i);
        dgi[hs + j] = dgh[hs + j] = dct * c_prev[j] * f * (1.0 - f);
        dgi[2 * hs + j] = dgh[2 * hs + j] = dct * i * (1.0 - g * g);
        dgi[3 * hs + j] = dgh[3 * hs + j] = dh[j] * tc * o * (1.0 - o);
        dc_prev[j] = dct * f;
        break;
      }
      case Cell::Gru: {
        const double r = sigmoid(gi[j] + gh[j]);
        const double z = sigmoid(gi[hs + j] + gh[hs + j]);
        const double n = std::tanh(gi[2 * hs + j] + r * gh[2 * hs + j]);
        const double dan = dh[j] * (1.0 - z) * (1.0 - n * n);
        const double dar = dan * gh[2 * hs + j] * r * (1.0 - r);
        const double daz = dh[j] * (h_prev[j] - n) * z * (1.0 - z);
        dgi[j] = dgh[j] = dar;
        dgi[hs + j] = dgh[hs + j] = daz;
        dgi[2 * hs + j] = dan;
        dgh[2 * hs + j] = dan * r;
        dh_direct[j] = dh[j] * z;
        break;
      }
    }
  }
}

// Everything the forward computes, kept for the backward: per row and step the pre-activations,
// and the states h_t, c_t for t = 0..T (state 0 is the zero initial state).
struct Trace {
  int64_t n, t, f, hs, gh;  // batch, steps, features, hidden size, G*H
  std::vector<double> gi_all, gh_all, h_all, c_all;
  const double* gi(int64_t b, int64_t s) const { return &gi_all[static_cast<size_t>((b * t + s) * gh)]; }
  const double* ghh(int64_t b, int64_t s) const { return &gh_all[static_cast<size_t>((b * t + s) * gh)]; }
  const double* h(int64_t b, int64_t s) const { return &h_all[static_cast<size_t>((b * (t + 1) + s) * hs)]; }
  const double* c(int64_t b, int64_t s) const { return &c_all[static_cast<size_t>((b * (t + 1) + s) * hs)]; }
};

Trace run(Cell k, const Inputs& in, int64_t hs) {
  const Tensor& x = *in[0];
  const double* w_ih = in[1]->f64();
  const double* w_hh = in[2]->f64();
  const double* b_ih = in[3]->f64();
  const double* b_hh = in[4]->f64();
  Trace tr{x.dim(0), x.dim(1), x.dim(2), hs, gate_count(k) * hs, {}, {}, {}, {}};
  tr.gi_all.assign(static_cast<size_t>(tr.n * tr.t * tr.gh), 0.0);
  tr.gh_all.assign(tr.gi_all.size(), 0.0);
  tr.h_all.assign(static_cast<size_t>(tr.n * (tr.t + 1) * hs), 0.0);
  tr.c_all.assign(tr.h_all.size(), 0.0);
  for (int64_t b = 0; b < tr.n; ++b)
    for (int64_t s = 0; s < tr.t; ++s) {
      const double* xt = x.f64() + (b * tr.t + s) * tr.f;
      const double* hp = tr.h(b, s);
      double* gi = &tr.gi_all[static_cast<size_t>((b * tr.t + s) * tr.gh)];
      double* gh = &tr.gh_all[static_cast<size_t>((b * tr.t + s) * tr.gh)];
      for (int64_t r = 0; r < tr.gh; ++r) {
        gi[r] = b_ih[r];
        for (int64_t q = 0; q < tr.f; ++q) gi[r] += w_ih[r * tr.f + q] * xt[q];
        gh[r] = b_hh[r];
        for (int64_t q = 0; q < hs; ++q) gh[r] += w_hh[r * hs + q] * hp[q];
      }
      const size_t next = static_cast<size_t>((b * (tr.t + 1) + s + 1) * hs);
      cell_forward(k, hs, gi, gh, hp, tr.c(b, s), &tr.h_all[next], &tr.c_all[next]);
    }
  return tr;
}

bool sequences(const Attrs& a) { return core::attr_i(a, "return_sequences") == 1; }

std::vector<Tensor> rnn_forward(Cell k, const Inputs& in, const Attrs& a) {
  const int64_t hs = core::attr_i(a, "hidden_size");
  const Trace tr = run(k, in, hs);
  Tensor y(DType::F64, sequences(a) ? Shape{tr.n, tr.t, hs} : Shape{tr.n, hs});
  for (int64_t b = 0; b < tr.n; ++b) {
    if (sequences(a)) {
      for (int64_t s = 0; s < tr.t; ++s)
        std::copy_n(tr.h(b, s + 1), hs, y.f64() + (b * tr.t + s) * hs);
    } else {
      std::copy_n(tr.h(b, tr.t), hs, y.f64() + b * hs);
    }
  }
  return {y};
}

std::vector<Tensor> rnn_vjp(Cell k, const Inputs& in, const Attrs& a, const std::vector<Tensor>& grad) {
  const int64_t hs = core::attr_i(a, "hidden_size");
  const Trace tr = run(k, in, hs);
  const double* xp = in[0]->f64();
  const double* w_ih = in[1]->f64();
  const double* w_hh = in[2]->f64();
  const double* gy = grad[0].f64();
  Tensor gx(DType::F64, in[0]->shape()), gw_ih(DType::F64, in[1]->shape()), gw_hh(DType::F64, in[2]->shape()),
      gb_ih(DType::F64, in[3]->shape()), gb_hh(DType::F64, in[4]->shape());
  const auto h_sz = static_cast<size_t>(hs);
  const auto g_sz = static_cast<size_t>(tr.gh);
  std::vector<double> dh(h_sz), dc(h_sz), dgi(g_sz), dgh(g_sz), dh_direct(h_sz), dc_prev(h_sz);
  for (int64_t b = 0; b < tr.n; ++b) {
    std::fill(dh.begin(), dh.end(), 0.0);
    std::fill(dc.begin(), dc.end(), 0.0);
    for (int64_t s = tr.t - 1; s >= 0; --s) {
      // The output gradient enters at every step (sequences) or only at the last.
      if (sequences(a)) {
        for (int64_t j = 0; j < hs; ++j) dh[static_cast<size_t>(j)] += gy[(b * tr.t + s) * hs + j];
      } else if (s == tr.t - 1) {
        for (int64_t j = 0; j < hs; ++j) dh[static_cast<size_t>(j)] += gy[b * hs + j];
      }
      const double* hp = tr.h(b, s);
      cell_backward(k, hs, tr.gi(b, s), tr.ghh(b, s), hp, tr.c(b, s), dh.data(), dc.data(), dgi.data(), dgh.data(),
                    dh_direct.data(), dc_prev.data());
      const double* xt = xp + (b * tr.t + s) * tr.f;
      double* gxt = gx.f64() + (b * tr.t + s) * tr.f;
      for (int64_t r = 0; r < tr.gh; ++r) {
        const double di = dgi[static_cast<size_t>(r)];
        const double dhh = dgh[static_cast<size_t>(r)];
        gb_ih.f64()[r] += di;
        gb_hh.f64()[r] += dhh;
        for (int64_t q = 0; q < tr.f; ++q) {
          gw_ih.f64()[r * tr.f + q] += di * xt[q];
          gxt[q] += w_ih[r * tr.f + q] * di;
        }
        for (int64_t q = 0; q < hs; ++q) {
          gw_hh.f64()[r * hs + q] += dhh * hp[q];
          dh_direct[static_cast<size_t>(q)] += w_hh[r * hs + q] * dhh;
        }
      }
      dh = dh_direct;
      dc = dc_prev;
    }
  }
  return {gx, gw_ih, gw_hh, gb_ih, gb_hh};
}

OpSpec rnn_spec(Cell k, std::string name, std::string doc) {
  OpSpec s;
  s.name = std::move(name);
  s.family = "rnn";
  s.doc = std::move(doc);
  s.attrs = {int_attr("hidden_size", 4, 1, kInf, {AttrValue(int64_t{0}), AttrValue(int64_t{-1})}, "H, the state size"),
             int_enum_attr("return_sequences", 1, {0, 1}, {2, -1},
                           "1: output every step [N, T, H]; 0: only the last step [N, H]")};
  s.infer = [k](const std::vector<TensorType>& in, const Attrs& a) {
    const DType dt = common_float_dtype(in);
    const Shape& x = in[0].shape;
    require(x.size() == 3, "recurrent layers expect X [N, T, F] (batch-first), got rank " + std::to_string(x.size()));
    require(x[1] >= 1, "recurrent layers need at least one time step");
    require(x[2] >= 1, "recurrent layers need at least one input feature");
    const int64_t hs = core::attr_i(a, "hidden_size");
    const int64_t gh = gate_count(k) * hs;
    const Shape out = sequences(a) ? Shape{x[0], x[1], hs} : Shape{x[0], hs};
    return Signature{{TensorType{dt, out}},
                     {{"w_ih", {dt, {gh, x[2]}}, Init::Normal},
                      {"w_hh", {dt, {gh, hs}}, Init::Normal},
                      {"b_ih", {dt, {gh}}, Init::Zeros},
                      {"b_hh", {dt, {gh}}, Init::Zeros}}};
  };
  s.forward = [k](const Inputs& in, const Attrs& a) { return rnn_forward(k, in, a); };
  s.vjp = [k](const Inputs& in, const Attrs& a, const std::vector<Tensor>&, const std::vector<Tensor>& g) {
    return rnn_vjp(k, in, a, g);
  };
  // Every step sums F + H products, and rounding carries through the T steps.
  s.reduction_length = [](const std::vector<TensorType>& in, const Attrs& a) -> int64_t {
    return (in[0].shape[2] + core::attr_i(a, "hidden_size")) * in[0].shape[1];
  };
  s.tags = {"rnn"};
  s.sample = [](core::Rng& rng) {
    Case c;
    c.inputs = {f64t({rng.randint(1, 2), rng.randint(2, 4), rng.randint(1, 4)})};
    c.attrs["hidden_size"] = rng.randint(1, 4);
    c.attrs["return_sequences"] = int64_t{rng.bernoulli(0.5) ? 1 : 0};
    return c;
  };
  return s;
}

}  // namespace

void register_rnn(Registry& r) {
  r.add(rnn_spec(Cell::Rnn, "simple_rnn", "Elman RNN: h' = tanh(W_ih x + b_ih + W_hh h + b_hh), zero initial state"));
  r.add(rnn_spec(Cell::Lstm, "lstm",
                 "LSTM with PyTorch gate order i, f, g, o: c' = f*c + i*g, h' = o*tanh(c'), zero initial state"));
  r.add(rnn_spec(Cell::Gru, "gru",
                 "GRU with PyTorch gate order r, z, n: n = tanh(W_in x + b_in + r*(W_hn h + b_hn)), "
                 "h' = (1-z)*n + z*h, zero initial state"));
}

}  // namespace quorum::ops
