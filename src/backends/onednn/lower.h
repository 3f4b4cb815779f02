// oneDNN's lowering: the one mapping from Quorum nodes to oneDNN 2.6 primitive-level steps, written
// against a StepSink and free of oneDNN's headers. Every decision is made here — which primitive
// (algorithm, alpha/beta), prop kind, dims, pooling/convolution/RNN geometry (pads, strides,
// dilations, 1-D as written by ONNX), weight descriptors, the eltwise chains that compose operators
// oneDNN has no algorithm for, and what oneDNN cannot express (the resize coordinate check) — and
// the sink only carries a step out:
//   - the backend's sink (onednn_sink.cpp) creates (cached) primitives and executes them on buffers;
//   - the reproducer writer's sink (repro.cpp) prints the call of the matching helper block.
// The forward pass of every operator goes through lower_forward(); the backward of the operators
// backward_mapped() names goes through lower_backward() (which primitives, in which order, on which
// forward values: eltwise chains in reverse, the binary gradients with maximum/minimum's binary_ge/le
// masks, the pooling workspace, batch_norm's derived dmean/dvar, the RNN primitives' backward, ...).
// Not in this lowering yet: slice, pad and the loss operators (their kernels in ops_shape.cpp and
// ops_loss.cpp run forward and backward themselves; the reproducer writer refuses them).
// tests/backends/onednn_sinks_test.cpp checks both sinks receive the same calls for every catalogue
// operator's sampled cases, forward (both prop kinds) and backward.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"

namespace quorum::backends::onednn_lower {

using core::Shape;
using Dims = std::vector<int64_t>;

// oneDNN's algorithms Quorum uses, named as oneDNN names them (dnnl::algorithm::eltwise_relu, ...).
#define QUORUM_ONEDNN_ALGS(X)                                                                                       \
  X(eltwise_relu) X(eltwise_clip_v2) X(eltwise_elu) X(eltwise_linear) X(eltwise_gelu_tanh) X(eltwise_gelu_erf)      \
  X(eltwise_logistic) X(eltwise_tanh) X(eltwise_soft_relu) X(eltwise_hardswish) X(eltwise_exp) X(eltwise_log)       \
  X(eltwise_sqrt) X(eltwise_pow) X(eltwise_abs) X(eltwise_square) X(binary_add) X(binary_sub) X(binary_mul)         \
  X(binary_div) X(binary_max) X(binary_min) X(binary_ge) X(binary_le) X(binary_eq) X(binary_ne) X(reduction_sum)    \
  X(reduction_mean) X(reduction_max) X(reduction_min) X(reduction_mul) X(pooling_max) X(pooling_avg_include_padding) \
  X(pooling_avg_exclude_padding) X(softmax_accurate) X(softmax_log) X(resampling_linear) X(resampling_nearest)
enum class Alg {
#define QUORUM_ONEDNN_ALG_ENUM(a) a,
  QUORUM_ONEDNN_ALGS(QUORUM_ONEDNN_ALG_ENUM)
#undef QUORUM_ONEDNN_ALG_ENUM
};
const char* name(Alg a);

// The forward prop kind a primitive is created with.
enum class Prop { forward_inference, forward_training };
const char* name(Prop p);

// oneDNN has no rank-0 tensors: rank 0 becomes {1}.
Dims dims_of(const Shape& s);
Shape pad_rank(const Shape& s, size_t rank);  // prepends 1s

// ---- decisions shared by the forward lowering, the backward kernels and the writer's backward ----

// One eltwise primitive of a chain (forward_training descriptors, backward on the source).
struct Eltwise {
  Alg alg;
  float alpha = 0, beta = 0;
};
// The chain an operator maps to, in order; nullopt for an operator that is not an eltwise chain.
//   relu6 = clip_v2(0, 6); selu = linear(gamma) . elu(alpha); hard_sigmoid = clip_v2(0, 1) . linear(a, b)
//   (2.6 has no hardsigmoid algorithm); rsqrt = sqrt then pow(x, -1); reciprocal = pow(x, -1); neg = linear(-1).
std::optional<std::vector<Eltwise>> eltwise_chain(const std::string& op, const core::Attrs& a);
const std::vector<std::string>& eltwise_ops();  // the operators eltwise_chain maps
std::optional<Alg> binary_alg(const std::string& op);  // add, sub, mul, div, maximum, minimum
std::optional<Alg> reduce_alg(const std::string& op);  // reduce_sum, _mean, _max, _min, _prod
bool is_reshape(const std::string& op);                // reshape, flatten, squeeze, unsqueeze
bool is_pool(const std::string& op);
bool is_conv(const std::string& op);
bool is_rnn(const std::string& op);
bool is_resize(const std::string& op);

// x's shape with the reduced dims kept as 1.
Shape reduce_keep(const Shape& x, const core::Attrs& a);

// pooling_v2 (dilation 0 = dense window; `dil` counts from 0: ONNX MaxPool's dilations - 1). oneDNN
// takes an explicit right padding and checks out = (in + pl + pr - ext) / s + 1 (ext the dilated
// window's extent), so ONNX's ceil_mode becomes extra right padding.
// pooling_avg_include_padding divides every window by the full kernel size, also one reaching into
// that extra padding; ONNX counts only cells inside [-pad_begin, in + pad_end): such windows are
// rescaled by `factor` ([1, 1, out...], the product of the per-axis k / counted; empty when none is).
struct PoolGeo {
  Alg alg;
  Dims src, dst, kernel, strides, pad_l, pad_r, dil;
  Shape factor_shape;
  std::vector<float> factor;
};
PoolGeo pool_geo(const std::string& op, const Shape& x, const Shape& y, const core::Attrs& a);

// convolution / deconvolution (format_tag::any, reorders from the plain user buffers). dil counts
// from 0; right padding is explicit; ONNX output_padding comes off the deconvolution's right
// padding, and where oneDNN's limit pr > -stride stops that, the trailing rows no tap reaches are
// left out of the primitive (`dst` < `out`, `truncated`) and get only the bias.
// The user weight layout is [OC, C, k...] or grouped [G, OC/G, C/G, k...]; ONNX transposed weights
// [C, OC/G, k...] are described with strides (`w_strides`, empty for a plain weight).
struct ConvGeo {
  bool transposed = false;
  Dims src, dst, out;  // dst: the extent the primitive computes; out: the whole output
  Dims strides, dil, pad_l, pad_r;
  Dims w_dims, w_strides;
  int64_t oc = 0;
  bool bias = true;
  bool truncated = false;
  bool prim_bias() const { return bias && !truncated; }  // the bias is the primitive's argument
};
ConvGeo conv_geo(const std::string& op, const Shape& x, const Shape& y, const core::Attrs& a);

// inner_product over x viewed as [rows, in], weight [units, in] ("oi"), bias [units].
struct DenseGeo {
  int64_t rows = 0, in = 0, units = 0;
  bool bias = true;
};
DenseGeo dense_geo(const Shape& x, const core::Attrs& a);

// batch_normalization on plain NC..., use_scale | use_shift; training=0 adds use_global_stats.
struct BnGeo {
  Dims src;
  float eps = 0;
  bool batch_stats = false;
};
BnGeo bn_geo(const Shape& x, const core::Attrs& a);

// layer_normalization on X viewed as [rows, k] (k = prod(dims[axis:])), always forward_training.
struct LnGeo {
  int64_t rows = 1, k = 1;
  float eps = 0;
};
LnGeo ln_geo(const Shape& x, const core::Attrs& a);

// lrn_across_channels (its alpha is divided by the window size, as ONNX LRN's).
struct LrnGeo {
  Dims src;
  int64_t size = 1;
  float alpha = 0, beta = 0, bias = 1;
};
LrnGeo lrn_geo(const Shape& x, const core::Attrs& a);

// softmax_v2 (accurate, or log for log_softmax) along `axis`.
struct SoftmaxGeo {
  Alg alg;
  Dims dims;
  int axis = 0;
};
SoftmaxGeo softmax_geo(const std::string& op, const Shape& x, const core::Attrs& a);

// resampling (linear for resize_bilinear, nearest for resize_nearest) from plain src to plain dst.
struct ResampleGeo {
  Alg alg;
  Dims src, dst;
};
ResampleGeo resample_geo(const std::string& op, const Shape& x, const Shape& y);
// oneDNN has one coordinate rule per algorithm; a resize whose ONNX coordinate rule picks other
// source points for these sizes cannot be expressed (the reason names the first such position).
Support resize_support(const ir::Node& n, const Shape& x, const Shape& y);

// vanilla_rnn (tanh) / lstm / lbr_gru, PyTorch semantics (batch-first [N, T, F], zero initial
// state, one layer, left to right). oneDNN gate k holds PyTorch gate perm[k]; GRU has a fourth
// bias block (linear-before-reset).
struct RnnGeo {
  std::string op;
  int64_t n = 0, t = 0, f = 0, h = 0, gates = 1, bias_gates = 1;
  std::vector<int64_t> perm;
  bool seq = false, gru = false;
  bool lbr = false;      // GRU linear_before_reset 1: lbr_gru, b_hn in a fourth bias block; 0: gru
  bool peephole = false;  // LSTM peepholes: weights_peephole [1, 1, 3, H] (i, f, o), input 5
  bool reverse = false;  // ONNX direction reverse: unidirectional_right2left, final state at time 0
  // 2: ONNX's bidirectional, oneDNN's bidirectional_concat (weights [1, 2, in, G, H], dst [T, N, 2H]; the
  // forward direction's final state at time T-1, the reverse one's at 0).
  int64_t dirs = 1;
  // A given initial state (initial_state 1): the inputs holding h0 and LSTM's c0 [H] (-1: the zero state,
  // oneDNN's empty src_iter); src_iter (and src_iter_c) [1, 1, N, H] repeat it for every sample, and their
  // diffs summed over the samples are its gradient.
  int h0 = -1, c0 = -1;
  Alg activation = Alg::eltwise_tanh;  // vanilla RNN's: eltwise_chain of simple_rnn's activation (one step)
};
RnnGeo rnn_geo(const std::string& op, const Shape& x, const core::Attrs& a);

// A transpose as a reorder from x's strides permuted (perm empty: reversed axes).
Dims transpose_strides(const Shape& x, const core::Attrs& a);
// Its backward: the strides that read y (dense) in x's axis order.
Dims inverse_transpose_strides(const Shape& x, const core::Attrs& a);

// ---- int8 (quantize_linear, dequantize_linear, qlinear_conv2d, qlinear_matmul) ----
// Quantized values (int8, uint8; an int32 bias) live in the backend's float32 buffers as exact integers; a
// step's memory of data type `s8`/`u8`/`s32` is a reorder of that buffer (exact), its result one back.
enum class DataType { f32, s8, u8, s32 };
const char* name(DataType t);
// One reorder with an output scale and zero points (mask 0): oneDNN computes
// dst = saturate(nearbyint(scale * (src - src_zp) + dst_zp)) in float32. QuantizeLinear is src f32, scale
// 1 / y_scale (float32), dst_zp y_zero_point; DequantizeLinear is dst f32, scale x_scale, src_zp x_zero_point.
// Per axis (scales along axis): `scales` holds one output scale per index of dims[axis] (set_output_scales, mask
// 1 << axis); the zero points stay common (2.6 refuses per-dimension ones: "could not set zero points primitive
// attribute").
struct QReorderGeo {
  Dims dims;
  DataType src = DataType::f32, dst = DataType::f32;
  float scale = 1;
  int32_t src_zp = 0, dst_zp = 0;
  std::vector<float> scales = {};
  int axis = 0;
};
// An int8 convolution's or matmul's types and attributes: output scale x_scale * w_scale / y_scale in float32
// (set_output_scales, mask 0; oneDNN 2.6 adds the bias to the float32 accumulator before it), src, weights and
// dst zero points (set_zero_points, mask 0, given when non-zero). Weights are always s8: uint8 weights are
// shifted by -128 first (an eltwise_linear step, exact), their zero point with them. Per-channel weights
// (w_scales) give one output scale per output channel, x_scale * w_scales[c] / y_scale (set_output_scales, mask
// 1 << 1: the destination's dim 1, the convolution's channels and the matmul's columns); 2.6 has no per-channel
// weights zero point, so every channel's must shift to 0.
struct QuantAttr {
  DataType src = DataType::s8, dst = DataType::s8;
  float scale = 1;
  int32_t src_zp = 0, wei_zp = 0, dst_zp = 0;
  std::vector<float> scales;  // per output channel; empty: `scale` for all
};
// qlinear_matmul as oneDNN's matmul of x viewed as [rows, K] and the weight [K, N].
struct QMatmulGeo {
  int64_t rows = 0, k = 0, n = 0;
};
// The quantized twins (ops/qlinear.cpp) on oneDNN 2.6's int8 binary, pooling, eltwise and concat primitives, s8 or
// u8 sources and destination of the node's type `to`. These primitives take no output scales and no zero points
// (measured: 2.6 refuses set_output_scales and set_zero_points on them); the binary takes one scale per source
// (set_scales on DNNL_ARG_SRC_0 / SRC_1, mask 0) and all take post-ops, so the requantization is one eltwise_linear
// post-op r * alpha + beta before oneDNN's saturating nearbyint into the destination type, the sources' zero
// points folded into beta as a shift (a sum or an average carries it). One post-op: a second eltwise_linear takes
// the first one's parameters in 2.6 (onednn-postop-repeated-eltwise-params); constants that are no finite normal
// float32 (extreme scale ratios) are refused.
//   qlinear_add: scales x_scales; alpha 1 / y_scale, beta y_zero_point - (s_0 zp_0 + s_1 zp_1) / y_scale;
//   qlinear_mul: scales x_scales; alpha 1 / y_scale, beta y_zero_point (zero points 0 only);
//   qlinear_avg_pool2d / qlinear_global_avg_pool: the float pool's geometry; alpha x_scale / y_scale,
//     beta y_zero_point - alpha * x_zero_point;
//   qlinear_leaky_relu: eltwise_relu(alpha) and the pool's post-op (x_zero_point 0 only);
//   qlinear_concat: a plain int8 concat (every input quantized as the output);
//   qlinear_sigmoid: refused (2.6 has no int8 eltwise_logistic).
struct QElemAttr {
  DataType type = DataType::s8;
  std::vector<float> scales;  // the binary's per-source scales (empty: none)
  std::vector<std::pair<float, float>> linear;  // the eltwise_linear post-op (alpha, beta): one here
};
bool is_qlinear_twin(const std::string& op);

// Whether an int8 node maps, or why not (what oneDNN 2.6's int8 primitives cannot express exactly).
Support quant_support(const ir::Graph& g, const ir::Node& n);
bool is_quantized_op(const std::string& op);

// Whether the node maps as this lowering maps it, or why not (float32 operands; resize rules).
// Whether oneDNN has the operator at all is the backend's op table.
Support node_support(const ir::Graph& g, const ir::Node& n);

// ---- the forward steps ----

// Receives one node's forward as primitive-level steps on named values. A name starting with '%'
// is a temporary that the next step consumes once; other names are graph values, or constants the
// lowering made (constant()).
class StepSink {
 public:
  virtual ~StepSink() = default;
  virtual void node(const ir::Node&) {}
  // y is x with another shape (the same buffer).
  virtual void alias(const std::string& y, const std::string& x) = 0;
  // A constant buffer the lowering computed; `hint` names it in source code.
  virtual void constant(const std::string& v, const std::string& hint, const Shape& shape,
                        const std::vector<float>& data, const std::string& comment) = 0;
  virtual void eltwise(const Eltwise& e, const Dims& d, const std::string& x, const std::string& y) = 0;
  // y (dims out) = a (op) b, NumPy broadcasting; a and b dims padded to out's rank. oneDNN broadcasts
  // only b: an a that must broadcast is materialised first (zeros + a).
  virtual void binary(Alg alg, const Dims& out, const Dims& ad, const std::string& a, const Dims& bd,
                      const std::string& b, const std::string& y) = 0;
  virtual void sum(const Dims& d, const std::vector<std::string>& xs, const std::string& y) = 0;
  virtual void concat(const Dims& out, int axis, const std::vector<Dims>& ds, const std::vector<std::string>& xs,
                      const std::string& y) = 0;
  virtual void transpose(const Dims& yd, const Dims& permuted_strides, const std::string& x, const std::string& y) = 0;
  // y (dense, dims yd) = a reorder from the view of x at element `offset` with `strides`.
  virtual void view(const Dims& yd, const Dims& strides, int64_t offset, const std::string& x,
                    const std::string& y) = 0;
  virtual void reduce(Alg alg, const Dims& xd, const std::string& x, const Dims& keep, const std::string& y) = 0;
  // y[i] = the product of the other elements of x_i's slice (the reduced dims of `keep`): prefix
  // times suffix products in double, rounded once (Quorum's glue: oneDNN has no reduction backward).
  virtual void prod_of_others(const Dims& xd, const std::string& x, const Dims& keep, const std::string& y) = 0;
  virtual void softmax(Prop p, const SoftmaxGeo& g, const std::string& x, const std::string& y) = 0;
  virtual void matmul(const Dims& ad, const std::string& a, const Dims& bd, const std::string& b, const Dims& yd,
                      const std::string& y) = 0;
  // y = a @ b with operands described by dims and strides (empty strides: plain), e.g. a transposed
  // operand in place (the last two dims and strides swapped).
  virtual void matmul_strided(const Dims& ad, const Dims& as, const std::string& a, const Dims& bd, const Dims& bs,
                              const std::string& b, const Dims& yd, const std::string& y) = 0;
  virtual void pool(Prop p, const PoolGeo& g, const std::string& x, const std::string& y) = 0;
  // b empty: no bias argument.
  virtual void conv(Prop p, const ConvGeo& g, const std::string& x, const std::string& w, const std::string& b,
                    const std::string& y) = 0;
  virtual void dense(Prop p, const DenseGeo& g, const std::string& x, const std::string& w, const std::string& b,
                     const std::string& y) = 0;
  // x, scale, shift, mean, var.
  virtual void batch_norm(Prop p, const BnGeo& g, const std::vector<std::string>& in, const std::string& y) = 0;
  virtual void layer_norm(const LnGeo& g, const std::string& x, const std::string& scale, const std::string& shift,
                          const std::string& y) = 0;
  virtual void lrn(Prop p, const LrnGeo& g, const std::string& x, const std::string& y) = 0;
  virtual void resample(Prop p, const ResampleGeo& g, const std::string& x, const std::string& y) = 0;
  // x, w_ih, w_hh, b_ih, b_hh.
  virtual void rnn(Prop p, const RnnGeo& g, const std::vector<std::string>& in, const std::string& y) = 0;

  // ---- int8 steps (inference only)
  virtual void qreorder(const QReorderGeo& g, const std::string& x, const std::string& y) = 0;
  // b empty: no bias; the weight w is s8 (already shifted when it was uint8).
  virtual void qconv(const ConvGeo& g, const QuantAttr& q, const std::string& x, const std::string& w,
                     const std::string& b, const std::string& y) = 0;
  virtual void qmatmul(const QMatmulGeo& g, const QuantAttr& q, const std::string& x, const std::string& w,
                       const std::string& y) = 0;
  // y (dims out) = a (op) b as one int8 binary, b broadcasting; an a that must broadcast is materialised first
  // (its integers copied, exact).
  virtual void qbinary(Alg alg, const QElemAttr& q, const Dims& out, const Dims& ad, const std::string& a,
                       const Dims& bd, const std::string& b, const std::string& y) = 0;
  // int8 pooling (forward_inference; g has no rescale factor).
  virtual void qpool(const PoolGeo& g, const QElemAttr& q, const std::string& x, const std::string& y) = 0;
  // One int8 eltwise (forward_inference).
  virtual void qeltwise(const Eltwise& e, const QElemAttr& q, const Dims& d, const std::string& x,
                        const std::string& y) = 0;
  // An int8 concat (all of type t).
  virtual void qconcat(DataType t, const Dims& out, int axis, const std::vector<Dims>& ds,
                       const std::vector<std::string>& xs, const std::string& y) = 0;

  // ---- backward steps (after the node's forward_training; the sink keeps what that forward left:
  // pooling/lrn workspaces, normalisation statistics). grad(v) names the gradient of v: of an
  // output, the incoming one; of an input, the step's result is added to it.
  virtual void zeros(const Dims& d, const std::string& y) = 0;
  // y (shape `to`) = x viewed with shape `from`, broadcast NumPy style.
  virtual void broadcast(const Shape& from, const std::string& x, const Shape& to, const std::string& y) = 0;
  // eltwise_backward on the source `src` (not use_dst), hinted by the forward_training descriptor.
  virtual void eltwise_backward(const Eltwise& e, const Dims& d, const std::string& src, const std::string& dy,
                                const std::string& dx) = 0;
  // x: the forward's source, y its result.
  virtual void softmax_backward(const SoftmaxGeo& g, const std::string& x, const std::string& y, const std::string& dy,
                                const std::string& dx) = 0;
  virtual void pool_backward(const PoolGeo& g, const std::string& x, const std::string& dy, const std::string& dx) = 0;
  // grads: dx, dw, db (db empty: the primitive has no bias).
  virtual void conv_backward(const ConvGeo& g, const std::string& x, const std::string& w, const std::string& dy,
                             const std::vector<std::string>& grads) = 0;
  virtual void dense_backward(const DenseGeo& g, const std::string& x, const std::string& w, const std::string& dy,
                              const std::vector<std::string>& grads) = 0;
  // in: x, scale, shift, mean, var (mean/var the forward's batch statistics when g.batch_stats);
  // grads: dx, dscale, dshift.
  virtual void batch_norm_backward(const BnGeo& g, const std::vector<std::string>& in, const std::string& dy,
                                   const std::vector<std::string>& grads) = 0;
  // in: x, scale, shift (statistics: the forward's); grads: dx, dscale, dshift.
  virtual void layer_norm_backward(const LnGeo& g, const std::vector<std::string>& in, const std::string& dy,
                                   const std::vector<std::string>& grads) = 0;
  virtual void lrn_backward(const LrnGeo& g, const std::string& x, const std::string& dy, const std::string& dx) = 0;
  virtual void resample_backward(const ResampleGeo& g, const std::string& x, const std::string& dy,
                                 const std::string& dx) = 0;
  // The RNN backward primitive (hinted by the forward_training one, on the forward's time-major
  // source, result, bias and workspace). in: x, w_ih, w_hh, b_ih, b_hh; grads: theirs, in that order.
  virtual void rnn_backward(const RnnGeo& g, const std::vector<std::string>& in, const std::string& dy,
                            const std::vector<std::string>& grads) = 0;
};

// The name of v's gradient in the backward steps.
inline std::string grad(const std::string& v) { return "d:" + v; }

// A sink that forwards to another and records each step as one line (every parameter printed).
class RecordingSink : public StepSink {
 public:
  explicit RecordingSink(StepSink& inner) : inner_(inner) {}
  const std::vector<std::string>& calls() const { return calls_; }
  void node(const ir::Node& n) override;
  void alias(const std::string& y, const std::string& x) override;
  void constant(const std::string& v, const std::string& hint, const Shape& shape, const std::vector<float>& data,
                const std::string& comment) override;
  void eltwise(const Eltwise& e, const Dims& d, const std::string& x, const std::string& y) override;
  void binary(Alg alg, const Dims& out, const Dims& ad, const std::string& a, const Dims& bd, const std::string& b,
              const std::string& y) override;
  void sum(const Dims& d, const std::vector<std::string>& xs, const std::string& y) override;
  void concat(const Dims& out, int axis, const std::vector<Dims>& ds, const std::vector<std::string>& xs,
              const std::string& y) override;
  void transpose(const Dims& yd, const Dims& permuted_strides, const std::string& x, const std::string& y) override;
  void view(const Dims& yd, const Dims& strides, int64_t offset, const std::string& x, const std::string& y) override;
  void reduce(Alg alg, const Dims& xd, const std::string& x, const Dims& keep, const std::string& y) override;
  void prod_of_others(const Dims& xd, const std::string& x, const Dims& keep, const std::string& y) override;
  void softmax(Prop p, const SoftmaxGeo& g, const std::string& x, const std::string& y) override;
  void matmul(const Dims& ad, const std::string& a, const Dims& bd, const std::string& b, const Dims& yd,
              const std::string& y) override;
  void matmul_strided(const Dims& ad, const Dims& as, const std::string& a, const Dims& bd, const Dims& bs,
                      const std::string& b, const Dims& yd, const std::string& y) override;
  void pool(Prop p, const PoolGeo& g, const std::string& x, const std::string& y) override;
  void conv(Prop p, const ConvGeo& g, const std::string& x, const std::string& w, const std::string& b,
            const std::string& y) override;
  void dense(Prop p, const DenseGeo& g, const std::string& x, const std::string& w, const std::string& b,
             const std::string& y) override;
  void batch_norm(Prop p, const BnGeo& g, const std::vector<std::string>& in, const std::string& y) override;
  void layer_norm(const LnGeo& g, const std::string& x, const std::string& scale, const std::string& shift,
                  const std::string& y) override;
  void lrn(Prop p, const LrnGeo& g, const std::string& x, const std::string& y) override;
  void resample(Prop p, const ResampleGeo& g, const std::string& x, const std::string& y) override;
  void rnn(Prop p, const RnnGeo& g, const std::vector<std::string>& in, const std::string& y) override;
  void qreorder(const QReorderGeo& g, const std::string& x, const std::string& y) override;
  void qconv(const ConvGeo& g, const QuantAttr& q, const std::string& x, const std::string& w, const std::string& b,
             const std::string& y) override;
  void qmatmul(const QMatmulGeo& g, const QuantAttr& q, const std::string& x, const std::string& w,
               const std::string& y) override;
  void qbinary(Alg alg, const QElemAttr& q, const Dims& out, const Dims& ad, const std::string& a, const Dims& bd,
               const std::string& b, const std::string& y) override;
  void qpool(const PoolGeo& g, const QElemAttr& q, const std::string& x, const std::string& y) override;
  void qeltwise(const Eltwise& e, const QElemAttr& q, const Dims& d, const std::string& x,
                const std::string& y) override;
  void qconcat(DataType t, const Dims& out, int axis, const std::vector<Dims>& ds, const std::vector<std::string>& xs,
               const std::string& y) override;
  void zeros(const Dims& d, const std::string& y) override;
  void broadcast(const Shape& from, const std::string& x, const Shape& to, const std::string& y) override;
  void eltwise_backward(const Eltwise& e, const Dims& d, const std::string& src, const std::string& dy,
                        const std::string& dx) override;
  void softmax_backward(const SoftmaxGeo& g, const std::string& x, const std::string& y, const std::string& dy,
                        const std::string& dx) override;
  void pool_backward(const PoolGeo& g, const std::string& x, const std::string& dy, const std::string& dx) override;
  void conv_backward(const ConvGeo& g, const std::string& x, const std::string& w, const std::string& dy,
                     const std::vector<std::string>& grads) override;
  void dense_backward(const DenseGeo& g, const std::string& x, const std::string& w, const std::string& dy,
                      const std::vector<std::string>& grads) override;
  void batch_norm_backward(const BnGeo& g, const std::vector<std::string>& in, const std::string& dy,
                           const std::vector<std::string>& grads) override;
  void layer_norm_backward(const LnGeo& g, const std::vector<std::string>& in, const std::string& dy,
                           const std::vector<std::string>& grads) override;
  void lrn_backward(const LrnGeo& g, const std::string& x, const std::string& dy, const std::string& dx) override;
  void resample_backward(const ResampleGeo& g, const std::string& x, const std::string& dy,
                         const std::string& dx) override;
  void rnn_backward(const RnnGeo& g, const std::vector<std::string>& in, const std::string& dy,
                    const std::vector<std::string>& grads) override;

 private:
  StepSink& inner_;
  std::vector<std::string> calls_;
};

// Lowers node n's forward (operand shapes `in`, result shapes `out`) into `sink`. Throws
// ConversionError for an operator it does not map.
// `in_types`: the operands' data types, which the int8 operators need (their steps' data types).
void lower_forward(const ir::Node& n, const std::vector<Shape>& in, const std::vector<Shape>& out, Prop prop,
                   StepSink& sink, const std::vector<core::DType>& in_types = {});
std::vector<core::DType> in_types(const ir::Graph& g, const ir::Node& n);
// An int8 node's attributes as lower_forward gives them to qconv / qmatmul, and qlinear_matmul's geometry.
QuantAttr quant_attr(const ir::Node& n, const std::vector<core::DType>& in_types);
QMatmulGeo qmatmul_geo(const Shape& x, const core::Attrs& a);
bool forward_mapped(const std::string& op);  // lower_forward maps it

// Lowers node n's backward into `sink`: reads grad(output), adds to grad(input) for every input the
// reference differentiates. Local values are named '@...' (several uses) or '%...' (one use).
// Throws ConversionError for an operator whose backward it does not map (backward_mapped).
void lower_backward(const ir::Node& n, const std::vector<Shape>& in, const std::vector<Shape>& out, StepSink& sink);
bool backward_mapped(const ir::Node& n);

// ---- the optimized run (lower_fusion.cpp) ----

// One post-op of a fused producer's primitive, as a framework integration attaches it
// (dnnl::post_ops): an eltwise step (alg, alpha, beta), or with `operand` a binary step whose second
// operand is that value, described with `operand_dims` in the primitive's dst dims (size 1: broadcast).
struct PostOp {
  Alg alg;
  float alpha = 0, beta = 0;
  std::string operand;  // empty: an eltwise post-op
  Dims operand_dims;
};
// A producer primitive's node and the chain of nodes it absorbs as post-ops, in order: each consumer
// reads the previous node's output, its only consumer, and that output is no graph output. The
// consumers' kernels run nothing; the producer's primitive writes the last consumer's output.
struct Fusion {
  size_t producer = 0;                       // node index
  std::vector<size_t> consumers;             // node indices, in chain order
  std::vector<std::vector<PostOp>> steps;    // per consumer: its post-ops (an eltwise chain has several)
  // The post-ops of the first `n` consumers.
  std::vector<PostOp> post_ops(size_t n) const;
};
// The fusions of the optimized run: producers are convolution (conv1d/2d/3d), inner product (dense),
// matmul and pooling without a rescale (one primitive each); consumers are the operators eltwise_chain
// maps (their chains, step for step, as the pinned run's eltwise primitives) and add, sub, mul, div,
// maximum, minimum whose other operand broadcasts into the producer's result. The library may still
// refuse a chain: the backend then keeps the longest prefix it accepts.
std::vector<Fusion> plan_fusions(const ir::Graph& g);

// For the sink-agreement test: the calls each sink receives for the forward of `g` (with
// prop_kind training and inference), then for its backward ("backward refused: <reason>" where
// lower_backward throws), or "refused: <reason>". The library's sink is defined in
// onednn_sink.cpp (it runs real primitives on zero buffers), the writer's in repro.cpp.
std::vector<std::string> library_sink_calls(const ir::Graph& g);
std::vector<std::string> writer_sink_calls(const ir::Graph& g);

}  // namespace quorum::backends::onednn_lower
