// simple_rnn, lstm and gru (PyTorch semantics, batch-first, zero or given initial state, one layer, in ONNX's
// three directions: left to right, right to left for reverse, bidirectional_concat for bidirectional, whose
// D = 2 directions stack along the second axis of weights, bias, states and peepholes and whose dst_layer
// concatenates [forward, reverse] as PyTorch does) on oneDNN's vanilla_rnn (tanh, relu
// or logistic), lstm, lbr_gru and (ONNX linear_before_reset 0) gru primitives, forward and backward: the
// lowering (lower.cpp) decides the geometry (sizes, gate order `perm`, GRU's fourth bias block) and emits
// one rnn / rnn_backward step;
// the backend's sink (ExecSink::rnn / rnn_backward, here) carries it out, as the reproducer's rnn_fwd /
// rnn_bwd helpers do:
//  - X [N, T, F] is oneDNN's "ntc"; the primitive computes in "tnc", so strided reorders convert.
//  - PyTorch weights [G*H, in] are oneDNN's ldgoi; they are reordered into the primitive's layout.
//  - Gate order: vanilla/LSTM match PyTorch (i, f, g, o). oneDNN's GRU order is (u, r, o) = PyTorch
//    (z, r, n), so gate blocks are permuted with per-gate strided reorders.
//  - oneDNN has one bias per gate, added once: b = b_ih + b_hh. Linear-before-reset GRU (PyTorch's
//    n = tanh(W_in x + b_in + r * (W_hn h + b_hn))) has a fourth bias block for b_hn, so
//    bias = [b_iz+b_hz, b_ir+b_hr, b_in, b_hn]. The other GRU (n = tanh(W_in x + W_hn (r * h) + b_in
//    + b_hn)) has three blocks, each b_ih + b_hh.
//  - LSTM peepholes (catalogue p [D*3H], gates i, f, o) are oneDNN's weights_peephole [1, D, 3, H] in the
//    same order; a zero descriptor there is the LSTM without them.
//  - Backward accumulates into diff weights/bias, so those start zeroed; d b_ih and d b_hh are both
//    the library's diff_bias (GRU: the n gate's halves come from the third and fourth blocks).
//  - A given initial state h0 (LSTM: and c0) [D*H] is src_iter (src_iter_c) [1, D, N, H], every sample's
//    row the same; its gradient is diff_src_iter (diff_src_iter_c) summed over the samples. Otherwise
//    src_iter is the empty descriptor oneDNN documents as the zero state.
#include "backends/onednn/onednn_sink.h"

namespace quorum::backends::onednn {
namespace {

enum class Cell { Rnn, Lstm, Gru, LbrGru };

Cell cell_of(const lw::RnnGeo& g) {
  return g.op == "lstm" ? Cell::Lstm : !g.gru ? Cell::Rnn : g.lbr ? Cell::LbrGru : Cell::Gru;
}

// oneDNN documents an empty src_iter descriptor as "zero initial state". With it, 2.6.3's vanilla
// RNN and LSTM backward compute diff_weights_iter from h_t instead of h_{t-1} (possible library
// bug, see known_differences.json). true passes an explicit zero state instead, which avoids it.
constexpr bool kExplicitZeroState = false;

// Copies n contiguous floats.
void copy_block(const float* src, float* dst, int64_t n) {
  copy_view(View{const_cast<float*>(src), {n}, {1}}, View{dst, {n}, {1}});
}

// The plain descriptors of one geometry (iter empty: oneDNN's documented "zero initial state"). D = 2 for a
// bidirectional layer: every direction-indexed tensor has D in its second axis, dst_layer concatenates.
struct RnnMds {
  memory::desc src, dst, bias, iter, peephole;
  explicit RnnMds(const lw::RnnGeo& g)
      : src(plain_md({g.t, g.n, g.f})),
        dst(plain_md({g.t, g.n, g.dirs * g.h})),
        bias(plain_md({1, g.dirs, g.bias_gates, g.h})) {
    if (kExplicitZeroState || g.h0 >= 0) iter = plain_md({1, g.dirs, g.n, g.h});
    if (g.peephole) peephole = plain_md({1, g.dirs, 3, g.h});
  }
};

std::string rnn_key(const lw::RnnGeo& g) {
  return Key() << static_cast<int>(cell_of(g)) << g.t << g.n << g.f << g.h << g.reverse << g.peephole
               << static_cast<int>(g.activation) << (g.h0 >= 0) << g.dirs;
}

dnnl::rnn_direction direction(const lw::RnnGeo& g) {
  if (g.dirs == 2) return dnnl::rnn_direction::bidirectional_concat;
  return g.reverse ? dnnl::rnn_direction::unidirectional_right2left : dnnl::rnn_direction::unidirectional_left2right;
}

// The time index of direction d's final state: the last step, or 0 where it reads right to left.
int64_t final_step(const lw::RnnGeo& g, int64_t d) { return (g.dirs == 2 ? d == 1 : g.reverse) ? 0 : g.t - 1; }

// A given initial state [D*H] as src_iter [1, D, N, H]: the same row for every sample.
Buf per_sample(const lw::RnnGeo& g, const Buf& state) {
  Buf out(Shape{g.dirs, g.n, g.h});
  for (int64_t d = 0; d < g.dirs; ++d)
    for (int64_t b = 0; b < g.n; ++b) copy_block(state.ptr() + d * g.h, out.ptr() + (d * g.n + b) * g.h, g.h);
  return out;
}

// Its gradient: diff_src_iter [1, D, N, H] summed over the samples.
Buf summed_over_samples(const lw::RnnGeo& g, const Buf& diff) {
  Buf out(Shape{g.dirs * g.h});
  for (int64_t d = 0; d < g.dirs; ++d)
    for (int64_t b = 0; b < g.n; ++b)
      for (int64_t j = 0; j < g.h; ++j) out.ptr()[d * g.h + j] += diff.ptr()[(d * g.n + b) * g.h + j];
  return out;
}

// Dense ldigo [1, D, in, G, H] (oneDNN gate order).
memory::desc ldigo(const lw::RnnGeo& g, int64_t in_dim) { return plain_md({1, g.dirs, in_dim, g.gates, g.h}); }

// PyTorch [D*G*H, in] (its gate order, the directions stacked) <-> dense ldigo in oneDNN's gate order: the
// views of direction d's gate k in both.
struct GateViews {
  Dims torch_strides, ldigo_strides;
  int64_t torch_offset(const lw::RnnGeo& g, int64_t d, int64_t k, int64_t in_dim) const {
    return (d * g.gates + g.perm[static_cast<size_t>(k)]) * g.h * in_dim;
  }
  int64_t ldigo_offset(const lw::RnnGeo& g, int64_t d, int64_t k, int64_t in_dim) const {
    return d * in_dim * g.gates * g.h + k * g.h;
  }
};
GateViews gate_views(const lw::RnnGeo& g, int64_t in_dim) {
  return {Dims{g.gates * g.h * in_dim, g.gates * g.h * in_dim, 1, g.h * in_dim, in_dim},
          dense_strides({1, g.dirs, in_dim, g.gates, g.h})};
}

Buf user_weights(const lw::RnnGeo& g, const float* w, int64_t in_dim) {
  Buf out(Shape{1, g.dirs, in_dim, g.gates, g.h});
  const GateViews v = gate_views(g, in_dim);
  const Dims one{1, 1, in_dim, 1, g.h};
  for (int64_t d = 0; d < g.dirs; ++d)
    for (int64_t k = 0; k < g.gates; ++k)
      copy_view(View{const_cast<float*>(w) + v.torch_offset(g, d, k, in_dim), one, v.torch_strides},
                View{out.ptr() + v.ldigo_offset(g, d, k, in_dim), one, v.ldigo_strides});
  return out;
}

// Library-layout diff weights -> PyTorch [D*G*H, in].
Buf pytorch_weights(const lw::RnnGeo& g, const memory& m, int64_t in_dim) {
  Buf plain(Shape{1, g.dirs, in_dim, g.gates, g.h});
  reorder_into(m, mem(ldigo(g, in_dim), plain.ptr()));
  Buf out(Shape{g.dirs * g.gates * g.h, in_dim});
  const GateViews v = gate_views(g, in_dim);
  const Dims one{1, 1, in_dim, 1, g.h};
  for (int64_t d = 0; d < g.dirs; ++d)
    for (int64_t k = 0; k < g.gates; ++k)
      copy_view(View{plain.ptr() + v.ldigo_offset(g, d, k, in_dim), one, v.ldigo_strides},
                View{out.ptr() + v.torch_offset(g, d, k, in_dim), one, v.torch_strides});
  return out;
}

// Per direction: one bias per gate, b_ih + b_hh (GRU linear-before-reset: b_hn in a fourth block).
Buf combined_bias(const lw::RnnGeo& g, const Buf& b_ih, const Buf& b_hh) {
  const Buf sum = binary(algorithm::binary_add, b_ih, b_hh);
  Buf out(Shape{g.dirs * g.bias_gates * g.h});
  for (int64_t d = 0; d < g.dirs; ++d) {
    const int64_t src_d = d * g.gates * g.h, dst_d = d * g.bias_gates * g.h;
    for (int64_t k = 0; k < g.gates; ++k) {
      const int64_t p = g.perm[static_cast<size_t>(k)];
      // GRU's n gate keeps its input half here and its hidden half in block 3.
      const Buf& src = g.lbr && k == 2 ? b_ih : sum;
      copy_block(src.ptr() + src_d + p * g.h, out.ptr() + dst_d + k * g.h, g.h);
    }
    if (g.lbr) copy_block(b_hh.ptr() + src_d + 2 * g.h, out.ptr() + dst_d + 3 * g.h, g.h);
  }
  return out;
}

// A cached primitive of this cell's type, seen through the common base classes (the three cells
// have different primitive types).
struct PrimRef {
  const dnnl::primitive& prim;
  struct Pd {
    const dnnl::primitive_desc& p;
    memory::desc weights_layer_desc() const { return p.query_md(dnnl::query::weights_md, 0); }
    memory::desc weights_iter_desc() const { return p.query_md(dnnl::query::weights_md, 1); }
    memory::desc workspace_desc() const { return p.query_md(dnnl::query::workspace_md, 0); }
    memory::desc diff_weights_layer_desc() const { return p.query_md(dnnl::query::diff_weights_md, 0); }
    memory::desc diff_weights_iter_desc() const { return p.query_md(dnnl::query::diff_weights_md, 1); }
  } pd;
};

PrimRef rnn_fwd_prim(const lw::RnnGeo& g, prop_kind prop) {
  const RnnMds md(g);
  const memory::desc none, &src = md.src, &iter = md.iter, &bias = md.bias, &dst = md.dst;
  const memory::desc wl = any_md({1, g.dirs, g.f, g.gates, g.h}), wi = any_md({1, g.dirs, g.h, g.gates, g.h});
  const std::string key = Key() << rnn_key(g) << static_cast<int>(prop);
  const auto dir = direction(g);
  switch (cell_of(g)) {
    case Cell::Rnn: {
      const auto& c = cached<dnnl::vanilla_rnn_forward::primitive_desc>(key, [&] {
        dnnl::vanilla_rnn_forward::desc d(prop, to_dnnl(g.activation), dir, src, iter, wl, wi, bias, dst, none);
        return dnnl::vanilla_rnn_forward::primitive_desc(d, cpu_engine());
      });
      return PrimRef{c.prim, {c.pd}};
    }
    case Cell::Lstm: {
      const auto& c = cached<dnnl::lstm_forward::primitive_desc>(key, [&] {
        dnnl::lstm_forward::desc d(prop, dir, src, iter, iter, wl, wi, md.peephole, bias, dst, none, none);
        return dnnl::lstm_forward::primitive_desc(d, cpu_engine());
      });
      return PrimRef{c.prim, {c.pd}};
    }
    case Cell::Gru: {
      const auto& c = cached<dnnl::gru_forward::primitive_desc>(key, [&] {
        dnnl::gru_forward::desc d(prop, dir, src, iter, wl, wi, bias, dst, none);
        return dnnl::gru_forward::primitive_desc(d, cpu_engine());
      });
      return PrimRef{c.prim, {c.pd}};
    }
    default: {
      const auto& c = cached<dnnl::lbr_gru_forward::primitive_desc>(key, [&] {
        dnnl::lbr_gru_forward::desc d(prop, dir, src, iter, wl, wi, bias, dst, none);
        return dnnl::lbr_gru_forward::primitive_desc(d, cpu_engine());
      });
      return PrimRef{c.prim, {c.pd}};
    }
  }
}

PrimRef rnn_bwd_prim(const lw::RnnGeo& g, const PrimRef::Pd& hint) {
  const RnnMds md(g);
  const memory::desc none, &src = md.src, &iter = md.iter, &bias = md.bias, &dst = md.dst;
  const memory::desc wl = any_md({1, g.dirs, g.f, g.gates, g.h}), wi = any_md({1, g.dirs, g.h, g.gates, g.h});
  const auto dir = direction(g);
  // The backward descriptor's hint: a typed RNN primitive descriptor built from a C handle clones it
  // (oneDNN 2.6's rnn_primitive_desc_base calls reset_with_clone), so the temporary owns only its copy.
  const auto& fwd_c = hint.p;
  const std::string key = rnn_key(g);
  switch (cell_of(g)) {
    case Cell::Rnn: {
      const auto& c = cached<dnnl::vanilla_rnn_backward::primitive_desc>(key, [&] {
        dnnl::vanilla_rnn_backward::desc d(prop_kind::backward, to_dnnl(g.activation), dir, src, iter, wl, wi, bias,
                                           dst, none, src, iter, wl, wi, bias, dst, none);
        return dnnl::vanilla_rnn_backward::primitive_desc(d, cpu_engine(),
                                                          dnnl::vanilla_rnn_forward::primitive_desc(fwd_c.get()));
      });
      return PrimRef{c.prim, {c.pd}};
    }
    case Cell::Lstm: {
      const auto& c = cached<dnnl::lstm_backward::primitive_desc>(key, [&] {
        dnnl::lstm_backward::desc d(prop_kind::backward, dir, src, iter, iter, wl, wi, md.peephole, bias, dst, none,
                                    none, src, iter, iter, wl, wi, md.peephole, bias, dst, none, none);
        return dnnl::lstm_backward::primitive_desc(d, cpu_engine(), dnnl::lstm_forward::primitive_desc(fwd_c.get()));
      });
      return PrimRef{c.prim, {c.pd}};
    }
    case Cell::Gru: {
      const auto& c = cached<dnnl::gru_backward::primitive_desc>(key, [&] {
        dnnl::gru_backward::desc d(prop_kind::backward, dir, src, iter, wl, wi, bias, dst, none, src, iter, wl, wi,
                                   bias, dst, none);
        return dnnl::gru_backward::primitive_desc(d, cpu_engine(), dnnl::gru_forward::primitive_desc(fwd_c.get()));
      });
      return PrimRef{c.prim, {c.pd}};
    }
    default: {
      const auto& c = cached<dnnl::lbr_gru_backward::primitive_desc>(key, [&] {
        dnnl::lbr_gru_backward::desc d(prop_kind::backward, dir, src, iter, wl, wi, bias, dst, none, src, iter, wl,
                                       wi, bias, dst, none);
        return dnnl::lbr_gru_backward::primitive_desc(d, cpu_engine(),
                                                      dnnl::lbr_gru_forward::primitive_desc(fwd_c.get()));
      });
      return PrimRef{c.prim, {c.pd}};
    }
  }
}

// Forward and backward are the lowering's rnn / rnn_backward steps.
class RnnKernel : public LoweredKernel {
 public:
  RnnKernel(const ir::Graph& g, const ir::Node& n) : LoweredKernel(g, n) {
    // Builds the descriptor now: a refusal is a conversion error.
    rnn_fwd_prim(lw::rnn_geo(n.op, in_shape(0), attrs()), prop_kind::forward_inference);
  }

};

}  // namespace

void register_rnn(OpTable& t) {
  for (const char* name : {"simple_rnn", "lstm", "gru"}) t[name] = OpEntry{maker<RnnKernel>(), {}, {}};
}

}  // namespace quorum::backends::onednn

namespace quorum::backends::onednn {

void ExecSink::rnn(lw::Prop p, const lw::RnnGeo& g, const std::vector<std::string>& in, const std::string& y) {
  const PrimRef f = rnn_fwd_prim(g, to_dnnl(p));
  const RnnMds md(g);
  saved_.rnn_src = Buf(Shape{g.t, g.n, g.f});
  copy_view(View{const_cast<float*>(get(in.at(0)).ptr()), {g.t, g.n, g.f}, {g.f, g.t * g.f, 1}},
            view_of(saved_.rnn_src));
  const Buf wl = user_weights(g, get(in.at(1)).ptr(), g.f), wi = user_weights(g, get(in.at(2)).ptr(), g.h);
  saved_.rnn_bias = combined_bias(g, get(in.at(3)), get(in.at(4)));
  saved_.rnn_dst = Buf(Shape{g.t, g.n, g.dirs * g.h});
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC_LAYER, mem(md.src, saved_.rnn_src.ptr())},
      {DNNL_ARG_WEIGHTS_LAYER, to_layout(mem(ldigo(g, g.f), wl.ptr()), f.pd.weights_layer_desc())},
      {DNNL_ARG_WEIGHTS_ITER, to_layout(mem(ldigo(g, g.h), wi.ptr()), f.pd.weights_iter_desc())},
      {DNNL_ARG_BIAS, mem(md.bias, saved_.rnn_bias.ptr())},
      {DNNL_ARG_DST_LAYER, mem(md.dst, saved_.rnn_dst.ptr())}};
  if (g.peephole) args[DNNL_ARG_WEIGHTS_PEEPHOLE] = mem(md.peephole, const_cast<float*>(get(in.at(5)).ptr()));
  keep_workspace(p, f.pd.workspace_desc(), args);
  const Buf zeros(Shape{g.dirs, g.n, g.h});
  const Buf h0 = g.h0 >= 0 ? per_sample(g, get(in.at(static_cast<size_t>(g.h0)))) : Buf();
  const Buf c0 = g.c0 >= 0 ? per_sample(g, get(in.at(static_cast<size_t>(g.c0)))) : Buf();
  if (kExplicitZeroState || g.h0 >= 0) {
    args[DNNL_ARG_SRC_ITER] = mem(md.iter, g.h0 >= 0 ? const_cast<float*>(h0.ptr()) : zeros.ptr());
    if (cell_of(g) == Cell::Lstm)
      args[DNNL_ARG_SRC_ITER_C] = mem(md.iter, g.c0 >= 0 ? const_cast<float*>(c0.ptr()) : zeros.ptr());
  }
  run(f.prim, args);
  // y: [N, T, D*H] (return_sequences) or each direction's final state [N, D*H].
  const int64_t w = g.dirs * g.h;
  Buf r(g.seq ? Shape{g.n, g.t, w} : Shape{g.n, w});
  if (g.seq) {
    copy_view(view_of(saved_.rnn_dst), View{r.ptr(), {g.t, g.n, w}, {w, g.t * w, 1}});
  } else {
    for (int64_t d = 0; d < g.dirs; ++d)
      copy_view(View{saved_.rnn_dst.ptr() + final_step(g, d) * g.n * w + d * g.h, {g.n, g.h}, {w, 1}},
                View{r.ptr() + d * g.h, {g.n, g.h}, {w, 1}});
  }
  put(y, std::move(r));
}

void ExecSink::rnn_backward(const lw::RnnGeo& g, const std::vector<std::string>& in, const std::string& dy,
                            const std::vector<std::string>& grads) {
  const PrimRef f = rnn_fwd_prim(g, prop_kind::forward_training);
  const PrimRef b = rnn_bwd_prim(g, f.pd);
  const RnnMds md(g);
  const Buf& gy = get(dy);
  const int64_t w = g.dirs * g.h;
  Buf diff_dst(Shape{g.t, g.n, w});
  if (g.seq) {
    copy_view(View{const_cast<float*>(gy.ptr()), {g.t, g.n, w}, {w, g.t * w, 1}}, view_of(diff_dst));
  } else {
    for (int64_t d = 0; d < g.dirs; ++d)
      copy_view(View{const_cast<float*>(gy.ptr()) + d * g.h, {g.n, g.h}, {w, 1}},
                View{diff_dst.ptr() + final_step(g, d) * g.n * w + d * g.h, {g.n, g.h}, {w, 1}});
  }
  const Buf wl = user_weights(g, get(in.at(1)).ptr(), g.f), wi = user_weights(g, get(in.at(2)).ptr(), g.h);
  // Diff weights in the primitive's layout, zeroed: the RNN backward accumulates into them.
  std::vector<float> dwl(b.pd.diff_weights_layer_desc().get_size() / sizeof(float), 0.0f);
  std::vector<float> dwi(b.pd.diff_weights_iter_desc().get_size() / sizeof(float), 0.0f);
  const memory dwl_mem(b.pd.diff_weights_layer_desc(), cpu_engine(), dwl.data());
  const memory dwi_mem(b.pd.diff_weights_iter_desc(), cpu_engine(), dwi.data());
  Buf diff_src(Shape{g.t, g.n, g.f}), diff_bias(Shape{g.dirs, g.bias_gates, g.h});
  const Buf zeros(Shape{g.dirs, g.n, g.h});
  Buf diff_h0(Shape{g.dirs, g.n, g.h}), diff_c0(Shape{g.dirs, g.n, g.h});
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC_LAYER, mem(md.src, saved_.rnn_src.ptr())},
      {DNNL_ARG_WEIGHTS_LAYER, to_layout(mem(ldigo(g, g.f), wl.ptr()), b.pd.weights_layer_desc())},
      {DNNL_ARG_WEIGHTS_ITER, to_layout(mem(ldigo(g, g.h), wi.ptr()), b.pd.weights_iter_desc())},
      {DNNL_ARG_BIAS, mem(md.bias, saved_.rnn_bias.ptr())},
      {DNNL_ARG_DST_LAYER, mem(md.dst, saved_.rnn_dst.ptr())},
      {DNNL_ARG_DIFF_DST_LAYER, mem(md.dst, diff_dst.ptr())},
      {DNNL_ARG_WORKSPACE, saved_.workspace},
      {DNNL_ARG_DIFF_SRC_LAYER, mem(md.src, diff_src.ptr())},
      {DNNL_ARG_DIFF_WEIGHTS_LAYER, dwl_mem},
      {DNNL_ARG_DIFF_WEIGHTS_ITER, dwi_mem},
      {DNNL_ARG_DIFF_BIAS, mem(md.bias, diff_bias.ptr())}};
  Buf diff_peephole(Shape{g.dirs * 3 * g.h});  // zeroed: the backward accumulates into it
  if (g.peephole) {
    args[DNNL_ARG_WEIGHTS_PEEPHOLE] = mem(md.peephole, const_cast<float*>(get(in.at(5)).ptr()));
    args[DNNL_ARG_DIFF_WEIGHTS_PEEPHOLE] = mem(md.peephole, diff_peephole.ptr());
  }
  const Buf h0 = g.h0 >= 0 ? per_sample(g, get(in.at(static_cast<size_t>(g.h0)))) : Buf();
  const Buf c0 = g.c0 >= 0 ? per_sample(g, get(in.at(static_cast<size_t>(g.c0)))) : Buf();
  if (kExplicitZeroState || g.h0 >= 0) {
    args[DNNL_ARG_SRC_ITER] = mem(md.iter, g.h0 >= 0 ? const_cast<float*>(h0.ptr()) : zeros.ptr());
    args[DNNL_ARG_DIFF_SRC_ITER] = mem(md.iter, diff_h0.ptr());
    if (cell_of(g) == Cell::Lstm) {
      args[DNNL_ARG_SRC_ITER_C] = mem(md.iter, g.c0 >= 0 ? const_cast<float*>(c0.ptr()) : zeros.ptr());
      args[DNNL_ARG_DIFF_SRC_ITER_C] = mem(md.iter, diff_c0.ptr());
    }
  }
  run(b.prim, args);
  Buf gx(Shape{g.n, g.t, g.f});
  copy_view(view_of(diff_src), View{gx.ptr(), {g.t, g.n, g.f}, {g.f, g.t * g.f, 1}});
  put(grads.at(0), std::move(gx));
  put(grads.at(1), pytorch_weights(g, dwl_mem, g.f));
  put(grads.at(2), pytorch_weights(g, dwi_mem, g.h));
  Buf gb_ih(Shape{g.dirs * g.gates * g.h}), gb_hh(Shape{g.dirs * g.gates * g.h});
  for (int64_t d = 0; d < g.dirs; ++d)
    for (int64_t k = 0; k < g.gates; ++k) {
      const int64_t p = (d * g.gates + g.perm[static_cast<size_t>(k)]) * g.h;
      copy_block(diff_bias.ptr() + (d * g.bias_gates + k) * g.h, gb_ih.ptr() + p, g.h);
      // GRU's n gate: the hidden half has its own block (index 3).
      const int64_t hk = g.lbr && k == 2 ? 3 : k;
      copy_block(diff_bias.ptr() + (d * g.bias_gates + hk) * g.h, gb_hh.ptr() + p, g.h);
    }
  put(grads.at(3), std::move(gb_ih));
  put(grads.at(4), std::move(gb_hh));
  if (g.peephole) put(grads.at(5), std::move(diff_peephole));
  if (g.h0 >= 0) put(grads.at(static_cast<size_t>(g.h0)), summed_over_samples(g, diff_h0));
  if (g.c0 >= 0) put(grads.at(static_cast<size_t>(g.c0)), summed_over_samples(g, diff_c0));
}

}  // namespace quorum::backends::onednn
