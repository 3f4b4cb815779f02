// Batch normalization, layer normalization and LRN on their oneDNN primitives, with the library's
// backward kernels. The geometry and the forward and backward steps are the lowering's (lower.cpp).
//  - batch_norm training=0 uses use_global_stats with the mean/var parameters; the reference also
//    differentiates with respect to mean and var, which oneDNN does not: those two gradients are
//    derived from the library's diff_scale / diff_shift with eltwise and binary primitives
//    (dmean = -scale*rstd*dshift, dvar = -0.5*scale*rstd^2*dscale, the scale multiplied last so
//    that scale*rstd^2 cannot overflow where the gradient fits: lower.cpp). training=1 normalises with
//    batch statistics (biased variance, as in the reference) and mean/var get zero gradient.
//  - layer_norm normalises over axis..end: oneDNN normalises the last dim, so X is viewed as
//    [rows, prod(dims[axis:])] and scale/shift are flattened to match.
//  - lrn maps to lrn_across_channels, whose alpha is divided by the window size like ONNX's.
#include "backends/onednn/onednn_sink.h"

namespace quorum::backends::onednn {
namespace {

class BatchNormKernel : public LoweredKernel {
 public:
  BatchNormKernel(const ir::Graph& g, const ir::Node& n) : LoweredKernel(g, n) {
    bn_fwd_pd(lw::bn_geo(in_shape(0), attrs()), prop_kind::forward_inference);
  }

};

class LayerNormKernel : public LoweredKernel {
 public:
  LayerNormKernel(const ir::Graph& g, const ir::Node& n) : LoweredKernel(g, n) {
    ln_fwd_pd(lw::ln_geo(in_shape(0), attrs()), prop_kind::forward_training);
  }

};

class LrnKernel : public LoweredKernel {
 public:
  LrnKernel(const ir::Graph& g, const ir::Node& n) : LoweredKernel(g, n) {
    lrn_fwd_pd(lw::lrn_geo(in_shape(0), attrs()), prop_kind::forward_inference);
  }

};

}  // namespace

void register_norm(OpTable& t) {
  t["batch_norm"] = OpEntry{maker<BatchNormKernel>(), {}, {}};
  t["layer_norm"] = OpEntry{maker<LayerNormKernel>(), {}, {}};
  // ONNX LRN with an even size reaches one channel further after c than before it; oneDNN 2.6's
  // lrn_across_channels window is symmetric (measured: size 4 over [1, 7, 3, 3] is off by 0.39).
  t["lrn"] = OpEntry{maker<LrnKernel>(),
                     [](const ir::Graph&, const ir::Node& n) {
                       if (core::attr_i(n.attrs, "size") % 2 == 0)
                         return Support::no("oneDNN 2.6's lrn_across_channels window is symmetric around the "
                                            "channel; ONNX LRN with an even size (" +
                                            std::to_string(core::attr_i(n.attrs, "size")) + ") is not");
                       return Support::yes();
                     },
                     {}};
}

}  // namespace quorum::backends::onednn
