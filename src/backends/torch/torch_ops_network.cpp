// libtorch mappings of the layer families: dense and matmul, normalisation (batch_norm, layer_norm,
// lrn), recurrent layers (at::rnn_tanh, at::lstm, at::gru with PyTorch's own weight layout, which
// the catalogue shares) and the losses, which train_step also uses for its objective.
#include <ATen/ops/add.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/avg_pool3d.h>
#include <ATen/ops/batch_norm.h>
#include <ATen/ops/binary_cross_entropy.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/div.h>
#include <ATen/ops/gru.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/lstm.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/mse_loss.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/nan_to_num.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/rnn_tanh.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

#include "backends/torch/torch_ops.h"
#include "core/error.h"

namespace quorum::backends::torch {
namespace {

// ---- dense ---------------------------------------------------------------------------------------

void add_dense(OpTable& t) {
  t["dense"] = OpImpl{nullptr, [](const NodeContext& c, const TensorList& in) {
                        // Weight [units, in_features] is torch.nn.Linear's layout.
                        return TensorList{at::linear(in[0], in[1], c.i("bias") == 1 ? in[2] : at::Tensor())};
                      }};
  t["matmul"] = OpImpl{nullptr, [](const NodeContext&, const TensorList& in) {
                         return TensorList{at::matmul(in[0], in[1])};
                       }};
}

// ---- norm ----------------------------------------------------------------------------------------

at::Tensor batch_norm(const NodeContext& c, const TensorList& in) {
  const at::Tensor &x = in[0], &scale = in[1], &bias = in[2], &mean = in[3], &var = in[4];
  const double eps = c.f("epsilon");
  if (c.i("training") == 1) {
    // Batch statistics; without running buffers nothing is updated in place.
    return at::batch_norm(x, scale, bias, at::Tensor(), at::Tensor(), true, 0.0, eps, false);
  }
  // libtorch refuses running_mean / running_var that require a gradient ("not differentiable with
  // respect to argument 'running_mean'"), but the catalogue differentiates through them. The
  // output comes from at::batch_norm on detached statistics; a term equal to zero in value,
  // (f - f.detach()) with f the same normalisation written in ATen ops of mean and var only,
  // carries their gradients without changing the output. Where f is infinite (x = -inf) the term
  // is inf - inf = NaN, which would be Quorum's, not libtorch's: it is zeroed there.
  at::Tensor y = at::batch_norm(x, scale, bias, mean.detach(), var.detach(), false, 0.0, eps, false);
  if (mean.requires_grad() || var.requires_grad()) {
    std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
    shape[1] = x.size(1);
    const at::Tensor f = at::mul(at::mul(at::sub(x.detach(), mean.reshape(shape)), at::rsqrt(at::add(var.reshape(shape), eps))),
                                 scale.detach().reshape(shape));
    y = at::add(y, at::nan_to_num(at::sub(f, f.detach()), 0.0, 0.0, 0.0));
  }
  return y;
}

at::Tensor layer_norm(const NodeContext& c, const TensorList& in) {
  const at::Tensor& x = in[0];
  const int axis = normalize_axis(c.i("axis"), x.dim());
  const std::vector<int64_t> normalized(x.sizes().begin() + axis, x.sizes().end());
  return at::layer_norm(x, normalized, in[1], in[2], c.f("epsilon"), false);
}

// ONNX LRN across channels, composed as torch.nn.functional.local_response_norm does it: the
// squares are averaged over a window of `size` channels (zero-padded, the divisor always `size`),
// so bias + alpha * mean = bias + alpha/size * sum.
at::Tensor lrn(const NodeContext& c, const TensorList& in) {
  const at::Tensor& x = in[0];
  const int64_t size = c.i("size");
  at::Tensor sq = at::mul(x, x).unsqueeze(1);  // [N, 1, C, H, W]
  sq = at::constant_pad_nd(sq, {0, 0, 0, 0, size / 2, (size - 1) / 2}, 0.0);
  at::Tensor avg = at::avg_pool3d(sq, {size, 1, 1}, {1, 1, 1}).squeeze(1);
  const at::Tensor base = at::add(at::mul(avg, c.f("alpha")), c.f("bias"));
  return at::div(x, at::pow(base, c.f("beta")));
}

void add_norm(OpTable& t) {
  t["batch_norm"] = OpImpl{nullptr, [](const NodeContext& c, const TensorList& in) { return TensorList{batch_norm(c, in)}; }};
  t["layer_norm"] = OpImpl{nullptr, [](const NodeContext& c, const TensorList& in) { return TensorList{layer_norm(c, in)}; }};
  t["lrn"] = OpImpl{nullptr, [](const NodeContext& c, const TensorList& in) { return TensorList{lrn(c, in)}; }};
}

// ---- rnn -----------------------------------------------------------------------------------------

enum class Cell { Rnn, Lstm, Gru };

TensorList run_rnn(const NodeContext& c, const TensorList& in, Cell cell) {
  const at::Tensor& x = in[0];  // [N, T, F], batch first
  const int64_t hidden = c.i("hidden_size");
  const at::Tensor h0 = at::zeros({1, x.size(0), hidden}, x.options());
  const std::vector<at::Tensor> params{in[1], in[2], in[3], in[4]};  // w_ih, w_hh, b_ih, b_hh
  at::Tensor seq, last;
  // One layer, unidirectional, no dropout, inference semantics (train only matters for dropout).
  switch (cell) {
    case Cell::Rnn: std::tie(seq, last) = at::rnn_tanh(x, h0, params, true, 1, 0.0, false, false, true); break;
    case Cell::Gru: std::tie(seq, last) = at::gru(x, h0, params, true, 1, 0.0, false, false, true); break;
    case Cell::Lstm: {
      at::Tensor c_last;
      std::tie(seq, last, c_last) = at::lstm(x, {h0, at::zeros_like(h0)}, params, true, 1, 0.0, false, false, true);
      break;
    }
  }
  // return_sequences=0 reads the final state h_n [1, N, H] that libtorch returns separately.
  return {c.i("return_sequences") == 1 ? seq : last.select(0, 0)};
}

void add_rnn(OpTable& t) {
  const std::pair<const char*, Cell> cells[] = {{"simple_rnn", Cell::Rnn}, {"lstm", Cell::Lstm}, {"gru", Cell::Gru}};
  for (const auto& [name, cell] : cells) {
    const Cell k = cell;
    t[name] = OpImpl{nullptr, [k](const NodeContext& c, const TensorList& in) { return run_rnn(c, in, k); }};
  }
}

// ---- loss ----------------------------------------------------------------------------------------

void add_loss(OpTable& t) {
  for (const char* name : {"mse_loss", "softmax_cross_entropy", "binary_cross_entropy", "categorical_hinge"}) {
    const std::string loss = name;
    t[name] = OpImpl{nullptr, [loss](const NodeContext&, const TensorList& in) {
                       return TensorList{catalogue_loss(loss, in[0], in[1])};
                     }};
  }
}

}  // namespace

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
    const at::Tensor pos = at::sum(at::mul(t, p), {1});
    const at::Tensor neg = at::amax(at::mul(at::rsub(t, 1.0), p), {1});
    return at::mean(at::relu(at::add(at::sub(neg, pos), 1.0)));
  }
  throw core::UserError("the torch backend has no loss '" + loss + "'");
}

void add_network_ops(OpTable& t) {
  add_dense(t);
  add_norm(t);
  add_rnn(t);
  add_loss(t);
}

}  // namespace quorum::backends::torch
