// The libtorch backend's sink: every call name the lowering (lower.cpp) emits, mapped onto the ATen
// function that computes it. The arguments arrive resolved (axes, pads, sizes, kernels chosen):
// an entry only reads them by position and calls ATen, so the backend runs exactly the calls the
// reproducer writer prints. Where Python's spelling and ATen's differ the entry says which ATen
// function torch.nn.functional reaches (F.conv2d -> at::convolution, F.interpolate ->
// upsample_*2d, F.pad -> reflection_pad{k}d / replication_pad{k}d).
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/_make_per_channel_quantized_tensor.h>
#include <ATen/ops/_make_per_tensor_quantized_tensor.h>
#include <ATen/ops/_upsample_nearest_exact2d.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/adaptive_avg_pool1d.h>
#include <ATen/ops/adaptive_avg_pool2d.h>
#include <ATen/ops/adaptive_avg_pool3d.h>
#include <ATen/ops/adaptive_max_pool1d.h>
#include <ATen/ops/adaptive_max_pool2d.h>
#include <ATen/ops/adaptive_max_pool3d.h>
#include <ATen/ops/add.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/avg_pool1d.h>
#include <ATen/ops/avg_pool2d.h>
#include <ATen/ops/avg_pool3d.h>
#include <ATen/ops/batch_norm.h>
#include <ATen/ops/binary_cross_entropy.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/dequantize.h>
#include <ATen/ops/div.h>
#include <ATen/ops/elu.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/gru.h>
#include <ATen/ops/hardsigmoid.h>
#include <ATen/ops/hardswish.h>
#include <ATen/ops/hardtanh.h>
#include <ATen/ops/int_repr.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/leaky_relu.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/log.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/lstm.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/max.h>
#include <ATen/ops/max_pool1d.h>
#include <ATen/ops/max_pool2d.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/mse_loss.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/nan_to_num.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/permute.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/prod.h>
#include <ATen/ops/quantize_per_channel.h>
#include <ATen/ops/quantize_per_tensor.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/reflection_pad1d.h>
#include <ATen/ops/reflection_pad2d.h>
#include <ATen/ops/reflection_pad3d.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/replication_pad1d.h>
#include <ATen/ops/replication_pad2d.h>
#include <ATen/ops/replication_pad3d.h>
#include <ATen/ops/reshape.h>
#include <ATen/ops/rnn_relu.h>
#include <ATen/ops/rnn_tanh.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/selu.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/slice.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/softplus.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/square.h>
#include <ATen/ops/squeeze.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/unsqueeze.h>
#include <ATen/ops/upsample_bicubic2d.h>
#include <ATen/ops/upsample_bilinear2d.h>
#include <ATen/ops/upsample_nearest2d.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "backends/torch/torch_ops.h"
#include "core/error.h"

namespace quorum::backends::torch {
namespace {

// A call's arguments, evaluated on demand by position.
class Args {
 public:
  Args(const Call& c, TorchSink& sink) : c_(c), sink_(sink) {}
  size_t size() const { return c_.args.size(); }
  bool is_float(size_t k) const { return at(k).kind == Arg::Kind::Float; }
  bool is_int(size_t k) const { return at(k).kind == Arg::Kind::Int; }
  // A tensor argument's own expression, unevaluated (a call whose result is not a tensor).
  const Call& expression(size_t k) const { return *expect(at(k), Arg::Kind::Tensor).t; }
  // A tensor; None is the undefined tensor (an absent optional).
  at::Tensor t(size_t k) const {
    const Arg& a = at(k);
    if (a.kind == Arg::Kind::None) return at::Tensor();
    return sink_.eval1(*expect(a, Arg::Kind::Tensor).t);
  }
  TensorList ts(size_t k) const {
    TensorList out;
    for (const auto& e : expect(at(k), Arg::Kind::Tensors).ts) out.push_back(sink_.eval1(*e));
    return out;
  }
  // An int, or a size expression t.size(axis) - minus.
  int64_t i(size_t k) const {
    const Arg& a = at(k);
    if (a.kind == Arg::Kind::SizeMinus) return sink_.eval1(*a.t).size(a.i) - a.minus;
    return expect(a, Arg::Kind::Int).i;
  }
  const Ints& ints(size_t k) const { return expect(at(k), Arg::Kind::Ints).ints; }
  double f(size_t k) const { return expect(at(k), Arg::Kind::Float).f; }
  const std::vector<double>& fs(size_t k) const { return expect(at(k), Arg::Kind::Floats).fs; }
  // A list of floats (float64) or of ints (int64) as a 1-D tensor.
  at::Tensor values(size_t k) const {
    if (at(k).kind == Arg::Kind::Ints) return at::tensor(at::ArrayRef<int64_t>(ints(k)), at::kLong);
    return at::tensor(at::ArrayRef<double>(fs(k)), at::kDouble);
  }
  // The argument with Python keyword `key`, if any.
  const Arg* keyword(const std::string& key) const {
    for (const Arg& a : c_.args)
      if (a.keyword == key) return &a;
    return nullptr;
  }
  bool b(size_t k) const { return expect(at(k), Arg::Kind::Bool).b; }
  const std::string& s(size_t k) const { return expect(at(k), Arg::Kind::Str).s; }
  at::TensorOptions options(size_t k) const { return sink_.eval1(*expect(at(k), Arg::Kind::DTypeOf).t).options(); }
  at::ScalarType dtype(size_t k) const {
    static const std::map<std::string, at::ScalarType> types = {
        {"uint8", at::kByte},     {"int8", at::kChar},    {"int16", at::kShort},  {"int32", at::kInt},
        {"int64", at::kLong},
        {"float32", at::kFloat},  {"float64", at::kDouble}, {"quint8", at::kQUInt8}, {"qint8", at::kQInt8}};
    return types.at(expect(at(k), Arg::Kind::DType).s);
  }
  TorchSink& sink() const { return sink_; }

 private:
  const Arg& at(size_t k) const {
    if (k >= c_.args.size()) throw std::logic_error("torch sink: " + c_.fn + " has no argument " + std::to_string(k));
    return c_.args[k];
  }
  const Arg& expect(const Arg& a, Arg::Kind kind) const {
    if (a.kind != kind) throw std::logic_error("torch sink: an argument of " + c_.fn + " has an unexpected kind");
    return a;
  }
  const Call& c_;
  TorchSink& sink_;
};

using Fn = std::function<TensorList(const Args&)>;
using Table = std::map<std::string, Fn>;

// The 'reflect' / 'replicate' padding of the trailing k axes (1 <= k <= 3) of x shaped
// [batch, channel, k axes...], as F.pad dispatches it.
at::Tensor mode_pad(const at::Tensor& x, const std::string& mode, const Ints& torch_pads) {
  const size_t k = torch_pads.size() / 2;
  if (mode == "reflect") {
    if (k == 1) return at::reflection_pad1d(x, torch_pads);
    if (k == 2) return at::reflection_pad2d(x, torch_pads);
    return at::reflection_pad3d(x, torch_pads);
  }
  if (k == 1) return at::replication_pad1d(x, torch_pads);
  if (k == 2) return at::replication_pad2d(x, torch_pads);
  return at::replication_pad3d(x, torch_pads);
}

// Crops the spatial axes of y (from axis 2) to `want` (the graph's output shape).
at::Tensor crop_to(const at::Tensor& y, const Ints& want) {
  at::Tensor out = y;
  for (int64_t d = 2; d < y.dim(); ++d) {
    const int64_t w = want[static_cast<size_t>(d)];
    if (out.size(d) < w)
      throw std::runtime_error("libtorch produced " + std::to_string(out.size(d)) + " cells along axis " +
                               std::to_string(d) + ", expected " + std::to_string(w));
    if (out.size(d) > w) out = out.narrow(d, 0, w);
  }
  return out;
}

void add_elementwise(Table& t) {
  using Unary = at::Tensor (*)(const at::Tensor&);
  const std::pair<const char*, Unary> unary[] = {
      {"torch.abs", [](const at::Tensor& x) { return at::abs(x); }},
      {"torch.exp", [](const at::Tensor& x) { return at::exp(x); }},
      {"torch.log", [](const at::Tensor& x) { return at::log(x); }},
      {"torch.neg", [](const at::Tensor& x) { return at::neg(x); }},
      {"torch.reciprocal", [](const at::Tensor& x) { return at::reciprocal(x); }},
      {"torch.relu", [](const at::Tensor& x) { return at::relu(x); }},
      {"torch.rsqrt", [](const at::Tensor& x) { return at::rsqrt(x); }},
      {"torch.selu", [](const at::Tensor& x) { return at::selu(x); }},
      {"torch.sigmoid", [](const at::Tensor& x) { return at::sigmoid(x); }},
      {"torch.sqrt", [](const at::Tensor& x) { return at::sqrt(x); }},
      {"torch.square", [](const at::Tensor& x) { return at::square(x); }},
      {"torch.tanh", [](const at::Tensor& x) { return at::tanh(x); }},
      {"torch.zeros_like", [](const at::Tensor& x) { return at::zeros_like(x); }},
      {"F.hardswish", [](const at::Tensor& x) { return at::hardswish(x); }},
      {"F.hardsigmoid", [](const at::Tensor& x) { return at::hardsigmoid(x); }},
      {".clone", [](const at::Tensor& x) { return x.clone(); }},
      {".detach", [](const at::Tensor& x) { return x.detach(); }},
      {".contiguous", [](const at::Tensor& x) { return x.contiguous(); }},
      {".int_repr", [](const at::Tensor& x) { return at::int_repr(x); }},
      {".dequantize", [](const at::Tensor& x) { return at::dequantize(x); }},
  };
  for (const auto& [name, f] : unary) {
    const Unary fn = f;
    t[name] = [fn](const Args& a) { return TensorList{fn(a.t(0))}; };
  }
  // Tensor op tensor, or tensor op scalar (the Scalar overload, as torch.add(x, 1.0) takes it).
  t["torch.add"] = [](const Args& a) {
    if (a.is_int(1)) return TensorList{at::add(a.t(0), a.i(1))};
    return TensorList{a.is_float(1) ? at::add(a.t(0), a.f(1)) : at::add(a.t(0), a.t(1))};
  };
  t["torch.sub"] = [](const Args& a) {
    if (a.is_int(1)) return TensorList{at::sub(a.t(0), a.i(1))};
    return TensorList{a.is_float(1) ? at::sub(a.t(0), a.f(1)) : at::sub(a.t(0), a.t(1))};
  };
  t["torch.mul"] = [](const Args& a) {
    if (a.is_int(1)) return TensorList{at::mul(a.t(0), a.i(1))};
    return TensorList{a.is_float(1) ? at::mul(a.t(0), a.f(1)) : at::mul(a.t(0), a.t(1))};
  };
  t["torch.div"] = [](const Args& a) {
    if (a.is_int(1)) return TensorList{at::div(a.t(0), a.i(1))};
    return TensorList{a.is_float(1) ? at::div(a.t(0), a.f(1)) : at::div(a.t(0), a.t(1))};
  };
  t["torch.pow"] = [](const Args& a) { return TensorList{at::pow(a.t(0), a.f(1))}; };
  t["torch.maximum"] = [](const Args& a) { return TensorList{at::maximum(a.t(0), a.t(1))}; };
  t["torch.minimum"] = [](const Args& a) { return TensorList{at::minimum(a.t(0), a.t(1))}; };
  t["torch.matmul"] = [](const Args& a) { return TensorList{at::matmul(a.t(0), a.t(1))}; };
  t["torch.clamp"] = [](const Args& a) {
    return TensorList{at::clamp(a.t(0), c10::Scalar(a.f(1)), c10::Scalar(a.f(2)))};
  };
  t[".clamp_min"] = [](const Args& a) { return TensorList{a.t(0).clamp_min(a.f(1))}; };
  t["torch.nan_to_num"] = [](const Args& a) { return TensorList{at::nan_to_num(a.t(0), a.f(1), a.f(2), a.f(3))}; };
  t["F.hardtanh"] = [](const Args& a) { return TensorList{at::hardtanh(a.t(0), a.f(1), a.f(2))}; };
  t["F.softplus"] = [](const Args& a) { return TensorList{at::softplus(a.t(0), a.f(1), a.f(2))}; };
  t["F.elu"] = [](const Args& a) { return TensorList{at::elu(a.t(0), a.f(1))}; };
  t["F.leaky_relu"] = [](const Args& a) { return TensorList{at::leaky_relu(a.t(0), a.f(1))}; };
  t["F.gelu"] = [](const Args& a) { return TensorList{at::gelu(a.t(0), a.s(1))}; };
  t["torch.cat"] = [](const Args& a) { return TensorList{at::cat(a.ts(0), a.i(1))}; };
}

void add_layout(Table& t) {
  t["torch.reshape"] = [](const Args& a) { return TensorList{at::reshape(a.t(0), a.ints(1))}; };
  t[".reshape"] = [](const Args& a) { return TensorList{a.t(0).reshape(a.ints(1))}; };
  t["torch.squeeze"] = [](const Args& a) {
    return TensorList{a.size() == 1 ? at::squeeze(a.t(0)) : at::squeeze(a.t(0), a.i(1))};
  };
  t[".squeeze"] = [](const Args& a) { return TensorList{a.t(0).squeeze(a.i(1))}; };
  t["torch.unsqueeze"] = [](const Args& a) { return TensorList{at::unsqueeze(a.t(0), a.i(1))}; };
  t[".unsqueeze"] = [](const Args& a) { return TensorList{a.t(0).unsqueeze(a.i(1))}; };
  t["torch.permute"] = [](const Args& a) { return TensorList{at::permute(a.t(0), a.ints(1))}; };
  t["torch.flip"] = [](const Args& a) { return TensorList{a.t(0).flip(a.ints(1))}; };
  t[".movedim"] = [](const Args& a) { return TensorList{a.t(0).movedim(a.i(1), a.i(2))}; };
  t[".select"] = [](const Args& a) { return TensorList{a.t(0).select(a.i(1), a.i(2))}; };
  t[".narrow"] = [](const Args& a) { return TensorList{a.t(0).narrow(a.i(1), a.i(2), a.i(3))}; };
  t[".repeat"] = [](const Args& a) { return TensorList{a.t(0).repeat(a.ints(1))}; };
  t["slice"] = [](const Args& a) { return TensorList{at::slice(a.t(0), a.i(1), a.i(2), a.i(3), a.i(4))}; };
  t["torch.constant_pad_nd"] = [](const Args& a) { return TensorList{at::constant_pad_nd(a.t(0), a.ints(1), a.f(2))}; };
  t["F.pad"] = [](const Args& a) { return TensorList{mode_pad(a.t(0), a.s(2), a.ints(1))}; };
  t["crop_to"] = [](const Args& a) { return TensorList{crop_to(a.t(0), a.ints(1))}; };
  t["torch.zeros"] = [](const Args& a) { return TensorList{at::zeros(a.ints(0), a.options(1))}; };
  t["torch.ones"] = [](const Args& a) { return TensorList{at::ones(a.ints(0), a.options(1))}; };

  t["torch.sum"] = [](const Args& a) { return TensorList{at::sum(a.t(0), at::IntArrayRef(a.ints(1)), a.b(2))}; };
  t["torch.mean"] = [](const Args& a) { return TensorList{at::mean(a.t(0), at::IntArrayRef(a.ints(1)), a.b(2))}; };
  t["torch.amax"] = [](const Args& a) { return TensorList{at::amax(a.t(0), a.ints(1), a.b(2))}; };
  t["torch.amin"] = [](const Args& a) { return TensorList{at::amin(a.t(0), a.ints(1), a.b(2))}; };
  t["torch.prod"] = [](const Args& a) { return TensorList{at::prod(a.t(0), a.i(1), a.b(2))}; };
  t["torch.softmax"] = [](const Args& a) { return TensorList{at::softmax(a.t(0), a.i(1))}; };
  t["torch.log_softmax"] = [](const Args& a) { return TensorList{at::log_softmax(a.t(0), a.i(1))}; };
}

void add_network(Table& t) {
  t["F.linear"] = [](const Args& a) { return TensorList{at::linear(a.t(0), a.t(1), a.t(2))}; };
  t["torch.batch_norm"] = [](const Args& a) {
    return TensorList{at::batch_norm(a.t(0), a.t(1), a.t(2), a.t(3), a.t(4), a.b(5), a.f(6), a.f(7), a.b(8))};
  };
  t["F.layer_norm"] = [](const Args& a) {
    return TensorList{at::layer_norm(a.t(0), a.ints(1), a.t(2), a.t(3), a.f(4), false)};
  };
  t["F.avg_pool3d"] = [](const Args& a) { return TensorList{at::avg_pool3d(a.t(0), a.ints(1), a.ints(2))}; };
  // torch.rnn_tanh / gru (input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
  // batch_first) -> (output, h_n); torch.lstm's hx is [h0, c0] and it returns c_n too.
  t["torch.rnn_tanh"] = [](const Args& a) {
    auto [seq, last] = at::rnn_tanh(a.t(0), a.t(1), a.ts(2), a.b(3), a.i(4), a.f(5), a.b(6), a.b(7), a.b(8));
    return TensorList{seq, last};
  };
  t["torch.rnn_relu"] = [](const Args& a) {
    auto [seq, last] = at::rnn_relu(a.t(0), a.t(1), a.ts(2), a.b(3), a.i(4), a.f(5), a.b(6), a.b(7), a.b(8));
    return TensorList{seq, last};
  };
  t["torch.gru"] = [](const Args& a) {
    auto [seq, last] = at::gru(a.t(0), a.t(1), a.ts(2), a.b(3), a.i(4), a.f(5), a.b(6), a.b(7), a.b(8));
    return TensorList{seq, last};
  };
  t["torch.lstm"] = [](const Args& a) {
    auto [seq, last, c_last] = at::lstm(a.t(0), a.ts(1), a.ts(2), a.b(3), a.i(4), a.f(5), a.b(6), a.b(7), a.b(8));
    return TensorList{seq, last, c_last};
  };
  t["catalogue_loss"] = [](const Args& a) { return TensorList{catalogue_loss(a.s(0), a.t(1), a.t(2))}; };
}

void add_spatial(Table& t) {
  // F.conv{1,2,3}d(x, w, b, stride, padding, dilation, groups) is at::convolution, not transposed.
  for (const char* name : {"F.conv1d", "F.conv2d", "F.conv3d"})
    t[name] = [](const Args& a) {
      const Ints& strides = a.ints(3);
      const Ints no_output_padding(strides.size(), 0);
      return TensorList{
          at::convolution(a.t(0), a.t(1), a.t(2), strides, a.ints(4), a.ints(5), false, no_output_padding, a.i(6))};
    };
  // F.conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation).
  t["F.conv_transpose2d"] = [](const Args& a) {
    return TensorList{
        at::convolution(a.t(0), a.t(1), a.t(2), a.ints(3), a.ints(4), a.ints(7), true, a.ints(5), a.i(6))};
  };
  // (x, kernel, stride, padding, dilation, ceil_mode)
  t["F.max_pool1d"] = [](const Args& a) {
    return TensorList{at::max_pool1d(a.t(0), a.ints(1), a.ints(2), a.ints(3), a.ints(4), a.b(5))};
  };
  t["F.max_pool2d"] = [](const Args& a) {
    return TensorList{at::max_pool2d(a.t(0), a.ints(1), a.ints(2), a.ints(3), a.ints(4), a.b(5))};
  };
  // (x, kernel, stride, padding, ceil_mode, count_include_pad[, divisor_override])
  t["F.avg_pool1d"] = [](const Args& a) {
    return TensorList{at::avg_pool1d(a.t(0), a.ints(1), a.ints(2), a.ints(3), a.b(4), a.b(5))};
  };
  t["F.avg_pool2d"] = [](const Args& a) {
    if (a.size() == 7)
      return TensorList{at::avg_pool2d(a.t(0), a.ints(1), a.ints(2), a.ints(3), a.b(4), a.b(5), a.i(6))};
    return TensorList{at::avg_pool2d(a.t(0), a.ints(1), a.ints(2), a.ints(3), a.b(4), a.b(5))};
  };
  t["F.adaptive_max_pool1d"] = [](const Args& a) {
    return TensorList{std::get<0>(at::adaptive_max_pool1d(a.t(0), a.ints(1)))};
  };
  t["F.adaptive_max_pool2d"] = [](const Args& a) {
    return TensorList{std::get<0>(at::adaptive_max_pool2d(a.t(0), a.ints(1)))};
  };
  t["F.adaptive_max_pool3d"] = [](const Args& a) {
    return TensorList{std::get<0>(at::adaptive_max_pool3d(a.t(0), a.ints(1)))};
  };
  t["F.adaptive_avg_pool1d"] = [](const Args& a) { return TensorList{at::adaptive_avg_pool1d(a.t(0), a.ints(1))}; };
  t["F.adaptive_avg_pool2d"] = [](const Args& a) { return TensorList{at::adaptive_avg_pool2d(a.t(0), a.ints(1))}; };
  t["F.adaptive_avg_pool3d"] = [](const Args& a) { return TensorList{at::adaptive_avg_pool3d(a.t(0), a.ints(1))}; };
  // F.interpolate(x, size= | scale_factor=, mode=[, align_corners=][, recompute_scale_factor=False]):
  // 'nearest' is upsample_nearest2d, 'nearest-exact' _upsample_nearest_exact2d, 'bilinear'
  // upsample_bilinear2d, 'bicubic' upsample_bicubic2d. With scale_factor, as torch.nn.functional
  // does: the output floor(in * scale) in double, and the scales passed on, so the kernels divide
  // the coordinate by them (recompute_scale_factor=False).
  t["F.interpolate"] = [](const Args& a) {
    const at::Tensor x = a.t(0);
    std::vector<int64_t> out;
    c10::optional<double> sh, sw;
    if (a.keyword("scale_factor")) {
      const std::vector<double>& s = a.fs(1);
      sh = s.at(0);
      sw = s.at(1);
      for (size_t i = 0; i < 2; ++i) {
        const auto in = static_cast<double>(x.size(static_cast<int64_t>(2 + i)));
        out.push_back(static_cast<int64_t>(std::floor(in * s[i])));
      }
    } else {
      out = a.ints(1);
    }
    const std::string& mode = a.s(2);
    if (mode == "nearest") return TensorList{at::upsample_nearest2d(x, out, sh, sw)};
    if (mode == "nearest-exact") return TensorList{at::_upsample_nearest_exact2d(x, out, sh, sw)};
    if (mode == "bicubic") return TensorList{at::upsample_bicubic2d(x, out, a.b(3), sh, sw)};
    return TensorList{at::upsample_bilinear2d(x, out, a.b(3), sh, sw)};
  };
}

// An operator libtorch registers with its dispatcher (the quantized ones: quantized::conv2d and its packed weight
// are not ATen functions), called boxed as TorchScript and Python do.
c10::IValue call_registered(const char* name, const char* overload, std::vector<c10::IValue> args) {
  const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
  op.callBoxed(&args);
  return args.at(0);
}

c10::IValue optional_tensor(const at::Tensor& t) { return t.defined() ? c10::IValue(t) : c10::IValue(); }

// The quantized tensors and the registered quantized operators. torch.ops.quantized.conv2d(x, packed, scale, zp)
// takes its packed weight as the nested call torch.ops.quantized.conv2d_prepack(w, bias, stride, padding,
// dilation, groups); linear's as torch.ops.quantized.linear_prepack(w, bias).
void add_quantized(Table& t) {
  t[".to"] = [](const Args& a) { return TensorList{a.t(0).to(a.dtype(1))}; };
  t["torch._make_per_tensor_quantized_tensor"] = [](const Args& a) {
    return TensorList{at::_make_per_tensor_quantized_tensor(a.t(0), a.f(1), a.i(2))};
  };
  // torch.tensor(values, dtype=...): a per-channel quantizer's scales (float64) and zero points (int64).
  t["torch.tensor"] = [](const Args& a) {
    if (a.size() != 2 || a.keyword("dtype") == nullptr)
      throw std::logic_error("torch sink: torch.tensor takes values and a dtype");
    return TensorList{a.values(0).to(a.dtype(1))};
  };
  t["torch._make_per_channel_quantized_tensor"] = [](const Args& a) {
    return TensorList{at::_make_per_channel_quantized_tensor(a.t(0), a.t(1), a.t(2), a.i(3))};
  };
  t["torch.quantize_per_channel"] = [](const Args& a) {
    return TensorList{at::quantize_per_channel(a.t(0), a.t(1), a.t(2), a.i(3), a.dtype(4))};
  };
  t["torch.quantize_per_tensor"] = [](const Args& a) {
    return TensorList{at::quantize_per_tensor(a.t(0), a.f(1), a.i(2), a.dtype(3))};
  };
  t["torch.ops.quantized.conv2d"] = [](const Args& a) {
    const Call& pc = a.expression(1);
    if (pc.fn != "torch.ops.quantized.conv2d_prepack")
      throw std::logic_error("torch sink: quantized conv2d takes its packed weight from conv2d_prepack");
    const Args p(pc, a.sink());
    const c10::IValue packed = call_registered(
        "quantized::conv2d_prepack", "",
        {p.t(0), optional_tensor(p.t(1)), c10::IValue(p.ints(2)), c10::IValue(p.ints(3)), c10::IValue(p.ints(4)),
         c10::IValue(p.i(5))});
    return TensorList{
        call_registered("quantized::conv2d", "new", {a.t(0), packed, c10::IValue(a.f(2)), c10::IValue(a.i(3))})
            .toTensor()};
  };
  // The quantized twins' operators, each given its output scale and zero point: quantized::add(qa, qb, scale, zp),
  // quantized::mul(...), quantized::cat(qxs, dim, scale, zp), quantized::leaky_relu(qx, negative_slope, inplace,
  // scale, zp), quantized::sigmoid(qx, scale, zp).
  for (const char* op : {"add", "mul"}) {
    const std::string name = std::string("quantized::") + op;
    t[std::string("torch.ops.quantized.") + op] = [name](const Args& a) {
      return TensorList{
          call_registered(name.c_str(), "", {a.t(0), a.t(1), c10::IValue(a.f(2)), c10::IValue(a.i(3))}).toTensor()};
    };
  }
  t["torch.ops.quantized.cat"] = [](const Args& a) {
    return TensorList{call_registered("quantized::cat", "", {c10::IValue(c10::List<at::Tensor>(a.ts(0))),
                                                             c10::IValue(a.i(1)), c10::IValue(a.f(2)),
                                                             c10::IValue(a.i(3))})
                          .toTensor()};
  };
  t["torch.ops.quantized.leaky_relu"] = [](const Args& a) {
    return TensorList{call_registered("quantized::leaky_relu", "",
                                      {a.t(0), c10::IValue(a.f(1)), c10::IValue(a.b(2)), c10::IValue(a.f(3)),
                                       c10::IValue(a.i(4))})
                          .toTensor()};
  };
  t["torch.ops.quantized.sigmoid"] = [](const Args& a) {
    return TensorList{
        call_registered("quantized::sigmoid", "", {a.t(0), c10::IValue(a.f(1)), c10::IValue(a.i(2))}).toTensor()};
  };
  t["torch.ops.quantized.linear"] = [](const Args& a) {
    const Call& pc = a.expression(1);
    if (pc.fn != "torch.ops.quantized.linear_prepack")
      throw std::logic_error("torch sink: quantized linear takes its packed weight from linear_prepack");
    const Args p(pc, a.sink());
    const c10::IValue packed = call_registered("quantized::linear_prepack", "", {p.t(0), optional_tensor(p.t(1))});
    return TensorList{
        call_registered("quantized::linear", "", {a.t(0), packed, c10::IValue(a.f(2)), c10::IValue(a.i(3))})
            .toTensor()};
  };
}

const Table& table() {
  static const Table t = [] {
    Table t;
    add_elementwise(t);
    add_quantized(t);
    add_layout(t);
    add_network(t);
    add_spatial(t);
    return t;
  }();
  return t;
}

}  // namespace

TorchSink::TorchSink(const TensorList& inputs) {
  for (size_t k = 0; k < inputs.size(); ++k) vars_["x" + std::to_string(k)] = inputs[k];
}

TensorList TorchSink::eval(const Call& c) {
  if (c.fn.empty()) {
    auto it = vars_.find(c.var);
    if (it == vars_.end()) throw std::logic_error("torch sink: no variable '" + c.var + "'");
    return {it->second};
  }
  auto it = table().find(c.fn);
  if (it == table().end()) throw std::logic_error("torch sink: no ATen mapping for call '" + c.fn + "'");
  return it->second(Args(c, *this));
}

at::Tensor TorchSink::eval1(const Call& c) {
  TensorList r = eval(c);
  if (r.size() != 1)
    throw std::logic_error("torch sink: '" + c.fn + "' gives " + std::to_string(r.size()) + " tensors");
  return r[0];
}

void TorchSink::assign(const std::vector<std::string>& outs, const CallPtr& e, const std::string&) {
  if (std::find(running_.begin(), running_.end(), false) != running_.end()) return;
  TensorList r = eval(*e);
  if (r.size() != outs.size())
    throw std::logic_error("torch sink: '" + e->fn + "' gives " + std::to_string(r.size()) + " tensors, expected " +
                           std::to_string(outs.size()));
  for (size_t k = 0; k < outs.size(); ++k)
    if (outs[k] != "_") vars_[outs[k]] = r[k];
}

void TorchSink::begin_if_requires_grad(const std::vector<std::string>& vars) {
  bool any = false;
  for (const auto& v : vars) any = any || vars_.at(v).requires_grad();
  running_.push_back(any);
}

void TorchSink::end_if() { running_.pop_back(); }

const at::Tensor& TorchSink::result() const { return vars_.at("y"); }

at::Tensor catalogue_loss(const std::string& loss, const at::Tensor& p, const at::Tensor& t) {
  if (loss == "mse_loss") return at::mse_loss(p, t, at::Reduction::Mean);
  if (loss == "binary_cross_entropy") return at::binary_cross_entropy(p, t, at::Tensor(), at::Reduction::Mean);
  if (loss == "softmax_cross_entropy") {
    // Class-probability targets of the same shape as the logits [N, C]: libtorch's cross entropy
    // computes -sum_c t * log_softmax(p) per row and averages over N.
    return at::cross_entropy_loss(p, t, at::Tensor(), at::Reduction::Mean, -100, 0.0);
  }
  if (loss == "categorical_hinge") {
    // Keras: pos = sum(t * p), neg = max((1 - t) * p) over classes; mean of max(0, neg - pos + 1).
    // A zero coefficient's term is absent (0, the limit the catalogue's kernel takes), not 0 * inf =
    // NaN: this composition is Quorum's, not a libtorch function.
    const auto scaled = [](const at::Tensor& c, const at::Tensor& x) {
      return at::where(at::eq(c, 0), at::zeros_like(x), at::mul(c, x));
    };
    const at::Tensor pos = at::sum(scaled(t, p), {1});
    // max over dim 1 sends the gradient to the first of tied maxima, as the catalogue's kernel and the
    // oneDNN backend do (at::amax would split it evenly: two +inf in one row).
    const at::Tensor neg = std::get<0>(at::max(scaled(at::rsub(t, 1.0), p), 1));
    return at::mean(at::relu(at::add(at::sub(neg, pos), 1.0)));
  }
  throw core::UserError("the torch backend has no loss '" + loss + "'");
}

}  // namespace quorum::backends::torch
