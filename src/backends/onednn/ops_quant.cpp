// The int8 operators (ONNX's linear quantization) on oneDNN 2.6's int8 primitives, inference only:
// quantize_linear and dequantize_linear as one reorder with an output scale and zero points each,
// qlinear_conv2d as an int8 convolution (s8/u8 source, s8 weights, s32 bias, output scale
// x_scale * w_scale / y_scale, source and destination zero points), qlinear_matmul as an int8 matmul (the
// same, with a weights zero point, which 2.6's matmul takes and its convolution does not). The steps are the
// lowering's (lower.cpp: lower_quantized, quant_support); each kernel creates its primitive descriptor at
// compile, so oneDNN's refusal is a conversion error.
#include "backends/onednn/onednn_sink.h"

namespace quorum::backends::onednn {
namespace {

class QuantKernel : public LoweredKernel {
 public:
  QuantKernel(const ir::Graph& g, const ir::Node& n) : LoweredKernel(g, n) {
    const core::Attrs& a = attrs();
    if (n.op == "qlinear_conv2d") {
      qconv_pd(lw::conv_geo(n.op, in_shape(0), out_shape(0), a), lw::quant_attr(n, in_types_));
    } else if (n.op == "qlinear_matmul") {
      qmatmul_pd(lw::qmatmul_geo(in_shape(0), a), lw::quant_attr(n, in_types_));
    }
  }
};

Support no_training(const ir::Graph&, const ir::Node& n) {
  return Support::no("'" + n.op + "' runs inference only (oneDNN 2.6's int8 primitives have no backward)");
}

}  // namespace

void register_quant(OpTable& t) {
  for (const char* name : {"quantize_linear", "dequantize_linear", "qlinear_conv2d", "qlinear_matmul"})
    t[name] = OpEntry{maker<QuantKernel>(), {}, no_training};
}

}  // namespace quorum::backends::onednn
