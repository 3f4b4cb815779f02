// The OpenCV DNN backend (OpenCV 4.6, Debian libopencv-dev): a graph is exported to ONNX by the
// Quorum bridge and read by OpenCV's own ONNX importer from memory; it then runs forward only, on
// the plain C++ CPU implementation (DNN_BACKEND_OPENCV / DNN_TARGET_CPU), single-threaded.
//
// OpenCV names its layers after ONNX nodes ("onnx_node!<node name>"), not after tensors. The
// exporter gives the ONNX node producing a Quorum value the Quorum node's name, so each Quorum
// value is fetched from the layer of its producing Quorum node.
#include <opencv2/core.hpp>
#include <opencv2/core/utility.hpp>
#include <opencv2/core/utils/logger.hpp>
#include <opencv2/dnn.hpp>

#include <algorithm>

#include "backends/opencv/opencv_support.h"
#include "backends/opencv/quantizer_names.h"
#include "core/error.h"
#include "ir/onnx_io.h"

namespace quorum::backends::opencv {
namespace {

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

// A float32 Mat holding a copy of `t`, with the tensor's dimensions (rank 0 becomes [1]).
cv::Mat to_mat(const core::Tensor& t) {
  std::vector<int> dims(t.shape().begin(), t.shape().end());
  if (dims.empty()) dims.push_back(1);
  cv::Mat m(static_cast<int>(dims.size()), dims.data(), CV_32F);
  const core::Tensor f = t.dtype() == core::DType::F32 ? t : t.to(core::DType::F32);
  std::copy(f.f32(), f.f32() + f.numel(), m.ptr<float>());
  return m;
}

std::string mat_shape(const cv::Mat& m) {
  std::string s = "[";
  for (int i = 0; i < m.dims; ++i) s += (i ? "," : "") + std::to_string(m.size[i]);
  return s + "]";
}

// The layers OpenCV fused, from Net::dump() after a run: a fused group is one record whose label lists its
// layers separated by " | ", each part "NAME\nTYPE\n...". Per group of two or more, its layer names and types.
std::vector<std::vector<std::pair<std::string, std::string>>> fused_groups(const std::string& dot) {
  std::vector<std::vector<std::pair<std::string, std::string>>> out;
  for (size_t at = dot.find("label=\"{"); at != std::string::npos; at = dot.find("label=\"{", at + 1)) {
    const size_t end = dot.find("}\"", at);
    if (end == std::string::npos) break;
    const std::string label = dot.substr(at + 8, end - at - 8);
    std::vector<std::pair<std::string, std::string>> group;
    for (size_t p = 0; p <= label.size();) {
      size_t q = label.find(" | ", p);
      if (q == std::string::npos) q = label.size();
      const std::string part = label.substr(p, q - p);
      const size_t a = part.find("\\n");
      const size_t b = a == std::string::npos ? a : part.find("\\n", a + 2);
      if (a != std::string::npos)
        group.emplace_back(part.substr(0, a), part.substr(a + 2, b == std::string::npos ? b : b - a - 2));
      p = q + 3;
    }
    if (group.size() >= 2) out.push_back(std::move(group));
  }
  return out;
}

class OpencvSession : public Session {
 public:
  OpencvSession(const ir::Graph& g, cv::dnn::Net net, ir::OnnxExported form, bool optimized,
                std::map<std::string, std::string> back)
      : g_(g), net_(std::move(net)), form_(std::move(form)), optimized_(optimized), back_(std::move(back)) {
    for (const auto& n : g_.nodes) {
      if (n.outputs.size() != 1)
        throw ConversionError("node '" + n.name + "' (" + n.op + ") has " + std::to_string(n.outputs.size()) +
                              " outputs; OpenCV layers are fetched by node name, one output each");
      layer_of_.emplace(n.outputs[0], "onnx_node!" + n.name);
    }
  }

  // The OpenCV layer type each node's output comes from (a node the importer fused into another
  // layer names that layer's type; a fused activation keeps its own), then the ONNX it was read
  // from: "onnx opset N" and, for a node with alternatives, "onnx form what=form,...".
  std::map<std::string, std::vector<std::string>> lowering() const override {
    std::map<std::string, std::vector<std::string>> out;
    for (const auto& n : g_.nodes) {
      const int id = net_.getLayerId(layer_of_.at(n.outputs[0]));
      std::vector<std::string>& l = out[n.name];
      if (id >= 0)
        if (const cv::Ptr<cv::dnn::Layer> layer = net_.getLayer(id)) l.push_back(layer->type);
      l.push_back("onnx opset " + std::to_string(form_.opset));
      if (const auto it = form_.forms.find(n.name); it != form_.forms.end()) l.push_back("onnx form " + it->second);
      if (const auto it = fused_.find("onnx_node!" + n.name); it != fused_.end()) l.push_back(it->second);
    }
    return out;
  }

  ValueMap forward(const ValueMap& inputs, bool keep_intermediates) override {
    for (const GraphInput& in : bind_graph_inputs(g_, inputs)) net_.setInput(to_mat(in.value), in.info.name);
    std::vector<std::string> values;
    for (const auto& n : g_.nodes)
      for (const auto& o : n.outputs)
        if (keep_intermediates || std::find(g_.outputs.begin(), g_.outputs.end(), o) != g_.outputs.end())
          values.push_back(o);
    std::vector<cv::String> layers;
    for (const auto& v : values) layers.push_back(layer_of_.at(v));
    std::vector<cv::Mat> blobs;
    net_.forward(blobs, layers);
    if (blobs.size() != values.size())
      throw std::runtime_error("OpenCV returned " + std::to_string(blobs.size()) + " blobs for " +
                               std::to_string(values.size()) + " requested layers");
    ValueMap out;
    for (size_t i = 0; i < values.size(); ++i) {
      const auto it = back_.find(values[i]);
      out.emplace(it == back_.end() ? values[i] : it->second, from_mat(blobs[i], values[i]));
    }
    // What the fusion made of the layers ("fused Convolution+ReLU" on each layer of the group).
    if (optimized_)
      for (const auto& group : fused_groups(net_.dump())) {
        std::string types;
        for (const auto& [name, type] : group) types += (types.empty() ? "" : "+") + layer_kind(name, type);
        for (const auto& [name, type] : group) fused_[name] = kFusedPrefix + types;
      }
    return out;
  }

 private:
  // A fused layer's type, with what tells its code paths apart: an InnerProduct without weights multiplies
  // two inputs (a MatMul of two variable operands), another branch of its forward than a dense layer's.
  std::string layer_kind(const std::string& name, const std::string& type) const {
    if (type != "InnerProduct") return type;
    const int id = net_.getLayerId(name);
    const cv::Ptr<cv::dnn::Layer> layer = id >= 0 ? net_.getLayer(id) : nullptr;
    return layer && layer->blobs.empty() ? type + "(two inputs)" : type;
  }

  // The blob as the Quorum value's shape: OpenCV keeps its own blob shapes (often 4-D or with
  // dropped unit axes), so only the element count must agree.
  core::Tensor from_mat(const cv::Mat& m, const std::string& value) const {
    const core::Shape& shape = g_.types.at(value).shape;
    const core::DType dtype = g_.types.at(value).dtype;
    if (core::is_quantized(dtype)) return from_int8_mat(m, value, dtype);
    core::Tensor t(core::DType::F32, shape);
    if (m.type() != CV_32F)
      throw std::runtime_error("OpenCV returned '" + value + "' with Mat type " + std::to_string(m.type()) +
                               ", not CV_32F");
    if (static_cast<int64_t>(m.total()) != t.numel())
      throw std::runtime_error("OpenCV returned '" + value + "' with shape " + mat_shape(m) + " (" +
                               std::to_string(m.total()) + " elements), Quorum's shape is " + core::to_string(shape) +
                               " (" + std::to_string(t.numel()) + " elements)");
    const cv::Mat c = m.isContinuous() ? m : m.clone();
    std::copy(c.ptr<float>(), c.ptr<float>() + t.numel(), t.f32());
    return t;
  }

  // A quantized value: OpenCV's int8 layers hold int8 (CV_8S), a uint8 value as u - 128 (its importer shifts
  // uint8 tensors and zero points into int8), so 128 is added back.
  core::Tensor from_int8_mat(const cv::Mat& m, const std::string& value, core::DType dtype) const {
    core::Tensor t(dtype, g_.types.at(value).shape);
    if (m.type() != CV_8S)
      throw std::runtime_error("OpenCV returned the quantized '" + value + "' with Mat type " +
                               std::to_string(m.type()) + ", not CV_8S");
    if (static_cast<int64_t>(m.total()) != t.numel())
      throw std::runtime_error("OpenCV returned '" + value + "' with shape " + mat_shape(m) + ", Quorum's shape is " +
                               core::to_string(t.shape()));
    const cv::Mat c = m.isContinuous() ? m : m.clone();
    const double shift = dtype == core::DType::U8 ? 128 : 0;
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, static_cast<double>(c.ptr<int8_t>()[i]) + shift);
    return t;
  }

  ir::Graph g_;
  cv::dnn::Net net_;
  ir::OnnxExported form_;  // the opset and forms, without the bytes
  std::map<std::string, std::string> layer_of_;  // Quorum value -> OpenCV layer
  bool optimized_ = false;  // compiled for the optimized run (only the graph outputs asked for)
  std::map<std::string, std::string> fused_;  // layer -> "fused TYPE+TYPE..." after an optimized run
  std::map<std::string, std::string> back_;   // quantizer_names' value names -> the graph's
};

class OpencvBackend : public Backend {
 public:
  // Execution variant (backend options, variant.h): threads, a fixed opset, forced exchange forms.
  explicit OpencvBackend(Variant v = {}) : variant_(std::move(v)) {}
  std::string name() const override { return "opencv"; }
  std::string version() const override {
    std::string forms;
    for (const auto& f : variant_.forms) forms += ", form " + f;
    const std::string opsets = variant_.opset
                                   ? "opset " + std::to_string(variant_.opset)
                                   : "opsets " + std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset);
    const std::string how = variant_.plain ? " in the plain exchange form" : " in seeded exchange forms";
    return "OpenCV DNN " + cv::getVersionString() + " (ONNX importer, " + opsets + how + forms +
           ", DNN_BACKEND_OPENCV on CPU, float32)";
  }
  bool trains() const override { return false; }
  bool reads_exchange_form() const override { return true; }
  // The optimized run: only the graph outputs requested, so OpenCV's layer fusion applies.
  bool optimizes() const override { return true; }

  Support supports(const ir::Graph& g, const ir::Node& n) const override { return node_support(g, n, variant_); }
  std::vector<Support> supports_nodes(const ir::Graph& g, bool training) const override {
    const ModelForms forms(g, variant_);  // the exporter's dry run, once for all the model's nodes
    return Backend::supports_nodes(g, training);
  }

  std::unique_ptr<Session> compile(const ir::Graph& g, const CompileOptions& opt) override {
    if (opt.dtype != core::DType::F32)
      throw ConversionError("OpenCV DNN's CPU target computes in float32 only, not " + core::to_string(opt.dtype));
    cv::setNumThreads(variant_.threads > 0 ? variant_.threads : std::max(1, opt.threads));
    // The importer logs every refusal before throwing it; the exception carries the same text.
    cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_SILENT);
    std::map<std::string, std::string> back;
    const ir::Graph named = quantizer_names(g, back);
    ir::OnnxForm form = onnx_form(named, variant_);
    form.outputs_only = opt.optimized;
    const std::string bytes = dequantized_names(onnx_for_library(named, form));
    cv::dnn::Net net;
    try {
      net = cv::dnn::readNetFromONNX(bytes.data(), bytes.size());
    } catch (const cv::Exception& e) {
      throw ConversionError("OpenCV's ONNX importer refused the model: " + one_line(e.what()));
    }
    if (net.empty()) throw ConversionError("OpenCV's ONNX importer returned an empty network");
    net.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
    net.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
    ir::OnnxExported chosen = ir::onnx_forms(named, form);
    return std::make_unique<OpencvSession>(named, std::move(net), std::move(chosen), opt.optimized, std::move(back));
  }

 private:
  Variant variant_;
};

}  // namespace
}  // namespace quorum::backends::opencv

namespace quorum::backends {

std::unique_ptr<Backend> create_backend(const std::vector<std::string>& args) {
  return std::make_unique<opencv::OpencvBackend>(opencv::parse_variant(args));
}

}  // namespace quorum::backends
