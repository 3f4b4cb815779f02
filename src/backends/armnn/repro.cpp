// ArmNN's reproducer: one C++ file (repro.cpp) that builds the finding's model as an
// armnn::INetwork layer by layer, exactly as Quorum's ArmNN backend does: the network is printed
// by TextSink from ArmNN's lowering (lower.h), the same code that drives the backend's ArmnnSink,
// so the program makes the same layers, in the same order, with the same descriptors and
// TensorInfos (every node output bound to an output layer). It optimizes the network for CpuRef,
// runs it with EnqueueWorkload and compares with the float64 reference. Inputs, weights and
// expected values are embedded as exact hex-float arrays. No ArmNN header is included. A finding of
// the optimized stage (OC) gets the optimized form, as the backend's optimized run: only the graph
// outputs bound (lower's outputs_only), so Optimize may fold, merge and drop the layers in between; the
// pinned form (every node output bound) runs first beside it, for comparison.
#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <utility>

#include "backends/armnn/lower.h"
#include "backends/repro.h"

namespace quorum::backends {
namespace {

using namespace armnn_lower;

std::string u(int64_t v) { return std::to_string(v); }
std::string fl(double v) { return c_literal(v, true); }

// "{1, 2, 3}" (rank 0 is ArmNN shape [1], as the backend carries it).
std::string dims(const Shape& s) {
  std::ostringstream o;
  o << '{';
  if (s.empty()) o << 1;
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << '}';
  return o.str();
}
template <class T>
std::string list(const std::vector<T>& v) {
  std::ostringstream o;
  o << '{';
  for (size_t i = 0; i < v.size(); ++i) o << (i ? ", " : "") << v[i];
  o << '}';
  return o.str();
}
std::string boolean(bool b) { return b ? "true" : "false"; }

// The TensorInfo of shape `s` with data type and quantization `q`, as C++ ("info({1, 2})", or
// "info({1, 2}, armnn::DataType::QAsymmU8, 0x1p-3f, 5)").
std::string info(const Shape& s, const Quant& q) {
  if (q.type == DataType::Float32) return "info(" + dims(s) + ")";
  return "info(" + dims(s) + ", armnn::DataType::" + name(q.type) + ", " + fl(q.scale) + ", " +
         std::to_string(q.offset) + ")";
}
// The C++ element type of a quantized type's values.
const char* c_type(DataType t) {
  return t == DataType::QAsymmU8 ? "uint8_t" : t == DataType::QAsymmS8 ? "int8_t" : "int32_t";
}

// Prints the calls ArmnnSink makes as C++ text: `code` builds the network on `net` (handles are the
// program's armnn::IOutputSlot* variables v0, v1, ...), `data` holds the weights and constants.
class TextSink : public LayerSink {
 public:
  std::ostringstream data, code;
  bool outputs_only = false;  // as lower() binds: the graph outputs only (the optimized form)

  int input(size_t index, const std::string& name, const Shape& shape, const Quant& q) override {
    code << "  armnn::IOutputSlot* v" << nvar_ << " = connect(net->AddInputLayer(" << index << ", " << quoted(name)
         << "), {}, " << info(shape, q) << ");\n";
    return nvar_++;
  }
  int layer(const Layer& layer, const std::vector<Value>& inputs, const Shape& out, const Quant& q,
            const std::string& name) override {
    const std::string add = std::visit([this](const auto& l) { return call(l); }, layer);
    code << "  armnn::IOutputSlot* v" << nvar_ << " = connect(net->" << add << quoted(name) << "), {";
    for (size_t i = 0; i < inputs.size(); ++i) code << (i ? ", " : "") << "v" << inputs[i].id;
    code << "}, " << info(out, q) << ");\n";
    return nvar_++;
  }
  void output(size_t index, const std::string& name, const Value& v) override {
    if (index == 0)
      code << (outputs_only
                   ? "\n  // Only the graph outputs are bound to output layers (what an application asks for).\n"
                   : "\n  // Every node output is bound to an output layer, binding ids in node order.\n");
    code << "  v" << v.id << "->Connect(net->AddOutputLayer(" << index << ", " << quoted(name)
         << ")->GetInputSlot(0));\n";
  }
  void node(const ir::Node& n) override {
    code << "\n  // node '" << n.name << "': " << n.op << " " << core::to_string(n.attrs) << "\n";
  }
  void defined(const std::string& value, const Value& v) override {
    code << "  // Quorum value '" << value << "' is v" << v.id << " " << core::to_string(v.shape) << "\n";
  }
  void comment(const std::string& text) override { code << "  // " << text << "\n"; }

 private:
  // A static float array holding `v`; returns its name.
  std::string array(const std::string& hint, const std::vector<float>& v) {
    std::string name = "w_" + identifier(hint);
    if (arrays_.count(name)) name += "_" + std::to_string(arrays_.size());
    arrays_.insert(name);
    data << "static const float " << name << "[" << std::max<size_t>(v.size(), 1) << "] = {";
    for (size_t i = 0; i < v.size(); ++i)
      data << (i % 8 == 0 ? "\n    " : "") << fl(v[i]) << (i + 1 < v.size() ? ", " : "");
    if (v.empty()) data << "0";
    data << "};\n";
    return name;
  }
  // A static array of a quantized constant's integers; returns its name.
  std::string int_array(const std::string& hint, const Weights& w) {
    std::string name = "w_" + identifier(hint);
    if (arrays_.count(name)) name += "_" + std::to_string(arrays_.size());
    arrays_.insert(name);
    data << "static const " << c_type(w.q.type) << " " << name << "[" << std::max<size_t>(w.ints.size(), 1)
         << "] = {";
    for (size_t i = 0; i < w.ints.size(); ++i)
      data << (i % 16 == 0 ? "\n    " : "") << w.ints[i] << (i + 1 < w.ints.size() ? ", " : "");
    if (w.ints.empty()) data << "0";
    data << "};\n";
    return name;
  }
  std::string const_tensor(const Weights& w) {
    if (w.q.type != DataType::Float32)
      return "armnn::ConstTensor(" + info(w.shape, w.q) + ", " + int_array(w.hint, w) + ")";
    return "armnn::ConstTensor(info(" + dims(w.shape) + "), " + array(w.hint, w.data) + ")";
  }
  // Declares a descriptor variable (`ctor` its constructor arguments) and returns its name.
  std::string desc(const std::string& type, const std::string& ctor = "") {
    const std::string d = "d" + std::to_string(ndesc_++);
    code << "  armnn::" << type << " " << d << (ctor.empty() ? "" : "(" + ctor + ")") << ";\n";
    return d;
  }
  void set(const std::string& d, const std::string& field, const std::string& v) {
    code << "  " << d << "." << field << " = " << v << ";\n";
  }
  // An optional bias: declares it and returns its name.
  std::string bias(const std::optional<Weights>& w) {
    const std::string b = "b" + std::to_string(ndesc_++);
    code << "  armnn::Optional<armnn::ConstTensor> " << b << ";\n";
    if (w) code << "  " << b << " = " << const_tensor(*w) << ";\n";
    return b;
  }
  void geometry(const std::string& d, const Geometry& g) {
    set(d, "m_StrideY", u(g.stride_y));
    set(d, "m_StrideX", u(g.stride_x));
    set(d, "m_PadTop", u(g.pad_top));
    set(d, "m_PadLeft", u(g.pad_left));
    set(d, "m_PadBottom", u(g.pad_bottom));
    set(d, "m_PadRight", u(g.pad_right));
    set(d, "m_DataLayout", "armnn::DataLayout::NCHW");
  }

  // Each returns the INetwork call up to its name argument ("AddPadLayer(d3, "), after declaring
  // what it needs.
  std::string call(const ConstantLayer& l) { return "AddConstantLayer(" + const_tensor(l.w) + ", "; }
  std::string call(const ReshapeLayer& l) {
    return "AddReshapeLayer(armnn::ReshapeDescriptor(info(" + dims(l.shape) + ").GetShape()), ";
  }
  std::string call(const TransposeLayer& l) {
    return "AddTransposeLayer(armnn::TransposeDescriptor(armnn::PermutationVector(" + list(l.perm) + ")), ";
  }
  std::string call(const ActivationLayer& l) {
    return std::string("AddActivationLayer(armnn::ActivationDescriptor(armnn::ActivationFunction::") + name(l.f) +
           ", " + fl(l.a) + ", " + fl(l.b) + "), ";
  }
  std::string call(const UnaryLayer& l) {
    return std::string("AddElementwiseUnaryLayer(armnn::ElementwiseUnaryDescriptor(armnn::UnaryOperation::") +
           name(l.op) + "), ";
  }
  std::string call(const BinaryLayer& l) { return std::string("Add") + name(l.op) + "Layer("; }
  std::string call(const MeanLayer& l) {
    return "AddMeanLayer(armnn::MeanDescriptor(std::vector<unsigned int>" + list(l.axes) + ", " + boolean(l.keep_dims) +
           "), ";
  }
  std::string call(const SliceLayer& l) {
    return "AddSliceLayer(armnn::SliceDescriptor(std::vector<unsigned int>" + list(l.begin) +
           ", std::vector<unsigned int>" + list(l.size) + "), ";
  }
  std::string call(const StridedSliceLayer& l) {
    const std::string d = desc("StridedSliceDescriptor", "std::vector<int>" + list(l.begin) + ", std::vector<int>" +
                                                             list(l.end) + ", std::vector<int>" + list(l.stride));
    if (l.end_mask) set(d, "m_EndMask", u(l.end_mask));
    set(d, "m_DataLayout", "armnn::DataLayout::NCHW");
    return "AddStridedSliceLayer(" + d + ", ";
  }
  std::string call(const ConcatLayer& l) {
    const std::string s = "s" + std::to_string(ndesc_++);
    code << "  std::vector<armnn::TensorShape> " << s << " = {";
    for (size_t i = 0; i < l.shapes.size(); ++i)
      code << (i ? ", " : "") << "info(" << dims(l.shapes[i]) << ").GetShape()";
    code << "};\n";
    const std::string d = desc("OriginsDescriptor", "armnn::CreateDescriptorForConcatenation(" + s + ".begin(), " + s +
                                                        ".end(), " + u(static_cast<int64_t>(l.axis)) + ")");
    return "AddConcatLayer(" + d + ", ";
  }
  std::string call(const PadLayer& l) {
    std::ostringstream pads;
    pads << '{';
    for (size_t d = 0; d < l.begin.size(); ++d)
      pads << (d ? ", " : "") << "{" << l.begin[d] << "u, " << l.end[d] << "u}";
    pads << '}';
    const std::string d =
        desc("PadDescriptor", "std::vector<std::pair<unsigned int, unsigned int>>" + pads.str() + ", " + fl(l.value));
    return "AddPadLayer(" + d + ", ";
  }
  std::string call(const FullyConnectedLayer& l) {
    const std::string d = desc("FullyConnectedDescriptor");
    set(d, "m_BiasEnabled", boolean(l.bias.has_value()));
    set(d, "m_TransposeWeightMatrix", "true");
    const std::string bt = bias(l.bias);
    return "AddFullyConnectedLayer(" + d + ", " + const_tensor(l.w) + ", " + bt + ", ";
  }
  std::string call(const SoftmaxLayer& l) {
    const std::string d = desc("SoftmaxDescriptor");
    if (l.beta) set(d, "m_Beta", "1.0f");
    set(d, "m_Axis", u(l.axis));
    return std::string(l.log ? "AddLogSoftmaxLayer(" : "AddSoftmaxLayer(") + d + ", ";
  }
  std::string call(const ConvLayer& l) {
    const std::string d = desc(std::string(name(l.kind)) + "Descriptor");
    geometry(d, l.geometry);
    if (l.kind != ConvKind::TransposeConvolution2d) {
      set(d, "m_DilationY", u(l.dilation_y));
      set(d, "m_DilationX", u(l.dilation_x));
    }
    set(d, "m_BiasEnabled", boolean(l.bias_enabled));
    const std::string bt = bias(l.bias);
    return std::string("Add") + name(l.kind) + "Layer(" + d + ", " + const_tensor(l.w) + ", " + bt + ", ";
  }
  std::string call(const PoolLayer& l) {
    const std::string d = desc("Pooling2dDescriptor");
    set(d, "m_PoolType", l.max ? "armnn::PoolingAlgorithm::Max" : "armnn::PoolingAlgorithm::Average");
    set(d, "m_PoolHeight", u(l.height));
    set(d, "m_PoolWidth", u(l.width));
    if (l.full) {
      geometry(d, l.full->geometry);
      set(d, "m_OutputShapeRounding",
          l.full->ceil ? "armnn::OutputShapeRounding::Ceiling" : "armnn::OutputShapeRounding::Floor");
      set(d, "m_PaddingMethod",
          l.full->ignore_value ? "armnn::PaddingMethod::IgnoreValue" : "armnn::PaddingMethod::Exclude");
    } else {
      set(d, "m_StrideX", "1");
      set(d, "m_StrideY", "1");
      set(d, "m_DataLayout", "armnn::DataLayout::NCHW");
    }
    return "AddPooling2dLayer(" + d + ", ";
  }
  std::string call(const BatchNormLayer& l) {
    const std::string d = desc("BatchNormalizationDescriptor");
    set(d, "m_Eps", fl(l.eps));
    set(d, "m_DataLayout", "armnn::DataLayout::NCHW");
    const std::string mean = const_tensor(l.mean), var = const_tensor(l.var), beta = const_tensor(l.beta),
                      gamma = const_tensor(l.gamma);
    return "AddBatchNormalizationLayer(" + d + ", " + mean + ", " + var + ", " + beta + ", " + gamma + ", ";
  }
  std::string call(const LrnLayer& l) {
    const std::string d = desc("NormalizationDescriptor");
    set(d, "m_NormChannelType", "armnn::NormalizationAlgorithmChannel::Across");
    set(d, "m_NormMethodType", "armnn::NormalizationAlgorithmMethod::LocalBrightness");
    set(d, "m_NormSize", u(l.size));
    set(d, "m_Alpha", fl(l.alpha) + "  /* alpha / size */");
    set(d, "m_Beta", fl(l.beta));
    set(d, "m_K", fl(l.k));
    set(d, "m_DataLayout", "armnn::DataLayout::NCHW");
    return "AddNormalizationLayer(" + d + ", ";
  }
  std::string call(const QuantizeLayer&) { return "AddQuantizeLayer("; }
  std::string call(const DequantizeLayer&) { return "AddDequantizeLayer("; }
  std::string call(const ResizeLayer& l) {
    const std::string d = desc("ResizeDescriptor");
    set(d, "m_Method", l.bilinear ? "armnn::ResizeMethod::Bilinear" : "armnn::ResizeMethod::NearestNeighbor");
    set(d, "m_TargetHeight", u(l.height));
    set(d, "m_TargetWidth", u(l.width));
    set(d, "m_DataLayout", "armnn::DataLayout::NCHW");
    set(d, "m_HalfPixelCenters", boolean(l.half_pixel));
    set(d, "m_AlignCorners", boolean(l.align_corners));
    return "AddResizeLayer(" + d + ", ";
  }

  std::set<std::string> arrays_;
  int nvar_ = 0, ndesc_ = 0;
};

// Lowers the case's model into `sink` as the backend would, or says why the backend would not.
Lowered lower_or_refuse(LayerSink& sink, const ir::Graph& g, bool outputs_only = false) {
  for (const auto& n : g.nodes)
    if (const Support s = supports(g, n); !s.ok) throw ReproUnsupported(s.reason);
  try {
    return lower(sink, g, outputs_only);
  } catch (const ConversionError& e) {
    throw ReproUnsupported(e.what());
  }
}

// ArmNN's Optimize rewrites across layers (FoldPadIntoConvolution2d, TransposeAsReshape,
// SquashEqualReshapeSiblings...), so a graph-level bug does not show on the blamed node alone fed
// the library's values, which is what the loader makes of an unreduced bundle (a ledger case).
}  // namespace

ReproProgram write_repro_armnn(const ReproCase& c, const std::string& dir) {
  if (c.train)
    throw ReproUnsupported("ArmNN does not train (inference only); the finding is in stage " +
                           std::string(core::to_string(c.stage)));
  if (c.dtype != core::DType::F32)
    throw ReproUnsupported("ArmNN 20.08 has no float64 data type; the case runs in " + core::to_string(c.dtype));
  const ir::Graph& g = c.model;
  const bool crash = c.crash();
  // The optimized stage: as the backend's optimized run, only the graph outputs are bound to output layers,
  // so ArmNN's Optimize may fold, merge and drop the layers in between (an output layer keeps the layer it
  // reads); the pinned form, every node output bound, is built beside it.
  const bool optimized = c.stage == core::Stage::Optimized;
  ReproProgram p;
  p.main = "repro.cpp";
  p.run = "g++ -std=c++17 -O1 repro.cpp -o repro -larmnn && ./repro";

  struct Out {
    std::string value;
    Shape shape;
    Quant q;
  };
  struct Form {
    TextSink sink;
    std::vector<Out> outs;
  };
  auto lower_form = [&](Form& f, bool outputs_only) {
    f.sink.outputs_only = outputs_only;
    const Lowered lowered = lower_or_refuse(f.sink, g, outputs_only);
    for (const OutputBinding& o : lowered.outputs) f.outs.push_back({o.value, o.shape, o.q});
  };
  Form b;  // the form the finding ran
  lower_form(b, optimized);
  std::unique_ptr<Form> pinned;  // beside the optimized form, when it declares the same weights
  if (optimized) {
    pinned = std::make_unique<Form>();
    lower_form(*pinned, false);
    if (pinned->sink.data.str() != b.sink.data.str()) pinned.reset();
  }

  // Values compared: the blamed node's outputs and the graph outputs; in the optimized form the graph outputs
  // only (what the optimized network returns; the finding is about one of them).
  std::vector<std::string> compared;
  auto add = [&](const std::string& v) {
    if (std::find(compared.begin(), compared.end(), v) == compared.end() && c.expected.count(v)) compared.push_back(v);
  };
  if (const ir::Node* n = c.blamed(); n && !optimized)
    for (const auto& o : n->outputs) add(o);
  for (const auto& o : g.outputs) add(o);

  std::ostringstream s;
  s << repro_header(c, "//",
                    p.run + "  (Debian libarmnn-dev and libarmnn-cpuref-backend22; ArmNN loads the CpuRef backend from "
                            "/usr/lib/x86_64-linux-gnu/armnn22/)");
  if (crash)
    s << "// The finding is a failure while ArmNN builds, optimizes or loads the network: the program exits 1\n"
         "// when that failure shows (and, once the network runs, when its outputs differ from the expected ones).\n";
  if (optimized) {
    s << "// The optimized form (stage OC), as an application builds the network: only the graph outputs are bound\n"
         "// to output layers, so ArmNN's Optimize may fold, merge and drop the layers in between (an output layer\n"
         "// keeps the layer it reads alive).\n";
    std::vector<std::string> fused;
    for (const auto& op : c.lowering)
      if (std::string f = fused_entry(op); !f.empty()) fused.push_back(std::move(f));
    if (!fused.empty()) {
      s << "// What Optimize did to the network in Quorum's optimized run (its passes and the layers it dropped):\n";
      for (const auto& f : fused) s << "//   " << f << "\n";
    }
    if (pinned)
      s << "// The pinned form (every node output bound to an output layer, so Optimize cannot fuse through them;\n"
           "// Quorum's pinned run) runs first, beside it; only the optimized form decides the exit status.\n";
  }
  s << "#include <armnn/ArmNN.hpp>\n\n#include <cmath>\n#include <cstdint>\n#include <cstdio>\n#include "
       "<string>\n#include <utility>\n#include <vector>\n\n";
  s << cpp_check_function() << "\n";
  s << "static const double ATOL = " << py_literal(c.tol.atol) << ", RTOL = " << py_literal(c.tol.rtol) << ";\n\n";
  s << "// A TensorInfo: float32, or a quantized type with its scale and offset.\n"
       "static armnn::TensorInfo info(std::vector<unsigned int> dims, armnn::DataType type = "
       "armnn::DataType::Float32,\n"
       "                              float scale = 0, int offset = 0) {\n"
       "  return armnn::TensorInfo(armnn::TensorShape(static_cast<unsigned int>(dims.size()), dims.data()), type, "
       "scale,\n"
       "                           offset);\n}\n\n"
       "// Connects `inputs` to the layer's input slots in order and sets its output TensorInfo.\n"
       "static armnn::IOutputSlot* connect(armnn::IConnectableLayer* layer, std::vector<armnn::IOutputSlot*> inputs,\n"
       "                                   const armnn::TensorInfo& out) {\n"
       "  for (size_t i = 0; i < inputs.size(); ++i) inputs[i]->Connect(layer->GetInputSlot(static_cast<unsigned "
       "int>(i)));\n"
       "  layer->GetOutputSlot(0).SetTensorInfo(out);\n"
       "  return &layer->GetOutputSlot(0);\n}\n\n";
  s << "// Graph inputs (float32; a quantized input holds its integers).\n";
  for (const auto& in : g.inputs) {
    const core::Tensor& t = c.inputs.at(in.name);
    if (!core::is_quantized(in.type.dtype)) {
      s << c_array("in_" + identifier(in.name), t, true);
      continue;
    }
    s << "static const " << (in.type.dtype == core::DType::U8 ? "uint8_t" : "int8_t") << " in_"
      << identifier(in.name) << "[" << std::max<int64_t>(t.numel(), 1) << "] = {";
    for (int64_t i = 0; i < t.numel(); ++i)
      s << (i % 16 == 0 ? "\n    " : "") << static_cast<int64_t>(t.get(i)) << (i + 1 < t.numel() ? ", " : "");
    if (t.numel() == 0) s << "0";
    s << "};\n";
  }
  s << "\n// Weights and constants.\n" << b.sink.data.str();
  s << "\n// Expected values (float64 reference).\n";
  for (const auto& v : compared) s << c_array("want_" + identifier(v), c.expected.at(v), false);

  s << "\n// What ArmNN failed at; a crash finding shows itself here (exit 1), other findings cannot run (exit 2).\n";
  if (optimized) s << "static int fail_status = " << (crash ? 1 : 2) << ";  // 2 while the pinned form runs\n";
  s << "static int failed(const char* stage, const std::string& what, const std::vector<std::string>& messages = {}) "
       "{\n"
       "  std::printf(\"ArmNN %s failed: %s\\n\", stage, what.c_str());\n"
       "  for (const auto& m : messages) std::printf(\"  message: %s\\n\", m.c_str());\n"
       "  return "
    << (optimized ? std::string("fail_status") : std::to_string(crash ? 1 : 2)) << ";\n}\n\n";

  // Builds, optimizes, loads and runs one form's network on `runtime`, then checks the compared values.
  auto run = [&](const Form& f) {
    std::ostringstream r;
    r << "  armnn::INetworkPtr net = armnn::INetwork::Create();\n";
    r << "  try {\n";
    {
      std::istringstream lines(f.sink.code.str());
      std::string line;
      while (std::getline(lines, line)) r << (line.empty() ? "" : "  ") << line << "\n";
    }
    r << "  } catch (const armnn::Exception& e) {\n    return failed(\"network construction\", e.what());\n  }\n\n";
    r << "  std::vector<std::string> messages;\n";
    r << "  armnn::IOptimizedNetworkPtr optimized(nullptr, &armnn::IOptimizedNetwork::Destroy);\n";
    r << "  try {\n";
    r << "    optimized = armnn::Optimize(*net, {armnn::Compute::CpuRef}, runtime->GetDeviceSpec(), "
         "armnn::OptimizerOptions(),\n";
    r << "                                armnn::Optional<std::vector<std::string>&>(messages));\n";
    r << "  } catch (const armnn::Exception& e) {\n    return failed(\"Optimize\", e.what(), messages);\n  }\n";
    r << "  if (!optimized) return failed(\"Optimize\", \"no network returned\", messages);\n";
    r << "  armnn::NetworkId id = 0;\n  std::string error;\n";
    r << "  try {\n";
    r << "    if (runtime->LoadNetwork(id, std::move(optimized), error) != armnn::Status::Success)\n";
    r << "      return failed(\"LoadNetwork\", error);\n";
    r << "  } catch (const armnn::Exception& e) {\n    return failed(\"LoadNetwork\", e.what());\n  }\n\n";
    r << "  armnn::InputTensors inputs;\n";
    for (size_t i = 0; i < g.inputs.size(); ++i)
      r << "  inputs.emplace_back(" << i << ", armnn::ConstTensor(runtime->GetInputTensorInfo(id, " << i << "), in_"
        << identifier(g.inputs[i].name) << "));\n";
    r << "  armnn::OutputTensors outputs;\n";
    for (size_t i = 0; i < f.outs.size(); ++i) {
      const bool quantized = f.outs[i].q.type != DataType::Float32;
      r << "  std::vector<" << (quantized ? c_type(f.outs[i].q.type) : "float") << "> " << (quantized ? "raw_" : "out_")
        << identifier(f.outs[i].value) << "(" << std::max<int64_t>(core::numel(f.outs[i].shape), 1) << ");  // '"
        << f.outs[i].value << "'" << (quantized ? ", its integers" : "") << "\n";
      r << "  outputs.emplace_back(" << i << ", armnn::Tensor(runtime->GetOutputTensorInfo(id, " << i << "), "
        << (quantized ? "raw_" : "out_") << identifier(f.outs[i].value) << ".data()));\n";
    }
    r << "  try {\n";
    r << "    if (runtime->EnqueueWorkload(id, inputs, outputs) != armnn::Status::Success)\n";
    r << "      return failed(\"EnqueueWorkload\", \"Status::Failure\");\n";
    r << "  } catch (const armnn::Exception& e) {\n    return failed(\"EnqueueWorkload\", e.what());\n  }\n\n";
    for (const Out& o : f.outs)
      if (o.q.type != DataType::Float32)
        r << "  std::vector<float> out_" << identifier(o.value) << "(raw_" << identifier(o.value) << ".begin(), raw_"
          << identifier(o.value) << ".end());\n";
    r << "  int bad = 0;\n";
    for (const auto& v : compared)
      r << "  bad += quorum_check(" << quoted(v) << ", out_" << identifier(v) << ".data(), want_" << identifier(v)
        << ", " << c.expected.at(v).numel() << ", ATOL, RTOL);\n";
    r << "  return bad ? 1 : 0;\n";
    return r.str();
  };

  const std::string runtime =
      "  std::printf(\"Arm NN 20.08 (library %s), backend CpuRef\\n\", ARMNN_VERSION);\n"
      "  // Creating the runtime loads the CpuRef dynamic backend from /usr/lib/x86_64-linux-gnu/armnn22/.\n"
      "  armnn::IRuntimePtr runtime = armnn::IRuntime::Create(armnn::IRuntime::CreationOptions());\n";
  if (!optimized) {
    s << "int main() {\n" << runtime << run(b) << "}\n";
  } else {
    if (pinned)
      s << "// The pinned form: every node output bound to an output layer (as Quorum's pinned run).\n"
           "static int run_pinned(armnn::IRuntime* runtime) {\n"
        << run(*pinned) << "}\n\n";
    s << "// The optimized form: only the graph outputs bound (as Quorum's optimized run, and an application).\n"
         "static int run_optimized(armnn::IRuntime* runtime) {\n"
      << run(b) << "}\n\n";
    s << "int main() {\n" << runtime;
    if (pinned) {
      s << "  std::printf(\"every node output bound (no fusion):\\n\");\n";
      if (crash) s << "  fail_status = 2;  // the pinned form failing is not the finding\n";
      s << "  run_pinned(runtime.get());\n";
      if (crash) s << "  fail_status = 1;\n";
    }
    s << "  std::printf(\"only the graph outputs bound (ArmNN's Optimize folds and fuses):\\n\");\n"
         "  return run_optimized(runtime.get());\n}\n";
  }
  write_repro_file(p, dir, p.main, s.str());
  return p;
}

}  // namespace quorum::backends

namespace quorum::backends::armnn_lower {

std::vector<std::string> writer_sink_calls(const ir::Graph& g) {
  TextSink text;
  RecordingSink recorder(text);
  try {
    lower_or_refuse(recorder, g);
  } catch (const ReproUnsupported& e) {
    return {std::string("refused: ") + e.what()};
  }
  return recorder.calls();
}

}  // namespace quorum::backends::armnn_lower
