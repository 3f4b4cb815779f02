// Shared pieces of the XNNPACK backend: status checking, host-side layout changes, the steps a
// compiled model runs, and the library sink: the lowering's calls (lower.h, which holds every
// mapping decision) made on XNNPACK's subgraph and operator APIs.
#pragma once
#include <xnnpack.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "backends/xnnpack/lower.h"

namespace quorum::backends::xnnpack {

const char* status_name(xnn_status s);
// Throws ConversionError("<call> failed: <status>") unless s is xnn_status_success.
void check_define(xnn_status s, const std::string& call);
// Throws std::runtime_error (a library error while running) unless s is xnn_status_success.
void check_run(xnn_status s, const std::string& call);

core::Tensor from_channels_last(const std::vector<float>& data, const Shape& logical);

// One runnable piece of the compiled model, reading and writing the host value map (float32, or
// int8/uint8 for quantized values; logical layout).
class Step {
 public:
  virtual ~Step() = default;
  virtual void run(ValueMap& values) = 0;
};

// Buffers the library reads at run time or packs at runtime creation (weights, constants); they
// must outlive every runtime and operator built from them. A quantized constant's bytes (int8, uint8 or
// int32 elements) are kept in a float vector of enough elements, which only serves as aligned storage.
using ConstantStore = std::deque<std::vector<float>>;

// The backend's sink: each segment becomes an XNNPACK subgraph, turned into a runtime
// (single-threaded: no pthreadpool) when it ends; concat becomes an operator-API step. Every
// definition call is noted in `log` under its node; a refused call throws ConversionError naming
// the node ("node 'N' (op): xnn_define_x failed: xnn_status_y").
class LibrarySink : public Sink {
 public:
  LibrarySink(const ir::Graph& g, ConstantStore& constants, LoweringLog& log);
  ~LibrarySink() override;
  LibrarySink(const LibrarySink&) = delete;
  LibrarySink& operator=(const LibrarySink&) = delete;

  // Every step in execution order (after lower() has returned).
  std::vector<std::unique_ptr<Step>> finish() { return std::move(steps_); }

  void begin_subgraph() override;
  void begin_node(const ir::Node& node, Layout layout) override;
  void external_input(ValueId id, const std::string& value, Layout layout, const Dims& dims, uint32_t external,
                      const Quant& q) override;
  void external_output(ValueId id, const std::string& value, Layout layout, const Dims& dims, uint32_t external,
                       const Quant& q) override;
  void weight_value(ValueId id, const std::string& value, Layout layout, const Dims& dims,
                    std::vector<float> data) override;
  void static_value(ValueId id, const Dims& dims, std::vector<float> data, const std::string& what) override;
  void internal_value(ValueId id, const Dims& dims, const Quant& q) override;
  void quantized_static(ValueId id, const Dims& dims, std::vector<int32_t> data, const Quant& q,
                        const std::string& what) override;
  void unary(Unary op, ValueId x, ValueId y) override;
  void arithmetic(Arithmetic op, float min, float max, ValueId a, ValueId b, ValueId y) override;
  void binary(Binary op, ValueId a, ValueId b, ValueId y) override;
  void clamp(float min, float max, ValueId x, ValueId y) override;
  void elu(float alpha, ValueId x, ValueId y) override;
  void leaky_relu(float slope, ValueId x, ValueId y) override;
  void convolution_2d(const Window2d& w, uint32_t groups, size_t group_input_channels, size_t group_output_channels,
                      ValueId x, ValueId filter, ValueId bias, ValueId y) override;
  void depthwise_convolution_2d(const Window2d& w, uint32_t depth_multiplier, size_t input_channels, ValueId x,
                                ValueId filter, ValueId bias, ValueId y) override;
  void deconvolution_2d(const Window2d& w, uint32_t adjustment_h, uint32_t adjustment_w, uint32_t groups,
                        size_t group_input_channels, size_t group_output_channels, ValueId x, ValueId filter,
                        ValueId bias, ValueId y) override;
  void max_pooling_2d(const Window2d& w, ValueId x, ValueId y) override;
  void average_pooling_2d(const Window2d& w, ValueId x, ValueId y) override;
  void global_average_pooling_2d(ValueId x, ValueId y) override;
  void fully_connected(ValueId x, ValueId filter, ValueId bias, ValueId y, uint32_t flags) override;
  void static_reshape(const Dims& new_shape, ValueId x, ValueId y) override;
  void static_constant_pad(const Dims& pre, const Dims& post, float value, ValueId x, ValueId y) override;
  void softmax(ValueId x, ValueId y) override;
  void static_resize_bilinear_2d(size_t height, size_t width, ValueId x, ValueId y, uint32_t flags) override;
  void convert(ValueId x, ValueId y) override;
  void end_subgraph(const std::vector<External>& inputs, const std::vector<External>& outputs) override;
  void concat(const ir::Node& node, const Concat& c) override;

 private:
  uint32_t xid(ValueId v) const { return v == kNoValue ? XNN_INVALID_VALUE_ID : ids_.at(v); }
  void bind(ValueId v, uint32_t xnn_id);
  uint32_t define_tensor(const Dims& dims, const void* data, uint32_t external, uint32_t flags,
                         const std::string& what, const Quant& q = kFloat);
  // Notes `call` under the node and checks its status.
  void check(xnn_status s, const char* call);

  const ir::Graph& g_;
  ConstantStore& constants_;
  LoweringLog& log_;
  std::vector<std::unique_ptr<Step>> steps_;
  xnn_subgraph_t sg_ = nullptr;
  uint32_t reserved_ = 0;      // external ids [0, reserved_)
  std::vector<uint32_t> ids_;  // XNNPACK's id of each lowering value of the open subgraph
  std::string where_;          // the node being defined, for messages
  std::string node_;           // its name
};

}  // namespace quorum::backends::xnnpack
