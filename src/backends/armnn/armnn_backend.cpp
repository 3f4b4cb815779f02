// The ArmNN backend: builds an armnn::INetwork straight from the Quorum graph (no parser), one or
// more ArmNN layers per node as ArmNN's lowering decides (lower.h, through ArmnnSink), optimizes it for the CpuRef
// reference backend, loads it into one process-wide IRuntime and runs it with EnqueueWorkload. Every node output is
// bound to an extra output layer at compile time, so forward can return intermediates; the optimized run binds the
// graph's outputs only, and its lowering names the optimizer's passes (lower_passes.h). Forward only: float32, and
// the quantized operators' int8/uint8 values (lower_quant.cpp).
#include <algorithm>
#include <cstring>
#include <set>
#include <sstream>

#include "backends/armnn/armnn_sink.h"
#include "backends/armnn/lower_passes.h"
#include "core/error.h"

namespace quorum::backends::armnn_backend {

namespace {

// Debian's libarmnn22 is the Arm NN 20.08 release; ARMNN_VERSION is its library (API) version.
constexpr const char* kRelease = "20.08";

// One runtime per process: creating it loads the CpuRef dynamic backend from
// /usr/lib/x86_64-linux-gnu/armnn22/.
armnn::IRuntime& runtime() {
  static armnn::IRuntimePtr rt = armnn::IRuntime::Create(armnn::IRuntime::CreationOptions());
  return *rt;
}

using armnn_lower::OutputBinding;

class ArmnnSession : public Session {
 public:
  ArmnnSession(ir::Graph g, armnn::NetworkId id, std::vector<OutputBinding> outputs, LoweringLog lowering)
      : g_(std::move(g)), id_(id), outputs_(std::move(outputs)), lowering_(std::move(lowering)) {}

  std::map<std::string, std::vector<std::string>> lowering() const override { return lowering_.ops(); }
  ~ArmnnSession() override { runtime().UnloadNetwork(id_); }
  ArmnnSession(const ArmnnSession&) = delete;
  ArmnnSession& operator=(const ArmnnSession&) = delete;

  ValueMap forward(const ValueMap& inputs, bool keep_intermediates) override {
    // Float32 values, and the integers of a quantized (int8/uint8) value as they are.
    std::vector<core::Tensor> in_data;
    armnn::InputTensors in_tensors;
    in_data.reserve(g_.inputs.size());
    for (const GraphInput& in : bind_graph_inputs(g_, inputs)) {
      const core::DType t = in.info.type.dtype;
      in_data.push_back(in.value.to(core::is_quantized(t) ? t : core::DType::F32));
      const auto bid = static_cast<armnn::LayerBindingId>(in.index);
      in_tensors.emplace_back(bid, armnn::ConstTensor(runtime().GetInputTensorInfo(id_, bid), in_data.back().raw()));
    }
    std::vector<core::Tensor> out_data;
    armnn::OutputTensors out_tensors;
    out_data.reserve(outputs_.size());
    for (const OutputBinding& o : outputs_) {
      const core::DType t = o.q.type == armnn_lower::DataType::QAsymmU8   ? core::DType::U8
                            : o.q.type == armnn_lower::DataType::QAsymmS8 ? core::DType::I8
                                                                          : core::DType::F32;
      out_data.emplace_back(t, o.shape);
      const auto bid = static_cast<armnn::LayerBindingId>(o.id);
      out_tensors.emplace_back(bid, armnn::Tensor(runtime().GetOutputTensorInfo(id_, bid), out_data.back().raw()));
    }
    if (runtime().EnqueueWorkload(id_, in_tensors, out_tensors) != armnn::Status::Success)
      throw std::runtime_error("ArmNN EnqueueWorkload returned Status::Failure");
    ValueMap result;
    for (size_t i = 0; i < outputs_.size(); ++i) {
      const std::string& v = outputs_[i].value;
      if (keep_intermediates || std::find(g_.outputs.begin(), g_.outputs.end(), v) != g_.outputs.end())
        result.emplace(v, std::move(out_data[i]));
    }
    return result;
  }

 private:
  ir::Graph g_;
  armnn::NetworkId id_;
  std::vector<OutputBinding> outputs_;
  LoweringLog lowering_;
};

class ArmnnBackend : public Backend {
 public:
  std::string name() const override { return "armnn"; }

  std::string version() const override {
    return std::string("Arm NN ") + kRelease + " (library " + ARMNN_VERSION + "), backend " +
           armnn::BackendId(armnn::Compute::CpuRef).Get();
  }

  bool trains() const override { return false; }

  Support supports(const ir::Graph& g, const ir::Node& n) const override { return armnn_lower::supports(g, n); }

  // The optimized run (only the graph's outputs asked for) is the network an application builds: only the
  // graph outputs bound, so ArmNN's passes may merge and drop the layers in between (lower_passes.h).
  bool optimizes() const override { return true; }

  std::unique_ptr<Session> compile(const ir::Graph& g, const CompileOptions& opt) override {
    if (opt.dtype != core::DType::F32)
      throw ConversionError(
          "ArmNN 20.08 has no float64 data type (Float32, Float16, BFloat16 and quantized types only)");
    armnn::INetworkPtr net = armnn::INetwork::Create();
    ArmnnSink sink(*net);
    armnn_lower::NetworkRecorder recorder(sink);  // the network as built, the optimized one is read against
    armnn_lower::Lowered lowered;
    try {
      lowered = armnn_lower::lower(recorder, g, opt.optimized);
    } catch (const armnn::Exception& e) {
      const ir::Node* n = sink.current();
      const std::string where = n ? "node '" + n->name + "' (" + n->op + "): " : "";
      throw ConversionError(where + "ArmNN refused a layer: " + e.what());
    }
    armnn::IOptimizedNetworkPtr optimized = optimize(*net);
    if (opt.optimized) {
      // The optimized network's layers, before LoadNetwork takes it. Without its DOT (SerializeToDot failing)
      // the session still runs, its lowering naming no pass.
      std::ostringstream dot;
      if (optimized->SerializeToDot(dot) == armnn::Status::Success)
        for (const auto& [node, passes] :
             armnn_lower::optimizer_passes(recorder.network(), armnn_lower::dot_layer_names(dot.str())))
          for (const auto& p : passes) lowered.log.note(node, p);
    }
    const armnn::NetworkId id = load(std::move(optimized));
    return std::make_unique<ArmnnSession>(g, id, std::move(lowered.outputs), std::move(lowered.log));
  }

 private:
  static armnn::IOptimizedNetworkPtr optimize(const armnn::INetwork& net) {
    std::vector<std::string> messages;
    armnn::IOptimizedNetworkPtr optimized(nullptr, &armnn::IOptimizedNetwork::Destroy);
    try {
      optimized = armnn::Optimize(net, {armnn::Compute::CpuRef}, runtime().GetDeviceSpec(), armnn::OptimizerOptions(),
                                  armnn::Optional<std::vector<std::string>&>(messages));
    } catch (const armnn::Exception& e) {
      throw ConversionError(std::string("ArmNN Optimize failed: ") + e.what() + joined(messages));
    }
    if (!optimized) throw ConversionError("ArmNN Optimize returned no network" + joined(messages));
    return optimized;
  }

  static armnn::NetworkId load(armnn::IOptimizedNetworkPtr optimized) {
    armnn::NetworkId id = 0;
    std::string error;
    try {
      if (runtime().LoadNetwork(id, std::move(optimized), error) != armnn::Status::Success)
        throw ConversionError("ArmNN LoadNetwork failed: " + error);
    } catch (const armnn::Exception& e) {
      throw ConversionError(std::string("ArmNN LoadNetwork failed: ") + e.what());
    }
    return id;
  }

  static std::string joined(const std::vector<std::string>& messages) {
    std::string s;
    for (const auto& m : messages) s += " | " + m;
    return s;
  }
};

}  // namespace
}  // namespace quorum::backends::armnn_backend

namespace quorum::backends {

std::unique_ptr<Backend> create_backend(const std::vector<std::string>& args) {
  if (!args.empty()) throw core::UserError("backend 'armnn' takes no options, got '" + args[0] + "'");
  return std::make_unique<armnn_backend::ArmnnBackend>();
}

}  // namespace quorum::backends
