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
#include <deque>
#include <set>
#include <sstream>

#include "core/error.h"
#include "ops/onnx_map.h"
#include "ops/registry.h"

namespace quorum::ir {

using core::DType;
using core::Shape;
using core::UserError;

namespace {

constexpr const char* kOutputsKey = "quorum.outputs";
// The one operator set beside ONNX's own that the catalogue reads: ONNX Runtime's contrib operators.
const std::string kContribDomain = "com.microsoft";

// ---------------------------------------------------------------------------------------------
// Tensors and types

int32_t onnx_elem_type(DType d) {
  switch (d) {
    case DType::F32: return onnx::TensorProto::FLOAT;
    case DType::F64: return onnx::TensorProto::DOUBLE;
    case DType::I64: return onnx::TensorProto::INT64;
    case DType::I8: return onnx::TensorProto::INT8;
    case DType::U8: return onnx::TensorProto::UINT8;
    case DType::I32: return onnx::TensorProto::INT32;
  }
  return onnx::TensorProto::UNDEFINED;
}

bool dtype_of_elem(int32_t t, DType& d) {
  switch (t) {
    case onnx::TensorProto::FLOAT: d = DType::F32; return true;
    case onnx::TensorProto::DOUBLE: d = DType::F64; return true;
    case onnx::TensorProto::INT64: d = DType::I64; return true;
    case onnx::TensorProto::INT8: d = DType::I8; return true;
    case onnx::TensorProto::UINT8: d = DType::U8; return true;
    case onnx::TensorProto::INT32: d = DType::I32; return true;
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
  int64_t n = 1, nonzero = 1;
  for (int64_t d : p.dims()) {
    if (d < 0) throw UserError(what + " has a negative dimension");
    // Checked before anything is allocated: a corrupt or non-tensor protobuf can claim any shape
    // (the nonzero dimensions too, beside a zero: numel multiplies them all).
    if (d > 0 && nonzero > (int64_t{1} << 40) / d) throw UserError(what + " claims an implausibly large shape");
    if (d > 0) nonzero *= d;
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
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8: {  // quantized values: raw bytes, or one per int32_data entry
      check_count(p.int32_data_size(), 1);
      Tensor t(p.data_type() == onnx::TensorProto::INT8 ? DType::I8 : DType::U8, shape);
      if (raw && n > 0) std::memcpy(t.raw(), p.raw_data().data(), t.nbytes());
      else
        for (int64_t i = 0; i < n; ++i) t.set(i, p.int32_data(static_cast<int>(i)));
      return t;
    }
    default:
      throw UserError(what + " has data type " + elem_type_name(p.data_type()) +
                      " (supported: FLOAT, DOUBLE, INT64, INT32, INT8, UINT8)");
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

// FNV-1a over `s`, starting from `h` mixed in: the form choices' hash (stable across platforms).
// A shape as the exchange form's choices see it (Graph::form_batch).
std::string form_shape(const Graph& g, core::Shape s) {
  const auto axis = static_cast<size_t>(g.form_batch.axis);
  if (g.form_batch.from > 0 && axis < s.size() && s[axis] == g.form_batch.from) s[axis] = g.form_batch.as;
  return core::to_string(s);
}

uint64_t fnv(const std::string& s, uint64_t h) {
  uint64_t x = 1469598103934665603ull ^ (h * 0x9E3779B97F4A7C15ull);
  for (unsigned char c : s) {
    x ^= c;
    x *= 1099511628211ull;
  }
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return x;
}

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
void set_strings(onnx::NodeProto* n, const std::string& name, const std::vector<std::string>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRINGS);
  for (const std::string& x : v) a->add_strings(x);
}

void set_type(onnx::ValueInfoProto* vi, const std::string& name, const TensorType& t) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx_elem_type(t.dtype));
  auto* sh = tt->mutable_shape();
  for (int64_t d : t.shape) sh->add_dim()->set_dim_value(d);
}

// An attribute-setting handle on a NodeProto.
class ProtoNode final : public ops::OnnxNode {
 public:
  explicit ProtoNode(onnx::NodeProto* p) : p_(p) {}
  ProtoNode& set_i(const std::string& name, int64_t v) override {
    ir::set_i(p_, name, v);
    return *this;
  }
  ProtoNode& set_f(const std::string& name, double v) override {
    ir::set_f(p_, name, v);
    return *this;
  }
  ProtoNode& set_s(const std::string& name, const std::string& v) override {
    ir::set_s(p_, name, v);
    return *this;
  }
  ProtoNode& set_ints(const std::string& name, const std::vector<int64_t>& v) override {
    ir::set_ints(p_, name, v);
    return *this;
  }
  ProtoNode& set_strings(const std::string& name, const std::vector<std::string>& v) override {
    ir::set_strings(p_, name, v);
    return *this;
  }
  ProtoNode& set_domain(const std::string& domain) override {
    p_->set_domain(domain);
    return *this;
  }

 private:
  onnx::NodeProto* p_;
};

// Writes the model; each node goes to its operator's export hook (ops/onnx_map.h).
class Exporter final : public ops::OnnxExport {
 public:
  Exporter(const Graph& g, const OnnxForm& f, bool dry)
      : g_(g), opset_(f.opset), seed_(f.seed), dry_(dry), avoid_(f.avoid.begin(), f.avoid.end()),
        force_(f.force.begin(), f.force.end()), node_forms_(f.node_forms), outputs_only_(f.outputs_only) {}

  std::map<std::string, std::string> forms;

  std::string run() {
    m_.set_ir_version(opset_ >= 14 ? 8 : opset_ == 11 ? 6 : 7);
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
      node_key_ = seed_ ? node_key(n) : 0;
      export_node(n);
    }
    if (dry_) return {};
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
    if (!outputs_only_)
      for (const auto& n : g_.nodes)
        for (const auto& o : n.outputs)
          if (listed.insert(o).second) set_type(gp_->add_output(), o, g_.types.at(o));
    std::set<std::string> domains;
    for (const auto& n : gp_->node())
      if (!n.domain().empty() && domains.insert(n.domain()).second) {
        auto* d = m_.add_opset_import();
        d->set_domain(n.domain());
        d->set_version(1);
      }
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
  uint64_t seed_;
  bool dry_;
  std::set<std::string> avoid_;
  std::set<std::string> force_;
  std::map<std::string, std::string> node_forms_;
  bool outputs_only_ = false;
  uint64_t node_key_ = 0;
  onnx::ModelProto m_;
  onnx::GraphProto* gp_ = nullptr;
  std::set<std::string> taken_;
  std::vector<std::pair<std::string, Tensor>> extra_inits_;
  const Node* cur_ = nullptr;
  std::deque<ProtoNode> handles_;

  [[noreturn]] void refuse(const std::string& why) const override {
    throw UserError(g_.name + ": node '" + cur_->name + "' (" + cur_->op + "): " + why);
  }

  std::string fresh(const std::string& base) override {
    std::string s = base;
    for (int i = 1; taken_.count(s); ++i) s = base + "_" + std::to_string(i);
    taken_.insert(s);
    return s;
  }
  int opset() const override { return opset_; }
  const std::string& op() const override { return cur_->op; }
  const std::string& name() const override { return cur_->name; }
  const std::vector<std::string>& inputs() const override { return cur_->inputs; }
  const Attrs& attrs() const override { return cur_->attrs; }
  const std::string& out() const override { return cur_->outputs.at(0); }
  DType dtype() const override { return g_.types.at(in(0)).dtype; }
  const Shape& in_shape(size_t i = 0) const override { return g_.types.at(in(i)).shape; }
  const Tensor* initializer(const std::string& value) const override {
    auto it = g_.initializers.find(value);
    return it == g_.initializers.end() ? nullptr : &it->second;
  }

  ProtoNode& handle(onnx::NodeProto* p) { return handles_.emplace_back(p); }
  ops::OnnxNode& node(const std::string& type, const std::string& name, const std::vector<std::string>& ins,
                      const std::vector<std::string>& outs) override {
    auto* p = gp_->add_node();
    p->set_op_type(type);
    p->set_name(name);
    for (const auto& i : ins) p->add_input(i);
    for (const auto& o : outs) p->add_output(o);
    return handle(p);
  }
  // A node producing the Quorum value carries the Quorum node's name.
  ops::OnnxNode& final_node(const std::string& type, const std::vector<std::string>& ins) override {
    return node(type, cur_->name, ins, {out()});
  }
  std::pair<ops::OnnxNode*, std::string> helper(const std::string& type, const std::vector<std::string>& ins,
                                                const std::string& what) override {
    const std::string name = fresh(cur_->name + "/" + what);
    return {&node(type, name, ins, {name}), name};
  }
  // A constant operand: an initializer, or (a seeded form) the output of a Constant node.
  std::string constant(const Tensor& t, const std::string& what) override {
    const std::string name = fresh(cur_->name + "/" + what);
    if (choose2("operands", "initializer", "constant_node")) {
      auto* p = gp_->add_node();
      p->set_op_type("Constant");
      p->set_name(name);
      p->add_output(name);
      auto* a = p->add_attribute();
      a->set_name("value");
      a->set_type(onnx::AttributeProto::TENSOR);
      tensor_to_proto(t, name, a->mutable_t());
      return name;
    }
    extra_inits_.emplace_back(name, t);
    return name;
  }

  // The node's identity for its choices: what stays when other nodes change. A weight's shape is the model's
  // own in a relation's wider model too (an LSTM's [4H, F] is no batch of 4: seed 10513).
  uint64_t node_key(const Node& n) const {
    std::string k = n.name + "|" + n.op + "|" + core::to_string(n.attrs);
    for (const auto& i : n.inputs)
      k += "|" + (g_.is_initializer(i) ? core::to_string(g_.types.at(i).shape) : form_shape(g_, g_.types.at(i).shape));
    return fnv(k, seed_);
  }
  size_t choose(const std::string& what, const std::vector<std::string>& alternatives) override {
    QUORUM_CHECK(!alternatives.empty(), "choose: no forms");
    size_t k = seed_ ? fnv(what, node_key_) % alternatives.size() : 0;
    // A form the engine cannot read: the next one it can (none: the one chosen).
    auto avoided = [&](size_t i) {
      const std::string e = what + "=" + alternatives[i];
      return avoid_.count(e) > 0 || avoid_.count(cur_->op + " " + e) > 0;
    };
    auto forced = [&](size_t i) {
      const std::string e = what + "=" + alternatives[i];
      return force_.count(e) > 0 || force_.count(cur_->op + " " + e) > 0;
    };
    // The node's recorded choice for `what`, when there is one it offers.
    size_t recorded = alternatives.size();
    if (const auto it = node_forms_.find(cur_->name); it != node_forms_.end())
      for (size_t i = 0; i < alternatives.size(); ++i)
        if (("," + it->second + ",").find("," + what + "=" + alternatives[i] + ",") != std::string::npos) recorded = i;
    size_t f = 0;
    while (f < alternatives.size() && !forced(f)) ++f;
    if (recorded < alternatives.size())
      k = recorded;
    else if (f < alternatives.size())
      k = f;
    else
      for (size_t t = 0; t < alternatives.size() && avoided(k); ++t) k = (k + 1) % alternatives.size();
    std::string& rec = forms[cur_->name];
    const std::string entry = what + "=" + alternatives[k];
    // One entry per `what` (a node writing several constants chooses their form once).
    if (("," + rec).find("," + what + "=") == std::string::npos) rec += (rec.empty() ? "" : ",") + entry;
    return k;
  }

  void export_node(const Node& n) {
    const ops::OpSpec& spec = ops::op(n.op);
    if (spec.is_loss) refuse("loss operators are training-only and are not exported to ONNX");
    if (!spec.onnx_export) refuse("no ONNX counterpart");
    spec.onnx_export(*this);
  }
};

// ---------------------------------------------------------------------------------------------
// Import

// Reads the model; each node goes to the import hook the catalogue registers for its type
// (ops/onnx_map.h). Constant nodes and the GELU pattern are graph matters handled here.
class Importer final : public ops::OnnxImport {
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
    find_integer_forms(gp);

    for (const auto& n : gp.node()) {
      cur_ = &n;
      cur_name_ = names_.at(&n);
      if (skip_.count(&n)) continue;
      if (!n.domain().empty() && n.domain() != "ai.onnx" && n.domain() != kContribDomain)
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
  std::map<const onnx::NodeProto*, onnx::NodeProto> integer_;  // QuantizeLinear → the QLinear node read instead
  const onnx::NodeProto* cur_ = nullptr;
  std::string cur_name_;

  [[noreturn]] void fail(const std::string& msg) const override {
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
  const std::string& in(int i) const override {
    if (i >= cur_->input_size() || cur_->input(i).empty()) fail("input " + std::to_string(i) + " is missing");
    return cur_->input(i);
  }
  bool present(int i) const override { return i < cur_->input_size() && !cur_->input(i).empty(); }
  const Tensor* constant(int i) const override {
    if (!present(i)) return nullptr;
    auto it = consts_.find(cur_->input(i));
    return it == consts_.end() ? nullptr : &it->second;
  }
  const Tensor& need_constant(int i, const std::string& what) const override {
    if (!present(i)) fail("input " + std::to_string(i) + " (" + what + ") is missing");
    const Tensor* t = constant(i);
    if (!t) fail(what + " ('" + cur_->input(i) + "') must be a constant (an initializer or a Constant node)");
    return *t;
  }
  std::vector<int64_t> const_ints(int i, const std::string& what) const override {
    const Tensor& t = need_constant(i, what);
    if (t.dtype() != DType::I64) fail(what + " must be an integer tensor");
    return std::vector<int64_t>(t.i64(), t.i64() + t.numel());
  }
  static double tensor_scalar(const Tensor& t) {
    return t.dtype() == DType::F32 ? recover_double(t.f32()[0]) : t.get(0);
  }
  double const_scalar(int i, const std::string& what) const override {
    const Tensor& t = need_constant(i, what);
    if (t.numel() != 1) fail(what + " must hold one value, it has shape " + core::to_string(t.shape()));
    return tensor_scalar(t);
  }
  const onnx::AttributeProto* attr(const std::string& name) const {
    for (const auto& a : cur_->attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  bool has(const std::string& name) const override { return attr(name) != nullptr; }
  int64_t geti(const std::string& name, int64_t def) const override {
    const auto* a = attr(name);
    return a ? a->i() : def;
  }
  double getf(const std::string& name, double def) const override {
    const auto* a = attr(name);
    return a ? recover_double(a->f()) : def;
  }
  std::string gets(const std::string& name, const std::string& def) const override {
    const auto* a = attr(name);
    return a ? a->s() : def;
  }
  std::vector<int64_t> getints(const std::string& name, std::vector<int64_t> def = {}) const override {
    const auto* a = attr(name);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : def;
  }
  std::vector<std::string> getstrings(const std::string& name) const override {
    const auto* a = attr(name);
    return a ? std::vector<std::string>(a->strings().begin(), a->strings().end()) : std::vector<std::string>{};
  }
  // True when output i exists and something reads it.
  bool output_used(int i) const override {
    if (i >= cur_->output_size() || cur_->output(i).empty()) return false;
    const std::string& o = cur_->output(i);
    return consumers_.count(o) || graph_outputs_.count(o);
  }
  void only_first_output() const {
    for (int i = 1; i < cur_->output_size(); ++i)
      if (output_used(i)) fail("output " + std::to_string(i) + " ('" + cur_->output(i) + "') is not supported");
  }

  // ---- building the Quorum graph
  const TensorType& type_of(const std::string& v) override {
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
  std::string new_initializer(const std::string& what, Tensor t) override {
    const std::string name = fresh_value(cur_name_ + "/" + what);
    types_[name] = t.type();
    g_.initializers.emplace(name, std::move(t));
    return name;
  }
  int opset() const override { return opset_; }
  const std::string& op_type() const override { return cur_->op_type(); }
  int input_count() const override { return cur_->input_size(); }
  int output_count() const override { return cur_->output_size(); }
  const std::string& output(int i) const override {
    if (i < 0 || i >= cur_->output_size()) fail("output " + std::to_string(i) + " is missing");
    return cur_->output(i);
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
                   const std::string& out = "", bool named = true) override {
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
  std::string emit_final(const std::string& op, const std::vector<std::string>& ins, const Attrs& attrs = {}) override {
    only_first_output();
    if (cur_->output_size() < 1 || cur_->output(0).empty()) fail("the node has no output");
    return emit(op, ins, attrs, cur_->output(0));
  }
  std::vector<std::string> inputs() const override {
    std::vector<std::string> v;
    for (const auto& i : cur_->input())
      if (!i.empty()) v.push_back(i);
    return v;
  }

  // ---- GELU fusion: Div(x, sqrt 2) (or Mul(x, 1/sqrt 2)) → Erf → Add(·, 1) → Mul(x, ·) → Mul(·, 0.5),
  // or the last two as Mul(Mul(x, 0.5), ·)
  // The one node of type `type` that reads `v` (with one output, as each step of the form has).
  const onnx::NodeProto* sole_consumer(const std::string& v, const std::string& type) const {
    if (graph_outputs_.count(v)) return nullptr;
    auto it = consumers_.find(v);
    if (it == consumers_.end() || it->second.size() != 1 || it->second[0]->op_type() != type ||
        it->second[0]->output_size() != 1)
      return nullptr;
    return it->second[0];
  }
  bool is_const(const std::string& v, double want, double tol) const {
    auto it = consts_.find(v);
    if (it == consts_.end() || it->second.numel() != 1 || !core::is_float(it->second.dtype())) return false;
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
    // The form's constants may be Constant nodes (an exchange form) as well as initializers.
    for (const auto& n : gp.node())
      if (n.op_type() == "Constant" && n.output_size() == 1 && n.attribute_size() == 1 &&
          n.attribute(0).name() == "value" && !consts_.count(n.output(0)))
        consts_[n.output(0)] = tensor_from_proto(n.attribute(0).t(), where_ + ": node '" + n.name() + "'");
    for (const auto& e : gp.node()) {
      if (e.op_type() != "Erf" || e.input_size() != 1 || e.output_size() != 1) continue;
      auto pi = producer.find(e.input(0));
      if (pi == producer.end()) continue;
      const onnx::NodeProto* div = pi->second;
      // x / sqrt(2), or x * (1 / sqrt(2)).
      const bool by_div = div->op_type() == "Div" && is_const(div->input(1), std::numbers::sqrt2, 1e-6);
      const bool by_mul = div->op_type() == "Mul" && is_const(div->input(1), 1 / std::numbers::sqrt2, 1e-6);
      if (!(by_div || by_mul) || div->input_size() != 2 || div->output_size() != 1) continue;
      const std::string x = div->input(0);
      if (!sole_consumer(div->output(0), "Erf")) continue;
      const onnx::NodeProto* add = sole_consumer(e.output(0), "Add");
      if (!add || !is_const(other(*add, e.output(0)), 1.0, 0)) continue;
      const onnx::NodeProto* mul = sole_consumer(add->output(0), "Mul");
      if (!mul) continue;
      // x*(1 + erf)*0.5 (PyTorch's export), or (0.5*x)*(1 + erf) (Quorum's, and the other form fusers know).
      const std::string m = other(*mul, add->output(0));
      if (m == x) {
        const onnx::NodeProto* half = sole_consumer(mul->output(0), "Mul");
        if (!half || !is_const(other(*half, mul->output(0)), 0.5, 0)) continue;
        skip_.insert({div, &e, add, mul});
        gelu_[half] = x;
        continue;
      }
      auto hi = producer.find(m);
      if (hi == producer.end()) continue;
      const onnx::NodeProto* halfx = hi->second;
      if (halfx->op_type() != "Mul" || other(*halfx, x).empty() || !is_const(other(*halfx, x), 0.5, 0) ||
          halfx->output_size() != 1 || !sole_consumer(m, "Mul"))
        continue;
      skip_.insert({div, &e, add, halfx});
      gelu_[mul] = x;
    }
  }

  // ---- The integer form of QLinearConv / QLinearMatMul (ops/integer_form.h, as ONNX Runtime's quantization
  // tools write it): ConvInteger or MatMulInteger(x, w, x_zero_point, w_zero_point) → [Add(·, int32 bias), a
  // convolution's] → Cast(to FLOAT) → Mul(·, scale) → QuantizeLinear(·, y_scale, y_zero_point), each step read
  // by the next alone. It holds only the product scale = x_scale * w_scale (a scalar, or one per output channel
  // broadcast over the channel axis), so it reads as the QLinear node with x_scale 1 and w_scale the product: a
  // QLinearConv / QLinearMatMul node with the chain's operands, named and producing as the QuantizeLinear, goes to
  // that operator's import hook.
  // `t` holds one value, or `channels` along the output's channel axis (`axis` from the end: a convolution's
  // [N, C, H, W] 3, a matmul's [..., N] 1): [C], [C, 1, 1] or [1, C, 1, 1] for a convolution.
  static bool along_channels(const Tensor& t, int64_t channels, int axis) {
    if (t.numel() == 1) return true;
    const core::Shape& s = t.shape();
    if (t.numel() != channels || static_cast<int>(s.size()) < axis) return false;
    for (size_t d = 0; d < s.size(); ++d)
      if (d != s.size() - static_cast<size_t>(axis) && s[d] != 1) return false;
    return true;
  }
  // A constant as a 1-D tensor of `n` values of `dtype` (a scalar repeated).
  std::string channel_constant(const Tensor& t, int64_t n, core::DType dtype, const std::string& base) {
    Tensor out(dtype, {n});
    for (int64_t i = 0; i < n; ++i) out.set(i, t.get(t.numel() == 1 ? 0 : i));
    const std::string name = fresh_value(base);
    consts_[name] = std::move(out);
    return name;
  }
  void find_integer_forms(const onnx::GraphProto& gp) {
    std::map<std::string, const onnx::NodeProto*> producer;
    for (const auto& n : gp.node())
      for (const auto& o : n.output()) producer[o] = &n;
    auto made_by = [&](const std::string& v, const std::string& type) -> const onnx::NodeProto* {
      auto it = producer.find(v);
      return it != producer.end() && it->second->op_type() == type && it->second->domain().empty() ? it->second
                                                                                                    : nullptr;
    };
    auto constant = [&](const onnx::NodeProto& n, int i) -> const Tensor* {
      if (i >= n.input_size()) return nullptr;
      auto it = consts_.find(n.input(i));
      return it == consts_.end() ? nullptr : &it->second;
    };
    for (const auto& q : gp.node()) {
      if (q.op_type() != "QuantizeLinear" || !q.domain().empty() || q.input_size() < 2) continue;
      const onnx::NodeProto* mul = made_by(q.input(0), "Mul");
      if (!mul || mul->input_size() != 2 || sole_consumer(mul->output(0), "QuantizeLinear") != &q) continue;
      const onnx::NodeProto* cast = made_by(mul->input(0), "Cast");
      const int p = cast ? 1 : 0;  // the product's operand
      if (!cast) cast = made_by(mul->input(1), "Cast");
      if (!cast || sole_consumer(cast->output(0), "Mul") != mul || cast->attribute_size() != 1 ||
          cast->attribute(0).name() != "to" || cast->attribute(0).i() != onnx::TensorProto::FLOAT)
        continue;
      const onnx::NodeProto* add = made_by(cast->input(0), "Add");
      const onnx::NodeProto* in = nullptr;
      int b = -1;  // the bias's operand of the Add
      if (add && add->input_size() == 2 && sole_consumer(add->output(0), "Cast") == cast) {
        for (int k = 0; k < 2 && !in; ++k)
          if ((in = made_by(add->input(k), "ConvInteger"))) b = 1 - k;
        if (!in || sole_consumer(in->output(0), "Add") != add) continue;
      } else {
        add = nullptr;
        in = made_by(cast->input(0), "ConvInteger");
        if (!in) in = made_by(cast->input(0), "MatMulInteger");
        if (!in || sole_consumer(in->output(0), "Cast") != cast) continue;
      }
      const bool conv = in->op_type() == "ConvInteger";
      const Tensor* w = constant(*in, 1);
      const Tensor* xzp = constant(*in, 2);
      const Tensor* wzp = constant(*in, 3);
      const Tensor* product = constant(*mul, p);
      const Tensor* bias = add ? constant(*add, b) : nullptr;
      if (!w || w->rank() != (conv ? 4 : 2) || !xzp || xzp->numel() != 1 || !wzp || !product ||
          !core::is_float(product->dtype()) || (add && !bias))
        continue;
      const int axis = conv ? 3 : 1;
      const int64_t channels = w->shape()[conv ? 0 : 1];
      if (!along_channels(*product, channels, axis) || (wzp->numel() != 1 && wzp->numel() != channels) ||
          (bias && (!along_channels(*bias, channels, axis) || bias->numel() != channels)))
        continue;
      const std::string base = names_.at(&q);
      Tensor one(DType::F32, {});
      one.set(0, 1);
      onnx::NodeProto qlinear;
      qlinear.set_op_type(conv ? "QLinearConv" : "QLinearMatMul");
      qlinear.set_name(q.name());
      *qlinear.mutable_attribute() = in->attribute();
      for (const auto& o : q.output()) qlinear.add_output(o);
      const bool per_channel = product->numel() != 1 || wzp->numel() != 1;
      const int64_t n = per_channel ? channels : 1;
      for (const std::string& v :
           {in->input(0), channel_constant(one, 1, DType::F32, base + "/x_scale"), in->input(2),
            in->input(1), channel_constant(*product, n, DType::F32, base + "/w_scale"),
            channel_constant(*wzp, n, wzp->dtype(), base + "/w_zero_point"), q.input(1),
            q.input_size() > 2 ? q.input(2) : std::string()})
        qlinear.add_input(v);
      if (bias) qlinear.add_input(channel_constant(*bias, channels, DType::I32, base + "/bias"));
      skip_.insert({in, add, cast, mul});
      integer_[&q] = std::move(qlinear);
    }
  }

  // ---- nodes
  void import_node(const onnx::NodeProto& n) {
    if (auto it = integer_.find(&n); it != integer_.end()) {
      cur_ = &it->second;
      return import_node(it->second);
    }
    if (auto it = gelu_.find(&n); it != gelu_.end())
      return (void)emit_final("gelu", {it->second}, {{"approximate", std::string("none")}});
    if (n.op_type() == "Constant") return import_constant();
    // A contrib operator is registered under "<domain>.<type>" (ops/onnx_map.h); an ONNX operator on an int8/uint8
    // input that has a quantized twin of its own (MaxPool: ops/qlinear.cpp) under "quantized.<type>".
    const std::function<void(ops::OnnxImport&)>* hook = nullptr;
    if (n.domain() != kContribDomain && n.input_size() > 0 && !n.input(0).empty()) {
      const core::DType t = type_of(n.input(0)).dtype;
      if (t == core::DType::I8 || t == core::DType::U8)
        hook = ops::catalogue().onnx_importer("quantized." + n.op_type());
    }
    if (!hook)
      hook = ops::catalogue().onnx_importer(n.domain() == kContribDomain ? n.domain() + "." + n.op_type()
                                                                         : n.op_type());
    if (!hook) fail("operator not in the catalogue");
    (*hook)(*this);
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
};

}  // namespace

namespace {

void check_opset(int opset) {
  if (opset < kOnnxMinOpset || opset > kOnnxMaxOpset)
    throw UserError("--opset " + std::to_string(opset) + ": the ONNX exporter writes opsets " +
                    std::to_string(kOnnxMinOpset) + " to " + std::to_string(kOnnxMaxOpset));
}

OnnxExported export_graph(const Graph& g, const OnnxForm& f, bool dry) {
  check_opset(f.opset);
  Exporter e(g, f, dry);
  OnnxExported out;
  out.bytes = e.run();
  out.opset = f.opset;
  out.forms = std::move(e.forms);
  return out;
}

}  // namespace

std::string graph_to_onnx(const Graph& g, int opset) { return export_graph(g, {opset, 0}, false).bytes; }

OnnxExported graph_to_onnx(const Graph& g, const OnnxForm& form) { return export_graph(g, form, false); }

OnnxExported onnx_forms(const Graph& g, const OnnxForm& form) { return export_graph(g, form, true); }

std::string OnnxExported::str() const {
  std::string s = "opset " + std::to_string(opset);
  for (const auto& [node, f] : forms) s += "; " + node + " " + f;
  return s;
}

uint64_t form_seed(const Graph& g) {
  std::string k = g.name;
  for (const auto& in : g.inputs) k += "|" + in.name + ":" + form_shape(g, in.type.shape);
  if (g.form_draw) k += "|draw " + std::to_string(g.form_draw);
  const uint64_t h = fnv(k, 0x51ED);
  return h ? h : 1;
}

OnnxForm seeded_form(const Graph& g, int lo, int hi, std::vector<std::string> avoid) {
  lo = std::max(lo, kOnnxMinOpset);
  hi = std::min(hi, kOnnxMaxOpset);
  QUORUM_CHECK(lo <= hi, "seeded_form: empty opset range");
  OnnxForm f;
  f.seed = form_seed(g);
  f.opset = lo + static_cast<int>(fnv("opset", f.seed) % static_cast<uint64_t>(hi - lo + 1));
  f.avoid = std::move(avoid);
  return f;
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
  for (const auto& n : m.graph().node()) {
    s.op_types.push_back(n.op_type());
    s.node_names.push_back(n.name());
    s.domains.push_back(n.domain() == "ai.onnx" ? "" : n.domain());
    s.outputs.emplace_back(n.output().begin(), n.output().end());
    std::map<std::string, std::string>& attrs = s.attrs.emplace_back();
    for (const auto& a : n.attribute()) {
      std::ostringstream v;
      v.precision(9);
      switch (a.type()) {
        case onnx::AttributeProto::INT: v << a.i(); break;
        case onnx::AttributeProto::FLOAT: v << a.f(); break;
        case onnx::AttributeProto::STRING: v << a.s(); break;
        case onnx::AttributeProto::INTS:
          for (int i = 0; i < a.ints_size(); ++i) v << (i ? "," : "") << a.ints(i);
          break;
        case onnx::AttributeProto::FLOATS:
          for (int i = 0; i < a.floats_size(); ++i) v << (i ? "," : "") << a.floats(i);
          break;
        default: continue;
      }
      attrs[a.name()] = v.str();
    }
  }
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
