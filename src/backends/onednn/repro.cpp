// oneDNN's reproducer: one self-contained C++ file (repro.cpp) against oneDNN's public C++ API
// (Debian libdnnl-dev 2.6), built with `g++ -std=c++17 -O1 repro.cpp -o repro -ldnnl`. The data
// (inputs, weights, incoming gradients) and the expected float64 values are embedded as exact hex
// literals. Each operator is run through the same primitives, algorithms, memory formats and
// attributes as Quorum's backend (src/backends/onednn/*.cpp):
//  - forward findings (FC, crash) run the model's nodes in order from the graph inputs and compare
//    the blamed node's outputs and the graph outputs;
//  - backward findings (BC) feed the blamed node its operands and the library's own incoming
//    gradient, run the forward (training) and the backward primitive(s), and compare the gradients
//    of its inputs and weights with the float64 vector-Jacobian product.
// batch_norm / layer_norm run batch_normalization_* / layer_normalization_* (layer_norm on X viewed
// as [rows, prod(dims[axis:])]); resize_bilinear / resize_nearest run resampling_* and are refused,
// as the backend refuses them, when the ONNX coordinate rule differs from oneDNN's.
// Only the helper functions the case needs are written into the program.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "backends/repro.h"
#include "core/attrs.h"
#include "ops/kernel_util.h"

namespace quorum::backends {
namespace {

using core::Shape;

// ---------------------------------------------------------------- program text blocks

const char* kPrelude = R"CPP(#include <oneapi/dnnl/dnnl.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <unordered_map>
#include <vector>

using namespace dnnl;
using Dims = memory::dims;
using Vec = std::vector<float>;

static engine eng(engine::kind::cpu, 0);
static stream strm(eng);

inline size_t numel(const Dims& d) {
  size_t n = 1;
  for (auto v : d) n *= (size_t)v;
  return n;
}
inline Dims dense_strides(const Dims& d) {
  Dims st(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) st[i - 1] = st[i] * d[i];
  return st;
}
// Plain row-major float32 (what Quorum's backend hands every primitive unless noted).
inline memory::desc plain(const Dims& d) { return memory::desc(d, memory::data_type::f32, dense_strides(d)); }
inline memory::desc any_md(const Dims& d) { return memory::desc(d, memory::data_type::f32, memory::format_tag::any); }
inline memory mem(const memory::desc& md, const float* p) { return memory(md, eng, const_cast<float*>(p)); }
inline void run(const primitive& p, const std::unordered_map<int, memory>& args) {
  p.execute(strm, args);
  strm.wait();
}
inline void reorder_into(const memory& m, const memory& dst) {
  reorder(m, dst).execute(strm, const_cast<memory&>(m), const_cast<memory&>(dst));
  strm.wait();
}
inline memory to_layout(const memory& m, const memory::desc& want) {
  if (m.get_desc() == want) return m;
  memory r(want, eng);
  reorder_into(m, r);
  return r;
}
// Prints which implementation oneDNN picked (the defects are implementation-specific).
// Flushed: a primitive that crashes the process leaves its name as the last line printed.
inline void show(const char* what, const primitive_desc_base& pd) {
  std::printf("  %s: %s\n", what, pd.impl_info_str());
  std::fflush(stdout);
}
)CPP";

struct Block {
  const char* name;
  const char* text;
};

const Block kBlocks[] = {
    {"eltwise", R"CPP(
// eltwise_forward (prop forward_training, as Quorum's backend creates every eltwise primitive).
inline Vec eltwise_fwd(algorithm alg, float alpha, float beta, const Dims& d, const Vec& x) {
  const memory::desc md = plain(d);
  eltwise_forward::primitive_desc pd(eltwise_forward::desc(prop_kind::forward_training, alg, md, alpha, beta), eng);
  show("eltwise_forward", pd);
  Vec y(x.size());
  run(eltwise_forward(pd), {{DNNL_ARG_SRC, mem(md, x.data())}, {DNNL_ARG_DST, mem(md, y.data())}});
  return y;
}
)CPP"},
    {"eltwise_bwd", R"CPP(
// eltwise_backward on the source (not use_dst), hinted by the forward_training descriptor.
inline Vec eltwise_bwd(algorithm alg, float alpha, float beta, const Dims& d, const Vec& x, const Vec& dy) {
  const memory::desc md = plain(d);
  eltwise_forward::primitive_desc fpd(eltwise_forward::desc(prop_kind::forward_training, alg, md, alpha, beta), eng);
  eltwise_backward::primitive_desc pd(eltwise_backward::desc(alg, md, md, alpha, beta), eng, fpd);
  show("eltwise_backward", pd);
  Vec dx(x.size());
  run(eltwise_backward(pd), {{DNNL_ARG_SRC, mem(md, x.data())},
                             {DNNL_ARG_DIFF_DST, mem(md, dy.data())},
                             {DNNL_ARG_DIFF_SRC, mem(md, dx.data())}});
  return dx;
}
)CPP"},
    {"binary", R"CPP(
// dst (dims of a) = a (op) b, b broadcasting along its size-1 dims.
inline void binary_raw(algorithm alg, const Dims& ad, const float* a, const Dims& bd, const float* b, float* dst) {
  binary::primitive_desc pd(binary::desc(alg, plain(ad), plain(bd), plain(ad)), eng);
  show("binary", pd);
  run(binary(pd), {{DNNL_ARG_SRC_0, mem(plain(ad), a)}, {DNNL_ARG_SRC_1, mem(plain(bd), b)},
                   {DNNL_ARG_DST, mem(plain(ad), dst)}});
}
// NumPy broadcasting: oneDNN broadcasts only the second operand, so a first operand that must
// broadcast is materialised first (zeros + a). ad and bd are padded to out's rank.
inline Vec binary_op(algorithm alg, const Dims& out, const Dims& ad, const Vec& a, const Dims& bd, const Vec& b) {
  Vec full_a = a;
  if (ad != out) {
    full_a.assign(numel(out), 0.0f);
    binary_raw(algorithm::binary_add, out, full_a.data(), ad, a.data(), full_a.data());
  }
  Vec y(numel(out));
  binary_raw(alg, out, full_a.data(), bd, b.data(), y.data());
  return y;
}
)CPP"},
    {"reduce", R"CPP(
// reduction primitive (p = 0, eps = 0), the reduced dims kept as 1.
inline Vec reduce(algorithm alg, const Dims& xd, const Vec& x, const Dims& keep) {
  if (keep == xd) return x;
  reduction::primitive_desc pd(reduction::desc(alg, plain(xd), plain(keep), 0.0f, 0.0f), eng);
  show("reduction", pd);
  Vec y(numel(keep));
  run(reduction(pd), {{DNNL_ARG_SRC, mem(plain(xd), x.data())}, {DNNL_ARG_DST, mem(plain(keep), y.data())}});
  return y;
}
)CPP"},
    {"sum", R"CPP(
// sum primitive, every scale 1.
inline Vec sum_op(const Dims& d, const std::vector<const Vec*>& xs) {
  const memory::desc md = plain(d);
  sum::primitive_desc pd(md, std::vector<float>(xs.size(), 1.0f), std::vector<memory::desc>(xs.size(), md), eng);
  show("sum", pd);
  Vec y(numel(d));
  std::unordered_map<int, memory> args{{DNNL_ARG_DST, mem(md, y.data())}};
  for (size_t i = 0; i < xs.size(); ++i) args[DNNL_ARG_MULTIPLE_SRC + (int)i] = mem(md, xs[i]->data());
  run(sum(pd), args);
  return y;
}
)CPP"},
    {"concat", R"CPP(
inline Vec concat_op(const Dims& out, int axis, const std::vector<Dims>& ds, const std::vector<const Vec*>& xs) {
  std::vector<memory::desc> srcs;
  for (const auto& d : ds) srcs.push_back(plain(d));
  concat::primitive_desc pd(plain(out), axis, srcs, eng);
  show("concat", pd);
  Vec y(numel(out));
  std::unordered_map<int, memory> args{{DNNL_ARG_DST, mem(plain(out), y.data())}};
  for (size_t i = 0; i < xs.size(); ++i) args[DNNL_ARG_MULTIPLE_SRC + (int)i] = mem(srcs[i], xs[i]->data());
  run(concat(pd), args);
  return y;
}
)CPP"},
    {"transpose", R"CPP(
// A reorder from a strided view of x (dims of y, x's strides permuted) into dense y.
inline Vec transpose_op(const Dims& yd, const Dims& permuted_strides, const Vec& x) {
  const memory::desc smd(yd, memory::data_type::f32, permuted_strides);
  reorder::primitive_desc pd(eng, smd, eng, plain(yd));
  Vec y(numel(yd));
  run(reorder(pd), {{DNNL_ARG_FROM, mem(smd, x.data())}, {DNNL_ARG_TO, mem(plain(yd), y.data())}});
  return y;
}
)CPP"},
    {"softmax", R"CPP(
inline softmax_v2_forward::primitive_desc softmax_pd(prop_kind prop, algorithm alg, const Dims& d, int axis) {
  return softmax_v2_forward::primitive_desc(softmax_v2_forward::desc(prop, alg, plain(d), plain(d), axis), eng);
}
inline Vec softmax_fwd(prop_kind prop, algorithm alg, const Dims& d, int axis, const Vec& x) {
  auto pd = softmax_pd(prop, alg, d, axis);
  show("softmax_v2_forward", pd);
  Vec y(x.size());
  run(softmax_v2_forward(pd), {{DNNL_ARG_SRC, mem(plain(d), x.data())}, {DNNL_ARG_DST, mem(plain(d), y.data())}});
  return y;
}
)CPP"},
    {"softmax_bwd", R"CPP(
inline Vec softmax_bwd(algorithm alg, const Dims& d, int axis, const Vec& y, const Vec& dy) {
  const memory::desc md = plain(d);
  softmax_v2_backward::primitive_desc pd(softmax_v2_backward::desc(alg, md, md, md, axis), eng,
                                         softmax_pd(prop_kind::forward_training, alg, d, axis));
  show("softmax_v2_backward", pd);
  Vec dx(y.size());
  run(softmax_v2_backward(pd), {{DNNL_ARG_DST, mem(md, y.data())},
                                {DNNL_ARG_DIFF_DST, mem(md, dy.data())},
                                {DNNL_ARG_DIFF_SRC, mem(md, dx.data())}});
  return dx;
}
)CPP"},
    {"pool", R"CPP(
// pooling_v2 (dilation 0 = dense window, explicit right padding).
struct PoolGeo {
  algorithm alg;
  Dims src, dst, kernel, strides, pad_l, pad_r;
};
inline pooling_v2_forward::primitive_desc pool_pd(prop_kind prop, const PoolGeo& g) {
  const Dims dil(g.kernel.size(), 0);
  return pooling_v2_forward::primitive_desc(
      pooling_v2_forward::desc(prop, g.alg, plain(g.src), plain(g.dst), g.strides, g.kernel, dil, g.pad_l, g.pad_r), eng);
}
struct PoolOut {
  Vec y;
  memory workspace;
};
inline PoolOut pool_fwd(prop_kind prop, const PoolGeo& g, const Vec& x) {
  auto pd = pool_pd(prop, g);
  show("pooling_v2_forward", pd);
  PoolOut r;
  r.y.assign(numel(g.dst), 0.0f);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(plain(g.src), x.data())},
                                       {DNNL_ARG_DST, mem(plain(g.dst), r.y.data())}};
  if (prop == prop_kind::forward_training && pd.workspace_desc().get_size() > 0) {
    r.workspace = memory(pd.workspace_desc(), eng);
    args[DNNL_ARG_WORKSPACE] = r.workspace;
  }
  run(pooling_v2_forward(pd), args);
  return r;
}
)CPP"},
    {"lrn", R"CPP(
// lrn_across_channels (its alpha is divided by the window size, as ONNX LRN's).
struct LrnGeo {
  Dims src;
  int64_t size;
  float alpha, beta, bias;
};
inline lrn_forward::primitive_desc lrn_pd(prop_kind prop, const LrnGeo& g) {
  return lrn_forward::primitive_desc(
      lrn_forward::desc(prop, algorithm::lrn_across_channels, plain(g.src), g.size, g.alpha, g.beta, g.bias), eng);
}
struct LrnOut {
  Vec y;
  memory workspace;
};
inline LrnOut lrn_fwd(prop_kind prop, const LrnGeo& g, const Vec& x) {
  auto pd = lrn_pd(prop, g);
  show("lrn_forward", pd);
  LrnOut r;
  r.y.assign(numel(g.src), 0.0f);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(plain(g.src), x.data())},
                                       {DNNL_ARG_DST, mem(plain(g.src), r.y.data())}};
  if (prop == prop_kind::forward_training && pd.workspace_desc().get_size() > 0) {
    r.workspace = memory(pd.workspace_desc(), eng);
    args[DNNL_ARG_WORKSPACE] = r.workspace;
  }
  run(lrn_forward(pd), args);
  return r;
}
)CPP"},
    {"lrn_bwd", R"CPP(
inline Vec lrn_bwd(const LrnGeo& g, const Vec& x, const memory& workspace, const Vec& dy) {
  lrn_backward::primitive_desc pd(
      lrn_backward::desc(algorithm::lrn_across_channels, plain(g.src), plain(g.src), g.size, g.alpha, g.beta, g.bias),
      eng, lrn_pd(prop_kind::forward_training, g));
  show("lrn_backward", pd);
  Vec dx(numel(g.src));
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(plain(g.src), x.data())},
                                       {DNNL_ARG_DIFF_DST, mem(plain(g.src), dy.data())},
                                       {DNNL_ARG_DIFF_SRC, mem(plain(g.src), dx.data())}};
  if (pd.workspace_desc().get_size() > 0) args[DNNL_ARG_WORKSPACE] = workspace;
  run(lrn_backward(pd), args);
  return dx;
}
)CPP"},
    {"pool_bwd", R"CPP(
inline Vec pool_bwd(const PoolGeo& g, const memory& workspace, const Vec& dy) {
  const Dims dil(g.kernel.size(), 0);
  pooling_v2_backward::primitive_desc pd(
      pooling_v2_backward::desc(g.alg, plain(g.src), plain(g.dst), g.strides, g.kernel, dil, g.pad_l, g.pad_r), eng,
      pool_pd(prop_kind::forward_training, g));
  show("pooling_v2_backward", pd);
  Vec dx(numel(g.src));
  std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, mem(plain(g.dst), dy.data())},
                                       {DNNL_ARG_DIFF_SRC, mem(plain(g.src), dx.data())}};
  if (pd.workspace_desc().get_size() > 0) args[DNNL_ARG_WORKSPACE] = workspace;
  run(pooling_v2_backward(pd), args);
  return dx;
}
)CPP"},
    {"conv", R"CPP(
// @KIND@ with format_tag::any (oneDNN picks its blocked layouts; reorders convert from and to the
// plain buffers). dil counts from 0 (dense kernel); pads are explicit. w is the user weight layout.
struct ConvGeo {
  Dims src, dst, strides, dil, pad_l, pad_r;
  memory::desc w;
  int64_t oc;
  bool bias;
};
inline @KIND@_forward::primitive_desc conv_pd(prop_kind prop, const ConvGeo& g) {
  auto d = g.bias ? @KIND@_forward::desc(prop, algorithm::@KIND@_direct, any_md(g.src), any_md(g.w.dims()),
                                         plain({g.oc}), any_md(g.dst), g.strides, g.dil, g.pad_l, g.pad_r)
                  : @KIND@_forward::desc(prop, algorithm::@KIND@_direct, any_md(g.src), any_md(g.w.dims()),
                                         any_md(g.dst), g.strides, g.dil, g.pad_l, g.pad_r);
  return @KIND@_forward::primitive_desc(d, eng);
}
inline Vec conv_fwd(prop_kind prop, const ConvGeo& g, const Vec& x, const Vec& w, const Vec& b) {
  auto pd = conv_pd(prop, g);
  show("@KIND@_forward", pd);
  Vec y(numel(g.dst));
  const memory user_y = mem(plain(g.dst), y.data());
  const memory dst = pd.dst_desc() == user_y.get_desc() ? user_y : memory(pd.dst_desc(), eng);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, to_layout(mem(plain(g.src), x.data()), pd.src_desc())},
                                       {DNNL_ARG_WEIGHTS, to_layout(mem(g.w, w.data()), pd.weights_desc())},
                                       {DNNL_ARG_DST, dst}};
  if (g.bias) args[DNNL_ARG_BIAS] = mem(plain({g.oc}), b.data());
  run(@KIND@_forward(pd), args);
  if (dst != user_y) reorder_into(dst, user_y);
  return y;
}
)CPP"},
    {"conv_bwd", R"CPP(
struct ConvGrads {
  Vec dx, dw, db;
};
inline ConvGrads conv_bwd(const ConvGeo& g, const Vec& x, const Vec& w, const Vec& dy) {
  auto fpd = conv_pd(prop_kind::forward_training, g);
  ConvGrads r;
  const memory user_dy = mem(plain(g.dst), dy.data());
  {
    @KIND@_backward_data::primitive_desc pd(
        @KIND@_backward_data::desc(algorithm::@KIND@_direct, any_md(g.src), any_md(g.w.dims()), any_md(g.dst),
                                   g.strides, g.dil, g.pad_l, g.pad_r), eng, fpd);
    show("@KIND@_backward_data", pd);
    r.dx.assign(numel(g.src), 0.0f);
    const memory user_dx = mem(plain(g.src), r.dx.data());
    const memory dx = pd.diff_src_desc() == user_dx.get_desc() ? user_dx : memory(pd.diff_src_desc(), eng);
    run(@KIND@_backward_data(pd), {{DNNL_ARG_DIFF_DST, to_layout(user_dy, pd.diff_dst_desc())},
                                   {DNNL_ARG_WEIGHTS, to_layout(mem(g.w, w.data()), pd.weights_desc())},
                                   {DNNL_ARG_DIFF_SRC, dx}});
    if (dx != user_dx) reorder_into(dx, user_dx);
  }
  auto d = g.bias ? @KIND@_backward_weights::desc(algorithm::@KIND@_direct, any_md(g.src), any_md(g.w.dims()),
                                                  plain({g.oc}), any_md(g.dst), g.strides, g.dil, g.pad_l, g.pad_r)
                  : @KIND@_backward_weights::desc(algorithm::@KIND@_direct, any_md(g.src), any_md(g.w.dims()),
                                                  any_md(g.dst), g.strides, g.dil, g.pad_l, g.pad_r);
  @KIND@_backward_weights::primitive_desc pd(d, eng, fpd);
  show("@KIND@_backward_weights", pd);
  r.dw.assign(numel(g.w.dims()), 0.0f);
  const memory user_dw = mem(g.w, r.dw.data());
  const memory dw = pd.diff_weights_desc() == user_dw.get_desc() ? user_dw : memory(pd.diff_weights_desc(), eng);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, to_layout(mem(plain(g.src), x.data()), pd.src_desc())},
                                       {DNNL_ARG_DIFF_DST, to_layout(user_dy, pd.diff_dst_desc())},
                                       {DNNL_ARG_DIFF_WEIGHTS, dw}};
  if (g.bias) {
    r.db.assign((size_t)g.oc, 0.0f);
    args[DNNL_ARG_DIFF_BIAS] = mem(plain({g.oc}), r.db.data());
  }
  run(@KIND@_backward_weights(pd), args);
  if (dw != user_dw) reorder_into(dw, user_dw);
  return r;
}
)CPP"},
    {"dense", R"CPP(
// dense: inner_product over x viewed as [rows, in], weight [units, in] ("oi"), bias [units].
struct DenseGeo {
  int64_t rows, in, units;
  bool bias;
};
inline inner_product_forward::primitive_desc dense_pd(prop_kind prop, const DenseGeo& g) {
  const memory::desc src = plain({g.rows, g.in}), w = plain({g.units, g.in}), b = plain({g.units}),
                     dst = plain({g.rows, g.units});
  auto d = g.bias ? inner_product_forward::desc(prop, src, w, b, dst) : inner_product_forward::desc(prop, src, w, dst);
  return inner_product_forward::primitive_desc(d, eng);
}
inline Vec dense_fwd(prop_kind prop, const DenseGeo& g, const Vec& x, const Vec& w, const Vec& b) {
  auto pd = dense_pd(prop, g);
  show("inner_product_forward", pd);
  Vec y((size_t)(g.rows * g.units));
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(plain({g.rows, g.in}), x.data())},
                                       {DNNL_ARG_WEIGHTS, mem(plain({g.units, g.in}), w.data())},
                                       {DNNL_ARG_DST, mem(plain({g.rows, g.units}), y.data())}};
  if (g.bias) args[DNNL_ARG_BIAS] = mem(plain({g.units}), b.data());
  run(inner_product_forward(pd), args);
  return y;
}
)CPP"},
    {"dense_bwd", R"CPP(
struct DenseGrads {
  Vec dx, dw, db;
};
inline DenseGrads dense_bwd(const DenseGeo& g, const Vec& x, const Vec& w, const Vec& dy) {
  const memory::desc src = plain({g.rows, g.in}), wd = plain({g.units, g.in}), b = plain({g.units}),
                     dst = plain({g.rows, g.units});
  auto fpd = dense_pd(prop_kind::forward_training, g);
  DenseGrads r;
  inner_product_backward_data::primitive_desc bd(inner_product_backward_data::desc(src, wd, dst), eng, fpd);
  show("inner_product_backward_data", bd);
  r.dx.assign((size_t)(g.rows * g.in), 0.0f);
  run(inner_product_backward_data(bd), {{DNNL_ARG_DIFF_DST, mem(dst, dy.data())},
                                        {DNNL_ARG_WEIGHTS, mem(wd, w.data())},
                                        {DNNL_ARG_DIFF_SRC, mem(src, r.dx.data())}});
  auto d = g.bias ? inner_product_backward_weights::desc(src, wd, b, dst) : inner_product_backward_weights::desc(src, wd, dst);
  inner_product_backward_weights::primitive_desc bw(d, eng, fpd);
  show("inner_product_backward_weights", bw);
  r.dw.assign((size_t)(g.units * g.in), 0.0f);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(src, x.data())},
                                       {DNNL_ARG_DIFF_DST, mem(dst, dy.data())},
                                       {DNNL_ARG_DIFF_WEIGHTS, mem(wd, r.dw.data())}};
  if (g.bias) {
    r.db.assign((size_t)g.units, 0.0f);
    args[DNNL_ARG_DIFF_BIAS] = mem(b, r.db.data());
  }
  run(inner_product_backward_weights(bw), args);
  return r;
}
)CPP"},
    {"matmul", R"CPP(
// matmul on plain operands padded to one rank (oneDNN broadcasts size-1 batch dims).
inline Vec matmul_fwd(const Dims& ad, const Vec& a, const Dims& bd, const Vec& b, const Dims& yd) {
  matmul::primitive_desc pd(matmul::desc(plain(ad), plain(bd), plain(yd)), eng);
  show("matmul", pd);
  Vec y(numel(yd));
  run(matmul(pd), {{DNNL_ARG_SRC, mem(plain(ad), a.data())},
                   {DNNL_ARG_WEIGHTS, mem(plain(bd), b.data())},
                   {DNNL_ARG_DST, mem(plain(yd), y.data())}});
  return y;
}
)CPP"},
    {"rnn", R"CPP(
// @OP@ with PyTorch semantics (batch-first x [N, T, F], weights [G*H, in], b_ih and b_hh, zero
// initial state, one layer, left to right) on oneDNN's @FWD@, the way Quorum's backend calls it:
// src_iter (and dst_iter) are EMPTY descriptors, which oneDNN documents as a zero initial state.
// x goes in as "tnc"; weights as dense ldigo [1, 1, in, G, H] reordered into the primitive's
// layout (format_tag::any); one bias per gate, b_ih + b_hh@GRU_NOTE@.
struct Rnn {
  int64_t N, T, F, H, G, BG;
  std::vector<int64_t> perm;  // oneDNN gate k holds PyTorch gate perm[k]
  bool seq;                   // return_sequences
  bool gru;
};
static const memory::desc none;
inline memory::desc ldigo(const Rnn& r, int64_t in) { return plain({1, 1, in, r.G, r.H}); }
// PyTorch [G*H, in] -> dense ldigo in oneDNN's gate order, and back.
inline Vec to_ldigo(const Rnn& r, const Vec& w, int64_t in) {
  Vec out((size_t)(in * r.G * r.H));
  for (int64_t k = 0; k < r.G; ++k)
    for (int64_t h = 0; h < r.H; ++h)
      for (int64_t i = 0; i < in; ++i) out[(size_t)((i * r.G + k) * r.H + h)] = w[(size_t)((r.perm[k] * r.H + h) * in + i)];
  return out;
}
inline Vec from_ldigo(const Rnn& r, const Vec& w, int64_t in) {
  Vec out((size_t)(in * r.G * r.H));
  for (int64_t k = 0; k < r.G; ++k)
    for (int64_t h = 0; h < r.H; ++h)
      for (int64_t i = 0; i < in; ++i) out[(size_t)((r.perm[k] * r.H + h) * in + i)] = w[(size_t)((i * r.G + k) * r.H + h)];
  return out;
}
inline @FWD@::primitive_desc rnn_pd(prop_kind prop, const Rnn& r) {
  const auto dir = rnn_direction::unidirectional_left2right;
  const memory::desc src = plain({r.T, r.N, r.F}), dst = plain({r.T, r.N, r.H}), bias = plain({1, 1, r.BG, r.H});
  const memory::desc wl = any_md({1, 1, r.F, r.G, r.H}), wi = any_md({1, 1, r.H, r.G, r.H});
  return @FWD@::primitive_desc(@FWD@::desc(@FWD_ARGS@), eng);
}
struct RnnState {
  Vec xt, wl, wi, bias, dst, y;
  memory workspace;
};
inline RnnState rnn_fwd(prop_kind prop, const Rnn& r, const Vec& x, const Vec& w_ih, const Vec& w_hh,
                        const Vec& b_ih, const Vec& b_hh) {
  auto pd = rnn_pd(prop, r);
  show("@FWD@", pd);
  RnnState s;
  s.xt.resize((size_t)(r.T * r.N * r.F));
  for (int64_t n = 0; n < r.N; ++n)
    for (int64_t t = 0; t < r.T; ++t)
      for (int64_t f = 0; f < r.F; ++f) s.xt[(size_t)((t * r.N + n) * r.F + f)] = x[(size_t)((n * r.T + t) * r.F + f)];
  s.wl = to_ldigo(r, w_ih, r.F);
  s.wi = to_ldigo(r, w_hh, r.H);
  s.bias.assign((size_t)(r.BG * r.H), 0.0f);
  for (int64_t k = 0; k < r.G; ++k)
    for (int64_t h = 0; h < r.H; ++h) {
      const size_t p = (size_t)(r.perm[k] * r.H + h);
      // GRU's n gate keeps its input half here and its hidden half in block 3 (linear-before-reset).
      s.bias[(size_t)(k * r.H + h)] = r.gru && k == 2 ? b_ih[p] : b_ih[p] + b_hh[p];
    }
  if (r.gru)
    for (int64_t h = 0; h < r.H; ++h) s.bias[(size_t)(3 * r.H + h)] = b_hh[(size_t)(2 * r.H + h)];
  s.dst.assign((size_t)(r.T * r.N * r.H), 0.0f);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC_LAYER, mem(plain({r.T, r.N, r.F}), s.xt.data())},
      {DNNL_ARG_WEIGHTS_LAYER, to_layout(mem(ldigo(r, r.F), s.wl.data()), pd.weights_layer_desc())},
      {DNNL_ARG_WEIGHTS_ITER, to_layout(mem(ldigo(r, r.H), s.wi.data()), pd.weights_iter_desc())},
      {DNNL_ARG_BIAS, mem(plain({1, 1, r.BG, r.H}), s.bias.data())},
      {DNNL_ARG_DST_LAYER, mem(plain({r.T, r.N, r.H}), s.dst.data())}};
  if (prop == prop_kind::forward_training && pd.workspace_desc().get_size() > 0) {
    s.workspace = memory(pd.workspace_desc(), eng);
    args[DNNL_ARG_WORKSPACE] = s.workspace;
  }
  run(@FWD@(pd), args);
  // y: [N, T, H] (return_sequences) or the last step [N, H].
  if (r.seq) {
    s.y.resize((size_t)(r.N * r.T * r.H));
    for (int64_t n = 0; n < r.N; ++n)
      for (int64_t t = 0; t < r.T; ++t)
        for (int64_t h = 0; h < r.H; ++h) s.y[(size_t)((n * r.T + t) * r.H + h)] = s.dst[(size_t)((t * r.N + n) * r.H + h)];
  } else {
    s.y.assign(s.dst.begin() + (r.T - 1) * r.N * r.H, s.dst.end());
  }
  return s;
}
)CPP"},
    {"rnn_bwd", R"CPP(
struct RnnGrads {
  Vec dx, dw_ih, dw_hh, db_ih, db_hh;
};
// @BWD@ hinted by the forward_training descriptor, src_iter empty as in the forward. The diff
// weights are zeroed first (the RNN backward accumulates into them).
inline RnnGrads rnn_bwd(const Rnn& r, const RnnState& s, const Vec& dy) {
  const auto dir = rnn_direction::unidirectional_left2right;
  const memory::desc src = plain({r.T, r.N, r.F}), dst = plain({r.T, r.N, r.H}), bias = plain({1, 1, r.BG, r.H});
  const memory::desc wl = any_md({1, 1, r.F, r.G, r.H}), wi = any_md({1, 1, r.H, r.G, r.H});
  @BWD@::primitive_desc pd(@BWD@::desc(@BWD_ARGS@), eng, rnn_pd(prop_kind::forward_training, r));
  show("@BWD@", pd);
  Vec diff_dst((size_t)(r.T * r.N * r.H), 0.0f);
  if (r.seq) {
    for (int64_t n = 0; n < r.N; ++n)
      for (int64_t t = 0; t < r.T; ++t)
        for (int64_t h = 0; h < r.H; ++h) diff_dst[(size_t)((t * r.N + n) * r.H + h)] = dy[(size_t)((n * r.T + t) * r.H + h)];
  } else {
    std::copy(dy.begin(), dy.end(), diff_dst.begin() + (r.T - 1) * r.N * r.H);
  }
  Vec dwl(pd.diff_weights_layer_desc().get_size() / sizeof(float), 0.0f);
  Vec dwi(pd.diff_weights_iter_desc().get_size() / sizeof(float), 0.0f);
  const memory dwl_mem(pd.diff_weights_layer_desc(), eng, dwl.data());
  const memory dwi_mem(pd.diff_weights_iter_desc(), eng, dwi.data());
  Vec diff_src((size_t)(r.T * r.N * r.F), 0.0f), diff_bias((size_t)(r.BG * r.H), 0.0f);
  run(@BWD@(pd), {{DNNL_ARG_SRC_LAYER, mem(src, s.xt.data())},
                  {DNNL_ARG_WEIGHTS_LAYER, to_layout(mem(ldigo(r, r.F), s.wl.data()), pd.weights_layer_desc())},
                  {DNNL_ARG_WEIGHTS_ITER, to_layout(mem(ldigo(r, r.H), s.wi.data()), pd.weights_iter_desc())},
                  {DNNL_ARG_BIAS, mem(bias, s.bias.data())},
                  {DNNL_ARG_DST_LAYER, mem(dst, s.dst.data())},
                  {DNNL_ARG_DIFF_DST_LAYER, mem(dst, diff_dst.data())},
                  {DNNL_ARG_WORKSPACE, s.workspace},
                  {DNNL_ARG_DIFF_SRC_LAYER, mem(src, diff_src.data())},
                  {DNNL_ARG_DIFF_WEIGHTS_LAYER, dwl_mem},
                  {DNNL_ARG_DIFF_WEIGHTS_ITER, dwi_mem},
                  {DNNL_ARG_DIFF_BIAS, mem(bias, diff_bias.data())}});
  RnnGrads g;
  g.dx.resize((size_t)(r.N * r.T * r.F));
  for (int64_t n = 0; n < r.N; ++n)
    for (int64_t t = 0; t < r.T; ++t)
      for (int64_t f = 0; f < r.F; ++f) g.dx[(size_t)((n * r.T + t) * r.F + f)] = diff_src[(size_t)((t * r.N + n) * r.F + f)];
  Vec plain_wl((size_t)(r.F * r.G * r.H)), plain_wi((size_t)(r.H * r.G * r.H));
  reorder_into(dwl_mem, mem(ldigo(r, r.F), plain_wl.data()));
  reorder_into(dwi_mem, mem(ldigo(r, r.H), plain_wi.data()));
  g.dw_ih = from_ldigo(r, plain_wl, r.F);
  g.dw_hh = from_ldigo(r, plain_wi, r.H);
  g.db_ih.assign((size_t)(r.G * r.H), 0.0f);
  g.db_hh.assign((size_t)(r.G * r.H), 0.0f);
  for (int64_t k = 0; k < r.G; ++k)
    for (int64_t h = 0; h < r.H; ++h) {
      const int64_t hk = r.gru && k == 2 ? 3 : k;  // GRU's n gate: the hidden half is block 3
      g.db_ih[(size_t)(r.perm[k] * r.H + h)] = diff_bias[(size_t)(k * r.H + h)];
      g.db_hh[(size_t)(r.perm[k] * r.H + h)] = diff_bias[(size_t)(hk * r.H + h)];
    }
  return g;
}
)CPP"},
    {"bnorm", R"CPP(
// batch_normalization_forward on plain NC... with use_scale | use_shift; training=0 adds
// use_global_stats (the mean/var parameters are inputs), training=1 normalises with the batch
// statistics (written to mean/var outputs).
inline normalization_flags bn_flags(bool batch_stats) {
  normalization_flags f = normalization_flags::use_scale | normalization_flags::use_shift;
  return batch_stats ? f : f | normalization_flags::use_global_stats;
}
inline batch_normalization_forward::primitive_desc bn_pd(prop_kind prop, const Dims& d, float eps, bool batch_stats) {
  return batch_normalization_forward::primitive_desc(
      batch_normalization_forward::desc(prop, plain(d), eps, bn_flags(batch_stats)), eng);
}
struct BnOut {
  Vec y, mean, var;
};
inline BnOut bn_fwd(prop_kind prop, const Dims& d, float eps, bool batch_stats, const Vec& x, const Vec& scale,
                    const Vec& shift, const Vec& mean, const Vec& var) {
  auto pd = bn_pd(prop, d, eps, batch_stats);
  show("batch_normalization_forward", pd);
  const memory::desc data = plain(d), chan = plain({d[1]});
  BnOut r;
  r.y.assign(numel(d), 0.0f);
  if (batch_stats) {
    r.mean.assign((size_t)d[1], 0.0f);
    r.var.assign((size_t)d[1], 0.0f);
  } else {
    r.mean = mean;
    r.var = var;
  }
  run(batch_normalization_forward(pd), {{DNNL_ARG_SRC, mem(data, x.data())},
                                        {DNNL_ARG_DST, mem(data, r.y.data())},
                                        {DNNL_ARG_SCALE, mem(chan, scale.data())},
                                        {DNNL_ARG_SHIFT, mem(chan, shift.data())},
                                        {DNNL_ARG_MEAN, mem(chan, r.mean.data())},
                                        {DNNL_ARG_VARIANCE, mem(chan, r.var.data())}});
  return r;
}
)CPP"},
    {"bnorm_bwd", R"CPP(
// batch_normalization_backward (prop backward) hinted by the forward_training descriptor. oneDNN has
// no gradient for the mean/var parameters: with training=0 they are derived from diff_scale and
// diff_shift with eltwise/binary primitives (dmean = -scale*rstd*dshift,
// dvar = -0.5*scale*rstd^2*dscale, rstd = (var + eps)^-0.5); with training=1 they are zero.
struct BnGrads {
  Vec dx, dscale, dshift, dmean, dvar;
};
inline BnGrads bn_bwd(const Dims& d, float eps, bool batch_stats, const Vec& x, const Vec& scale, const Vec& shift,
                      const BnOut& f, const Vec& dy) {
  const memory::desc data = plain(d), chan = plain({d[1]});
  const Dims cd{d[1]};
  batch_normalization_backward::primitive_desc pd(
      batch_normalization_backward::desc(prop_kind::backward, data, data, eps, bn_flags(batch_stats)), eng,
      bn_pd(prop_kind::forward_training, d, eps, batch_stats));
  show("batch_normalization_backward", pd);
  BnGrads g;
  g.dx.assign(numel(d), 0.0f);
  g.dscale.assign((size_t)d[1], 0.0f);
  g.dshift.assign((size_t)d[1], 0.0f);
  run(batch_normalization_backward(pd), {{DNNL_ARG_SRC, mem(data, x.data())},
                                         {DNNL_ARG_MEAN, mem(chan, f.mean.data())},
                                         {DNNL_ARG_VARIANCE, mem(chan, f.var.data())},
                                         {DNNL_ARG_DIFF_DST, mem(data, dy.data())},
                                         {DNNL_ARG_SCALE, mem(chan, scale.data())},
                                         {DNNL_ARG_SHIFT, mem(chan, shift.data())},
                                         {DNNL_ARG_DIFF_SRC, mem(data, g.dx.data())},
                                         {DNNL_ARG_DIFF_SCALE, mem(chan, g.dscale.data())},
                                         {DNNL_ARG_DIFF_SHIFT, mem(chan, g.dshift.data())}});
  g.dmean.assign((size_t)d[1], 0.0f);
  g.dvar.assign((size_t)d[1], 0.0f);
  if (!batch_stats) {
    const Vec t = eltwise_fwd(algorithm::eltwise_linear, 1.0f, eps, cd, f.var);
    const Vec rstd = eltwise_fwd(algorithm::eltwise_pow, 1.0f, -0.5f, cd, t);
    const Vec rstd2 = eltwise_fwd(algorithm::eltwise_pow, 1.0f, -1.0f, cd, t);
    g.dmean = eltwise_fwd(algorithm::eltwise_linear, -1.0f, 0.0f, cd,
                          binary_op(algorithm::binary_mul, cd, cd, binary_op(algorithm::binary_mul, cd, cd, scale, cd, rstd),
                                    cd, g.dshift));
    g.dvar = eltwise_fwd(algorithm::eltwise_linear, -0.5f, 0.0f, cd,
                         binary_op(algorithm::binary_mul, cd, cd, binary_op(algorithm::binary_mul, cd, cd, scale, cd, rstd2),
                                   cd, g.dscale));
  }
  return g;
}
)CPP"},
    {"lnorm", R"CPP(
// layer_normalization_forward, always prop forward_training (as Quorum's backend runs it), on X
// viewed as [rows, k] (oneDNN normalises the last dim; k = prod(dims[axis:])), scale/shift
// flattened to [k], use_scale | use_shift, statistics [rows].
inline layer_normalization_forward::primitive_desc ln_pd(int64_t rows, int64_t k, float eps) {
  return layer_normalization_forward::primitive_desc(
      layer_normalization_forward::desc(prop_kind::forward_training, plain({rows, k}), plain({rows}), eps,
                                        normalization_flags::use_scale | normalization_flags::use_shift),
      eng);
}
struct LnOut {
  Vec y, mean, var;
};
inline LnOut ln_fwd(int64_t rows, int64_t k, float eps, const Vec& x, const Vec& scale, const Vec& shift) {
  auto pd = ln_pd(rows, k, eps);
  show("layer_normalization_forward", pd);
  const memory::desc data = plain({rows, k}), stat = plain({rows}), param = plain({k});
  LnOut r;
  r.y.assign((size_t)(rows * k), 0.0f);
  r.mean.assign((size_t)rows, 0.0f);
  r.var.assign((size_t)rows, 0.0f);
  run(layer_normalization_forward(pd), {{DNNL_ARG_SRC, mem(data, x.data())},
                                        {DNNL_ARG_DST, mem(data, r.y.data())},
                                        {DNNL_ARG_SCALE, mem(param, scale.data())},
                                        {DNNL_ARG_SHIFT, mem(param, shift.data())},
                                        {DNNL_ARG_MEAN, mem(stat, r.mean.data())},
                                        {DNNL_ARG_VARIANCE, mem(stat, r.var.data())}});
  return r;
}
)CPP"},
    {"lnorm_bwd", R"CPP(
// layer_normalization_backward (prop backward), hinted by the forward_training descriptor, fed the
// forward's own mean/variance.
struct LnGrads {
  Vec dx, dscale, dshift;
};
inline LnGrads ln_bwd(int64_t rows, int64_t k, float eps, const Vec& x, const Vec& scale, const Vec& shift,
                      const LnOut& f, const Vec& dy) {
  const memory::desc data = plain({rows, k}), stat = plain({rows}), param = plain({k});
  layer_normalization_backward::primitive_desc pd(
      layer_normalization_backward::desc(prop_kind::backward, data, data, stat, eps,
                                         normalization_flags::use_scale | normalization_flags::use_shift),
      eng, ln_pd(rows, k, eps));
  show("layer_normalization_backward", pd);
  LnGrads g;
  g.dx.assign((size_t)(rows * k), 0.0f);
  g.dscale.assign((size_t)k, 0.0f);
  g.dshift.assign((size_t)k, 0.0f);
  run(layer_normalization_backward(pd), {{DNNL_ARG_SRC, mem(data, x.data())},
                                         {DNNL_ARG_MEAN, mem(stat, f.mean.data())},
                                         {DNNL_ARG_VARIANCE, mem(stat, f.var.data())},
                                         {DNNL_ARG_DIFF_DST, mem(data, dy.data())},
                                         {DNNL_ARG_SCALE, mem(param, scale.data())},
                                         {DNNL_ARG_SHIFT, mem(param, shift.data())},
                                         {DNNL_ARG_DIFF_SRC, mem(data, g.dx.data())},
                                         {DNNL_ARG_DIFF_SCALE, mem(param, g.dscale.data())},
                                         {DNNL_ARG_DIFF_SHIFT, mem(param, g.dshift.data())}});
  return g;
}
)CPP"},
    {"resample", R"CPP(
// resampling_forward (resampling_linear for resize_bilinear, resampling_nearest for resize_nearest)
// from plain src to plain dst; oneDNN derives the scale factors from the dims (F = out / in):
//   linear: source x = (o + 0.5) / F - 0.5 (clamped), nearest: floor((o + 0.5) / F).
inline resampling_forward::primitive_desc resample_pd(prop_kind prop, algorithm alg, const Dims& s, const Dims& d) {
  return resampling_forward::primitive_desc(resampling_forward::desc(prop, alg, plain(s), plain(d)), eng);
}
inline Vec resample_fwd(prop_kind prop, algorithm alg, const Dims& s, const Dims& d, const Vec& x) {
  auto pd = resample_pd(prop, alg, s, d);
  show("resampling_forward", pd);
  Vec y(numel(d));
  run(resampling_forward(pd), {{DNNL_ARG_SRC, mem(plain(s), x.data())}, {DNNL_ARG_DST, mem(plain(d), y.data())}});
  return y;
}
)CPP"},
    {"resample_bwd", R"CPP(
inline Vec resample_bwd(algorithm alg, const Dims& s, const Dims& d, const Vec& dy) {
  resampling_backward::primitive_desc pd(resampling_backward::desc(alg, plain(s), plain(d)), eng,
                                         resample_pd(prop_kind::forward_training, alg, s, d));
  show("resampling_backward", pd);
  Vec dx(numel(s));
  run(resampling_backward(pd), {{DNNL_ARG_DIFF_DST, mem(plain(d), dy.data())}, {DNNL_ARG_DIFF_SRC, mem(plain(s), dx.data())}});
  return dx;
}
)CPP"},
};

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  return s;
}

// ---------------------------------------------------------------- operator tables

struct Step {
  std::string alg;  // algorithm::NAME
  float alpha = 0, beta = 0;
};

constexpr float kSeluAlpha = 1.6732632423543772f;
constexpr float kSeluGamma = 1.0507009873554805f;

// The eltwise chains of ops_eltwise.cpp.
bool eltwise_chain(const std::string& op, const core::Attrs& a, std::vector<Step>& out) {
  auto f = [&](const char* n) { return static_cast<float>(core::attr_f(a, n)); };
  if (op == "relu") out = {{"eltwise_relu", 0, 0}};
  else if (op == "relu6") out = {{"eltwise_clip_v2", 0, 6}};
  else if (op == "leaky_relu") out = {{"eltwise_relu", f("alpha"), 0}};
  else if (op == "elu") out = {{"eltwise_elu", f("alpha"), 0}};
  else if (op == "selu") out = {{"eltwise_elu", kSeluAlpha, 0}, {"eltwise_linear", kSeluGamma, 0}};
  else if (op == "gelu")
    out = {{core::attr_s(a, "approximate") == "tanh" ? "eltwise_gelu_tanh" : "eltwise_gelu_erf", 0, 0}};
  else if (op == "sigmoid") out = {{"eltwise_logistic", 0, 0}};
  else if (op == "tanh") out = {{"eltwise_tanh", 0, 0}};
  else if (op == "softplus") out = {{"eltwise_soft_relu", 0, 0}};
  else if (op == "hard_sigmoid") out = {{"eltwise_linear", f("alpha"), f("beta")}, {"eltwise_clip_v2", 0, 1}};
  else if (op == "hardswish") out = {{"eltwise_hardswish", 0, 0}};
  else if (op == "exp") out = {{"eltwise_exp", 0, 0}};
  else if (op == "log") out = {{"eltwise_log", 0, 0}};
  else if (op == "sqrt") out = {{"eltwise_sqrt", 0, 0}};
  else if (op == "rsqrt") out = {{"eltwise_sqrt", 0, 0}, {"eltwise_pow", 1, -1}};
  else if (op == "reciprocal") out = {{"eltwise_pow", 1, -1}};
  else if (op == "abs") out = {{"eltwise_abs", 0, 0}};
  else if (op == "neg") out = {{"eltwise_linear", -1, 0}};
  else if (op == "square") out = {{"eltwise_square", 0, 0}};
  else if (op == "pow") out = {{"eltwise_pow", 1, f("exponent")}};
  else if (op == "clip") out = {{"eltwise_clip_v2", f("min"), f("max")}};
  else return false;
  return true;
}

const std::map<std::string, std::string>& binary_algs() {
  static const std::map<std::string, std::string> m = {{"add", "binary_add"},     {"sub", "binary_sub"},
                                                       {"mul", "binary_mul"},     {"div", "binary_div"},
                                                       {"maximum", "binary_max"}, {"minimum", "binary_min"}};
  return m;
}

const std::map<std::string, std::string>& reduce_algs() {
  static const std::map<std::string, std::string> m = {{"reduce_sum", "reduction_sum"},
                                                       {"reduce_mean", "reduction_mean"},
                                                       {"reduce_max", "reduction_max"},
                                                       {"reduce_min", "reduction_min"},
                                                       {"reduce_prod", "reduction_mul"}};
  return m;
}

bool is_reshape(const std::string& op) {
  return op == "reshape" || op == "flatten" || op == "squeeze" || op == "unsqueeze";
}
bool is_pool(const std::string& op) {
  return op == "max_pool1d" || op == "max_pool2d" || op == "avg_pool1d" || op == "avg_pool2d" ||
         op == "global_max_pool" || op == "global_avg_pool";
}
bool is_conv(const std::string& op) {
  return op == "conv1d" || op == "conv2d" || op == "conv3d" || op == "conv_transpose2d";
}
bool is_rnn(const std::string& op) { return op == "simple_rnn" || op == "lstm" || op == "gru"; }

// ---------------------------------------------------------------- text helpers

std::string dims(const Shape& s) {
  std::ostringstream o;
  o << "{";
  if (s.empty()) o << "1";  // oneDNN has no rank-0 tensors
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "}";
  return o.str();
}
std::string dims(const std::vector<int64_t>& s, bool) { return dims(Shape(s.begin(), s.end())); }
std::string flt(double v) { return c_literal(v, true); }
std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
std::string var(const std::string& value) { return "v_" + identifier(value); }

Shape pad_rank(const Shape& s, size_t r) {
  if (s.size() >= r) return s;
  Shape o(r - s.size(), 1);
  o.insert(o.end(), s.begin(), s.end());
  return o;
}

// The coordinate check of ops_resize.cpp (Quorum's backend refuses a resize whose ONNX coordinate
// rule picks other source points than oneDNN's single rule per algorithm).
double onnx_coord(const std::string& mode, int64_t o, int64_t in, int64_t out) {
  const auto od = static_cast<double>(o), ind = static_cast<double>(in), outd = static_cast<double>(out);
  if (mode == "asymmetric") return od * ind / outd;
  if (mode == "align_corners") return out == 1 ? 0.0 : od * (ind - 1.0) / (outd - 1.0);
  if (mode == "tf_half_pixel_for_nn") return (2.0 * od + 1.0) * ind / (2.0 * outd);
  if (mode == "pytorch_half_pixel" && out == 1) return 0.0;
  return (2.0 * od + 1.0) * ind / (2.0 * outd) - 0.5;
}

int64_t onnx_round(const std::string& mode, double x) {
  if (mode == "floor") return static_cast<int64_t>(std::floor(x));
  if (mode == "ceil") return static_cast<int64_t>(std::ceil(x));
  const double fl = std::floor(x);
  if (x - fl == 0.5) return static_cast<int64_t>(mode == "round_prefer_ceil" ? fl + 1.0 : fl);
  return static_cast<int64_t>(std::round(x));
}

int64_t resize_mismatch(bool linear, const core::Attrs& a, int64_t in, int64_t out) {
  const std::string& ctm = core::attr_s(a, "coordinate_transformation_mode");
  for (int64_t o = 0; o < out; ++o) {
    if (linear) {
      const double hi = static_cast<double>(in - 1);
      const double want = std::clamp(onnx_coord(ctm, o, in, out), 0.0, hi);
      const double got = std::clamp(onnx_coord("half_pixel", o, in, out), 0.0, hi);
      if (std::abs(want - got) > 1e-9) return o;
    } else {
      const int64_t want =
          std::clamp<int64_t>(onnx_round(core::attr_s(a, "nearest_mode"), onnx_coord(ctm, o, in, out)), 0, in - 1);
      const int64_t got = (2 * o + 1) * in / (2 * out);
      if (want != got) return o;
    }
  }
  return -1;
}

void check_resize(const ir::Node& n, const Shape& x, const Shape& y) {
  const bool linear = n.op == "resize_bilinear";
  if (x.size() != 4 || y.size() != 4) throw ReproUnsupported(n.op + " on a tensor that is not [N, C, H, W]");
  for (size_t axis = 2; axis < 4; ++axis) {
    const int64_t o = resize_mismatch(linear, n.attrs, x[axis], y[axis]);
    if (o < 0) continue;
    std::string mode = core::attr_s(n.attrs, "coordinate_transformation_mode");
    if (!linear) mode += " with nearest_mode " + core::attr_s(n.attrs, "nearest_mode");
    throw ReproUnsupported(std::string("oneDNN resampling_") + (linear ? "linear" : "nearest") +
                           " has one coordinate rule (" + (linear ? "half_pixel" : "floor((o + 0.5) * in / out)") +
                           "); " + mode + " picks a different source for output " + std::to_string(o) + " of axis " +
                           std::to_string(axis) + " (" + std::to_string(x[axis]) + " -> " + std::to_string(y[axis]) +
                           "), which Quorum's oneDNN backend refuses too");
  }
}

// ---------------------------------------------------------------- the generator

class Gen {
 public:
  Gen(const ReproCase& c) : c_(c) {}

  ReproProgram write(const std::string& dir);

 private:
  const Shape& shape(const std::string& v) const { return c_.model.types.at(v).shape; }
  void need(const std::string& b) { used_.insert(b); }
  // Declares `Vec NAME` holding `t` (float32, exact).
  void data_vec(const std::string& name, const core::Tensor& t, const std::string& comment) {
    const std::string arr = "d_" + name;
    data_ << "// " << comment << " " << dims(t.shape()) << "\n" << c_array(arr, t);
    body_ << "  const Vec " << name << "(" << arr << ", " << arr << " + " << std::max<int64_t>(1, t.numel()) << ");\n";
  }
  // Emits a comparison of the float buffer expression `got` with the expected tensor `want`.
  void compare(const std::string& what, const std::string& got, const core::Tensor& want, const ops::Tolerance& tol) {
    const std::string arr = "want_" + identifier(what) + "_" + std::to_string(n_compared_++);
    data_ << "// expected " << what << " " << dims(want.shape()) << " (float64 reference)\n"
          << c_array(arr, want, false);
    body_ << "  bad += check(\"" << what << "\", " << got << ", " << arr << ", " << want.numel() << ", "
          << num(tol.atol) << ", " << num(tol.rtol) << ");\n";
  }

  std::string prop() const { return c_.train ? "prop_kind::forward_training" : "prop_kind::forward_inference"; }

  void forward_node(const ir::Node& n);
  void backward_node(const ir::Node& n);
  // Writes the operator's forward; returns nothing, defines var(output) (or the extra names).
  void eltwise_forward(const ir::Node& n, const std::vector<Step>& steps, bool keep_inputs);
  std::string pool_geo(const ir::Node& n, std::string& factor);
  std::string conv_geo(const ir::Node& n);
  std::string dense_geo(const ir::Node& n);
  std::string rnn_geo(const ir::Node& n);
  // "rows, k, eps" of a layer_norm node (X viewed as [rows, prod(dims[axis:])]).
  std::string ln_geo(const ir::Node& n) const {
    const Shape& x = shape(n.inputs[0]);
    const int ax = axis(core::attr_i(n.attrs, "axis"), x.size());
    int64_t rows = 1, k = 1;
    for (int d = 0; d < static_cast<int>(x.size()); ++d) (d < ax ? rows : k) *= x[static_cast<size_t>(d)];
    return std::to_string(rows) + ", " + std::to_string(k) + ", " +
           flt(static_cast<float>(core::attr_f(n.attrs, "epsilon")));
  }
  // "{src dims, size, alpha, beta, bias}" of an lrn node.
  std::string lrn_geo(const ir::Node& n) const {
    return "LrnGeo{" + dims(shape(n.inputs[0])) + ", " + std::to_string(core::attr_i(n.attrs, "size")) + ", " +
           flt(static_cast<float>(core::attr_f(n.attrs, "alpha"))) + ", " +
           flt(static_cast<float>(core::attr_f(n.attrs, "beta"))) + ", " +
           flt(static_cast<float>(core::attr_f(n.attrs, "bias"))) + "}";
  }
  // "dims, eps, batch_stats" of a batch_norm node.
  std::string bn_geo(const ir::Node& n) const {
    return dims(shape(n.inputs[0])) + ", " + flt(static_cast<float>(core::attr_f(n.attrs, "epsilon"))) + ", " +
           (core::attr_i(n.attrs, "training") == 1 ? "true" : "false");
  }
  // "algorithm::..., src dims, dst dims" of a resize node (refused like the backend refuses it).
  std::string resize_geo(const ir::Node& n) const {
    const Shape& x = shape(n.inputs[0]);
    const Shape& y = shape(n.outputs[0]);
    check_resize(n, x, y);
    return std::string("algorithm::") + (n.op == "resize_bilinear" ? "resampling_linear" : "resampling_nearest") +
           ", " + dims(x) + ", " + dims(y);
  }
  int axis(int64_t a, size_t rank) const { return static_cast<int>(a < 0 ? a + static_cast<int64_t>(rank) : a); }

  const ReproCase& c_;
  std::set<std::string> used_;
  std::ostringstream data_, body_;
  std::string conv_kind_ = "convolution", rnn_op_;
  int n_compared_ = 0;
  bool judge_ = true;  // false for crash findings: no comparison
};

void Gen::eltwise_forward(const ir::Node& n, const std::vector<Step>& steps, bool keep_inputs) {
  need("eltwise");
  const std::string d = dims(shape(n.inputs[0]));
  std::string cur = var(n.inputs[0]);
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    const std::string next = i + 1 == steps.size() ? var(n.outputs[0]) : var(n.outputs[0]) + "_step" + std::to_string(i);
    body_ << "  const Vec " << next << " = eltwise_fwd(algorithm::" << s.alg << ", " << flt(s.alpha) << ", "
          << flt(s.beta) << ", " << d << ", " << cur << ");\n";
    if (keep_inputs) body_ << "  const Vec& step_in" << i << " = " << cur << ";\n";
    cur = next;
  }
}

std::string Gen::pool_geo(const ir::Node& n, std::string& factor) {
  const Shape& x = shape(n.inputs[0]);
  const Shape& y = shape(n.outputs[0]);
  const bool is_max = n.op.find("max") != std::string::npos;
  const bool global = n.op.rfind("global", 0) == 0;
  std::vector<int64_t> kernel, strides, pl, pr;
  std::string alg;
  factor.clear();
  if (global) {
    kernel.assign(x.begin() + 2, x.end());
    strides.assign(x.size() - 2, 1);
    pl.assign(x.size() - 2, 0);
    pr.assign(x.size() - 2, 0);
    alg = is_max ? "pooling_max" : "pooling_avg_exclude_padding";
  } else {
    const size_t d = x.size() - 2;
    const auto& pads = core::attr_ints(n.attrs, "pads");
    const std::string& auto_pad = core::attr_s(n.attrs, "auto_pad");
    kernel = core::attr_ints(n.attrs, "kernel_shape");
    strides = core::attr_ints(n.attrs, "strides");
    bool rescale = false;
    std::vector<std::vector<float>> fac;
    for (size_t i = 0; i < d; ++i) {
      const int64_t in = x[i + 2], out = y[i + 2], k = kernel[i], s = strides[i];
      int64_t pb = pads[i], pe = pads[i + d];
      if (auto_pad == "VALID") pb = pe = 0;
      else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") std::tie(pb, pe) = ops::same_pads(auto_pad, in, k, s);
      pl.push_back(pb);
      pr.push_back(std::max(pe, (out - 1) * s + k - in - pb));
      std::vector<float> f(static_cast<size_t>(out));
      for (int64_t o = 0; o < out; ++o) {
        const int64_t start = o * s - pb;
        const int64_t counted = std::min(start + k, in + pe) - start;
        f[static_cast<size_t>(o)] = static_cast<float>(k) / static_cast<float>(counted);
        if (counted != k) rescale = true;
      }
      fac.push_back(std::move(f));
    }
    const bool include = !is_max && core::attr_i(n.attrs, "count_include_pad") == 1;
    alg = is_max ? "pooling_max" : include ? "pooling_avg_include_padding" : "pooling_avg_exclude_padding";
    if (include && rescale) {
      // Quorum's backend rescales windows reaching into the extra ceil-mode padding (binary mul).
      Shape fs(y.size(), 1);
      for (size_t i = 2; i < y.size(); ++i) fs[i] = y[i];
      core::Tensor ft(core::DType::F32, fs);
      std::vector<double> vals(static_cast<size_t>(ft.numel()));
      for (int64_t flat = 0; flat < ft.numel(); ++flat) {
        float v = 1.0f;
        int64_t rest = flat;
        for (size_t i = d; i-- > 0;) {
          const int64_t len = y[i + 2];
          v *= fac[i][static_cast<size_t>(rest % len)];
          rest /= len;
        }
        vals[static_cast<size_t>(flat)] = v;
      }
      factor = "factor_" + identifier(n.name);
      data_vec(factor, core::Tensor::f64(fs, vals), "avg-pool rescale factors of " + n.name);
      factor += "|" + dims(fs);
    }
  }
  const std::string g = "pool_" + identifier(n.name);
  body_ << "  const PoolGeo " << g << "{algorithm::" << alg << ", " << dims(x) << ", " << dims(y) << ", "
        << dims(kernel, true) << ", " << dims(strides, true) << ", " << dims(pl, true) << ", " << dims(pr, true)
        << "};\n";
  return g;
}

std::string Gen::conv_geo(const ir::Node& n) {
  const bool transposed = n.op == "conv_transpose2d";
  const Shape& x = shape(n.inputs[0]);
  const Shape& y = shape(n.outputs[0]);
  const size_t r = x.size() - 2;
  const int64_t c = x[1], oc = core::attr_i(n.attrs, "out_channels"), g = core::attr_i(n.attrs, "group");
  const bool bias = core::attr_i(n.attrs, "bias") == 1;
  const auto& kernel = core::attr_ints(n.attrs, "kernel_shape");
  const auto& strides = core::attr_ints(n.attrs, "strides");
  const auto& dilations = core::attr_ints(n.attrs, "dilations");
  const auto& pads = core::attr_ints(n.attrs, "pads");
  const std::string auto_pad = transposed ? "NOTSET" : core::attr_s(n.attrs, "auto_pad");
  std::vector<int64_t> dil, pl, pr;
  for (size_t i = 0; i < r; ++i) {
    dil.push_back(dilations[i] - 1);
    const int64_t eff_k = dilations[i] * (kernel[i] - 1) + 1;
    int64_t pb = pads[i], pe = pads[r + i];
    if (auto_pad == "VALID") pb = pe = 0;
    else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER")
      std::tie(pb, pe) = ops::same_pads(auto_pad, x[i + 2], eff_k, strides[i]);
    pl.push_back(pb);
    const int64_t p = transposed ? pe - core::attr_ints(n.attrs, "output_padding")[i] : pe;
    if (transposed && p <= -strides[i])
      throw ReproUnsupported("conv_transpose2d with output_padding reaching the dilation (Quorum's backend computes "
                             "a truncated output there; not expressed by the reproducer)");
    pr.push_back(p);
  }
  // User weight layout: [OC, C, k...] or grouped [G, OC/G, C/G, k...]; ONNX transposed weights
  // [C, OC/G, k...] are described with strides.
  const int64_t ocg = oc / g, cg = c / g;
  std::vector<int64_t> wd = g == 1 ? std::vector<int64_t>{oc, c} : std::vector<int64_t>{g, ocg, cg};
  wd.insert(wd.end(), kernel.begin(), kernel.end());
  std::string wmd;
  if (!transposed) {
    wmd = "plain(" + dims(wd, true) + ")";
  } else {
    int64_t kn = 1;
    for (auto k : kernel) kn *= k;
    std::vector<int64_t> ks(kernel.size(), 1);
    for (size_t i = kernel.size(); i-- > 1;) ks[i - 1] = ks[i] * kernel[i];
    std::vector<int64_t> st = g == 1 ? std::vector<int64_t>{kn, oc * kn} : std::vector<int64_t>{cg * ocg * kn, kn, ocg * kn};
    st.insert(st.end(), ks.begin(), ks.end());
    wmd = "memory::desc(" + dims(wd, true) + ", memory::data_type::f32, Dims" + dims(st, true) + ")";
  }
  conv_kind_ = transposed ? "deconvolution" : "convolution";
  const std::string geo = "conv_" + identifier(n.name);
  body_ << "  const ConvGeo " << geo << "{" << dims(x) << ", " << dims(y) << ", " << dims(strides, true) << ", "
        << dims(dil, true) << ", " << dims(pl, true) << ", " << dims(pr, true) << ", " << wmd << ", " << oc << ", "
        << (bias ? "true" : "false") << "};\n";
  return geo;
}

std::string Gen::dense_geo(const ir::Node& n) {
  const Shape& x = shape(n.inputs[0]);
  const int64_t in = x.back(), units = core::attr_i(n.attrs, "units");
  int64_t rows = 1;
  for (auto v : x) rows *= v;
  rows /= in;
  const std::string geo = "dense_" + identifier(n.name);
  body_ << "  const DenseGeo " << geo << "{" << rows << ", " << in << ", " << units << ", "
        << (core::attr_i(n.attrs, "bias") == 1 ? "true" : "false") << "};\n";
  return geo;
}

std::string Gen::rnn_geo(const ir::Node& n) {
  if (!rnn_op_.empty() && rnn_op_ != n.op)
    throw ReproUnsupported("a model with two different recurrent operators (" + rnn_op_ + ", " + n.op + ")");
  rnn_op_ = n.op;
  const Shape& x = shape(n.inputs[0]);
  const int64_t h = core::attr_i(n.attrs, "hidden_size");
  const bool gru = n.op == "gru";
  const int64_t gates = n.op == "simple_rnn" ? 1 : n.op == "lstm" ? 4 : 3;
  const std::string perm = gru ? "{1, 0, 2}" : n.op == "lstm" ? "{0, 1, 2, 3}" : "{0}";
  const std::string geo = "rnn_" + identifier(n.name);
  body_ << "  const Rnn " << geo << "{" << x[0] << ", " << x[1] << ", " << x[2] << ", " << h << ", " << gates << ", "
        << (gru ? 4 : gates) << ", " << perm << ", " << (core::attr_i(n.attrs, "return_sequences") == 1 ? "true" : "false")
        << ", " << (gru ? "true" : "false") << "};\n";
  need("rnn");
  return geo;
}

void Gen::forward_node(const ir::Node& n) {
  const std::string y = n.outputs.empty() ? "" : var(n.outputs[0]);
  body_ << "  // node '" << n.name << "': " << n.op << " " << core::to_string(n.attrs) << "\n";
  std::vector<Step> steps;
  if (n.outputs.size() != 1) throw ReproUnsupported("operator " + n.op + " with several outputs is not mapped");
  if (is_reshape(n.op)) {
    body_ << "  const Vec& " << y << " = " << var(n.inputs[0]) << ";  // a reshape: the same buffer\n";
  } else if (eltwise_chain(n.op, n.attrs, steps)) {
    eltwise_forward(n, steps, false);
  } else if (n.op == "softsign") {
    need("eltwise");
    need("binary");
    const std::string d = dims(shape(n.inputs[0])), x = var(n.inputs[0]);
    body_ << "  const Vec " << y << "_den = eltwise_fwd(algorithm::eltwise_linear, 1.0f, 1.0f, " << d
          << ", eltwise_fwd(algorithm::eltwise_abs, 0.0f, 0.0f, " << d << ", " << x << "));\n";
    body_ << "  const Vec " << y << " = binary_op(algorithm::binary_div, " << d << ", " << d << ", " << x << ", " << d
          << ", " << y << "_den);\n";
  } else if (binary_algs().count(n.op)) {
    need("binary");
    const Shape& out = shape(n.outputs[0]);
    body_ << "  const Vec " << y << " = binary_op(algorithm::" << binary_algs().at(n.op) << ", " << dims(out) << ", "
          << dims(pad_rank(shape(n.inputs[0]), out.size())) << ", " << var(n.inputs[0]) << ", "
          << dims(pad_rank(shape(n.inputs[1]), out.size())) << ", " << var(n.inputs[1]) << ");\n";
  } else if (n.op == "sum") {
    const Shape& out = shape(n.outputs[0]);
    bool same = true;
    for (const auto& i : n.inputs) same = same && shape(i) == out;
    if (same) {
      need("sum");
      body_ << "  const Vec " << y << " = sum_op(" << dims(out) << ", {";
      for (size_t i = 0; i < n.inputs.size(); ++i) body_ << (i ? ", " : "") << "&" << var(n.inputs[i]);
      body_ << "});\n";
    } else {
      need("binary");
      body_ << "  Vec " << y << " = binary_op(algorithm::binary_add, " << dims(out) << ", "
            << dims(pad_rank(shape(n.inputs[0]), out.size())) << ", " << var(n.inputs[0]) << ", "
            << dims(pad_rank(shape(n.inputs[1]), out.size())) << ", " << var(n.inputs[1]) << ");\n";
      for (size_t i = 2; i < n.inputs.size(); ++i)
        body_ << "  " << y << " = binary_op(algorithm::binary_add, " << dims(out) << ", " << dims(out) << ", " << y
              << ", " << dims(pad_rank(shape(n.inputs[i]), out.size())) << ", " << var(n.inputs[i]) << ");\n";
    }
  } else if (n.op == "concat") {
    need("concat");
    const Shape& out = shape(n.outputs[0]);
    body_ << "  const Vec " << y << " = concat_op(" << dims(out) << ", "
          << axis(core::attr_i(n.attrs, "axis"), out.size()) << ", {";
    for (size_t i = 0; i < n.inputs.size(); ++i) body_ << (i ? ", " : "") << "Dims" << dims(shape(n.inputs[i]));
    body_ << "}, {";
    for (size_t i = 0; i < n.inputs.size(); ++i) body_ << (i ? ", " : "") << "&" << var(n.inputs[i]);
    body_ << "});\n";
  } else if (n.op == "transpose") {
    need("transpose");
    const Shape& x = shape(n.inputs[0]);
    const auto& perm = core::attr_ints(n.attrs, "perm");
    std::vector<int64_t> st(x.size(), 1), pst;
    for (size_t i = x.size(); i-- > 1;) st[i - 1] = st[i] * x[i];
    for (size_t i = 0; i < x.size(); ++i) pst.push_back(st[perm.empty() ? x.size() - 1 - i : static_cast<size_t>(perm[i])]);
    body_ << "  const Vec " << y << " = transpose_op(" << dims(shape(n.outputs[0])) << ", " << dims(pst, true) << ", "
          << var(n.inputs[0]) << ");\n";
  } else if (reduce_algs().count(n.op)) {
    need("reduce");
    const Shape& x = shape(n.inputs[0]);
    const auto& axes = core::attr_ints(n.attrs, "axes");
    Shape keep = x;
    for (size_t d = 0; d < x.size(); ++d) {
      bool reduced = axes.empty();
      for (int64_t a : axes) reduced = reduced || axis(a, x.size()) == static_cast<int>(d);
      if (reduced) keep[d] = 1;
    }
    body_ << "  const Vec " << y << " = reduce(algorithm::" << reduce_algs().at(n.op) << ", " << dims(x) << ", "
          << var(n.inputs[0]) << ", " << dims(keep) << ");\n";
  } else if (n.op == "softmax" || n.op == "log_softmax") {
    need("softmax");
    const Shape& x = shape(n.inputs[0]);
    body_ << "  const Vec " << y << " = softmax_fwd(" << prop() << ", algorithm::"
          << (n.op == "log_softmax" ? "softmax_log" : "softmax_accurate") << ", " << dims(x) << ", "
          << axis(core::attr_i(n.attrs, "axis"), x.size()) << ", " << var(n.inputs[0]) << ");\n";
  } else if (is_pool(n.op)) {
    need("pool");
    std::string factor;
    const std::string g = pool_geo(n, factor);
    if (factor.empty()) {
      body_ << "  const Vec " << y << " = pool_fwd(" << prop() << ", " << g << ", " << var(n.inputs[0]) << ").y;\n";
    } else {
      need("binary");
      const std::string fname = factor.substr(0, factor.find('|')), fd = factor.substr(factor.find('|') + 1);
      const std::string d = dims(shape(n.outputs[0]));
      body_ << "  const Vec " << y << " = binary_op(algorithm::binary_mul, " << d << ", " << d << ", pool_fwd(" << prop()
            << ", " << g << ", " << var(n.inputs[0]) << ").y, " << fd << ", " << fname << ");\n";
    }
  } else if (is_conv(n.op)) {
    need("conv");
    const std::string g = conv_geo(n);
    body_ << "  const Vec " << y << " = conv_fwd(" << prop() << ", " << g << ", " << var(n.inputs[0]) << ", "
          << var(n.inputs[1]) << ", " << (n.inputs.size() > 2 ? var(n.inputs[2]) : "Vec{}") << ");\n";
  } else if (n.op == "dense") {
    need("dense");
    const std::string g = dense_geo(n);
    body_ << "  const Vec " << y << " = dense_fwd(" << prop() << ", " << g << ", " << var(n.inputs[0]) << ", "
          << var(n.inputs[1]) << ", " << (n.inputs.size() > 2 ? var(n.inputs[2]) : "Vec{}") << ");\n";
  } else if (n.op == "matmul") {
    need("matmul");
    const Shape& out = shape(n.outputs[0]);
    body_ << "  const Vec " << y << " = matmul_fwd(" << dims(pad_rank(shape(n.inputs[0]), out.size())) << ", "
          << var(n.inputs[0]) << ", " << dims(pad_rank(shape(n.inputs[1]), out.size())) << ", " << var(n.inputs[1])
          << ", " << dims(out) << ");\n";
  } else if (n.op == "batch_norm") {
    need("bnorm");
    body_ << "  const Vec " << y << " = bn_fwd(" << prop() << ", " << bn_geo(n);
    for (size_t i = 0; i < 5; ++i) body_ << ", " << var(n.inputs[i]);
    body_ << ").y;\n";
  } else if (n.op == "lrn") {
    need("lrn");
    body_ << "  const Vec " << y << " = lrn_fwd(" << prop() << ", " << lrn_geo(n) << ", " << var(n.inputs[0]) << ").y;\n";
  } else if (n.op == "layer_norm") {
    need("lnorm");
    body_ << "  const Vec " << y << " = ln_fwd(" << ln_geo(n);
    for (size_t i = 0; i < 3; ++i) body_ << ", " << var(n.inputs[i]);
    body_ << ").y;\n";
  } else if (n.op == "resize_bilinear" || n.op == "resize_nearest") {
    need("resample");
    body_ << "  const Vec " << y << " = resample_fwd(" << prop() << ", " << resize_geo(n) << ", " << var(n.inputs[0])
          << ");\n";
  } else if (is_rnn(n.op)) {
    const std::string g = rnn_geo(n);
    body_ << "  const Vec " << y << " = rnn_fwd(" << prop() << ", " << g;
    for (const auto& i : n.inputs) body_ << ", " << var(i);
    body_ << ").y;\n";
  } else {
    throw ReproUnsupported("operator '" + n.op + "' is not mapped by the oneDNN reproducer writer");
  }
}

void Gen::backward_node(const ir::Node& n) {
  body_ << "  // node '" << n.name << "': " << n.op << " " << core::to_string(n.attrs)
        << ", forward (training) then backward\n";
  // name of the input -> C++ expression holding the library's gradient
  std::map<std::string, std::string> got;
  const std::string x = var(n.inputs[0]);
  const std::string gy = "g_" + identifier(n.outputs[0]);
  std::vector<Step> steps;
  if (eltwise_chain(n.op, n.attrs, steps)) {
    need("eltwise_bwd");
    eltwise_forward(n, steps, true);
    const std::string d = dims(shape(n.inputs[0]));
    body_ << "  Vec dx = " << gy << ";\n";
    for (size_t i = steps.size(); i-- > 0;)
      body_ << "  dx = eltwise_bwd(algorithm::" << steps[i].alg << ", " << flt(steps[i].alpha) << ", "
            << flt(steps[i].beta) << ", " << d << ", step_in" << i << ", dx);\n";
    got[n.inputs[0]] = "dx";
  } else if (n.op == "softmax" || n.op == "log_softmax") {
    need("softmax");
    need("softmax_bwd");
    const Shape& xs = shape(n.inputs[0]);
    const std::string alg = std::string("algorithm::") + (n.op == "log_softmax" ? "softmax_log" : "softmax_accurate");
    const int ax = axis(core::attr_i(n.attrs, "axis"), xs.size());
    body_ << "  const Vec y = softmax_fwd(prop_kind::forward_training, " << alg << ", " << dims(xs) << ", " << ax << ", "
          << x << ");\n";
    body_ << "  const Vec dx = softmax_bwd(" << alg << ", " << dims(xs) << ", " << ax << ", y, " << gy << ");\n";
    got[n.inputs[0]] = "dx";
  } else if (is_pool(n.op)) {
    need("pool");
    need("pool_bwd");
    std::string factor;
    const std::string g = pool_geo(n, factor);
    body_ << "  const PoolOut fwd = pool_fwd(prop_kind::forward_training, " << g << ", " << x << ");\n";
    if (factor.empty()) {
      body_ << "  const Vec dx = pool_bwd(" << g << ", fwd.workspace, " << gy << ");\n";
    } else {
      need("binary");
      const std::string fname = factor.substr(0, factor.find('|')), fd = factor.substr(factor.find('|') + 1);
      const std::string d = dims(shape(n.outputs[0]));
      body_ << "  const Vec dx = pool_bwd(" << g << ", fwd.workspace, binary_op(algorithm::binary_mul, " << d << ", "
            << d << ", " << gy << ", " << fd << ", " << fname << "));\n";
    }
    got[n.inputs[0]] = "dx";
  } else if (is_conv(n.op)) {
    need("conv");
    need("conv_bwd");
    const std::string g = conv_geo(n);
    body_ << "  const ConvGrads gr = conv_bwd(" << g << ", " << x << ", " << var(n.inputs[1]) << ", " << gy << ");\n";
    got[n.inputs[0]] = "gr.dx";
    got[n.inputs[1]] = "gr.dw";
    if (n.inputs.size() > 2) got[n.inputs[2]] = "gr.db";
  } else if (n.op == "dense") {
    need("dense");
    need("dense_bwd");
    const std::string g = dense_geo(n);
    body_ << "  const DenseGrads gr = dense_bwd(" << g << ", " << x << ", " << var(n.inputs[1]) << ", " << gy << ");\n";
    got[n.inputs[0]] = "gr.dx";
    got[n.inputs[1]] = "gr.dw";
    if (n.inputs.size() > 2) got[n.inputs[2]] = "gr.db";
  } else if (n.op == "batch_norm") {
    need("eltwise");
    need("binary");
    need("bnorm");
    need("bnorm_bwd");
    const std::string g = bn_geo(n);
    body_ << "  const BnOut fwd = bn_fwd(prop_kind::forward_training, " << g;
    for (size_t i = 0; i < 5; ++i) body_ << ", " << var(n.inputs[i]);
    body_ << ");\n  const BnGrads gr = bn_bwd(" << g << ", " << x << ", " << var(n.inputs[1]) << ", "
          << var(n.inputs[2]) << ", fwd, " << gy << ");\n";
    const char* names[] = {"gr.dx", "gr.dscale", "gr.dshift", "gr.dmean", "gr.dvar"};
    for (size_t i = 0; i < n.inputs.size() && i < 5; ++i)
      if (!got.count(n.inputs[i])) got[n.inputs[i]] = names[i];
  } else if (n.op == "layer_norm") {
    need("lnorm");
    need("lnorm_bwd");
    const std::string g = ln_geo(n);
    body_ << "  const LnOut fwd = ln_fwd(" << g << ", " << x << ", " << var(n.inputs[1]) << ", " << var(n.inputs[2])
          << ");\n  const LnGrads gr = ln_bwd(" << g << ", " << x << ", " << var(n.inputs[1]) << ", "
          << var(n.inputs[2]) << ", fwd, " << gy << ");\n";
    const char* names[] = {"gr.dx", "gr.dscale", "gr.dshift"};
    for (size_t i = 0; i < n.inputs.size() && i < 3; ++i)
      if (!got.count(n.inputs[i])) got[n.inputs[i]] = names[i];
  } else if (n.op == "lrn") {
    need("lrn");
    need("lrn_bwd");
    const std::string g = lrn_geo(n);
    body_ << "  const LrnOut fwd = lrn_fwd(prop_kind::forward_training, " << g << ", " << x << ");\n";
    body_ << "  const Vec dx = lrn_bwd(" << g << ", " << x << ", fwd.workspace, " << gy << ");\n";
    got[n.inputs[0]] = "dx";
  } else if (n.op == "resize_bilinear" || n.op == "resize_nearest") {
    need("resample");
    need("resample_bwd");
    const std::string g = resize_geo(n);
    body_ << "  const Vec y = resample_fwd(prop_kind::forward_training, " << g << ", " << x << ");\n"
          << "  (void)y;\n  const Vec dx = resample_bwd(" << g << ", " << gy << ");\n";
    got[n.inputs[0]] = "dx";
  } else if (is_rnn(n.op)) {
    need("rnn_bwd");
    const std::string g = rnn_geo(n);
    body_ << "  const RnnState st = rnn_fwd(prop_kind::forward_training, " << g;
    for (const auto& i : n.inputs) body_ << ", " << var(i);
    body_ << ");\n  const RnnGrads gr = rnn_bwd(" << g << ", st, " << gy << ");\n";
    const char* names[] = {"gr.dx", "gr.dw_ih", "gr.dw_hh", "gr.db_ih", "gr.db_hh"};
    for (size_t i = 0; i < n.inputs.size() && i < 5; ++i) got[n.inputs[i]] = names[i];
  } else if ((n.op == "maximum" || n.op == "minimum") && shape(n.inputs[0]) == shape(n.outputs[0]) &&
             shape(n.inputs[1]) == shape(n.outputs[0]) && c_.expected.count(n.inputs[0]) &&
             c_.expected.count(n.inputs[1])) {
    // The gradient as Quorum's oneDNN backend composes it (ops_binary.cpp): a comparison mask from
    // binary_ge (maximum) or binary_le (minimum), ties to the first operand, then the incoming
    // gradient split by it. The mask is checked on its own, so a wrong comparison primitive is named.
    need("binary");
    const bool is_max = n.op == "maximum";
    const std::string alg = is_max ? "binary_ge" : "binary_le";
    const std::string d = dims(shape(n.outputs[0])), b = var(n.inputs[1]);
    const core::Tensor a32 = c_.expected.at(n.inputs[0]).to(core::DType::F32).to(core::DType::F64);
    const core::Tensor b32 = c_.expected.at(n.inputs[1]).to(core::DType::F32).to(core::DType::F64);
    core::Tensor mask(core::DType::F64, a32.shape());
    for (int64_t i = 0; i < mask.numel(); ++i)  // IEEE comparisons: false where an operand is NaN
      mask.f64()[i] = (is_max ? a32.get(i) >= b32.get(i) : a32.get(i) <= b32.get(i)) ? 1.0 : 0.0;
    body_ << "  const Vec mask = binary_op(algorithm::" << alg << ", " << d << ", " << d << ", " << x << ", " << d << ", "
          << b << ");\n";
    if (judge_) compare(alg + "(" + n.inputs[0] + ", " + n.inputs[1] + ")", "mask", mask, ops::Tolerance{0, 0});
    body_ << "  const Vec da = binary_op(algorithm::binary_mul, " << d << ", " << d << ", " << gy << ", " << d
          << ", mask);\n";
    body_ << "  const Vec db = binary_op(algorithm::binary_sub, " << d << ", " << d << ", " << gy << ", " << d
          << ", da);\n";
    got[n.inputs[0]] = "da";
    if (n.inputs[1] != n.inputs[0]) got[n.inputs[1]] = "db";
  } else if (eltwise_chain(n.op, n.attrs, steps) || is_reshape(n.op) || binary_algs().count(n.op) ||
             reduce_algs().count(n.op) || n.op == "softsign" || n.op == "matmul" || n.op == "transpose" ||
             n.op == "concat" || n.op == "sum") {
    throw ReproUnsupported("the gradient of '" + n.op +
                           "' is composed by Quorum's backend from several forward primitives (no oneDNN backward "
                           "primitive of its own); the backward reproducer covers eltwise, softmax, pooling, lrn, "
                           "convolution, dense and RNN nodes");
  } else {
    throw ReproUnsupported("operator '" + n.op + "' is not mapped by the oneDNN reproducer writer");
  }
  body_ << "\n";
  if (!judge_) {
    body_ << "  std::printf(\"the backward ran to the end\\n\");\n";
    return;
  }
  bool any = false;
  for (const auto& [name, want] : c_.node_grads) {
    auto it = got.find(name);
    if (it == got.end()) continue;
    compare("d " + name, it->second, want, c_.tol);
    any = true;
  }
  if (!any) throw ReproUnsupported("the bundle holds no float64 gradient for an input of node '" + n.name + "'");
}

ReproProgram Gen::write(const std::string& dir) {
  const bool crash = c_.crash() || c_.stage == core::Stage::Compile;
  if (c_.stage == core::Stage::Loss)
    throw ReproUnsupported("loss-stage (LC) findings are judged on Quorum's training loss; the oneDNN reproducer "
                           "shows forward (FC) and per-node backward (BC) findings");
  if (c_.dtype != core::DType::F32) throw ReproUnsupported("only float32 cases are expressed (oneDNN 2.6 has no f64)");
  const ir::Node* blamed = c_.blamed();

  judge_ = !crash;
  // A crash in the backward pass runs the blamed node's backward too (on ones when the library
  // recorded no incoming gradient before crashing).
  const bool backward = c_.backward() && (!crash || blamed != nullptr);
  if (backward) {
    if (!blamed) throw ReproUnsupported("backward finding without a blamed node");
    if (c_.incoming.empty() && !crash)
      throw ReproUnsupported("the bundle recorded no incoming gradient for node '" + c_.node + "'");
    body_ << "  // The node's operands (inputs and weights) as the float64 reference saw them (float32):\n";
    std::set<std::string> declared;
    for (const auto& i : blamed->inputs) {
      if (declared.count(i)) continue;
      declared.insert(i);
      auto it = c_.expected.find(i);
      if (it == c_.expected.end()) throw ReproUnsupported("no recorded value for operand '" + i + "'");
      data_vec(var(i), it->second.to(core::DType::F32), "operand " + i);
    }
    body_ << "  // The library's own incoming gradient d loss / d output, as recorded in the finding:\n";
    for (const auto& o : blamed->outputs) {
      auto it = c_.incoming.find(o);
      if (it != c_.incoming.end()) {
        data_vec("g_" + identifier(o), it->second.to(core::DType::F32), "incoming gradient d loss / d " + o);
      } else if (crash) {
        body_ << "  const Vec g_" << identifier(o) << "(" << std::max<int64_t>(1, core::numel(shape(o)))
              << ", 1.0f);  // no incoming gradient recorded: ones\n";
      } else {
        throw ReproUnsupported("no incoming gradient for output '" + o + "'");
      }
    }
    body_ << "\n";
    backward_node(*blamed);
  } else {
    // Graph inputs and weights.
    for (const auto& in : c_.model.inputs) {
      auto it = c_.inputs.find(in.name);
      if (it == c_.inputs.end()) throw ReproUnsupported("no recorded value for graph input '" + in.name + "'");
      data_vec(var(in.name), it->second.to(core::DType::F32), "graph input " + in.name);
    }
    for (const auto& [name, t] : c_.model.initializers)
      data_vec(var(name), t.to(core::DType::F32), "weight " + name);
    body_ << "\n";
    for (const auto& n : c_.model.nodes) forward_node(n);
    body_ << "\n";
    if (!crash) {
      std::vector<std::string> compared;
      auto add = [&](const std::string& v) {
        if (std::find(compared.begin(), compared.end(), v) == compared.end() && c_.expected.count(v))
          compared.push_back(v);
      };
      if (blamed)
        for (const auto& o : blamed->outputs) add(o);
      for (const auto& o : c_.model.outputs) add(o);
      if (compared.empty()) throw ReproUnsupported("no expected value to compare");
      for (const auto& v : compared) compare(v, var(v), c_.expected.at(v), c_.tol);
    } else {
      body_ << "  std::printf(\"the model ran to the end\\n\");\n";
    }
  }

  ReproProgram p;
  p.main = "repro.cpp";
  p.run = "g++ -std=c++17 -O1 repro.cpp -o repro -ldnnl && ./repro";
  std::ostringstream s;
  s << repro_header(c_, "//", p.run + "  (Debian libdnnl-dev, oneDNN 2.6)");
  s << "//\n// " << (backward && judge_
                         ? "The blamed node is fed its operands and the library's incoming gradient; its forward "
                           "(training) and\n// backward primitives run as Quorum's oneDNN backend calls them, and "
                           "the gradients are compared.\n"
                         : "The model's nodes run in order through the primitives Quorum's oneDNN backend uses;\n// "
                           "the blamed node's outputs and the graph outputs are compared.\n");
  s << kPrelude;
  for (const auto& b : kBlocks) {
    if (!used_.count(b.name)) continue;
    std::string t = b.text;
    t = replace_all(t, "@KIND@", conv_kind_);
    if (!rnn_op_.empty()) {
      std::string fwd, bwd, fargs, bargs, note;
      if (rnn_op_ == "simple_rnn") {
        fwd = "vanilla_rnn_forward";
        bwd = "vanilla_rnn_backward";
        fargs = "prop, algorithm::eltwise_tanh, dir, src, none, wl, wi, bias, dst, none";
        bargs = "prop_kind::backward, algorithm::eltwise_tanh, dir, src, none, wl, wi, bias, dst, none, src, none, wl, "
                "wi, bias, dst, none";
      } else if (rnn_op_ == "lstm") {
        fwd = "lstm_forward";
        bwd = "lstm_backward";
        fargs = "prop, dir, src, none, none, wl, wi, bias, dst, none, none";
        bargs = "prop_kind::backward, dir, src, none, none, wl, wi, bias, dst, none, none, src, none, none, wl, wi, "
                "bias, dst, none, none";
      } else {
        fwd = "lbr_gru_forward";
        bwd = "lbr_gru_backward";
        fargs = "prop, dir, src, none, wl, wi, bias, dst, none";
        bargs = "prop_kind::backward, dir, src, none, wl, wi, bias, dst, none, src, none, wl, wi, bias, dst, none";
        note = " (GRU: [b_iz+b_hz, b_ir+b_hr, b_in, b_hn],\n// oneDNN gate order (u, r, o) = PyTorch (z, r, n))";
      }
      t = replace_all(t, "@OP@", rnn_op_);
      t = replace_all(t, "@FWD@", fwd);
      t = replace_all(t, "@BWD@", bwd);
      t = replace_all(t, "@FWD_ARGS@", fargs);
      t = replace_all(t, "@BWD_ARGS@", bargs);
      t = replace_all(t, "@GRU_NOTE@", note);
    }
    s << t;
  }
  s << "\n" << cpp_check_function();
  s << "static int check(const char* what, const Vec& got, const double* want, size_t n, double atol, double rtol) {\n"
       "  if (got.size() != n) {\n"
       "    std::printf(\"%s: %zu elements expected, %zu returned\\n\", what, n, got.size());\n"
       "    return 1;\n"
       "  }\n"
       "  return quorum_check(what, got.data(), want, n, atol, rtol);\n"
       "}\n\n";
  s << data_.str() << "\n";
  s << "int main() {\n";
  s << "  const dnnl_version_t* ver = dnnl_version();\n";
  s << "  std::printf(\"oneDNN %d.%d.%d (git hash %s)\\n\", ver->major, ver->minor, ver->patch, ver->hash);\n";
  s << "  int bad = 0;\n";
  s << body_.str();
  s << "  std::printf(\"%s\\n\", bad ? \"DISCREPANCY: the library differs from the expected values\" : \"OK\");\n";
  s << "  return bad ? 1 : 0;\n}\n";
  write_repro_file(p, dir, p.main, s.str());
  return p;
}

}  // namespace

ReproProgram write_repro_onednn(const ReproCase& c, const std::string& dir) {
  Gen g(c);
  return g.write(dir);
}

}  // namespace quorum::backends
