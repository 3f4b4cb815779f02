// The ONNX bridge (see onnx_io.h). The only file that includes ONNX or protobuf headers.
#include "ir/onnx_io.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numbers>
#include <set>

#include "core/error.h"
#include "ops/registry.h"

namespace quorum::ir {

using core::DType;
using core::Shape;
using core::UserError;

namespace {

constexpr const char* kOutputsKey = "quorum.outputs";
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// ---------------------------------------------------------------------------------------------
// Tensors and types

int32_t onnx_elem_type(DType d) {
  switch (d) {
    case DType::F32: return onnx::TensorProto::FLOAT;
    case DType::F64: return onnx::TensorProto::DOUBLE;
    case DType::I64: return onnx::TensorProto::INT64;
  }
  return onnx::TensorProto::UNDEFINED;
}

bool dtype_of_elem(int32_t t, DType& d) {
  switch (t) {
    case onnx::TensorProto::FLOAT: d = DType::F32; return true;
    case onnx::TensorProto::DOUBLE: d = DType::F64; return true;
    case onnx::TensorProto::INT64: d = DType::I64; return true;
    default: return false;
  }
}

std::string elem_type_name(int32_t t) {
  if (onnx::TensorProto_DataType_IsValid(t))
    return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(t));
  return std::to_string(t);
}

void tensor_to_proto(const Tensor& t, const std::string& name, onnx::TensorProto* p) {
  p->set_name(name);
  p->set_data_type(onnx_elem_type(t.dtype()));
  for (int64_t d : t.shape()) p->add_dims(d);
  p->set_raw_data(t.raw(), t.nbytes());
}

Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& where) {
  const std::string what = where + ": tensor '" + p.name() + "'";
  if (p.data_location() == onnx::TensorProto::EXTERNAL) throw UserError(what + " uses external data (not supported)");
  Shape shape;
  int64_t n = 1;
  for (int64_t d : p.dims()) {
    if (d < 0) throw UserError(what + " has a negative dimension");
    // Checked before anything is allocated: a corrupt or non-tensor protobuf can claim any shape.
    if (d > 0 && n > (int64_t{1} << 40) / d) throw UserError(what + " claims an implausibly large shape");
    n *= d;
    shape.push_back(d);
  }
  const bool raw = p.has_raw_data();
  auto check_count = [&](int64_t have, size_t elem) {
    if (raw ? static_cast<int64_t>(p.raw_data().size()) != n * static_cast<int64_t>(elem) : have != n)
      throw UserError(what + " holds " + std::to_string(raw ? static_cast<int64_t>(p.raw_data().size() / elem) : have) +
                      " values, its shape " + core::to_string(shape) + " needs " + std::to_string(n));
  };
  switch (p.data_type()) {
    case onnx::TensorProto::FLOAT: {
      check_count(p.float_data_size(), 4);
      Tensor t(DType::F32, shape);
      if (raw && n > 0) std::memcpy(t.raw(), p.raw_data().data(), t.nbytes());
      else
        for (int64_t i = 0; i < n; ++i) t.f32()[i] = p.float_data(static_cast<int>(i));
      return t;
    }
    case onnx::TensorProto::DOUBLE: {
      check_count(p.double_data_size(), 8);
      Tensor t(DType::F64, shape);
      if (raw && n > 0) std::memcpy(t.raw(), p.raw_data().data(), t.nbytes());
      else
        for (int64_t i = 0; i < n; ++i) t.f64()[i] = p.double_data(static_cast<int>(i));
      return t;
    }
    case onnx::TensorProto::INT64: {
      check_count(p.int64_data_size(), 8);
      Tensor t(DType::I64, shape);
      if (raw && n > 0) std::memcpy(t.raw(), p.raw_data().data(), t.nbytes());
      else
        for (int64_t i = 0; i < n; ++i) t.i64()[i] = p.int64_data(static_cast<int>(i));
      return t;
    }
    case onnx::TensorProto::INT32: {
      check_count(p.int32_data_size(), 4);
      Tensor t(DType::I64, shape);
      for (int64_t i = 0; i < n; ++i) {
        int32_t v = 0;
        if (raw) std::memcpy(&v, p.raw_data().data() + 4 * i, 4);
        else v = p.int32_data(static_cast<int>(i));
        t.i64()[i] = v;
      }
      return t;
    }
    default:
      throw UserError(what + " has data type " + elem_type_name(p.data_type()) +
                      " (supported: FLOAT, DOUBLE, INT64, INT32)");
  }
}

// ONNX attributes are float32. A value written from a short decimal double (0.3, 1e-5) comes back
// as that double: the shortest decimal that reads back as the same float.
double recover_double(float f) {
  if (!std::isfinite(f)) return f;
  char buf[64];
  for (int p = 1; p <= 9; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f) return std::strtod(buf, nullptr);
  }
  return f;
}

// ---------------------------------------------------------------------------------------------
// Export

void set_i(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
void set_f(onnx::NodeProto* n, const std::string& name, double v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(static_cast<float>(v));
}
void set_s(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}
void set_ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void set_type(onnx::ValueInfoProto* vi, const std::string& name, const TensorType& t) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx_elem_type(t.dtype));
  auto* sh = tt->mutable_shape();
  for (int64_t d : t.shape) sh->add_dim()->set_dim_value(d);
}

class Exporter {
 public:
  Exporter(const Graph& g, int opset) : g_(g), opset_(opset) {}

  std::string run() {
    m_.set_ir_version(opset_ >= 14 ? 8 : 7);
    m_.set_producer_name("quorum");
    m_.set_producer_version(QUORUM_VERSION);
    auto* imp = m_.add_opset_import();
    imp->set_domain("");
    imp->set_version(opset_);
    gp_ = m_.mutable_graph();
    gp_->set_name(g_.name);
    for (const auto& in : g_.inputs) taken_.insert(in.name);
    for (const auto& [name, t] : g_.initializers) taken_.insert(name);
    for (const auto& n : g_.nodes) {
      taken_.insert(n.name);
      for (const auto& o : n.outputs) taken_.insert(o);
    }
    for (const auto& in : g_.inputs) set_type(gp_->add_input(), in.name, in.type);
    for (const auto& n : g_.nodes) {
      cur_ = &n;
      export_node(n);
    }
    // Initializers the nodes refer to (RNN weights, for one, are written reordered under new names).
    std::set<std::string> referenced;
    for (const auto& n : gp_->node())
      for (const auto& i : n.input()) referenced.insert(i);
    for (const auto& o : g_.outputs) referenced.insert(o);
    for (const auto& [name, t] : g_.initializers)
      if (referenced.count(name)) tensor_to_proto(t, name, gp_->add_initializer());
    for (auto& [name, t] : extra_inits_) tensor_to_proto(t, name, gp_->add_initializer());
    std::set<std::string> listed;
    for (const auto& o : g_.outputs)
      if (listed.insert(o).second) set_type(gp_->add_output(), o, g_.types.at(o));
    for (const auto& n : g_.nodes)
      for (const auto& o : n.outputs)
        if (listed.insert(o).second) set_type(gp_->add_output(), o, g_.types.at(o));
    auto* meta = m_.add_metadata_props();
    meta->set_key(kOutputsKey);
    meta->set_value(std::to_string(std::set<std::string>(g_.outputs.begin(), g_.outputs.end()).size()));

    try {
      onnx::shape_inference::InferShapes(m_, onnx::OpSchemaRegistry::Instance(),
                                         onnx::ShapeInferenceOptions(/*check_type=*/true, /*error_mode=*/1));
      onnx::checker::check_model(m_);
    } catch (const std::exception& e) {
      std::string msg = e.what();
      std::replace(msg.begin(), msg.end(), '\n', ' ');
      core::internal_error("graph_to_onnx: the ONNX checker rejects the exported model '" + g_.name + "': " + msg);
    }
    std::string bytes;
    QUORUM_CHECK(m_.SerializeToString(&bytes), "cannot serialize the ONNX model");
    return bytes;
  }

 private:
  const Graph& g_;
  int opset_;
  onnx::ModelProto m_;
  onnx::GraphProto* gp_ = nullptr;
  std::set<std::string> taken_;
  std::vector<std::pair<std::string, Tensor>> extra_inits_;
  const Node* cur_ = nullptr;

  [[noreturn]] void refuse(const std::string& why) const {
    throw UserError(g_.name + ": node '" + cur_->name + "' (" + cur_->op + "): " + why);
  }

  std::string fresh(const std::string& base) {
    std::string s = base;
    for (int i = 1; taken_.count(s); ++i) s = base + "_" + std::to_string(i);
    taken_.insert(s);
    return s;
  }
  const std::string& in(size_t i) const { return cur_->inputs.at(i); }
  const std::string& out() const { return cur_->outputs.at(0); }
  DType dtype() const { return g_.types.at(in(0)).dtype; }
  const Shape& in_shape(size_t i = 0) const { return g_.types.at(in(i)).shape; }

  // A node producing the Quorum value `output` carries the Quorum node's name.
  onnx::NodeProto* final_node(const std::string& type, const std::vector<std::string>& ins,
                              const std::vector<std::string>& outs) {
    auto* p = gp_->add_node();
    p->set_op_type(type);
    p->set_name(cur_->name);
    for (const auto& i : ins) p->add_input(i);
    for (const auto& o : outs) p->add_output(o);
    return p;
  }
  onnx::NodeProto* final_node(const std::string& type, const std::vector<std::string>& ins) {
    return final_node(type, ins, {out()});
  }
  // A helper node of a decomposition: its name and its output are "<node>/<what>".
  std::pair<onnx::NodeProto*, std::string> helper(const std::string& type, const std::vector<std::string>& ins,
                                                  const std::string& what) {
    const std::string name = fresh(cur_->name + "/" + what);
    auto* p = gp_->add_node();
    p->set_op_type(type);
    p->set_name(name);
    for (const auto& i : ins) p->add_input(i);
    p->add_output(name);
    return {p, name};
  }
  std::string h(const std::string& type, const std::vector<std::string>& ins, const std::string& what) {
    return helper(type, ins, what).second;
  }
  std::string constant(const Tensor& t, const std::string& what) {
    const std::string name = fresh(cur_->name + "/" + what);
    extra_inits_.emplace_back(name, t);
    return name;
  }
  std::string scalar(double v, const std::string& what) {
    Tensor t(dtype(), {});
    t.set(0, v);
    return constant(t, what);
  }
  std::string ints(const std::vector<int64_t>& v, const std::string& what) {
    Tensor t(DType::I64, {static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), t.i64());
    return constant(t, what);
  }

  int64_t ai(const std::string& k) const { return core::attr_i(cur_->attrs, k); }
  double af(const std::string& k) const { return core::attr_f(cur_->attrs, k); }
  const std::string& as(const std::string& k) const { return core::attr_s(cur_->attrs, k); }
  const std::vector<int64_t>& aints(const std::string& k) const { return core::attr_ints(cur_->attrs, k); }

  void unary(const std::string& type) { final_node(type, {in(0)}); }

  void export_node(const Node& n) {
    const std::string& op = n.op;
    const ops::OpSpec& spec = ops::op(op);
    if (spec.is_loss) refuse("loss operators are training-only and are not exported to ONNX");
    static const std::map<std::string, std::string> kDirect = {
        {"relu", "Relu"},       {"sigmoid", "Sigmoid"}, {"tanh", "Tanh"}, {"softplus", "Softplus"},
        {"softsign", "Softsign"}, {"exp", "Exp"},       {"log", "Log"},   {"sqrt", "Sqrt"},
        {"reciprocal", "Reciprocal"}, {"abs", "Abs"},   {"neg", "Neg"},   {"global_avg_pool", "GlobalAveragePool"},
        {"global_max_pool", "GlobalMaxPool"}};
    static const std::map<std::string, std::string> kBinary = {
        {"add", "Add"}, {"sub", "Sub"}, {"mul", "Mul"}, {"div", "Div"}, {"maximum", "Max"}, {"minimum", "Min"},
        {"matmul", "MatMul"}};
    if (auto it = kDirect.find(op); it != kDirect.end()) return unary(it->second);
    if (auto it = kBinary.find(op); it != kBinary.end()) return (void)final_node(it->second, {in(0), in(1)});
    if (op == "sum") return (void)final_node("Sum", n.inputs);
    if (op == "concat") return set_i(final_node("Concat", n.inputs), "axis", ai("axis"));
    if (op == "relu6") return (void)final_node("Clip", {in(0), scalar(0, "min"), scalar(6, "max")});
    if (op == "clip") return (void)final_node("Clip", {in(0), scalar(af("min"), "min"), scalar(af("max"), "max")});
    if (op == "leaky_relu") return set_f(final_node("LeakyRelu", {in(0)}), "alpha", af("alpha"));
    if (op == "elu") return set_f(final_node("Elu", {in(0)}), "alpha", af("alpha"));
    if (op == "selu") return unary("Selu");  // ONNX's default alpha and gamma are the SELU constants
    if (op == "hard_sigmoid") {
      auto* p = final_node("HardSigmoid", {in(0)});
      set_f(p, "alpha", af("alpha"));
      set_f(p, "beta", af("beta"));
      return;
    }
    if (op == "hardswish") {
      if (opset_ >= 14) return unary("HardSwish");
      // x * clip(x + 3, 0, 6) / 6
      const std::string c = h("Clip", {h("Add", {in(0), scalar(3, "three")}, "add"), scalar(0, "zero"), scalar(6, "six")},
                              "clip");
      return (void)final_node("Div", {h("Mul", {in(0), c}, "mul"), scalar(6, "six")});
    }
    if (op == "gelu") return export_gelu();
    if (op == "rsqrt") return (void)final_node("Reciprocal", {h("Sqrt", {in(0)}, "sqrt")});
    if (op == "square") return (void)final_node("Mul", {in(0), in(0)});
    if (op == "pow") return (void)final_node("Pow", {in(0), scalar(af("exponent"), "exponent")});
    if (op == "softmax" || op == "log_softmax")
      return set_i(final_node(op == "softmax" ? "Softmax" : "LogSoftmax", {in(0)}), "axis", ai("axis"));
    if (op == "conv1d" || op == "conv2d" || op == "conv3d" || op == "conv_transpose2d") return export_conv();
    if (op == "dense") return export_dense();
    if (op.find("pool") != std::string::npos) return export_pool();
    if (op == "batch_norm") return export_batch_norm();
    if (op == "layer_norm") return export_layer_norm();
    if (op == "lrn") {
      auto* p = final_node("LRN", {in(0)});
      set_i(p, "size", ai("size"));
      set_f(p, "alpha", af("alpha"));
      set_f(p, "beta", af("beta"));
      set_f(p, "bias", af("bias"));
      return;
    }
    if (op.rfind("reduce_", 0) == 0) return export_reduce();
    if (op == "reshape") return (void)final_node("Reshape", {in(0), ints(aints("shape"), "shape")});
    if (op == "flatten") return set_i(final_node("Flatten", {in(0)}), "axis", ai("axis"));
    if (op == "transpose") {
      auto* p = final_node("Transpose", {in(0)});
      if (!aints("perm").empty()) set_ints(p, "perm", aints("perm"));
      return;
    }
    if (op == "slice") return export_slice();
    if (op == "pad") return export_pad();
    if (op == "squeeze") {
      if (aints("axes").empty()) return unary("Squeeze");
      return (void)final_node("Squeeze", {in(0), ints(aints("axes"), "axes")});
    }
    if (op == "unsqueeze") return (void)final_node("Unsqueeze", {in(0), ints(aints("axes"), "axes")});
    if (op == "resize_nearest" || op == "resize_bilinear") return export_resize();
    if (op == "simple_rnn" || op == "lstm" || op == "gru") return export_rnn();
    refuse("no ONNX counterpart");
  }

  void export_gelu() {
    const std::string x = in(0);
    if (as("approximate") == "tanh") {
      // 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x*x*x))), in the reference's order.
      std::string p = h("Mul", {scalar(0.044715, "k"), x}, "cube0");
      p = h("Mul", {p, x}, "cube1");
      p = h("Mul", {p, x}, "cube2");
      const std::string inner = h("Mul", {scalar(std::sqrt(2.0 / std::numbers::pi), "c"), h("Add", {x, p}, "poly")}, "inner");
      const std::string a = h("Add", {scalar(1, "one"), h("Tanh", {inner}, "tanh")}, "add");
      return (void)final_node("Mul", {h("Mul", {scalar(0.5, "half"), x}, "halfx"), a});
    }
    // x*(1 + erf(x/sqrt(2)))*0.5: the form the importer fuses back to gelu.
    const std::string e = h("Erf", {h("Div", {x, scalar(std::numbers::sqrt2, "sqrt2")}, "div")}, "erf");
    const std::string a = h("Add", {e, scalar(1, "one")}, "add");
    final_node("Mul", {h("Mul", {x, a}, "mul"), scalar(0.5, "half")});
  }

  void export_conv() {
    const bool transpose = cur_->op == "conv_transpose2d";
    std::vector<std::string> ins = {in(0), in(1)};
    if (ai("bias")) ins.push_back(in(2));
    auto* p = final_node(transpose ? "ConvTranspose" : "Conv", ins);
    set_ints(p, "kernel_shape", aints("kernel_shape"));
    set_ints(p, "strides", aints("strides"));
    set_ints(p, "dilations", aints("dilations"));
    set_i(p, "group", ai("group"));
    if (transpose) {
      set_ints(p, "pads", aints("pads"));
      set_ints(p, "output_padding", aints("output_padding"));
    } else if (as("auto_pad") == "NOTSET") {
      set_ints(p, "pads", aints("pads"));
    } else {
      set_s(p, "auto_pad", as("auto_pad"));
    }
  }

  void export_dense() {
    const bool bias = ai("bias") != 0;
    if (in_shape().size() == 2) {
      std::vector<std::string> ins = {in(0), in(1)};
      if (bias) ins.push_back(in(2));
      return set_i(final_node("Gemm", ins), "transB", 1);
    }
    auto [tp, wt] = helper("Transpose", {in(1)}, "weight_t");
    set_ints(tp, "perm", {1, 0});
    if (!bias) return (void)final_node("MatMul", {in(0), wt});
    final_node("Add", {h("MatMul", {in(0), wt}, "matmul"), in(2)});
  }

  void export_pool() {
    const std::string& op = cur_->op;
    const bool avg = op.rfind("avg", 0) == 0;
    std::vector<int64_t> pads = aints("pads");
    int64_t ceil_mode = ai("ceil_mode");
    if (as("auto_pad") == "NOTSET" && ceil_mode == 1) ceil_mode = ceil_to_onnx(avg, pads);
    auto* p = final_node(avg ? "AveragePool" : "MaxPool", {in(0)});
    set_ints(p, "kernel_shape", aints("kernel_shape"));
    set_ints(p, "strides", aints("strides"));
    if (as("auto_pad") == "NOTSET") set_ints(p, "pads", pads);
    else set_s(p, "auto_pad", as("auto_pad"));
    set_i(p, "ceil_mode", ceil_mode);
    if (avg) set_i(p, "count_include_pad", ai("count_include_pad"));
  }

  // ceil_mode=1 drops a last window that would start in the right padding (PyTorch, later ONNX);
  // ONNX 1.12 keeps it. Returns the ceil_mode to write, adjusting the end pads so that the window
  // count and the windows stay the Quorum ones.
  int64_t ceil_to_onnx(bool avg, std::vector<int64_t>& pads) {
    const auto& k = aints("kernel_shape");
    const auto& st = aints("strides");
    const size_t d = k.size();
    std::vector<int64_t> want(d), floor_out(d), ceil_out(d);
    bool all_ceil = true, all_floor = true;
    for (size_t i = 0; i < d; ++i) {
      const int64_t in = in_shape()[2 + i], pb = pads[i], pe = pads[d + i];
      const int64_t span = in + pb + pe - k[i];
      floor_out[i] = span / st[i] + 1;
      ceil_out[i] = (span + st[i] - 1) / st[i] + 1;
      want[i] = ceil_out[i];
      if ((want[i] - 1) * st[i] >= in + pb) --want[i];
      all_ceil = all_ceil && want[i] == ceil_out[i];
      all_floor = all_floor && want[i] == floor_out[i];
    }
    if (all_ceil) return 1;
    if (all_floor) return 0;
    // Mixed: floor mode with end pads that just fit the wanted windows. Exact unless the divisor
    // counts padding (cells past the padded input would become padding).
    if (avg && ai("count_include_pad") == 1)
      refuse("ceil_mode=1 with count_include_pad=1 where only some axes drop their last window has no ONNX 1.12 form");
    for (size_t i = 0; i < d; ++i)
      if (want[i] != floor_out[i]) pads[d + i] = (want[i] - 1) * st[i] + k[i] - in_shape()[2 + i] - pads[i];
    return 0;
  }

  // (x - mean) * (1 / sqrt(var + eps)) over `axes`, the reference's normalisation.
  std::string normalise(const std::vector<int64_t>& axes, double eps) {
    auto reduce_mean = [&](const std::string& v, const std::string& what) {
      auto [p, o] = helper("ReduceMean", {v}, what);
      set_ints(p, "axes", axes);
      set_i(p, "keepdims", 1);
      return o;
    };
    const std::string d = h("Sub", {in(0), reduce_mean(in(0), "mean")}, "centered");
    const std::string var = reduce_mean(h("Mul", {d, d}, "squared"), "var");
    const std::string rstd = h("Reciprocal", {h("Sqrt", {h("Add", {var, scalar(eps, "epsilon")}, "var_eps")}, "std")}, "rstd");
    return h("Mul", {d, rstd}, "normalized");
  }

  void export_batch_norm() {
    const double eps = af("epsilon");
    if (ai("training") == 0) {
      auto* p = final_node("BatchNormalization", {in(0), in(1), in(2), in(3), in(4)});
      set_f(p, "epsilon", eps);
      return;
    }
    // Batch statistics over N and the spatial dims, then scale and bias per channel.
    const int64_t rank = static_cast<int64_t>(in_shape().size());
    std::vector<int64_t> axes = {0}, pshape = {in_shape()[1]};
    for (int64_t a = 2; a < rank; ++a) {
      axes.push_back(a);
      pshape.push_back(1);
    }
    const std::string xn = normalise(axes, eps);
    const std::string shape = ints(pshape, "param_shape");
    const std::string scale = h("Reshape", {in(1), shape}, "scale");
    const std::string bias = h("Reshape", {in(2), shape}, "bias");
    final_node("Add", {h("Mul", {scale, xn}, "scaled"), bias});
  }

  void export_layer_norm() {
    const int64_t rank = static_cast<int64_t>(in_shape().size());
    int64_t axis = ai("axis");
    if (axis < 0) axis += rank;
    if (opset_ >= 17) {
      auto* p = final_node("LayerNormalization", {in(0), in(1), in(2)});
      set_i(p, "axis", axis);
      set_f(p, "epsilon", af("epsilon"));
      return;
    }
    std::vector<int64_t> axes;
    for (int64_t a = axis; a < rank; ++a) axes.push_back(a);
    const std::string xn = normalise(axes, af("epsilon"));
    final_node("Add", {h("Mul", {xn, in(1)}, "scaled"), in(2)});
  }

  void export_reduce() {
    static const std::map<std::string, std::string> kReduce = {{"reduce_sum", "ReduceSum"},
                                                               {"reduce_mean", "ReduceMean"},
                                                               {"reduce_max", "ReduceMax"},
                                                               {"reduce_min", "ReduceMin"},
                                                               {"reduce_prod", "ReduceProd"}};
    const std::string& type = kReduce.at(cur_->op);
    const auto& axes = aints("axes");
    onnx::NodeProto* p = nullptr;
    if (type == "ReduceSum") {
      p = axes.empty() ? final_node(type, {in(0)}) : final_node(type, {in(0), ints(axes, "axes")});
    } else {
      p = final_node(type, {in(0)});
      if (!axes.empty()) set_ints(p, "axes", axes);
    }
    set_i(p, "keepdims", ai("keepdims"));
  }

  void export_slice() {
    std::vector<int64_t> starts = aints("starts"), ends = aints("ends"), axes = aints("axes"), steps = aints("steps");
    if (starts.empty()) {  // slices nothing: the whole first axis
      starts = {0};
      ends = {kInt64Max};
      axes = {0};
      steps = {1};
    }
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    if (steps.empty()) steps.assign(starts.size(), 1);
    final_node("Slice", {in(0), ints(starts, "starts"), ints(ends, "ends"), ints(axes, "axes"), ints(steps, "steps")});
  }

  void export_pad() {
    std::vector<int64_t> pads = aints("pads");
    if (pads.empty()) pads.assign(2 * in_shape().size(), 0);
    std::vector<std::string> ins = {in(0), ints(pads, "pads")};
    if (as("mode") == "constant") ins.push_back(scalar(af("value"), "value"));
    set_s(final_node("Pad", ins), "mode", as("mode"));
  }

  void export_resize() {
    const Shape& x = in_shape();
    const auto& sizes = aints("sizes");
    auto* p = final_node("Resize", {in(0), "", "", ints({x[0], x[1], sizes[0], sizes[1]}, "sizes")});
    set_s(p, "coordinate_transformation_mode", as("coordinate_transformation_mode"));
    if (cur_->op == "resize_nearest") {
      set_s(p, "mode", "nearest");
      set_s(p, "nearest_mode", as("nearest_mode"));
    } else {
      set_s(p, "mode", "linear");
    }
  }

  // PyTorch gate blocks → ONNX gate blocks: ONNX block k is PyTorch block order[k].
  static std::vector<int64_t> onnx_gate_order(const std::string& op) {
    if (op == "lstm") return {0, 3, 1, 2};  // PyTorch i f g o → ONNX i o f c
    if (op == "gru") return {1, 0, 2};      // PyTorch r z n → ONNX z r h
    return {0};
  }

  Tensor weight(size_t i) {
    auto it = g_.initializers.find(in(i));
    if (it == g_.initializers.end())
      refuse("recurrent weights must be initializers to be exported ('" + in(i) + "' is computed)");
    return it->second;
  }

  // Rows of `w` [G*H, K] regrouped by gate into ONNX order, written into `dst` from row `row0`.
  static void reorder_rows(const Tensor& w, const std::vector<int64_t>& order, int64_t hs, Tensor& dst, int64_t off) {
    const int64_t k = w.rank() == 2 ? w.dim(1) : 1;
    for (size_t blk = 0; blk < order.size(); ++blk)
      for (int64_t r = 0; r < hs; ++r)
        for (int64_t c = 0; c < k; ++c)
          dst.set(off + (static_cast<int64_t>(blk) * hs + r) * k + c, w.get((order[blk] * hs + r) * k + c));
  }

  void export_rnn() {
    const std::string& op = cur_->op;
    const int64_t hs = ai("hidden_size");
    const auto order = onnx_gate_order(op);
    const int64_t gh = static_cast<int64_t>(order.size()) * hs;
    const Tensor w_ih = weight(1), w_hh = weight(2), b_ih = weight(3), b_hh = weight(4);
    const DType dt = dtype();
    Tensor w(dt, {1, gh, w_ih.dim(1)}), r(dt, {1, gh, hs}), b(dt, {1, 2 * gh});
    reorder_rows(w_ih, order, hs, w, 0);
    reorder_rows(w_hh, order, hs, r, 0);
    reorder_rows(b_ih, order, hs, b, 0);
    reorder_rows(b_hh, order, hs, b, gh);
    const std::string wn = constant(w, "W"), rn = constant(r, "R"), bn = constant(b, "B");
    auto [tp, xt] = helper("Transpose", {in(0)}, "x_time_major");
    set_ints(tp, "perm", {1, 0, 2});
    const bool seq = ai("return_sequences") != 0;
    const std::string type = op == "lstm" ? "LSTM" : op == "gru" ? "GRU" : "RNN";
    const std::string cell_out = fresh(cur_->name + (seq ? "/Y" : "/Y_h"));
    auto* p = gp_->add_node();
    p->set_op_type(type);
    p->set_name(fresh(cur_->name + "/" + type));
    for (const auto& i : {xt, wn, rn, bn}) p->add_input(i);
    if (seq) {
      p->add_output(cell_out);
    } else {
      p->add_output("");
      p->add_output(cell_out);
    }
    set_i(p, "hidden_size", hs);
    if (op == "gru") set_i(p, "linear_before_reset", 1);
    if (!seq) return (void)final_node("Squeeze", {cell_out, ints({0}, "axes")});
    const std::string ys = h("Squeeze", {cell_out, ints({1}, "axes")}, "y_time_major");
    set_ints(final_node("Transpose", {ys}), "perm", {1, 0, 2});
  }
};

// ---------------------------------------------------------------------------------------------
// Import

class Importer {
 public:
  Importer(const onnx::ModelProto& m, std::string where, const ValidateOptions& opt,
           const std::map<std::string, Tensor>& constant_inputs)
      : m_(m), where_(std::move(where)), opt_(opt), constant_inputs_(constant_inputs) {}

  Graph run() {
    for (const auto& imp : m_.opset_import())
      if (imp.domain().empty() || imp.domain() == "ai.onnx") opset_ = static_cast<int>(imp.version());
    if (opset_ == 0) throw UserError(where_ + ": the model imports no default-domain opset");
    const onnx::GraphProto& gp = m_.graph();
    g_.name = gp.name().empty() ? "model" : gp.name();

    for (const auto& t : gp.initializer()) {
      consts_[t.name()] = tensor_from_proto(t, where_);
      taken_values_.insert(t.name());
    }
    for (const auto& vi : gp.input()) {
      taken_values_.insert(vi.name());
      if (consts_.count(vi.name())) continue;  // IR < 4 lists initializers as inputs too
      if (auto it = constant_inputs_.find(vi.name()); it != constant_inputs_.end()) {
        consts_[vi.name()] = it->second;
        continue;
      }
      ValueInfo v{vi.name(), read_type(vi, "input")};
      types_[v.name] = v.type;
      graph_inputs_.insert(v.name);
      g_.inputs.push_back(v);
    }
    for (const auto& n : gp.node())
      for (const auto& o : n.output()) taken_values_.insert(o);
    for (const auto& n : gp.node())
      for (const auto& i : n.input()) consumers_[i].push_back(&n);
    for (const auto& o : gp.output()) graph_outputs_.insert(o.name());
    // Node names: the ONNX name, else the first output's; unique.
    for (const auto& n : gp.node()) {
      std::string base = n.name();
      for (const auto& o : n.output())
        if (base.empty()) base = o;
      if (base.empty()) base = n.op_type();
      std::string s = base;
      for (int i = 1; taken_nodes_.count(s); ++i) s = base + "_" + std::to_string(i);
      taken_nodes_.insert(s);
      names_[&n] = s;
    }
    find_gelu(gp);

    for (const auto& n : gp.node()) {
      cur_ = &n;
      cur_name_ = names_.at(&n);
      if (skip_.count(&n)) continue;
      if (!n.domain().empty() && n.domain() != "ai.onnx")
        fail("operator not in the catalogue (domain '" + n.domain() + "')");
      import_node(n);
    }

    size_t real = static_cast<size_t>(gp.output_size());
    for (const auto& p : m_.metadata_props())
      if (p.key() == kOutputsKey) {
        char* end = nullptr;
        const unsigned long long k = std::strtoull(p.value().c_str(), &end, 10);
        if (end && *end == 0 && k >= 1 && k <= real) real = static_cast<size_t>(k);
      }
    for (size_t i = 0; i < real; ++i) {
      const std::string& o = gp.output(static_cast<int>(i)).name();
      if (!types_.count(o) && consts_.count(o)) use(o);
      g_.outputs.push_back(o);
    }
    validate(g_, where_, opt_);
    return g_;
  }

 private:
  const onnx::ModelProto& m_;
  std::string where_;
  ValidateOptions opt_;
  const std::map<std::string, Tensor>& constant_inputs_;
  int opset_ = 0;
  Graph g_;
  std::map<std::string, Tensor> consts_;
  std::map<std::string, TensorType> types_;
  std::set<std::string> graph_inputs_, graph_outputs_, taken_values_, taken_nodes_;
  std::map<std::string, std::vector<const onnx::NodeProto*>> consumers_;
  std::map<const onnx::NodeProto*, std::string> names_;
  std::set<const onnx::NodeProto*> skip_;
  std::map<const onnx::NodeProto*, std::string> gelu_;  // final Mul → the gelu's input
  const onnx::NodeProto* cur_ = nullptr;
  std::string cur_name_;

  [[noreturn]] void fail(const std::string& msg) const {
    throw UserError(where_ + ": node '" + cur_name_ + "' (" + cur_->op_type() + "): " + msg);
  }

  TensorType read_type(const onnx::ValueInfoProto& vi, const std::string& what) const {
    const std::string w = where_ + ": " + what + " '" + vi.name() + "'";
    if (!vi.type().has_tensor_type()) throw UserError(w + " is not a tensor");
    const auto& tt = vi.type().tensor_type();
    TensorType t;
    if (!dtype_of_elem(tt.elem_type(), t.dtype))
      throw UserError(w + " has element type " + elem_type_name(tt.elem_type()) + " (supported: FLOAT, DOUBLE, INT64)");
    if (!tt.has_shape()) throw UserError(w + " has no shape");
    for (const auto& d : tt.shape().dim()) {
      if (!d.has_dim_value() || d.dim_value() < 0)
        throw UserError(w + " has a symbolic or unknown dimension" +
                        (d.has_dim_param() ? " '" + d.dim_param() + "'" : std::string()));
      t.shape.push_back(d.dim_value());
    }
    return t;
  }

  // ---- constants and attributes
  const std::string& in(int i) const {
    if (i >= cur_->input_size() || cur_->input(i).empty()) fail("input " + std::to_string(i) + " is missing");
    return cur_->input(i);
  }
  bool present(int i) const { return i < cur_->input_size() && !cur_->input(i).empty(); }
  const Tensor* constant(int i) const {
    if (!present(i)) return nullptr;
    auto it = consts_.find(cur_->input(i));
    return it == consts_.end() ? nullptr : &it->second;
  }
  const Tensor& need_constant(int i, const std::string& what) const {
    if (!present(i)) fail("input " + std::to_string(i) + " (" + what + ") is missing");
    const Tensor* t = constant(i);
    if (!t) fail(what + " ('" + cur_->input(i) + "') must be a constant (an initializer or a Constant node)");
    return *t;
  }
  std::vector<int64_t> const_ints(int i, const std::string& what) const {
    const Tensor& t = need_constant(i, what);
    if (t.dtype() != DType::I64) fail(what + " must be an integer tensor");
    return std::vector<int64_t>(t.i64(), t.i64() + t.numel());
  }
  static double tensor_scalar(const Tensor& t) {
    return t.dtype() == DType::F32 ? recover_double(t.f32()[0]) : t.get(0);
  }
  double const_scalar(int i, const std::string& what) const {
    const Tensor& t = need_constant(i, what);
    if (t.numel() != 1) fail(what + " must hold one value, it has shape " + core::to_string(t.shape()));
    return tensor_scalar(t);
  }
  const onnx::AttributeProto* attr(const std::string& name) const {
    for (const auto& a : cur_->attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  bool has(const std::string& name) const { return attr(name) != nullptr; }
  int64_t geti(const std::string& name, int64_t def) const {
    const auto* a = attr(name);
    return a ? a->i() : def;
  }
  double getf(const std::string& name, double def) const {
    const auto* a = attr(name);
    return a ? recover_double(a->f()) : def;
  }
  std::string gets(const std::string& name, const std::string& def) const {
    const auto* a = attr(name);
    return a ? a->s() : def;
  }
  std::vector<int64_t> getints(const std::string& name, std::vector<int64_t> def = {}) const {
    const auto* a = attr(name);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : def;
  }
  // True when output i exists and something reads it.
  bool output_used(int i) const {
    if (i >= cur_->output_size() || cur_->output(i).empty()) return false;
    const std::string& o = cur_->output(i);
    return consumers_.count(o) || graph_outputs_.count(o);
  }
  void only_first_output() const {
    for (int i = 1; i < cur_->output_size(); ++i)
      if (output_used(i)) fail("output " + std::to_string(i) + " ('" + cur_->output(i) + "') is not supported");
  }

  // ---- building the Quorum graph
  const TensorType& type_of(const std::string& v) {
    use(v);
    return types_.at(v);
  }
  std::string use(const std::string& v) {
    if (types_.count(v)) return v;
    auto it = consts_.find(v);
    if (it == consts_.end()) fail("input '" + v + "' is not defined before this node");
    g_.initializers.emplace(v, it->second);
    types_[v] = it->second.type();
    return v;
  }
  std::string new_initializer(const std::string& what, Tensor t) {
    const std::string name = fresh_value(cur_name_ + "/" + what);
    types_[name] = t.type();
    g_.initializers.emplace(name, std::move(t));
    return name;
  }
  std::string scalar_like(const std::string& v, double x, const std::string& what) {
    Tensor t(type_of(v).dtype, {});
    t.set(0, x);
    return new_initializer(what, t);
  }
  std::string fresh_value(const std::string& base) {
    std::string s = base;
    for (int i = 1; taken_values_.count(s); ++i) s = base + "_" + std::to_string(i);
    taken_values_.insert(s);
    return s;
  }
  // Adds a catalogue node. Without `out` it is a helper ("<node>/<op>"), else it produces the ONNX
  // value `out` and carries the ONNX node's name.
  // `named` false: a helper node that still produces the ONNX value `out`.
  std::string emit(const std::string& op, const std::vector<std::string>& ins, const Attrs& attrs,
                   const std::string& out = "", bool named = true) {
    Node n;
    n.op = op;
    n.attrs = attrs;
    if (out.empty() || !named) {
      std::string base = cur_name_ + "/" + op, s = base;
      for (int i = 1; taken_nodes_.count(s); ++i) s = base + "_" + std::to_string(i);
      taken_nodes_.insert(s);
      n.name = s;
      n.outputs = {out.empty() ? fresh_value(s) : out};
    } else {
      n.name = cur_name_;
      n.outputs = {out};
    }
    const ops::OpSpec& spec = ops::op(op);
    std::vector<TensorType> data;
    const size_t nd = spec.min_inputs == spec.max_inputs ? std::min(ins.size(), static_cast<size_t>(spec.min_inputs))
                                                         : ins.size();
    for (const auto& i : ins) n.inputs.push_back(use(i));
    for (size_t i = 0; i < nd; ++i) data.push_back(types_.at(ins[i]));
    try {
      const Attrs canon = ops::canonical_attrs(spec, attrs, opt_.allow_invalid_attrs);
      const ops::Signature sig = spec.infer(data, canon);
      if (sig.outputs.size() != 1) fail("operator '" + op + "' makes more than one output");
      types_[n.outputs[0]] = sig.outputs[0];
    } catch (const core::OpError& e) {
      fail(std::string(e.what()) + " (as Quorum operator '" + op + "')");
    }
    g_.nodes.push_back(std::move(n));
    return g_.nodes.back().outputs[0];
  }
  std::string emit_final(const std::string& op, const std::vector<std::string>& ins, const Attrs& attrs = {}) {
    only_first_output();
    return emit(op, ins, attrs, cur_->output(0));
  }
  std::vector<std::string> inputs() const {
    std::vector<std::string> v;
    for (const auto& i : cur_->input())
      if (!i.empty()) v.push_back(i);
    return v;
  }

  // ---- GELU fusion: Div(x, sqrt 2) → Erf → Add(·, 1) → Mul(x, ·) → Mul(·, 0.5)
  const onnx::NodeProto* sole_consumer(const std::string& v, const std::string& type) const {
    if (graph_outputs_.count(v)) return nullptr;
    auto it = consumers_.find(v);
    if (it == consumers_.end() || it->second.size() != 1 || it->second[0]->op_type() != type) return nullptr;
    return it->second[0];
  }
  bool is_const(const std::string& v, double want, double tol) const {
    auto it = consts_.find(v);
    if (it == consts_.end() || it->second.numel() != 1 || it->second.dtype() == DType::I64) return false;
    return std::abs(it->second.get(0) - want) <= tol;
  }
  // The other input of a two-input node, if one of its inputs is `v`.
  static std::string other(const onnx::NodeProto& n, const std::string& v) {
    if (n.input_size() != 2) return "";
    if (n.input(0) == v) return n.input(1);
    if (n.input(1) == v) return n.input(0);
    return "";
  }
  void find_gelu(const onnx::GraphProto& gp) {
    std::map<std::string, const onnx::NodeProto*> producer;
    for (const auto& n : gp.node())
      for (const auto& o : n.output()) producer[o] = &n;
    for (const auto& e : gp.node()) {
      if (e.op_type() != "Erf" || e.input_size() != 1 || e.output_size() != 1) continue;
      auto pi = producer.find(e.input(0));
      if (pi == producer.end()) continue;
      const onnx::NodeProto* div = pi->second;
      if (div->op_type() != "Div" || div->input_size() != 2 || !is_const(div->input(1), std::numbers::sqrt2, 1e-6))
        continue;
      const std::string x = div->input(0);
      if (!sole_consumer(div->output(0), "Erf")) continue;
      const onnx::NodeProto* add = sole_consumer(e.output(0), "Add");
      if (!add || !is_const(other(*add, e.output(0)), 1.0, 0)) continue;
      const onnx::NodeProto* mul = sole_consumer(add->output(0), "Mul");
      if (!mul || other(*mul, add->output(0)) != x) continue;
      const onnx::NodeProto* half = sole_consumer(mul->output(0), "Mul");
      if (!half || !is_const(other(*half, mul->output(0)), 0.5, 0)) continue;
      skip_.insert({div, &e, add, mul});
      gelu_[half] = x;
    }
  }

  // ---- operators
  void import_node(const onnx::NodeProto& n) {
    const std::string& t = n.op_type();
    if (auto it = gelu_.find(&n); it != gelu_.end())
      return (void)emit_final("gelu", {it->second}, {{"approximate", std::string("none")}});
    if (t == "Constant") return import_constant();
    static const std::map<std::string, std::string> kUnary = {
        {"Relu", "relu"},       {"Sigmoid", "sigmoid"}, {"Tanh", "tanh"},   {"Softplus", "softplus"},
        {"Softsign", "softsign"}, {"Exp", "exp"},       {"Log", "log"},     {"Sqrt", "sqrt"},
        {"Reciprocal", "reciprocal"}, {"Abs", "abs"},   {"Neg", "neg"},     {"HardSwish", "hardswish"},
        {"GlobalAveragePool", "global_avg_pool"},       {"GlobalMaxPool", "global_max_pool"}};
    static const std::map<std::string, std::string> kBinary = {
        {"Add", "add"}, {"Sub", "sub"}, {"Mul", "mul"}, {"Div", "div"}};
    if (auto it = kUnary.find(t); it != kUnary.end()) return (void)emit_final(it->second, {in(0)});
    if (auto it = kBinary.find(t); it != kBinary.end()) return (void)emit_final(it->second, {in(0), in(1)});
    if (t == "MatMul") return import_matmul();
    if (t == "Max" || t == "Min") {
      const auto ins = inputs();
      if (ins.size() < 2) fail("needs at least 2 inputs");
      std::string acc = ins[0];
      const std::string op = t == "Max" ? "maximum" : "minimum";
      for (size_t i = 1; i + 1 < ins.size(); ++i) acc = emit(op, {acc, ins[i]}, {});
      return (void)emit_final(op, {acc, ins.back()});
    }
    if (t == "Sum") return (void)emit_final("sum", inputs());
    if (t == "Concat") return (void)emit_final("concat", inputs(), {{"axis", geti("axis", 1)}});
    if (t == "LeakyRelu") return (void)emit_final("leaky_relu", {in(0)}, {{"alpha", getf("alpha", 0.01)}});
    if (t == "Elu") return (void)emit_final("elu", {in(0)}, {{"alpha", getf("alpha", 1.0)}});
    if (t == "HardSigmoid")
      return (void)emit_final("hard_sigmoid", {in(0)},
                              {{"alpha", getf("alpha", 0.2)}, {"beta", getf("beta", 0.5)}});
    if (t == "Selu") return import_selu();
    if (t == "Clip") return import_clip();
    if (t == "Pow") return (void)emit_final("pow", {in(0)}, {{"exponent", const_scalar(1, "exponent")}});
    if (t == "Softmax" || t == "LogSoftmax") return import_softmax();
    if (t == "Conv") return import_conv();
    if (t == "ConvTranspose") return import_conv_transpose();
    if (t == "Gemm") return import_gemm();
    if (t == "MaxPool" || t == "AveragePool") return import_pool();
    if (t == "BatchNormalization") return import_batch_norm();
    if (t == "LayerNormalization") return import_layer_norm();
    if (t == "LRN")
      return (void)emit_final("lrn", {in(0)},
                              {{"size", geti("size", 0)},
                               {"alpha", getf("alpha", 1e-4)},
                               {"beta", getf("beta", 0.75)},
                               {"bias", getf("bias", 1.0)}});
    if (t.rfind("Reduce", 0) == 0) return import_reduce();
    if (t == "Reshape") return import_reshape();
    if (t == "Flatten") return (void)emit_final("flatten", {in(0)}, {{"axis", geti("axis", 1)}});
    if (t == "Transpose") {
      Attrs a;
      if (has("perm")) a["perm"] = getints("perm");
      return (void)emit_final("transpose", {in(0)}, a);
    }
    if (t == "Slice") return import_slice();
    if (t == "Pad") return import_pad();
    if (t == "Squeeze" || t == "Unsqueeze") {
      std::vector<int64_t> axes = opset_ >= 13 ? (present(1) ? const_ints(1, "axes") : std::vector<int64_t>{})
                                               : getints("axes");
      if (t == "Unsqueeze" && axes.empty()) fail("needs axes");
      return (void)emit_final(t == "Squeeze" ? "squeeze" : "unsqueeze", {in(0)}, {{"axes", axes}});
    }
    if (t == "Resize") return import_resize();
    if (t == "RNN" || t == "LSTM" || t == "GRU") return import_rnn();
    fail("operator not in the catalogue");
  }

  void import_constant() {
    const auto& n = *cur_;
    if (n.output_size() != 1 || n.attribute_size() != 1) fail("expects one attribute and one output");
    const auto& a = n.attribute(0);
    Tensor t;
    if (a.name() == "value") {
      t = tensor_from_proto(a.t(), where_ + ": node '" + cur_name_ + "'");
    } else if (a.name() == "value_float") {
      t = Tensor(DType::F32, {});
      t.f32()[0] = a.f();
    } else if (a.name() == "value_floats") {
      t = Tensor(DType::F32, {a.floats_size()});
      for (int i = 0; i < a.floats_size(); ++i) t.f32()[i] = a.floats(i);
    } else if (a.name() == "value_int") {
      t = Tensor(DType::I64, {});
      t.i64()[0] = a.i();
    } else if (a.name() == "value_ints") {
      t = Tensor(DType::I64, {a.ints_size()});
      for (int i = 0; i < a.ints_size(); ++i) t.i64()[i] = a.ints(i);
    } else {
      fail("attribute '" + a.name() + "' is not supported");
    }
    consts_[n.output(0)] = t;
  }

  void import_matmul() {
    std::string a = in(0), b = in(1);
    const size_t ra = type_of(a).shape.size(), rb = type_of(b).shape.size();
    if (ra >= 2 && rb >= 2) return (void)emit_final("matmul", {a, b});
    // NumPy's 1-D promotion, spelled with unsqueeze and squeeze.
    if (ra == 1) a = emit("unsqueeze", {a}, {{"axes", std::vector<int64_t>{0}}});
    if (rb == 1) b = emit("unsqueeze", {b}, {{"axes", std::vector<int64_t>{-1}}});
    const std::string p = emit("matmul", {a, b}, {});
    std::vector<int64_t> axes;
    if (ra == 1) axes.push_back(-2);
    if (rb == 1) axes.push_back(-1);
    if (ra == 1 && rb == 1) axes = {-2, -1};
    emit_final("squeeze", {p}, {{"axes", axes}});
  }

  void import_selu() {
    const double alpha = getf("alpha", 1.67326319217681884765625), gamma = getf("gamma", 1.05070102214813232421875);
    if (std::abs(alpha - 1.6732632423543772) < 1e-6 && std::abs(gamma - 1.0507009873554805) < 1e-6)
      return (void)emit_final("selu", {in(0)});
    const std::string e = emit("elu", {in(0)}, {{"alpha", alpha}});
    emit_final("mul", {e, scalar_like(in(0), gamma, "gamma")});
  }

  void import_clip() {
    double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
    if (opset_ < 11) {
      lo = getf("min", lo);
      hi = getf("max", hi);
    } else {
      if (present(1)) lo = const_scalar(1, "min");
      if (present(2)) hi = const_scalar(2, "max");
    }
    if (lo == 0 && hi == 6) return (void)emit_final("relu6", {in(0)});
    emit_final("clip", {in(0)}, {{"min", lo}, {"max", hi}});
  }

  void import_softmax() {
    const std::string op = cur_->op_type() == "Softmax" ? "softmax" : "log_softmax";
    const int64_t rank = static_cast<int64_t>(type_of(in(0)).shape.size());
    int64_t axis = geti("axis", opset_ >= 13 ? -1 : 1);
    if (opset_ < 13) {
      const int64_t a = axis < 0 ? axis + rank : axis;
      if (a != rank - 1)
        fail("axis " + std::to_string(axis) + " before opset 13 normalises over the flattened dims " +
             std::to_string(a) + ".." + std::to_string(rank - 1) + "; only the last axis is supported");
    }
    emit_final(op, {in(0)}, {{"axis", axis}});
  }

  void conv_common(Attrs& a) {
    for (const char* k : {"strides", "dilations", "pads", "kernel_shape"})
      if (has(k)) a[k] = getints(k);
    a["group"] = geti("group", 1);
  }

  void import_conv() {
    const Shape w = type_of(in(1)).shape;
    if (w.size() < 3 || w.size() > 5) fail("weight of rank " + std::to_string(w.size()) + " (1 to 3 spatial dims)");
    Attrs a;
    conv_common(a);
    if (!has("kernel_shape")) a["kernel_shape"] = std::vector<int64_t>(w.begin() + 2, w.end());
    a["out_channels"] = w[0];
    a["bias"] = int64_t{present(2) ? 1 : 0};
    const std::string ap = gets("auto_pad", "NOTSET");
    a["auto_pad"] = ap;
    if (ap != "NOTSET") a.erase("pads");
    emit_final("conv" + std::to_string(w.size() - 2) + "d", inputs(), a);
  }

  void import_conv_transpose() {
    const Shape w = type_of(in(1)).shape;
    if (w.size() != 4) fail("only 2 spatial dims are in the catalogue (conv_transpose2d)");
    if (has("output_shape")) fail("attribute output_shape is not supported (give pads and output_padding)");
    if (gets("auto_pad", "NOTSET") != "NOTSET") fail("auto_pad is not supported by conv_transpose2d");
    Attrs a;
    conv_common(a);
    if (has("output_padding")) a["output_padding"] = getints("output_padding");
    if (!has("kernel_shape")) a["kernel_shape"] = std::vector<int64_t>(w.begin() + 2, w.end());
    a["out_channels"] = w[1] * geti("group", 1);
    a["bias"] = int64_t{present(2) ? 1 : 0};
    emit_final("conv_transpose2d", inputs(), a);
  }

  void import_gemm() {
    if (geti("transA", 0) != 0) fail("transA=1 is not supported");
    if (getf("alpha", 1.0) != 1.0 || getf("beta", 1.0) != 1.0) fail("alpha and beta other than 1 are not supported");
    const std::string x = in(0);
    std::string w = in(1);
    const Shape ws = type_of(w).shape;
    if (ws.size() != 2) fail("B must be 2-D");
    if (geti("transB", 0) == 0) w = emit("transpose", {w}, {{"perm", std::vector<int64_t>{1, 0}}});
    const int64_t units = geti("transB", 0) ? ws[0] : ws[1];
    if (!present(2)) return (void)emit_final("dense", {x, w}, {{"units", units}, {"bias", int64_t{0}}});
    const std::string c = in(2);
    if (type_of(c).shape == Shape{units})
      return (void)emit_final("dense", {x, w, c}, {{"units", units}, {"bias", int64_t{1}}});
    const std::string y = emit("dense", {x, w}, {{"units", units}, {"bias", int64_t{0}}});
    emit_final("add", {y, c});
  }

  void import_pool() {
    const bool avg = cur_->op_type() == "AveragePool";
    const size_t rank = type_of(in(0)).shape.size();
    if (rank != 3 && rank != 4) fail("input of rank " + std::to_string(rank) + " (the catalogue pools 1-D and 2-D)");
    for (int64_t d : getints("dilations"))
      if (d != 1) fail("dilations other than 1 are not supported");
    Attrs a;
    for (const char* k : {"kernel_shape", "strides", "pads"})
      if (has(k)) a[k] = getints(k);
    a["auto_pad"] = gets("auto_pad", "NOTSET");
    if (std::get<std::string>(a["auto_pad"]) != "NOTSET") a.erase("pads");
    a["ceil_mode"] = geti("ceil_mode", 0);
    if (avg) a["count_include_pad"] = geti("count_include_pad", 0);
    emit_final(std::string(avg ? "avg_pool" : "max_pool") + (rank == 3 ? "1d" : "2d"), {in(0)}, a);
  }

  void import_batch_norm() {
    if (geti("training_mode", 0) != 0) fail("training_mode=1 is not supported");
    if (cur_->input_size() != 5) fail("expects 5 inputs");
    emit_final("batch_norm", inputs(), {{"epsilon", getf("epsilon", 1e-5)}, {"training", int64_t{0}}});
  }

  void import_layer_norm() {
    const std::string x = in(0), scale = in(1);
    std::string bias = present(2) ? in(2) : "";
    if (bias.empty()) bias = new_initializer("bias", Tensor(type_of(scale)));
    emit_final("layer_norm", {x, scale, bias}, {{"axis", geti("axis", -1)}, {"epsilon", getf("epsilon", 1e-5)}});
  }

  void import_reduce() {
    static const std::map<std::string, std::string> kReduce = {{"ReduceSum", "reduce_sum"},
                                                               {"ReduceMean", "reduce_mean"},
                                                               {"ReduceMax", "reduce_max"},
                                                               {"ReduceMin", "reduce_min"},
                                                               {"ReduceProd", "reduce_prod"}};
    auto it = kReduce.find(cur_->op_type());
    if (it == kReduce.end()) fail("operator not in the catalogue");
    const bool axes_input = cur_->op_type() == "ReduceSum" ? opset_ >= 13 : opset_ >= 18;
    const std::vector<int64_t> axes =
        axes_input ? (present(1) ? const_ints(1, "axes") : std::vector<int64_t>{}) : getints("axes");
    if (axes.empty() && geti("noop_with_empty_axes", 0) != 0) fail("noop_with_empty_axes=1 is not supported");
    emit_final(it->second, {in(0)}, {{"axes", axes}, {"keepdims", geti("keepdims", 1)}});
  }

  void import_reshape() {
    const Shape x = type_of(in(0)).shape;
    std::vector<int64_t> shape = opset_ >= 5 ? const_ints(1, "shape") : getints("shape");
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] != 0) continue;
      if (geti("allowzero", 0) != 0) fail("a zero size with allowzero=1 (an empty tensor) is not supported");
      if (i >= x.size()) fail("shape entry " + std::to_string(i) + " is 0 (copy) but the input has rank " + std::to_string(x.size()));
      shape[i] = x[i];
    }
    emit_final("reshape", {in(0)}, {{"shape", shape}});
  }

  void import_slice() {
    Attrs a;
    if (opset_ < 10) {
      a["starts"] = getints("starts");
      a["ends"] = getints("ends");
      if (has("axes")) a["axes"] = getints("axes");
    } else {
      a["starts"] = const_ints(1, "starts");
      a["ends"] = const_ints(2, "ends");
      if (present(3)) a["axes"] = const_ints(3, "axes");
      if (present(4)) a["steps"] = const_ints(4, "steps");
    }
    emit_final("slice", {in(0)}, a);
  }

  void import_pad() {
    Attrs a;
    a["mode"] = gets("mode", "constant");
    if (opset_ < 11) {
      a["pads"] = getints("pads");
      a["value"] = getf("value", 0.0);
    } else {
      if (present(3)) fail("the axes input is not supported");
      a["pads"] = const_ints(1, "pads");
      a["value"] = present(2) ? const_scalar(2, "constant_value") : 0.0;
    }
    emit_final("pad", {in(0)}, a);
  }

  void import_resize() {
    if (opset_ < 11) fail("Resize before opset 11 is not supported");
    const Shape x = type_of(in(0)).shape;
    if (x.size() != 4) fail("only [N, C, H, W] inputs are in the catalogue");
    std::vector<int64_t> sizes;
    if (present(3) && need_constant(3, "sizes").numel() > 0) {
      sizes = const_ints(3, "sizes");
    } else if (present(2) && need_constant(2, "scales").numel() > 0) {
      const Tensor& s = need_constant(2, "scales");
      if (s.numel() != 4) fail("scales must have 4 entries");
      for (int i = 0; i < 4; ++i) {
        const double sc = s.get(i);
        const auto o = static_cast<int64_t>(std::floor(static_cast<double>(x[static_cast<size_t>(i)]) * sc));
        if (o < 1 || std::abs(static_cast<double>(o) / static_cast<double>(x[static_cast<size_t>(i)]) - sc) > 1e-6 * sc)
          fail("scale " + std::to_string(sc) + " is not output/input for an input of size " +
               std::to_string(x[static_cast<size_t>(i)]) + " (the catalogue resizes to sizes)");
        sizes.push_back(o);
      }
    } else {
      fail("needs scales or sizes");
    }
    if (sizes.size() != 4 || sizes[0] != x[0] || sizes[1] != x[1]) fail("only H and W can be resized");
    const std::string mode = gets("mode", "nearest");
    Attrs a;
    a["sizes"] = std::vector<int64_t>{sizes[2], sizes[3]};
    a["coordinate_transformation_mode"] = gets("coordinate_transformation_mode", "half_pixel");
    if (mode == "nearest") {
      a["nearest_mode"] = gets("nearest_mode", "round_prefer_floor");
      return (void)emit_final("resize_nearest", {in(0)}, a);
    }
    if (mode == "linear") return (void)emit_final("resize_bilinear", {in(0)}, a);
    fail("mode '" + mode + "' is not in the catalogue");
  }

  // ONNX gate blocks → PyTorch gate blocks: PyTorch block j is ONNX block order[j].
  static std::vector<int64_t> torch_gate_order(const std::string& type) {
    if (type == "LSTM") return {0, 2, 3, 1};  // ONNX i o f c → PyTorch i f g o
    if (type == "GRU") return {1, 0, 2};      // ONNX z r h → PyTorch r z n
    return {0};
  }

  bool zero_or_absent(int i) const {
    if (!present(i)) return true;
    const Tensor* t = constant(i);
    if (!t) return false;
    for (int64_t k = 0; k < t->numel(); ++k)
      if (t->get(k) != 0) return false;
    return true;
  }

  void import_rnn() {
    const std::string type = cur_->op_type();
    const std::string op = type == "LSTM" ? "lstm" : type == "GRU" ? "gru" : "simple_rnn";
    if (gets("direction", "forward") != "forward") fail("only direction=forward is in the catalogue");
    if (has("activations") || has("activation_alpha") || has("activation_beta"))
      fail("custom activations are not in the catalogue");
    if (has("clip")) fail("clip is not in the catalogue");
    if (geti("layout", 0) != 0) fail("layout=1 is not supported");
    if (type == "LSTM" && geti("input_forget", 0) != 0) fail("input_forget=1 is not in the catalogue");
    if (type == "GRU" && geti("linear_before_reset", 0) != 1)
      fail("linear_before_reset=0 is not in the catalogue (it follows PyTorch: linear_before_reset=1)");
    if (present(4)) fail("sequence_lens is not supported");
    if (!zero_or_absent(5)) fail("a non-zero initial_h is not supported");
    if (type == "LSTM" && (!zero_or_absent(6) || !zero_or_absent(7)))
      fail("a non-zero initial_c or peepholes are not supported");
    if (type == "LSTM" && output_used(2)) fail("output Y_c is not supported");
    const int64_t hs = geti("hidden_size", 0);
    const auto order = torch_gate_order(type);
    const int64_t gh = static_cast<int64_t>(order.size()) * hs;
    const std::string x = in(0);
    const TensorType xt = type_of(x);
    if (xt.shape.size() != 3) fail("X must be [T, N, F]");
    const Tensor& w = need_constant(1, "W");
    const Tensor& r = need_constant(2, "R");
    if (w.shape() != Shape{1, gh, xt.shape[2]} || r.shape() != Shape{1, gh, hs})
      fail("W or R do not match hidden_size " + std::to_string(hs));
    // k = 0: a bias row of G*H values, else a [G*H, k] matrix.
    auto regroup = [&](const Tensor& src, int64_t off, int64_t k, const std::string& what) {
      Tensor dst(xt.dtype, k == 0 ? Shape{gh} : Shape{gh, k});
      k = std::max<int64_t>(k, 1);
      for (size_t blk = 0; blk < order.size(); ++blk)
        for (int64_t row = 0; row < hs; ++row)
          for (int64_t c = 0; c < k; ++c)
            dst.set((static_cast<int64_t>(blk) * hs + row) * k + c, src.get(off + (order[blk] * hs + row) * k + c));
      return new_initializer(what, dst);
    };
    Tensor b(xt.dtype, {1, 2 * gh});
    if (present(3)) {
      b = need_constant(3, "B");
      if (b.shape() != Shape{1, 2 * gh}) fail("B does not match hidden_size");
    }
    const std::vector<std::string> params = {regroup(w, 0, xt.shape[2], "w_ih"), regroup(r, 0, hs, "w_hh"),
                                             regroup(b, 0, 0, "b_ih"), regroup(b, gh, 0, "b_hh")};
    const std::string xb = emit("transpose", {x}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
    auto ins = [&](const std::string& first) {
      std::vector<std::string> v = {first};
      v.insert(v.end(), params.begin(), params.end());
      return v;
    };
    const bool want_y = output_used(0), want_h = output_used(1);
    if (!want_y && !want_h) fail("neither Y nor Y_h is used");
    // The node producing the last ONNX output carries the node's name.
    auto final_value = [&](int i, const std::string& qop, const std::vector<std::string>& in, const Attrs& a) {
      return emit(qop, in, a, cur_->output(i), i == 1 || !want_h);
    };
    std::string seq;
    if (want_y) {
      seq = emit(op, ins(xb), {{"hidden_size", hs}, {"return_sequences", int64_t{1}}});
      const std::string tm = emit("transpose", {seq}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
      final_value(0, "unsqueeze", {tm}, {{"axes", std::vector<int64_t>{1}}});
    }
    if (want_h) {
      if (want_y) {
        const std::string last = emit("slice", {seq}, {{"starts", std::vector<int64_t>{-1}},
                                                        {"ends", std::vector<int64_t>{kInt64Max}},
                                                        {"axes", std::vector<int64_t>{1}}});
        final_value(1, "transpose", {last}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
      } else {
        const std::string last = emit(op, ins(xb), {{"hidden_size", hs}, {"return_sequences", int64_t{0}}});
        final_value(1, "unsqueeze", {last}, {{"axes", std::vector<int64_t>{0}}});
      }
    }
  }
};

}  // namespace

std::string graph_to_onnx(const Graph& g, int opset) {
  if (opset < kOnnxMinOpset || opset > kOnnxMaxOpset)
    throw UserError("--opset " + std::to_string(opset) + ": the ONNX exporter writes opsets " +
                    std::to_string(kOnnxMinOpset) + " to " + std::to_string(kOnnxMaxOpset));
  return Exporter(g, opset).run();
}

Graph graph_from_onnx(const std::string& bytes, const std::string& where, const ValidateOptions& opt) {
  return graph_from_onnx(bytes, where, {}, opt);
}

Graph graph_from_onnx(const std::string& bytes, const std::string& where,
                      const std::map<std::string, Tensor>& constant_inputs, const ValidateOptions& opt) {
  onnx::ModelProto m;
  if (bytes.empty() || !m.ParseFromString(bytes) || !m.has_graph())
    throw UserError(where + ": not an ONNX model (the protobuf does not parse as a ModelProto with a graph)");
  return Importer(m, where, opt, constant_inputs).run();
}

OnnxSummary onnx_summary(const std::string& bytes, const std::string& where) {
  onnx::ModelProto m;
  if (bytes.empty() || !m.ParseFromString(bytes) || !m.has_graph())
    throw UserError(where + ": not an ONNX model (the protobuf does not parse as a ModelProto with a graph)");
  OnnxSummary s;
  for (const auto& n : m.graph().node()) s.op_types.push_back(n.op_type());
  std::set<std::string> init;
  for (const auto& t : m.graph().initializer()) init.insert(t.name());
  for (const auto& vi : m.graph().input())
    if (!init.count(vi.name())) s.inputs.push_back(vi.name());
  return s;
}

Tensor tensor_from_onnx(const std::string& bytes, const std::string& where, std::string* name) {
  onnx::TensorProto p;
  if (!p.ParseFromString(bytes)) throw UserError(where + ": not an ONNX TensorProto");
  if (name) *name = p.name();
  return tensor_from_proto(p, where);
}

}  // namespace quorum::ir
