// The ArmNN backend's sink: each layer the lowering decides becomes the INetwork::Add...Layer call
// with ArmNN's descriptor, connected to its inputs, its output TensorInfo set.
#include "backends/armnn/armnn_sink.h"

#include "core/error.h"

namespace quorum::backends::armnn_backend {

using namespace armnn_lower;

namespace {

armnn::DataType data_type(DataType t) {
  switch (t) {
    case DataType::Float32: return armnn::DataType::Float32;
    case DataType::QAsymmU8: return armnn::DataType::QAsymmU8;
    case DataType::QAsymmS8: return armnn::DataType::QAsymmS8;
    case DataType::Signed32: return armnn::DataType::Signed32;
  }
  throw std::logic_error("unknown data type");
}

}  // namespace

armnn::TensorInfo tensor_info(const Shape& s, const Quant& q) {
  std::vector<unsigned int> dims;
  for (int64_t d : s) dims.push_back(static_cast<unsigned int>(d));
  if (dims.empty()) dims.push_back(1);
  const armnn::TensorShape shape(static_cast<unsigned int>(dims.size()), dims.data());
  if (q.type == DataType::Float32) return armnn::TensorInfo(shape, armnn::DataType::Float32);
  return armnn::TensorInfo(shape, data_type(q.type), q.scale, q.offset);
}

namespace {

uint32_t u(int64_t v) { return static_cast<uint32_t>(v); }

template <class T>
std::vector<T> cast(const std::vector<int64_t>& v) {
  return std::vector<T>(v.begin(), v.end());
}


armnn::ActivationFunction function(Act f) {
  using AF = armnn::ActivationFunction;
  switch (f) {
    case Act::ReLu: return AF::ReLu;
    case Act::BoundedReLu: return AF::BoundedReLu;
    case Act::Sigmoid: return AF::Sigmoid;
    case Act::TanH: return AF::TanH;
    case Act::SoftReLu: return AF::SoftReLu;
    case Act::Square: return AF::Square;
    case Act::HardSwish: return AF::HardSwish;
    case Act::LeakyReLu: return AF::LeakyReLu;
    case Act::Elu: return AF::Elu;
    case Act::Linear: return AF::Linear;
  }
  throw std::logic_error("unknown activation");
}

armnn::UnaryOperation operation(UnaryOp op) {
  using UO = armnn::UnaryOperation;
  switch (op) {
    case UnaryOp::Abs: return UO::Abs;
    case UnaryOp::Exp: return UO::Exp;
    case UnaryOp::Sqrt: return UO::Sqrt;
    case UnaryOp::Rsqrt: return UO::Rsqrt;
    case UnaryOp::Neg: return UO::Neg;
  }
  throw std::logic_error("unknown unary operation");
}

template <class Desc>
void set_geometry(Desc& d, const Geometry& g) {
  d.m_StrideY = u(g.stride_y);
  d.m_StrideX = u(g.stride_x);
  d.m_PadTop = u(g.pad_top);
  d.m_PadLeft = u(g.pad_left);
  d.m_PadBottom = u(g.pad_bottom);
  d.m_PadRight = u(g.pad_right);
  d.m_DataLayout = armnn::DataLayout::NCHW;
}

// Adds one layer of each kind to the network.
struct Adder {
  armnn::INetwork& net;
  const char* name;
  std::deque<std::vector<int32_t>>& buffers;  // a quantized constant's elements in its type's bytes

  armnn::ConstTensor const_tensor(const Weights& w) const {
    if (w.q.type == DataType::Float32) return armnn::ConstTensor(tensor_info(w.shape), w.data);
    std::vector<int32_t>& buf = buffers.emplace_back(w.ints.size() + 1);  // int32_t storage, aligned for any type
    if (w.q.type == DataType::Signed32) std::copy(w.ints.begin(), w.ints.end(), buf.begin());
    for (size_t i = 0; i < w.ints.size() && w.q.type != DataType::Signed32; ++i)
      reinterpret_cast<uint8_t*>(buf.data())[i] = static_cast<uint8_t>(w.ints[i]);  // int8: two's complement
    return armnn::ConstTensor(tensor_info(w.shape, w.q), buf.data());
  }
  armnn::Optional<armnn::ConstTensor> optional_tensor(const std::optional<Weights>& w) const {
    armnn::Optional<armnn::ConstTensor> t;
    if (w) t = const_tensor(*w);
    return t;
  }

  armnn::IConnectableLayer* operator()(const ConstantLayer& l) const {
    return net.AddConstantLayer(const_tensor(l.w), name);
  }
  armnn::IConnectableLayer* operator()(const ReshapeLayer& l) const {
    return net.AddReshapeLayer(armnn::ReshapeDescriptor(tensor_info(l.shape).GetShape()), name);
  }
  armnn::IConnectableLayer* operator()(const TransposeLayer& l) const {
    std::vector<unsigned int> map(l.perm.begin(), l.perm.end());
    const armnn::TransposeDescriptor d(armnn::PermutationVector(map.data(), static_cast<unsigned int>(map.size())));
    return net.AddTransposeLayer(d, name);
  }
  armnn::IConnectableLayer* operator()(const ActivationLayer& l) const {
    return net.AddActivationLayer(armnn::ActivationDescriptor(function(l.f), l.a, l.b), name);
  }
  armnn::IConnectableLayer* operator()(const UnaryLayer& l) const {
    return net.AddElementwiseUnaryLayer(armnn::ElementwiseUnaryDescriptor(operation(l.op)), name);
  }
  armnn::IConnectableLayer* operator()(const BinaryLayer& l) const {
    switch (l.op) {
      case BinaryOp::Addition: return net.AddAdditionLayer(name);
      case BinaryOp::Subtraction: return net.AddSubtractionLayer(name);
      case BinaryOp::Multiplication: return net.AddMultiplicationLayer(name);
      case BinaryOp::Division: return net.AddDivisionLayer(name);
      case BinaryOp::Maximum: return net.AddMaximumLayer(name);
      case BinaryOp::Minimum: return net.AddMinimumLayer(name);
    }
    throw std::logic_error("unknown binary operation");
  }
  armnn::IConnectableLayer* operator()(const MeanLayer& l) const {
    return net.AddMeanLayer(armnn::MeanDescriptor(std::vector<unsigned int>(l.axes.begin(), l.axes.end()), l.keep_dims),
                            name);
  }
  armnn::IConnectableLayer* operator()(const SliceLayer& l) const {
    return net.AddSliceLayer(armnn::SliceDescriptor(cast<unsigned int>(l.begin), cast<unsigned int>(l.size)), name);
  }
  armnn::IConnectableLayer* operator()(const StridedSliceLayer& l) const {
    armnn::StridedSliceDescriptor d(cast<int>(l.begin), cast<int>(l.end), cast<int>(l.stride));
    d.m_EndMask = l.end_mask;
    d.m_DataLayout = armnn::DataLayout::NCHW;
    return net.AddStridedSliceLayer(d, name);
  }
  armnn::IConnectableLayer* operator()(const ConcatLayer& l) const {
    std::vector<armnn::TensorShape> shapes;
    for (const Shape& s : l.shapes) shapes.push_back(tensor_info(s).GetShape());
    return net.AddConcatLayer(
        armnn::CreateDescriptorForConcatenation(shapes.begin(), shapes.end(), static_cast<unsigned int>(l.axis)), name);
  }
  armnn::IConnectableLayer* operator()(const PadLayer& l) const {
    std::vector<std::pair<unsigned int, unsigned int>> list;
    for (size_t d = 0; d < l.begin.size(); ++d)
      list.emplace_back(static_cast<unsigned int>(l.begin[d]), static_cast<unsigned int>(l.end[d]));
    return net.AddPadLayer(armnn::PadDescriptor(list, l.value), name);
  }
  armnn::IConnectableLayer* operator()(const FullyConnectedLayer& l) const {
    armnn::FullyConnectedDescriptor d;
    d.m_BiasEnabled = l.bias.has_value();
    d.m_TransposeWeightMatrix = true;  // weights [outputs, inputs]
    return net.AddFullyConnectedLayer(d, const_tensor(l.w), optional_tensor(l.bias), name);
  }
  armnn::IConnectableLayer* operator()(const SoftmaxLayer& l) const {
    armnn::SoftmaxDescriptor d;
    if (l.beta) d.m_Beta = 1.0f;
    d.m_Axis = static_cast<int>(l.axis);
    return l.log ? net.AddLogSoftmaxLayer(d, name) : net.AddSoftmaxLayer(d, name);
  }
  armnn::IConnectableLayer* operator()(const ConvLayer& l) const {
    if (l.kind == ConvKind::TransposeConvolution2d) {
      armnn::TransposeConvolution2dDescriptor d;
      set_geometry(d, l.geometry);
      d.m_BiasEnabled = l.bias_enabled;
      return net.AddTransposeConvolution2dLayer(d, const_tensor(l.w), optional_tensor(l.bias), name);
    }
    auto conv = [&](auto d) {
      set_geometry(d, l.geometry);
      d.m_DilationY = u(l.dilation_y);
      d.m_DilationX = u(l.dilation_x);
      d.m_BiasEnabled = l.bias_enabled;
      return d;
    };
    if (l.kind == ConvKind::DepthwiseConvolution2d)
      return net.AddDepthwiseConvolution2dLayer(conv(armnn::DepthwiseConvolution2dDescriptor{}), const_tensor(l.w),
                                                optional_tensor(l.bias), name);
    return net.AddConvolution2dLayer(conv(armnn::Convolution2dDescriptor{}), const_tensor(l.w), optional_tensor(l.bias),
                                     name);
  }
  armnn::IConnectableLayer* operator()(const PoolLayer& l) const {
    armnn::Pooling2dDescriptor d;
    d.m_PoolType = l.max ? armnn::PoolingAlgorithm::Max : armnn::PoolingAlgorithm::Average;
    d.m_PoolHeight = u(l.height);
    d.m_PoolWidth = u(l.width);
    d.m_StrideX = d.m_StrideY = 1;
    d.m_DataLayout = armnn::DataLayout::NCHW;
    if (l.full) {
      set_geometry(d, l.full->geometry);
      d.m_OutputShapeRounding = l.full->ceil ? armnn::OutputShapeRounding::Ceiling : armnn::OutputShapeRounding::Floor;
      d.m_PaddingMethod = l.full->ignore_value ? armnn::PaddingMethod::IgnoreValue : armnn::PaddingMethod::Exclude;
    }
    return net.AddPooling2dLayer(d, name);
  }
  armnn::IConnectableLayer* operator()(const BatchNormLayer& l) const {
    armnn::BatchNormalizationDescriptor d;
    d.m_Eps = l.eps;
    d.m_DataLayout = armnn::DataLayout::NCHW;
    return net.AddBatchNormalizationLayer(d, const_tensor(l.mean), const_tensor(l.var), const_tensor(l.beta),
                                          const_tensor(l.gamma), name);
  }
  armnn::IConnectableLayer* operator()(const LrnLayer& l) const {
    armnn::NormalizationDescriptor d;
    d.m_NormChannelType = armnn::NormalizationAlgorithmChannel::Across;
    d.m_NormMethodType = armnn::NormalizationAlgorithmMethod::LocalBrightness;
    d.m_NormSize = u(l.size);
    d.m_Alpha = l.alpha;
    d.m_Beta = l.beta;
    d.m_K = l.k;
    d.m_DataLayout = armnn::DataLayout::NCHW;
    return net.AddNormalizationLayer(d, name);
  }
  armnn::IConnectableLayer* operator()(const QuantizeLayer&) const { return net.AddQuantizeLayer(name); }
  armnn::IConnectableLayer* operator()(const DequantizeLayer&) const { return net.AddDequantizeLayer(name); }
  armnn::IConnectableLayer* operator()(const ResizeLayer& l) const {
    armnn::ResizeDescriptor d;
    d.m_Method = l.bilinear ? armnn::ResizeMethod::Bilinear : armnn::ResizeMethod::NearestNeighbor;
    d.m_TargetHeight = u(l.height);
    d.m_TargetWidth = u(l.width);
    d.m_DataLayout = armnn::DataLayout::NCHW;
    d.m_HalfPixelCenters = l.half_pixel;
    d.m_AlignCorners = l.align_corners;
    return net.AddResizeLayer(d, name);
  }
};

}  // namespace

int ArmnnSink::finish(armnn::IConnectableLayer* layer, const std::vector<Value>& inputs, const Shape& out,
                      const Quant& q) {
  for (size_t i = 0; i < inputs.size(); ++i) slot(inputs[i]).Connect(layer->GetInputSlot(static_cast<unsigned int>(i)));
  layer->GetOutputSlot(0).SetTensorInfo(tensor_info(out, q));
  slots_.push_back(&layer->GetOutputSlot(0));
  return static_cast<int>(slots_.size() - 1);
}

int ArmnnSink::input(size_t index, const std::string& name, const Shape& shape, const Quant& q) {
  return finish(net_.AddInputLayer(static_cast<armnn::LayerBindingId>(index), name.c_str()), {}, shape, q);
}

int ArmnnSink::layer(const Layer& layer, const std::vector<Value>& inputs, const Shape& out, const Quant& q,
                     const std::string& name) {
  return finish(std::visit(Adder{net_, name.c_str(), buffers_}, layer), inputs, out, q);
}

void ArmnnSink::output(size_t index, const std::string& name, const Value& v) {
  armnn::IConnectableLayer* l = net_.AddOutputLayer(static_cast<armnn::LayerBindingId>(index), name.c_str());
  slot(v).Connect(l->GetInputSlot(0));
}

}  // namespace quorum::backends::armnn_backend

namespace quorum::backends::armnn_lower {

std::vector<std::string> library_sink_calls(const ir::Graph& g) {
  for (const auto& n : g.nodes)
    if (const Support s = supports(g, n); !s.ok) return {"refused: " + s.reason};
  armnn::INetworkPtr net = armnn::INetwork::Create();
  armnn_backend::ArmnnSink sink(*net);
  RecordingSink recorder(sink);
  lower(recorder, g);
  return recorder.calls();
}

}  // namespace quorum::backends::armnn_lower
