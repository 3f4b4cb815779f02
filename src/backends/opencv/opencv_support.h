// Which catalogue nodes OpenCV DNN 4.6 can run once exported to ONNX, and why not. Kept apart
// from opencv_backend.cpp: it reads only the Quorum graph, never OpenCV headers.
#pragma once
#include "backends/backend.h"
#include "ir/onnx_io.h"

namespace quorum::backends::opencv {

// The ONNX written for OpenCV's importer (the session and the reproducers): every opset from 11
// (the exporter's lowest) to 17, each model at the opset and in the exchange form its form seed
// chooses (ir::seeded_form). 4.6 reads the opset-11/12 forms that take axes as attributes
// (ReduceSum, Squeeze), not the opset-13 ones; HardSwish is one node from 14; 17 writes
// LayerNormalization, which 4.6 lacks.
constexpr int kMinOpset = 11;
constexpr int kMaxOpset = 17;
ir::OnnxForm onnx_form(const ir::Graph& g);

Support node_support(const ir::Graph& g, const ir::Node& n);

}  // namespace quorum::backends::opencv
