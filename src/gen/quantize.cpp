// Post-training quantization of a float model into ONNX's operator form (quantize.h).
#include "gen/quantize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>
#include <set>

#include "ops/quant_util.h"
#include "ops/registry.h"

namespace quorum::gen {

namespace {

using core::DType;
using core::Tensor;

struct QParams {
  double scale = 1;
  int64_t zero_point = 0;
  std::string type = "int8";
};

// The finite range of a value, with 0 in it (a zero must be exact).
std::pair<double, double> finite_range(const Tensor& t) {
  double lo = 0, hi = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.get(i);
    if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  return {std::max(lo, -1e30), std::min(hi, 1e30)};
}

double f32(double v) { return static_cast<double>(static_cast<float>(v)); }

// An activation's parameters from its range: uint8 asymmetric or int8 (asymmetric or symmetric), as tools
// choose; a tenth of the time the scale is a fraction of the range's (the extremes saturate), a tenth of
// the time a zero point at an end of its type.
// `type`: the one a node's inputs must share (drawn when empty).
QParams activation_params(const Tensor& t, core::Rng& rng, const std::string& type = "") {
  auto [lo, hi] = finite_range(t);
  QParams q;
  q.type = rng.bernoulli(0.5) ? "uint8" : "int8";
  if (!type.empty()) q.type = type;
  const double qlo = q.type == "uint8" ? 0 : -128;
  if (q.type == "int8" && rng.bernoulli(0.5)) hi = std::max(hi, -lo), lo = -hi;  // symmetric
  q.scale = f32(std::max((hi - lo) / 255.0, 1e-8));
  if (rng.bernoulli(0.1)) q.scale = f32(q.scale / static_cast<double>(rng.randint(2, 16)));
  q.zero_point = std::clamp<int64_t>(static_cast<int64_t>(std::nearbyint(qlo - lo / q.scale)),
                                     static_cast<int64_t>(qlo), static_cast<int64_t>(qlo) + 255);
  if (rng.bernoulli(0.1))
    q.zero_point = rng.bernoulli(0.5) ? static_cast<int64_t>(qlo) : static_cast<int64_t>(qlo) + 255;
  return q;
}

// A weight's parameters: int8 symmetric (zero point 0) mostly, else uint8 around 128 or a drawn zero point.
QParams weight_params(const Tensor& w, core::Rng& rng) {
  double m = 0;
  for (int64_t i = 0; i < w.numel(); ++i) m = std::max(m, std::abs(w.get(i)));
  QParams q;
  q.type = rng.bernoulli(0.75) ? "int8" : "uint8";
  q.scale = f32(std::max(m / 127.0, 1e-8));
  q.zero_point = q.type == "uint8" ? (rng.bernoulli(0.5) ? 128 : rng.randint(100, 155)) : 0;
  if (q.type == "int8" && rng.bernoulli(0.1)) q.zero_point = rng.randint(-8, 8);
  return q;
}

// Per output channel (symmetric int8, as tools quantize weights per channel): channel c's scale from its own
// largest magnitude; `channel(i)` is element i's channel.
std::vector<double> channel_scales(const Tensor& w, int64_t channels, const std::function<int64_t(int64_t)>& channel) {
  std::vector<double> m(static_cast<size_t>(channels), 0.0);
  for (int64_t i = 0; i < w.numel(); ++i) {
    double& c = m[static_cast<size_t>(channel(i))];
    c = std::max(c, std::abs(w.get(i)));
  }
  for (double& c : m) c = f32(std::max(c / 127.0, 1e-8));
  return m;
}

DType dtype_of(const std::string& type) { return type == "uint8" ? DType::U8 : DType::I8; }

// `w` quantized as QuantizeLinear does (ops::requantize) into `type`, in `shape`.
Tensor quantized(const Tensor& w, double scale, int64_t zero_point, DType type, const core::Shape& shape) {
  Tensor out(type, shape);
  for (int64_t i = 0; i < w.numel(); ++i)
    out.set(i, ops::requantize(w.get(i) / scale, static_cast<double>(zero_point), type));
  return out;
}

// ... per channel: element i with scales[channel(i)].
Tensor quantized(const Tensor& w, const std::vector<double>& scales, DType type, const core::Shape& shape,
                 const std::function<int64_t(int64_t)>& channel) {
  Tensor out(type, shape);
  for (int64_t i = 0; i < w.numel(); ++i)
    out.set(i, ops::requantize(w.get(i) / scales[static_cast<size_t>(channel(i))], 0.0, type));
  return out;
}

bool quantizable(const ir::Graph& g, const ir::Node& n) {
  if (n.op == "conv2d") return true;
  if (n.op == "dense") return core::attr_i(n.attrs, "bias") == 0;
  if (n.op == "matmul")
    return g.is_initializer(n.inputs[1]) && g.initializers.at(n.inputs[1]).rank() == 2 &&
           g.types.at(n.inputs[0]).shape.size() >= 2;
  return false;
}

std::string fresh(const ir::Graph& g, const std::string& base) {
  std::string v = base;
  for (int k = 1; g.types.count(v) || g.initializers.count(v); ++k) v = base + "_" + std::to_string(k);
  return v;
}

// quantize_linear of `value` by `q` into a fresh "<value>/q", whose name it reserves in g.types.
ir::Node quantize_node(ir::Graph& g, const std::string& name, const std::string& value, const QParams& q) {
  ir::Node n{name, "quantize_linear", {value}, {fresh(g, value + "/q")}, {}};
  n.attrs = {{"scale", q.scale}, {"zero_point", q.zero_point}, {"to", q.type}};
  g.types[n.outputs[0]] = {};
  return n;
}

// dequantize_linear of `from` by `q` back into the float value `to`, which the quantized node replaced.
ir::Node dequantize_node(const std::string& name, const std::string& from, const std::string& to, const QParams& q) {
  ir::Node n{name, "dequantize_linear", {from}, {to}, {}};
  n.attrs = {{"scale", q.scale}, {"zero_point", q.zero_point}};
  return n;
}

// The quantized twin of a float node (ops/qlinear.cpp: "qlinear_<op>", its inputs' scales in x_scales) when
// every input is computed: tools quantize additions, products, pooling, concatenation and activations
// between quantized layers in ONNX Runtime's operator form.
const ops::OpSpec* quantized_twin(const ir::Graph& g, const ir::Node& n, const ref::ValueMap& values) {
  const ops::OpSpec* twin = ops::catalogue().find("qlinear_" + n.op);
  if (!twin || !twin->is_quantized || !twin->attr("x_scales") || n.outputs.size() != 1 || !values.count(n.outputs[0]))
    return nullptr;
  for (const auto& v : n.inputs)
    if (g.is_initializer(v) || !values.count(v) || !core::is_float(g.types.at(v).dtype)) return nullptr;
  return twin;
}

// quantize_linear on each input, the twin, dequantize_linear: calibrated like a layer's, one type throughout.
void quantize_twin(ir::Graph& g, const ir::Node& n, const ops::OpSpec& twin, const ref::ValueMap& values,
                   core::Rng& rng, std::vector<ir::Node>& nodes) {
  const std::string type = rng.bernoulli(0.5) ? "uint8" : "int8";
  ir::Node c{n.name, twin.name, {}, {fresh(g, n.outputs[0] + "/q")}, n.attrs};
  g.types[c.outputs[0]] = {};
  std::vector<double> scales;
  std::vector<int64_t> zps;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const QParams x = activation_params(values.at(n.inputs[i]), rng, type);
    ir::Node q = quantize_node(g, n.name + "/quantize" + (i ? std::to_string(i) : ""), n.inputs[i], x);
    c.inputs.push_back(q.outputs[0]);
    scales.push_back(x.scale), zps.push_back(x.zero_point);
    nodes.push_back(std::move(q));
  }
  QParams y = activation_params(values.at(n.outputs[0]), rng, type);
  // A max pooling selects input values: tools quantize its output as its input (ONNX MaxPool on the quantized
  // tensor), here most of the time.
  if (twin.has_tag("keeps_quantization") && n.inputs.size() == 1 && rng.bernoulli(0.8))
    y.scale = scales[0], y.zero_point = zps[0];
  c.attrs["x_scales"] = scales, c.attrs["x_zero_points"] = zps;
  c.attrs["y_scale"] = y.scale, c.attrs["y_zero_point"] = y.zero_point, c.attrs["to"] = type;
  ir::Node d = dequantize_node(n.name + "/dequantize", c.outputs[0], n.outputs[0], y);
  nodes.push_back(std::move(c));
  nodes.push_back(std::move(d));
}

}  // namespace

int quantize_model(ir::Graph& model, const ref::ValueMap& inputs, core::Rng& rng) {
  const ref::ValueMap values = ref::forward(model, inputs);
  ir::Graph g = model;  // the model changes only once the quantized graph validates
  std::vector<ir::Node> nodes;
  int count = 0;
  for (const ir::Node& n : g.nodes) {
    if (const ops::OpSpec* twin = quantized_twin(g, n, values)) {
      quantize_twin(g, n, *twin, values, rng, nodes);
      ++count;
      continue;
    }
    if (!quantizable(g, n) || !values.count(n.inputs[0]) || !values.count(n.outputs[0])) {
      nodes.push_back(n);
      continue;
    }
    const QParams x = activation_params(values.at(n.inputs[0]), rng);
    QParams y = activation_params(values.at(n.outputs[0]), rng);
    if (y.type != x.type && rng.bernoulli(0.8)) {  // tools give the output the input's type
      y = activation_params(values.at(n.outputs[0]), rng);
      if (y.type != x.type) y.zero_point += x.type == "int8" ? -128 : 128, y.type = x.type;
    }
    const Tensor w = g.initializers.at(n.inputs[1]).to(DType::F64);
    QParams wq = weight_params(w, rng);
    // Half the weights per output channel (conv2d: weight dim 0; matmul: column), symmetric int8.
    const bool per_channel = rng.bernoulli(0.5) && w.dim(n.op == "matmul" ? 1 : 0) > 1;
    std::vector<double> wscales;
    ir::Node q = quantize_node(g, n.name + "/quantize", n.inputs[0], x);
    // The convolution keeps its own attributes; qlinear_matmul has only its units (set below) besides these.
    ir::Node c{n.name, "", {q.outputs[0]}, {fresh(g, n.outputs[0] + "/q")}, n.op == "conv2d" ? n.attrs : core::Attrs{}};
    g.types[c.outputs[0]] = {};
    const std::string p = n.op == "conv2d" ? "x_" : "a_";
    c.attrs[p + "scale"] = x.scale, c.attrs[p + "zero_point"] = x.zero_point;
    if (per_channel) wq.type = "int8", wq.zero_point = 0;
    c.attrs["w_scale"] = wq.scale, c.attrs["w_zero_point"] = wq.zero_point, c.attrs["w_type"] = wq.type;
    c.attrs["y_scale"] = y.scale, c.attrs["y_zero_point"] = y.zero_point, c.attrs["to"] = y.type;
    const std::string wname = fresh(g, n.inputs[1] + "/q");
    if (n.op == "conv2d") {
      c.op = "qlinear_conv2d";
      const int64_t per = w.numel() / std::max<int64_t>(w.dim(0), 1);
      const auto channel = [per](int64_t i) { return i / per; };
      if (per_channel) {
        wscales = channel_scales(w, w.dim(0), channel);
        c.attrs["w_scales"] = wscales, c.attrs["w_scale"] = wscales[0];
        g.initializers[wname] = quantized(w, wscales, DType::I8, w.shape(), channel);
      } else {
        g.initializers[wname] = quantized(w, wq.scale, wq.zero_point, dtype_of(wq.type), w.shape());
      }
      c.inputs.push_back(wname);
      if (core::attr_i(n.attrs, "bias") == 1) {
        const Tensor b = g.initializers.at(n.inputs[2]).to(DType::F64);
        const std::string bname = fresh(g, n.inputs[2] + "/q");
        std::vector<double> bscales(static_cast<size_t>(b.numel()), x.scale * wq.scale);
        for (size_t k = 0; k < wscales.size() && k < bscales.size(); ++k) bscales[k] = x.scale * wscales[k];
        Tensor qb(DType::I32, b.shape());  // channel k's int32 bias in units of x_scale * w_scale[k]
        for (int64_t k = 0; k < b.numel(); ++k)
          qb.set(k, ops::requantize(b.get(k) / bscales[static_cast<size_t>(k)], 0.0, DType::I32));
        g.initializers[bname] = qb;
        c.inputs.push_back(bname);
      }
    } else {
      c.op = "qlinear_matmul";
      // dense's weight is [units, K] (PyTorch Linear): qlinear_matmul takes [K, units]
      Tensor wt = w;
      if (n.op == "dense") {
        const int64_t units = w.dim(0), k = w.dim(1);
        wt = Tensor(DType::F64, {k, units});
        for (int64_t u = 0; u < units; ++u)
          for (int64_t i = 0; i < k; ++i) wt.f64()[i * units + u] = w.f64()[u * k + i];
      }
      c.attrs["units"] = wt.dim(1);
      const int64_t units = wt.dim(1);
      const auto column = [units](int64_t i) { return i % units; };
      if (per_channel) {
        wscales = channel_scales(wt, units, column);
        c.attrs["w_scales"] = wscales, c.attrs["w_scale"] = wscales[0];
        g.initializers[wname] = quantized(wt, wscales, DType::I8, wt.shape(), column);
      } else {
        g.initializers[wname] = quantized(wt, wq.scale, wq.zero_point, dtype_of(wq.type), wt.shape());
      }
      c.inputs.push_back(wname);
    }
    ir::Node d = dequantize_node(n.name + "/dequantize", c.outputs[0], n.outputs[0], y);
    nodes.push_back(std::move(q));
    nodes.push_back(std::move(c));
    nodes.push_back(std::move(d));
    ++count;
  }
  if (count == 0) return 0;
  g.nodes = std::move(nodes);
  // Drop the float weights nothing reads any more.
  std::set<std::string> read;
  for (const auto& n : g.nodes) read.insert(n.inputs.begin(), n.inputs.end());
  for (auto it = g.initializers.begin(); it != g.initializers.end();)
    it = read.count(it->first) ? std::next(it) : g.initializers.erase(it);
  g.types.clear();
  ir::validate(g, g.name);
  model = std::move(g);
  return count;
}

}  // namespace quorum::gen
