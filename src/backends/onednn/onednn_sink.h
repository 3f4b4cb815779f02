// The oneDNN backend's sink: carries out the forward and backward steps oneDNN's lowering (lower.h) decides, with
// the backend's cached building blocks (onednn_common.h) on the run's buffers. Also the primitive
// descriptors of each family, keyed in the primitive cache by the lowering's geometry, which the
// backward steps hint their backward primitives with. The RNN steps (ExecSink::rnn, rnn_backward)
// are defined in ops_rnn.cpp with the RNN primitives.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "backends/onednn/lower.h"
#include "backends/onednn/onednn_common.h"

namespace quorum::backends::onednn {

namespace lw = onednn_lower;

algorithm to_dnnl(lw::Alg a);
prop_kind to_dnnl(lw::Prop p);

// The post-ops a fused producer's primitive is created with (the optimized run, onednn_fusion.cpp).
class PostOps {
 public:
  explicit PostOps(std::vector<lw::PostOp> ops) : ops_(std::move(ops)) {}
  const std::vector<lw::PostOp>& ops() const { return ops_; }
  dnnl::primitive_attr attr() const;
  // `key` for the primitive cache with the post-ops added: a fused primitive is never the pinned one of
  // its geometry. Without post-ops (null), `key` itself.
  static std::string keyed(const std::string& key, const PostOps* po);
  // Each binary post-op's second operand as an execute() argument, its buffer read with `value`.
  void bind(const std::function<const Buf&(const std::string&)>& value, std::unordered_map<int, memory>& args) const;

 private:
  std::vector<lw::PostOp> ops_;
};

// Forward primitive descriptors per family (cached; `key` is what the backward primitive is cached by).
std::string pool_key(const lw::PoolGeo& g);
// With `po` (the optimized run), the primitive takes those post-ops.
const Cached<dnnl::pooling_v2_forward::primitive_desc>& pool_fwd_pd(const lw::PoolGeo& g, prop_kind prop,
                                                                    const PostOps* po = nullptr);
std::string softmax_key(const lw::SoftmaxGeo& g);
const Cached<dnnl::softmax_v2_forward::primitive_desc>& softmax_fwd_pd(const lw::SoftmaxGeo& g, prop_kind prop);
std::string resample_key(const lw::ResampleGeo& g);
const Cached<dnnl::resampling_forward::primitive_desc>& resample_fwd_pd(const lw::ResampleGeo& g, prop_kind prop);
std::string lrn_key(const lw::LrnGeo& g);
const Cached<dnnl::lrn_forward::primitive_desc>& lrn_fwd_pd(const lw::LrnGeo& g, prop_kind prop);
dnnl::normalization_flags bn_flags(const lw::BnGeo& g);
std::string bn_key(const lw::BnGeo& g);
const Cached<dnnl::batch_normalization_forward::primitive_desc>& bn_fwd_pd(const lw::BnGeo& g, prop_kind prop);
std::string ln_key(const lw::LnGeo& g);
const Cached<dnnl::layer_normalization_forward::primitive_desc>& ln_fwd_pd(const lw::LnGeo& g, prop_kind prop);
std::string dense_key(const lw::DenseGeo& g);
const Cached<dnnl::inner_product_forward::primitive_desc>& dense_fwd_pd(const lw::DenseGeo& g, prop_kind prop,
                                                                       const PostOps* po = nullptr);
// The user's weight buffer as oneDNN sees it (plain, or ONNX's transposed weight with strides).
memory::desc conv_weight_md(const lw::ConvGeo& g);
// The computed window of the plain output buffer (all of it unless truncated).
memory::desc conv_user_dst_md(const lw::ConvGeo& g);
std::string conv_key(const lw::ConvGeo& g);
memory::desc any_md(const Dims& d);
// One matmul: dst = src @ weights, batch dims broadcast (ops_dense.cpp); with `po`, its post-ops, whose
// operands `operands` binds.
void matmul_raw(const memory::desc& a, const float* ap, const memory::desc& b, const float* bp, const memory::desc& y,
                float* yp, const PostOps* po = nullptr, const std::unordered_map<int, memory>& operands = {});
template <class Fwd>
const Cached<typename Fwd::primitive_desc>& conv_fwd_pd(const lw::ConvGeo& g, prop_kind prop,
                                                        const PostOps* po = nullptr) {
  const algorithm alg = g.transposed ? algorithm::deconvolution_direct : algorithm::convolution_direct;
  const std::string key = PostOps::keyed(Key() << conv_key(g) << static_cast<int>(prop), po);
  return cached<typename Fwd::primitive_desc>(key, [&] {
    const Dims wd = conv_weight_md(g).dims();
    auto d = g.prim_bias() ? typename Fwd::desc(prop, alg, any_md(g.src), any_md(wd), plain_md({g.oc}), any_md(g.dst),
                                                g.strides, g.dil, g.pad_l, g.pad_r)
                           : typename Fwd::desc(prop, alg, any_md(g.src), any_md(wd), any_md(g.dst), g.strides, g.dil,
                                                g.pad_l, g.pad_r);
    if (po) return typename Fwd::primitive_desc(d, po->attr(), cpu_engine());
    return typename Fwd::primitive_desc(d, cpu_engine());
  });
}

// The int8 primitives (cached by geometry, data types, scale and zero points).
memory::data_type to_dnnl(lw::DataType t);
const Cached<dnnl::reorder::primitive_desc>& qreorder_pd(const lw::QReorderGeo& g);
const Cached<dnnl::convolution_forward::primitive_desc>& qconv_pd(const lw::ConvGeo& g, const lw::QuantAttr& q);
const Cached<dnnl::matmul::primitive_desc>& qmatmul_pd(const lw::QMatmulGeo& g, const lw::QuantAttr& q);
// The quantized twins' primitives: binary (dims out, the second source bd), pooling (channels-last source and
// destination, where 2.6 has its jit int8 kernel; plain is its reference one), eltwise, concat.
const Cached<dnnl::binary::primitive_desc>& qbinary_pd(lw::Alg alg, const lw::QElemAttr& q, const Dims& out,
                                                       const Dims& bd);
const Cached<dnnl::pooling_v2_forward::primitive_desc>& qpool_pd(const lw::PoolGeo& g, const lw::QElemAttr& q);
const Cached<dnnl::eltwise_forward::primitive_desc>& qeltwise_pd(const lw::Eltwise& e, const lw::QElemAttr& q,
                                                                 const Dims& d);

// What a node's forward keeps for its backward.
struct Saved {
  std::map<std::string, Buf> values;  // values the node defined besides its outputs (chain steps, softsign's den.)
  memory workspace;                   // pooling / lrn (training)
  Buf mean, var;                      // batch_norm's batch statistics, layer_norm's statistics
  Buf rnn_src, rnn_dst, rnn_bias;     // an RNN's time-major source and result, its combined bias
};

// Runs one node's forward steps on `env` (node outputs go to env, temporaries and the node's other
// values stay in the sink and in `saved`), or, made with `backward`, its backward steps (reading
// env's gradients of its outputs and what the forward saved, adding to its inputs' gradients).
class ExecSink : public lw::StepSink {
 public:
  ExecSink(Env& env, const ir::Node& n, const std::vector<Shape>& in_shapes, const std::vector<Shape>& out_shapes,
           bool training, Saved& saved, bool backward = false);
  // The optimized run: the node's primitive takes these post-ops (a fused producer's; null: none).
  void fuse(const PostOps* po) { post_ops_ = po; }
  void alias(const std::string& y, const std::string& x) override;
  void constant(const std::string& v, const std::string& hint, const Shape& shape, const std::vector<float>& data,
                const std::string& comment) override;
  void eltwise(const lw::Eltwise& e, const Dims& d, const std::string& x, const std::string& y) override;
  void binary(lw::Alg alg, const Dims& out, const Dims& ad, const std::string& a, const Dims& bd, const std::string& b,
              const std::string& y) override;
  void sum(const Dims& d, const std::vector<std::string>& xs, const std::string& y) override;
  void concat(const Dims& out, int axis, const std::vector<Dims>& ds, const std::vector<std::string>& xs,
              const std::string& y) override;
  void transpose(const Dims& yd, const Dims& permuted_strides, const std::string& x, const std::string& y) override;
  void view(const Dims& yd, const Dims& strides, int64_t offset, const std::string& x, const std::string& y) override;
  void reduce(lw::Alg alg, const Dims& xd, const std::string& x, const Dims& keep, const std::string& y) override;
  // In ops_softmax_reduce.cpp, with the reductions.
  void prod_of_others(const Dims& xd, const std::string& x, const Dims& keep, const std::string& y) override;
  void softmax(lw::Prop p, const lw::SoftmaxGeo& g, const std::string& x, const std::string& y) override;
  void matmul(const Dims& ad, const std::string& a, const Dims& bd, const std::string& b, const Dims& yd,
              const std::string& y) override;
  void matmul_strided(const Dims& ad, const Dims& as, const std::string& a, const Dims& bd, const Dims& bs,
                      const std::string& b, const Dims& yd, const std::string& y) override;
  void pool(lw::Prop p, const lw::PoolGeo& g, const std::string& x, const std::string& y) override;
  void conv(lw::Prop p, const lw::ConvGeo& g, const std::string& x, const std::string& w, const std::string& b,
            const std::string& y) override;
  void dense(lw::Prop p, const lw::DenseGeo& g, const std::string& x, const std::string& w, const std::string& b,
             const std::string& y) override;
  void batch_norm(lw::Prop p, const lw::BnGeo& g, const std::vector<std::string>& in, const std::string& y) override;
  void layer_norm(const lw::LnGeo& g, const std::string& x, const std::string& scale, const std::string& shift,
                  const std::string& y) override;
  void lrn(lw::Prop p, const lw::LrnGeo& g, const std::string& x, const std::string& y) override;
  void resample(lw::Prop p, const lw::ResampleGeo& g, const std::string& x, const std::string& y) override;
  void rnn(lw::Prop p, const lw::RnnGeo& g, const std::vector<std::string>& in, const std::string& y) override;
  void qreorder(const lw::QReorderGeo& g, const std::string& x, const std::string& y) override;
  void qconv(const lw::ConvGeo& g, const lw::QuantAttr& q, const std::string& x, const std::string& w,
             const std::string& b, const std::string& y) override;
  void qmatmul(const lw::QMatmulGeo& g, const lw::QuantAttr& q, const std::string& x, const std::string& w,
               const std::string& y) override;
  void qbinary(lw::Alg alg, const lw::QElemAttr& q, const Dims& out, const Dims& ad, const std::string& a,
               const Dims& bd, const std::string& b, const std::string& y) override;
  void qpool(const lw::PoolGeo& g, const lw::QElemAttr& q, const std::string& x, const std::string& y) override;
  void qeltwise(const lw::Eltwise& e, const lw::QElemAttr& q, const Dims& d, const std::string& x,
                const std::string& y) override;
  void qconcat(lw::DataType t, const Dims& out, int axis, const std::vector<Dims>& ds,
               const std::vector<std::string>& xs, const std::string& y) override;
  void zeros(const Dims& d, const std::string& y) override;
  void broadcast(const Shape& from, const std::string& x, const Shape& to, const std::string& y) override;
  void eltwise_backward(const lw::Eltwise& e, const Dims& d, const std::string& src, const std::string& dy,
                        const std::string& dx) override;
  void softmax_backward(const lw::SoftmaxGeo& g, const std::string& x, const std::string& y, const std::string& dy,
                        const std::string& dx) override;
  void pool_backward(const lw::PoolGeo& g, const std::string& x, const std::string& dy, const std::string& dx) override;
  void conv_backward(const lw::ConvGeo& g, const std::string& x, const std::string& w, const std::string& dy,
                     const std::vector<std::string>& grads) override;
  void dense_backward(const lw::DenseGeo& g, const std::string& x, const std::string& w, const std::string& dy,
                      const std::vector<std::string>& grads) override;
  void batch_norm_backward(const lw::BnGeo& g, const std::vector<std::string>& in, const std::string& dy,
                           const std::vector<std::string>& grads) override;
  void layer_norm_backward(const lw::LnGeo& g, const std::vector<std::string>& in, const std::string& dy,
                           const std::vector<std::string>& grads) override;
  void lrn_backward(const lw::LrnGeo& g, const std::string& x, const std::string& dy, const std::string& dx) override;
  void resample_backward(const lw::ResampleGeo& g, const std::string& x, const std::string& dy,
                         const std::string& dx) override;
  // Both RNN steps are in ops_rnn.cpp, with the RNN primitives' descriptors.
  void rnn_backward(const lw::RnnGeo& g, const std::vector<std::string>& in, const std::string& dy,
                    const std::vector<std::string>& grads) override;

 private:
  const Buf& get(const std::string& v) const;
  // Stores a step's result: a node output with the node's shape for it, else kept by the sink.
  void put(const std::string& v, Buf b);
  void keep_workspace(lw::Prop p, const memory::desc& ws, std::unordered_map<int, memory>& args);
  // The binary post-ops' operands as arguments (none without post-ops).
  std::unordered_map<int, memory> post_op_operands() const;

  Env& env_;
  const ir::Node& node_;
  const std::vector<Shape>& in_shapes_;
  const std::vector<Shape>& out_shapes_;
  bool training_, backward_;
  Saved& saved_;
  std::map<std::string, Buf> temps_;
  const PostOps* post_ops_ = nullptr;
};

// Runs node n's forward through the lowering and the ExecSink (with `po`, its primitive's post-ops).
// `in_types`: the operands' types (the int8 steps need them).
void lowered_forward(Env& env, const ir::Node& n, const std::vector<Shape>& in_shapes,
                     const std::vector<Shape>& out_shapes, bool training, Saved& saved, const PostOps* po = nullptr,
                     const std::vector<core::DType>& in_types = {});
// Runs node n's backward through the lowering and the ExecSink, after lowered_forward(training).
void lowered_backward(Env& env, const ir::Node& n, const std::vector<Shape>& in_shapes,
                      const std::vector<Shape>& out_shapes, Saved& saved);

// The node kernel of every operator the lowering maps: forward and backward are the lowering's
// steps on the ExecSink, with what the backward needs kept between them. A family's subclass adds
// only what its constructor checks (building the primitive descriptor at compile, so that oneDNN's
// refusal is a conversion error, not a failure of the first run).
class LoweredKernel : public Kernel {
 public:
  using Kernel::Kernel;
  void forward(Env& env, bool training) override {
    lowered_forward(env, node_, in_shapes_, out_shapes_, training, saved_, nullptr, in_types_);
  }
  void backward(Env& env) override { lowered_backward(env, node_, in_shapes_, out_shapes_, saved_); }

 private:
  Saved saved_;
};

// The optimized run (onednn_fusion.cpp): the fusions the lowering plans (lw::plan_fusions), each cut to the
// longest chain oneDNN accepts, applied to the compiled model's kernels. A producer's kernel becomes its
// fused primitive's and runs where its last consumer ran (every operand is computed by then); the nodes it
// absorbed run nothing. Returns the entries naming each fusion, by node: "fused convolution+eltwise_relu".
std::map<std::string, std::vector<std::string>> fuse(const ir::Graph& g, std::vector<std::unique_ptr<Kernel>>& kernels);

}  // namespace quorum::backends::onednn
