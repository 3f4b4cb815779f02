// libtorch mappings of the layout families: reshaping (shape), reductions (reduce) and softmax.
// ONNX's axis conventions (negative axes, empty lists meaning "all", Slice's clamping) are resolved
// here into the explicit arguments ATen expects.
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/permute.h>
#include <ATen/ops/prod.h>
#include <ATen/ops/reflection_pad1d.h>
#include <ATen/ops/reflection_pad2d.h>
#include <ATen/ops/reflection_pad3d.h>
#include <ATen/ops/replication_pad1d.h>
#include <ATen/ops/replication_pad2d.h>
#include <ATen/ops/replication_pad3d.h>
#include <ATen/ops/reshape.h>
#include <ATen/ops/slice.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/squeeze.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/unsqueeze.h>

#include <algorithm>
#include <numeric>

#include "backends/torch/torch_ops.h"

namespace quorum::backends::torch {
namespace {

// ---- shape ---------------------------------------------------------------------------------------

// The 'reflect' / 'edge' padding of the trailing k axes (1 <= k <= 3) of x, which must be shaped
// [batch, channel, k axes...]: ATen's reflection_pad{k}d / replication_pad{k}d.
at::Tensor mode_pad(const at::Tensor& x, const std::string& mode, const std::vector<int64_t>& torch_pads) {
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

// ONNX Pad. Constant padding of any rank is constant_pad_nd. The reflect/edge kernels pad only the
// trailing 1-3 axes of a [N, C, ...] tensor: when the padded axes all lie in the last three, the
// leading axes are folded into the batch; otherwise the axes are padded one at a time (reflect and
// edge padding are separable, so the result is the same).
at::Tensor onnx_pad(const NodeContext& c, const at::Tensor& x) {
  const auto rank = static_cast<int64_t>(x.dim());
  std::vector<int64_t> pads = c.ints("pads");
  if (pads.empty()) pads.assign(static_cast<size_t>(2 * rank), 0);
  const std::vector<int64_t> begin(pads.begin(), pads.begin() + rank), end(pads.begin() + rank, pads.end());
  const std::string& mode = c.s("mode");
  if (mode == "constant") return at::constant_pad_nd(x, torch_pad_order(begin, end), c.f("value"));
  int64_t first = rank;  // first padded axis
  for (int64_t d = rank - 1; d >= 0; --d)
    if (begin[static_cast<size_t>(d)] != 0 || end[static_cast<size_t>(d)] != 0) first = d;
  if (first == rank) return x.clone();  // nothing to pad
  const int64_t k = rank - first;
  if (k <= 3) {
    std::vector<int64_t> folded{-1, 1};
    for (int64_t d = first; d < rank; ++d) folded.push_back(x.size(d));
    const std::vector<int64_t> b(begin.begin() + first, begin.end()), e(end.begin() + first, end.end());
    at::Tensor y = mode_pad(x.reshape(folded), mode, torch_pad_order(b, e));
    std::vector<int64_t> out(x.sizes().begin(), x.sizes().end());
    for (int64_t d = first; d < rank; ++d) out[static_cast<size_t>(d)] = y.size(d - first + 2);
    return y.reshape(out);
  }
  at::Tensor y = x;
  for (int64_t d = 0; d < rank; ++d) {
    const auto ud = static_cast<size_t>(d);
    if (begin[ud] == 0 && end[ud] == 0) continue;
    at::Tensor moved = y.movedim(d, -1);
    std::vector<int64_t> sizes(moved.sizes().begin(), moved.sizes().end());
    at::Tensor padded = mode_pad(moved.reshape({-1, 1, sizes.back()}), mode, {begin[ud], end[ud]});
    sizes.back() = padded.size(2);
    y = padded.reshape(sizes).movedim(-1, d);
  }
  return y;
}

// ONNX Slice with positive steps: negative start/end count from the end, then clamp to [0, dim].
at::Tensor onnx_slice(const NodeContext& c, const at::Tensor& x) {
  const auto& starts = c.ints("starts");
  const auto& ends = c.ints("ends");
  std::vector<int64_t> axes = c.ints("axes");
  const auto& steps = c.ints("steps");
  if (axes.empty()) {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  at::Tensor y = x;
  for (size_t i = 0; i < starts.size(); ++i) {
    const int d = normalize_axis(axes[i], x.dim());
    const int64_t n = x.size(d);
    auto clamp_index = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
    y = at::slice(y, d, clamp_index(starts[i]), clamp_index(ends[i]), steps.empty() ? 1 : steps[i]);
  }
  return y;
}

void add_shape(OpTable& t) {
  // Reshape and Flatten keep the row-major order: the graph already holds the output shape.
  auto to_output_shape = [](const NodeContext& c, const TensorList& in) {
    return TensorList{at::reshape(in[0], c.output_shape())};
  };
  t["reshape"] = OpImpl{nullptr, to_output_shape};
  t["flatten"] = OpImpl{nullptr, to_output_shape};
  t["squeeze"] = OpImpl{nullptr, [](const NodeContext& c, const TensorList& in) {
                          const auto& axes = c.ints("axes");
                          if (axes.empty()) return TensorList{at::squeeze(in[0])};
                          std::vector<int> dims;
                          for (int64_t a : axes) dims.push_back(normalize_axis(a, in[0].dim()));
                          std::sort(dims.rbegin(), dims.rend());  // highest first keeps the rest valid
                          at::Tensor y = in[0];
                          for (int d : dims) y = at::squeeze(y, d);
                          return TensorList{y};
                        }};
  t["unsqueeze"] = OpImpl{nullptr, [](const NodeContext& c, const TensorList& in) {
                            const auto& axes = c.ints("axes");
                            const int64_t out_rank = in[0].dim() + static_cast<int64_t>(axes.size());
                            std::vector<int> dims;
                            for (int64_t a : axes) dims.push_back(normalize_axis(a, out_rank));
                            std::sort(dims.begin(), dims.end());  // lowest first: each is an output position
                            at::Tensor y = in[0];
                            for (int d : dims) y = at::unsqueeze(y, d);
                            return TensorList{y};
                          }};
  t["transpose"] = OpImpl{nullptr, [](const NodeContext& c, const TensorList& in) {
                            std::vector<int64_t> perm = c.ints("perm");
                            if (perm.empty())
                              for (int64_t d = in[0].dim() - 1; d >= 0; --d) perm.push_back(d);
                            return TensorList{at::permute(in[0], perm)};
                          }};
  t["slice"] = OpImpl{nullptr, [](const NodeContext& c, const TensorList& in) { return TensorList{onnx_slice(c, in[0])}; }};
  t["pad"] = OpImpl{nullptr, [](const NodeContext& c, const TensorList& in) { return TensorList{onnx_pad(c, in[0])}; }};
}

// ---- reduce --------------------------------------------------------------------------------------

std::vector<int64_t> reduced_dims(const NodeContext& c, int64_t rank) {
  std::vector<int64_t> dims;
  for (int64_t a : c.ints("axes")) dims.push_back(normalize_axis(a, rank));
  if (dims.empty()) {
    // ONNX: no axes reduces all of them. Spelled out, because an empty list means "no reduction"
    // in some ATen overloads and "all" in others.
    dims.resize(static_cast<size_t>(rank));
    std::iota(dims.begin(), dims.end(), 0);
  }
  std::sort(dims.begin(), dims.end());
  return dims;
}

void add_reduce(OpTable& t) {
  using Reducer = at::Tensor (*)(const at::Tensor&, at::IntArrayRef, bool);
  auto reduce = [&t](const std::string& name, Reducer f) {
    t[name] = OpImpl{nullptr, [f](const NodeContext& c, const TensorList& in) {
                       const at::Tensor& x = in[0];
                       if (x.dim() == 0) return TensorList{x.clone()};
                       return TensorList{f(x, reduced_dims(c, x.dim()), c.i("keepdims") == 1)};
                     }};
  };
  reduce("reduce_sum", [](const at::Tensor& x, at::IntArrayRef d, bool k) { return at::sum(x, d, k); });
  reduce("reduce_mean", [](const at::Tensor& x, at::IntArrayRef d, bool k) { return at::mean(x, d, k); });
  reduce("reduce_max", [](const at::Tensor& x, at::IntArrayRef d, bool k) { return at::amax(x, d, k); });
  reduce("reduce_min", [](const at::Tensor& x, at::IntArrayRef d, bool k) { return at::amin(x, d, k); });
  // at::prod reduces one dim at a time: fold every axis with keepdim, then drop them if asked.
  reduce("reduce_prod", [](const at::Tensor& x, at::IntArrayRef d, bool k) {
    at::Tensor y = x;
    for (int64_t dim : d) y = at::prod(y, dim, true);
    if (k) return y;
    for (auto it = d.rbegin(); it != d.rend(); ++it) y = at::squeeze(y, *it);
    return y;
  });
}

// ---- softmax -------------------------------------------------------------------------------------

void add_softmax(OpTable& t) {
  t["softmax"] = OpImpl{nullptr, [](const NodeContext& c, const TensorList& in) {
                          return TensorList{at::softmax(in[0], c.i("axis"))};
                        }};
  t["log_softmax"] = OpImpl{nullptr, [](const NodeContext& c, const TensorList& in) {
                              return TensorList{at::log_softmax(in[0], c.i("axis"))};
                            }};
}

}  // namespace

void add_layout_ops(OpTable& t) {
  add_shape(t);
  add_reduce(t);
  add_softmax(t);
}

}  // namespace quorum::backends::torch
