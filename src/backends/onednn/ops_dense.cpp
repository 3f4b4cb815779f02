// Dense (inner product) and batched, broadcasting matmul.
// dense: oneDNN's inner product takes a rank-2 source, so [..., in] is viewed as [rows, in]; the
// PyTorch Linear weight [units, in] is oneDNN's "oi" layout as is.
// matmul: operands are padded to one rank with leading 1s (oneDNN broadcasts size-1 batch dims of
// either operand). Backward is two more matmuls over transposed (strided) views, then a reduction
// over the batch dims an operand was broadcast along: the lowering's steps (lower.cpp).
#include "backends/onednn/onednn_sink.h"

namespace quorum::backends::onednn {
namespace {

class DenseKernel : public LoweredKernel {
 public:
  DenseKernel(const ir::Graph& g, const ir::Node& n) : LoweredKernel(g, n) {
    dense_fwd_pd(lw::dense_geo(in_shape(0), attrs()), prop_kind::forward_inference);
  }

};

}  // namespace

void matmul_raw(const memory::desc& a, const float* ap, const memory::desc& b, const float* bp, const memory::desc& y,
                float* yp, const PostOps* po, const std::unordered_map<int, memory>& operands) {
  const auto& c = cached<dnnl::matmul::primitive_desc>(PostOps::keyed(Key() << a << b << y, po), [&] {
    dnnl::matmul::desc d(a, b, y);
    if (po) return dnnl::matmul::primitive_desc(d, po->attr(), cpu_engine());
    return dnnl::matmul::primitive_desc(d, cpu_engine());
  });
  std::unordered_map<int, memory> args = operands;
  args[DNNL_ARG_SRC] = mem(a, ap);
  args[DNNL_ARG_WEIGHTS] = mem(b, bp);
  args[DNNL_ARG_DST] = mem(y, yp);
  run(c.prim, args);
}

namespace {

class MatmulKernel : public LoweredKernel {
 public:
  MatmulKernel(const ir::Graph& g, const ir::Node& n) : LoweredKernel(g, n) {
    const size_t r = std::max(in_shape(0).size(), in_shape(1).size());
    const Dims a = dims_of(pad_rank(in_shape(0), r)), b = dims_of(pad_rank(in_shape(1), r)), y = dims_of(out_shape(0));
    cached<dnnl::matmul::primitive_desc>(Key() << plain_md(a) << plain_md(b) << plain_md(y), [&] {
      dnnl::matmul::desc d(plain_md(a), plain_md(b), plain_md(y));
      return dnnl::matmul::primitive_desc(d, cpu_engine());
    });
  }
};

}  // namespace

void register_dense(OpTable& t) {
  t["dense"] = OpEntry{maker<DenseKernel>(), {}, {}};
  t["matmul"] = OpEntry{maker<MatmulKernel>(), {}, {}};
}

}  // namespace quorum::backends::onednn
