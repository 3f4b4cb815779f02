// simple_rnn, lstm and gru (PyTorch semantics, batch-first, zero initial state, one layer, one
// direction) on oneDNN's vanilla_rnn (tanh), lstm and lbr_gru primitives, forward and backward.
// Layout and semantics mapping:
//  - X [N, T, F] is oneDNN's "ntc"; the primitive computes in "tnc", so strided reorders convert.
//  - PyTorch weights [G*H, in] are oneDNN's ldgoi; they are reordered into the primitive's layout.
//  - Gate order: vanilla/LSTM match PyTorch (i, f, g, o). oneDNN's GRU order is (u, r, o) = PyTorch
//    (z, r, n), so gate blocks are permuted with per-gate strided reorders.
//  - oneDNN has one bias per gate, added once: b = b_ih + b_hh. Linear-before-reset GRU (PyTorch's
//    n = tanh(W_in x + b_in + r * (W_hn h + b_hn))) has a fourth bias block for b_hn, so
//    bias = [b_iz+b_hz, b_ir+b_hr, b_in, b_hn].
//  - Backward accumulates into diff weights/bias, so those start zeroed; d b_ih and d b_hh are both
//    the library's diff_bias (GRU: the n gate's halves come from the third and fourth blocks).
#include "backends/onednn/onednn_common.h"

namespace quorum::backends::onednn {
namespace {

enum class Cell { Rnn, Lstm, Gru };

Cell cell_of(const std::string& op) { return op == "lstm" ? Cell::Lstm : op == "gru" ? Cell::Gru : Cell::Rnn; }

// oneDNN documents an empty src_iter descriptor as "zero initial state". With it, 2.6.3's vanilla
// RNN and LSTM backward compute diff_weights_iter from h_t instead of h_{t-1} (possible library
// bug, see known_differences.json). true passes an explicit zero state instead, which avoids it.
constexpr bool kExplicitZeroState = false;

memory::desc any_md(const Dims& d) { return memory::desc(d, memory::data_type::f32, memory::format_tag::any); }

// Copies n contiguous floats.
void copy_block(const float* src, float* dst, int64_t n) {
  copy_view(View{const_cast<float*>(src), {n}, {1}}, View{dst, {n}, {1}});
}

class RnnKernel : public Kernel {
 public:
  RnnKernel(const ir::Graph& g, const ir::Node& n) : Kernel(g, n) {
    cell_ = cell_of(n.op);
    const Shape& x = in_shape(0);
    n_ = x[0];
    t_ = x[1];
    f_ = x[2];
    h_ = core::attr_i(attrs(), "hidden_size");
    seq_ = core::attr_i(attrs(), "return_sequences") == 1;
    gates_ = cell_ == Cell::Rnn ? 1 : cell_ == Cell::Lstm ? 4 : 3;
    bias_gates_ = cell_ == Cell::Gru ? 4 : gates_;
    // oneDNN gate k holds PyTorch gate perm_[k].
    perm_ = cell_ == Cell::Gru ? std::vector<int64_t>{1, 0, 2} : std::vector<int64_t>{0, 1, 2, 3};
    perm_.resize(static_cast<size_t>(gates_));
    src_ = plain_md({t_, n_, f_});
    dst_ = plain_md({t_, n_, h_});
    bias_ = plain_md({1, 1, bias_gates_, h_});
    if (kExplicitZeroState) iter_ = plain_md({1, 1, n_, h_});
    key_ = Key() << static_cast<int>(cell_) << t_ << n_ << f_ << h_;
    fwd(prop_kind::forward_inference);
  }

  void forward(Env& env, bool training) override {
    const auto& f = fwd(training ? prop_kind::forward_training : prop_kind::forward_inference);
    xt_ = Buf(Shape{t_, n_, f_});
    copy_view(View{const_cast<float*>(in(env, 0).ptr()), {t_, n_, f_}, {f_, t_ * f_, 1}}, view_of(xt_));
    const Buf wl = user_weights(in(env, 1).ptr(), f_), wi = user_weights(in(env, 2).ptr(), h_);
    bias_buf_ = combined_bias(in(env, 3), in(env, 4));
    dst_buf_ = Buf(Shape{t_, n_, h_});
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC_LAYER, mem(src_, xt_.ptr())},
        {DNNL_ARG_WEIGHTS_LAYER, to_layout(mem(ldigo(f_), wl.ptr()), f.pd.weights_layer_desc())},
        {DNNL_ARG_WEIGHTS_ITER, to_layout(mem(ldigo(h_), wi.ptr()), f.pd.weights_iter_desc())},
        {DNNL_ARG_BIAS, mem(bias_, bias_buf_.ptr())},
        {DNNL_ARG_DST_LAYER, mem(dst_, dst_buf_.ptr())}};
    workspace_ = memory();
    if (training && f.pd.workspace_desc().get_size() > 0) {
      workspace_ = memory(f.pd.workspace_desc(), cpu_engine());
      args[DNNL_ARG_WORKSPACE] = workspace_;
    }
    const Buf zeros(Shape{n_, h_});
    if (kExplicitZeroState) {
      args[DNNL_ARG_SRC_ITER] = mem(iter_, zeros.ptr());
      if (cell_ == Cell::Lstm) args[DNNL_ARG_SRC_ITER_C] = mem(iter_, zeros.ptr());
    }
    run(f.prim, args);
    Buf y(out_shape(0));
    if (seq_) {
      copy_view(view_of(dst_buf_), View{y.ptr(), {t_, n_, h_}, {h_, t_ * h_, 1}});
    } else {
      copy_block(dst_buf_.ptr() + (t_ - 1) * n_ * h_, y.ptr(), n_ * h_);
    }
    set_out(env, 0, std::move(y));
  }

  void backward(Env& env) override {
    const auto& f = fwd(prop_kind::forward_training);
    const auto& b = bwd(f.pd);
    const Buf& gy = *gout(env, 0);
    Buf diff_dst(Shape{t_, n_, h_});
    if (seq_) {
      copy_view(View{const_cast<float*>(gy.ptr()), {t_, n_, h_}, {h_, t_ * h_, 1}}, view_of(diff_dst));
    } else {
      copy_block(gy.ptr(), diff_dst.ptr() + (t_ - 1) * n_ * h_, n_ * h_);
    }
    const Buf wl = user_weights(in(env, 1).ptr(), f_), wi = user_weights(in(env, 2).ptr(), h_);
    // Diff weights in the primitive's layout, zeroed: the RNN backward accumulates into them.
    std::vector<float> dwl(b.pd.diff_weights_layer_desc().get_size() / sizeof(float), 0.0f);
    std::vector<float> dwi(b.pd.diff_weights_iter_desc().get_size() / sizeof(float), 0.0f);
    const memory dwl_mem(b.pd.diff_weights_layer_desc(), cpu_engine(), dwl.data());
    const memory dwi_mem(b.pd.diff_weights_iter_desc(), cpu_engine(), dwi.data());
    Buf diff_src(Shape{t_, n_, f_}), diff_bias(Shape{bias_gates_, h_});
    const Buf zeros(Shape{n_, h_});
    Buf diff_h0(Shape{n_, h_}), diff_c0(Shape{n_, h_});
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC_LAYER, mem(src_, xt_.ptr())},
        {DNNL_ARG_WEIGHTS_LAYER, to_layout(mem(ldigo(f_), wl.ptr()), b.pd.weights_layer_desc())},
        {DNNL_ARG_WEIGHTS_ITER, to_layout(mem(ldigo(h_), wi.ptr()), b.pd.weights_iter_desc())},
        {DNNL_ARG_BIAS, mem(bias_, bias_buf_.ptr())},
        {DNNL_ARG_DST_LAYER, mem(dst_, dst_buf_.ptr())},
        {DNNL_ARG_DIFF_DST_LAYER, mem(dst_, diff_dst.ptr())},
        {DNNL_ARG_WORKSPACE, workspace_},
        {DNNL_ARG_DIFF_SRC_LAYER, mem(src_, diff_src.ptr())},
        {DNNL_ARG_DIFF_WEIGHTS_LAYER, dwl_mem},
        {DNNL_ARG_DIFF_WEIGHTS_ITER, dwi_mem},
        {DNNL_ARG_DIFF_BIAS, mem(bias_, diff_bias.ptr())}};
    if (kExplicitZeroState) {
      args[DNNL_ARG_SRC_ITER] = mem(iter_, zeros.ptr());
      args[DNNL_ARG_DIFF_SRC_ITER] = mem(iter_, diff_h0.ptr());
      if (cell_ == Cell::Lstm) {
        args[DNNL_ARG_SRC_ITER_C] = mem(iter_, zeros.ptr());
        args[DNNL_ARG_DIFF_SRC_ITER_C] = mem(iter_, diff_c0.ptr());
      }
    }
    run(b.prim, args);
    Buf gx(in_shape(0));
    copy_view(view_of(diff_src), View{gx.ptr(), {t_, n_, f_}, {f_, t_ * f_, 1}});
    add_gin(env, 0, std::move(gx));
    add_gin(env, 1, pytorch_weights(dwl_mem, f_));
    add_gin(env, 2, pytorch_weights(dwi_mem, h_));
    Buf gb_ih(in_shape(3)), gb_hh(in_shape(4));
    for (int64_t k = 0; k < gates_; ++k) {
      const int64_t p = perm_[static_cast<size_t>(k)];
      copy_block(diff_bias.ptr() + k * h_, gb_ih.ptr() + p * h_, h_);
      // GRU's n gate: the hidden half has its own block (index 3).
      const int64_t hk = cell_ == Cell::Gru && k == 2 ? 3 : k;
      copy_block(diff_bias.ptr() + hk * h_, gb_hh.ptr() + p * h_, h_);
    }
    add_gin(env, 3, std::move(gb_ih));
    add_gin(env, 4, std::move(gb_hh));
  }

 private:
  // Dense ldigo [1, 1, in, G, H] (oneDNN gate order).
  memory::desc ldigo(int64_t in_dim) const { return plain_md({1, 1, in_dim, gates_, h_}); }

  // PyTorch [G*H, in] (its gate order) -> dense ldigo in oneDNN's gate order.
  Buf user_weights(const float* w, int64_t in_dim) const {
    Buf out(Shape{1, 1, in_dim, gates_, h_});
    const Dims dst_strides = dense_strides({1, 1, in_dim, gates_, h_});
    const Dims src_strides{gates_ * h_ * in_dim, gates_ * h_ * in_dim, 1, h_ * in_dim, in_dim};
    for (int64_t k = 0; k < gates_; ++k) {
      const int64_t p = perm_[static_cast<size_t>(k)];
      copy_view(View{const_cast<float*>(w) + p * h_ * in_dim, {1, 1, in_dim, 1, h_}, src_strides},
                View{out.ptr() + k * h_, {1, 1, in_dim, 1, h_}, dst_strides});
    }
    return out;
  }

  // Library-layout diff weights -> PyTorch [G*H, in].
  Buf pytorch_weights(const memory& m, int64_t in_dim) const {
    Buf plain(Shape{1, 1, in_dim, gates_, h_});
    reorder_into(m, mem(ldigo(in_dim), plain.ptr()));
    Buf out(Shape{gates_ * h_, in_dim});
    const Dims src_strides = dense_strides({1, 1, in_dim, gates_, h_});
    const Dims dst_strides{gates_ * h_ * in_dim, gates_ * h_ * in_dim, 1, h_ * in_dim, in_dim};
    for (int64_t k = 0; k < gates_; ++k) {
      const int64_t p = perm_[static_cast<size_t>(k)];
      copy_view(View{plain.ptr() + k * h_, {1, 1, in_dim, 1, h_}, src_strides},
                View{out.ptr() + p * h_ * in_dim, {1, 1, in_dim, 1, h_}, dst_strides});
    }
    return out;
  }

  Buf combined_bias(const Buf& b_ih, const Buf& b_hh) const {
    const Buf sum = binary(algorithm::binary_add, b_ih, b_hh);
    Buf out(Shape{bias_gates_ * h_});
    for (int64_t k = 0; k < gates_; ++k) {
      const int64_t p = perm_[static_cast<size_t>(k)];
      // GRU's n gate keeps its input half here and its hidden half in block 3.
      const Buf& src = cell_ == Cell::Gru && k == 2 ? b_ih : sum;
      copy_block(src.ptr() + p * h_, out.ptr() + k * h_, h_);
    }
    if (cell_ == Cell::Gru) copy_block(b_hh.ptr() + 2 * h_, out.ptr() + 3 * h_, h_);
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

  PrimRef fwd(prop_kind prop) {
    const memory::desc none;
    const memory::desc wl = any_md({1, 1, f_, gates_, h_}), wi = any_md({1, 1, h_, gates_, h_});
    const std::string key = Key() << key_ << static_cast<int>(prop);
    const auto dir = dnnl::rnn_direction::unidirectional_left2right;
    switch (cell_) {
      case Cell::Rnn: {
        const auto& c = cached<dnnl::vanilla_rnn_forward::primitive_desc>(key, [&] {
          dnnl::vanilla_rnn_forward::desc d(prop, algorithm::eltwise_tanh, dir, src_, iter_, wl, wi, bias_, dst_, none);
          return dnnl::vanilla_rnn_forward::primitive_desc(d, cpu_engine());
        });
        return PrimRef{c.prim, {c.pd}};
      }
      case Cell::Lstm: {
        const auto& c = cached<dnnl::lstm_forward::primitive_desc>(key, [&] {
          dnnl::lstm_forward::desc d(prop, dir, src_, iter_, iter_, wl, wi, bias_, dst_, none, none);
          return dnnl::lstm_forward::primitive_desc(d, cpu_engine());
        });
        return PrimRef{c.prim, {c.pd}};
      }
      default: {
        const auto& c = cached<dnnl::lbr_gru_forward::primitive_desc>(key, [&] {
          dnnl::lbr_gru_forward::desc d(prop, dir, src_, iter_, wl, wi, bias_, dst_, none);
          return dnnl::lbr_gru_forward::primitive_desc(d, cpu_engine());
        });
        return PrimRef{c.prim, {c.pd}};
      }
    }
  }

  PrimRef bwd(const PrimRef::Pd& hint) {
    const memory::desc none;
    const memory::desc wl = any_md({1, 1, f_, gates_, h_}), wi = any_md({1, 1, h_, gates_, h_});
    const auto dir = dnnl::rnn_direction::unidirectional_left2right;
    const auto& fwd_c = hint.p;
    switch (cell_) {
      case Cell::Rnn: {
        const auto& c = cached<dnnl::vanilla_rnn_backward::primitive_desc>(key_, [&] {
          dnnl::vanilla_rnn_backward::desc d(prop_kind::backward, algorithm::eltwise_tanh, dir, src_, iter_, wl, wi,
                                             bias_, dst_, none, src_, iter_, wl, wi, bias_, dst_, none);
          return dnnl::vanilla_rnn_backward::primitive_desc(d, cpu_engine(),
                                                            dnnl::vanilla_rnn_forward::primitive_desc(clone(fwd_c)));
        });
        return PrimRef{c.prim, {c.pd}};
      }
      case Cell::Lstm: {
        const auto& c = cached<dnnl::lstm_backward::primitive_desc>(key_, [&] {
          dnnl::lstm_backward::desc d(prop_kind::backward, dir, src_, iter_, iter_, wl, wi, bias_, dst_, none, none,
                                      src_, iter_, iter_, wl, wi, bias_, dst_, none, none);
          return dnnl::lstm_backward::primitive_desc(d, cpu_engine(), dnnl::lstm_forward::primitive_desc(clone(fwd_c)));
        });
        return PrimRef{c.prim, {c.pd}};
      }
      default: {
        const auto& c = cached<dnnl::lbr_gru_backward::primitive_desc>(key_, [&] {
          dnnl::lbr_gru_backward::desc d(prop_kind::backward, dir, src_, iter_, wl, wi, bias_, dst_, none, src_, iter_,
                                         wl, wi, bias_, dst_, none);
          return dnnl::lbr_gru_backward::primitive_desc(d, cpu_engine(),
                                                        dnnl::lbr_gru_forward::primitive_desc(clone(fwd_c)));
        });
        return PrimRef{c.prim, {c.pd}};
      }
    }
  }

  // A typed primitive descriptor takes ownership of the C handle it is built from: give it a copy.
  static dnnl_primitive_desc_t clone(const dnnl::primitive_desc& pd) {
    dnnl_primitive_desc_t copy = nullptr;
    dnnl::error::wrap_c_api(dnnl_primitive_desc_clone(&copy, pd.get()), "could not clone a primitive descriptor");
    return copy;
  }

  Cell cell_ = Cell::Rnn;
  int64_t n_ = 0, t_ = 0, f_ = 0, h_ = 0, gates_ = 1, bias_gates_ = 1;
  bool seq_ = true;
  std::vector<int64_t> perm_;
  memory::desc src_, dst_, bias_;
  memory::desc iter_;  // empty: oneDNN's documented "zero initial state"
  std::string key_;
  Buf xt_, dst_buf_, bias_buf_;
  memory workspace_;
};

}  // namespace

void register_rnn(OpTable& t) {
  for (const char* name : {"simple_rnn", "lstm", "gru"}) t[name] = OpEntry{maker<RnnKernel>(), {}, {}};
}

}  // namespace quorum::backends::onednn
