// The ArmNN backend's sink: adds the layers ArmNN's lowering (lower.h) decides to one
// armnn::INetwork, with ArmNN's own descriptors and the TensorInfos the lowering computed (ArmNN's
// Optimize validates every one against its own inference). Only files in this folder that are not
// lower*.cpp include ArmNN headers.
#pragma once
#include <armnn/ArmNN.hpp>

#include <deque>
#include <vector>

#include "backends/armnn/lower.h"

namespace quorum::backends::armnn_backend {

using armnn_lower::Shape;

armnn::TensorInfo tensor_info(const Shape& s, const armnn_lower::Quant& q = {});

class ArmnnSink : public armnn_lower::LayerSink {
 public:
  explicit ArmnnSink(armnn::INetwork& net) : net_(net) {}
  int input(size_t index, const std::string& name, const Shape& shape, const armnn_lower::Quant& q) override;
  int layer(const armnn_lower::Layer& layer, const std::vector<armnn_lower::Value>& inputs, const Shape& out,
            const armnn_lower::Quant& q, const std::string& name) override;
  void output(size_t index, const std::string& name, const armnn_lower::Value& v) override;
  void node(const ir::Node& n) override { node_ = &n; }

  // The node whose layers are being added (for an error), or null before the first.
  const ir::Node* current() const { return node_; }

 private:
  armnn::IOutputSlot& slot(const armnn_lower::Value& v) const { return *slots_.at(static_cast<size_t>(v.id)); }
  int finish(armnn::IConnectableLayer* layer, const std::vector<armnn_lower::Value>& inputs, const Shape& out,
             const armnn_lower::Quant& q);

  armnn::INetwork& net_;
  std::vector<armnn::IOutputSlot*> slots_;  // by handle
  const ir::Node* node_ = nullptr;
  std::deque<std::vector<int32_t>> buffers_;  // quantized constants' bytes, alive while the network is built
};

}  // namespace quorum::backends::armnn_backend
