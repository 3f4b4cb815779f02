// XNNPACK's reproducer: one C++ file against <xnnpack.h> (Debian libxnnpack-dev 2022-02 with
// libpthreadpool-dev) that rebuilds the case's model the way Quorum's backend does — the same
// xnn_define_* nodes (compositions included), the same NHWC layouts, the same subgraph segments
// (a new subgraph where a value is wanted in another layout than the one its producer wrote),
// every node output an external output, runtimes without a thread pool — plus the operator-API
// copy for concat. Inputs, weights (already in XNNPACK's layout) and the expected float64 values
// are embedded as exact hex literals; layout changes are plain host loops.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>

#include "backends/repro.h"
#include "ops/kernel_util.h"

namespace quorum::backends {
namespace {

using core::Shape;
using Dims = std::vector<size_t>;

enum class Layout { Plain, ChannelsLast };

constexpr float kInf = std::numeric_limits<float>::infinity();


std::string flit(double v) { return c_literal(v, true); }

std::string dims_lit(const Dims& d) {
  std::string s = "{";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "}";
}

// The XNNPACK dims of a logical shape stored in `layout` (as the backend's xnn_dims).
Dims xnn_dims(const Shape& logical, Layout layout) {
  if (logical.empty()) return {1};
  Dims d(logical.begin(), logical.end());
  if (layout == Layout::Plain) return d;
  if (logical.size() == 3) return {d[0], 1, d[2], d[1]};
  return {d[0], d[2], d[3], d[1]};
}

struct Ncs {
  size_t n = 1, c = 1, s = 1;
};
Ncs ncs(const Shape& x) {
  Ncs v;
  v.n = static_cast<size_t>(x[0]);
  v.c = static_cast<size_t>(x[1]);
  for (size_t i = 2; i < x.size(); ++i) v.s *= static_cast<size_t>(x[i]);
  return v;
}

std::vector<float> f32_data(const core::Tensor& t) {
  const core::Tensor f = t.to(core::DType::F32);
  return std::vector<float>(f.f32(), f.f32() + f.numel());
}

std::vector<float> to_channels_last(const core::Tensor& t) {
  const std::vector<float> in = f32_data(t);
  const Ncs v = ncs(t.shape());
  std::vector<float> out(in.size());
  for (size_t n = 0; n < v.n; ++n)
    for (size_t c = 0; c < v.c; ++c)
      for (size_t s = 0; s < v.s; ++s) out[(n * v.s + s) * v.c + c] = in[(n * v.c + c) * v.s + s];
  return out;
}

core::Tensor f32_tensor(const std::vector<float>& v) {
  core::Tensor t(core::DType::F32, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.f32());
  return t;
}

size_t prod(const Shape& s, size_t from, size_t to) {
  size_t p = 1;
  for (size_t i = from; i < to; ++i) p *= static_cast<size_t>(s[i]);
  return p;
}

bool has(const core::Attrs& a, const char* k) { return a.count(k) > 0; }

// ---- window geometry (as ops_conv_pool.cpp) ----

struct Window {
  uint32_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  uint32_t top = 0, right = 0, bottom = 0, left = 0;
  bool same_flag = false;
  bool any_padding = false;
};

Window window(const ir::Node& n, const Shape& x, const Shape& y, bool is_pool) {
  const core::Attrs& a = n.attrs;
  const size_t r = x.size() - 2;
  const auto& k = core::attr_ints(a, "kernel_shape");
  const auto& s = core::attr_ints(a, "strides");
  const auto& pads = core::attr_ints(a, "pads");
  const std::vector<int64_t> d = has(a, "dilations") ? core::attr_ints(a, "dilations") : std::vector<int64_t>(r, 1);
  const std::string auto_pad = has(a, "auto_pad") ? core::attr_s(a, "auto_pad") : "NOTSET";
  std::vector<int64_t> eff(r);
  for (size_t i = 0; i < r; ++i) eff[i] = d[i] * (k[i] - 1) + 1;
  const ops::Pads p = ops::resolve_pads(auto_pad, pads, x, eff, s);
  std::vector<int64_t> begin = p.begin, end = p.end;
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  bool same_overhang = false;
  for (size_t i = 0; i < r; ++i) {
    const int64_t in = x[i + 2], out = y[i + 2];
    if (same) same_overhang = same_overhang || ((in + s[i] - 1) / s[i] - 1) * s[i] + eff[i] < in;
    if (is_pool) end[i] = std::max(end[i], (out - 1) * s[i] + eff[i] - in - begin[i]);
  }
  Window w;
  const size_t h = r == 2 ? 0 : r;
  const size_t wi = r - 1;
  auto u = [](int64_t v) { return static_cast<uint32_t>(v); };
  if (h != r) w.kh = u(k[h]), w.sh = u(s[h]), w.dh = u(d[h]), w.top = u(begin[h]), w.bottom = u(end[h]);
  w.kw = u(k[wi]), w.sw = u(s[wi]), w.dw = u(d[wi]), w.left = u(begin[wi]), w.right = u(end[wi]);
  w.any_padding = w.top + w.bottom + w.left + w.right > 0;
  if (auto_pad == "SAME_UPPER" && r == 2 && !same_overhang) {
    w.same_flag = true;
    w.top = w.right = w.bottom = w.left = 0;
  }
  return w;
}

std::string flags_lit(const Window& w) { return w.same_flag ? "XNN_FLAG_TENSORFLOW_SAME_PADDING" : "0"; }

std::string pad_lit(const Window& w) {
  return "/*padding t,r,b,l*/ " + std::to_string(w.top) + ", " + std::to_string(w.right) + ", " +
         std::to_string(w.bottom) + ", " + std::to_string(w.left);
}

// ---- reductions ----

struct Block {
  size_t outer = 1, reduced = 1, inner = 1;
};

std::optional<Block> reduce_block(const Shape& x, const std::vector<int64_t>& axes) {
  std::vector<int> ax;
  for (auto a : axes) ax.push_back(ops::norm_axis(a, static_cast<int>(x.size())));
  if (ax.empty()) {
    ax.resize(x.size());
    std::iota(ax.begin(), ax.end(), 0);
  }
  std::sort(ax.begin(), ax.end());
  if (ax.back() - ax.front() + 1 != static_cast<int>(ax.size())) return std::nullopt;
  const size_t lo = static_cast<size_t>(ax.front()), hi = static_cast<size_t>(ax.back()) + 1;
  return Block{prod(x, 0, lo), prod(x, lo, hi), prod(x, hi, x.size())};
}

const std::set<std::string>& elementwise_ops() {
  static const std::set<std::string> s{"abs",  "neg",        "sigmoid",      "hardswish",  "square", "sqrt",
                                       "elu",  "leaky_relu", "clip",         "relu",       "relu6",  "hard_sigmoid",
                                       "reciprocal", "rsqrt", "selu",        "softsign",   "pow",    "add",
                                       "sub",  "mul",        "div",          "maximum",    "minimum", "sum"};
  return s;
}

// ---- the generator ----

class Gen {
 public:
  explicit Gen(const ReproCase& c) : c_(c), g_(c.model) {}

  void node(const ir::Node& n);
  void finish() { close(); }

  std::ostringstream data;  // file-scope arrays
  std::ostringstream body;  // main's model part

 private:
  struct Ext {
    std::string value;
    Layout layout;
    std::string id;
  };

  // Segment state.
  void open();
  void close();
  std::optional<Layout> layout_in_segment(const std::string& v) const {
    const auto it = produced_.find(v);
    if (it == produced_.end()) return std::nullopt;
    return it->second;
  }
  std::string value(const std::string& name, Layout l);
  std::string output(const std::string& name, Layout l);
  std::string temp(const Dims& d);
  std::string constant(const std::vector<float>& v, const Dims& d, const std::string& what);
  std::string scalar(float v) { return constant({v}, {1}, "scalar " + flit(v)); }
  void line(const std::string& s) { seg_ << "    " << s << "\n"; }
  void call(const std::string& fn, const std::string& args) {
    line("check(" + fn + "(sg, " + args + "), " + quoted(fn + " (node '" + cur_ + "')") + ");");
  }

  Layout layout_of(const ir::Node& n, std::optional<Layout> first) const;
  void define(const ir::Node& n, Layout l);
  void define_binary(const std::string& op, const std::string& a, const std::string& b, const std::string& out);
  void define_conv(const ir::Node& n, Layout l);
  void define_deconv(const ir::Node& n, Layout l);
  void define_block_pool(const std::string& x, const Block& b, bool is_max, const std::string& out, const Dims& od);
  void concat(const ir::Node& n);
  std::string bias(const ir::Node& n, size_t index);
  const core::Tensor& weight(const ir::Node& n, size_t i) const {
    const std::string& v = n.inputs.at(i);
    if (!g_.is_initializer(v))
      throw ReproUnsupported("node '" + n.name + "' (" + n.op + "): '" + v +
                             "' must be a weight (initializer); XNNPACK packs it when the subgraph is defined");
    return g_.initializers.at(v);
  }
  const Shape& shape(const std::string& v) const { return g_.types.at(v).shape; }

  const ReproCase& c_;
  const ir::Graph& g_;
  int segments_ = 0, temps_ = 0, consts_ = 0;
  bool open_ = false;
  std::ostringstream seg_;
  std::vector<Ext> ins_, outs_;
  std::vector<std::string> seg_nodes_;
  std::map<std::string, Layout> produced_;
  std::map<std::pair<std::string, Layout>, std::string> ids_;
  std::set<std::string> weight_arrays_;
  std::string cur_;
};

void Gen::open() {
  open_ = true;
  seg_.str("");
  ins_.clear();
  outs_.clear();
  seg_nodes_.clear();
  produced_.clear();
  ids_.clear();
}

void Gen::close() {
  if (!open_) return;
  open_ = false;
  ++segments_;
  std::string names;
  for (const auto& s : seg_nodes_) names += (names.empty() ? "" : ", ") + s;
  body << "  {  // Subgraph " << segments_ << ": " << names << "\n";
  body << "    xnn_subgraph_t sg = nullptr;\n";
  body << "    check(xnn_create_subgraph(/*external_value_ids=*/" << ins_.size() + outs_.size()
       << ", /*flags=*/0, &sg), \"xnn_create_subgraph\");\n";
  body << seg_.str();
  body << "    xnn_runtime_t rt = nullptr;\n";
  body << "    check(xnn_create_runtime_v2(sg, /*threadpool=*/nullptr, /*flags=*/0, &rt), \"xnn_create_runtime_v2\");\n";
  body << "    check(xnn_delete_subgraph(sg), \"xnn_delete_subgraph\");\n";
  std::string ext;
  int staged = 0;
  auto host = [](const std::string& v) { return "v_" + identifier(v); };
  std::vector<std::string> after;
  for (const auto& e : ins_) {
    if (e.layout == Layout::Plain) {
      ext += "{" + e.id + ", " + host(e.value) + ".data()}, ";
    } else {
      const Ncs v = ncs(shape(e.value));
      const std::string buf = "nhwc" + std::to_string(staged++);
      body << "    std::vector<float> " << buf << " = to_channels_last(" << host(e.value) << ", " << v.n << ", " << v.c
           << ", " << v.s << ");  // '" << e.value << "' NCHW -> NHWC\n";
      ext += "{" + e.id + ", " + buf + ".data()}, ";
    }
  }
  for (const auto& e : outs_) {
    if (e.layout == Layout::Plain) {
      ext += "{" + e.id + ", " + host(e.value) + ".data()}, ";
    } else {
      const Ncs v = ncs(shape(e.value));
      const std::string buf = "nhwc" + std::to_string(staged++);
      body << "    std::vector<float> " << buf << "(" << host(e.value) << ".size());\n";
      ext += "{" + e.id + ", " + buf + ".data()}, ";
      after.push_back("from_channels_last(" + buf + ", " + host(e.value) + ", " + std::to_string(v.n) + ", " +
                      std::to_string(v.c) + ", " + std::to_string(v.s) + ");  // '" + e.value + "' NHWC -> NCHW");
    }
  }
  body << "    const xnn_external_value ext[] = {" << ext << "};\n";
  body << "    check(xnn_setup_runtime(rt, " << ins_.size() + outs_.size() << ", ext), \"xnn_setup_runtime\");\n";
  body << "    check(xnn_invoke_runtime(rt), \"xnn_invoke_runtime\");\n";
  for (const auto& a : after) body << "    " << a << "\n";
  body << "    check(xnn_delete_runtime(rt), \"xnn_delete_runtime\");\n";
  body << "  }\n";
}

std::string Gen::value(const std::string& name, Layout l) {
  const auto key = std::make_pair(name, l);
  if (const auto it = ids_.find(key); it != ids_.end()) return it->second;
  if (produced_.count(name)) throw ReproUnsupported("value '" + name + "' is wanted in two layouts in one subgraph");
  const bool cl = l == Layout::ChannelsLast;
  const std::string id = "id_" + identifier(name) + (cl ? "_nhwc" : "");
  const Dims d = xnn_dims(shape(name), l);
  if (g_.is_initializer(name)) {
    const core::Tensor& w = g_.initializers.at(name);
    const std::string arr = "w_" + identifier(name) + (cl ? "_nhwc" : "");
    if (weight_arrays_.insert(arr).second) {
      data << "// weight '" << name << "'" << (cl ? ", channels-last" : "") << "\n";
      data << c_array(arr, f32_tensor(cl ? to_channels_last(w) : f32_data(w)));
    }
    line("const uint32_t " + id + " = tensor(sg, " + dims_lit(d) + ", " + arr + ");  // weight '" + name + "'");
  } else {
    const size_t ext = ins_.size() + outs_.size();
    line("const uint32_t " + id + " = tensor(sg, " + dims_lit(d) + ", nullptr, " + std::to_string(ext) +
         ", XNN_VALUE_FLAG_EXTERNAL_INPUT);  // '" + name + "'" + (cl ? " (NHWC)" : ""));
    ins_.push_back({name, l, id});
  }
  ids_[key] = id;
  return id;
}

std::string Gen::output(const std::string& name, Layout l) {
  const bool cl = l == Layout::ChannelsLast;
  const std::string id = "id_" + identifier(name) + (cl ? "_nhwc" : "");
  const size_t ext = ins_.size() + outs_.size();
  line("const uint32_t " + id + " = tensor(sg, " + dims_lit(xnn_dims(shape(name), l)) + ", nullptr, " +
       std::to_string(ext) + ", XNN_VALUE_FLAG_EXTERNAL_OUTPUT);  // '" + name + "'" + (cl ? " (NHWC)" : ""));
  outs_.push_back({name, l, id});
  produced_[name] = l;
  ids_[{name, l}] = id;
  return id;
}

std::string Gen::temp(const Dims& d) {
  const std::string id = "t" + std::to_string(++temps_);
  line("const uint32_t " + id + " = tensor(sg, " + dims_lit(d) + ", nullptr);");
  return id;
}

std::string Gen::constant(const std::vector<float>& v, const Dims& d, const std::string& what) {
  const std::string arr = "k" + std::to_string(++consts_);
  data << "// " << what << "\n" << c_array(arr, f32_tensor(v));
  const std::string id = "kid" + std::to_string(consts_);
  line("const uint32_t " + id + " = tensor(sg, " + dims_lit(d) + ", " + arr + ");");
  return id;
}

Layout Gen::layout_of(const ir::Node& n, std::optional<Layout> first) const {
  const std::string& op = n.op;
  if (elementwise_ops().count(op)) {  // follow_layout
    if (first != Layout::ChannelsLast) return Layout::Plain;
    const size_t rank = shape(n.inputs[0]).size();
    for (size_t i = 0; i < ir::data_input_count(n); ++i)
      if (shape(n.inputs[i]).size() != rank) return Layout::Plain;
    for (const auto& o : n.outputs)
      if (shape(o).size() != rank) return Layout::Plain;
    return Layout::ChannelsLast;
  }
  if (op == "batch_norm") {
    const size_t rank = shape(n.inputs[0]).size();
    return (rank == 3 || rank == 4) && first != Layout::Plain ? Layout::ChannelsLast : Layout::Plain;
  }
  if (op == "conv1d" || op == "conv2d" || op == "conv_transpose2d" || op.find("_pool") != std::string::npos ||
      op == "resize_bilinear")
    return Layout::ChannelsLast;
  if (op == "softmax") {
    const size_t r = shape(n.inputs[0]).size();
    return ops::norm_axis(core::attr_i(n.attrs, "axis"), static_cast<int>(r)) == static_cast<int>(r) - 1 ? Layout::Plain
                                                                                   : Layout::ChannelsLast;
  }
  return Layout::Plain;
}

void Gen::node(const ir::Node& n) {
  cur_ = n.name;
  for (const auto& v : n.inputs) {
    if (g_.types.at(v).dtype == core::DType::I64)
      throw ReproUnsupported("XNNPACK float32 operators cannot take int64 input '" + v + "'");
    if (g_.types.at(v).shape.size() > 6) throw ReproUnsupported("XNNPACK tensors have at most 6 dims");
  }
  if (n.op == "concat") {
    close();
    concat(n);
    return;
  }
  const Layout l = layout_of(n, layout_in_segment(n.inputs.at(0)));
  for (size_t i = 0; i < ir::data_input_count(n); ++i) {
    const auto have = layout_in_segment(n.inputs[i]);
    if (have && *have != l) {
      close();  // the value goes back through the host, where its layout changes
      break;
    }
  }
  if (!open_) open();
  seg_nodes_.push_back(n.name + " (" + n.op + ")");
  seg_ << "    // node '" << n.name << "' (" << n.op << ")" << (l == Layout::ChannelsLast ? ", channels-last" : "")
       << "\n";
  define(n, l);
}

void Gen::define_binary(const std::string& op, const std::string& a, const std::string& b, const std::string& out) {
  if (op == "add") return call("xnn_define_add2", "-INFINITY, INFINITY, " + a + ", " + b + ", " + out + ", 0");
  if (op == "sub") return call("xnn_define_subtract", "-INFINITY, INFINITY, " + a + ", " + b + ", " + out + ", 0");
  if (op == "mul") return call("xnn_define_multiply2", "-INFINITY, INFINITY, " + a + ", " + b + ", " + out + ", 0");
  if (op == "div") return call("xnn_define_divide", "-INFINITY, INFINITY, " + a + ", " + b + ", " + out + ", 0");
  if (op == "maximum") return call("xnn_define_maximum2", a + ", " + b + ", " + out + ", 0");
  if (op == "minimum") return call("xnn_define_minimum2", a + ", " + b + ", " + out + ", 0");
  throw std::logic_error("binary " + op);
}

Shape broadcast(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t da = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    const int64_t db = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::string Gen::bias(const ir::Node& n, size_t index) {
  if (core::attr_i(n.attrs, "bias") != 1) return "XNN_INVALID_VALUE_ID";
  const std::vector<float> b = f32_data(weight(n, index));
  return constant(b, {b.size()}, "bias '" + n.inputs[index] + "'");
}

void Gen::define_conv(const ir::Node& n, Layout l) {
  const Shape& x = shape(n.inputs[0]);
  const Window w = window(n, x, shape(n.outputs[0]), false);
  const core::Tensor& wt = weight(n, 1);  // [OC, C/G, k...]
  const size_t oc = static_cast<size_t>(wt.shape()[0]), cg = static_cast<size_t>(wt.shape()[1]);
  const size_t ch = static_cast<size_t>(x[1]);
  const size_t groups = static_cast<size_t>(core::attr_i(n.attrs, "group"));
  const size_t kh = w.kh, kw = w.kw, taps = kh * kw;
  const std::vector<float> src = f32_data(wt);
  const bool depthwise = groups == ch && groups > 1;
  std::vector<float> filter(oc * taps * cg);
  for (size_t o = 0; o < oc; ++o)
    for (size_t i = 0; i < cg; ++i)
      for (size_t t = 0; t < taps; ++t) {
        const float v = src[(o * cg + i) * taps + t];
        if (depthwise)
          filter[t * oc + o] = v;
        else
          filter[(o * taps + t) * cg + i] = v;
      }
  const std::string xi = value(n.inputs[0], l);
  const std::string f = constant(filter, depthwise ? Dims{1, kh, kw, oc} : Dims{oc, kh, kw, cg},
                                 "filter '" + n.inputs[1] + "' " + (depthwise ? "[1, kH, kW, C*M]" : "OHWI"));
  const std::string b = bias(n, 2);
  const std::string y = output(n.outputs[0], l);
  const std::string geo = pad_lit(w) + ", /*kernel*/ " + std::to_string(w.kh) + ", " + std::to_string(w.kw) +
                          ", /*stride*/ " + std::to_string(w.sh) + ", " + std::to_string(w.sw) + ", /*dilation*/ " +
                          std::to_string(w.dh) + ", " + std::to_string(w.dw) + ", ";
  if (depthwise)
    call("xnn_define_depthwise_convolution_2d", geo + "/*depth_multiplier*/ " + std::to_string(oc / ch) +
                                                    ", /*input_channels*/ " + std::to_string(ch) +
                                                    ", -INFINITY, INFINITY, " + xi + ", " + f + ", " + b + ", " + y +
                                                    ", " + flags_lit(w));
  else
    call("xnn_define_convolution_2d", geo + "/*groups*/ " + std::to_string(groups) + ", /*group_in*/ " +
                                          std::to_string(cg) + ", /*group_out*/ " + std::to_string(oc / groups) +
                                          ", -INFINITY, INFINITY, " + xi + ", " + f + ", " + b + ", " + y + ", " +
                                          flags_lit(w));
}

void Gen::define_deconv(const ir::Node& n, Layout l) {
  const core::Attrs& a = n.attrs;
  const auto& k = core::attr_ints(a, "kernel_shape");
  const auto& s = core::attr_ints(a, "strides");
  const auto& d = core::attr_ints(a, "dilations");
  const auto& pads = core::attr_ints(a, "pads");
  const auto& adj = core::attr_ints(a, "output_padding");
  for (size_t i = 0; i < 2; ++i)
    if (adj[i] >= s[i])
      throw ReproUnsupported("XNNPACK deconvolution needs output adjustment < stride (output_padding " +
                             std::to_string(adj[i]) + ")");
  const core::Tensor& wt = weight(n, 1);  // [C, OC/G, kh, kw]
  const size_t ch = static_cast<size_t>(wt.shape()[0]), ocg = static_cast<size_t>(wt.shape()[1]);
  const size_t groups = static_cast<size_t>(core::attr_i(a, "group"));
  const size_t cg = ch / groups, oc = ocg * groups;
  const size_t kh = static_cast<size_t>(k[0]), kw = static_cast<size_t>(k[1]), taps = kh * kw;
  std::vector<float> filter(oc * taps * cg);
  const std::vector<float> src = f32_data(wt);
  for (size_t gi = 0; gi < groups; ++gi)
    for (size_t ic = 0; ic < cg; ++ic)
      for (size_t o = 0; o < ocg; ++o)
        for (size_t t = 0; t < taps; ++t)
          filter[((gi * ocg + o) * taps + t) * cg + ic] = src[((gi * cg + ic) * ocg + o) * taps + t];
  const std::string xi = value(n.inputs[0], l);
  const std::string f = constant(filter, {oc, kh, kw, cg}, "filter '" + n.inputs[1] + "' OHWI");
  const std::string b = bias(n, 2);
  const std::string y = output(n.outputs[0], l);
  auto i = [](int64_t v) { return std::to_string(v); };
  call("xnn_define_deconvolution_2d",
       "/*padding t,r,b,l*/ " + i(pads[0]) + ", " + i(pads[3]) + ", " + i(pads[2]) + ", " + i(pads[1]) +
           ", /*adjustment*/ " + i(adj[0]) + ", " + i(adj[1]) + ", /*kernel*/ " + i(k[0]) + ", " + i(k[1]) +
           ", /*upsampling*/ " + i(s[0]) + ", " + i(s[1]) + ", /*dilation*/ " + i(d[0]) + ", " + i(d[1]) +
           ", /*groups*/ " + i(static_cast<int64_t>(groups)) + ", " + i(static_cast<int64_t>(cg)) + ", " +
           i(static_cast<int64_t>(ocg)) + ", -INFINITY, INFINITY, " + xi + ", " + f + ", " + b + ", " + y + ", 0");
}

void Gen::define_block_pool(const std::string& x, const Block& b, bool is_max, const std::string& out,
                            const Dims& od) {
  const Dims vd{b.outer, b.reduced, 1, b.inner};
  const std::string v = temp(vd);
  call("xnn_define_static_reshape", std::to_string(vd.size()) + ", std::vector<size_t>" + dims_lit(vd) + ".data(), " +
                                        x + ", " + v + ", 0");
  const std::string pooled = temp({b.outer, 1, 1, b.inner});
  if (is_max)
    call("xnn_define_max_pooling_2d", "0, 0, 0, 0, /*kernel*/ " + std::to_string(b.reduced) +
                                          ", 1, /*stride*/ 1, 1, /*dilation*/ 1, 1, -INFINITY, INFINITY, " + v + ", " +
                                          pooled + ", 0");
  else
    call("xnn_define_global_average_pooling_2d", "-INFINITY, INFINITY, " + v + ", " + pooled + ", 0");
  call("xnn_define_static_reshape", std::to_string(od.size()) + ", std::vector<size_t>" + dims_lit(od) + ".data(), " +
                                        pooled + ", " + out + ", 0");
}

void Gen::define(const ir::Node& n, Layout l) {
  const std::string& op = n.op;
  const core::Attrs& a = n.attrs;
  const Dims od = xnn_dims(shape(n.outputs[0]), l);
  auto in = [&](size_t i) { return value(n.inputs.at(i), l); };
  auto out = [&]() { return output(n.outputs[0], l); };
  auto af = [&](const char* k) { return static_cast<float>(core::attr_f(a, k)); };
  static const std::map<std::string, std::string> unary{
      {"abs", "xnn_define_abs"},           {"neg", "xnn_define_negate"},   {"sigmoid", "xnn_define_sigmoid"},
      {"hardswish", "xnn_define_hardswish"}, {"square", "xnn_define_square"}, {"sqrt", "xnn_define_square_root"}};
  auto reciprocal = [&](bool of_sqrt) {
    std::string x = in(0);
    if (of_sqrt) {
      const std::string s = temp(od);
      call("xnn_define_square_root", x + ", " + s + ", 0");
      x = s;
    }
    const std::string one = scalar(1.0f);
    call("xnn_define_divide", "-INFINITY, INFINITY, " + one + ", " + x + ", " + out() + ", 0");
  };
  if (const auto it = unary.find(op); it != unary.end()) {
    const std::string x = in(0);
    return call(it->second, x + ", " + out() + ", 0");
  }
  if (op == "elu") {
    const double alpha = core::attr_f(a, "alpha");
    if (!(alpha > 0) || !std::isnormal(static_cast<float>(alpha)))
      throw ReproUnsupported("XNNPACK elu requires a positive normal float alpha");
    const std::string x = in(0);
    return call("xnn_define_elu", flit(alpha) + ", " + x + ", " + out() + ", 0");
  }
  if (op == "leaky_relu") {
    const std::string x = in(0);
    return call("xnn_define_leaky_relu", flit(af("alpha")) + ", " + x + ", " + out() + ", 0");
  }
  if (op == "clip" || op == "relu" || op == "relu6") {
    const float lo = op == "clip" ? af("min") : 0.0f;
    const float hi = op == "clip" ? af("max") : op == "relu6" ? 6.0f : kInf;
    if (!(lo < hi)) throw ReproUnsupported("XNNPACK clamp requires min < max in float32");
    const std::string x = in(0);
    return call("xnn_define_clamp", flit(lo) + ", " + flit(hi) + ", " + x + ", " + out() + ", 0");
  }
  if (op == "hard_sigmoid") {
    const std::string x = in(0);
    const std::string t = temp(od);
    const std::string al = scalar(af("alpha"));
    call("xnn_define_multiply2", "-INFINITY, INFINITY, " + x + ", " + al + ", " + t + ", 0");
    const std::string be = scalar(af("beta"));
    return call("xnn_define_add2", "0.0f, 1.0f, " + t + ", " + be + ", " + out() + ", 0");
  }
  if (op == "reciprocal") return reciprocal(false);
  if (op == "rsqrt") return reciprocal(true);
  if (op == "selu") {
    const std::string x = in(0);
    const std::string e = temp(od);
    call("xnn_define_elu", flit(1.6732632423543772f) + ", " + x + ", " + e + ", 0");
    const std::string gm = scalar(1.0507009873554805f);
    return call("xnn_define_multiply2", "-INFINITY, INFINITY, " + e + ", " + gm + ", " + out() + ", 0");
  }
  if (op == "softsign") {
    const std::string x = in(0);
    const std::string ab = temp(od), d = temp(od);
    call("xnn_define_abs", x + ", " + ab + ", 0");
    const std::string one = scalar(1.0f);
    call("xnn_define_add2", "-INFINITY, INFINITY, " + ab + ", " + one + ", " + d + ", 0");
    return call("xnn_define_divide", "-INFINITY, INFINITY, " + x + ", " + d + ", " + out() + ", 0");
  }
  if (op == "pow") {
    const double e = core::attr_f(a, "exponent");
    if (e == 0.5) {
      const std::string x = in(0);
      return call("xnn_define_square_root", x + ", " + out() + ", 0");
    }
    if (e == -1 || e == -0.5) return reciprocal(e == -0.5);
    if (e == 2) {
      const std::string x = in(0);
      return call("xnn_define_square", x + ", " + out() + ", 0");
    }
    if (e == 3) {
      const std::string x = in(0);
      const std::string sq = temp(od);
      call("xnn_define_square", x + ", " + sq + ", 0");
      return call("xnn_define_multiply2", "-INFINITY, INFINITY, " + sq + ", " + x + ", " + out() + ", 0");
    }
    throw ReproUnsupported("XNNPACK 2022-02 has no power operator; only exponents 2, 3, 0.5, -1 and -0.5 map");
  }
  if (op == "add" || op == "sub" || op == "mul" || op == "div" || op == "maximum" || op == "minimum") {
    const std::string x = in(0), y = in(1);
    return define_binary(op, x, y, out());
  }
  if (op == "sum") {
    const size_t cnt = n.inputs.size();
    std::string acc = in(0);
    Shape acc_shape = shape(n.inputs[0]);
    if (cnt == 1) throw ReproUnsupported("sum of one input has no XNNPACK node");
    for (size_t i = 1; i < cnt; ++i) {
      acc_shape = broadcast(acc_shape, shape(n.inputs[i]));
      const std::string rhs = in(i);
      const std::string next = i + 1 == cnt ? out() : temp(xnn_dims(acc_shape, l));
      define_binary("add", acc, rhs, next);
      acc = next;
    }
    return;
  }
  if (op == "batch_norm") {
    if (core::attr_i(a, "training") == 1) throw ReproUnsupported("XNNPACK 2022-02 maps only inference batch_norm");
    const core::Tensor &scale = weight(n, 1), &bb = weight(n, 2), &mean = weight(n, 3), &var = weight(n, 4);
    const double eps = core::attr_f(a, "epsilon");
    const size_t ch = static_cast<size_t>(scale.numel());
    std::vector<float> s(ch), t(ch);
    for (size_t i = 0; i < ch; ++i) {
      const auto k = static_cast<int64_t>(i);
      const double si = scale.get(k) / std::sqrt(var.get(k) + eps);
      s[i] = static_cast<float>(si);
      t[i] = static_cast<float>(bb.get(k) - mean.get(k) * si);
    }
    Dims pd{ch};
    if (l == Layout::Plain) pd.resize(shape(n.inputs[0]).size() - 1, 1);
    const std::string x = in(0);
    const std::string scaled = temp(od);
    const std::string sid = constant(s, pd, "batch_norm scale / sqrt(var + eps), per channel");
    call("xnn_define_multiply2", "-INFINITY, INFINITY, " + x + ", " + sid + ", " + scaled + ", 0");
    const std::string tid = constant(t, pd, "batch_norm bias - mean * scale / sqrt(var + eps), per channel");
    return call("xnn_define_add2", "-INFINITY, INFINITY, " + scaled + ", " + tid + ", " + out() + ", 0");
  }
  if (op == "conv1d" || op == "conv2d") return define_conv(n, l);
  if (op == "conv_transpose2d") return define_deconv(n, l);
  if (op == "max_pool1d" || op == "max_pool2d" || op == "avg_pool1d" || op == "avg_pool2d") {
    const bool is_max = op[0] == 'm';
    const Window w = window(n, shape(n.inputs[0]), shape(n.outputs[0]), true);
    if (w.kh * w.kw == 1) throw ReproUnsupported("XNNPACK 2022-02 refuses 1x1 pooling windows");
    if (!is_max && core::attr_i(a, "count_include_pad") == 1 && w.any_padding)
      throw ReproUnsupported("XNNPACK average pooling divides by the cells inside the input; count_include_pad=1 "
                             "with padding differs");
    const std::string x = in(0);
    const std::string y = out();
    const std::string geo = pad_lit(w) + ", /*kernel*/ " + std::to_string(w.kh) + ", " + std::to_string(w.kw) +
                            ", /*stride*/ " + std::to_string(w.sh) + ", " + std::to_string(w.sw) + ", ";
    if (is_max)
      return call("xnn_define_max_pooling_2d", geo + "/*dilation*/ 1, 1, -INFINITY, INFINITY, " + x + ", " + y +
                                                   ", " + flags_lit(w));
    return call("xnn_define_average_pooling_2d", geo + "-INFINITY, INFINITY, " + x + ", " + y + ", " + flags_lit(w));
  }
  if (op == "global_max_pool" || op == "global_avg_pool") {
    const Shape& x = shape(n.inputs[0]);
    if (x.size() > 4) throw ReproUnsupported("XNNPACK 2022-02 has only 2-D pooling");
    const size_t h = x.size() == 4 ? static_cast<size_t>(x[2]) : 1, w = static_cast<size_t>(x.back());
    const std::string xi = in(0);
    const std::string y = out();
    if (op == "global_max_pool") {
      if (h * w == 1) throw ReproUnsupported("global max pool over one cell would be a 1x1 max pooling");
      return call("xnn_define_max_pooling_2d", "0, 0, 0, 0, /*kernel*/ " + std::to_string(h) + ", " +
                                                   std::to_string(w) +
                                                   ", /*stride*/ 1, 1, /*dilation*/ 1, 1, -INFINITY, INFINITY, " + xi +
                                                   ", " + y + ", 0");
    }
    return call("xnn_define_global_average_pooling_2d", "-INFINITY, INFINITY, " + xi + ", " + y + ", 0");
  }
  if (op == "dense" || op == "matmul") {
    const core::Tensor& wt = weight(n, 1);
    if (wt.shape().size() != 2) throw ReproUnsupported("XNNPACK 2022-02 has no batch matrix multiply");
    const std::string x = in(0);
    const std::vector<float> wv = f32_data(wt);
    const Dims wd{static_cast<size_t>(wt.shape()[0]), static_cast<size_t>(wt.shape()[1])};
    const bool mm = op == "matmul";
    const std::string f =
        constant(wv, wd, "filter '" + n.inputs[1] + "' " + (mm ? "[K, N] (transposed weights)" : "[units, in]"));
    const std::string b = mm ? "XNN_INVALID_VALUE_ID" : bias(n, 2);
    return call("xnn_define_fully_connected", "-INFINITY, INFINITY, " + x + ", " + f + ", " + b + ", " + out() +
                                                  (mm ? ", XNN_FLAG_TRANSPOSE_WEIGHTS" : ", 0"));
  }
  if (op == "reshape" || op == "flatten" || op == "squeeze" || op == "unsqueeze") {
    const std::string x = in(0);
    return call("xnn_define_static_reshape", std::to_string(od.size()) + ", std::vector<size_t>" + dims_lit(od) +
                                                 ".data(), " + x + ", " + out() + ", 0");
  }
  if (op == "pad") {
    if (core::attr_s(a, "mode") != "constant") throw ReproUnsupported("XNNPACK 2022-02 pads only with a constant");
    const auto& pads = core::attr_ints(a, "pads");
    const size_t r = shape(n.inputs[0]).size();
    Dims pre(r), post(r);
    for (size_t i = 0; i < r; ++i) pre[i] = static_cast<size_t>(pads[i]), post[i] = static_cast<size_t>(pads[r + i]);
    const std::string x = in(0);
    return call("xnn_define_static_constant_pad", "std::vector<size_t>" + dims_lit(pre) + ".data(), std::vector<size_t>" +
                                                      dims_lit(post) + ".data(), " + flit(af("value")) + ", " + x +
                                                      ", " + out() + ", 0");
  }
  if (op == "softmax") {
    const size_t r = shape(n.inputs[0]).size();
    const int axis = ops::norm_axis(core::attr_i(a, "axis"), static_cast<int>(r));
    if (!(axis == static_cast<int>(r) - 1 || (axis == 1 && (r == 3 || r == 4))))
      throw ReproUnsupported("XNNPACK softmax normalises over the innermost axis only");
    const std::string x = in(0);
    return call("xnn_define_softmax", x + ", " + out() + ", 0");
  }
  if (op == "resize_bilinear") {
    const std::string& mode = core::attr_s(a, "coordinate_transformation_mode");
    const std::string flags = mode == "align_corners" ? "XNN_FLAG_ALIGN_CORNERS"
                              : mode == "asymmetric"  ? "XNN_FLAG_TENSORFLOW_LEGACY_MODE"
                                                      : "0";
    const Shape& y = shape(n.outputs[0]);
    const std::string x = in(0);
    return call("xnn_define_static_resize_bilinear_2d",
                std::to_string(y[2]) + ", " + std::to_string(y[3]) + ", " + x + ", " + out() + ", " + flags);
  }
  if (op == "reduce_mean" || op == "reduce_sum" || op == "reduce_max" || op == "reduce_min") {
    const auto blk = reduce_block(shape(n.inputs[0]), core::attr_ints(a, "axes"));
    if (!blk) throw ReproUnsupported("XNNPACK pools one contiguous block of axes; these reduced axes are not");
    const bool is_max = op == "reduce_max" || op == "reduce_min";
    if (is_max && blk->reduced == 1) throw ReproUnsupported("a max/min over one element would be a 1x1 max pooling");
    std::string x = in(0);
    if (op == "reduce_min") {
      const std::string neg = temp(xnn_dims(shape(n.inputs[0]), Layout::Plain));
      call("xnn_define_negate", x + ", " + neg + ", 0");
      x = neg;
    }
    if (op == "reduce_mean" || op == "reduce_max") return define_block_pool(x, *blk, is_max, out(), od);
    const std::string pooled = temp(od);
    define_block_pool(x, *blk, is_max, pooled, od);
    if (op == "reduce_min") return call("xnn_define_negate", pooled + ", " + out() + ", 0");
    const std::string cnt = scalar(static_cast<float>(blk->reduced));
    return call("xnn_define_multiply2", "-INFINITY, INFINITY, " + pooled + ", " + cnt + ", " + out() + ", 0");
  }
  if (op == "mse_loss") {
    if (shape(n.inputs[0]) != shape(n.inputs[1]))
      throw ReproUnsupported("mse_loss maps to squared_difference without broadcasting");
    const std::string p = in(0), t = in(1);
    const std::string sq = temp(xnn_dims(shape(n.inputs[0]), Layout::Plain));
    call("xnn_define_squared_difference", p + ", " + t + ", " + sq + ", 0");
    return define_block_pool(sq, Block{1, static_cast<size_t>(core::numel(shape(n.inputs[0]))), 1}, false, out(), od);
  }
  throw ReproUnsupported("the XNNPACK reproducer does not map operator '" + op + "'");
}

void Gen::concat(const ir::Node& n) {
  const Shape& os = shape(n.outputs[0]);
  const size_t axis = ops::norm_axis(core::attr_i(n.attrs, "axis"), os.size());
  const size_t outer = prod(os, 0, axis), total = prod(os, axis, os.size());
  body << "  {  // node '" << n.name << "' (concat): operator API, one strided copy per input (the 2022-02 subgraph "
       << "API has no concatenation)\n";
  size_t offset = 0;
  for (const auto& in : n.inputs) {
    const Shape& s = shape(in);
    const size_t inner = prod(s, axis, s.size());
    std::string src;
    if (g_.is_initializer(in)) {
      const std::string arr = "w_" + identifier(in);
      if (weight_arrays_.insert(arr).second) data << "// weight '" << in << "'\n" << c_array(arr, f32_tensor(f32_data(g_.initializers.at(in))));
      src = arr;
    } else {
      src = "v_" + identifier(in) + ".data()";
    }
    body << "    {\n      xnn_operator_t op = nullptr;\n";
    body << "      check(xnn_create_copy_nc_x32(/*channels*/ " << inner << ", /*input_stride*/ " << inner
         << ", /*output_stride*/ " << total << ", 0, &op), \"xnn_create_copy_nc_x32\");\n";
    body << "      check(xnn_setup_copy_nc_x32(op, /*batch*/ " << outer << ", " << src << ", v_" << identifier(n.outputs[0])
         << ".data() + " << offset << ", nullptr), \"xnn_setup_copy_nc_x32\");\n";
    body << "      check(xnn_run_operator(op, nullptr), \"xnn_run_operator\");\n";
    body << "      check(xnn_delete_operator(op), \"xnn_delete_operator\");\n    }\n";
    offset += inner;
  }
  body << "  }\n";
}

const char* kHelpers = R"CPP(
static void check(xnn_status s, const char* call) {
  if (s == xnn_status_success) return;
  static const char* names[] = {"success", "uninitialized", "invalid_parameter", "invalid_state",
                                "unsupported_parameter", "unsupported_hardware", "out_of_memory"};
  std::printf("%s failed: xnn_status_%s\n", call, (unsigned)s < 7 ? names[s] : "?");
  std::exit(FAIL_STATUS);
}

// A tensor value of the subgraph: static when `data` is given, external with `external_id`.
static uint32_t tensor(xnn_subgraph_t sg, std::vector<size_t> dims, const float* data,
                       uint32_t external_id = XNN_INVALID_VALUE_ID, uint32_t flags = 0) {
  uint32_t id = XNN_INVALID_VALUE_ID;
  check(xnn_define_tensor_value(sg, xnn_datatype_fp32, dims.size(), dims.data(), data, external_id, flags, &id),
        "xnn_define_tensor_value");
  return id;
}

// Row-major [N, C, S...] <-> channels-last [N, S..., C] (S: the spatial cells).
static std::vector<float> to_channels_last(const std::vector<float>& x, size_t N, size_t C, size_t S) {
  std::vector<float> y(x.size());
  for (size_t n = 0; n < N; ++n)
    for (size_t c = 0; c < C; ++c)
      for (size_t s = 0; s < S; ++s) y[(n * S + s) * C + c] = x[(n * C + c) * S + s];
  return y;
}
static void from_channels_last(const std::vector<float>& y, std::vector<float>& x, size_t N, size_t C, size_t S) {
  for (size_t n = 0; n < N; ++n)
    for (size_t c = 0; c < C; ++c)
      for (size_t s = 0; s < S; ++s) x[(n * C + c) * S + s] = y[(n * S + s) * C + c];
}
)CPP";

}  // namespace

ReproProgram write_repro_xnnpack(const ReproCase& c, const std::string& dir) {
  if (c.train || c.backward())
    throw ReproUnsupported("XNNPACK does not train (inference only); the finding is in stage " + std::string(core::to_string(c.stage)));
  if (c.dtype != core::DType::F32)
    throw ReproUnsupported("XNNPACK computes in float32; the finding ran in " + core::to_string(c.dtype));
  const bool crash = c.crash();

  Gen gen(c);
  for (const auto& n : c.model.nodes) gen.node(n);
  gen.finish();

  ReproProgram p;
  p.main = "repro.cpp";
  p.run = "g++ -std=c++17 -O1 repro.cpp -o repro -lXNNPACK -lpthreadpool && ./repro";

  // Values compared: the blamed node's outputs and the graph outputs.
  std::vector<std::string> compared;
  auto add = [&](const std::string& v) {
    if (std::find(compared.begin(), compared.end(), v) == compared.end() && c.expected.count(v)) compared.push_back(v);
  };
  if (!crash) {
    if (const ir::Node* n = c.blamed())
      for (const auto& o : n->outputs) add(o);
    for (const auto& o : c.model.outputs) add(o);
  }

  std::ostringstream s;
  s << repro_header(c, "//", p.run + "  (Debian libxnnpack-dev, libpthreadpool-dev)");
  s << "// Layout: the model's values are row-major NCHW; like Quorum's XNNPACK backend, the spatial operators run\n"
       "// channels-last (NHWC; [N, C, L] as [N, 1, L, C]), and the host permutes values with plain loops where\n"
       "// a subgraph takes or returns them channels-last. Weights are embedded already in XNNPACK's layout.\n"
       "// Every node output is an external value; runtimes have no thread pool (single-threaded).\n";
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
  s << "  // Host values (row-major, logical layout).\n";
  for (const auto& in : c.model.inputs) {
    const std::string id = identifier(in.name);
    s << "  std::vector<float> v_" << id << "(in_" << id << ", in_" << id << " + " << core::numel(in.type.shape)
      << ");\n";
  }
  for (const auto& n : c.model.nodes)
    for (const auto& o : n.outputs)
      s << "  std::vector<float> v_" << identifier(o) << "(" << std::max<int64_t>(1, core::numel(c.model.types.at(o).shape))
        << ");  // '" << o << "' " << core::to_string(c.model.types.at(o).shape) << "\n";
  s << "\n" << gen.body.str() << "\n";
  if (crash) {
    s << "  std::printf(\"the model built and ran without a library failure\\n\");\n  return 0;\n}\n";
  } else {
    s << "  const double atol = " << c_literal(c.tol.atol, false) << ", rtol = " << c_literal(c.tol.rtol, false)
      << ";\n  int bad = 0;\n";
    for (const auto& v : compared)
      s << "  bad += quorum_check(" << quoted(v) << ", v_" << identifier(v) << ".data(), want_" << identifier(v) << ", "
        << c.expected.at(v).numel() << ", atol, rtol) != 0;\n";
    s << "  return bad ? 1 : 0;\n}\n";
  }
  write_repro_file(p, dir, p.main, s.str());
  return p;
}

}  // namespace quorum::backends
