// Window pools (max/avg, 1d/2d, ONNX pads, auto_pad, ceil_mode, count_include_pad) and global
// pools on oneDNN's pooling_v2 primitive. The geometry (explicit right padding for ceil_mode, the
// rescale of windows reaching into it) is the lowering's (lower.cpp: pool_geo), and forward and
// backward run through it; max pooling in training mode keeps the primitive's workspace (the argmax)
// for backward, and the rescale y = pool(x) * factor sends gy * factor into the pool's backward.
#include "backends/onednn/onednn_sink.h"

namespace quorum::backends::onednn {
namespace {

class PoolKernel : public LoweredKernel {
 public:
  PoolKernel(const ir::Graph& g, const ir::Node& n) : LoweredKernel(g, n) {
    pool_fwd_pd(lw::pool_geo(n.op, in_shape(0), out_shape(0), attrs()), prop_kind::forward_inference);
  }

};

}  // namespace

void register_pool(OpTable& t) {
  for (const char* name :
       {"max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "global_max_pool", "global_avg_pool"})
    t[name] = OpEntry{maker<PoolKernel>(), {}, {}};
}

}  // namespace quorum::backends::onednn
