// Quantized models (--dtype int8), made the way post-training quantization tools make them in
// ONNX's operator form: every convolution (conv2d), bias-free dense layer and matmul by a constant
// matrix of a float model becomes quantize_linear -> qlinear_conv2d / qlinear_matmul ->
// dequantize_linear, and every addition, product, average pooling, concatenation, leaky_relu and
// sigmoid of computed values becomes its quantized twin (ops/qlinear.cpp: ONNX Runtime's QLinearAdd,
// ...) between quantize_linear and dequantize_linear, the rest of the model staying float32. Scales
// and zero points are calibrated on the model's own inputs (the float64 reference's range of each
// value), with a share drawn at the extremes a tool does not choose but a library must take: a scale
// a fraction of the range's (saturation), zero points at the ends of their type, uint8 weights
// (asymmetric), the output scale far from the accumulator's size. Weights are quantized per tensor
// (int8 symmetric, or uint8 around a drawn zero point) or, half the time, per output channel (int8
// symmetric, each channel from its own largest value); a bias to int32 in units of x_scale * w_scale
// (per channel where the weights are).
#pragma once
#include "core/rng.h"
#include "ir/graph.h"
#include "ref/interpreter.h"

namespace quorum::gen {

// Quantizes `g` in place (validated again; on a failure `g` is unchanged); `inputs` are the calibration
// batch. Returns the number of nodes quantized (0: the model has none that quantize, and is unchanged).
int quantize_model(ir::Graph& g, const ref::ValueMap& inputs, core::Rng& rng);

}  // namespace quorum::gen
