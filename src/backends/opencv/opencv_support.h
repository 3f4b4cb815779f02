// Which catalogue nodes OpenCV DNN 4.6 can run once exported to ONNX, and why not. Kept apart
// from opencv_backend.cpp: it reads only the Quorum graph, never OpenCV headers.
#pragma once
#include "backends/backend.h"
#include "backends/opencv/variant.h"
#include "ir/onnx_io.h"

// The opsets and forms OpenCV is given: variant.h (onnx_form).

namespace quorum::backends::opencv {

// A form the variant forces is not refused for being a form 4.6 cannot read (the ledger's cases).
Support node_support(const ir::Graph& g, const ir::Node& n, const Variant& v = {});

}  // namespace quorum::backends::opencv
