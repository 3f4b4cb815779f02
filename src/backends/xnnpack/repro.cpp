// XNNPACK's reproducer: one C++ file against <xnnpack.h> (Debian libxnnpack-dev 2022-02 with
// libpthreadpool-dev) that rebuilds the case's model the way Quorum's backend does. Both drive the
// same lowering (lower.h: the support rules, NHWC layouts, subgraph segments, xnn_define_* nodes
// and compositions, weight rearrangements); the writer's sink (WriterSink below) prints each of its
// calls as the C++ that makes it — every node output an external output, runtimes without a thread
// pool, the operator-API copy for concat. This file keeps the program around them: inputs, weights
// (already in XNNPACK's layout) and the expected float64 values as exact hex literals, host loops
// for layout changes, main() and the checks. A finding of the optimized stage (OC) gets the optimized
// form, as the backend's optimized run: only the values the host needs external (exposed_values), so
// xnn_create_runtime_v2 fuses through the rest; the pinned form runs first beside it, for comparison.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "backends/repro.h"
#include "backends/xnnpack/lower.h"

namespace quorum::backends {
namespace {

using xnnpack::Dims;
using xnnpack::Layout;
using xnnpack::ValueId;
using xnnpack::Window2d;

std::string flit(double v) { return c_literal(v, true); }
std::string num(size_t v) { return std::to_string(v); }

std::string dims_lit(const Dims& d) {
  std::string s = "{";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "}";
}

// An output bound: INFINITY, -INFINITY, or a short literal for the integral bounds of compositions
// (hard_sigmoid's [0, 1]).
std::string bound_lit(float v) {
  if (!std::isinf(v) && v == std::floor(v) && std::fabs(v) < 1e6f) return std::to_string(static_cast<long>(v)) + ".0f";
  return flit(v);
}

struct Ncs {
  size_t n = 1, c = 1, s = 1;
};
Ncs ncs(const core::Shape& x) {
  Ncs v;
  v.n = static_cast<size_t>(x[0]);
  v.c = static_cast<size_t>(x[1]);
  for (size_t i = 2; i < x.size(); ++i) v.s *= static_cast<size_t>(x[i]);
  return v;
}

// The C type a program holds an XNNPACK datatype's elements in.
const char* ctype(xnnpack::QType t) {
  static const char* const names[] = {"float", "int8_t", "uint8_t", "int32_t"};
  return names[static_cast<size_t>(t)];
}
// ... and a graph value of `dtype` (float32, int8, uint8).
const char* host_ctype(core::DType dtype) {
  if (dtype == core::DType::I8) return "int8_t";
  if (dtype == core::DType::U8) return "uint8_t";
  return "float";
}

core::Tensor f32_tensor(const std::vector<float>& v) {
  core::Tensor t(core::DType::F32, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.f32());
  return t;
}

std::string geometry_lit(const Window2d& w, bool dilation) {
  const std::string pad = num(w.top) + ", " + num(w.right) + ", " + num(w.bottom) + ", " + num(w.left);
  return (w.attribute_window ? "/*padding t,r,b,l*/ " : "") + pad + ", /*kernel*/ " + num(w.kh) + ", " + num(w.kw) +
         ", /*stride*/ " + num(w.sh) + ", " + num(w.sw) + ", " +
         (dilation ? "/*dilation*/ " + num(w.dh) + ", " + num(w.dw) + ", " : "");
}

// The writer's sink: file-scope arrays (weights, constants) into `data`, one block per subgraph or
// operator-API node into `body`.
class WriterSink : public xnnpack::Sink {
 public:
  std::ostringstream data;  // file-scope arrays
  std::ostringstream body;  // main's model part

  void begin_subgraph() override {
    seg_.str("");
    seg_nodes_.clear();
    names_.clear();
  }

  void begin_node(const ir::Node& n, Layout l) override {
    cur_ = n.name;
    seg_nodes_.push_back(n.name + " (" + n.op + ")");
    seg_ << "    // node '" << n.name << "' (" << n.op << ")" << (l == Layout::ChannelsLast ? ", channels-last" : "")
         << "\n";
  }

  void external_input(ValueId id, const std::string& value, Layout l, const Dims& d, uint32_t external,
                      const xnnpack::Quant& q) override {
    external_value(id, value, l, d, external, "XNN_VALUE_FLAG_EXTERNAL_INPUT", q);
  }
  void external_output(ValueId id, const std::string& value, Layout l, const Dims& d, uint32_t external,
                       const xnnpack::Quant& q) override {
    external_value(id, value, l, d, external, "XNN_VALUE_FLAG_EXTERNAL_OUTPUT", q);
  }

  void weight_value(ValueId id, const std::string& value, Layout l, const Dims& d, std::vector<float> v) override {
    const bool cl = l == Layout::ChannelsLast;
    const std::string arr = "w_" + identifier(value) + (cl ? "_nhwc" : "");
    if (weight_arrays_.insert(arr).second)
      data << "// weight '" << value << "'" << (cl ? ", channels-last" : "") << "\n" << c_array(arr, f32_tensor(v));
    line("const uint32_t " + name(id, value_name(value, l)) + " = tensor(sg, " + dims_lit(d) + ", " + arr +
         ");  // weight '" + value + "'");
  }

  void static_value(ValueId id, const Dims& d, std::vector<float> v, const std::string& what) override {
    const std::string n = std::to_string(++consts_);
    data << "// " << what << "\n" << c_array("k" + n, f32_tensor(v));
    line("const uint32_t " + name(id, "kid" + n) + " = tensor(sg, " + dims_lit(d) + ", k" + n + ");");
  }

  void internal_value(ValueId id, const Dims& d, const xnnpack::Quant& q) override {
    line("const uint32_t " + name(id, "t" + std::to_string(++temps_)) + " = " + tensor_call(q, d, "nullptr") + ";");
  }

  void quantized_static(ValueId id, const Dims& d, std::vector<int32_t> v, const xnnpack::Quant& q,
                        const std::string& what) override {
    const std::string n = std::to_string(++consts_);
    data << "// " << what << ", " << xnnpack::quant_text(q) << "\n"
         << "static const " << ctype(q.type) << " k" << n << "[" << std::max<size_t>(1, v.size()) << "] = {";
    for (size_t i = 0; i < v.size(); ++i)
      data << (i % 16 == 0 ? "\n    " : "") << v[i] << (i + 1 < v.size() ? ", " : "");
    data << (v.empty() ? "0" : "") << "};\n";
    line("const uint32_t " + name(id, "kid" + n) + " = " + tensor_call(q, d, "k" + n) + ";");
  }

  void unary(xnnpack::Unary op, ValueId x, ValueId y) override { call(call_name(op), ids({x, y}) + ", 0"); }
  void arithmetic(xnnpack::Arithmetic op, float min, float max, ValueId a, ValueId b, ValueId y) override {
    call(call_name(op), bound_lit(min) + ", " + bound_lit(max) + ", " + ids({a, b, y}) + ", 0");
  }
  void binary(xnnpack::Binary op, ValueId a, ValueId b, ValueId y) override {
    call(call_name(op), ids({a, b, y}) + ", 0");
  }
  void clamp(float min, float max, ValueId x, ValueId y) override {
    call("xnn_define_clamp", flit(min) + ", " + flit(max) + ", " + ids({x, y}) + ", 0");
  }
  void elu(float alpha, ValueId x, ValueId y) override {
    call("xnn_define_elu", flit(alpha) + ", " + ids({x, y}) + ", 0");
  }
  void leaky_relu(float slope, ValueId x, ValueId y) override {
    call("xnn_define_leaky_relu", flit(slope) + ", " + ids({x, y}) + ", 0");
  }

  void convolution_2d(const Window2d& w, uint32_t groups, size_t group_in, size_t group_out, ValueId x, ValueId f,
                      ValueId b, ValueId y) override {
    call("xnn_define_convolution_2d", geometry_lit(w, true) + "/*groups*/ " + num(groups) + ", /*group_in*/ " +
                                          num(group_in) + ", /*group_out*/ " + num(group_out) +
                                          ", -INFINITY, INFINITY, " + ids({x, f, b, y}) + ", " +
                                          xnnpack::flag_names(w.flags));
  }
  void depthwise_convolution_2d(const Window2d& w, uint32_t multiplier, size_t channels, ValueId x, ValueId f,
                                ValueId b, ValueId y) override {
    call("xnn_define_depthwise_convolution_2d", geometry_lit(w, true) + "/*depth_multiplier*/ " + num(multiplier) +
                                                    ", /*input_channels*/ " + num(channels) +
                                                    ", -INFINITY, INFINITY, " + ids({x, f, b, y}) + ", " +
                                                    xnnpack::flag_names(w.flags));
  }
  void deconvolution_2d(const Window2d& w, uint32_t adj_h, uint32_t adj_w, uint32_t groups, size_t group_in,
                        size_t group_out, ValueId x, ValueId f, ValueId b, ValueId y) override {
    call("xnn_define_deconvolution_2d",
         "/*padding t,r,b,l*/ " + num(w.top) + ", " + num(w.right) + ", " + num(w.bottom) + ", " + num(w.left) +
             ", /*adjustment*/ " + num(adj_h) + ", " + num(adj_w) + ", /*kernel*/ " + num(w.kh) + ", " + num(w.kw) +
             ", /*upsampling*/ " + num(w.sh) + ", " + num(w.sw) + ", /*dilation*/ " + num(w.dh) + ", " + num(w.dw) +
             ", /*groups*/ " + num(groups) + ", " + num(group_in) + ", " + num(group_out) + ", -INFINITY, INFINITY, " +
             ids({x, f, b, y}) + ", " + xnnpack::flag_names(w.flags));
  }
  void max_pooling_2d(const Window2d& w, ValueId x, ValueId y) override {
    call("xnn_define_max_pooling_2d",
         geometry_lit(w, true) + "-INFINITY, INFINITY, " + ids({x, y}) + ", " + xnnpack::flag_names(w.flags));
  }
  void average_pooling_2d(const Window2d& w, ValueId x, ValueId y) override {
    call("xnn_define_average_pooling_2d",
         geometry_lit(w, false) + "-INFINITY, INFINITY, " + ids({x, y}) + ", " + xnnpack::flag_names(w.flags));
  }
  void global_average_pooling_2d(ValueId x, ValueId y) override {
    call("xnn_define_global_average_pooling_2d", "-INFINITY, INFINITY, " + ids({x, y}) + ", 0");
  }
  void fully_connected(ValueId x, ValueId f, ValueId b, ValueId y, uint32_t flags) override {
    call("xnn_define_fully_connected", "-INFINITY, INFINITY, " + ids({x, f, b, y}) + ", " + xnnpack::flag_names(flags));
  }
  void static_reshape(const Dims& d, ValueId x, ValueId y) override {
    call("xnn_define_static_reshape",
         num(d.size()) + ", std::vector<size_t>" + dims_lit(d) + ".data(), " + ids({x, y}) + ", 0");
  }
  void static_constant_pad(const Dims& pre, const Dims& post, float value, ValueId x, ValueId y) override {
    call("xnn_define_static_constant_pad", "std::vector<size_t>" + dims_lit(pre) + ".data(), std::vector<size_t>" +
                                               dims_lit(post) + ".data(), " + flit(value) + ", " + ids({x, y}) + ", 0");
  }
  void softmax(ValueId x, ValueId y) override { call("xnn_define_softmax", ids({x, y}) + ", 0"); }
  void convert(ValueId x, ValueId y) override { call("xnn_define_convert", ids({x, y}) + ", 0"); }
  void static_resize_bilinear_2d(size_t height, size_t width, ValueId x, ValueId y, uint32_t flags) override {
    call("xnn_define_static_resize_bilinear_2d",
         num(height) + ", " + num(width) + ", " + ids({x, y}) + ", " + xnnpack::flag_names(flags));
  }

  void end_subgraph(const std::vector<xnnpack::External>& inputs,
                    const std::vector<xnnpack::External>& outputs) override;
  void concat(const ir::Node& node, const xnnpack::Concat& c) override;

 private:
  static std::string value_name(const std::string& value, Layout l) {
    return "id_" + identifier(value) + (l == Layout::ChannelsLast ? "_nhwc" : "");
  }
  static std::string host(const std::string& value) { return "v_" + identifier(value); }
  // Names lowering value `id` in this subgraph's block.
  const std::string& name(ValueId id, std::string n) {
    if (names_.size() <= id) names_.resize(id + 1);
    return names_[id] = std::move(n);
  }
  std::string ids(std::initializer_list<ValueId> v) const {
    std::string s;
    for (ValueId id : v)
      s += (s.empty() ? "" : ", ") + (id == xnnpack::kNoValue ? "XNN_INVALID_VALUE_ID" : names_.at(id));
    return s;
  }
  void external_value(ValueId id, const std::string& value, Layout l, const Dims& d, uint32_t external,
                      const char* flag, const xnnpack::Quant& q) {
    // A quantized value is named by its lowering id too: two nodes may read it under two quantizations.
    const std::string n = value_name(value, l) + (q.quantized() ? "_q" + std::to_string(id) : "");
    line("const uint32_t " + name(id, n) + " = " +
         tensor_call(q, d, "nullptr", std::to_string(external) + ", " + flag) + ";  // '" + value + "'" +
         (l == Layout::ChannelsLast ? " (NHWC)" : ""));
  }
  // tensor(sg, dims, data[, external, flags]) for float32, qtensor(sg, datatype, zero point, scale, ...) else.
  static std::string tensor_call(const xnnpack::Quant& q, const Dims& d, const std::string& data,
                                 const std::string& external = "") {
    const std::string rest = dims_lit(d) + ", " + data + (external.empty() ? "" : ", " + external) + ")";
    if (!q.quantized()) return "tensor(sg, " + rest;
    return "qtensor(sg, " + std::string(xnnpack::datatype_name(q.type)) + ", /*zero_point*/ " +
           std::to_string(q.zero_point) + ", /*scale*/ " + flit(q.scale) + ", " + rest;
  }
  void line(const std::string& s) { seg_ << "    " << s << "\n"; }
  void call(const std::string& fn, const std::string& args) {
    line("check(" + fn + "(sg, " + args + "), " + quoted(fn + " (node '" + cur_ + "')") + ");");
  }

  int segments_ = 0, temps_ = 0, consts_ = 0;
  std::ostringstream seg_;
  std::vector<std::string> seg_nodes_;
  std::vector<std::string> names_;  // by lowering value id, in the open subgraph
  std::set<std::string> weight_arrays_;
  std::string cur_;
};

void WriterSink::end_subgraph(const std::vector<xnnpack::External>& inputs,
                              const std::vector<xnnpack::External>& outputs) {
  ++segments_;
  std::string names;
  for (const auto& s : seg_nodes_) names += (names.empty() ? "" : ", ") + s;
  body << "  {  // Subgraph " << segments_ << ": " << names << "\n";
  body << "    xnn_subgraph_t sg = nullptr;\n";
  body << "    check(xnn_create_subgraph(/*external_value_ids=*/" << inputs.size() + outputs.size()
       << ", /*flags=*/0, &sg), \"xnn_create_subgraph\");\n";
  body << seg_.str();
  body << "    xnn_runtime_t rt = nullptr;\n";
  body << "    check(xnn_create_runtime_v2(sg, /*threadpool=*/nullptr, /*flags=*/0, &rt), "
          "\"xnn_create_runtime_v2\");\n";
  body << "    check(xnn_delete_subgraph(sg), \"xnn_delete_subgraph\");\n";
  std::string ext;
  int staged = 0;
  std::vector<std::string> after;
  for (const auto& e : inputs) {
    if (e.layout == Layout::Plain) {
      ext += "{" + names_.at(e.id) + ", " + host(e.value) + ".data()}, ";
    } else {
      const Ncs v = ncs(e.shape);
      const std::string buf = "nhwc" + std::to_string(staged++);
      body << "    auto " << buf << " = to_channels_last(" << host(e.value) << ", " << v.n << ", " << v.c << ", "
           << v.s << ");  // '" << e.value << "' NCHW -> NHWC\n";
      ext += "{" + names_.at(e.id) + ", " + buf + ".data()}, ";
    }
  }
  for (const auto& e : outputs) {
    if (e.layout == Layout::Plain) {
      ext += "{" + names_.at(e.id) + ", " + host(e.value) + ".data()}, ";
    } else {
      const Ncs v = ncs(e.shape);
      const std::string buf = "nhwc" + std::to_string(staged++);
      body << "    std::vector<" << ctype(e.quant.type) << "> " << buf << "(" << host(e.value) << ".size());\n";
      ext += "{" + names_.at(e.id) + ", " + buf + ".data()}, ";
      after.push_back("from_channels_last(" + buf + ", " + host(e.value) + ", " + std::to_string(v.n) + ", " +
                      std::to_string(v.c) + ", " + std::to_string(v.s) + ");  // '" + e.value + "' NHWC -> NCHW");
    }
  }
  body << "    const xnn_external_value ext[] = {" << ext << "};\n";
  body << "    check(xnn_setup_runtime(rt, " << inputs.size() + outputs.size() << ", ext), \"xnn_setup_runtime\");\n";
  body << "    check(xnn_invoke_runtime(rt), \"xnn_invoke_runtime\");\n";
  for (const auto& a : after) body << "    " << a << "\n";
  body << "    check(xnn_delete_runtime(rt), \"xnn_delete_runtime\");\n";
  body << "  }\n";
}

void WriterSink::concat(const ir::Node& n, const xnnpack::Concat& c) {
  body << "  {  // node '" << n.name << "' (concat): operator API, one strided copy per input (the 2022-02 subgraph "
       << "API has no concatenation)\n";
  for (const auto& k : c.copies) {
    std::string src;
    if (k.data) {
      const std::string arr = "w_" + identifier(k.value);
      if (weight_arrays_.insert(arr).second)
        data << "// weight '" << k.value << "'\n" << c_array(arr, f32_tensor(*k.data));
      src = arr;
    } else {
      src = host(k.value) + ".data()";
    }
    body << "    {\n      xnn_operator_t op = nullptr;\n";
    body << "      check(xnn_create_copy_nc_x32(/*channels*/ " << k.channels << ", /*input_stride*/ " << k.channels
         << ", /*output_stride*/ " << c.stride << ", 0, &op), \"xnn_create_copy_nc_x32\");\n";
    body << "      check(xnn_setup_copy_nc_x32(op, /*batch*/ " << c.batch << ", " << src << ", " << host(c.output)
         << ".data() + " << k.offset << ", nullptr), \"xnn_setup_copy_nc_x32\");\n";
    body << "      check(xnn_run_operator(op, nullptr), \"xnn_run_operator\");\n";
    body << "      check(xnn_delete_operator(op), \"xnn_delete_operator\");\n    }\n";
  }
  body << "  }\n";
}

const char* kHelpers = R"CPP(
static int fail_status = FAIL_STATUS;  // exit status when a call fails

static void check(xnn_status s, const char* call) {
  if (s == xnn_status_success) return;
  static const char* names[] = {"success", "uninitialized", "invalid_parameter", "invalid_state",
                                "unsupported_parameter", "unsupported_hardware", "out_of_memory"};
  std::printf("%s failed: xnn_status_%s\n", call, (unsigned)s < 7 ? names[s] : "?");
  std::exit(fail_status);
}

// A tensor value of the subgraph: static when `data` is given, external with `external_id`.
static uint32_t tensor(xnn_subgraph_t sg, std::vector<size_t> dims, const float* data,
                       uint32_t external_id = XNN_INVALID_VALUE_ID, uint32_t flags = 0) {
  uint32_t id = XNN_INVALID_VALUE_ID;
  check(xnn_define_tensor_value(sg, xnn_datatype_fp32, dims.size(), dims.data(), data, external_id, flags, &id),
        "xnn_define_tensor_value");
  return id;
}
// The same for a quantized value (per-tensor scale and zero point).
static uint32_t qtensor(xnn_subgraph_t sg, xnn_datatype type, int32_t zero_point, float scale,
                        std::vector<size_t> dims, const void* data, uint32_t external_id = XNN_INVALID_VALUE_ID,
                        uint32_t flags = 0) {
  uint32_t id = XNN_INVALID_VALUE_ID;
  check(xnn_define_quantized_tensor_value(sg, type, zero_point, scale, dims.size(), dims.data(), data, external_id,
                                          flags, &id),
        "xnn_define_quantized_tensor_value");
  return id;
}

// Row-major [N, C, S...] <-> channels-last [N, S..., C] (S: the spatial cells).
template <class T>
static std::vector<T> to_channels_last(const std::vector<T>& x, size_t N, size_t C, size_t S) {
  std::vector<T> y(x.size());
  for (size_t n = 0; n < N; ++n)
    for (size_t c = 0; c < C; ++c)
      for (size_t s = 0; s < S; ++s) y[(n * S + s) * C + c] = x[(n * C + c) * S + s];
  return y;
}
template <class T>
static void from_channels_last(const std::vector<T>& y, std::vector<T>& x, size_t N, size_t C, size_t S) {
  for (size_t n = 0; n < N; ++n)
    for (size_t c = 0; c < C; ++c)
      for (size_t s = 0; s < S; ++s) x[(n * C + c) * S + s] = y[(n * S + s) * C + c];
}
)CPP";

}  // namespace

ReproProgram write_repro_xnnpack(const ReproCase& c, const std::string& dir) {
  if (c.train || c.backward())
    throw ReproUnsupported("XNNPACK does not train (inference only); the finding is in stage " +
                           std::string(core::to_string(c.stage)));
  if (c.dtype != core::DType::F32)
    throw ReproUnsupported("XNNPACK computes in float32; the finding ran in " + core::to_string(c.dtype));
  const bool crash = c.crash();
  // The optimized stage: as the backend's optimized run, only the values the host needs are external (the
  // graph outputs, values another segment or a host-side operator reads), the rest internal, so
  // xnn_create_runtime_v2's subgraph optimization fuses through them; the fusion model names what it fuses.
  const bool optimized = c.stage == core::Stage::Optimized;

  WriterSink gen;
  LoweringLog fusions;
  if (optimized) {
    const std::set<std::string> exposed = xnnpack::exposed_values(c.model);
    const std::unique_ptr<xnnpack::Sink> sink = xnnpack::fusion_sink(gen, fusions);
    if (const Support s = xnnpack::lower(c.model, *sink, &exposed); !s.ok) throw ReproUnsupported(s.reason);
  } else if (const Support s = xnnpack::lower(c.model, gen); !s.ok) {
    throw ReproUnsupported(s.reason);
  }
  // Beside the optimized form, the pinned one (every node output external, nothing fused), when its weights
  // and constants are the ones the optimized form declares (they are: segments follow layouts and quantizations only).
  std::unique_ptr<WriterSink> pinned;
  if (optimized) {
    pinned = std::make_unique<WriterSink>();
    if (!xnnpack::lower(c.model, *pinned).ok || pinned->data.str() != gen.data.str()) pinned.reset();
  }
  // What XNNPACK fuses: the fusion model's "fused A+B" entries with their nodes, else the finding's entries (a
  // crash finding has none: the optimized compile failed).
  std::map<std::string, std::string> fused_nodes;
  for (const auto& [node, ops] : fusions.ops())
    for (const auto& op : ops)
      if (!fused_entry(op).empty()) {
        std::string& nodes = fused_nodes[op];
        nodes += (nodes.empty() ? "'" : ", '") + node + "'";
      }
  std::vector<std::string> fused;
  for (const auto& [op, nodes] : fused_nodes) fused.push_back(op + " (nodes " + nodes + ")");
  if (fused.empty())
    for (const auto& op : c.lowering)
      if (!fused_entry(op).empty()) fused.push_back(op);

  ReproProgram p;
  p.main = "repro.cpp";
  p.run = "g++ -std=c++17 -O1 repro.cpp -o repro -lXNNPACK -lpthreadpool && ./repro";

  // Values compared: the blamed node's outputs and the graph outputs; in the optimized form the graph outputs
  // (what the optimized run returns), also for a crash, where the pinned form shows them right.
  std::vector<std::string> compared;
  auto add = [&](const std::string& v) {
    if (std::find(compared.begin(), compared.end(), v) == compared.end() && c.expected.count(v)) compared.push_back(v);
  };
  if (optimized) {
    for (const auto& o : c.model.outputs) add(o);
  } else if (!crash) {
    if (const ir::Node* n = c.blamed())
      for (const auto& o : n->outputs) add(o);
    for (const auto& o : c.model.outputs) add(o);
  }

  std::ostringstream s;
  s << repro_header(c, "//", p.run + "  (Debian libxnnpack-dev, libpthreadpool-dev)");
  s << "// Layout: the model's values are row-major NCHW; like Quorum's XNNPACK backend, the spatial operators run\n"
       "// channels-last (NHWC; [N, C, L] as [N, 1, L, C]), and the host permutes values with plain loops where\n"
       "// a subgraph takes or returns them channels-last. Weights are embedded already in XNNPACK's layout.\n";
  if (optimized) {
    s << "// The optimized form (stage OC), as an application builds it: only the graph outputs (and the values\n"
         "// another subgraph or the host reads) are external values, every other node output is internal, so\n"
         "// xnn_create_runtime_v2's subgraph optimization (xnn_subgraph_optimize) fuses nodes through them.\n";
    if (!fused.empty()) {
      s << "// XNNPACK fuses here:\n";
      for (const auto& f : fused) s << "//   " << f << "\n";
    }
    if (pinned)
      s << "// The pinned form (every node output external, so nothing is fused; Quorum's pinned run) runs first,\n"
           "// beside it; only the optimized form decides the exit status.\n";
    s << "// Runtimes have no thread pool (single-threaded).\n";
  } else {
    s << "// Every node output is an external value; runtimes have no thread pool (single-threaded).\n";
  }
  s << "#include <xnnpack.h>\n\n#include <cmath>\n#include <cstdint>\n#include <cstdio>\n#include <cstdlib>\n"
       "#include <vector>\n\n";
  s << "#define FAIL_STATUS " << (crash ? 1 : 2) << "  // exit status when a call fails\n";
  s << kHelpers << "\n" << cpp_check_function() << "\n";
  s << "// ---- data ----\n";
  for (const auto& in : c.model.inputs) {
    s << "// graph input '" << in.name << "' " << core::to_string(in.type.shape) << "\n";
    s << c_array("in_" + identifier(in.name), c.inputs.at(in.name));
  }
  s << gen.data.str();
  for (const auto& v : compared) {
    s << "// expected '" << v << "' " << core::to_string(c.expected.at(v).shape()) << " (float64 reference)\n";
    s << c_array("want_" + identifier(v), c.expected.at(v), false);
  }
  s << "\nint main() {\n";
  s << "  std::printf(\"XNNPACK (the library has no version call); finding recorded with: %s\\n\", "
    << quoted(c.library_version) << ");\n";
  s << "  if (FILE* f = popen(\"dpkg-query -W -f='${Version}' libxnnpack0 2>/dev/null\", \"r\")) {\n"
       "    char v[128] = {0};\n"
       "    if (std::fgets(v, sizeof v, f) && v[0]) std::printf(\"installed libxnnpack0 %s\\n\", v);\n"
       "    pclose(f);\n  }\n";
  s << "  check(xnn_initialize(/*allocator=*/nullptr), \"xnn_initialize\");\n\n";
  // A compared value as the float pointer quorum_check takes (a quantized value's integers as floats).
  auto got = [&](const std::string& v) {
    const std::string h = "v_" + identifier(v);
    if (!core::is_quantized(c.model.types.at(v).dtype)) return h + ".data()";
    return "std::vector<float>(" + h + ".begin(), " + h + ".end()).data()";
  };
  // The host values and the model's calls, in `indent`.
  auto model = [&](const WriterSink& w, const std::string& indent) {
    std::ostringstream m;
    m << "  // Host values (row-major, logical layout).\n";
    for (const auto& in : c.model.inputs) {
      const std::string id = identifier(in.name);
      m << "  std::vector<" << host_ctype(in.type.dtype) << "> v_" << id << "(in_" << id << ", in_" << id << " + "
        << core::numel(in.type.shape) << ");\n";
    }
    for (const auto& n : c.model.nodes)
      for (const auto& o : n.outputs)
        m << "  std::vector<" << host_ctype(c.model.types.at(o).dtype) << "> v_" << identifier(o) << "("
          << std::max<int64_t>(1, core::numel(c.model.types.at(o).shape)) << ");  // '" << o << "' "
          << core::to_string(c.model.types.at(o).shape) << "\n";
    m << "\n" << w.body.str();
    std::istringstream lines(m.str());
    std::string out, line;
    while (std::getline(lines, line)) out += (line.empty() ? "" : indent) + line + "\n";
    return out;
  };
  if (!optimized) {
    s << model(gen, "") << "\n";
    if (crash) {
      s << "  std::printf(\"the model built and ran without a library failure\\n\");\n  return 0;\n}\n";
    } else {
      s << "  const double atol = " << c_literal(c.tol.atol, false) << ", rtol = " << c_literal(c.tol.rtol, false)
        << ";\n  int bad = 0;\n";
      for (const auto& v : compared)
        s << "  bad += quorum_check(" << quoted(v) << ", " << got(v) << ", want_" << identifier(v) << ", "
          << c.expected.at(v).numel() << ", atol, rtol) != 0;\n";
      s << "  return bad ? 1 : 0;\n}\n";
    }
  } else {
    // Each form in a block of its own (its host values, its subgraphs); the pinned form's checks are printed,
    // not counted.
    s << "  const double atol = " << c_literal(c.tol.atol, false) << ", rtol = " << c_literal(c.tol.rtol, false)
      << ";\n";
    if (pinned) {
      s << "  std::printf(\"every node output external (no fusion):\\n\");\n";
      s << "  fail_status = 2;  // the pinned form failing is not the finding\n  {\n" << model(*pinned, "  ");
      for (const auto& v : compared)
        s << "    quorum_check(" << quoted(v) << ", " << got(v) << ", want_" << identifier(v) << ", "
          << c.expected.at(v).numel() << ", atol, rtol);\n";
      s << "  }\n  fail_status = FAIL_STATUS;\n";
    }
    s << "  std::printf(\"only the graph outputs external (XNNPACK fuses):\\n\");\n";
    s << "  int bad = 0;\n  {\n" << model(gen, "  ");
    for (const auto& v : compared)
      s << "    bad += quorum_check(" << quoted(v) << ", " << got(v) << ", want_" << identifier(v) << ", "
        << c.expected.at(v).numel() << ", atol, rtol) != 0;\n";
    s << "  }\n";
    if (crash)
      s << "  std::printf(\"the optimized model built and ran without a library failure\\n\");\n  return 0;\n}\n";
    else
      s << "  return bad ? 1 : 0;\n}\n";
  }
  write_repro_file(p, dir, p.main, s.str());
  return p;
}

}  // namespace quorum::backends

namespace quorum::backends::xnnpack {

std::vector<std::string> writer_sink_calls(const ir::Graph& g) {
  std::vector<std::string> lines;
  WriterSink writer;
  const std::unique_ptr<Sink> sink = recording_sink(writer, lines);
  if (const Support s = lower(g, *sink); !s.ok) lines.push_back("refused: " + s.reason);
  return lines;
}

}  // namespace quorum::backends::xnnpack
