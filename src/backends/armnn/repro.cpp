// ArmNN's reproducer: one C++ file (repro.cpp) that builds the finding's model as an
// armnn::INetwork layer by layer, exactly as Quorum's ArmNN backend does (the same layers, in the
// same order, with the same descriptors and TensorInfos; every node output bound to an output
// layer), optimizes it for CpuRef, runs it with EnqueueWorkload and compares with the float64
// reference. The network-building code is generated here by `Gen`, a text twin of the backend's
// Builder (armnn_builder.cpp): each helper emits the ArmNN calls the Builder makes. Inputs,
// weights and expected values are embedded as exact hex-float arrays. No ArmNN header is included.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "backends/repro.h"
#include "ops/kernel_util.h"

namespace quorum::backends {
namespace {

using core::Shape;
using Ints = std::vector<int64_t>;
using ops::Pads;

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
struct Val {
  std::string var;  // the generated program's armnn::IOutputSlot* variable
  Shape shape;
};

// Emits what armnn_backend::Builder does, as C++ text.
class Gen {
 public:
  explicit Gen(const ir::Graph& g) : g_(g) {}
  std::ostringstream data, code;

  const ir::Graph& graph() const { return g_; }
  Val value(const std::string& name) {
    auto it = values_.find(name);
    if (it != values_.end()) return it->second;
    if (!g_.is_initializer(name)) throw ReproUnsupported("value '" + name + "' is not defined before its use");
    const Val v = constant(floats(name), g_.initializers.at(name).shape(), identifier(name));
    values_[name] = v;
    return v;
  }
  void define(const std::string& name, const Val& v) {
    values_[name] = v;
    code << "  // Quorum value '" << name << "' is " << v.var << " " << core::to_string(v.shape) << "\n";
  }
  std::vector<float> floats(const std::string& init) const {
    const auto it = g_.initializers.find(init);
    if (it == g_.initializers.end())
      throw ReproUnsupported("ArmNN takes weights as constants when it builds the network: '" + init +
                             "' is a graph input or computed");
    std::vector<float> out;
    for (double v : it->second.values()) out.push_back(static_cast<float>(v));
    return out;
  }
  std::string layer_name(const std::string& what) { return node_ + "/" + what + "#" + std::to_string(counter_++); }
  void set_node(const ir::Node& n) {
    node_ = n.name;
    code << "\n  // node '" << n.name << "': " << n.op << " " << core::to_string(n.attrs) << "\n";
  }
  void comment(const std::string& s) { code << "  // " << s << "\n"; }

  // A static float array holding `v`; returns its name.
  std::string array(const std::string& hint, const std::vector<float>& v) {
    std::string name = "w_" + identifier(hint);
    if (arrays_.count(name)) name += "_" + std::to_string(arrays_.size());
    arrays_.insert(name);
    data << "static const float " << name << "[" << std::max<size_t>(v.size(), 1) << "] = {";
    for (size_t i = 0; i < v.size(); ++i) data << (i % 8 == 0 ? "\n    " : "") << fl(v[i]) << (i + 1 < v.size() ? ", " : "");
    if (v.empty()) data << "0";
    data << "};\n";
    return name;
  }
  std::string const_tensor(const std::string& hint, const std::vector<float>& v, const Shape& s) {
    return "armnn::ConstTensor(info(" + dims(s) + "), " + array(hint, v) + ")";
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
  // Optional bias: declares it and returns its name.
  std::string bias(const std::string& hint, const std::vector<float>* v, const Shape& s) {
    const std::string b = "b" + std::to_string(ndesc_++);
    code << "  armnn::Optional<armnn::ConstTensor> " << b << ";\n";
    if (v) code << "  " << b << " = " << const_tensor(hint, *v, s) << ";\n";
    return b;
  }

  // `add` is the net->Add...Layer(...) call without the name argument's closing: "AddPadLayer(d3, "
  Val finish(const std::string& add, const std::string& what, const std::vector<Val>& inputs, const Shape& out) {
    const std::string v = "v" + std::to_string(nvar_++);
    code << "  armnn::IOutputSlot* " << v << " = connect(net->" << add << quoted(layer_name(what)) << "), {";
    for (size_t i = 0; i < inputs.size(); ++i) code << (i ? ", " : "") << inputs[i].var;
    code << "}, " << dims(out) << ");\n";
    return Val{v, out};
  }
  Val finish_input(size_t id, const std::string& name, const Shape& s) {
    const std::string v = "v" + std::to_string(nvar_++);
    code << "  armnn::IOutputSlot* " << v << " = connect(net->AddInputLayer(" << id << ", " << quoted(name)
         << "), {}, " << dims(s) << ");\n";
    return Val{v, s};
  }

  Val constant(const std::vector<float>& d, const Shape& shape, const std::string& hint = "const") {
    return finish("AddConstantLayer(" + const_tensor(hint, d, shape) + ", ", "const", {}, shape);
  }
  Val scalar_like(float v, size_t rank) { return constant({v}, Shape(std::max<size_t>(rank, 1), 1), "scalar"); }
  static std::vector<int64_t> armnn_dims(const Shape& s) { return s.empty() ? Shape{1} : s; }
  Val reshape(const Val& x, const Shape& shape) {
    if (armnn_dims(x.shape) == armnn_dims(shape)) return Val{x.var, shape};
    return finish("AddReshapeLayer(armnn::ReshapeDescriptor(info(" + dims(shape) + ").GetShape()), ", "reshape", {x}, shape);
  }
  Val transpose(const Val& x, const std::vector<size_t>& perm) {
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == i;
    if (identity) return x;
    Shape out;
    for (size_t p : perm) out.push_back(x.shape[p]);
    return finish("AddTransposeLayer(armnn::TransposeDescriptor(armnn::PermutationVector(" + list(perm) + ")), ",
                  "transpose", {x}, out);
  }
  Val activation(const Val& x, const std::string& f, float a = 0, float b = 0) {
    return finish("AddActivationLayer(armnn::ActivationDescriptor(armnn::ActivationFunction::" + f + ", " + fl(a) + ", " +
                      fl(b) + "), ",
                  "activation", {x}, x.shape);
  }
  Val unary(const Val& x, const std::string& op) {
    return finish("AddElementwiseUnaryLayer(armnn::ElementwiseUnaryDescriptor(armnn::UnaryOperation::" + op + "), ",
                  "unary", {x}, x.shape);
  }
  Val binary(const std::string& op, const Val& a, const Val& b) {
    const size_t rank = std::max<size_t>({a.shape.size(), b.shape.size(), 1});
    auto padded = [&](const Val& v) {
      Shape s(rank - v.shape.size(), 1);
      s.insert(s.end(), v.shape.begin(), v.shape.end());
      return reshape(v, s);
    };
    const Val pa = padded(a), pb = padded(b);
    Shape out(rank);
    for (size_t i = 0; i < rank; ++i) out[i] = pa.shape[i] == 1 ? pb.shape[i] : pa.shape[i];
    static const std::map<std::string, std::string> layers = {{"add", "Addition"}, {"sub", "Subtraction"},
                                                              {"mul", "Multiplication"}, {"div", "Division"},
                                                              {"max", "Maximum"}, {"min", "Minimum"}};
    return finish("Add" + layers.at(op) + "Layer(", op, {pa, pb}, out);
  }
  Val mean(const Val& x, const std::vector<size_t>& axes, bool keep) {
    Shape out;
    for (size_t d = 0; d < x.shape.size(); ++d) {
      const bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
      if (!reduced) out.push_back(x.shape[d]);
      else if (keep) out.push_back(1);
    }
    return finish("AddMeanLayer(armnn::MeanDescriptor(std::vector<unsigned int>" + list(axes) + ", " +
                      (keep ? "true" : "false") + "), ",
                  "mean", {x}, out);
  }
  Val slice(const Val& x, const Ints& begin, const Shape& size) {
    return finish("AddSliceLayer(armnn::SliceDescriptor(std::vector<unsigned int>" + list(begin) +
                      ", std::vector<unsigned int>" + list(size) + "), ",
                  "slice", {x}, size);
  }
  Val concat(const std::vector<Val>& parts, size_t axis) {
    if (parts.size() == 1) return parts[0];
    const std::string s = "s" + std::to_string(ndesc_++);
    code << "  std::vector<armnn::TensorShape> " << s << " = {";
    for (size_t i = 0; i < parts.size(); ++i) code << (i ? ", " : "") << "info(" << dims(parts[i].shape) << ").GetShape()";
    code << "};\n";
    const std::string d =
        desc("OriginsDescriptor", "armnn::CreateDescriptorForConcatenation(" + s + ".begin(), " + s + ".end(), " + u(axis) + ")");
    Shape out = parts[0].shape;
    out[axis] = 0;
    for (const Val& p : parts) out[axis] += p.shape[axis];
    return finish("AddConcatLayer(" + d + ", ", "concat", parts, out);
  }
  Val pad(const Val& x, const Ints& begin, const Ints& end, float value) {
    std::ostringstream l;
    l << '{';
    Shape out = x.shape;
    for (size_t d = 0; d < x.shape.size(); ++d) {
      l << (d ? ", " : "") << "{" << begin[d] << "u, " << end[d] << "u}";
      out[d] += begin[d] + end[d];
    }
    l << '}';
    const std::string d = desc("PadDescriptor", "std::vector<std::pair<unsigned int, unsigned int>>" + l.str() + ", " + fl(value));
    return finish("AddPadLayer(" + d + ", ", "pad", {x}, out);
  }

 private:
  const ir::Graph& g_;
  std::map<std::string, Val> values_;
  std::set<std::string> arrays_;
  std::string node_;
  int counter_ = 0, nvar_ = 0, ndesc_ = 0;
};

const Shape& in_shape(const ir::Graph& g, const ir::Node& n, size_t i) { return g.types.at(n.inputs.at(i)).shape; }
const Shape& out_shape(const ir::Graph& g, const ir::Node& n, size_t i = 0) { return g.types.at(n.outputs.at(i)).shape; }
float f(const ir::Node& n, const char* a) { return static_cast<float>(core::attr_f(n.attrs, a)); }

// ---- elementwise (ops_elementwise.cpp) -----------------------------------------------------------

constexpr float kSeluAlpha = 1.6732632423543772f;
constexpr float kSeluGamma = 1.0507009873554805f;

bool pow_mapped(double e) { return e == 1 || e == 2 || e == 3 || e == 0.5 || e == 1.5 || e == -1 || e == -0.5; }

// Returns false when `op` is not one of these.
bool build_elementwise(Gen& b, const ir::Node& n) {
  static const std::map<std::string, std::pair<std::string, std::pair<float, float>>> acts = {
      {"relu", {"ReLu", {0, 0}}},       {"relu6", {"BoundedReLu", {6, 0}}}, {"sigmoid", {"Sigmoid", {0, 0}}},
      {"tanh", {"TanH", {1, 1}}},       {"softplus", {"SoftReLu", {0, 0}}}, {"square", {"Square", {0, 0}}},
      {"hardswish", {"HardSwish", {0, 0}}}};
  static const std::map<std::string, std::string> unaries = {
      {"abs", "Abs"}, {"exp", "Exp"}, {"sqrt", "Sqrt"}, {"rsqrt", "Rsqrt"}, {"neg", "Neg"}};
  static const std::map<std::string, std::string> binaries = {{"add", "add"}, {"sub", "sub"},     {"mul", "mul"},
                                                              {"div", "div"}, {"maximum", "max"}, {"minimum", "min"}};
  const std::string& op = n.op;
  if (binaries.count(op)) {
    b.define(n.outputs[0], b.binary(binaries.at(op), b.value(n.inputs[0]), b.value(n.inputs[1])));
    return true;
  }
  if (op == "sum") {
    Val acc = b.value(n.inputs[0]);
    for (size_t i = 1; i < n.inputs.size(); ++i) acc = b.binary("add", acc, b.value(n.inputs[i]));
    b.define(n.outputs[0], acc);
    return true;
  }
  if (op == "concat") {
    std::vector<Val> parts;
    for (const auto& in : n.inputs) parts.push_back(b.value(in));
    b.define(n.outputs[0], b.concat(parts, ops::norm_axis(core::attr_i(n.attrs, "axis"), parts[0].shape.size())));
    return true;
  }
  static const std::set<std::string> others = {"clip", "leaky_relu", "elu", "selu", "hard_sigmoid", "softsign", "reciprocal", "pow"};
  if (!acts.count(op) && !unaries.count(op) && !others.count(op)) return false;
  const Val x = b.value(n.inputs[0]);
  Val y;
  if (acts.count(op)) {
    const auto& a = acts.at(op);
    y = b.activation(x, a.first, a.second.first, a.second.second);
  } else if (unaries.count(op)) {
    y = b.unary(x, unaries.at(op));
  } else if (op == "clip") {
    b.comment("BoundedReLu is min(a, max(b, x))");
    y = b.activation(x, "BoundedReLu", f(n, "max"), f(n, "min"));
  } else if (op == "leaky_relu") {
    y = b.activation(x, "LeakyReLu", f(n, "alpha"));
  } else if (op == "elu") {
    y = b.activation(x, "Elu", f(n, "alpha"));
  } else if (op == "selu") {
    y = b.activation(b.activation(x, "Elu", kSeluAlpha), "Linear", kSeluGamma, 0);
  } else if (op == "hard_sigmoid") {
    b.comment("min(1, max(0, alpha * x + beta)): Linear then BoundedReLu");
    y = b.activation(b.activation(x, "Linear", f(n, "alpha"), f(n, "beta")), "BoundedReLu", 1, 0);
  } else if (op == "softsign") {
    y = b.binary("div", x, b.activation(b.unary(x, "Abs"), "Linear", 1, 1));
  } else if (op == "reciprocal") {
    y = b.binary("div", b.scalar_like(1, x.shape.size()), x);
  } else {  // pow
    const double e = core::attr_f(n.attrs, "exponent");
    if (!pow_mapped(e))
      throw ReproUnsupported("ArmNN 20.08 has no power layer; exponent " + std::to_string(e) + " is not composed");
    if (e == 1) y = b.activation(x, "Linear", 1, 0);
    else if (e == 2) y = b.activation(x, "Square");
    else if (e == 3) y = b.binary("mul", b.activation(x, "Square"), x);
    else if (e == 0.5) y = b.unary(x, "Sqrt");
    else if (e == 1.5) y = b.binary("mul", x, b.unary(x, "Sqrt"));
    else if (e == -1) y = b.binary("div", b.scalar_like(1, x.shape.size()), x);
    else y = b.unary(x, "Rsqrt");
  }
  b.define(n.outputs[0], y);
  return true;
}

// ---- spatial (ops_spatial.cpp) -------------------------------------------------------------------

Shape as_4d(const Shape& s) { return s.size() == 3 ? Shape{s[0], s[1], 1, s[2]} : s; }
Ints as_2d(const Ints& v, int64_t neutral) { return v.size() == 1 ? Ints{neutral, v[0]} : v; }

Pads resolve(const ir::Node& n, const Shape& x, const Ints& eff, const Ints& strides) {
  return ops::resolve_pads(core::attr_s(n.attrs, "auto_pad"), core::attr_ints(n.attrs, "pads"), x, eff, strides);
}

void geometry(Gen& b, const std::string& d, const Ints& strides, const Pads& p) {
  b.set(d, "m_StrideY", u(strides[0]));
  b.set(d, "m_StrideX", u(strides[1]));
  b.set(d, "m_PadTop", u(p.begin[0]));
  b.set(d, "m_PadLeft", u(p.begin[1]));
  b.set(d, "m_PadBottom", u(p.end[0]));
  b.set(d, "m_PadRight", u(p.end[1]));
  b.set(d, "m_DataLayout", "armnn::DataLayout::NCHW");
}

void build_conv(Gen& b, const ir::Node& n) {
  const ir::Graph& g = b.graph();
  const Shape x_shape = in_shape(g, n, 0);
  const bool one_d = x_shape.size() == 3;
  const Ints strides = as_2d(core::attr_ints(n.attrs, "strides"), 1);
  const Ints dil = as_2d(core::attr_ints(n.attrs, "dilations"), 1);
  const Ints& k_raw = core::attr_ints(n.attrs, "kernel_shape");
  const Ints& d_raw = core::attr_ints(n.attrs, "dilations");
  Ints eff(k_raw.size());
  for (size_t i = 0; i < k_raw.size(); ++i) eff[i] = d_raw[i] * (k_raw[i] - 1) + 1;
  Pads p = resolve(n, x_shape, eff, core::attr_ints(n.attrs, "strides"));
  if (one_d) p = Pads{{0, p.begin[0]}, {0, p.end[0]}};
  const int64_t group = core::attr_i(n.attrs, "group");
  const bool has_bias = core::attr_i(n.attrs, "bias") == 1;
  const Val x = b.reshape(b.value(n.inputs[0]), as_4d(x_shape));
  const Shape y4 = as_4d(out_shape(g, n));
  const Shape ws = as_4d(g.types.at(n.inputs[1]).shape);
  const std::vector<float> w = b.floats(n.inputs[1]);
  const std::vector<float> bias = has_bias ? b.floats(n.inputs[2]) : std::vector<float>{};
  const int64_t C = x.shape[1], O = ws[0];
  const std::string wname = n.inputs[1], bname = has_bias ? n.inputs[2] : "";
  Val y;
  if (group > 1 && group == C) {
    b.comment("depthwise: weights rearranged from ONNX [C*M, 1, kH, kW] to ArmNN's [M, C, kH, kW]");
    const int64_t M = O / C, khw = ws[2] * ws[3];
    std::vector<float> wd(w.size());
    for (int64_t c = 0; c < C; ++c)
      for (int64_t m = 0; m < M; ++m)
        std::copy_n(w.begin() + (c * M + m) * khw, khw, wd.begin() + (m * C + c) * khw);
    const std::string d = b.desc("DepthwiseConvolution2dDescriptor");
    geometry(b, d, strides, p);
    b.set(d, "m_DilationY", u(dil[0]));
    b.set(d, "m_DilationX", u(dil[1]));
    b.set(d, "m_BiasEnabled", has_bias ? "true" : "false");
    const std::string bt = b.bias(bname, has_bias ? &bias : nullptr, Shape{O});
    y = b.finish("AddDepthwiseConvolution2dLayer(" + d + ", " + b.const_tensor(wname, wd, Shape{M, C, ws[2], ws[3]}) + ", " +
                     bt + ", ",
                 "depthwise", {x}, y4);
  } else {
    if (group > 1) b.comment("one Convolution2d per group over its slice of the input channels, joined along C");
    const int64_t cg = C / group, og = O / group, row = ws[1] * ws[2] * ws[3];
    std::vector<Val> parts;
    for (int64_t gi = 0; gi < group; ++gi) {
      const Val xs = group == 1 ? x : b.slice(x, {0, gi * cg, 0, 0}, Shape{x.shape[0], cg, x.shape[2], x.shape[3]});
      const std::string d = b.desc("Convolution2dDescriptor");
      geometry(b, d, strides, p);
      b.set(d, "m_DilationY", u(dil[0]));
      b.set(d, "m_DilationX", u(dil[1]));
      b.set(d, "m_BiasEnabled", has_bias ? "true" : "false");
      const std::vector<float> wg(w.begin() + gi * og * row, w.begin() + (gi + 1) * og * row);
      std::vector<float> bg;
      if (has_bias) bg.assign(bias.begin() + gi * og, bias.begin() + (gi + 1) * og);
      const std::string bt = b.bias(bname, has_bias ? &bg : nullptr, Shape{og});
      parts.push_back(b.finish("AddConvolution2dLayer(" + d + ", " + b.const_tensor(wname, wg, Shape{og, cg, ws[2], ws[3]}) +
                                   ", " + bt + ", ",
                               "conv", {xs}, Shape{y4[0], og, y4[2], y4[3]}));
    }
    y = b.concat(parts, 1);
  }
  b.define(n.outputs[0], b.reshape(y, out_shape(g, n)));
}

void build_conv_transpose(Gen& b, const ir::Node& n) {
  const ir::Graph& g = b.graph();
  const Ints& dl = core::attr_ints(n.attrs, "dilations");
  if (std::any_of(dl.begin(), dl.end(), [](int64_t d) { return d != 1; }))
    throw ReproUnsupported("ArmNN 20.08 TransposeConvolution2d has no dilation");
  const Val x = b.value(n.inputs[0]);
  const Ints& strides = core::attr_ints(n.attrs, "strides");
  const Ints& pads = core::attr_ints(n.attrs, "pads");
  const Ints& out_pad = core::attr_ints(n.attrs, "output_padding");
  const int64_t group = core::attr_i(n.attrs, "group");
  const bool has_bias = core::attr_i(n.attrs, "bias") == 1;
  const Shape ws = g.types.at(n.inputs[1]).shape;
  const std::vector<float> w = b.floats(n.inputs[1]);
  const Shape y_shape = out_shape(g, n);
  const int64_t C = x.shape[1], cg = C / group, og = ws[1], khw = ws[2] * ws[3];
  Pads p{{pads[0], pads[1]}, {pads[2], pads[3]}};
  Ints extra(2, 0);
  for (size_t i = 0; i < 2; ++i) {
    const int64_t keep = std::min(out_pad[i], p.end[i]);
    p.end[i] -= keep;
    extra[i] = out_pad[i] - keep;
  }
  const bool bias_in_layer = has_bias && extra[0] == 0 && extra[1] == 0;
  const std::vector<float> bias = has_bias ? b.floats(n.inputs[2]) : std::vector<float>{};
  const Shape part{1, og, y_shape[2] - extra[0], y_shape[3] - extra[1]};
  b.comment("weights rearranged from ONNX [I, O/group, kH, kW] to ArmNN's [O, I, kH, kW]; one layer per sample and group");
  auto one_sample = [&](const Val& xn) {
    std::vector<Val> parts;
    for (int64_t gi = 0; gi < group; ++gi) {
      const Val xs = group == 1 ? xn : b.slice(xn, {0, gi * cg, 0, 0}, Shape{1, cg, x.shape[2], x.shape[3]});
      std::vector<float> wg(static_cast<size_t>(og * cg * khw));
      for (int64_t o = 0; o < og; ++o)
        for (int64_t i = 0; i < cg; ++i)
          std::copy_n(w.begin() + ((gi * cg + i) * og + o) * khw, khw, wg.begin() + (o * cg + i) * khw);
      const std::string d = b.desc("TransposeConvolution2dDescriptor");
      geometry(b, d, strides, p);
      b.set(d, "m_BiasEnabled", bias_in_layer ? "true" : "false");
      std::vector<float> bg;
      if (bias_in_layer) bg.assign(bias.begin() + gi * og, bias.begin() + (gi + 1) * og);
      const std::string bt = b.bias(has_bias ? n.inputs[2] : "", bias_in_layer ? &bg : nullptr, Shape{og});
      parts.push_back(b.finish("AddTransposeConvolution2dLayer(" + d + ", " +
                                   b.const_tensor(n.inputs[1], wg, Shape{og, cg, ws[2], ws[3]}) + ", " + bt + ", ",
                               "conv_transpose", {xs}, part));
    }
    return b.concat(parts, 1);
  };
  const int64_t N = x.shape[0];
  std::vector<Val> samples;
  for (int64_t s = 0; s < N; ++s)
    samples.push_back(one_sample(N == 1 ? x : b.slice(x, {s, 0, 0, 0}, Shape{1, C, x.shape[2], x.shape[3]})));
  Val y = b.concat(samples, 0);
  if (!bias_in_layer && (extra[0] > 0 || extra[1] > 0)) {
    y = b.pad(y, {0, 0, 0, 0}, {0, 0, extra[0], extra[1]}, 0.0f);
    if (has_bias) y = b.binary("add", y, b.constant(bias, Shape{1, y_shape[1], 1, 1}, n.inputs[2]));
  }
  b.define(n.outputs[0], y);
}

int64_t armnn_pool_size(int64_t in, int64_t lo, int64_t hi, int64_t k, int64_t s, bool ceil_mode) {
  const double div = static_cast<double>(in + lo + hi - k) / static_cast<double>(s);
  int64_t size = static_cast<int64_t>(ceil_mode ? std::ceil(div) : std::floor(div)) + 1;
  if ((size - 1) * s >= in + lo) --size;
  return size;
}

void build_pool(Gen& b, const ir::Node& n) {
  const ir::Graph& g = b.graph();
  const Shape xs = in_shape(g, n, 0);
  const Ints& k_raw = core::attr_ints(n.attrs, "kernel_shape");
  const Ints& s_raw = core::attr_ints(n.attrs, "strides");
  Pads p = resolve(n, xs, k_raw, s_raw);
  if (xs.size() == 3) p = Pads{{0, p.begin[0]}, {0, p.end[0]}};
  const Ints k = as_2d(k_raw, 1), s = as_2d(s_raw, 1);
  const bool ceil_mode = core::attr_s(n.attrs, "auto_pad") == "NOTSET" && core::attr_i(n.attrs, "ceil_mode") == 1;
  const bool is_max = n.op.rfind("max_pool", 0) == 0;
  const Shape x4 = as_4d(xs);
  const Shape out{x4[0], x4[1], armnn_pool_size(x4[2], p.begin[0], p.end[0], k[0], s[0], ceil_mode),
                  armnn_pool_size(x4[3], p.begin[1], p.end[1], k[1], s[1], ceil_mode)};
  if (out != as_4d(out_shape(g, n)))
    throw ReproUnsupported("ArmNN's Pooling2d output shape " + core::to_string(out) + " differs from ONNX's " +
                           core::to_string(out_shape(g, n)));
  const Val x = b.reshape(b.value(n.inputs[0]), x4);
  const std::string d = b.desc("Pooling2dDescriptor");
  b.set(d, "m_PoolType", is_max ? "armnn::PoolingAlgorithm::Max" : "armnn::PoolingAlgorithm::Average");
  b.set(d, "m_PoolHeight", u(k[0]));
  b.set(d, "m_PoolWidth", u(k[1]));
  geometry(b, d, s, p);
  b.set(d, "m_OutputShapeRounding", ceil_mode ? "armnn::OutputShapeRounding::Ceiling" : "armnn::OutputShapeRounding::Floor");
  b.set(d, "m_PaddingMethod", !is_max && core::attr_i(n.attrs, "count_include_pad") == 1 ? "armnn::PaddingMethod::IgnoreValue"
                                                                                      : "armnn::PaddingMethod::Exclude");
  const Val y = b.finish("AddPooling2dLayer(" + d + ", ", "pool", {x}, out);
  b.define(n.outputs[0], b.reshape(y, out_shape(g, n)));
}

// One Pooling2d max window of 1 x `width` over [.., .., rows, width].
Val max_window(Gen& b, const Val& flat, int64_t width, const Shape& out, const std::string& what) {
  const std::string d = b.desc("Pooling2dDescriptor");
  b.set(d, "m_PoolType", "armnn::PoolingAlgorithm::Max");
  b.set(d, "m_PoolHeight", "1");
  b.set(d, "m_PoolWidth", u(width));
  b.set(d, "m_StrideX", "1");
  b.set(d, "m_StrideY", "1");
  b.set(d, "m_DataLayout", "armnn::DataLayout::NCHW");
  return b.finish("AddPooling2dLayer(" + d + ", ", what, {flat}, out);
}

void build_global_pool(Gen& b, const ir::Node& n) {
  const ir::Graph& g = b.graph();
  const Shape& x = in_shape(g, n, 0);
  const Val xv = b.value(n.inputs[0]);
  int64_t cells = 1;
  for (size_t d = 2; d < x.size(); ++d) cells *= x[d];
  if (n.op == "global_avg_pool") {
    b.define(n.outputs[0], b.reshape(b.mean(b.reshape(xv, Shape{x[0], x[1], cells}), {2}, true), out_shape(g, n)));
    return;
  }
  b.comment("max over all spatial cells: one Pooling2d window over [N, C, 1, cells]");
  const Val flat = b.reshape(xv, Shape{x[0], x[1], 1, cells});
  const Val y = max_window(b, flat, cells, Shape{x[0], x[1], 1, 1}, "global_max");
  b.define(n.outputs[0], b.reshape(y, out_shape(g, n)));
}

// Resize: the backend's coordinate-mode rules (ops_spatial.cpp).
enum Mode : unsigned { kDefault = 1, kHalfPixel = 2, kAlignCorners = 4, kAny = 7 };
struct AxisModes {
  unsigned modes = 0;
  std::string why;
};
bool half_pixel_ties(int64_t in, int64_t out) {
  for (int64_t o = 0; o < out; ++o)
    if (((2 * o + 1) * in) % (2 * out) == 0) return true;
  return false;
}
bool align_corners_ties(int64_t in, int64_t out) {
  for (int64_t o = 0; o < out; ++o)
    if ((2 * o * (in - 1)) % (2 * (out - 1)) == out - 1) return true;
  return false;
}
AxisModes nearest_axis(const std::string& ctm, const std::string& nm, int64_t in, int64_t out) {
  if (in == 1) return {kAny, ""};
  if (ctm == "tf_half_pixel_for_nn") {
    if (nm == "floor" || (in == out && nm == "round_prefer_floor")) return {kHalfPixel, ""};
    return {0, "tf_half_pixel_for_nn with nearest_mode '" + nm + "' has no ArmNN Resize equivalent"};
  }
  if (in == out) return {kAny, ""};
  if ((ctm == "align_corners" || ctm == "pytorch_half_pixel") && out == 1) return {kDefault | kAlignCorners, ""};
  if (ctm == "asymmetric") {
    if (nm == "floor") return {kDefault, ""};
    return {0, "ArmNN's nearest Resize floors the asymmetric coordinate; nearest_mode '" + nm + "' has no equivalent"};
  }
  const bool half = ctm == "half_pixel" || ctm == "pytorch_half_pixel";
  const Mode m = half ? kHalfPixel : kAlignCorners;
  const bool ties = half ? half_pixel_ties(in, out) : align_corners_ties(in, out);
  if (nm == "round_prefer_ceil") return {m, ""};
  if (nm == "round_prefer_floor" && !ties) return {m, ""};
  return {0, ctm + " with nearest_mode '" + nm + "' has no ArmNN Resize equivalent here"};
}
AxisModes bilinear_axis(const std::string& ctm, int64_t in, int64_t out) {
  if (in == 1) return {kAny, ""};
  if (ctm == "half_pixel") return {kHalfPixel, ""};
  if (ctm == "pytorch_half_pixel") return {out > 1 ? unsigned(kHalfPixel) : unsigned(kDefault | kAlignCorners), ""};
  if (ctm == "align_corners") return {out > 1 ? unsigned(kAlignCorners) : unsigned(kDefault | kAlignCorners), ""};
  if (ctm == "asymmetric") return {in == out ? unsigned(kAny) : unsigned(kDefault), ""};
  return {0, "ArmNN's bilinear Resize has no '" + ctm + "' coordinate mode"};
}

void build_resize(Gen& b, const ir::Node& n) {
  const ir::Graph& g = b.graph();
  const bool bilinear = n.op == "resize_bilinear";
  const std::string& ctm = core::attr_s(n.attrs, "coordinate_transformation_mode");
  const Shape& x = in_shape(g, n, 0);
  const Ints& sizes = core::attr_ints(n.attrs, "sizes");
  AxisModes axes[2];
  for (size_t i = 0; i < 2; ++i)
    axes[i] = bilinear ? bilinear_axis(ctm, x[i + 2], sizes[i])
                       : nearest_axis(ctm, core::attr_s(n.attrs, "nearest_mode"), x[i + 2], sizes[i]);
  for (const auto& a : axes)
    if (!a.modes) throw ReproUnsupported(a.why);
  const unsigned both = axes[0].modes & axes[1].modes;
  if (!both) throw ReproUnsupported("height and width need different ArmNN Resize coordinate modes");
  const Shape& y = out_shape(g, n);
  const bool half = (both & kHalfPixel) != 0;
  const std::string d = b.desc("ResizeDescriptor");
  b.set(d, "m_Method", bilinear ? "armnn::ResizeMethod::Bilinear" : "armnn::ResizeMethod::NearestNeighbor");
  b.set(d, "m_TargetHeight", u(y[2]));
  b.set(d, "m_TargetWidth", u(y[3]));
  b.set(d, "m_DataLayout", "armnn::DataLayout::NCHW");
  b.set(d, "m_HalfPixelCenters", half ? "true" : "false");
  b.set(d, "m_AlignCorners", !half && (both & kAlignCorners) ? "true" : "false");
  b.define(n.outputs[0], b.finish("AddResizeLayer(" + d + ", ", "resize", {b.value(n.inputs[0])}, y));
}

// ---- tensor (ops_tensor.cpp) ---------------------------------------------------------------------

std::vector<size_t> reduced_axes(const ir::Node& n, size_t rank) {
  const Ints& axes = core::attr_ints(n.attrs, "axes");
  std::vector<size_t> out;
  if (axes.empty()) {
    out.resize(rank);
    std::iota(out.begin(), out.end(), size_t{0});
  } else {
    for (int64_t a : axes) out.push_back(ops::norm_axis(a, rank));
    std::sort(out.begin(), out.end());
  }
  return out;
}
std::vector<size_t> all_axes(size_t rank) {
  std::vector<size_t> v(rank);
  std::iota(v.begin(), v.end(), size_t{0});
  return v;
}

Val reduce_max(Gen& b, const Val& x, const std::vector<size_t>& axes, const Shape& out) {
  b.comment("max over the reduced axes: Transpose them last, Reshape to [1, 1, kept, reduced], one Pooling2d max window");
  std::vector<size_t> perm;
  int64_t kept = 1, reduced = 1;
  for (size_t d = 0; d < x.shape.size(); ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) {
      perm.push_back(d);
      kept *= x.shape[d];
    }
  for (size_t d : axes) {
    perm.push_back(d);
    reduced *= x.shape[d];
  }
  const Val flat = b.reshape(b.transpose(x, perm), Shape{1, 1, kept, reduced});
  return b.reshape(max_window(b, flat, reduced, Shape{1, 1, kept, 1}, "reduce_max"), out);
}

Val normalise(Gen& b, const Val& x, const std::vector<size_t>& axes, float eps) {
  const Val mu = b.mean(x, axes, true);
  const Val centred = b.binary("sub", x, mu);
  const Val var = b.mean(b.binary("mul", centred, centred), axes, true);
  const Val rstd = b.unary(b.binary("add", var, b.scalar_like(eps, var.shape.size())), "Rsqrt");
  return b.binary("mul", centred, rstd);
}

Val fully_connected(Gen& b, const Val& x, const std::string& wname, const std::vector<float>& w, const Shape& ws,
                    const std::string& bname, const std::vector<float>* bias, const std::string& what) {
  const std::string d = b.desc("FullyConnectedDescriptor");
  b.set(d, "m_BiasEnabled", bias ? "true" : "false");
  b.set(d, "m_TransposeWeightMatrix", "true");
  const std::string bt = b.bias(bname, bias, Shape{ws[0]});
  return b.finish("AddFullyConnectedLayer(" + d + ", " + b.const_tensor(wname, w, ws) + ", " + bt + ", ", what, {x},
                  Shape{x.shape[0], ws[0]});
}

void build_dense(Gen& b, const ir::Node& n) {
  const ir::Graph& g = b.graph();
  const Val x = b.value(n.inputs[0]);
  const Shape ws = g.types.at(n.inputs[1]).shape;
  const int64_t K = ws[1], M = core::numel(x.shape) / K;
  const bool has_bias = core::attr_i(n.attrs, "bias") == 1;
  const std::vector<float> w = b.floats(n.inputs[1]);
  const std::vector<float> bias = has_bias ? b.floats(n.inputs[2]) : std::vector<float>{};
  const Val x2 = b.reshape(x, Shape{M, K});
  const Val y = fully_connected(b, x2, n.inputs[1], w, ws, has_bias ? n.inputs[2] : "", has_bias ? &bias : nullptr,
                                "fully_connected");
  b.define(n.outputs[0], b.reshape(y, out_shape(g, n)));
}

void build_softmax(Gen& b, const ir::Node& n) {
  const Val x = b.value(n.inputs[0]);
  const std::string d = b.desc("SoftmaxDescriptor");
  b.set(d, "m_Beta", "1.0f");
  b.set(d, "m_Axis", u(static_cast<int64_t>(ops::norm_axis(core::attr_i(n.attrs, "axis"), x.shape.size()))));
  b.define(n.outputs[0],
           b.finish(std::string(n.op == "softmax" ? "AddSoftmaxLayer(" : "AddLogSoftmaxLayer(") + d + ", ", n.op, {x}, x.shape));
}

void build_reduce(Gen& b, const ir::Node& n) {
  const Val x = b.value(n.inputs[0]);
  const std::vector<size_t> axes = reduced_axes(n, x.shape.size());
  const Shape& out = out_shape(b.graph(), n);
  const bool keep = core::attr_i(n.attrs, "keepdims") == 1;
  Val y;
  if (n.op == "reduce_mean") {
    y = b.mean(x, axes, keep);
  } else if (n.op == "reduce_sum") {
    b.comment("no sum reduction in ArmNN 20.08: Mean scaled back by the element count");
    int64_t count = 1;
    for (size_t a : axes) count *= x.shape[a];
    y = b.activation(b.mean(x, axes, keep), "Linear", static_cast<float>(count), 0);
  } else if (n.op == "reduce_max") {
    y = reduce_max(b, x, axes, out);
  } else {
    b.comment("reduce_min = -max(-x)");
    y = b.unary(reduce_max(b, b.unary(x, "Neg"), axes, out), "Neg");
  }
  b.define(n.outputs[0], b.reshape(y, out));
}

void build_batch_norm(Gen& b, const ir::Node& n) {
  const ir::Graph& g = b.graph();
  const Val x = b.value(n.inputs[0]);
  const float eps = f(n, "epsilon");
  const int64_t N = x.shape[0], C = x.shape[1], cells = core::numel(x.shape) / (N * C);
  if (core::attr_i(n.attrs, "training") == 1) {
    const Shape cs{1, C, 1};
    const Val xhat = normalise(b, b.reshape(x, Shape{N, C, cells}), {0, 2}, eps);
    const Val y = b.binary("add", b.binary("mul", xhat, b.constant(b.floats(n.inputs[1]), cs, n.inputs[1])),
                           b.constant(b.floats(n.inputs[2]), cs, n.inputs[2]));
    b.define(n.outputs[0], b.reshape(y, out_shape(g, n)));
    return;
  }
  const Shape x4{N, C, cells, 1};
  const std::string d = b.desc("BatchNormalizationDescriptor");
  b.set(d, "m_Eps", fl(eps));
  b.set(d, "m_DataLayout", "armnn::DataLayout::NCHW");
  auto ct = [&](size_t i) { return b.const_tensor(n.inputs[i], b.floats(n.inputs[i]), Shape{C}); };
  const std::string mean = ct(3), var = ct(4), beta = ct(2), gamma = ct(1);
  const Val y = b.finish("AddBatchNormalizationLayer(" + d + ", " + mean + ", " + var + ", " + beta + ", " + gamma + ", ",
                         "batch_norm", {b.reshape(x, x4)}, x4);
  b.define(n.outputs[0], b.reshape(y, out_shape(g, n)));
}

void build_layer_norm(Gen& b, const ir::Node& n) {
  const ir::Graph& g = b.graph();
  const Val x = b.value(n.inputs[0]);
  const size_t axis = ops::norm_axis(core::attr_i(n.attrs, "axis"), x.shape.size());
  int64_t rows = 1;
  for (size_t d = 0; d < axis; ++d) rows *= x.shape[d];
  const Val xhat = normalise(b, b.reshape(x, Shape{rows, core::numel(x.shape) / rows}), {1}, f(n, "epsilon"));
  const Shape& ps = g.types.at(n.inputs[1]).shape;
  const Val y = b.binary("add", b.binary("mul", b.reshape(xhat, x.shape), b.constant(b.floats(n.inputs[1]), ps, n.inputs[1])),
                         b.constant(b.floats(n.inputs[2]), ps, n.inputs[2]));
  b.define(n.outputs[0], y);
}

void build_lrn(Gen& b, const ir::Node& n) {
  const Val x = b.value(n.inputs[0]);
  const int64_t size = core::attr_i(n.attrs, "size");
  if (size % 2 == 0) throw ReproUnsupported("ArmNN's Normalization window is symmetric; ONNX LRN with an even size is not");
  const std::string d = b.desc("NormalizationDescriptor");
  b.set(d, "m_NormChannelType", "armnn::NormalizationAlgorithmChannel::Across");
  b.set(d, "m_NormMethodType", "armnn::NormalizationAlgorithmMethod::LocalBrightness");
  b.set(d, "m_NormSize", u(size));
  b.set(d, "m_Alpha", fl(core::attr_f(n.attrs, "alpha") / static_cast<double>(size)) + "  /* alpha / size */");
  b.set(d, "m_Beta", fl(f(n, "beta")));
  b.set(d, "m_K", fl(f(n, "bias")));
  b.set(d, "m_DataLayout", "armnn::DataLayout::NCHW");
  b.define(n.outputs[0], b.finish("AddNormalizationLayer(" + d + ", ", "lrn", {x}, x.shape));
}

void build_transpose(Gen& b, const ir::Node& n) {
  const Val x = b.value(n.inputs[0]);
  const Ints& p = core::attr_ints(n.attrs, "perm");
  std::vector<size_t> perm;
  if (p.empty())
    for (size_t i = x.shape.size(); i-- > 0;) perm.push_back(i);
  else
    perm.assign(p.begin(), p.end());
  b.define(n.outputs[0], b.transpose(x, perm));
}

Val strided_slice(Gen& b, const Val& x, const Ints& begin, const Ints& end, const Ints& stride, int end_mask,
                  const Shape& out, const std::string& what) {
  const std::string d = b.desc("StridedSliceDescriptor", "std::vector<int>" + list(begin) + ", std::vector<int>" + list(end) +
                                                             ", std::vector<int>" + list(stride));
  if (end_mask) b.set(d, "m_EndMask", u(end_mask));
  b.set(d, "m_DataLayout", "armnn::DataLayout::NCHW");
  return b.finish("AddStridedSliceLayer(" + d + ", ", what, {x}, out);
}

void build_slice(Gen& b, const ir::Node& n) {
  const Val x = b.value(n.inputs[0]);
  const size_t rank = x.shape.size();
  const Ints& starts = core::attr_ints(n.attrs, "starts");
  const Ints& ends = core::attr_ints(n.attrs, "ends");
  const Ints& axes_attr = core::attr_ints(n.attrs, "axes");
  const Ints& steps = core::attr_ints(n.attrs, "steps");
  Ints begin(rank, 0), end(x.shape.begin(), x.shape.end()), stride(rank, 1);
  for (size_t i = 0; i < starts.size(); ++i) {
    const size_t a = axes_attr.empty() ? i : ops::norm_axis(axes_attr[i], rank);
    const int64_t dim = x.shape[a];
    auto clampi = [dim](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + dim : v, 0, dim); };
    begin[a] = clampi(starts[i]);
    end[a] = clampi(ends[i]);
    stride[a] = steps.empty() ? 1 : steps[i];
  }
  const Shape& out = out_shape(b.graph(), n);
  if (std::all_of(stride.begin(), stride.end(), [](int64_t s) { return s == 1; })) {
    b.define(n.outputs[0], b.reshape(b.slice(x, begin, out), out));
    return;
  }
  b.define(n.outputs[0], strided_slice(b, x, begin, end, stride, 0, out, "strided_slice"));
}

Val repeated_slice(Gen& b, const Val& x, size_t d, int64_t i, int64_t count) {
  Ints begin(x.shape.size(), 0);
  begin[d] = i;
  Shape size = x.shape;
  size[d] = 1;
  Val r = b.slice(x, begin, size);
  while (r.shape[d] < count) r = b.concat({r, r}, d);
  size[d] = count;
  return r.shape[d] == count ? r : b.slice(r, Ints(x.shape.size(), 0), size);
}

Val reversed_range(Gen& b, const Val& x, size_t d, int64_t first, int64_t last) {
  const size_t rank = x.shape.size();
  Ints begin(rank, 0), end(x.shape.begin(), x.shape.end()), stride(rank, 1);
  begin[d] = first;
  end[d] = last - 1;
  stride[d] = -1;
  Shape out = x.shape;
  out[d] = first - last + 1;
  return strided_slice(b, x, begin, end, stride, last == 0 ? (1 << d) : 0, out, "reverse");
}

void build_pad(Gen& b, const ir::Node& n) {
  const Val x = b.value(n.inputs[0]);
  const size_t rank = x.shape.size();
  Ints pads = core::attr_ints(n.attrs, "pads");
  if (pads.empty()) pads.assign(2 * rank, 0);
  const Ints begin(pads.begin(), pads.begin() + static_cast<int64_t>(rank));
  const Ints end(pads.begin() + static_cast<int64_t>(rank), pads.end());
  const std::string& mode = core::attr_s(n.attrs, "mode");
  if (mode == "constant") {
    b.define(n.outputs[0], b.pad(x, begin, end, f(n, "value")));
    return;
  }
  b.comment(mode + " padding: ArmNN 20.08's Pad is constant only, so each axis is a Concat of border copies");
  const bool reflect = mode == "reflect";
  Val y = x;
  for (size_t d = 0; d < rank; ++d) {
    if (begin[d] == 0 && end[d] == 0) continue;
    const int64_t len = y.shape[d];
    std::vector<Val> parts;
    if (begin[d] > 0) parts.push_back(reflect ? reversed_range(b, y, d, begin[d], 1) : repeated_slice(b, y, d, 0, begin[d]));
    parts.push_back(y);
    if (end[d] > 0)
      parts.push_back(reflect ? reversed_range(b, y, d, len - 2, len - 1 - end[d]) : repeated_slice(b, y, d, len - 1, end[d]));
    y = b.concat(parts, d);
  }
  b.define(n.outputs[0], y);
}

void build_rnn(Gen& b, const ir::Node& n) {
  const ir::Graph& g = b.graph();
  const Val x = b.value(n.inputs[0]);
  const int64_t N = x.shape[0], T = x.shape[1], F = x.shape[2], H = core::attr_i(n.attrs, "hidden_size");
  const int64_t G = n.op == "lstm" ? 4 : n.op == "gru" ? 3 : 1;
  const std::vector<float> w_ih = b.floats(n.inputs[1]), w_hh = b.floats(n.inputs[2]), b_ih = b.floats(n.inputs[3]),
                           b_hh = b.floats(n.inputs[4]);
  b.comment(n.op + " unrolled over time from a zero state: per step FullyConnected(x) + FullyConnected(h), gate slices, activations");
  auto gate = [&](const Val& v, int64_t k) { return b.slice(v, {0, k * H}, Shape{N, H}); };
  auto sigmoid = [&](const Val& v) { return b.activation(v, "Sigmoid"); };
  auto tanh = [&](const Val& v) { return b.activation(v, "TanH", 1, 1); };
  Val h = b.constant(std::vector<float>(static_cast<size_t>(N * H), 0.0f), Shape{N, H}, "zero_state");
  Val c = h;
  std::vector<Val> steps;
  for (int64_t t = 0; t < T; ++t) {
    const Val xt = b.reshape(b.slice(x, {0, t, 0}, Shape{N, 1, F}), Shape{N, F});
    const Val gi = fully_connected(b, xt, n.inputs[1], w_ih, Shape{G * H, F}, n.inputs[3], &b_ih, "fully_connected");
    const Val gh = fully_connected(b, h, n.inputs[2], w_hh, Shape{G * H, H}, n.inputs[4], &b_hh, "fully_connected");
    if (n.op == "simple_rnn") {
      h = tanh(b.binary("add", gi, gh));
    } else if (n.op == "lstm") {
      const Val sum = b.binary("add", gi, gh);
      const Val i = sigmoid(gate(sum, 0)), fg = sigmoid(gate(sum, 1)), gg = tanh(gate(sum, 2)), o = sigmoid(gate(sum, 3));
      c = b.binary("add", b.binary("mul", fg, c), b.binary("mul", i, gg));
      h = b.binary("mul", o, tanh(c));
    } else {
      const Val r = sigmoid(b.binary("add", gate(gi, 0), gate(gh, 0)));
      const Val z = sigmoid(b.binary("add", gate(gi, 1), gate(gh, 1)));
      const Val nn = tanh(b.binary("add", gate(gi, 2), b.binary("mul", r, gate(gh, 2))));
      h = b.binary("add", nn, b.binary("mul", z, b.binary("sub", h, nn)));
    }
    steps.push_back(b.reshape(h, Shape{N, 1, H}));
  }
  const Val y = core::attr_i(n.attrs, "return_sequences") == 1 ? b.concat(steps, 1) : h;
  b.define(n.outputs[0], b.reshape(y, out_shape(g, n)));
}

void build_loss(Gen& b, const ir::Node& n) {
  const Val p = b.value(n.inputs[0]), t = b.value(n.inputs[1]);
  const Shape& out = out_shape(b.graph(), n);
  if (n.op == "mse_loss") {
    const Val d = b.binary("sub", p, t);
    b.define(n.outputs[0], b.reshape(b.mean(b.activation(d, "Square"), all_axes(d.shape.size()), false), out));
  } else if (n.op == "softmax_cross_entropy") {
    const std::string d = b.desc("SoftmaxDescriptor");
    b.set(d, "m_Axis", "1");
    const Val ls = b.finish("AddLogSoftmaxLayer(" + d + ", ", "log_softmax", {p}, p.shape);
    const Val m = b.mean(b.binary("mul", t, ls), {0, 1}, false);
    b.define(n.outputs[0], b.reshape(b.activation(m, "Linear", -static_cast<float>(p.shape[1]), 0), out));
  } else {  // categorical_hinge
    const int64_t N = p.shape[0], C = p.shape[1];
    const Val pos = b.activation(b.mean(b.binary("mul", t, p), {1}, false), "Linear", static_cast<float>(C), 0);
    const Val neg = reduce_max(b, b.binary("mul", b.activation(t, "Linear", -1, 1), p), {1}, Shape{N});
    const Val hinge = b.activation(b.activation(b.binary("sub", neg, pos), "Linear", 1, 1), "ReLu");
    b.define(n.outputs[0], b.reshape(b.mean(hinge, {0}, false), out));
  }
}

void build_node(Gen& b, const ir::Node& n) {
  const std::string& op = n.op;
  if (build_elementwise(b, n)) return;
  if (op == "conv1d" || op == "conv2d") return build_conv(b, n);
  if (op == "conv_transpose2d") return build_conv_transpose(b, n);
  if (op == "max_pool1d" || op == "max_pool2d" || op == "avg_pool1d" || op == "avg_pool2d") return build_pool(b, n);
  if (op == "global_avg_pool" || op == "global_max_pool") return build_global_pool(b, n);
  if (op == "resize_nearest" || op == "resize_bilinear") return build_resize(b, n);
  if (op == "dense") return build_dense(b, n);
  if (op == "softmax" || op == "log_softmax") return build_softmax(b, n);
  if (op == "reduce_mean" || op == "reduce_sum" || op == "reduce_max" || op == "reduce_min") return build_reduce(b, n);
  if (op == "batch_norm") return build_batch_norm(b, n);
  if (op == "layer_norm") return build_layer_norm(b, n);
  if (op == "lrn") return build_lrn(b, n);
  if (op == "reshape" || op == "flatten" || op == "squeeze" || op == "unsqueeze")
    return b.define(n.outputs[0], b.reshape(b.value(n.inputs[0]), out_shape(b.graph(), n)));
  if (op == "transpose") return build_transpose(b, n);
  if (op == "slice") return build_slice(b, n);
  if (op == "pad") return build_pad(b, n);
  if (op == "simple_rnn" || op == "lstm" || op == "gru") return build_rnn(b, n);
  if (op == "mse_loss" || op == "softmax_cross_entropy" || op == "categorical_hinge") return build_loss(b, n);
  throw ReproUnsupported("ArmNN 20.08 has no layer (or exact layer composition) for '" + op + "'");
}

// The backend's own limits (armnn_backend.cpp supports()).
void check_supported(const ir::Graph& g, const ir::Node& n) {
  static const std::set<std::string> five_d = {"reshape", "flatten", "squeeze", "unsqueeze", "batch_norm", "global_avg_pool",
                                                "global_max_pool"};
  const size_t max_rank = five_d.count(n.op) ? 5 : 4;
  if (Support w = constant_weights(g, n, "ArmNN"); !w.ok) throw ReproUnsupported(w.reason);
  for (const auto* names : {&n.inputs, &n.outputs})
    for (const auto& v : *names) {
      const core::TensorType& t = g.types.at(v);
      if (t.dtype == core::DType::I64) throw ReproUnsupported("the ArmNN mapping is float32 only; value '" + v + "' is int64");
      if (t.shape.size() > max_rank)
        throw ReproUnsupported("ArmNN 20.08 layers assert on rank > " + std::to_string(max_rank) + " for '" + n.op + "'");
    }
}

// ArmNN's Optimize rewrites across layers (FoldPadIntoConvolution2d, TransposeAsReshape,
// SquashEqualReshapeSiblings...), so a graph-level bug does not show on the blamed node alone fed
// the library's values, which is what the loader makes of an unreduced bundle (a ledger case).
}  // namespace

ReproProgram write_repro_armnn(const ReproCase& c, const std::string& dir) {
  if (c.train) throw ReproUnsupported("ArmNN does not train (inference only); the finding is in stage " + std::string(core::to_string(c.stage)));
  if (c.dtype != core::DType::F32)
    throw ReproUnsupported("ArmNN 20.08 has no float64 data type; the case runs in " + core::to_string(c.dtype));
  const ir::Graph& g = c.model;
  const bool crash = c.crash();
  ReproProgram p;
  p.main = "repro.cpp";
  p.run = "g++ -std=c++17 -O1 repro.cpp -o repro -larmnn && ./repro";

  Gen b(g);
  for (size_t i = 0; i < g.inputs.size(); ++i) b.define(g.inputs[i].name, b.finish_input(i, g.inputs[i].name, g.inputs[i].type.shape));
  for (const auto& n : g.nodes) {
    check_supported(g, n);
    b.set_node(n);
    build_node(b, n);
  }
  // Every node output bound to an output layer, in node order (how Quorum reads intermediates).
  struct Out {
    std::string value;
    Shape shape;
  };
  std::vector<Out> outs;
  b.code << "\n  // Every node output is bound to an output layer, binding ids in node order.\n";
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs) {
      const Val v = b.value(o);
      b.code << "  " << v.var << "->Connect(net->AddOutputLayer(" << outs.size() << ", " << quoted(o) << ")->GetInputSlot(0));\n";
      outs.push_back({o, g.types.at(o).shape});
    }

  // Values compared: the blamed node's outputs and the graph outputs.
  std::vector<std::string> compared;
  auto add = [&](const std::string& v) {
    if (std::find(compared.begin(), compared.end(), v) == compared.end() && c.expected.count(v)) compared.push_back(v);
  };
  if (const ir::Node* n = c.blamed())
    for (const auto& o : n->outputs) add(o);
  for (const auto& o : g.outputs) add(o);

  std::ostringstream s;
  s << repro_header(c, "//",
                    p.run + "  (Debian libarmnn-dev and libarmnn-cpuref-backend22; ArmNN loads the CpuRef backend from "
                            "/usr/lib/x86_64-linux-gnu/armnn22/)");
  if (crash)
    s << "// The finding is a failure while ArmNN builds, optimizes or loads the network: the program exits 1\n"
         "// when that failure shows (and, once the network runs, when its outputs differ from the expected ones).\n";
  s << "#include <armnn/ArmNN.hpp>\n\n#include <cmath>\n#include <cstdio>\n#include <string>\n#include <utility>\n#include <vector>\n\n";
  s << cpp_check_function() << "\n";
  s << "static const double ATOL = " << py_literal(c.tol.atol) << ", RTOL = " << py_literal(c.tol.rtol) << ";\n\n";
  s << "static armnn::TensorInfo info(std::vector<unsigned int> dims) {\n"
       "  return armnn::TensorInfo(armnn::TensorShape(static_cast<unsigned int>(dims.size()), dims.data()),\n"
       "                           armnn::DataType::Float32);\n}\n\n"
       "// Connects `inputs` to the layer's input slots in order and sets its output TensorInfo.\n"
       "static armnn::IOutputSlot* connect(armnn::IConnectableLayer* layer, std::vector<armnn::IOutputSlot*> inputs,\n"
       "                                   std::vector<unsigned int> out) {\n"
       "  for (size_t i = 0; i < inputs.size(); ++i) inputs[i]->Connect(layer->GetInputSlot(static_cast<unsigned int>(i)));\n"
       "  layer->GetOutputSlot(0).SetTensorInfo(info(out));\n"
       "  return &layer->GetOutputSlot(0);\n}\n\n";
  s << "// Graph inputs (float32).\n";
  for (const auto& in : g.inputs) s << c_array("in_" + identifier(in.name), c.inputs.at(in.name), true);
  s << "\n// Weights and constants.\n" << b.data.str();
  s << "\n// Expected values (float64 reference).\n";
  for (const auto& v : compared) s << c_array("want_" + identifier(v), c.expected.at(v), false);

  s << "\n// What ArmNN failed at; a crash finding shows itself here (exit 1), other findings cannot run (exit 2).\n"
       "static int failed(const char* stage, const std::string& what, const std::vector<std::string>& messages = {}) {\n"
       "  std::printf(\"ArmNN %s failed: %s\\n\", stage, what.c_str());\n"
       "  for (const auto& m : messages) std::printf(\"  message: %s\\n\", m.c_str());\n"
       "  return "
    << (crash ? 1 : 2) << ";\n}\n\n";

  s << "int main() {\n";
  s << "  std::printf(\"Arm NN 20.08 (library %s), backend CpuRef\\n\", ARMNN_VERSION);\n";
  s << "  // Creating the runtime loads the CpuRef dynamic backend from /usr/lib/x86_64-linux-gnu/armnn22/.\n";
  s << "  armnn::IRuntimePtr runtime = armnn::IRuntime::Create(armnn::IRuntime::CreationOptions());\n";
  s << "  armnn::INetworkPtr net = armnn::INetwork::Create();\n";
  s << "  try {\n";
  {
    std::istringstream lines(b.code.str());
    std::string line;
    while (std::getline(lines, line)) s << (line.empty() ? "" : "  ") << line << "\n";
  }
  s << "  } catch (const armnn::Exception& e) {\n    return failed(\"network construction\", e.what());\n  }\n\n";
  s << "  std::vector<std::string> messages;\n";
  s << "  armnn::IOptimizedNetworkPtr optimized(nullptr, &armnn::IOptimizedNetwork::Destroy);\n";
  s << "  try {\n";
  s << "    optimized = armnn::Optimize(*net, {armnn::Compute::CpuRef}, runtime->GetDeviceSpec(), armnn::OptimizerOptions(),\n";
  s << "                                armnn::Optional<std::vector<std::string>&>(messages));\n";
  s << "  } catch (const armnn::Exception& e) {\n    return failed(\"Optimize\", e.what(), messages);\n  }\n";
  s << "  if (!optimized) return failed(\"Optimize\", \"no network returned\", messages);\n";
  s << "  armnn::NetworkId id = 0;\n  std::string error;\n";
  s << "  try {\n";
  s << "    if (runtime->LoadNetwork(id, std::move(optimized), error) != armnn::Status::Success)\n";
  s << "      return failed(\"LoadNetwork\", error);\n";
  s << "  } catch (const armnn::Exception& e) {\n    return failed(\"LoadNetwork\", e.what());\n  }\n\n";
  s << "  armnn::InputTensors inputs;\n";
  for (size_t i = 0; i < g.inputs.size(); ++i)
    s << "  inputs.emplace_back(" << i << ", armnn::ConstTensor(runtime->GetInputTensorInfo(id, " << i << "), in_"
      << identifier(g.inputs[i].name) << "));\n";
  s << "  armnn::OutputTensors outputs;\n";
  for (size_t i = 0; i < outs.size(); ++i) {
    s << "  std::vector<float> out_" << identifier(outs[i].value) << "(" << std::max<int64_t>(core::numel(outs[i].shape), 1)
      << ");  // '" << outs[i].value << "'\n";
    s << "  outputs.emplace_back(" << i << ", armnn::Tensor(runtime->GetOutputTensorInfo(id, " << i << "), out_"
      << identifier(outs[i].value) << ".data()));\n";
  }
  s << "  try {\n";
  s << "    if (runtime->EnqueueWorkload(id, inputs, outputs) != armnn::Status::Success)\n";
  s << "      return failed(\"EnqueueWorkload\", \"Status::Failure\");\n";
  s << "  } catch (const armnn::Exception& e) {\n    return failed(\"EnqueueWorkload\", e.what());\n  }\n\n";
  s << "  int bad = 0;\n";
  for (const auto& v : compared)
    s << "  bad += quorum_check(" << quoted(v) << ", out_" << identifier(v) << ".data(), want_" << identifier(v) << ", "
      << c.expected.at(v).numel() << ", ATOL, RTOL);\n";
  s << "  return bad ? 1 : 0;\n}\n";
  write_repro_file(p, dir, p.main, s.str());
  return p;
}

}  // namespace quorum::backends
