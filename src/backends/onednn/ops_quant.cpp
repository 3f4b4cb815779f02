// The int8 operators (ONNX's linear quantization) on oneDNN 2.6's int8 primitives, inference only:
// quantize_linear and dequantize_linear as one reorder with an output scale and zero points each,
// qlinear_conv2d as an int8 convolution (s8/u8 source, s8 weights, s32 bias, output scale
// x_scale * w_scale / y_scale, source and destination zero points), qlinear_matmul as an int8 matmul (the
// same, with a weights zero point, which 2.6's matmul takes and its convolution does not). The steps are the
// lowering's (lower.cpp: lower_quantized, quant_support); each kernel creates its primitive descriptor at
// compile, so oneDNN's refusal is a conversion error. The quantized twins of ops/qlinear.cpp run on int8 binary,
// pooling, eltwise and concat primitives (lower.h: QElemAttr).
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
    } else if (lw::is_qlinear_twin(n.op)) {
      // The twin's steps once on zero operands: each primitive descriptor is created (and cached) here.
      Env env;
      for (size_t i = 0; i < n.inputs.size(); ++i) env.values[n.inputs[i]] = Buf(in_shape(i));
      Saved saved;
      lowered_forward(env, n, in_shapes_, out_shapes_, false, saved, nullptr, in_types_);
    }
  }
};

Support no_training(const ir::Graph&, const ir::Node& n) {
  return Support::no("'" + n.op + "' runs inference only (oneDNN 2.6's int8 primitives have no backward)");
}

}  // namespace

void register_quant(OpTable& t) {
  for (const char* name : {"quantize_linear", "dequantize_linear", "qlinear_conv2d", "qlinear_matmul", "qlinear_add",
                           "qlinear_mul", "qlinear_avg_pool2d", "qlinear_global_avg_pool", "qlinear_max_pool2d",
                           "qlinear_concat", "qlinear_leaky_relu", "qlinear_sigmoid"})
    t[name] = OpEntry{maker<QuantKernel>(), {}, no_training};
}

}  // namespace quorum::backends::onednn
