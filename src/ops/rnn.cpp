// Recurrent layers: simple_rnn, lstm and gru over a batch-first X [N, T, F] from a zero state or from
// parameters h0 (and LSTM's c0) [D*H] that every sample starts from (`initial_state`), in
// ONNX's three directions (forward, reverse, bidirectional), with ONNX's cell options: `clip` (every
// gate's pre-activation clamped to [-clip, clip] before its activation), LSTM's `input_forget` (the
// forget gate coupled to the input gate, f = 1 - i) and `peepholes` (ONNX's P, a sixth parameter p),
// and GRU's `linear_before_reset` (0: the reset gate multiplies the state before W_hn,
// n = tanh(W_in x + b_in + W_hn (r * h) + b_hn)).
// Weights use PyTorch's layout and gate order (w_ih [G*H, F], w_hh [G*H, H], b_ih, b_hh [G*H]), so a
// libtorch backend maps them one to one. One driver runs every cell: each step computes the
// input and hidden pre-activations gi = W_ih x + b_ih and gh = W_hh h + b_hh, and the cell turns
// them into the new state; the VJP replays the forward and back-propagates through time. The
// pre-activations, gates and states are marked stored (ops::stored): a float32 implementation
// holds them in float32, and a gate that rounds to 1 there has a zero derivative. The same code is
// the layers' float32 evaluation (ops::Float32Evaluation), in order and with fused multiply-adds.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <type_traits>

#include "ops/kernel_util.h"
#include "ops/onnx_map.h"
#include "ops/registry.h"

namespace quorum::ops {
namespace {

enum class Cell { Rnn, Lstm, Gru };

int gate_count(Cell k) { return k == Cell::Rnn ? 1 : k == Cell::Lstm ? 4 : 3; }

// The kernel is written once for a scalar R: double is the float64 kernel, whose intermediates carry the
// float32 trials' marks (keep, keep_sum: ops::stored, ops::stored_sum); float is its float32 evaluation
// (ops::Float32Evaluation), which holds every pre-activation, gate, state, product and running sum in float32
// itself, so a per-step product past FLT_MAX is inf there, and inf * 0 NaN, as in a float32 library.
// Every constant is written R(...): no float value is widened to double (-Wdouble-promotion, below).
#pragma GCC diagnostic error "-Wdouble-promotion"

template <class R>
R keep(R v) {
  if constexpr (std::is_same_v<R, double>) return stored(v);
  else return v;
}
template <class R>
R keep_sum(R sum, R magnitude, int64_t terms) {
  if constexpr (std::is_same_v<R, double>) return stored_sum(sum, magnitude, terms);
  else return sum;
}

template <class R>
R sigmoid(R x) {
  return x >= R(0) ? R(1) / (R(1) + std::exp(-x)) : std::exp(x) / (R(1) + std::exp(x));
}

// The cell's activation (ONNX's `activations`: Tanh by default, Relu, Sigmoid): simple_rnn's f; LSTM's g and h
// (the cell input and the output's cell activation, ONNX's second and third) and GRU's g (the new gate n, its
// second); the gates stay sigmoid (ONNX's first).
enum class Act { Tanh, Relu, Sigmoid };

Act act_of(const Attrs& a) {
  if (!a.count("activation")) return Act::Tanh;
  const std::string& f = core::attr_s(a, "activation");
  return f == "relu" ? Act::Relu : f == "sigmoid" ? Act::Sigmoid : Act::Tanh;
}

// ReLU keeps a NaN, as the catalogue's relu does: a float32 state whose sums overflowed (inf - inf) is
// NaN, whatever a library's ReLU then makes of it.
template <class R>
R activate(Act f, R x) {
  return f == Act::Relu ? (x > R(0) || std::isnan(x) ? x : R(0)) : f == Act::Sigmoid ? sigmoid(x) : std::tanh(x);
}

// f'(x) from y = f(x): ReLU's derivative at 0 is 0, as libtorch takes it (NaN at a NaN).
template <class R>
R activate_grad(Act f, R y) {
  if (f == Act::Relu) return std::isnan(y) ? y : y > R(0) ? R(1) : R(0);
  return f == Act::Sigmoid ? y * (R(1) - y) : R(1) - y * y;
}

// One layer's cell: its kind and ONNX's cell options, and how its sums are evaluated.
struct Cfg {
  Cell k;
  Act act;
  double clip;    // 0: none; else each gate's pre-activation clamped to [-clip, clip] (a NaN stays NaN)
  bool coupled;   // LSTM input_forget: f = 1 - i (the forget gate's own rows unused)
  bool lbr;       // GRU linear_before_reset: 1 (PyTorch) r * (W_hn h + b_hn); 0: W_hn (r * h) + b_hn
  bool peep;      // LSTM peepholes: p [D*3*H] (i, f, o) adds p_i * c and p_f * c to i and f, p_o * c' to o
  int h0 = -1, c0 = -1;  // initial_state 1: the inputs holding h0 and (LSTM) c0 [D*H]; -1: the zero state
  bool fused = false;    // every product added to its sum by a fused multiply-add (a float32 evaluation order)
  template <class R>
  R cl(R x) const {
    return clip > 0 && !std::isnan(x) ? std::clamp(x, R(-clip), R(clip)) : x;
  }
  // d cl(x) / dx: 0 where the clamp holds x at a bound (strictly outside it), 1 elsewhere.
  template <class R>
  R cl_grad(R x) const {
    return clip > 0 && (x > R(clip) || x < R(-clip)) ? R(0) : R(1);
  }
  bool lbr0() const { return k == Cell::Gru && !lbr; }
  template <class R>
  void add_product(R& sum, R a, R b) const {
    ops::add_product(sum, a, b, fused);
  }
};

Cfg cfg_of(Cell k, const Attrs& a) {
  const std::string op = k == Cell::Lstm ? "lstm" : k == Cell::Gru ? "gru" : "simple_rnn";
  return Cfg{k,
             act_of(a),
             a.count("clip") ? core::attr_f(a, "clip") : 0.0,
             k == Cell::Lstm && a.count("input_forget") && core::attr_i(a, "input_forget") == 1,
             k != Cell::Gru || !a.count("linear_before_reset") || core::attr_i(a, "linear_before_reset") == 1,
             k == Cell::Lstm && a.count("peepholes") && core::attr_i(a, "peepholes") == 1,
             rnn_state_input(op, a, false),
             rnn_state_input(op, a, true)};
}

// GRU's reset gate r_j of one step.
template <class R>
R gru_reset(const Cfg& c, const R* gi, const R* gh, int64_t j) {
  return keep(sigmoid(c.cl(gi[j] + gh[j])));
}

// One step of one batch row. gi, gh hold G*H pre-activations (GRU with linear_before_reset 0: gh's n
// rows are W_hn (r * h) + b_hn); c and p (the direction's peepholes, null without) are the LSTM's.
template <class R>
void cell_forward(const Cfg& cf, int64_t hs, const R* gi, const R* gh, const R* h_prev, const R* c_prev, const R* p,
                  R* h, R* c) {
  for (int64_t j = 0; j < hs; ++j) {
    switch (cf.k) {
      case Cell::Rnn:
        h[j] = keep(activate(cf.act, cf.cl(gi[j] + gh[j])));
        break;
      case Cell::Lstm: {
        const R i = keep(sigmoid(cf.cl(gi[j] + gh[j] + (p ? p[j] * c_prev[j] : R(0)))));
        const R pf = gi[hs + j] + gh[hs + j] + (p ? p[hs + j] * c_prev[j] : R(0));
        const R f = cf.coupled ? keep(R(1) - i) : keep(sigmoid(cf.cl(pf)));
        const R g = keep(activate(cf.act, cf.cl(gi[2 * hs + j] + gh[2 * hs + j])));
        c[j] = keep(f * c_prev[j] + i * g);
        const R o = keep(sigmoid(cf.cl(gi[3 * hs + j] + gh[3 * hs + j] + (p ? p[2 * hs + j] * c[j] : R(0)))));
        h[j] = keep(o * keep(activate(cf.act, c[j])));
        break;
      }
      case Cell::Gru: {
        const R r = gru_reset(cf, gi, gh, j);
        const R z = keep(sigmoid(cf.cl(gi[hs + j] + gh[hs + j])));
        // linear_before_reset 1 (PyTorch): the reset gate multiplies the hidden pre-activation
        // including b_hn; 0: gh's n rows already read r * h.
        const R hn = cf.lbr ? r * gh[2 * hs + j] : gh[2 * hs + j];
        const R n = keep(activate(cf.act, cf.cl(gi[2 * hs + j] + hn)));
        h[j] = keep((R(1) - z) * n + z * h_prev[j]);
        break;
      }
    }
  }
}

// The backward of cell_forward. Given dL/dh and dL/dc of the new state, writes dL/dgi, dL/dgh,
// the part of dL/dh_prev that bypasses W_hh (GRU's z*h term) and dL/dc_prev. A GRU with
// linear_before_reset 0 leaves its reset gate's rows 0 here: they need W_hn (rnn_vjp_direction).
template <class R>
void cell_backward(const Cfg& cf, int64_t hs, const R* gi, const R* gh, const R* h_prev, const R* c_prev, const R* p,
                   const R* dh, const R* dc, R* dgi, R* dgh, R* dh_direct, R* dc_prev, R* dp) {
  for (int64_t j = 0; j < hs; ++j) {
    dh_direct[j] = 0;
    dc_prev[j] = 0;
    switch (cf.k) {
      case Cell::Rnn: {
        const R pre = gi[j] + gh[j];
        const R y = keep(activate(cf.act, cf.cl(pre)));
        dgi[j] = dgh[j] = dh[j] * activate_grad(cf.act, y) * cf.cl_grad(pre);
        break;
      }
      case Cell::Lstm: {
        const R pi = gi[j] + gh[j] + (p ? p[j] * c_prev[j] : R(0)),
                pf = gi[hs + j] + gh[hs + j] + (p ? p[hs + j] * c_prev[j] : R(0)), pg = gi[2 * hs + j] + gh[2 * hs + j];
        const R i = keep(sigmoid(cf.cl(pi)));
        const R f = cf.coupled ? keep(R(1) - i) : keep(sigmoid(cf.cl(pf)));
        const R g = keep(activate(cf.act, cf.cl(pg)));
        const R c = keep(f * c_prev[j] + i * g);
        const R po = gi[3 * hs + j] + gh[3 * hs + j] + (p ? p[2 * hs + j] * c : R(0));
        const R o = keep(sigmoid(cf.cl(po)));
        const R tc = keep(activate(cf.act, c));
        const R dpo = dh[j] * tc * o * (R(1) - o) * cf.cl_grad(po);
        // The output gate's peephole reads the new cell state: its gradient flows into c too.
        const R dct = dc[j] + dh[j] * o * activate_grad(cf.act, tc) + (p ? dpo * p[2 * hs + j] : R(0));
        // A coupled forget gate f = 1 - i passes dL/df to i with the opposite sign.
        const R di = dct * g - (cf.coupled ? dct * c_prev[j] : R(0));
        const R dpi = di * i * (R(1) - i) * cf.cl_grad(pi);
        const R dpf = cf.coupled ? R(0) : dct * c_prev[j] * f * (R(1) - f) * cf.cl_grad(pf);
        dgi[j] = dgh[j] = dpi;
        dgi[hs + j] = dgh[hs + j] = dpf;
        dgi[2 * hs + j] = dgh[2 * hs + j] = dct * i * activate_grad(cf.act, g) * cf.cl_grad(pg);
        dgi[3 * hs + j] = dgh[3 * hs + j] = dpo;
        dc_prev[j] = dct * f + (p ? dpi * p[j] + dpf * p[hs + j] : R(0));
        if (dp) {
          dp[j] += dpi * c_prev[j];
          dp[hs + j] += dpf * c_prev[j];
          dp[2 * hs + j] += dpo * c;
        }
        break;
      }
      case Cell::Gru: {
        const R r = gru_reset(cf, gi, gh, j);
        const R pz = gi[hs + j] + gh[hs + j];
        const R z = keep(sigmoid(cf.cl(pz)));
        const R pn = gi[2 * hs + j] + (cf.lbr ? r * gh[2 * hs + j] : gh[2 * hs + j]);
        const R n = keep(activate(cf.act, cf.cl(pn)));
        const R dan = dh[j] * (R(1) - z) * activate_grad(cf.act, n) * cf.cl_grad(pn);
        const R dar = cf.lbr ? dan * gh[2 * hs + j] * r * (R(1) - r) * cf.cl_grad(gi[j] + gh[j]) : R(0);
        const R daz = dh[j] * (h_prev[j] - n) * z * (R(1) - z) * cf.cl_grad(pz);
        dgi[j] = dgh[j] = dar;
        dgi[hs + j] = dgh[hs + j] = daz;
        dgi[2 * hs + j] = dan;
        dgh[2 * hs + j] = cf.lbr ? dan * r : dan;
        dh_direct[j] = dh[j] * z;
        break;
      }
    }
  }
}

// The layer's inputs (x, w_ih, w_hh, b_ih, b_hh, then p, h0, c0 where present) as R: the float32 evaluation
// reads each operand as float32 holds it.
template <class R>
struct Values {
  std::vector<std::vector<R>> in;
  explicit Values(const Inputs& inputs) {
    for (const Tensor* t : inputs) in.push_back(values_as<R>(*t));
  }
  const R* at(size_t i) const { return in.at(i).data(); }
};

// Everything one direction's forward computes, kept for the backward: per row and step (in the
// order the direction walks the sequence) the pre-activations, and the states h_s, c_s for
// s = 0..T (state 0 is the initial state: zero, or h0 and c0). Step s reads time index time(s).
template <class R>
struct Trace {
  int64_t n, t, f, hs, gh;  // batch, steps, features, hidden size, G*H
  bool back;                // walks the sequence from its last element (ONNX direction reverse)
  std::vector<R> gi_all, gh_all, h_all, c_all;
  int64_t time(int64_t s) const { return back ? t - 1 - s : s; }
  const R* gi(int64_t b, int64_t s) const { return &gi_all[static_cast<size_t>((b * t + s) * gh)]; }
  const R* ghh(int64_t b, int64_t s) const { return &gh_all[static_cast<size_t>((b * t + s) * gh)]; }
  const R* h(int64_t b, int64_t s) const { return &h_all[static_cast<size_t>((b * (t + 1) + s) * hs)]; }
  const R* c(int64_t b, int64_t s) const { return &c_all[static_cast<size_t>((b * (t + 1) + s) * hs)]; }
};

// Direction d's weights are rows [d*G*H, (d+1)*G*H) of each parameter. `x` is [N, T, F].
template <class R>
Trace<R> run(const Cfg& cf, const Values<R>& in, const Shape& x, int64_t hs, int64_t d, bool back) {
  const int64_t gh_rows = gate_count(cf.k) * hs;
  const R* xv = in.at(0);
  const R* w_ih = in.at(1) + d * gh_rows * x[2];
  const R* w_hh = in.at(2) + d * gh_rows * hs;
  const R* b_ih = in.at(3) + d * gh_rows;
  const R* b_hh = in.at(4) + d * gh_rows;
  const R* peep = cf.peep ? in.at(5) + d * 3 * hs : nullptr;
  Trace<R> tr{x[0], x[1], x[2], hs, gh_rows, back, {}, {}, {}, {}};
  tr.gi_all.assign(static_cast<size_t>(tr.n * tr.t * tr.gh), R(0));
  tr.gh_all.assign(tr.gi_all.size(), R(0));
  tr.h_all.assign(static_cast<size_t>(tr.n * (tr.t + 1) * hs), R(0));
  tr.c_all.assign(tr.h_all.size(), R(0));
  for (int64_t b = 0; b < tr.n; ++b)
    for (int64_t j = 0; j < hs; ++j) {
      const auto at = static_cast<size_t>(b * (tr.t + 1) * hs + j);
      if (cf.h0 >= 0) tr.h_all[at] = in.at(static_cast<size_t>(cf.h0))[d * hs + j];
      if (cf.c0 >= 0) tr.c_all[at] = in.at(static_cast<size_t>(cf.c0))[d * hs + j];
    }
  std::vector<R> rh(static_cast<size_t>(hs));
  for (int64_t b = 0; b < tr.n; ++b)
    for (int64_t s = 0; s < tr.t; ++s) {
      const R* xt = xv + (b * tr.t + tr.time(s)) * tr.f;
      const R* hp = tr.h(b, s);
      R* gi = &tr.gi_all[static_cast<size_t>((b * tr.t + s) * tr.gh)];
      R* gh = &tr.gh_all[static_cast<size_t>((b * tr.t + s) * tr.gh)];
      for (int64_t r = 0; r < tr.gh; ++r) {
        gi[r] = b_ih[r];
        R mi = std::abs(b_ih[r]);
        for (int64_t q = 0; q < tr.f; ++q) {
          cf.add_product(gi[r], w_ih[r * tr.f + q], xt[q]);
          mi += std::abs(w_ih[r * tr.f + q] * xt[q]);
        }
        gi[r] = keep_sum(gi[r], mi, tr.f + 1);
      }
      // GRU with linear_before_reset 0: the n rows read r * h, so the reset gate comes first.
      const int64_t n_rows = cf.lbr0() ? 2 * hs : tr.gh;
      for (int64_t r = 0; r < tr.gh; ++r) {
        if (r == n_rows)
          for (int64_t q = 0; q < hs; ++q) rh[static_cast<size_t>(q)] = keep(gru_reset(cf, gi, gh, q) * hp[q]);
        const R* hv = r < n_rows ? hp : rh.data();
        gh[r] = b_hh[r];
        R mh = std::abs(b_hh[r]);
        for (int64_t q = 0; q < hs; ++q) {
          cf.add_product(gh[r], w_hh[r * hs + q], hv[q]);
          mh += std::abs(w_hh[r * hs + q] * hv[q]);
        }
        gh[r] = keep_sum(gh[r], mh, hs + 1);
      }
      const size_t next = static_cast<size_t>((b * (tr.t + 1) + s + 1) * hs);
      cell_forward(cf, hs, gi, gh, hp, tr.c(b, s), peep, &tr.h_all[next], &tr.c_all[next]);
    }
  return tr;
}

bool sequences(const Attrs& a) { return core::attr_i(a, "return_sequences") == 1; }

template <class R>
std::vector<Tensor> rnn_forward(const Cfg& cf, const Inputs& in, const Attrs& a) {
  const int64_t hs = core::attr_i(a, "hidden_size"), dirs = rnn_directions(a);
  const int64_t n = in[0]->dim(0), t = in[0]->dim(1), width = dirs * hs;
  const Values<R> v(in);
  Tensor y(DType::F64, sequences(a) ? Shape{n, t, width} : Shape{n, width});
  for (int64_t d = 0; d < dirs; ++d) {
    const Trace<R> tr = run(cf, v, in[0]->shape(), hs, d, rnn_walks_back(a, d));
    auto put = [&](const R* h, int64_t at) {
      for (int64_t j = 0; j < hs; ++j) y.f64()[at + j] = static_cast<double>(h[j]);
    };
    for (int64_t b = 0; b < n; ++b) {
      if (sequences(a)) {
        for (int64_t s = 0; s < t; ++s) put(tr.h(b, s + 1), (b * t + tr.time(s)) * width + d * hs);
      } else {
        put(tr.h(b, t), b * width + d * hs);
      }
    }
  }
  return {y};
}

// Back-propagation through time for direction d, accumulated into the gradients `out` (one per input, each
// the input's size).
template <class R>
void rnn_vjp_direction(const Cfg& cf, const Values<R>& in, const Shape& x, const Attrs& a, const R* gy, int64_t d,
                       std::vector<std::vector<R>>& out) {
  const int64_t hs = core::attr_i(a, "hidden_size");
  const Trace<R> tr = run(cf, in, x, hs, d, rnn_walks_back(a, d));
  const int64_t width = rnn_directions(a) * hs;
  const R* xp = in.at(0);
  const R* w_ih = in.at(1) + d * tr.gh * tr.f;
  const R* w_hh = in.at(2) + d * tr.gh * hs;
  R* gx = out[0].data();
  R* gw_ih = out[1].data() + d * tr.gh * tr.f;
  R* gw_hh = out[2].data() + d * tr.gh * hs;
  R* gb_ih = out[3].data() + d * tr.gh;
  R* gb_hh = out[4].data() + d * tr.gh;
  const R* peep = cf.peep ? in.at(5) + d * 3 * hs : nullptr;
  R* gpeep = cf.peep ? out.at(5).data() + d * 3 * hs : nullptr;
  R* gh0 = cf.h0 >= 0 ? out.at(static_cast<size_t>(cf.h0)).data() + d * hs : nullptr;
  R* gc0 = cf.c0 >= 0 ? out.at(static_cast<size_t>(cf.c0)).data() + d * hs : nullptr;
  const auto h_sz = static_cast<size_t>(hs);
  const auto g_sz = static_cast<size_t>(tr.gh);
  std::vector<R> dh(h_sz), dc(h_sz), dgi(g_sz), dgh(g_sz), dh_direct(h_sz), dc_prev(h_sz), rv(h_sz), rh(h_sz);
  for (int64_t b = 0; b < tr.n; ++b) {
    std::fill(dh.begin(), dh.end(), R(0));
    std::fill(dc.begin(), dc.end(), R(0));
    for (int64_t s = tr.t - 1; s >= 0; --s) {
      // The output gradient enters at every step (sequences) or only at the last.
      if (sequences(a)) {
        const R* g = gy + (b * tr.t + tr.time(s)) * width + d * hs;
        for (int64_t j = 0; j < hs; ++j) dh[static_cast<size_t>(j)] += g[j];
      } else if (s == tr.t - 1) {
        for (int64_t j = 0; j < hs; ++j) dh[static_cast<size_t>(j)] += gy[b * width + d * hs + j];
      }
      const R* hp = tr.h(b, s);
      const R* gis = tr.gi(b, s);
      const R* ghs = tr.ghh(b, s);
      cell_backward(cf, hs, gis, ghs, hp, tr.c(b, s), peep, dh.data(), dc.data(), dgi.data(), dgh.data(),
                    dh_direct.data(), dc_prev.data(), gpeep);
      // GRU with linear_before_reset 0: the n rows' W_hn read r * h, so the reset gate's gradient is
      // (W_hn^T dgh_n) * h, and h's own is (W_hn^T dgh_n) * r.
      const int64_t n_rows = cf.lbr0() ? 2 * hs : tr.gh;
      if (cf.lbr0())
        for (int64_t q = 0; q < hs; ++q) {
          const auto uq = static_cast<size_t>(q);
          rv[uq] = gru_reset(cf, gis, ghs, q);
          rh[uq] = keep(rv[uq] * hp[q]);
          R u = 0;
          for (int64_t r = n_rows; r < tr.gh; ++r) cf.add_product(u, w_hh[r * hs + q], dgh[static_cast<size_t>(r)]);
          dgi[uq] = dgh[uq] = u * hp[q] * rv[uq] * (R(1) - rv[uq]) * cf.cl_grad(gis[q] + ghs[q]);
        }
      // Each step's products (dW_ih = sum_t dpre_t x_t^T, dx_t = W_ih^T dpre_t, dW_hh = sum_t dpre_t h_t^T) and
      // the state gradients: the float32 evaluation holds them in float32, where one past FLT_MAX is inf, two
      // of opposite signs NaN, and an overflowed state gradient times the next step's zero state NaN, although
      // the exact sums fit (issue 39's recurrent class; seed 10371's dW_hh).
      const R* xt = xp + (b * tr.t + tr.time(s)) * tr.f;
      R* gxt = gx + (b * tr.t + tr.time(s)) * tr.f;
      for (int64_t r = 0; r < tr.gh; ++r) {
        const R di = dgi[static_cast<size_t>(r)];
        const R dhh = dgh[static_cast<size_t>(r)];
        gb_ih[r] += di;
        gb_hh[r] += dhh;
        for (int64_t q = 0; q < tr.f; ++q) {
          cf.add_product(gw_ih[r * tr.f + q], di, xt[q]);
          cf.add_product(gxt[q], w_ih[r * tr.f + q], di);
        }
        const bool reads_rh = r >= n_rows;
        for (int64_t q = 0; q < hs; ++q) {
          const auto uq = static_cast<size_t>(q);
          cf.add_product(gw_hh[r * hs + q], dhh, reads_rh ? rh[uq] : hp[q]);
          cf.add_product(dh_direct[uq], w_hh[r * hs + q] * dhh, reads_rh ? rv[uq] : R(1));
        }
      }
      std::copy(dh_direct.begin(), dh_direct.end(), dh.begin());
      std::copy(dc_prev.begin(), dc_prev.end(), dc.begin());
    }
    // The initial state's gradient: what reaches state 0, summed over the samples that share it.
    for (int64_t j = 0; j < hs; ++j) {
      if (gh0) gh0[j] += dh[static_cast<size_t>(j)];
      if (gc0) gc0[j] += dc[static_cast<size_t>(j)];
    }
  }
}

template <class R>
std::vector<Tensor> rnn_vjp(const Cfg& cf, const Inputs& in, const Attrs& a, const std::vector<Tensor>& grad) {
  const Values<R> v(in);
  const Values<R> g({&grad[0]});
  // One gradient per input (x, w_ih, w_hh, b_ih, b_hh, then p, h0, c0 where present), each its input's shape.
  std::vector<std::vector<R>> out;
  for (const Tensor* t : in) out.emplace_back(static_cast<size_t>(t->numel()), R(0));
  for (int64_t d = 0; d < rnn_directions(a); ++d) rnn_vjp_direction(cf, v, in[0]->shape(), a, g.at(0), d, out);
  std::vector<Tensor> r;
  for (size_t i = 0; i < in.size(); ++i) r.push_back(widened(out[i], in[i]->shape()));
  return r;
}

// The float64 kernel, or inside a Float32Evaluation scope its float32 evaluation in that scope's order.
std::vector<Tensor> rnn_forward(Cell k, const Inputs& in, const Attrs& a) {
  return in_evaluation_precision([&](auto zero, bool fused) {
    Cfg cf = cfg_of(k, a);
    cf.fused = fused;
    return rnn_forward<decltype(zero)>(cf, in, a);
  });
}

std::vector<Tensor> rnn_vjp(Cell k, const Inputs& in, const Attrs& a, const std::vector<Tensor>& grad) {
  return in_evaluation_precision([&](auto zero, bool fused) {
    Cfg cf = cfg_of(k, a);
    cf.fused = fused;
    return rnn_vjp<decltype(zero)>(cf, in, a, grad);
  });
}

OpSpec rnn_spec(Cell k, std::string name, std::string doc) {
  OpSpec s;
  s.name = std::move(name);
  s.family = "rnn";
  s.doc = std::move(doc);
  s.attrs = {int_attr("hidden_size", 4, 1, kInf, {AttrValue(int64_t{0}), AttrValue(int64_t{-1})}, "H, the state size"),
             int_enum_attr("return_sequences", 1, {0, 1}, {2, -1},
                           "1: output every step [N, T, D*H]; 0: only each direction's last step [N, D*H]"),
             enum_attr("direction", "forward", {"forward", "reverse", "bidirectional"}, {"", "backward"},
                       "ONNX's direction: reverse reads the sequence from its end; bidirectional (D = 2) runs "
                       "both with their own weights, outputs concatenated [forward, reverse] as PyTorch does")};
  if (k == Cell::Rnn)
    s.attrs.push_back(enum_attr("activation", "tanh", {"tanh", "relu", "sigmoid"}, {"", "elu"},
                                "f in h' = f(W_ih x + b_ih + W_hh h + b_hh) (ONNX RNN's activations)"));
  else
    s.attrs.push_back(keyed_when_given(enum_attr(
        "activation", "tanh", {"tanh", "relu", "sigmoid"}, {"", "elu"},
        k == Cell::Lstm ? "the cell's activation g in c' = f*c + i*g(...) and h in h' = o*h(c'); the gates stay "
                          "sigmoid (ONNX LSTM's activations [Sigmoid, g, h] with g = h)"
                        : "the new gate's activation g in n = g(...); the gates stay sigmoid (ONNX GRU's activations "
                          "[Sigmoid, g])")));
  s.attrs.push_back(keyed_when_given(float_attr(
      "clip", 0.0, 0.0, kInf, {AttrValue(-1.0)},
      "ONNX's cell clip: 0 none; else each gate's pre-activation is clamped to [-clip, clip] before its activation")));
  if (k == Cell::Lstm) {
    s.attrs.push_back(keyed_when_given(int_enum_attr(
        "input_forget", 0, {0, 1}, {2, -1},
        "1: the forget gate is coupled to the input gate, f = 1 - i (ONNX input_forget)")));
    s.attrs.push_back(keyed_when_given(int_enum_attr(
        "peepholes", 0, {0, 1}, {2, -1},
        "1: a weight p [D*3*H] (gates i, f, o) adds p_i * c and p_f * c to i and f and p_o * c' to o "
        "(ONNX LSTM's P)")));
  }
  s.attrs.push_back(keyed_when_given(int_enum_attr(
      "initial_state", 0, {0, 1}, {2, -1},
      k == Cell::Lstm ? "1: parameters h0 and c0 [D*H], the state every sample starts from (ONNX initial_h and "
                        "initial_c, which hold it per sample [D, N, H]); 0: the zero state"
                      : "1: a parameter h0 [D*H], the state every sample starts from (ONNX initial_h, which holds it "
                        "per sample [D, N, H]); 0: the zero state")));
  if (k == Cell::Gru)
    s.attrs.push_back(keyed_when_given(int_enum_attr(
        "linear_before_reset", 1, {0, 1}, {2, -1},
        "1: n = tanh(W_in x + b_in + r * (W_hn h + b_hn)) (PyTorch); "
        "0: n = tanh(W_in x + b_in + W_hn (r * h) + b_hn) (ONNX's default)")));
  s.infer = [k](const std::vector<TensorType>& in, const Attrs& a) {
    const DType dt = common_float_dtype(in);
    const Shape& x = in[0].shape;
    QUORUM_REQUIRE(x.size() == 3,
                   "recurrent layers expect X [N, T, F] (batch-first), got rank " + std::to_string(x.size()));
    QUORUM_REQUIRE(x[1] >= 1, "recurrent layers need at least one time step");
    QUORUM_REQUIRE(x[2] >= 1, "recurrent layers need at least one input feature");
    const int64_t hs = core::attr_i(a, "hidden_size");
    const int64_t gh = rnn_directions(a) * gate_count(k) * hs;  // every direction's gate rows, stacked
    const int64_t width = rnn_directions(a) * hs;
    const Shape out = sequences(a) ? Shape{x[0], x[1], width} : Shape{x[0], width};
    Signature sig{{TensorType{dt, out}},
                  {{"w_ih", {dt, {gh, x[2]}}, Init::Normal},
                   {"w_hh", {dt, {gh, hs}}, Init::Normal},
                   {"b_ih", {dt, {gh}}, Init::Zeros},
                   {"b_hh", {dt, {gh}}, Init::Zeros}}};
    const Cfg cf = cfg_of(k, a);
    if (cf.peep) sig.params.push_back({"p", {dt, {rnn_directions(a) * 3 * hs}}, Init::Normal});
    if (cf.h0 >= 0) sig.params.push_back({"h0", {dt, {rnn_directions(a) * hs}}, Init::Normal});
    if (cf.c0 >= 0) sig.params.push_back({"c0", {dt, {rnn_directions(a) * hs}}, Init::Normal});
    return sig;
  };
  s.forward = [k](const Inputs& in, const Attrs& a) { return rnn_forward(k, in, a); };
  s.vjp = [k](const Inputs& in, const Attrs& a, const std::vector<Tensor>&, const std::vector<Tensor>& g) {
    return rnn_vjp(k, in, a, g);
  };
  // Every step sums F + H products, and rounding carries through the T steps.
  s.reduction_length = [](const std::vector<TensorType>& in, const Attrs& a) -> int64_t {
    return (in[0].shape[2] + core::attr_i(a, "hidden_size")) * in[0].shape[1];
  };
  s.float32_orders = {Float32Order::kInOrder, Float32Order::kFused};
  s.tags = {"rnn"};
  s.sample = [k](core::Rng& rng) {
    Case c;
    c.inputs = {f64t({rng.randint(1, 2), rng.randint(2, 4), rng.randint(1, 4)})};
    c.attrs["hidden_size"] = rng.randint(1, 4);
    c.attrs["return_sequences"] = int64_t{rng.bernoulli(0.5) ? 1 : 0};
    const double u = rng.uniform(0.0, 1.0);
    c.attrs["direction"] = std::string(u < 0.5 ? "forward" : u < 0.75 ? "reverse" : "bidirectional");
    if (k == Cell::Rnn) {
      const double v = rng.uniform(0.0, 1.0);
      c.attrs["activation"] = std::string(v < 0.5 ? "tanh" : v < 0.8 ? "relu" : "sigmoid");
    } else {  // a fifth of the gated cells with another activation
      const double v = rng.uniform(0.0, 1.0);
      c.attrs["activation"] = std::string(v < 0.8 ? "tanh" : v < 0.9 ? "relu" : "sigmoid");
    }
    // A fifth of the layers clip, at bounds exact in float32 (ONNX's clip is a float attribute), from
    // ones most pre-activations pass to ones that hold most of them.
    if (rng.bernoulli(0.2)) {
      static const double kClips[] = {0.25, 0.5, 1.0, 1.5, 3.0, 8.0};
      c.attrs["clip"] = kClips[rng.randint(0, 5)];
    }
    if (k == Cell::Lstm) c.attrs["input_forget"] = int64_t{rng.bernoulli(0.2) ? 1 : 0};
    if (k == Cell::Lstm) c.attrs["peepholes"] = int64_t{rng.bernoulli(0.25) ? 1 : 0};
    if (k == Cell::Gru) c.attrs["linear_before_reset"] = int64_t{rng.bernoulli(0.4) ? 0 : 1};
    c.attrs["initial_state"] = int64_t{rng.bernoulli(0.25) ? 1 : 0};
    return c;
  };
  return s;
}

// ---- ONNX mapping: ONNX RNN/LSTM/GRU are time-major [T, N, F] with gate blocks in another order
// (LSTM i o f c, GRU z r h) and W, R, B stacked per direction; clip, input_forget and
// linear_before_reset are the attributes of the same names.

// PyTorch gate blocks → ONNX gate blocks: ONNX block k is PyTorch block order[k].
std::vector<int64_t> onnx_gate_order(const std::string& op) {
  if (op == "lstm") return {0, 3, 1, 2};  // PyTorch i f g o → ONNX i o f c
  if (op == "gru") return {1, 0, 2};      // PyTorch r z n → ONNX z r h
  return {0};
}

// LSTM peepholes: ONNX's P holds the blocks i, o, f, the catalogue's p i, f, o; the swap is its own
// inverse, so the same order maps either way.
const std::vector<int64_t> kPeepholeOrder = {0, 2, 1};

// ONNX gate blocks → PyTorch gate blocks: PyTorch block j is ONNX block order[j].
std::vector<int64_t> torch_gate_order(const std::string& type) {
  if (type == "LSTM") return {0, 2, 3, 1};  // ONNX i o f c → PyTorch i f g o
  if (type == "GRU") return {1, 0, 2};      // ONNX z r h → PyTorch r z n
  return {0};
}

// Direction d's rows of `w` [D*G*H, K] regrouped by gate into ONNX order, written into `dst` from
// element `off`.
void reorder_rows(const Tensor& w, const std::vector<int64_t>& order, int64_t hs, int64_t d, Tensor& dst,
                  int64_t off) {
  const int64_t k = w.rank() == 2 ? w.dim(1) : 1;
  const int64_t src = d * static_cast<int64_t>(order.size()) * hs * k;
  for (size_t blk = 0; blk < order.size(); ++blk)
    for (int64_t r = 0; r < hs; ++r)
      for (int64_t c = 0; c < k; ++c)
        dst.set(off + (static_cast<int64_t>(blk) * hs + r) * k + c, w.get(src + (order[blk] * hs + r) * k + c));
}

void export_rnn(OnnxExport& e) {
  const std::string& op = e.op();
  const int64_t hs = e.ai("hidden_size");
  const std::string direction = e.as("direction");
  const int64_t dirs = rnn_directions(e.attrs());
  const auto order = onnx_gate_order(op);
  const int64_t gh = static_cast<int64_t>(order.size()) * hs;
  auto weight = [&e](size_t i) {
    const Tensor* t = e.initializer(e.in(i));
    if (!t) e.refuse("recurrent weights must be initializers to be exported ('" + e.in(i) + "' is computed)");
    return *t;
  };
  const Tensor w_ih = weight(1), w_hh = weight(2), b_ih = weight(3), b_hh = weight(4);
  const DType dt = e.dtype();
  Tensor w(dt, {dirs, gh, w_ih.dim(1)}), r(dt, {dirs, gh, hs}), b(dt, {dirs, 2 * gh});
  for (int64_t d = 0; d < dirs; ++d) {
    reorder_rows(w_ih, order, hs, d, w, d * gh * w_ih.dim(1));
    reorder_rows(w_hh, order, hs, d, r, d * gh * hs);
    reorder_rows(b_ih, order, hs, d, b, d * 2 * gh);
    reorder_rows(b_hh, order, hs, d, b, d * 2 * gh + gh);
  }
  const std::string wn = e.constant(w, "W"), rn = e.constant(r, "R"), bn = e.constant(b, "B");
  auto [tp, xt] = e.helper("Transpose", {e.in(0)}, "x_time_major");
  tp->set_ints("perm", {1, 0, 2});
  const bool seq = e.ai("return_sequences") != 0;
  const std::string type = op == "lstm" ? "LSTM" : op == "gru" ? "GRU" : "RNN";
  const std::string cell_out = e.fresh(e.name() + (seq ? "/Y" : "/Y_h"));
  const std::string cell_name = e.fresh(e.name() + "/" + type);
  std::vector<std::string> cell_ins = {xt, wn, rn, bn};
  // A given initial state (h0, c0 [D*H], one for every sample) is ONNX's initial_h and initial_c [D, N, H],
  // each sample's row the same. Else the exchange form rnn_inputs=initial_h: the zero initial state written out
  // as initial_h (and initial_c), sequence_lens absent ("") — the six-input GRU an importer may need (OpenCV
  // 4.6's).
  const bool peep = op == "lstm" && e.ai("peepholes") == 1;
  const int h0 = rnn_state_input(op, e.attrs(), false), c0 = rnn_state_input(op, e.attrs(), true);
  auto per_sample = [&](int i) {
    const Tensor state = weight(static_cast<size_t>(i));
    const int64_t n = e.in_shape(0)[0];
    Tensor t(dt, {dirs, n, hs});
    for (int64_t d = 0; d < dirs; ++d)
      for (int64_t b = 0; b < n; ++b)
        for (int64_t j = 0; j < hs; ++j) t.set((d * n + b) * hs + j, state.get(d * hs + j));
    return t;
  };
  if (h0 >= 0) {
    cell_ins.insert(cell_ins.end(), {"", e.constant(per_sample(h0), "initial_h")});
    if (op == "lstm") cell_ins.push_back(e.constant(per_sample(c0), "initial_c"));
  } else if (e.choose2("rnn_inputs", "given", "initial_h")) {
    const Tensor zero_state(dt, {dirs, e.in_shape(0)[0], hs});
    cell_ins.insert(cell_ins.end(), {"", e.constant(zero_state, "initial_h")});
    if (op == "lstm") cell_ins.push_back(e.constant(zero_state, "initial_c"));
  } else if (peep) {
    cell_ins.insert(cell_ins.end(), {"", "", ""});
  }
  if (peep) {
    // ONNX's P [D, 3H] holds the peepholes in the order i, o, f; the catalogue's p is i, f, o.
    const Tensor pw = weight(5);
    Tensor pt(dt, {dirs, 3 * hs});
    for (int64_t d = 0; d < dirs; ++d) reorder_rows(pw, kPeepholeOrder, hs, d, pt, d * 3 * hs);
    cell_ins.push_back(e.constant(pt, "P"));
  }
  OnnxNode& p = e.node(type, cell_name, cell_ins,
                       seq ? std::vector<std::string>{cell_out} : std::vector<std::string>{"", cell_out});
  p.set_i("hidden_size", hs);
  if (direction != "forward") p.set_s("direction", direction);
  if (e.as("activation") != "tanh") {  // per direction: RNN's f, GRU's Sigmoid and g, LSTM's Sigmoid, g and h
    const std::string f = e.as("activation") == "relu" ? "Relu" : "Sigmoid";
    std::vector<std::string> each = {f};
    if (op == "lstm") each = {"Sigmoid", f, f};
    if (op == "gru") each = {"Sigmoid", f};
    std::vector<std::string> acts;
    for (int64_t d = 0; d < dirs; ++d) acts.insert(acts.end(), each.begin(), each.end());
    p.set_strings("activations", acts);
  }
  if (op == "gru") p.set_i("linear_before_reset", e.ai("linear_before_reset"));
  if (e.af("clip") > 0) p.set_f("clip", e.af("clip"));
  if (op == "lstm" && e.ai("input_forget") == 1) p.set_i("input_forget", 1);
  if (dirs == 2) {
    // Y [T, 2, N, H] -> [T, N, 2, H] -> [T, N, 2H] -> [N, T, 2H]; Y_h [2, N, H] -> [N, 2, H] -> [N, 2H].
    const Shape& x = e.in_shape(0);
    auto [q, mid] = e.helper("Transpose", {cell_out}, seq ? "y_tn2h" : "h_n2h");
    q->set_ints("perm", seq ? std::vector<int64_t>{0, 2, 1, 3} : std::vector<int64_t>{1, 0, 2});
    if (!seq) {
      e.final_node("Reshape", {mid, e.ints({x[0], 2 * hs}, "shape")});
      return;
    }
    const std::string flat = e.h("Reshape", {mid, e.ints({x[1], x[0], 2 * hs}, "shape")}, "y_time_major");
    e.final_node("Transpose", {flat}).set_ints("perm", {1, 0, 2});
    return;
  }
  // One direction: Y [T, 1, N, H] and Y_h [1, N, H] lose their direction axis by Squeeze, or in the exchange
  // forms rnn_y_axis=reshape and rnn_y_h_axis=reshape by a Reshape to the known shape (an importer that cannot
  // read opset 13's Squeeze with an axes input reads it: OpenCV 4.6's, where its layer gives that output).
  if (e.choose2(seq ? "rnn_y_axis" : "rnn_y_h_axis", "squeeze", "reshape")) {
    const Shape& x = e.in_shape(0);
    if (!seq) {
      e.final_node("Reshape", {cell_out, e.ints({x[0], hs}, "shape")});
      return;
    }
    const std::string ys = e.h("Reshape", {cell_out, e.ints({x[1], x[0], hs}, "shape")}, "y_time_major");
    e.final_node("Transpose", {ys}).set_ints("perm", {1, 0, 2});
    return;
  }
  // Squeeze takes its axes as an input from opset 13, as an attribute before.
  auto squeeze_ins = [&e](const std::string& v, int64_t axis) {
    return e.opset() >= 13 ? std::vector<std::string>{v, e.ints({axis}, "axes")} : std::vector<std::string>{v};
  };
  if (!seq) {
    OnnxNode& q = e.final_node("Squeeze", squeeze_ins(cell_out, 0));
    if (e.opset() < 13) q.set_ints("axes", {0});
    return;
  }
  auto [q, ys] = e.helper("Squeeze", squeeze_ins(cell_out, 1), "y_time_major");
  if (e.opset() < 13) q->set_ints("axes", {1});
  e.final_node("Transpose", {ys}).set_ints("perm", {1, 0, 2});
}

bool zero_or_absent(const OnnxImport& m, int i) {
  if (!m.present(i)) return true;
  const Tensor* t = m.constant(i);
  if (!t) return false;
  for (int64_t k = 0; k < t->numel(); ++k)
    if (t->get(k) != 0) return false;
  return true;
}

// RNN/LSTM/GRU → transpose, the recurrent layer, and the transposes/slices giving Y and Y_h.
void import_rnn(OnnxImport& m) {
  constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
  const std::string type = m.op_type();
  const std::string op = type == "LSTM" ? "lstm" : type == "GRU" ? "gru" : "simple_rnn";
  const std::string direction = m.gets("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    m.fail("direction '" + direction + "' is not an ONNX direction");
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;
  std::string activation = "tanh";
  if (m.has("activations")) {
    // Per direction: RNN's f; GRU's f, g; LSTM's f, g, h. The catalogue's gates are sigmoid (f), and its one
    // cell activation is g (and LSTM's h = g), the same for every direction.
    const std::vector<std::string> acts = m.getstrings("activations");
    const size_t per = type == "RNN" ? 1 : type == "GRU" ? 2 : 3;
    if (acts.size() != per * static_cast<size_t>(dirs)) m.fail("activations needs " + std::to_string(per) +
                                                               " entries per direction");
    const std::map<std::string, std::string> known = {{"Tanh", "tanh"}, {"Relu", "relu"}, {"Sigmoid", "sigmoid"}};
    const std::string& g = acts[per == 1 ? 0 : 1];
    for (size_t i = 0; i < acts.size(); ++i) {
      const size_t at = i % per;
      const std::string& want = per > 1 && at == 0 ? std::string("Sigmoid") : g;
      if (acts[i] != want)
        m.fail(per > 1 && at == 0 ? type + " gate activation " + acts[i] + " is not in the catalogue (Sigmoid)"
                                  : "the catalogue's " + type + " has one cell activation for every place and "
                                    "direction");
    }
    if (!known.count(g)) m.fail(type + " activation " + g + " is not in the catalogue (Tanh, Relu, Sigmoid)");
    activation = known.at(g);
  }
  if (m.has("activation_alpha") || m.has("activation_beta"))
    m.fail("activation_alpha / activation_beta are not in the catalogue");
  const double clip = m.getf("clip", 0.0);
  if (m.has("clip") && !(clip > 0)) m.fail("clip must be positive");
  if (m.geti("layout", 0) != 0) m.fail("layout=1 is not supported");
  const int64_t input_forget = m.geti("input_forget", 0), lbr = m.geti("linear_before_reset", 0);
  if (input_forget != 0 && input_forget != 1) m.fail("input_forget must be 0 or 1");
  if (lbr != 0 && lbr != 1) m.fail("linear_before_reset must be 0 or 1");
  if (m.present(4)) m.fail("sequence_lens is not supported");
  const bool peepholes = type == "LSTM" && m.present(7);
  if (type == "LSTM" && m.output_used(2)) m.fail("output Y_c is not supported");
  const int64_t hs = m.geti("hidden_size", 0);
  const auto order = torch_gate_order(type);
  const int64_t gh = static_cast<int64_t>(order.size()) * hs;
  const std::string x = m.in(0);
  const TensorType xt = m.type_of(x);
  if (xt.shape.size() != 3) m.fail("X must be [T, N, F]");
  const Tensor& w = m.need_constant(1, "W");
  const Tensor& r = m.need_constant(2, "R");
  if (w.shape() != Shape{dirs, gh, xt.shape[2]} || r.shape() != Shape{dirs, gh, hs})
    m.fail("W or R do not match hidden_size " + std::to_string(hs) + " and direction " + direction);
  // k = 0: a bias row of G*H values per direction, else a [G*H, k] matrix per direction; `off` is
  // the block's offset inside one direction's slice of `src` (`per_dir` elements long).
  auto regroup = [&](const Tensor& src, int64_t off, int64_t k, int64_t per_dir, const std::string& what) {
    Tensor dst(xt.dtype, k == 0 ? Shape{dirs * gh} : Shape{dirs * gh, k});
    k = std::max<int64_t>(k, 1);
    for (int64_t d = 0; d < dirs; ++d)
      for (size_t blk = 0; blk < order.size(); ++blk)
        for (int64_t row = 0; row < hs; ++row)
          for (int64_t c = 0; c < k; ++c)
            dst.set(((d * static_cast<int64_t>(order.size()) + static_cast<int64_t>(blk)) * hs + row) * k + c,
                    src.get(d * per_dir + off + (order[blk] * hs + row) * k + c));
    return m.new_initializer(what, dst);
  };
  Tensor b(xt.dtype, {dirs, 2 * gh});
  if (m.present(3)) {
    b = m.need_constant(3, "B");
    if (b.shape() != Shape{dirs, 2 * gh}) m.fail("B does not match hidden_size and direction");
  }
  std::vector<std::string> params = {regroup(w, 0, xt.shape[2], gh * xt.shape[2], "w_ih"),
                                           regroup(r, 0, hs, gh * hs, "w_hh"), regroup(b, 0, 0, 2 * gh, "b_ih"),
                                           regroup(b, gh, 0, 2 * gh, "b_hh")};
  if (peepholes) {
    // ONNX's P [D, 3H] (i, o, f) -> the catalogue's p [D*3H] (i, f, o).
    const Tensor& pw = m.need_constant(7, "P");
    if (pw.shape() != Shape{dirs, 3 * hs}) m.fail("P does not match hidden_size and direction");
    Tensor pc(xt.dtype, {dirs * 3 * hs});
    for (int64_t d = 0; d < dirs; ++d)
      for (int64_t blk = 0; blk < 3; ++blk)
        for (int64_t row = 0; row < hs; ++row)
          pc.set((d * 3 + blk) * hs + row, pw.get((d * 3 + kPeepholeOrder[static_cast<size_t>(blk)]) * hs + row));
    params.push_back(m.new_initializer("p", pc));
  }
  // initial_h / initial_c [D, N, H]: zero or absent is the zero state; a state every sample shares is the
  // catalogue's h0 / c0 [D*H] (initial_state 1).
  const int64_t batch = xt.shape[1];
  auto shared_state = [&](int i, const std::string& what) {
    Tensor st(xt.dtype, {dirs * hs});
    if (zero_or_absent(m, i)) return st;
    const Tensor* t = m.constant(i);
    if (!t) m.fail("a computed " + what + " is not supported (the catalogue's initial state is a parameter)");
    if (t->shape() != Shape{dirs, batch, hs}) m.fail(what + " must be [D, N, H]");
    for (int64_t d = 0; d < dirs; ++d)
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t j = 0; j < hs; ++j) {
          if (t->get((d * batch + b) * hs + j) != t->get(d * batch * hs + j))
            m.fail(what + " differs between samples (the catalogue's initial state is one for every sample)");
          st.set(d * hs + j, t->get(d * batch * hs + j));
        }
    return st;
  };
  const bool given_state = !zero_or_absent(m, 5) || (type == "LSTM" && !zero_or_absent(m, 6));
  if (given_state) {
    params.push_back(m.new_initializer("h0", shared_state(5, "initial_h")));
    if (type == "LSTM") params.push_back(m.new_initializer("c0", shared_state(6, "initial_c")));
  }
  const std::string xb = m.emit("transpose", {x}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  auto ins = [&](const std::string& first) {
    std::vector<std::string> v = {first};
    v.insert(v.end(), params.begin(), params.end());
    return v;
  };
  const bool want_y = m.output_used(0), want_h = m.output_used(1);
  if (!want_y && !want_h) m.fail("neither Y nor Y_h is used");
  // The node producing the last ONNX output carries the node's name.
  auto final_value = [&](int i, const std::string& qop, const std::vector<std::string>& in, const Attrs& a) {
    return m.emit(qop, in, a, m.output(i), i == 1 || !want_h);
  };
  Attrs cell_attrs = {{"hidden_size", hs}, {"direction", direction}};
  cell_attrs["activation"] = activation;
  if (clip > 0) cell_attrs["clip"] = clip;
  if (op == "lstm") cell_attrs["input_forget"] = input_forget;
  if (op == "lstm") cell_attrs["peepholes"] = int64_t{peepholes ? 1 : 0};
  if (op == "gru") cell_attrs["linear_before_reset"] = lbr;
  if (given_state) cell_attrs["initial_state"] = int64_t{1};
  auto cell = [&](int64_t sequences) {
    Attrs a = cell_attrs;
    a["return_sequences"] = sequences;
    return m.emit(op, ins(xb), a);
  };
  if (dirs == 2) {
    // [N, T, 2H] -> [N, T, 2, H] -> Y [T, 2, N, H]; [N, 2H] -> [N, 2, H] -> Y_h [2, N, H].
    const int64_t n = xt.shape[1], t = xt.shape[0];
    if (want_y) {
      const std::string split = m.emit("reshape", {cell(1)}, {{"shape", std::vector<int64_t>{n, t, 2, hs}}});
      final_value(0, "transpose", {split}, {{"perm", std::vector<int64_t>{1, 2, 0, 3}}});
    }
    if (want_h) {
      const std::string split = m.emit("reshape", {cell(0)}, {{"shape", std::vector<int64_t>{n, 2, hs}}});
      final_value(1, "transpose", {split}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
    }
    return;
  }
  std::string seq;
  if (want_y) {
    seq = cell(1);
    const std::string tm = m.emit("transpose", {seq}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
    final_value(0, "unsqueeze", {tm}, {{"axes", std::vector<int64_t>{1}}});
  }
  if (want_h) {
    if (want_y && direction == "forward") {
      const std::string last = m.emit("slice", {seq},
                                      {{"starts", std::vector<int64_t>{-1}},
                                       {"ends", std::vector<int64_t>{kInt64Max}},
                                       {"axes", std::vector<int64_t>{1}}});
      final_value(1, "transpose", {last}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
    } else {
      // A reverse cell's final state is its output at time 0; the layer's own last state reads it.
      final_value(1, "unsqueeze", {cell(0)}, {{"axes", std::vector<int64_t>{0}}});
    }
  }
}

}  // namespace

// ONNX's directions: forward, reverse (the sequence read from its end, each output at its own time
// index), bidirectional (both, with their own weights stacked [forward; reverse] along the rows and
// the outputs concatenated along the features, as PyTorch's bidirectional layers do).
int64_t rnn_directions(const Attrs& a) { return core::attr_s(a, "direction") == "bidirectional" ? 2 : 1; }

bool rnn_walks_back(const Attrs& a, int64_t d) {
  const std::string& s = core::attr_s(a, "direction");
  return s == "reverse" || (s == "bidirectional" && d == 1);
}

int rnn_state_input(const std::string& op, const Attrs& a, bool cell) {
  if (!a.count("initial_state") || core::attr_i(a, "initial_state") != 1 || (cell && op != "lstm")) return -1;
  const bool peep = op == "lstm" && a.count("peepholes") && core::attr_i(a, "peepholes") == 1;
  return 5 + (peep ? 1 : 0) + (cell ? 1 : 0);
}

void register_rnn(Registry& r) {
  auto add = [&r](OpSpec s, const std::string& onnx_type) {
    s.onnx_export = export_rnn;
    s.onnx_import = {{{onnx_type}, import_rnn}};
    r.add(std::move(s));
  };
  add(rnn_spec(Cell::Rnn, "simple_rnn",
               "Elman RNN: h' = f(clip(W_ih x + b_ih + W_hh h + b_hh)), zero initial state or h0"),
      "RNN");
  add(rnn_spec(Cell::Lstm, "lstm",
               "LSTM with PyTorch gate order i, f, g, o: c' = f*c + i*g (f = 1 - i with input_forget), "
               "h' = o*act(c'), g = act(...) with act tanh, relu or sigmoid (peepholes: p_i*c, p_f*c, p_o*c' "
               "added to i, f, o), zero initial state or h0 and c0"),
      "LSTM");
  add(rnn_spec(Cell::Gru, "gru",
               "GRU with PyTorch gate order r, z, n: n = act(W_in x + b_in + r*(W_hn h + b_hn)), act tanh, relu "
               "or sigmoid (linear_before_reset 0: W_hn (r*h) + b_hn), h' = (1-z)*n + z*h, zero initial state or h0"),
      "GRU");
}

}  // namespace quorum::ops
