// Post-training quantization of a float model into ONNX's operator form (quantize.h).
#include "gen/quantize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
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
QParams activation_params(const Tensor& t, core::Rng& rng) {
  auto [lo, hi] = finite_range(t);
  QParams q;
  q.type = rng.bernoulli(0.5) ? "uint8" : "int8";
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

DType dtype_of(const std::string& type) { return type == "uint8" ? DType::U8 : DType::I8; }

// `w` quantized as QuantizeLinear does (ops::requantize) into `type`, in `shape`.
Tensor quantized(const Tensor& w, double scale, int64_t zero_point, DType type, const core::Shape& shape) {
  Tensor out(type, shape);
  for (int64_t i = 0; i < w.numel(); ++i)
    out.set(i, ops::requantize(w.get(i) / scale, static_cast<double>(zero_point), type));
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

}  // namespace

int quantize_model(ir::Graph& g, const ref::ValueMap& inputs, core::Rng& rng) {
  const ref::ValueMap values = ref::forward(g, inputs);
  std::vector<ir::Node> nodes;
  int count = 0;
  for (const ir::Node& n : g.nodes) {
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
    const QParams wq = weight_params(w, rng);
    ir::Node q{n.name + "/quantize", "quantize_linear", {n.inputs[0]}, {fresh(g, n.inputs[0] + "/q")}, {}};
    q.attrs = {{"scale", x.scale}, {"zero_point", x.zero_point}, {"to", x.type}};
    g.types[q.outputs[0]] = {};  // reserves the name
    // The convolution keeps its own attributes; qlinear_matmul has only its units (set below) besides these.
    ir::Node c{n.name, "", {q.outputs[0]}, {fresh(g, n.outputs[0] + "/q")}, n.op == "conv2d" ? n.attrs : core::Attrs{}};
    g.types[c.outputs[0]] = {};
    const std::string p = n.op == "conv2d" ? "x_" : "a_";
    c.attrs[p + "scale"] = x.scale, c.attrs[p + "zero_point"] = x.zero_point;
    c.attrs["w_scale"] = wq.scale, c.attrs["w_zero_point"] = wq.zero_point, c.attrs["w_type"] = wq.type;
    c.attrs["y_scale"] = y.scale, c.attrs["y_zero_point"] = y.zero_point, c.attrs["to"] = y.type;
    const std::string wname = fresh(g, n.inputs[1] + "/q");
    if (n.op == "conv2d") {
      c.op = "qlinear_conv2d";
      g.initializers[wname] = quantized(w, wq.scale, wq.zero_point, dtype_of(wq.type), w.shape());
      c.inputs.push_back(wname);
      if (core::attr_i(n.attrs, "bias") == 1) {
        const Tensor b = g.initializers.at(n.inputs[2]).to(DType::F64);
        const std::string bname = fresh(g, n.inputs[2] + "/q");
        g.initializers[bname] = quantized(b, x.scale * wq.scale, 0, DType::I32, b.shape());
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
      g.initializers[wname] = quantized(wt, wq.scale, wq.zero_point, dtype_of(wq.type), wt.shape());
      c.inputs.push_back(wname);
    }
    ir::Node d{n.name + "/dequantize", "dequantize_linear", {c.outputs[0]}, {n.outputs[0]}, {}};
    d.attrs = {{"scale", y.scale}, {"zero_point", y.zero_point}};
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
  return count;
}

}  // namespace quorum::gen
