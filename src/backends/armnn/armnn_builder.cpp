// The network builder: Quorum values become ArmNN output slots, each with the TensorInfo computed
// from the Quorum graph's types (ArmNN's Optimize validates every one against its own inference).
#include <algorithm>
#include <sstream>

#include "backends/armnn/armnn_common.h"

#include <armnn/TypesUtils.hpp>
#include "core/error.h"

namespace quorum::backends::armnn_backend {

armnn::TensorInfo tensor_info(const Shape& s) {
  std::vector<unsigned int> dims;
  for (int64_t d : s) dims.push_back(static_cast<unsigned int>(d));
  if (dims.empty()) dims.push_back(1);
  return armnn::TensorInfo(armnn::TensorShape(static_cast<unsigned int>(dims.size()), dims.data()),
                           armnn::DataType::Float32);
}

Value Builder::value(const std::string& name) {
  auto it = values_.find(name);
  if (it != values_.end()) return it->second;
  if (!g_.is_initializer(name)) throw core::UserError("ArmNN backend: value '" + name + "' is not defined yet");
  const Value v = constant(floats(name), g_.initializers.at(name).shape());
  values_[name] = v;
  return v;
}

std::vector<float> Builder::floats(const std::string& initializer) const {
  const core::Tensor& t = g_.initializers.at(initializer);
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = static_cast<float>(t.get(i));
  return out;
}

Support layer_budget(const ir::Node& n, int64_t layers, const std::string& what) {
  if (layers <= kMaxLayersPerNode) return Support::yes();
  return Support::no(n.op + " " + what + " takes " + std::to_string(layers) +
                     " ArmNN layers; the optimizer's time grows faster than the square of the layer count (2.2 s "
                     "for 5 040 layers), so more than " + std::to_string(kMaxLayersPerNode) + " per node are not built");
}

std::string Builder::layer_name(const std::string& what, const std::string& detail) {
  lowering_.note(node_, detail.empty() ? what : what + " " + detail);
  return node_ + "/" + what + "#" + std::to_string(counter_++);
}

Value Builder::finish(armnn::IConnectableLayer* layer, const std::vector<Value>& inputs, const Shape& out) {
  for (size_t i = 0; i < inputs.size(); ++i) inputs[i].slot->Connect(layer->GetInputSlot(static_cast<unsigned int>(i)));
  layer->GetOutputSlot(0).SetTensorInfo(tensor_info(out));
  return Value{&layer->GetOutputSlot(0), out};
}

Value Builder::constant(const std::vector<float>& data, const Shape& shape) {
  const armnn::ConstTensor t(tensor_info(shape), data);
  return finish(net_.AddConstantLayer(t, layer_name("const").c_str()), {}, shape);
}

Value Builder::scalar_like(float v, size_t rank) { return constant({v}, Shape(std::max<size_t>(rank, 1), 1)); }

Value Builder::reshape(const Value& x, const Shape& shape) {
  if (tensor_info(x.shape).GetShape() == tensor_info(shape).GetShape()) return Value{x.slot, shape};
  const armnn::ReshapeDescriptor d(tensor_info(shape).GetShape());
  return finish(net_.AddReshapeLayer(d, layer_name("reshape").c_str()), {x}, shape);
}

Value Builder::transpose(const Value& x, const std::vector<size_t>& perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == i;
  if (identity) return x;
  std::vector<unsigned int> map(perm.begin(), perm.end());
  Shape out;
  for (size_t p : perm) out.push_back(x.shape[p]);
  const armnn::TransposeDescriptor d(armnn::PermutationVector(map.data(), static_cast<unsigned int>(map.size())));
  return finish(net_.AddTransposeLayer(d, layer_name("transpose").c_str()), {x}, out);
}

Value Builder::activation(const Value& x, armnn::ActivationFunction f, float a, float b) {
  const armnn::ActivationDescriptor d(f, a, b);
  return finish(net_.AddActivationLayer(d, layer_name("activation", armnn::GetActivationFunctionAsCString(f)).c_str()),
                {x}, x.shape);
}

Value Builder::unary(const Value& x, armnn::UnaryOperation op) {
  const armnn::ElementwiseUnaryDescriptor d(op);
  return finish(net_.AddElementwiseUnaryLayer(d, layer_name("unary", armnn::GetUnaryOperationAsCString(op)).c_str()),
                {x}, x.shape);
}

Value Builder::binary(const std::string& op, const Value& a, const Value& b) {
  const size_t rank = std::max<size_t>({a.shape.size(), b.shape.size(), 1});
  auto padded = [&](const Value& v) {
    Shape s(rank - v.shape.size(), 1);
    s.insert(s.end(), v.shape.begin(), v.shape.end());
    return reshape(v, s);
  };
  const Value pa = padded(a), pb = padded(b);
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) out[i] = pa.shape[i] == 1 ? pb.shape[i] : pa.shape[i];
  const std::string name = layer_name(op);
  armnn::IConnectableLayer* layer = nullptr;
  if (op == "add") layer = net_.AddAdditionLayer(name.c_str());
  else if (op == "sub") layer = net_.AddSubtractionLayer(name.c_str());
  else if (op == "mul") layer = net_.AddMultiplicationLayer(name.c_str());
  else if (op == "div") layer = net_.AddDivisionLayer(name.c_str());
  else if (op == "max") layer = net_.AddMaximumLayer(name.c_str());
  else if (op == "min") layer = net_.AddMinimumLayer(name.c_str());
  else throw core::UserError("ArmNN backend: unknown binary operation '" + op + "'");
  return finish(layer, {pa, pb}, out);
}

Value Builder::mean(const Value& x, const std::vector<size_t>& axes, bool keep_dims) {
  Shape out;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    const bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!reduced) out.push_back(x.shape[d]);
    else if (keep_dims) out.push_back(1);
  }
  const armnn::MeanDescriptor desc(std::vector<unsigned int>(axes.begin(), axes.end()), keep_dims);
  return finish(net_.AddMeanLayer(desc, layer_name("mean").c_str()), {x}, out);
}

Value Builder::slice(const Value& x, const Ints& begin, const Shape& size) {
  const armnn::SliceDescriptor d(std::vector<unsigned int>(begin.begin(), begin.end()),
                                 std::vector<unsigned int>(size.begin(), size.end()));
  return finish(net_.AddSliceLayer(d, layer_name("slice").c_str()), {x}, size);
}

Value Builder::concat(const std::vector<Value>& parts, size_t axis) {
  if (parts.size() == 1) return parts[0];
  std::vector<armnn::TensorShape> shapes;
  for (const Value& p : parts) shapes.push_back(tensor_info(p.shape).GetShape());
  const armnn::OriginsDescriptor d =
      armnn::CreateDescriptorForConcatenation(shapes.begin(), shapes.end(), static_cast<unsigned int>(axis));
  Shape out = parts[0].shape;
  out[axis] = 0;
  for (const Value& p : parts) out[axis] += p.shape[axis];
  return finish(net_.AddConcatLayer(d, layer_name("concat").c_str()), parts, out);
}

Value Builder::pad(const Value& x, const Ints& begin, const Ints& end, float value) {
  std::vector<std::pair<unsigned int, unsigned int>> list;
  Shape out = x.shape;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    list.emplace_back(static_cast<unsigned int>(begin[d]), static_cast<unsigned int>(end[d]));
    out[d] += begin[d] + end[d];
  }
  const armnn::PadDescriptor desc(list, value);
  return finish(net_.AddPadLayer(desc, layer_name("pad").c_str()), {x}, out);
}

const Shape& in_shape(const ir::Graph& g, const ir::Node& n, size_t i) { return g.types.at(n.inputs.at(i)).shape; }
const Shape& out_shape(const ir::Graph& g, const ir::Node& n, size_t i) { return g.types.at(n.outputs.at(i)).shape; }

std::string str(const Ints& v) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << ']';
  return os.str();
}

}  // namespace quorum::backends::armnn_backend
