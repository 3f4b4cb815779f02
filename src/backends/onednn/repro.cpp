// oneDNN's reproducer: one self-contained C++ file (repro.cpp) against oneDNN's public C++ API
// (Debian libdnnl-dev 2.6), built with `g++ -std=c++17 -O1 repro.cpp -o repro -ldnnl`. The data
// (inputs, weights, incoming gradients) and the expected float64 values are embedded as exact hex
// literals. Each operator is run through the same primitives, algorithms, memory formats and
// attributes as Quorum's backend: the forward steps come from oneDNN's lowering (lower.h), which
// also drives the backend, and CallPrinter is its text sink (it prints the call of the matching helper
// block); so do the backward steps (lower_backward), printed as the helper blocks' backward calls
// after the forward (training) each needs (rnn_bwd after rnn_fwd, for the RNN's one backward step):
//  - forward findings (FC, crash) run the model's nodes in order from the graph inputs and compare
//    the blamed node's outputs and the graph outputs;
//  - optimized-stage findings (OC) run the model twice: without post-ops (each node its own
//    primitive, the pinned run), then as the backend's optimized compile does (onednn_fusion.cpp):
//    the fusions of the lowering's plan (lw::plan_fusions, the same decision), each chain cut to the
//    prefix the finding's "fused ..." lowering entry names, the producer's primitive created with
//    those dnnl::post_ops (eltwise; binary with its operand bound as
//    DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1) at its last consumer's place; the graph
//    outputs are compared after each run and the exit status follows the run with post-ops;
//  - backward findings (BC) feed the blamed node its operands and the library's own incoming
//    gradient, run the forward (training) and the backward primitive(s), and compare the gradients
//    of its inputs and weights with the float64 vector-Jacobian product.
// batch_norm / layer_norm run batch_normalization_* / layer_normalization_* (layer_norm on X viewed
// as [rows, prod(dims[axis:])]); resize_bilinear / resize_nearest run resampling_* and are refused
// with the lowering's reason (node_support, the backend's too) when the ONNX coordinate rule
// differs from oneDNN's.
// Only the helper functions the case needs are written into the program.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "backends/onednn/lower.h"
#include "backends/onednn/variant.h"
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
    {"quant", R"CPP(
// int8 (ONNX's linear quantization), as Quorum's backend runs it: quantized values are exact integers in
// float32 buffers; each operand is reordered into the primitive's data type (plain f32 -> plain type -> the
// primitive's layout, exact) and the result back into float32. Output scale: set_output_scales (mask 0);
// zero points: set_zero_points (mask 0), given when non-zero. uint8 weights come shifted into s8 (-128).
using qdt = memory::data_type;
struct QAttr {
  qdt src, dst;
  float scale;
  int32_t src_zp, wei_zp, dst_zp;
  std::vector<float> scales = {};  // per-channel weights: one output scale per output channel (mask 1 << 1)
};
inline memory::desc typed(const Dims& d, qdt t) { return memory::desc(d, t, dense_strides(d)); }
inline primitive_attr quant_attr(float scale, int32_t src_zp, int32_t wei_zp, int32_t dst_zp) {
  primitive_attr attr;
  attr.set_output_scales(0, {scale});
  if (src_zp) attr.set_zero_points(DNNL_ARG_SRC, 0, {src_zp});
  if (wei_zp) attr.set_zero_points(DNNL_ARG_WEIGHTS, 0, {wei_zp});
  if (dst_zp) attr.set_zero_points(DNNL_ARG_DST, 0, {dst_zp});
  return attr;
}
inline primitive_attr quant_attr(const QAttr& q) {
  primitive_attr attr = quant_attr(q.scale, q.src_zp, q.wei_zp, q.dst_zp);
  if (!q.scales.empty()) attr.set_output_scales(1 << 1, q.scales);
  return attr;
}
inline memory q_operand(const Vec& b, const Dims& d, qdt t, const memory::desc& want) {
  const memory user = mem(plain(d), b.data());
  if (t == qdt::f32) return to_layout(user, want);
  memory m(typed(d, t), eng);
  reorder_into(user, m);
  return to_layout(m, want);
}
inline Vec q_result(const memory& m, const Dims& d) {
  Vec r(numel(d));
  reorder_into(m, mem(plain(d), r.data()));
  return r;
}
// One reorder with an output scale and zero points: dst = saturate(nearbyint(scale * (src - src_zp) + dst_zp)).
// Per axis: one output scale per index of d[axis] (mask 1 << axis).
inline Vec qreorder_op(const Dims& d, qdt src, qdt dst, float scale, int32_t src_zp, int32_t dst_zp, const Vec& x,
                       const std::vector<float>& scales = {}, int axis = 0) {
  primitive_attr attr = quant_attr(scale, src_zp, 0, dst_zp);
  if (!scales.empty()) attr.set_output_scales(1 << axis, scales);
  reorder::primitive_desc pd(eng, typed(d, src), eng, typed(d, dst), attr);
  show("reorder", pd);
  const memory s = q_operand(x, d, src, typed(d, src));
  memory o(typed(d, dst), eng);
  run(reorder(pd), {{DNNL_ARG_FROM, s}, {DNNL_ARG_TO, o}});
  return q_result(o, d);
}
// matmul of x [rows, k] (plain, the source type) and w [k, n] (plain s8) into [rows, n] (the destination type).
inline Vec qmatmul_fwd(int64_t rows, int64_t k, int64_t n, const QAttr& q, const Vec& x, const Vec& w) {
  matmul::primitive_desc pd(matmul::desc(typed({rows, k}, q.src), typed({k, n}, qdt::s8), typed({rows, n}, q.dst)),
                            quant_attr(q), eng);
  show("matmul", pd);
  memory dst(pd.dst_desc(), eng);
  run(matmul(pd), {{DNNL_ARG_SRC, q_operand(x, {rows, k}, q.src, pd.src_desc())},
                   {DNNL_ARG_WEIGHTS, q_operand(w, {k, n}, qdt::s8, pd.weights_desc())},
                   {DNNL_ARG_DST, dst}});
  return q_result(dst, {rows, n});
}
// int8 convolution_forward (forward_inference) with format_tag::any: s8/u8 source, s8 weights [OC, C, k...]
// (grouped [G, OC/G, C/G, k...]), s32 bias; dil counts from 0, pads explicit.
struct QConvGeo {
  Dims src, dst, w, strides, dil, pad_l, pad_r;
  int64_t oc;
  bool bias;
};
inline Vec qconv_fwd(const QConvGeo& g, const QAttr& q, const Vec& x, const Vec& w, const Vec& b) {
  auto any = [](const Dims& d, qdt t) { return memory::desc(d, t, memory::format_tag::any); };
  const auto prop = prop_kind::forward_inference;
  const auto alg = algorithm::convolution_direct;
  auto d = g.bias ? convolution_forward::desc(prop, alg, any(g.src, q.src), any(g.w, qdt::s8), typed({g.oc}, qdt::s32),
                                              any(g.dst, q.dst), g.strides, g.dil, g.pad_l, g.pad_r)
                  : convolution_forward::desc(prop, alg, any(g.src, q.src), any(g.w, qdt::s8), any(g.dst, q.dst),
                                              g.strides, g.dil, g.pad_l, g.pad_r);
  convolution_forward::primitive_desc pd(d, quant_attr(q), eng);
  show("convolution_forward", pd);
  memory dst(pd.dst_desc(), eng);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, q_operand(x, g.src, q.src, pd.src_desc())},
                                       {DNNL_ARG_WEIGHTS, q_operand(w, g.w, qdt::s8, pd.weights_desc())},
                                       {DNNL_ARG_DST, dst}};
  if (g.bias) args[DNNL_ARG_BIAS] = q_operand(b, {g.oc}, qdt::s32, pd.bias_desc());
  run(convolution_forward(pd), args);
  return q_result(dst, g.dst);
}
)CPP"},
    {"postops", R"CPP(
// Post-ops (the optimized run): a consumer node attached to its producer's primitive, as framework
// integrations fuse them. An eltwise post-op (alg, alpha, beta; scale 1), or a binary one whose second
// operand is `operand`, described with `dims` in the primitive's dst dims (size-1 dims broadcast).
struct PostOp {
  algorithm alg;
  float alpha, beta;
  const Vec* operand;  // null: an eltwise post-op
  Dims dims;
};
using PostOps = std::vector<PostOp>;
// The attribute the producer's primitive descriptor is created with (an empty chain: no post-ops).
inline primitive_attr post_ops_attr(const PostOps& ops) {
  post_ops chain;
  for (const auto& o : ops) {
    if (!o.operand) chain.append_eltwise(1.0f, o.alg, o.alpha, o.beta);
    else chain.append_binary(o.alg, plain(o.dims));
  }
  primitive_attr attr;
  attr.set_post_ops(chain);
  return attr;
}
// Each binary post-op's second operand, an execute() argument of the producer's primitive.
inline void bind_post_ops(const PostOps& ops, std::unordered_map<int, memory>& args) {
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].operand)
      args[DNNL_ARG_ATTR_MULTIPLE_POST_OP((int)i) | DNNL_ARG_SRC_1] = mem(plain(ops[i].dims), ops[i].operand->data());
}
)CPP"},
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
    {"prod_others", R"CPP(
// d prod / d x_i, the product of the other elements of x_i's slice (the reduced dims of keep):
// prefix times suffix products in double, rounded once, as Quorum's backend computes it (oneDNN
// has no reduction backward).
inline Vec prod_of_others(const Dims& xd, const Vec& x, const Dims& keep) {
  std::vector<std::vector<size_t>> members((size_t)numel(keep));
  for (size_t i = 0; i < x.size(); ++i) {
    size_t rest = i, slot = 0, scale = 1;
    for (size_t d = xd.size(); d-- > 0;) {
      const size_t idx = rest % (size_t)xd[d];
      rest /= (size_t)xd[d];
      if (keep[d] == xd[d]) slot += idx * scale;
      scale *= (size_t)keep[d];
    }
    members[slot].push_back(i);
  }
  std::vector<double> others(x.size(), 1.0);
  for (const auto& m : members) {
    double p = 1.0;
    for (size_t i : m) {
      others[i] = p;
      p *= x[i];
    }
    p = 1.0;
    for (auto it = m.rbegin(); it != m.rend(); ++it) {
      others[*it] *= p;
      p *= x[*it];
    }
  }
  return Vec(others.begin(), others.end());
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
    {"matmul_strided", R"CPP(
// matmul on operands described by dims and strides (empty strides: plain), e.g. a transposed one.
inline Vec matmul_strided_op(const Dims& ad, const Dims& as, const Vec& a, const Dims& bd, const Dims& bs,
                             const Vec& b, const Dims& yd) {
  const memory::desc amd = as.empty() ? plain(ad) : memory::desc(ad, memory::data_type::f32, as);
  const memory::desc bmd = bs.empty() ? plain(bd) : memory::desc(bd, memory::data_type::f32, bs);
  matmul::primitive_desc pd(matmul::desc(amd, bmd, plain(yd)), eng);
  show("matmul", pd);
  Vec y(numel(yd));
  run(matmul(pd), {{DNNL_ARG_SRC, mem(amd, a.data())},
                   {DNNL_ARG_WEIGHTS, mem(bmd, b.data())},
                   {DNNL_ARG_DST, mem(plain(yd), y.data())}});
  return y;
}
)CPP"},
    {"view", R"CPP(
// A reorder from the view of x at element `offset` with `strides` into dense y.
inline Vec view_op(const Dims& yd, const Dims& strides, int64_t offset, const Vec& x) {
  const memory::desc smd(yd, memory::data_type::f32, strides);
  reorder::primitive_desc pd(eng, smd, eng, plain(yd));
  Vec y(numel(yd));
  run(reorder(pd), {{DNNL_ARG_FROM, mem(smd, x.data() + offset)}, {DNNL_ARG_TO, mem(plain(yd), y.data())}});
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
  Dims src, dst, kernel, strides, pad_l, pad_r, dil;
};
inline pooling_v2_forward::primitive_desc pool_pd(prop_kind prop, const PoolGeo& g@PO_PARAM@) {
  return pooling_v2_forward::primitive_desc(
      pooling_v2_forward::desc(prop, g.alg, plain(g.src), plain(g.dst), g.strides, g.kernel, g.dil, g.pad_l, g.pad_r),
      @PO_ATTR@eng);
}
struct PoolOut {
  Vec y;
  memory workspace;
};
inline PoolOut pool_fwd(prop_kind prop, const PoolGeo& g, const Vec& x@PO_PARAM@) {
  auto pd = pool_pd(prop, g@PO_PASS@);
  show("pooling_v2_forward", pd);
  PoolOut r;
  r.y.assign(numel(g.dst), 0.0f);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(plain(g.src), x.data())},
                                       {DNNL_ARG_DST, mem(plain(g.dst), r.y.data())}};
  if (prop == prop_kind::forward_training && pd.workspace_desc().get_size() > 0) {
    r.workspace = memory(pd.workspace_desc(), eng);
    args[DNNL_ARG_WORKSPACE] = r.workspace;
  }
@PO_BIND@  run(pooling_v2_forward(pd), args);
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
  pooling_v2_backward::primitive_desc pd(
      pooling_v2_backward::desc(g.alg, plain(g.src), plain(g.dst), g.strides, g.kernel, g.dil, g.pad_l, g.pad_r), eng,
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
inline @KIND@_forward::primitive_desc conv_pd(prop_kind prop, const ConvGeo& g@PO_PARAM@) {
  auto d = g.bias ? @KIND@_forward::desc(prop, algorithm::@KIND@_direct, any_md(g.src), any_md(g.w.dims()),
                                         plain({g.oc}), any_md(g.dst), g.strides, g.dil, g.pad_l, g.pad_r)
                  : @KIND@_forward::desc(prop, algorithm::@KIND@_direct, any_md(g.src), any_md(g.w.dims()),
                                         any_md(g.dst), g.strides, g.dil, g.pad_l, g.pad_r);
  return @KIND@_forward::primitive_desc(d, @PO_ATTR@eng);
}
inline Vec conv_fwd(prop_kind prop, const ConvGeo& g, const Vec& x, const Vec& w, const Vec& b@PO_PARAM@) {
  auto pd = conv_pd(prop, g@PO_PASS@);
  show("@KIND@_forward", pd);
  Vec y(numel(g.dst));
  const memory user_y = mem(plain(g.dst), y.data());
  const memory dst = pd.dst_desc() == user_y.get_desc() ? user_y : memory(pd.dst_desc(), eng);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, to_layout(mem(plain(g.src), x.data()), pd.src_desc())},
                                       {DNNL_ARG_WEIGHTS, to_layout(mem(g.w, w.data()), pd.weights_desc())},
                                       {DNNL_ARG_DST, dst}};
  if (g.bias) args[DNNL_ARG_BIAS] = mem(plain({g.oc}), b.data());
@PO_BIND@  run(@KIND@_forward(pd), args);
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
inline inner_product_forward::primitive_desc dense_pd(prop_kind prop, const DenseGeo& g@PO_PARAM@) {
  const memory::desc src = plain({g.rows, g.in}), w = plain({g.units, g.in}), b = plain({g.units}),
                     dst = plain({g.rows, g.units});
  auto d = g.bias ? inner_product_forward::desc(prop, src, w, b, dst) : inner_product_forward::desc(prop, src, w, dst);
  return inner_product_forward::primitive_desc(d, @PO_ATTR@eng);
}
inline Vec dense_fwd(prop_kind prop, const DenseGeo& g, const Vec& x, const Vec& w, const Vec& b@PO_PARAM@) {
  auto pd = dense_pd(prop, g@PO_PASS@);
  show("inner_product_forward", pd);
  Vec y((size_t)(g.rows * g.units));
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(plain({g.rows, g.in}), x.data())},
                                       {DNNL_ARG_WEIGHTS, mem(plain({g.units, g.in}), w.data())},
                                       {DNNL_ARG_DST, mem(plain({g.rows, g.units}), y.data())}};
  if (g.bias) args[DNNL_ARG_BIAS] = mem(plain({g.units}), b.data());
@PO_BIND@  run(inner_product_forward(pd), args);
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
inline Vec matmul_fwd(const Dims& ad, const Vec& a, const Dims& bd, const Vec& b, const Dims& yd@PO_PARAM@) {
  matmul::primitive_desc pd(matmul::desc(plain(ad), plain(bd), plain(yd)), @PO_ATTR@eng);
  show("matmul", pd);
  Vec y(numel(yd));
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(plain(ad), a.data())},
                                       {DNNL_ARG_WEIGHTS, mem(plain(bd), b.data())},
                                       {DNNL_ARG_DST, mem(plain(yd), y.data())}};
@PO_BIND@  run(matmul(pd), args);
  return y;
}
)CPP"},
    {"rnn", R"CPP(
// @OP@ with PyTorch semantics (batch-first x [N, T, F], weights [D*G*H, in] with the directions stacked, b_ih and
// b_hh, one layer, left to right, right to left, or both: bidirectional_concat, D = 2, outputs [forward,
// reverse]) on oneDNN's @FWD@, the way Quorum's backend calls it: a zero initial state is an EMPTY src_iter
// descriptor, which oneDNN documents as a zero initial state; a given one (h0, LSTM's c0 [D*H]) is src_iter
// (src_iter_c) [1, D, N, H], the same row for every sample. dst_iter is empty.
// x goes in as "tnc"; weights as dense ldigo [1, D, in, G, H] reordered into the primitive's
// layout (format_tag::any); one bias per gate, b_ih + b_hh@GRU_NOTE@.
struct Rnn {
  int64_t N, T, F, H, G, BG;
  std::vector<int64_t> perm;  // oneDNN gate k holds PyTorch gate perm[k]
  bool seq;                   // return_sequences
  bool lbr;                   // linear-before-reset GRU: b_hn in a fourth bias block
  bool peep;                  // LSTM peepholes: weights_peephole [1, D, 3, H] (i, f, o), the last input
  bool rev;                   // ONNX direction reverse: right to left, the final state at time 0
  bool init;                  // a given initial state h0 (LSTM: and c0) [D*H], the inputs after the peepholes
  int64_t D;                  // 2: bidirectional_concat
};
static const memory::desc none;
inline rnn_direction direction_of(const Rnn& r) {
  if (r.D == 2) return rnn_direction::bidirectional_concat;
  return r.rev ? rnn_direction::unidirectional_right2left : rnn_direction::unidirectional_left2right;
}
// The time index of direction d's final state: the last step, or 0 where it reads right to left.
inline int64_t final_step(const Rnn& r, int64_t d) { return (r.D == 2 ? d == 1 : r.rev) ? 0 : r.T - 1; }
inline memory::desc ldigo(const Rnn& r, int64_t in) { return plain({1, r.D, in, r.G, r.H}); }
// src_iter's descriptor: [1, D, N, H] with a given initial state, else empty (the zero state).
inline memory::desc iter_md(const Rnn& r) { return r.init ? plain({1, r.D, r.N, r.H}) : none; }
// A given state [D*H] repeated for every sample [D, N, H], and a gradient [D, N, H] summed back over them.
inline Vec per_sample(const Rnn& r, const Vec& v) {
  Vec out((size_t)(r.D * r.N * r.H));
  for (int64_t d = 0; d < r.D; ++d)
    for (int64_t n = 0; n < r.N; ++n) std::copy(v.begin() + d * r.H, v.begin() + (d + 1) * r.H, out.begin() + (d * r.N + n) * r.H);
  return out;
}
inline Vec summed(const Rnn& r, const Vec& v) {
  Vec out((size_t)(r.D * r.H), 0.0f);
  for (int64_t d = 0; d < r.D; ++d)
    for (int64_t n = 0; n < r.N; ++n)
      for (int64_t h = 0; h < r.H; ++h) out[(size_t)(d * r.H + h)] += v[(size_t)((d * r.N + n) * r.H + h)];
  return out;
}
// PyTorch [D*G*H, in] -> dense ldigo in oneDNN's gate order, and back.
inline Vec to_ldigo(const Rnn& r, const Vec& w, int64_t in) {
  Vec out((size_t)(r.D * in * r.G * r.H));
  for (int64_t d = 0; d < r.D; ++d)
    for (int64_t k = 0; k < r.G; ++k)
      for (int64_t h = 0; h < r.H; ++h)
        for (int64_t i = 0; i < in; ++i)
          out[(size_t)(((d * in + i) * r.G + k) * r.H + h)] = w[(size_t)(((d * r.G + r.perm[k]) * r.H + h) * in + i)];
  return out;
}
inline Vec from_ldigo(const Rnn& r, const Vec& w, int64_t in) {
  Vec out((size_t)(r.D * in * r.G * r.H));
  for (int64_t d = 0; d < r.D; ++d)
    for (int64_t k = 0; k < r.G; ++k)
      for (int64_t h = 0; h < r.H; ++h)
        for (int64_t i = 0; i < in; ++i)
          out[(size_t)(((d * r.G + r.perm[k]) * r.H + h) * in + i)] = w[(size_t)(((d * in + i) * r.G + k) * r.H + h)];
  return out;
}
inline @FWD@::primitive_desc rnn_pd(prop_kind prop, const Rnn& r) {
  const auto dir = direction_of(r);
  const memory::desc src = plain({r.T, r.N, r.F}), dst = plain({r.T, r.N, r.D * r.H}), bias = plain({1, r.D, r.BG, r.H});
  const memory::desc wl = any_md({1, r.D, r.F, r.G, r.H}), wi = any_md({1, r.D, r.H, r.G, r.H});
  const memory::desc pp = r.peep ? plain({1, r.D, 3, r.H}) : none;  // a zero descriptor: no peepholes
  const memory::desc it = iter_md(r);
  (void)pp;
  (void)it;
  return @FWD@::primitive_desc(@FWD@::desc(@FWD_ARGS@), eng);
}
struct RnnState {
  Vec xt, wl, wi, bias, dst, y, p, h0, c0;  // h0, c0: a given initial state, [D, N, H]
  memory workspace;
};
inline RnnState rnn_fwd(prop_kind prop, const Rnn& r, const Vec& x, const Vec& w_ih, const Vec& w_hh,
                        const Vec& b_ih, const Vec& b_hh, const Vec& p = Vec(), const Vec& h0 = Vec(),
                        const Vec& c0 = Vec()) {
  auto pd = rnn_pd(prop, r);
  show("@FWD@", pd);
  RnnState s;
  const int64_t W = r.D * r.H;
  s.xt.resize((size_t)(r.T * r.N * r.F));
  for (int64_t n = 0; n < r.N; ++n)
    for (int64_t t = 0; t < r.T; ++t)
      for (int64_t f = 0; f < r.F; ++f) s.xt[(size_t)((t * r.N + n) * r.F + f)] = x[(size_t)((n * r.T + t) * r.F + f)];
  s.wl = to_ldigo(r, w_ih, r.F);
  s.wi = to_ldigo(r, w_hh, r.H);
  s.bias.assign((size_t)(r.D * r.BG * r.H), 0.0f);
  for (int64_t d = 0; d < r.D; ++d) {
    for (int64_t k = 0; k < r.G; ++k)
      for (int64_t h = 0; h < r.H; ++h) {
        const size_t p = (size_t)((d * r.G + r.perm[k]) * r.H + h);
        // GRU's n gate keeps its input half here and its hidden half in block 3 (linear-before-reset).
        s.bias[(size_t)((d * r.BG + k) * r.H + h)] = r.lbr && k == 2 ? b_ih[p] : b_ih[p] + b_hh[p];
      }
    if (r.lbr)
      for (int64_t h = 0; h < r.H; ++h)
        s.bias[(size_t)((d * r.BG + 3) * r.H + h)] = b_hh[(size_t)((d * r.G + 2) * r.H + h)];
  }
  s.dst.assign((size_t)(r.T * r.N * W), 0.0f);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC_LAYER, mem(plain({r.T, r.N, r.F}), s.xt.data())},
      {DNNL_ARG_WEIGHTS_LAYER, to_layout(mem(ldigo(r, r.F), s.wl.data()), pd.weights_layer_desc())},
      {DNNL_ARG_WEIGHTS_ITER, to_layout(mem(ldigo(r, r.H), s.wi.data()), pd.weights_iter_desc())},
      {DNNL_ARG_BIAS, mem(plain({1, r.D, r.BG, r.H}), s.bias.data())},
      {DNNL_ARG_DST_LAYER, mem(plain({r.T, r.N, W}), s.dst.data())}};
  s.p = p;
  if (r.peep) args[DNNL_ARG_WEIGHTS_PEEPHOLE] = mem(plain({1, r.D, 3, r.H}), s.p.data());
  if (r.init) {
    s.h0 = per_sample(r, h0);
    args[DNNL_ARG_SRC_ITER] = mem(iter_md(r), s.h0.data());
    if (!c0.empty()) {
      s.c0 = per_sample(r, c0);
      args[DNNL_ARG_SRC_ITER_C] = mem(iter_md(r), s.c0.data());
    }
  }
  if (prop == prop_kind::forward_training && pd.workspace_desc().get_size() > 0) {
    s.workspace = memory(pd.workspace_desc(), eng);
    args[DNNL_ARG_WORKSPACE] = s.workspace;
  }
  run(@FWD@(pd), args);
  // y: [N, T, D*H] (return_sequences) or each direction's final state [N, D*H].
  if (r.seq) {
    s.y.resize((size_t)(r.N * r.T * W));
    for (int64_t n = 0; n < r.N; ++n)
      for (int64_t t = 0; t < r.T; ++t)
        for (int64_t c = 0; c < W; ++c) s.y[(size_t)((n * r.T + t) * W + c)] = s.dst[(size_t)((t * r.N + n) * W + c)];
  } else {
    s.y.resize((size_t)(r.N * W));
    for (int64_t d = 0; d < r.D; ++d)
      for (int64_t n = 0; n < r.N; ++n)
        for (int64_t h = 0; h < r.H; ++h)
          s.y[(size_t)(n * W + d * r.H + h)] = s.dst[(size_t)((final_step(r, d) * r.N + n) * W + d * r.H + h)];
  }
  return s;
}
)CPP"},
    {"rnn_bwd", R"CPP(
struct RnnGrads {
  Vec dx, dw_ih, dw_hh, db_ih, db_hh, dp, dh0, dc0;
};
// @BWD@ hinted by the forward_training descriptor, src_iter as in the forward. The diff weights are zeroed
// first (the RNN backward accumulates into them).
inline RnnGrads rnn_bwd(const Rnn& r, const RnnState& s, const Vec& dy) {
  const auto dir = direction_of(r);
  const int64_t W = r.D * r.H;
  const memory::desc src = plain({r.T, r.N, r.F}), dst = plain({r.T, r.N, W}), bias = plain({1, r.D, r.BG, r.H});
  const memory::desc wl = any_md({1, r.D, r.F, r.G, r.H}), wi = any_md({1, r.D, r.H, r.G, r.H});
  const memory::desc pp = r.peep ? plain({1, r.D, 3, r.H}) : none;
  const memory::desc it = iter_md(r);
  (void)pp;
  (void)it;
  @BWD@::primitive_desc pd(@BWD@::desc(@BWD_ARGS@), eng, rnn_pd(prop_kind::forward_training, r));
  show("@BWD@", pd);
  Vec diff_dst((size_t)(r.T * r.N * W), 0.0f);
  if (r.seq) {
    for (int64_t n = 0; n < r.N; ++n)
      for (int64_t t = 0; t < r.T; ++t)
        for (int64_t c = 0; c < W; ++c) diff_dst[(size_t)((t * r.N + n) * W + c)] = dy[(size_t)((n * r.T + t) * W + c)];
  } else {
    for (int64_t d = 0; d < r.D; ++d)
      for (int64_t n = 0; n < r.N; ++n)
        for (int64_t h = 0; h < r.H; ++h)
          diff_dst[(size_t)((final_step(r, d) * r.N + n) * W + d * r.H + h)] = dy[(size_t)(n * W + d * r.H + h)];
  }
  Vec dwl(pd.diff_weights_layer_desc().get_size() / sizeof(float), 0.0f);
  Vec dwi(pd.diff_weights_iter_desc().get_size() / sizeof(float), 0.0f);
  const memory dwl_mem(pd.diff_weights_layer_desc(), eng, dwl.data());
  const memory dwi_mem(pd.diff_weights_iter_desc(), eng, dwi.data());
  Vec diff_src((size_t)(r.T * r.N * r.F), 0.0f), diff_bias((size_t)(r.D * r.BG * r.H), 0.0f);
  RnnGrads g;
  g.dp.assign((size_t)(r.D * 3 * r.H), 0.0f);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC_LAYER, mem(src, s.xt.data())},
                  {DNNL_ARG_WEIGHTS_LAYER, to_layout(mem(ldigo(r, r.F), s.wl.data()), pd.weights_layer_desc())},
                  {DNNL_ARG_WEIGHTS_ITER, to_layout(mem(ldigo(r, r.H), s.wi.data()), pd.weights_iter_desc())},
                  {DNNL_ARG_BIAS, mem(bias, s.bias.data())},
                  {DNNL_ARG_DST_LAYER, mem(dst, s.dst.data())},
                  {DNNL_ARG_DIFF_DST_LAYER, mem(dst, diff_dst.data())},
                  {DNNL_ARG_WORKSPACE, s.workspace},
                  {DNNL_ARG_DIFF_SRC_LAYER, mem(src, diff_src.data())},
                  {DNNL_ARG_DIFF_WEIGHTS_LAYER, dwl_mem},
                  {DNNL_ARG_DIFF_WEIGHTS_ITER, dwi_mem},
                  {DNNL_ARG_DIFF_BIAS, mem(bias, diff_bias.data())}};
  if (r.peep) {
    args[DNNL_ARG_WEIGHTS_PEEPHOLE] = mem(pp, const_cast<float*>(s.p.data()));
    args[DNNL_ARG_DIFF_WEIGHTS_PEEPHOLE] = mem(pp, g.dp.data());
  }
  Vec diff_h0((size_t)(r.D * r.N * r.H), 0.0f), diff_c0((size_t)(r.D * r.N * r.H), 0.0f);
  if (r.init) {
    args[DNNL_ARG_SRC_ITER] = mem(it, const_cast<float*>(s.h0.data()));
    args[DNNL_ARG_DIFF_SRC_ITER] = mem(it, diff_h0.data());
    if (!s.c0.empty()) {
      args[DNNL_ARG_SRC_ITER_C] = mem(it, const_cast<float*>(s.c0.data()));
      args[DNNL_ARG_DIFF_SRC_ITER_C] = mem(it, diff_c0.data());
    }
  }
  run(@BWD@(pd), args);
  if (r.init) {
    g.dh0 = summed(r, diff_h0);
    if (!s.c0.empty()) g.dc0 = summed(r, diff_c0);
  }
  g.dx.resize((size_t)(r.N * r.T * r.F));
  for (int64_t n = 0; n < r.N; ++n)
    for (int64_t t = 0; t < r.T; ++t)
      for (int64_t f = 0; f < r.F; ++f) g.dx[(size_t)((n * r.T + t) * r.F + f)] = diff_src[(size_t)((t * r.N + n) * r.F + f)];
  Vec plain_wl((size_t)(r.D * r.F * r.G * r.H)), plain_wi((size_t)(r.D * r.H * r.G * r.H));
  reorder_into(dwl_mem, mem(ldigo(r, r.F), plain_wl.data()));
  reorder_into(dwi_mem, mem(ldigo(r, r.H), plain_wi.data()));
  g.dw_ih = from_ldigo(r, plain_wl, r.F);
  g.dw_hh = from_ldigo(r, plain_wi, r.H);
  g.db_ih.assign((size_t)(r.D * r.G * r.H), 0.0f);
  g.db_hh.assign((size_t)(r.D * r.G * r.H), 0.0f);
  for (int64_t d = 0; d < r.D; ++d)
    for (int64_t k = 0; k < r.G; ++k)
      for (int64_t h = 0; h < r.H; ++h) {
        const int64_t hk = r.lbr && k == 2 ? 3 : k;  // GRU's n gate: the hidden half is block 3
        const size_t to = (size_t)((d * r.G + r.perm[k]) * r.H + h);
        g.db_ih[to] = diff_bias[(size_t)((d * r.BG + k) * r.H + h)];
        g.db_hh[to] = diff_bias[(size_t)((d * r.BG + hk) * r.H + h)];
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
// diff_shift with eltwise/binary primitives (dmean = scale*(-(rstd*dshift)),
// dvar = scale*(-0.5*(rstd^2*dscale)), rstd = (var + eps)^-0.5); with training=1 they are zero.
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
    // The scale last (Quorum's lowering): scale * rstd^2 first can overflow where dvar fits.
    g.dmean = binary_op(algorithm::binary_mul, cd, cd, scale, cd,
                        eltwise_fwd(algorithm::eltwise_linear, -1.0f, 0.0f, cd,
                                    binary_op(algorithm::binary_mul, cd, cd, rstd, cd, g.dshift)));
    g.dvar = binary_op(algorithm::binary_mul, cd, cd, scale, cd,
                       eltwise_fwd(algorithm::eltwise_linear, -0.5f, 0.0f, cd,
                                   binary_op(algorithm::binary_mul, cd, cd, rstd2, cd, g.dscale)));
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
    {"qelem", R"CPP(
// The quantized twins (ONNX Runtime's QLinear* operators) on int8 binary, pooling, eltwise and concat primitives,
// sources and destination of one type t. These take no output scales and no zero points in oneDNN 2.6: the binary
// takes a scale per source (set_scales, mask 0), and the requantization is a chain of eltwise_linear post-ops
// r * alpha + beta (the sources' zero points as a shift, then the scale ratio and the output zero point) before
// the saturating nearbyint into t.
struct QElem {
  qdt t;
  std::vector<float> scales;
  std::vector<std::pair<float, float>> linear;  // (alpha, beta) per post-op
};
inline primitive_attr qelem_attr(const QElem& q) {
  primitive_attr attr;
  const int args[] = {DNNL_ARG_SRC_0, DNNL_ARG_SRC_1};
  for (size_t i = 0; i < q.scales.size() && i < 2; ++i) attr.set_scales(args[i], 0, {q.scales[i]});
  if (!q.linear.empty()) {
    post_ops po;
    for (const auto& l : q.linear) po.append_eltwise(1.0f, algorithm::eltwise_linear, l.first, l.second);
    attr.set_post_ops(po);
  }
  return attr;
}
// dst (dims out) = a (op) b, b broadcasting; an a that must broadcast is materialised first (zeros + a).
inline Vec qbinary_op(algorithm alg, const QElem& q, const Dims& out, const Dims& ad, const Vec& a, const Dims& bd,
                      const Vec& b) {
  const Vec full_a = ad == out ? a : binary_op(algorithm::binary_add, out, out, Vec(numel(out), 0.0f), ad, a);
  binary::primitive_desc pd(binary::desc(alg, typed(out, q.t), typed(bd, q.t), typed(out, q.t)), qelem_attr(q), eng);
  show("binary", pd);
  memory dst(typed(out, q.t), eng);
  run(binary(pd), {{DNNL_ARG_SRC_0, q_operand(full_a, out, q.t, typed(out, q.t))},
                   {DNNL_ARG_SRC_1, q_operand(b, bd, q.t, typed(bd, q.t))},
                   {DNNL_ARG_DST, dst}});
  return q_result(dst, out);
}
inline Vec qeltwise_op(algorithm alg, float alpha, float beta, const QElem& q, const Dims& d, const Vec& x) {
  eltwise_forward::primitive_desc pd(eltwise_forward::desc(prop_kind::forward_inference, alg, typed(d, q.t), alpha,
                                                           beta),
                                     qelem_attr(q), eng);
  show("eltwise_forward", pd);
  memory dst(typed(d, q.t), eng);
  run(eltwise_forward(pd), {{DNNL_ARG_SRC, q_operand(x, d, q.t, typed(d, q.t))}, {DNNL_ARG_DST, dst}});
  return q_result(dst, d);
}
inline Vec qconcat_op(qdt t, const Dims& out, int axis, const std::vector<Dims>& ds, const std::vector<const Vec*>& xs) {
  std::vector<memory::desc> srcs;
  for (const auto& d : ds) srcs.push_back(typed(d, t));
  concat::primitive_desc pd(typed(out, t), axis, srcs, eng);
  show("concat", pd);
  memory dst(typed(out, t), eng);
  std::unordered_map<int, memory> args{{DNNL_ARG_DST, dst}};
  for (size_t i = 0; i < xs.size(); ++i) args[DNNL_ARG_MULTIPLE_SRC + (int)i] = q_operand(*xs[i], ds[i], t, srcs[i]);
  run(concat(pd), args);
  return q_result(dst, out);
}
)CPP"},
    {"qpool", R"CPP(
// Channels last ([N, C, spatial...] stored N, spatial..., C), where 2.6 has its jit int8 pooling.
inline memory::desc channels_last(const Dims& d, qdt t) {
  Dims st(d.size(), 1);
  int64_t acc = d.size() > 1 ? d[1] : 1;
  for (size_t i = d.size(); i-- > 2;) {
    st[i] = acc;
    acc *= d[i];
  }
  st[0] = acc;
  return memory::desc(d, t, st);
}
inline Vec qpool_fwd(const PoolGeo& g, const QElem& q, const Vec& x) {
  pooling_v2_forward::primitive_desc pd(
      pooling_v2_forward::desc(prop_kind::forward_inference, g.alg, channels_last(g.src, q.t), channels_last(g.dst, q.t),
                               g.strides, g.kernel, g.dil, g.pad_l, g.pad_r),
      qelem_attr(q), eng);
  show("pooling_v2_forward", pd);
  memory dst(pd.dst_desc(), eng);
  run(pooling_v2_forward(pd), {{DNNL_ARG_SRC, q_operand(x, g.src, q.t, pd.src_desc())}, {DNNL_ARG_DST, dst}});
  return q_result(dst, g.dst);
}
)CPP"},
};

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  return s;
}

namespace lw = onednn_lower;
using lw::Dims;

// ---------------------------------------------------------------- text helpers

std::string dims(const Shape& s) {
  std::ostringstream o;
  o << "{";
  if (s.empty()) o << "1";  // oneDNN has no rank-0 tensors
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "}";
  return o.str();
}
std::string flt(double v) { return c_literal(v, true); }
std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
std::string var(const std::string& value) { return "v_" + identifier(value); }
std::string alg(lw::Alg a) { return std::string("algorithm::") + lw::name(a); }

// The lowering's refusal of a node (resize coordinate rules, int64 operands), as the writer's.
void check_supported(const ir::Graph& g, const ir::Node& n) {
  if (lw::is_resize(n.op)) {
    const Shape& x = g.types.at(n.inputs[0]).shape;
    const Shape& y = g.types.at(n.outputs[0]).shape;
    if (x.size() != 4 || y.size() != 4) throw ReproUnsupported(n.op + " on a tensor that is not [N, C, H, W]");
  }
  const Support s = lw::node_support(g, n);
  if (!s.ok) throw ReproUnsupported(s.reason + ", which Quorum's oneDNN backend refuses too");
}

// ---------------------------------------------------------------- the generator

// The writer's sink: prints each forward step of the lowering as a call of the matching helper
// block (and pulls the block into the program). A '%' temporary is not declared: its expression is
// written where the next step consumes it. For a backward finding it prints the blamed node's
// backward steps: each family's step as its helper's forward (training) and backward calls (an
// eltwise chain's forward is replayed first, keeping each step's input), and the gradient names
// bound to the helper's results; bn_bwd's text holds the dmean/dvar steps that follow it.
class CallPrinter : public lw::StepSink {
 public:
  CallPrinter(const ReproCase& c) : c_(c) {}

  ReproProgram write(const std::string& dir);

  void node(const ir::Node& n) override {
    node_ = &n;
    if (mode_ == Mode::Forward && !fusing_)  // a fused producer's line names its post-ops (fused_node)
      lines_.push_back("  // node '" + n.name + "': " + n.op + " " + core::to_string(n.attrs) + "\n");
  }
  void alias(const std::string& y, const std::string& x) override {
    if (mode_ == Mode::Backward) {
      names_.emplace(y, ref(x));  // a gradient: the first binding wins (a value used twice)
      return;
    }
    lines_.push_back("  const Vec& " + var(y) + " = " + ref(x) + ";  // a reshape: the same buffer\n");
  }
  void constant(const std::string& v, const std::string& hint, const Shape& shape, const std::vector<float>& data,
                const std::string& comment) override {
    const std::string name = identifier(hint);
    std::vector<double> vals(data.begin(), data.end());
    lines_.push_back(data_vec_line(name, core::Tensor::f64(shape, vals), comment));
    names_[v] = name;
  }
  void eltwise(const lw::Eltwise& e, const Dims& d, const std::string& x, const std::string& y) override {
    if (skip_) return;
    need("eltwise");
    const std::string ex = ref(x);
    define(y,
           "eltwise_fwd(" + alg(e.alg) + ", " + flt(e.alpha) + ", " + flt(e.beta) + ", " + dims(d) + ", " + ex + ")");
    if (mode_ == Mode::Replay) {  // the backward takes each step's input
      const std::string step = "step_in" + std::to_string(step_names_.size());
      lines_.push_back("  const Vec& " + step + " = " + ex + ";\n");
      step_names_[x] = step;
    }
  }
  void binary(lw::Alg a, const Dims& out, const Dims& ad, const std::string& x0, const Dims& bd, const std::string& x1,
              const std::string& y) override {
    if (skip_) return;
    need("binary");
    const std::string ea = ref(x0), eb = ref(x1);
    define(y,
           "binary_op(" + alg(a) + ", " + dims(out) + ", " + dims(ad) + ", " + ea + ", " + dims(bd) + ", " + eb + ")");
    if (mode_ == Mode::Backward && judge_ && (a == lw::Alg::binary_ge || a == lw::Alg::binary_le)) compare_mask(a);
  }
  void sum(const Dims& d, const std::vector<std::string>& xs, const std::string& y) override {
    need("sum");
    std::string e = "sum_op(" + dims(d) + ", {";
    for (size_t i = 0; i < xs.size(); ++i) e += (i ? ", " : "") + std::string("&") + ref(xs[i]);
    define(y, e + "})");
  }
  void concat(const Dims& out, int axis, const std::vector<Dims>& ds, const std::vector<std::string>& xs,
              const std::string& y) override {
    need("concat");
    std::string e = "concat_op(" + dims(out) + ", " + std::to_string(axis) + ", {";
    for (size_t i = 0; i < ds.size(); ++i) e += (i ? ", " : "") + std::string("Dims") + dims(ds[i]);
    e += "}, {";
    for (size_t i = 0; i < xs.size(); ++i) e += (i ? ", " : "") + std::string("&") + ref(xs[i]);
    define(y, e + "})");
  }
  void transpose(const Dims& yd, const Dims& st, const std::string& x, const std::string& y) override {
    need("transpose");
    define(y, "transpose_op(" + dims(yd) + ", " + dims(st) + ", " + ref(x) + ")");
  }
  void view(const Dims& yd, const Dims& st, int64_t offset, const std::string& x, const std::string& y) override {
    need("view");
    define(y, "view_op(" + dims(yd) + ", " + dims(st) + ", " + std::to_string(offset) + ", " + ref(x) + ")");
  }
  void prod_of_others(const Dims& xd, const std::string& x, const Dims& keep, const std::string& y) override {
    need("prod_others");
    define(y, "prod_of_others(" + dims(xd) + ", " + ref(x) + ", " + dims(keep) + ")");
  }
  void reduce(lw::Alg a, const Dims& xd, const std::string& x, const Dims& keep, const std::string& y) override {
    need("reduce");
    define(y, "reduce(" + alg(a) + ", " + dims(xd) + ", " + ref(x) + ", " + dims(keep) + ")");
  }
  void softmax(lw::Prop p, const lw::SoftmaxGeo& g, const std::string& x, const std::string& y) override {
    need("softmax");
    define(y, "softmax_fwd(" + prop(p) + ", " + alg(g.alg) + ", " + dims(g.dims) + ", " + std::to_string(g.axis) +
                  ", " + ref(x) + ")");
  }
  void matmul(const Dims& ad, const std::string& a, const Dims& bd, const std::string& b, const Dims& yd,
              const std::string& y) override {
    need("matmul");
    const std::string ea = ref(a), eb = ref(b);
    define(y,
           "matmul_fwd(" + dims(ad) + ", " + ea + ", " + dims(bd) + ", " + eb + ", " + dims(yd) + post_ops_arg() + ")");
  }
  void matmul_strided(const Dims& ad, const Dims& as, const std::string& a, const Dims& bd, const Dims& bs,
                      const std::string& b, const Dims& yd, const std::string& y) override {
    need("matmul_strided");
    const std::string ea = ref(a), eb = ref(b);
    define(y, "matmul_strided_op(" + dims(ad) + ", " + dims(as) + ", " + ea + ", " + dims(bd) + ", " + dims(bs) +
                  ", " + eb + ", " + dims(yd) + ")");
  }
  void pool(lw::Prop p, const lw::PoolGeo& g, const std::string& x, const std::string& y) override {
    need("pool");
    define(y, "pool_fwd(" + prop(p) + ", " + pool_decl(g) + ", " + ref(x) + post_ops_arg() + ").y");
  }
  void conv(lw::Prop p, const lw::ConvGeo& g, const std::string& x, const std::string& w, const std::string& b,
            const std::string& y) override {
    need("conv");
    const std::string geo = conv_decl(g);
    const std::string ex = ref(x), ew = ref(w);
    define(y, "conv_fwd(" + prop(p) + ", " + geo + ", " + ex + ", " + ew + ", " + (b.empty() ? "Vec{}" : ref(b)) +
                  post_ops_arg() + ")");
  }
  void dense(lw::Prop p, const lw::DenseGeo& g, const std::string& x, const std::string& w, const std::string& b,
             const std::string& y) override {
    need("dense");
    const std::string geo = dense_decl(g);
    const std::string ex = ref(x), ew = ref(w);
    define(y, "dense_fwd(" + prop(p) + ", " + geo + ", " + ex + ", " + ew + ", " + (b.empty() ? "Vec{}" : ref(b)) +
                  post_ops_arg() + ")");
  }
  void batch_norm(lw::Prop p, const lw::BnGeo& g, const std::vector<std::string>& in, const std::string& y) override {
    need("bnorm");
    std::string e = "bn_fwd(" + prop(p) + ", " + bn_args(g);
    for (size_t i = 0; i < 5; ++i) e += ", " + ref(in.at(i));
    define(y, e + ").y");
  }
  void layer_norm(const lw::LnGeo& g, const std::string& x, const std::string& scale, const std::string& shift,
                  const std::string& y) override {
    need("lnorm");
    const std::string ex = ref(x), es = ref(scale), eb = ref(shift);
    define(y, "ln_fwd(" + ln_args(g) + ", " + ex + ", " + es + ", " + eb + ").y");
  }
  void lrn(lw::Prop p, const lw::LrnGeo& g, const std::string& x, const std::string& y) override {
    need("lrn");
    define(y, "lrn_fwd(" + prop(p) + ", " + lrn_args(g) + ", " + ref(x) + ").y");
  }
  void resample(lw::Prop p, const lw::ResampleGeo& g, const std::string& x, const std::string& y) override {
    need("resample");
    define(y, "resample_fwd(" + prop(p) + ", " + resample_args(g) + ", " + ref(x) + ")");
  }
  void rnn(lw::Prop p, const lw::RnnGeo& g, const std::vector<std::string>& in, const std::string& y) override {
    define(y, "rnn_fwd(" + prop(p) + ", " + rnn_decl(g) + rnn_inputs(g, in) + ").y");
  }

  // ---- int8 steps
  void qreorder(const lw::QReorderGeo& g, const std::string& x, const std::string& y) override {
    need("quant");
    std::string per_axis;
    for (float s : g.scales) per_axis += (per_axis.empty() ? "" : ", ") + flt(s);
    if (!g.scales.empty()) per_axis = ", {" + per_axis + "}, " + std::to_string(g.axis);
    define(y, "qreorder_op(" + dims(g.dims) + ", " + qdt(g.src) + ", " + qdt(g.dst) + ", " + flt(g.scale) + ", " +
                  std::to_string(g.src_zp) + ", " + std::to_string(g.dst_zp) + ", " + ref(x) + per_axis + ")");
  }
  void qconv(const lw::ConvGeo& g, const lw::QuantAttr& q, const std::string& x, const std::string& w,
             const std::string& b, const std::string& y) override {
    need("quant");
    const std::string name = "qconv_" + node_id();
    lines_.push_back("  const QConvGeo " + name + "{" + dims(g.src) + ", " + dims(g.dst) + ", " + dims(g.w_dims) +
                     ", " + dims(g.strides) + ", " + dims(g.dil) + ", " + dims(g.pad_l) + ", " + dims(g.pad_r) +
                     ", " + std::to_string(g.oc) + ", " + (g.bias ? "true" : "false") + "};\n");
    const std::string ex = ref(x), ew = ref(w), eb = b.empty() ? "Vec{}" : ref(b);
    define(y, "qconv_fwd(" + name + ", " + qattr(q) + ", " + ex + ", " + ew + ", " + eb + ")");
  }
  void qmatmul(const lw::QMatmulGeo& g, const lw::QuantAttr& q, const std::string& x, const std::string& w,
               const std::string& y) override {
    need("quant");
    const std::string ex = ref(x), ew = ref(w);
    define(y, "qmatmul_fwd(" + std::to_string(g.rows) + ", " + std::to_string(g.k) + ", " + std::to_string(g.n) +
                  ", " + qattr(q) + ", " + ex + ", " + ew + ")");
  }
  void qbinary(lw::Alg a, const lw::QElemAttr& q, const Dims& out, const Dims& ad, const std::string& x0,
               const Dims& bd, const std::string& x1, const std::string& y) override {
    need("quant"), need("binary"), need("qelem");
    const std::string ea = ref(x0), eb = ref(x1);
    define(y, "qbinary_op(" + alg(a) + ", " + qelem(q) + ", " + dims(out) + ", " + dims(ad) + ", " + ea + ", " +
                  dims(bd) + ", " + eb + ")");
  }
  void qpool(const lw::PoolGeo& g, const lw::QElemAttr& q, const std::string& x, const std::string& y) override {
    need("quant"), need("binary"), need("pool"), need("qelem"), need("qpool");
    define(y, "qpool_fwd(" + pool_decl(g) + ", " + qelem(q) + ", " + ref(x) + ")");
  }
  void qeltwise(const lw::Eltwise& e, const lw::QElemAttr& q, const Dims& d, const std::string& x,
                const std::string& y) override {
    need("quant"), need("binary"), need("qelem");
    define(y, "qeltwise_op(" + alg(e.alg) + ", " + flt(e.alpha) + ", " + flt(e.beta) + ", " + qelem(q) + ", " +
                  dims(d) + ", " + ref(x) + ")");
  }
  void qconcat(lw::DataType t, const Dims& out, int axis, const std::vector<Dims>& ds,
               const std::vector<std::string>& xs, const std::string& y) override {
    need("quant"), need("binary"), need("qelem");
    std::string e = "qconcat_op(" + qdt(t) + ", " + dims(out) + ", " + std::to_string(axis) + ", {";
    for (size_t i = 0; i < ds.size(); ++i) e += (i ? ", " : "") + std::string("Dims") + dims(ds[i]);
    e += "}, {";
    for (size_t i = 0; i < xs.size(); ++i) e += (i ? ", " : "") + std::string("&") + ref(xs[i]);
    define(y, e + "})");
  }
  static std::string qelem(const lw::QElemAttr& q) {
    std::string s = "QElem{" + qdt(q.type) + ", {";
    for (size_t i = 0; i < q.scales.size(); ++i) s += (i ? ", " : "") + flt(q.scales[i]);
    s += "}, {";
    for (size_t i = 0; i < q.linear.size(); ++i)
      s += (i ? ", " : "") + std::string("{") + flt(q.linear[i].first) + ", " + flt(q.linear[i].second) + "}";
    return s + "}}";
  }
  static std::string qdt(lw::DataType t) { return std::string("qdt::") + lw::name(t); }
  static std::string qattr(const lw::QuantAttr& q) {
    std::string s = "QAttr{" + qdt(q.src) + ", " + qdt(q.dst) + ", " + flt(q.scale) + ", " +
                    std::to_string(q.src_zp) + ", " + std::to_string(q.wei_zp) + ", " + std::to_string(q.dst_zp);
    if (!q.scales.empty()) {
      s += ", {";
      for (size_t i = 0; i < q.scales.size(); ++i) s += (i ? ", " : "") + flt(q.scales[i]);
      s += "}";
    }
    return s + "}";
  }

  // ---- backward steps
  void zeros(const Dims& d, const std::string& y) override {
    if (skip_) return;
    define(y, "Vec(" + std::to_string(core::numel(d)) + ", 0.0f)");
  }
  void broadcast(const Shape& from, const std::string& x, const Shape& to, const std::string& y) override {
    need("binary");  // zeros + x, as the backend's broadcast_to
    define(y, "binary_op(algorithm::binary_add, " + dims(to) + ", " + dims(to) + ", Vec(" +
                  std::to_string(core::numel(to)) + ", 0.0f), " + dims(lw::pad_rank(from, to.size())) + ", " + ref(x) +
                  ")");
  }
  void eltwise_backward(const lw::Eltwise& e, const Dims& d, const std::string& src, const std::string& dy,
                        const std::string& dx) override {
    need("eltwise_bwd");
    flush();
    const std::string v = local(dx);
    if (!names_.count(dx)) {
      body_ << "  Vec " << v << " = " << ref(dy) << ";\n";
      names_[dx] = v;
    }
    body_ << "  " << v << " = eltwise_bwd(" << alg(e.alg) << ", " << flt(e.alpha) << ", " << flt(e.beta) << ", "
          << dims(d) << ", " << step_names_.at(src) << ", " << v << ");\n";
  }
  void softmax_backward(const lw::SoftmaxGeo& g, const std::string& x, const std::string&, const std::string& dy,
                        const std::string& dx) override {
    need("softmax");
    need("softmax_bwd");
    flush();
    const std::string a = alg(g.alg), d = dims(g.dims), axis = std::to_string(g.axis);
    body_ << "  const Vec y = softmax_fwd(prop_kind::forward_training, " << a << ", " << d << ", " << axis << ", "
          << ref(x) << ");\n";
    body_ << "  const Vec dx = softmax_bwd(" << a << ", " << d << ", " << axis << ", y, " << ref(dy) << ");\n";
    names_.emplace(dx, "dx");
  }
  void pool_backward(const lw::PoolGeo& g, const std::string& x, const std::string& dy,
                     const std::string& dx) override {
    need("pool");
    need("pool_bwd");
    const std::string geo = pool_decl(g);
    flush();
    body_ << "  const PoolOut fwd = pool_fwd(prop_kind::forward_training, " << geo << ", " << ref(x) << ");\n";
    body_ << "  const Vec dx = pool_bwd(" << geo << ", fwd.workspace, " << ref(dy) << ");\n";
    names_.emplace(dx, "dx");
  }
  void conv_backward(const lw::ConvGeo& g, const std::string& x, const std::string& w, const std::string& dy,
                     const std::vector<std::string>& grads) override {
    need("conv");
    need("conv_bwd");
    const std::string geo = conv_decl(g);
    flush();
    body_ << "  const ConvGrads gr = conv_bwd(" << geo << ", " << ref(x) << ", " << ref(w) << ", " << ref(dy) << ");\n";
    bind(grads, {"gr.dx", "gr.dw", "gr.db"});
  }
  void dense_backward(const lw::DenseGeo& g, const std::string& x, const std::string& w, const std::string& dy,
                      const std::vector<std::string>& grads) override {
    need("dense");
    need("dense_bwd");
    const std::string geo = dense_decl(g);
    flush();
    body_ << "  const DenseGrads gr = dense_bwd(" << geo << ", " << ref(x) << ", " << ref(w) << ", " << ref(dy)
          << ");\n";
    bind(grads, {"gr.dx", "gr.dw", "gr.db"});
  }
  void batch_norm_backward(const lw::BnGeo& g, const std::vector<std::string>& in, const std::string& dy,
                           const std::vector<std::string>& grads) override {
    need("eltwise");
    need("binary");
    need("bnorm");
    need("bnorm_bwd");
    flush();
    const std::string args = bn_args(g);
    body_ << "  const BnOut fwd = bn_fwd(prop_kind::forward_training, " << args;
    for (size_t i = 0; i < 5; ++i) body_ << ", " << ref(in.at(i));
    body_ << ");\n  const BnGrads gr = bn_bwd(" << args << ", " << ref(in[0]) << ", " << ref(in[1]) << ", "
          << ref(in[2]) << ", fwd, " << ref(dy) << ");\n";
    bind(grads, {"gr.dx", "gr.dscale", "gr.dshift"});
    // bn_bwd also derives dmean/dvar (zero with batch statistics): the lowering's next steps.
    names_.emplace("@dmean", "gr.dmean");
    names_.emplace("@dvar", "gr.dvar");
    skip_ = true;
  }
  void layer_norm_backward(const lw::LnGeo& g, const std::vector<std::string>& in, const std::string& dy,
                           const std::vector<std::string>& grads) override {
    need("lnorm");
    need("lnorm_bwd");
    flush();
    const std::string args = ln_args(g), x = ref(in.at(0)), scale = ref(in.at(1)), shift = ref(in.at(2));
    body_ << "  const LnOut fwd = ln_fwd(" << args << ", " << x << ", " << scale << ", " << shift
          << ");\n  const LnGrads gr = ln_bwd(" << args << ", " << x << ", " << scale << ", " << shift << ", fwd, "
          << ref(dy) << ");\n";
    bind(grads, {"gr.dx", "gr.dscale", "gr.dshift"});
  }
  void lrn_backward(const lw::LrnGeo& g, const std::string& x, const std::string& dy, const std::string& dx) override {
    need("lrn");
    need("lrn_bwd");
    flush();
    const std::string args = lrn_args(g), ex = ref(x);
    body_ << "  const LrnOut fwd = lrn_fwd(prop_kind::forward_training, " << args << ", " << ex << ");\n";
    body_ << "  const Vec dx = lrn_bwd(" << args << ", " << ex << ", fwd.workspace, " << ref(dy) << ");\n";
    names_.emplace(dx, "dx");
  }
  void resample_backward(const lw::ResampleGeo& g, const std::string& x, const std::string& dy,
                         const std::string& dx) override {
    need("resample");
    need("resample_bwd");
    flush();
    const std::string args = resample_args(g);
    body_ << "  const Vec y = resample_fwd(prop_kind::forward_training, " << args << ", " << ref(x) << ");\n"
          << "  (void)y;\n  const Vec dx = resample_bwd(" << args << ", " << ref(dy) << ");\n";
    names_.emplace(dx, "dx");
  }
  void rnn_backward(const lw::RnnGeo& g, const std::vector<std::string>& in, const std::string& dy,
                    const std::vector<std::string>& grads) override {
    need("rnn_bwd");
    const std::string geo = rnn_decl(g);
    flush();
    body_ << "  const RnnState st = rnn_fwd(prop_kind::forward_training, " << geo << rnn_inputs(g, in) << ");\n"
          << "  const RnnGrads gr = rnn_bwd(" << geo << ", st, " << ref(dy) << ");\n";
    std::vector<std::string> exprs = {"gr.dx", "gr.dw_ih", "gr.dw_hh", "gr.db_ih", "gr.db_hh"};
    if (g.peephole) exprs.push_back("gr.dp");
    if (g.h0 >= 0) exprs.push_back("gr.dh0");
    if (g.c0 >= 0) exprs.push_back("gr.dc0");
    bind(grads, exprs);
  }

 private:
  // Forward: the model's nodes; Replay: an eltwise chain's forward before its backward; Backward:
  // the blamed node's backward steps.
  enum class Mode { Forward, Replay, Backward };

  // A backward-local value's C++ name ('@dx' -> dx).
  static std::string local(const std::string& v) { return v[0] == '@' ? v.substr(1) : "d_" + identifier(v); }
  void bind(const std::vector<std::string>& grads, const std::vector<std::string>& exprs) {
    for (size_t i = 0; i < grads.size() && i < exprs.size(); ++i)
      if (!grads[i].empty()) names_.emplace(grads[i], exprs[i]);
  }
  // The comparison mask of maximum/minimum's backward, checked on its own so that a wrong comparison
  // primitive is named.
  void compare_mask(lw::Alg a) {
    const ir::Node& n = *node_;
    const bool is_max = a == lw::Alg::binary_ge;
    const core::Tensor a32 = c_.expected.at(n.inputs[0]).to(core::DType::F32).to(core::DType::F64);
    const core::Tensor b32 = c_.expected.at(n.inputs[1]).to(core::DType::F32).to(core::DType::F64);
    core::Tensor mask(core::DType::F64, a32.shape());
    for (int64_t i = 0; i < mask.numel(); ++i)  // IEEE comparisons: false where an operand is NaN
      mask.f64()[i] = (is_max ? a32.get(i) >= b32.get(i) : a32.get(i) <= b32.get(i)) ? 1.0 : 0.0;
    compare(std::string(lw::name(a)) + "(" + n.inputs[0] + ", " + n.inputs[1] + ")", "mask", mask,
            ops::Tolerance{0, 0});
  }
  // Runs node n's backward steps into `sink` (this writer, or a recording wrapper of it): the
  // incoming gradients are the g_ arrays; an eltwise chain's forward is replayed first.
  void backward_steps(const ir::Node& n, lw::StepSink& sink) {
    const std::vector<Shape> ins = shapes(n.inputs), outs = shapes(n.outputs);
    for (const auto& o : n.outputs) names_[lw::grad(o)] = "g_" + identifier(o);
    if (lw::eltwise_chain(n.op, n.attrs)) {
      mode_ = Mode::Replay;
      lw::lower_forward(n, ins, outs, lw::Prop::forward_training, *this);
      flush();
    }
    mode_ = Mode::Backward;
    lw::lower_backward(n, ins, outs, sink);
    flush();
    skip_ = false;
  }

  const Shape& shape(const std::string& v) const { return c_.model.types.at(v).shape; }
  void need(const std::string& b) { used_.insert(b); }
  // `Vec NAME` holding `t` (float32, exact): its data array, and the line declaring it.
  std::string data_vec_line(const std::string& name, const core::Tensor& t, const std::string& comment) {
    const std::string arr = "d_" + name;
    data_ << "// " << comment << " " << dims(t.shape()) << "\n" << c_array(arr, t);
    return "  const Vec " + name + "(" + arr + ", " + arr + " + " + std::to_string(std::max<int64_t>(1, t.numel())) +
           ");\n";
  }
  void data_vec(const std::string& name, const core::Tensor& t, const std::string& comment) {
    body_ << data_vec_line(name, t, comment);
  }
  // Emits a comparison of the float buffer expression `got` with the expected tensor `want`.
  void compare(const std::string& what, const std::string& got, const core::Tensor& want, const ops::Tolerance& tol) {
    check_line(what, got, want_array(what, want), want, tol);
  }
  // The data array holding the expected `want`; its name.
  std::string want_array(const std::string& what, const core::Tensor& want) {
    const std::string arr = "want_" + identifier(what) + "_" + std::to_string(n_compared_++);
    data_ << "// expected " << what << " " << dims(want.shape()) << " (float64 reference)\n"
          << c_array(arr, want, false);
    return arr;
  }
  void check_line(const std::string& what, const std::string& got, const std::string& arr, const core::Tensor& want,
                  const ops::Tolerance& tol) {
    body_ << "  " << counter_ << " += check(\"" << what << "\", " << got << ", " << arr << ", " << want.numel() << ", "
          << num(tol.atol) << ", " << num(tol.rtol) << ");\n";
  }

  // ---- the optimized stage (OC): the model as Quorum's optimized run compiles it
  // One fusion as the backend applies it (onednn_fusion.cpp fuse()): the lowering's plan
  // (lw::plan_fusions), its chain cut to the prefix oneDNN accepted.
  struct Applied {
    size_t producer = 0;
    std::vector<size_t> consumers;  // the absorbed nodes, in chain order
    std::vector<lw::PostOp> ops;    // their post-ops
  };
  // The fusions of the optimized run. The backend tries each planned chain whole, then one consumer
  // fewer while oneDNN refuses the primitive; which prefix it took is in the finding's lowering (the
  // blamed node's "fused <primitive>+<algorithm>..." entry) for the chain the blamed node is in. Any
  // other chain is written whole (it is the one oneDNN is asked for first).
  void plan_optimized() {
    std::vector<std::vector<std::string>> named;  // each fused entry's post-op algorithms
    for (const auto& e : c_.lowering) {
      const std::string fused = fused_entry(e);
      if (fused.empty()) continue;
      std::vector<std::string> algs;
      std::istringstream in(fused);
      std::string part;
      for (bool first = true; std::getline(in, part, '+'); first = false)
        if (!first) algs.push_back(part);
      named.push_back(algs);
    }
    const auto& nodes = c_.model.nodes;
    for (const lw::Fusion& f : lw::plan_fusions(c_.model)) {
      size_t n = f.consumers.size();
      bool blamed_in = nodes[f.producer].name == c_.node;
      for (size_t k : f.consumers) blamed_in = blamed_in || nodes[k].name == c_.node;
      if (blamed_in && !c_.lowering.empty()) {
        n = 0;
        for (size_t k = f.consumers.size(); k > 0 && n == 0; --k) {
          std::vector<std::string> algs;
          for (const auto& o : f.post_ops(k)) algs.push_back(lw::name(o.alg));
          if (std::find(named.begin(), named.end(), algs) != named.end()) n = k;
        }
        if (n == 0) {
          std::string chain;
          for (const auto& o : f.post_ops(f.consumers.size())) chain += std::string("+") + lw::name(o.alg);
          throw ReproUnsupported("the finding's lowering of node '" + c_.node +
                                 "' names no prefix of the post-op chain the fusion plan gives node '" +
                                 nodes[f.producer].name + "' (" + nodes[f.producer].op + chain +
                                 "): which chain oneDNN accepted is not known");
        }
      }
      fused_.push_back(
          Applied{f.producer, std::vector<size_t>(f.consumers.begin(), f.consumers.begin() + n), f.post_ops(n)});
    }
    if (fused_.empty())
      throw ReproUnsupported(c_.model.nodes.size() == 1
                                 ? "the optimized-stage case is node '" + c_.node +
                                       "' cut out of its model, which leaves no producer to attach it to as a "
                                       "post-op (reduce the bundle for a small whole case)"
                                 : "the optimized run fuses nothing in this model (no convolution, inner product, "
                                   "matmul or pooling whose result only an elementwise node reads)");
  }
  // The argument a producer's helper call takes while it is lowered with post-ops (none otherwise).
  std::string post_ops_arg() {
    if (!fusing_) return "";
    need("postops");
    return ", po_" + identifier(c_.model.nodes[fusing_->producer].name);
  }
  // The fused producer's forward, where its last consumer runs (every binary operand is computed by
  // then), with the post-op list it is created with; its result is the last consumer's output.
  void fused_node(const Applied& f) {
    const ir::Node& p = c_.model.nodes[f.producer];
    const ir::Node& last = c_.model.nodes[f.consumers.back()];
    check_supported(c_.model, p);
    node_ = &p;
    std::string absorbed;
    for (size_t k : f.consumers)
      absorbed += (absorbed.empty() ? "'" : ", '") + c_.model.nodes[k].name + "' (" + c_.model.nodes[k].op + ")";
    lines_.push_back("  // node '" + p.name + "': " + p.op + " " + core::to_string(p.attrs) +
                     ", with the nodes it absorbs as post-ops: " + absorbed + "\n");
    fusing_ = &f;  // (no second node line from the lowering)
    std::string list = "  const PostOps po_" + identifier(p.name) + "{";
    for (size_t i = 0; i < f.ops.size(); ++i) {
      const lw::PostOp& o = f.ops[i];
      list += std::string(i ? ",\n      " : "") + "{" + alg(o.alg) + ", " + flt(o.alpha) + ", " + flt(o.beta) + ", " +
              (o.operand.empty() ? std::string("nullptr, {}") : "&" + ref(o.operand) + ", " + dims(o.operand_dims)) +
              "}";
    }
    lines_.push_back(list + "};\n");
    need("postops");
    // As FusedKernel: the producer's forward with prop forward_inference (an optimized session infers).
    lw::lower_forward(p, shapes(p.inputs), shapes(p.outputs), lw::Prop::forward_inference, *this);
    fusing_ = nullptr;
    lines_.push_back("  const Vec& " + var(last.outputs.at(0)) + " = " + var(p.outputs.at(0)) +
                     ";  // the fused primitive's result is '" + last.name + "''s output\n");
    flush();
  }
  // Moves what body_ received since `mark` into a block of its own (its names scoped), indented.
  void scope_since(size_t mark) {
    const std::string all = body_.str();
    std::string inner = all.substr(mark), out = all.substr(0, mark) + "  {\n";
    for (size_t at = 0; at < inner.size();) {
      const size_t nl = inner.find('\n', at);
      const std::string line = inner.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
      out += (line.empty() ? "" : "  ") + line + "\n";
      if (nl == std::string::npos) break;
      at = nl + 1;
    }
    body_.str("");
    body_ << out << "  }\n";
  }
  // The optimized-stage body: the model without post-ops (Quorum's pinned run: every node its own
  // primitive), then as the optimized run compiled it (post-ops); the graph outputs compared after each
  // (an optimized session returns only those). The exit status is the fused run's.
  void write_optimized(bool crash) {
    plan_optimized();
    std::vector<std::string> compared;
    std::map<std::string, std::string> arrays;
    if (!crash) {
      for (const auto& o : c_.model.outputs)
        if (c_.expected.count(o) && std::find(compared.begin(), compared.end(), o) == compared.end()) {
          compared.push_back(o);
          arrays[o] = want_array(o, c_.expected.at(o));
        }
      if (compared.empty()) throw ReproUnsupported("no expected value to compare");
    }
    auto results = [&](const std::string& run) {
      body_ << "\n";
      if (crash) body_ << "  std::printf(\"the model ran to the end " << run << "\\n\");\n";
      for (const auto& v : compared) check_line(v, var(v), arrays.at(v), c_.expected.at(v), c_.tol);
    };
    if (!crash) body_ << "  int bad_without = 0;\n";
    body_ << "  std::printf(\"without post-ops (each node its own primitive, as Quorum's pinned run):\\n\");\n";
    counter_ = "bad_without";
    size_t mark = body_.str().size();
    for (const auto& n : c_.model.nodes) forward_node(n);
    results("without post-ops");
    scope_since(mark);
    body_ << "  std::printf(\"with post-ops (as fused: the optimized run's primitives):\\n\");\n";
    counter_ = "bad";
    mark = body_.str().size();
    std::map<size_t, const Applied*> at_last;
    std::map<size_t, std::string> absorbed;  // node -> where it runs instead
    for (const Applied& f : fused_) {
      const std::string& producer = c_.model.nodes[f.producer].name;
      const std::string& last = c_.model.nodes[f.consumers.back()].name;
      at_last[f.consumers.back()] = &f;
      absorbed[f.producer] = "runs below, where '" + last + "' runs, with its consumers as post-ops";
      for (size_t k = 0; k + 1 < f.consumers.size(); ++k)
        absorbed[f.consumers[k]] = "a post-op of '" + producer + "''s primitive below";
    }
    for (size_t i = 0; i < c_.model.nodes.size(); ++i) {
      const ir::Node& n = c_.model.nodes[i];
      if (at_last.count(i))
        fused_node(*at_last.at(i));
      else if (absorbed.count(i))
        body_ << "  // node '" << n.name << "': " << n.op << ", " << absorbed.at(i) << "\n";
      else
        forward_node(n);
    }
    results("with post-ops");
    scope_since(mark);
    if (!crash)
      body_ << "  if (bad && !bad_without)\n"
               "    std::printf(\"the post-ops change the result: without them the same model is as expected\\n\");\n";
  }

  static std::string prop(lw::Prop p) { return std::string("prop_kind::") + lw::name(p); }
  lw::Prop prop_of_case() const { return c_.train ? lw::Prop::forward_training : lw::Prop::forward_inference; }

  // The C++ expression of a value: a temporary's expression (consumed), a constant's name, a variable.
  std::string ref(const std::string& v) {
    if (!v.empty() && v[0] == '%') {
      const std::string e = exprs_.at(v);
      exprs_.erase(v);
      return e;
    }
    const auto it = names_.find(v);
    if (it != names_.end()) return it->second;
    return !v.empty() && v[0] == '@' ? v.substr(1) : var(v);
  }
  // y = expr: a temporary keeps the expression; a value assigned twice (a chain of adds) is declared
  // without const.
  void define(const std::string& y, const std::string& expr) {
    if (!y.empty() && y[0] == '%') {
      exprs_[y] = expr;
      return;
    }
    if (mode_ == Mode::Backward) {  // a backward-local value (or a gradient), declared in order
      flush();
      body_ << "  const Vec " << local(y) << " = " << expr << ";\n";
      names_.emplace(y, local(y));
      return;
    }
    const auto it = declared_.find(y);
    if (it != declared_.end()) {
      std::string& decl = lines_[it->second];
      if (decl.rfind("  const Vec ", 0) == 0) decl = "  Vec " + decl.substr(12);
      lines_.push_back("  " + var(y) + " = " + expr + ";\n");
      return;
    }
    declared_[y] = lines_.size();
    lines_.push_back("  const Vec " + var(y) + " = " + expr + ";\n");
  }
  void flush() {
    for (const auto& l : lines_) body_ << l;
    lines_.clear();
    declared_.clear();
  }
  std::string node_id() const { return identifier(node_->name); }

  // Geometry declarations and arguments of the helper blocks, from the lowering's structs.
  std::string pool_decl(const lw::PoolGeo& g) {
    const std::string name = "pool_" + node_id();
    lines_.push_back("  const PoolGeo " + name + "{" + alg(g.alg) + ", " + dims(g.src) + ", " + dims(g.dst) + ", " +
                     dims(g.kernel) + ", " + dims(g.strides) + ", " + dims(g.pad_l) + ", " + dims(g.pad_r) + ", " +
                     dims(g.dil) + "};\n");
    return name;
  }
  std::string conv_decl(const lw::ConvGeo& g) {
    if (g.truncated)
      throw ReproUnsupported("conv_transpose2d with output_padding reaching the dilation (Quorum's backend computes "
                             "a truncated output there; not expressed by the reproducer)");
    const std::string wmd = g.w_strides.empty() ? "plain(" + dims(g.w_dims) + ")"
                                                : "memory::desc(" + dims(g.w_dims) +
                                                      ", memory::data_type::f32, Dims" + dims(g.w_strides) + ")";
    conv_kind_ = g.transposed ? "deconvolution" : "convolution";
    const std::string name = "conv_" + node_id();
    lines_.push_back("  const ConvGeo " + name + "{" + dims(g.src) + ", " + dims(g.out) + ", " + dims(g.strides) +
                     ", " + dims(g.dil) + ", " + dims(g.pad_l) + ", " + dims(g.pad_r) + ", " + wmd + ", " +
                     std::to_string(g.oc) + ", " + (g.bias ? "true" : "false") + "};\n");
    return name;
  }
  std::string dense_decl(const lw::DenseGeo& g) {
    const std::string name = "dense_" + node_id();
    lines_.push_back("  const DenseGeo " + name + "{" + std::to_string(g.rows) + ", " + std::to_string(g.in) + ", " +
                     std::to_string(g.units) + ", " + (g.bias ? "true" : "false") + "};\n");
    return name;
  }
  // rnn_fwd's inputs after the geometry: x, w_ih, w_hh, b_ih, b_hh, the peepholes (an empty Vec() in their place
  // where the layer has none but a given initial state follows), h0 and c0.
  std::string rnn_inputs(const lw::RnnGeo& g, const std::vector<std::string>& in) {
    std::string e;
    for (size_t i = 0; i < in.size(); ++i) {
      if (i == 5 && !g.peephole) e += ", Vec()";
      e += ", " + ref(in[i]);
    }
    return e;
  }
  std::string rnn_decl(const lw::RnnGeo& g) {
    // The GRU of ONNX's linear_before_reset 0 is another primitive (gru, not lbr_gru).
    const std::string activation = g.gru && !g.lbr ? "gru" : alg(g.activation);
    if (!rnn_op_.empty() && (rnn_op_ != g.op || rnn_activation_ != activation))
      throw ReproUnsupported("a model with two different recurrent operators (" + rnn_op_ + " " + rnn_activation_ +
                             ", " + g.op + " " + activation + ")");
    rnn_op_ = g.op;
    rnn_activation_ = activation;
    const std::string name = "rnn_" + node_id();
    lines_.push_back("  const Rnn " + name + "{" + std::to_string(g.n) + ", " + std::to_string(g.t) + ", " +
                     std::to_string(g.f) + ", " + std::to_string(g.h) + ", " + std::to_string(g.gates) + ", " +
                     std::to_string(g.bias_gates) + ", " + dims(g.perm) + ", " + (g.seq ? "true" : "false") + ", " +
                     (g.lbr ? "true" : "false") + ", " + (g.peephole ? "true" : "false") + ", " +
                     (g.reverse ? "true" : "false") + ", " + (g.h0 >= 0 ? "true" : "false") + ", " +
                     std::to_string(g.dirs) + "};\n");
    need("rnn");
    return name;
  }
  static std::string bn_args(const lw::BnGeo& g) {  // "dims, eps, batch_stats"
    return dims(g.src) + ", " + flt(g.eps) + ", " + (g.batch_stats ? "true" : "false");
  }
  static std::string ln_args(const lw::LnGeo& g) {  // "rows, k, eps"
    return std::to_string(g.rows) + ", " + std::to_string(g.k) + ", " + flt(g.eps);
  }
  static std::string lrn_args(const lw::LrnGeo& g) {
    return "LrnGeo{" + dims(g.src) + ", " + std::to_string(g.size) + ", " + flt(g.alpha) + ", " + flt(g.beta) + ", " +
           flt(g.bias) + "}";
  }
  static std::string resample_args(const lw::ResampleGeo& g) {
    return alg(g.alg) + ", " + dims(g.src) + ", " + dims(g.dst);
  }

  void forward_node(const ir::Node& n);
  void backward_node(const ir::Node& n);
  std::vector<Shape> shapes(const std::vector<std::string>& vs) const {
    std::vector<Shape> out;
    for (const auto& v : vs) out.push_back(shape(v));
    return out;
  }

  friend std::vector<std::string> onednn_lower::writer_sink_calls(const ir::Graph& g);

  const ReproCase& c_;
  const ir::Node* node_ = nullptr;
  std::set<std::string> used_;
  std::ostringstream data_, body_;
  std::vector<std::string> lines_;                // the current node's lines
  std::map<std::string, size_t> declared_;        // value -> its declaration in lines_
  std::map<std::string, std::string> exprs_;      // temporary -> expression
  std::map<std::string, std::string> names_;      // constant -> C++ name
  std::string conv_kind_ = "convolution", rnn_op_, rnn_activation_;
  int n_compared_ = 0;
  bool judge_ = true;  // false for crash findings: no comparison
  Mode mode_ = Mode::Forward;
  bool skip_ = false;                             // the steps a helper's text already holds
  std::map<std::string, std::string> step_names_;  // replayed chain: step input value -> its name
  std::string counter_ = "bad";                    // the count a comparison adds to
  std::vector<Applied> fused_;                     // the optimized stage's fusions
  const Applied* fusing_ = nullptr;                // the producer being lowered with its post-ops
};

void CallPrinter::forward_node(const ir::Node& n) {
  if (n.outputs.size() != 1) throw ReproUnsupported("operator " + n.op + " with several outputs is not mapped");
  if (!lw::forward_mapped(n.op))
    throw ReproUnsupported("operator '" + n.op + "' is not mapped by the oneDNN reproducer writer");
  check_supported(c_.model, n);
  lw::lower_forward(n, shapes(n.inputs), shapes(n.outputs), prop_of_case(), *this, lw::in_types(c_.model, n));
  flush();
}

void CallPrinter::backward_node(const ir::Node& n) {
  body_ << "  // node '" << n.name << "': " << n.op << " " << core::to_string(n.attrs)
        << ", forward (training) then backward\n";
  // name of the input -> C++ expression holding the library's gradient
  std::map<std::string, std::string> got;
  node_ = &n;
  // maximum/minimum's mask gradient is written for operands of the output's shape; the other
  // gradients composed from forward primitives are not.
  const bool mask = (n.op == "maximum" || n.op == "minimum") && shape(n.inputs[0]) == shape(n.outputs[0]) &&
                    shape(n.inputs[1]) == shape(n.outputs[0]) && c_.expected.count(n.inputs[0]) &&
                    c_.expected.count(n.inputs[1]);
  if (!mask && (lw::is_reshape(n.op) || lw::binary_alg(n.op) || lw::reduce_alg(n.op) || n.op == "softsign" ||
                n.op == "matmul" || n.op == "transpose" || n.op == "concat" || n.op == "sum"))
    throw ReproUnsupported("the gradient of '" + n.op +
                           "' is composed by Quorum's backend from several forward primitives (no oneDNN backward "
                           "primitive of its own); the backward reproducer covers eltwise, softmax, pooling, lrn, "
                           "convolution, dense and RNN nodes");
  if (!lw::backward_mapped(n))
    throw ReproUnsupported("operator '" + n.op + "' is not mapped by the oneDNN reproducer writer");
  if (lw::is_resize(n.op)) check_supported(c_.model, n);
  backward_steps(n, *this);
  for (const auto& i : n.inputs) {
    const auto it = names_.find(lw::grad(i));
    if (it != names_.end()) got.emplace(i, it->second);
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

ReproProgram CallPrinter::write(const std::string& dir) {
  const bool crash = c_.crash() || c_.stage == core::Stage::Compile;
  if (c_.stage == core::Stage::Loss)
    throw ReproUnsupported("loss-stage (LC) findings are judged on Quorum's training loss; the oneDNN reproducer "
                           "shows forward (FC) and per-node backward (BC) findings");
  if (c_.dtype != core::DType::F32) throw ReproUnsupported("only float32 cases are expressed (oneDNN 2.6 has no f64)");
  const ir::Node* blamed = c_.blamed();
  // The optimized stage: the model as Quorum's optimized run compiles it, consumers as post-ops.
  const bool optimized = c_.stage == core::Stage::Optimized;

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
  }
  if (optimized) {
    write_optimized(crash);
  } else if (!backward) {
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
  {
    const onednn::Variant v = onednn::parse_variant(spec_options(c_.backend));
    p.run = "g++ -std=c++17 -O1 repro.cpp -o repro -ldnnl && " +
            (v.threads > 0 ? "OMP_NUM_THREADS=" + std::to_string(v.threads) + " " : std::string()) + "./repro";
  }
  std::ostringstream s;
  s << repro_header(c_, "//", p.run + "  (Debian libdnnl-dev, oneDNN 2.6)");
  s << "//\n// "
    << (optimized ? "The model runs twice, through the primitives Quorum's oneDNN backend uses: without post-ops "
                    "(each node\n// its own primitive, Quorum's pinned run), then as Quorum's optimized run and "
                    "framework integrations\n// compile it: elementwise consumers attached to their producer's "
                    "primitive as dnnl::post_ops\n// (eltwise, binary with its operand as "
                    "DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1). The graph\n// outputs are compared "
                    "after each run; the exit status follows the run with post-ops.\n"
        : backward && judge_
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
    // A producer's helper takes a post-op list in an optimized-stage program (empty: no post-ops).
    t = replace_all(t, "@PO_PARAM@", optimized ? ", const PostOps& po = {}" : "");
    t = replace_all(t, "@PO_PASS@", optimized ? ", po" : "");
    t = replace_all(t, "@PO_ATTR@", optimized ? "post_ops_attr(po), " : "");
    t = replace_all(t, "@PO_BIND@", optimized ? "  bind_post_ops(po, args);\n" : "");
    if (!rnn_op_.empty()) {
      std::string fwd, bwd, fargs, bargs, note;
      if (rnn_op_ == "simple_rnn") {
        fwd = "vanilla_rnn_forward";
        bwd = "vanilla_rnn_backward";
        fargs = "prop, " + rnn_activation_ + ", dir, src, it, wl, wi, bias, dst, none";
        bargs = "prop_kind::backward, " + rnn_activation_ +
                ", dir, src, it, wl, wi, bias, dst, none, src, it, wl, wi, bias, dst, none";
      } else if (rnn_op_ == "lstm") {
        fwd = "lstm_forward";
        bwd = "lstm_backward";
        fargs = "prop, dir, src, it, it, wl, wi, pp, bias, dst, none, none";
        bargs = "prop_kind::backward, dir, src, it, it, wl, wi, pp, bias, dst, none, none, src, it, it, wl, "
                "wi, pp, bias, dst, none, none";
      } else if (rnn_activation_ == "gru") {
        fwd = "gru_forward";
        bwd = "gru_backward";
        fargs = "prop, dir, src, it, wl, wi, bias, dst, none";
        bargs = "prop_kind::backward, dir, src, it, wl, wi, bias, dst, none, src, it, wl, wi, bias, dst, none";
        note = " (GRU: n = tanh(W_in x + W_hn (r * h) + b), three blocks,\n"
               "// oneDNN gate order (u, r, o) = PyTorch (z, r, n))";
      } else {
        fwd = "lbr_gru_forward";
        bwd = "lbr_gru_backward";
        fargs = "prop, dir, src, it, wl, wi, bias, dst, none";
        bargs = "prop_kind::backward, dir, src, it, wl, wi, bias, dst, none, src, it, wl, wi, bias, dst, none";
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
  const onednn::Variant variant = onednn::parse_variant(spec_options(c_.backend));
  if (!variant.isa.empty())  // a threads option is in the run command (OMP_NUM_THREADS)
    s << "  // The finding's execution variant (" << c_.backend << "): oneDNN's ISA dispatch limited as the\n"
      << "  // worker's ONEDNN_MAX_CPU_ISA=" << onednn::isa_env_value(variant.isa)
      << " limits it, before any primitive.\n"
      << "  dnnl::set_max_cpu_isa(dnnl::cpu_isa::" << variant.isa << ");\n";
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
  CallPrinter g(c);
  return g.write(dir);
}

}  // namespace quorum::backends

namespace quorum::backends::onednn_lower {

std::vector<std::string> writer_sink_calls(const ir::Graph& g) {
  std::vector<std::string> all;
  for (const Prop p : {Prop::forward_training, Prop::forward_inference}) {
    ReproCase rc;
    rc.model = g;
    rc.train = p == Prop::forward_training;
    CallPrinter gen(rc);
    RecordingSink rec(gen);
    try {
      for (const auto& n : g.nodes) {
        if (!forward_mapped(n.op)) return {"refused: not lowered: " + n.op};
        const Support s = node_support(g, n);
        if (!s.ok) return {"refused: " + s.reason};
        lower_forward(n, gen.shapes(n.inputs), gen.shapes(n.outputs), p, rec, in_types(g, n));
        gen.flush();
      }
    } catch (const ReproUnsupported& e) {
      return {std::string("refused by the writer: ") + e.what()};
    }
    all.insert(all.end(), rec.calls().begin(), rec.calls().end());
  }
  // The backward steps of every node, last node first, as a backward finding's program prints them.
  ReproCase rc;
  rc.model = g;
  rc.train = true;
  CallPrinter gen(rc);
  gen.judge_ = false;
  for (size_t k = g.nodes.size(); k-- > 0;) {
    const ir::Node& n = g.nodes[k];
    if (!backward_mapped(n)) {
      all.push_back("backward refused: " + n.op);
      continue;
    }
    RecordingSink rec(gen);
    try {
      gen.node_ = &n;
      gen.backward_steps(n, rec);
    } catch (const ReproUnsupported& e) {
      return {std::string("refused by the writer: ") + e.what()};
    }
    all.insert(all.end(), rec.calls().begin(), rec.calls().end());
  }
  return all;
}

}  // namespace quorum::backends::onednn_lower
