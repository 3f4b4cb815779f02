// Which catalogue nodes OpenCV DNN 4.6 can run once exported to ONNX, and why not. Kept apart
// from opencv_backend.cpp: it reads only the Quorum graph, never OpenCV headers.
#pragma once
#include "backends/backend.h"

namespace quorum::backends::opencv {

// The ONNX opset written for OpenCV's importer (the session and the reproducers): 13 to 16 import
// alike, 14 adds HardSwish as one node (13 writes a Clip with bound inputs, which 4.6 cannot read);
// 17 writes LayerNormalization, which 4.6 lacks.
constexpr int kOpset = 14;

Support node_support(const ir::Graph& g, const ir::Node& n);

}  // namespace quorum::backends::opencv
