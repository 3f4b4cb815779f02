// Convolutions (conv1d/2d/3d) and transposed convolution (conv_transpose2d) on oneDNN's
// convolution and deconvolution primitives, forward, backward-data and backward-weights.
// Quirks handled here: oneDNN dilation counts from 0; right padding is explicit (so ONNX asymmetric
// and SAME_* pads map directly); ONNX output_padding becomes a smaller (possibly negative) right
// padding of the deconvolution, and where oneDNN's limit pr > -stride stops that, the trailing rows
// no tap reaches are left out of the primitive and get only the bias; ONNX's transposed weight
// [C, OC/g, k...] is described with strides.
// The primitives get format_tag::any so oneDNN picks its optimised (jit) layouts; reorders
// convert from and to the plain user buffers. Forward and backward (data, weights, the bias of a
// truncated output) are the lowering's steps, carried out by the sink (onednn_sink.cpp).
#include "backends/onednn/onednn_sink.h"

namespace quorum::backends::onednn {
namespace {

template <class Fwd>
class ConvKernel : public LoweredKernel {
 public:
  ConvKernel(const ir::Graph& g, const ir::Node& n) : LoweredKernel(g, n) {
    // Builds the descriptor now: a refusal is a conversion error.
    conv_fwd_pd<Fwd>(lw::conv_geo(n.op, in_shape(0), out_shape(0), attrs()), prop_kind::forward_inference);
  }

};

}  // namespace

void register_conv(OpTable& t) {
  for (const char* name : {"conv1d", "conv2d", "conv3d"})
    t[name] = OpEntry{maker<ConvKernel<dnnl::convolution_forward>>(), {}, {}};
  t["conv_transpose2d"] = OpEntry{maker<ConvKernel<dnnl::deconvolution_forward>>(), {}, {}};
}

}  // namespace quorum::backends::onednn
