// The OpenCV backend's execution variants (backend options, docs/backends.md), shared by the
// backend, its support rules and its reproducer writer: `opencv:threads=N` runs with N threads,
// `opencv:opset=N` writes every model at opset N (11 to 17) instead of its seeded opset, and
// `opencv:form=WHAT=FORM` writes that exchange form wherever a node offers it
// (`form=gemm=gemm_pretransposed`), even one the seeded form avoids because 4.6 cannot read it:
// how the known-issue ledger's entries for those importer bugs run their cases; `opencv:plain`
// writes the plain form (form seed 0, every node's first form: a ledger case found in that form,
// such as a fusion that needs one operand order). No OpenCV header here.
#pragma once
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/error.h"
#include "ir/onnx_io.h"

namespace quorum::backends::opencv {

// The ONNX written for OpenCV's importer: every opset from 11 (the exporter's lowest) to 17, each
// model at the opset and in the exchange form its form seed chooses (ir::seeded_form). 4.6 reads
// the opset-11/12 forms that take axes as attributes (ReduceSum, Squeeze), not the opset-13 ones;
// HardSwish is one node from 14; 17 writes LayerNormalization, which 4.6 lacks.
constexpr int kMinOpset = 11;
constexpr int kMaxOpset = 17;

struct Variant {
  int threads = 0;                 // 0: the compile options' count
  int opset = 0;                   // 0: the model's seeded opset
  bool plain = false;              // form seed 0
  std::vector<std::string> forms;  // "what=form", forced (ir::OnnxForm::force)
};

inline Variant parse_variant(const std::vector<std::string>& args) {
  Variant v;
  for (const auto& a : args) {
    if (a.rfind("threads=", 0) == 0) {
      v.threads = count_option("opencv", a);
    } else if (a.rfind("opset=", 0) == 0) {
      v.opset = count_option("opencv", a);
      if (v.opset < kMinOpset || v.opset > kMaxOpset)
        throw core::UserError("backend 'opencv': opset= takes " + std::to_string(kMinOpset) + " to " +
                              std::to_string(kMaxOpset) + ", got '" + a + "'");
    } else if (a == "plain") {
      v.plain = true;
    } else if (a.rfind("form=", 0) == 0) {
      v.forms.push_back(form_option("opencv", a));
    } else {
      throw core::UserError("backend 'opencv': unknown option '" + a + "' (threads=N, opset=N, plain, form=WHAT=FORM)");
    }
  }
  return v;
}

// The ONNX written for OpenCV's importer (the session, supports() and the reproducer writer, which
// is built without OpenCV, hence inline here): the model's seeded form at an opset from 11 to 17,
// never one of the forms 4.6 cannot read (opencv_support.cpp form_support, ledger entries
// opencv-conv-kernel-shape-required (QLinearConv too), opencv-gemm-const-b-transb0 (transA too) and
// opencv-gemm-alpha-beta-ignored, the softmax decomposition's broadcast, Pad's negative pads, MatMul's 1-D
// operands, a GRU without initial_h, a one-direction recurrent layer's Squeeze of Y or of an LSTM's Y_h (from
// opset 13 its axes are an input: the Reshape form instead), a GRU's Y_h by Reshape (4.6 gives no Y_h),
// QLinearLeakyRelu without alpha, QLinearAveragePool without ceil_mode, the QDQ form of a convolution or
// matmul: ledger entry opencv-qdq-constant-weight-dequantize; their integer form: no ConvInteger or MatMulInteger
// layer), except where the variant forces it; the variant's opset replaces the seeded one, and `plain` the
// seeded form.
inline ir::OnnxForm onnx_form(const ir::Graph& g, const Variant& v = {}) {
  ir::OnnxForm f =
      ir::seeded_form(g, kMinOpset, kMaxOpset,
                      {"conv1d attrs=minimal", "conv2d attrs=minimal", "conv3d attrs=minimal",
                       "conv_transpose2d attrs=minimal", "qlinear_conv2d attrs=minimal", "gemm=gemm_pretransposed",
                       "gemm=gemm_scaled", "gemm=gemm_transA", "softmax=decomposed", "slice=crop", "matmul=a_vector",
                       "matmul=b_vector", "gru rnn_inputs=given", "rnn_y_axis=squeeze", "lstm rnn_y_h_axis=squeeze",
                       "gru rnn_y_h_axis=reshape",
                       "qlinear_leaky_relu defaults=omitted",
                       "qlinear_avg_pool2d attrs=minimal", "qlinear_conv2d qlinear=qdq", "qlinear_matmul qlinear=qdq",
                       "qlinear_conv2d qlinear=integer", "qlinear_matmul qlinear=integer"});
  if (v.opset) f.opset = v.opset;
  if (v.plain) f.seed = 0;
  f.force = v.forms;
  return f;
}

}  // namespace quorum::backends::opencv
