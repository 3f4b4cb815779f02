// Conformance tests of catalogue operators that the reference does not pass, with the reason. A key
// is a test ("folder/test_name") or a pattern with '*'. Only real semantic differences and forms the
// catalogue deliberately does not model belong here; anything else the reference fails is a bug.
#include "conformance/conformance.h"

namespace quorum::conformance {

const std::map<std::string, std::string>& reference_exceptions() {
  static const std::map<std::string, std::string> m = {
      {"node/test_averagepool_3d_default",
       "the catalogue pools over 1 or 2 spatial dimensions (avg_pool1d/2d); 3-D pooling is not modelled"},
      {"node/test_maxpool_3d_default",
       "the catalogue pools over 1 or 2 spatial dimensions (max_pool1d/2d); 3-D pooling is not modelled"},
      {"pytorch-converted/test_*Pool3d*",
       "the catalogue pools over 1 or 2 spatial dimensions; 3-D pooling is not modelled"},
      {"node/test_maxpool_with_argmax_*",
       "the catalogue's max pools return values only, not ONNX's second (argmax index) output"},
      {"node/test_batchnorm_*_training_mode",
       "ONNX training_mode=1 also returns updated running mean/variance outputs; the catalogue's "
       "batch_norm(training=1) returns only Y (it has no running statistics)"},
      {"node/test_convtranspose_1d", "the catalogue has conv_transpose2d only"},
      {"node/test_convtranspose_3d", "the catalogue has conv_transpose2d only"},
      {"node/test_convtranspose_autopad_same",
       "conv_transpose2d takes explicit pads; ONNX's auto_pad for ConvTranspose (output = input*stride) is not "
       "modelled"},
      {"node/test_convtranspose_kernel_shape",
       "ConvTranspose given output_shape: the catalogue takes pads and output_padding, not a target shape"},
      {"node/test_convtranspose_output_shape",
       "ConvTranspose given output_shape: the catalogue takes pads and output_padding, not a target shape"},
      {"node/test_convtranspose_with_kernel",
       "ConvTranspose given output_shape: the catalogue takes pads and output_padding, not a target shape"},
      {"node/test_*_batchwise",
       "RNN/GRU/LSTM layout=1 (batch-major): the catalogue's recurrent operators are time-major like PyTorch's "
       "default"},
      {"node/test_max_one_input", "Max of one input is the identity; the catalogue's maximum is binary"},
      {"node/test_min_one_input", "Min of one input is the identity; the catalogue's minimum is binary"},
      {"node/test_sum_one_input", "Sum of one input is the identity; the catalogue's sum takes 2..n inputs"},
      {"node/test_pow", "Pow with a tensor exponent: the catalogue's pow raises to one scalar exponent"},
      {"node/test_pow_*", "Pow with a tensor exponent: the catalogue's pow raises to one scalar exponent"},
      {"pytorch-operator/test_operator_pow",
       "Pow with a tensor exponent: the catalogue's pow raises to one scalar exponent"},
      {"node/test_reduce_sum_empty_axes_input_noop_*",
       "ReduceSum with empty axes and noop_with_empty_axes=1 is the identity; the catalogue's reductions always "
       "reduce"},
      {"node/test_reduce_sum_negative_axes_keepdims_random",
       "ONNX 1.12's data for this test gives empty axes with noop_with_empty_axes=1 (the identity, as in the noop "
       "tests); the catalogue's reductions always reduce"},
      {"node/test_reshape_allowzero_reordered",
       "allowzero=1 with a 0 in the shape makes an empty tensor; the catalogue has no empty tensors"},
      {"node/test_slice_start_out_of_bounds",
       "the slice is empty (start 1000 on size 10); the catalogue has no empty tensors"},
      {"node/test_resize_downsample_scales_*_align_corners",
       "align_corners with a given scale: ONNX's expected output divides by the fractional length in * scale - 1 "
       "(its reference implementation's output_width); the spec's formula names length_resized, the output "
       "tensor's length, which the catalogue and every library here (libtorch, OpenCV, Arm NN, XNNPACK, ONNX "
       "Runtime 1.30) use"},
      {"node/test_layer_normalization_*",
       "ONNX's LayerNormalization tests check three outputs (Y, Mean, InvStdDev); the catalogue's layer_norm returns Y "
       "only"},
      {"node/test_lstm_with_peepholes",
       "the test gives sequence_lens (per-sample lengths); the catalogue's recurrent operators run every sample "
       "over the whole sequence"},
      {"node/test_qlinearmatmul_3D",
       "both operands computed, of rank 3: the catalogue's qlinear_matmul takes a constant matrix [K, N]"},
      {"simple/test_sequence_model8", "a symbolic batch dimension; Quorum graphs have static shapes"},
  };
  return m;
}

}  // namespace quorum::conformance
