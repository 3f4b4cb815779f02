// Which catalogue nodes OpenCV DNN 4.6 can run once exported to ONNX, and why not. Kept apart
// from opencv_backend.cpp: it reads only the Quorum graph, never OpenCV headers.
#pragma once
#include "backends/backend.h"

namespace quorum::backends::opencv {

Support node_support(const ir::Graph& g, const ir::Node& n);

}  // namespace quorum::backends::opencv
