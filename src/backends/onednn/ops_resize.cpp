// resize_nearest / resize_bilinear on oneDNN's resampling primitive (forward and backward, both the
// lowering's steps).
// oneDNN has one coordinate rule per algorithm, with F = out/in:
//   linear:  source x = (o + 0.5) / F - 0.5, clamped to [0, in - 1]  (ONNX half_pixel)
//   nearest: source index = floor((o + 0.5) / F)          (ONNX tf_half_pixel_for_nn + floor, or
//                                                          half_pixel + round_prefer_ceil)
// Every other ONNX coordinate_transformation_mode / nearest_mode pair is supported exactly when, for
// the node's sizes, it selects the same source coordinates on both axes; the lowering's
// resize_support (lower.cpp, through node_support) checks that, for supports() and the reproducer
// writer alike.
#include "backends/onednn/onednn_sink.h"

namespace quorum::backends::onednn {
namespace {

class ResizeKernel : public LoweredKernel {
 public:
  ResizeKernel(const ir::Graph& g, const ir::Node& n) : LoweredKernel(g, n) {
    resample_fwd_pd(lw::resample_geo(n.op, in_shape(0), out_shape(0)), prop_kind::forward_inference);
  }

};

}  // namespace

void register_resize(OpTable& t) {
  t["resize_nearest"] = OpEntry{maker<ResizeKernel>(), {}, {}};
  t["resize_bilinear"] = OpEntry{maker<ResizeKernel>(), {}, {}};
}

}  // namespace quorum::backends::onednn
