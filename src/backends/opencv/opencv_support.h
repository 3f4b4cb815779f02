// Which catalogue nodes OpenCV DNN 4.6 can run once exported to ONNX, and why not. Kept apart
// from opencv_backend.cpp: it reads only the Quorum graph, never OpenCV headers.
#pragma once
#include <map>
#include <optional>

#include "backends/backend.h"
#include "backends/opencv/variant.h"
#include "ir/onnx_io.h"

// The opsets and forms OpenCV is given: variant.h (onnx_form).

namespace quorum::backends::opencv {

// A form the variant forces is not refused for being a form 4.6 cannot read (the ledger's cases).
// The answer depends on the forms the exporter chooses for the whole model: a dry run of it per call,
// unless a ModelForms of the same graph and variant is in scope on this thread.
Support node_support(const ir::Graph& g, const ir::Node& n, const Variant& v = {});

// The exporter's dry run of one model, kept while this object lives so that node_support judges each of
// the model's nodes against it: one dry run per model, not one per node.
class ModelForms {
 public:
  ModelForms(const ir::Graph& g, const Variant& v);
  ~ModelForms();
  ModelForms(const ModelForms&) = delete;
  ModelForms& operator=(const ModelForms&) = delete;
  bool of(const ir::Graph& g, const Variant& v) const { return graph_ == &g && variant_ == &v; }
  const ir::OnnxExported* forms() const { return forms_ ? &*forms_ : nullptr; }  // null: the exporter refuses

 private:
  const ir::Graph* graph_;
  const Variant* variant_;
  std::optional<ir::OnnxExported> forms_;  // none: the exporter refuses the model
  const ModelForms* outer_;
};

}  // namespace quorum::backends::opencv
