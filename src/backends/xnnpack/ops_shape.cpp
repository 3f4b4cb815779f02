// Shape and data-movement operators, softmax, bilinear resize and reductions on XNNPACK:
//  - reshape/flatten/squeeze/unsqueeze: xnn_define_static_reshape; pad (constant):
//    xnn_define_static_constant_pad.
//  - softmax: XNNPACK normalises over the innermost axis only: the last axis in the plain layout,
//    or axis 1 of a rank-3/4 value stored channels-last.
//  - resize_bilinear: xnn_define_static_resize_bilinear_2d; its default grid is ONNX half_pixel,
//    XNN_FLAG_ALIGN_CORNERS align_corners, XNN_FLAG_TENSORFLOW_LEGACY_MODE asymmetric.
//  - reduce_mean/sum/max/min over one contiguous block of axes: the value is reshaped to
//    [outer, reduced, 1, inner] (NHWC) and pooled: global average pooling (times the count for a
//    sum) or a (reduced x 1) max pooling (min = -max(-x)). mse_loss is squared_difference followed
//    by the same mean.
//  - concat: the subgraph API of 2022-02 has no concatenation; it runs as its own step on the
//    operator API, one strided xnn_copy_nc_x32 per input.
#include <algorithm>
#include <limits>
#include <numeric>

#include "backends/xnnpack/xnnpack_common.h"
#include "ops/kernel_util.h"

namespace quorum::backends::xnnpack {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

size_t prod(const Shape& s, size_t from, size_t to) {
  size_t p = 1;
  for (size_t i = from; i < to; ++i) p *= static_cast<size_t>(s[i]);
  return p;
}

// ---- reshape family ----

void define_reshape(NodeCtx& c) {
  const uint32_t x = c.input(0);
  const Dims d = xnn_dims(c.out_shape(), Layout::Plain);
  c.check(xnn_define_static_reshape(c.subgraph(), d.size(), d.data(), x, c.output(), 0), "xnn_define_static_reshape");
}

// ---- pad ----

Support pad_supports(const ir::Graph&, const ir::Node& n) {
  if (core::attr_s(n.attrs, "mode") != "constant")
    return Support::no("XNNPACK 2022-02 pads only with a constant ('" + core::attr_s(n.attrs, "mode") +
                       "' padding has no operator)");
  return Support::yes();
}

void define_pad(NodeCtx& c) {
  const auto& pads = core::attr_ints(c.attrs(), "pads");
  const size_t r = c.in_shape(0).size();
  Dims pre(r), post(r);
  for (size_t i = 0; i < r; ++i) {
    pre[i] = static_cast<size_t>(pads[i]);
    post[i] = static_cast<size_t>(pads[r + i]);
  }
  const uint32_t x = c.input(0);
  c.check(xnn_define_static_constant_pad(c.subgraph(), pre.data(), post.data(),
                                         static_cast<float>(core::attr_f(c.attrs(), "value")), x, c.output(), 0),
          "xnn_define_static_constant_pad");
}

// ---- softmax ----

Support softmax_supports(const ir::Graph& g, const ir::Node& n) {
  const size_t r = g.types.at(n.inputs[0]).shape.size();
  const int axis = ops::norm_axis(core::attr_i(n.attrs, "axis"), static_cast<int>(r));
  if (axis == static_cast<int>(r) - 1 || (axis == 1 && (r == 3 || r == 4))) return Support::yes();
  return Support::no("XNNPACK softmax normalises over the innermost axis; axis " + std::to_string(axis) + " of rank " +
                     std::to_string(r) + " is neither last nor the channel axis of a channels-last value");
}

Layout softmax_layout(const ir::Graph& g, const ir::Node& n, std::optional<Layout>) {
  const size_t r = g.types.at(n.inputs[0]).shape.size();
  return ops::norm_axis(core::attr_i(n.attrs, "axis"), static_cast<int>(r)) == static_cast<int>(r) - 1 ? Layout::Plain
                                                                                 : Layout::ChannelsLast;
}

void define_softmax(NodeCtx& c) {
  const uint32_t x = c.input(0);
  c.check(xnn_define_softmax(c.subgraph(), x, c.output(), 0), "xnn_define_softmax");
}

// ---- resize_bilinear ----

Support resize_supports(const ir::Graph& g, const ir::Node& n) {
  const Shape& x = g.types.at(n.inputs[0]).shape;
  const Shape& y = g.types.at(n.outputs[0]).shape;
  const std::string& mode = core::attr_s(n.attrs, "coordinate_transformation_mode");
  if (mode == "pytorch_half_pixel")
    for (size_t i = 2; i < 4; ++i)
      if (y[i] == 1 && x[i] > 1)
        return Support::no("pytorch_half_pixel samples 0 for an output size of 1; XNNPACK's half-pixel grid samples "
                           "the centre");
  return Support::yes();
}

void define_resize(NodeCtx& c) {
  const std::string& mode = core::attr_s(c.attrs(), "coordinate_transformation_mode");
  const uint32_t flags = mode == "align_corners" ? XNN_FLAG_ALIGN_CORNERS
                         : mode == "asymmetric"  ? XNN_FLAG_TENSORFLOW_LEGACY_MODE
                                                 : 0;  // half_pixel, pytorch_half_pixel
  const Shape& y = c.out_shape();
  const uint32_t x = c.input(0);
  c.check(xnn_define_static_resize_bilinear_2d(c.subgraph(), static_cast<size_t>(y[2]), static_cast<size_t>(y[3]), x,
                                               c.output(), flags),
          "xnn_define_static_resize_bilinear_2d");
}

// ---- reductions ----

struct Block {
  size_t outer = 1, reduced = 1, inner = 1;
};

// The reduced axes as one contiguous block, or nullopt.
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

Support reduce_supports(const ir::Graph& g, const ir::Node& n, bool is_max) {
  const auto b = reduce_block(g.types.at(n.inputs[0]).shape, core::attr_ints(n.attrs, "axes"));
  if (!b) return Support::no("XNNPACK pools one contiguous block of axes; these reduced axes are not contiguous");
  if (is_max && b->reduced == 1)
    return Support::no("a max/min over one element would be a 1x1 max pooling, which XNNPACK 2022-02 refuses");
  return Support::yes();
}

// Pools `x` (any dims, plain) over the block; writes `out` with dims `out_dims`.
void define_block_pool(NodeCtx& c, uint32_t x, const Block& b, bool is_max, uint32_t out, const Dims& out_dims) {
  const uint32_t v = c.reshape(x, {b.outer, b.reduced, 1, b.inner});
  const uint32_t pooled = c.temp({b.outer, 1, 1, b.inner});
  if (is_max)
    c.check(xnn_define_max_pooling_2d(c.subgraph(), 0, 0, 0, 0, static_cast<uint32_t>(b.reduced), 1, 1, 1, 1, 1, -kInf,
                                      kInf, v, pooled, 0),
            "xnn_define_max_pooling_2d");
  else
    c.check(xnn_define_global_average_pooling_2d(c.subgraph(), -kInf, kInf, v, pooled, 0),
            "xnn_define_global_average_pooling_2d");
  c.check(xnn_define_static_reshape(c.subgraph(), out_dims.size(), out_dims.data(), pooled, out, 0),
          "xnn_define_static_reshape");
}

enum class Reduce { Mean, Sum, Max, Min };

void define_reduce(NodeCtx& c, Reduce kind) {
  const Block b = *reduce_block(c.in_shape(0), core::attr_ints(c.attrs(), "axes"));
  const Dims od = xnn_dims(c.out_shape(), Layout::Plain);
  uint32_t x = c.input(0);
  if (kind == Reduce::Min) {
    const uint32_t neg = c.temp(xnn_dims(c.in_shape(0), Layout::Plain));
    c.check(xnn_define_negate(c.subgraph(), x, neg, 0), "xnn_define_negate");
    x = neg;
  }
  if (kind == Reduce::Mean || kind == Reduce::Max) return define_block_pool(c, x, b, kind == Reduce::Max, c.output(), od);
  const uint32_t pooled = c.temp(od);
  define_block_pool(c, x, b, kind == Reduce::Min, pooled, od);
  if (kind == Reduce::Min)
    c.check(xnn_define_negate(c.subgraph(), pooled, c.output(), 0), "xnn_define_negate");
  else
    c.check(xnn_define_multiply2(c.subgraph(), -kInf, kInf, pooled, c.scalar(static_cast<float>(b.reduced)),
                                 c.output(), 0),
            "xnn_define_multiply2");
}

void define_mse(NodeCtx& c) {
  const uint32_t p = c.input(0), t = c.input(1);
  const Shape& s = c.in_shape(0);
  const uint32_t sq = c.temp(xnn_dims(s, Layout::Plain));
  c.check(xnn_define_squared_difference(c.subgraph(), p, t, sq, 0), "xnn_define_squared_difference");
  define_block_pool(c, sq, Block{1, static_cast<size_t>(core::numel(s)), 1}, false, c.output(),
                    xnn_dims(c.out_shape(), Layout::Plain));
}

Support mse_supports(const ir::Graph& g, const ir::Node& n) {
  if (g.types.at(n.inputs[0]).shape != g.types.at(n.inputs[1]).shape)
    return Support::no("mse_loss maps to squared_difference without broadcasting");
  return Support::yes();
}

// ---- concat (operator API) ----

class ConcatStep : public Step {
 public:
  ConcatStep(const ir::Graph& g, const ir::Node& n) : node_(n), out_shape_(g.types.at(n.outputs[0]).shape) {
    const size_t axis = ops::norm_axis(core::attr_i(n.attrs, "axis"), out_shape_.size());
    outer_ = prod(out_shape_, 0, axis);
    const size_t total = prod(out_shape_, axis, out_shape_.size());
    for (const auto& in : n.inputs) {
      const Shape& s = g.types.at(in).shape;
      const size_t inner = prod(s, axis, s.size());
      xnn_operator_t op = nullptr;
      check_define(xnn_create_copy_nc_x32(inner, inner, total, 0, &op),
                   "node '" + n.name + "' (concat): xnn_create_copy_nc_x32");
      ops_.push_back(op);
      if (g.is_initializer(in)) constants_.emplace(in, g.initializers.at(in).to(core::DType::F32));
      offsets_.push_back(offset_);
      offset_ += inner;
    }
  }
  ~ConcatStep() override {
    for (xnn_operator_t op : ops_) xnn_delete_operator(op);
  }

  void run(ValueMap& values) override {
    core::Tensor y(core::DType::F32, out_shape_);
    for (size_t i = 0; i < ops_.size(); ++i) {
      const auto c = constants_.find(node_.inputs[i]);
      const core::Tensor& x = c != constants_.end() ? c->second : values.at(node_.inputs[i]);
      check_run(xnn_setup_copy_nc_x32(ops_[i], outer_, x.f32(), y.f32() + offsets_[i], nullptr),
                "xnn_setup_copy_nc_x32");
      check_run(xnn_run_operator(ops_[i], nullptr), "xnn_run_operator (copy_nc_x32)");
    }
    values.insert_or_assign(node_.outputs[0], std::move(y));
  }

 private:
  ir::Node node_;
  Shape out_shape_;
  size_t outer_ = 1, offset_ = 0;
  std::vector<xnn_operator_t> ops_;
  std::vector<size_t> offsets_;
  ValueMap constants_;  // inputs that are initializers
};

}  // namespace

void register_shape(OpTable& t) {
  for (const char* name : {"reshape", "flatten", "squeeze", "unsqueeze"})
    t[name] = OpEntry{{}, plain_layout, define_reshape, {}};
  t["pad"] = OpEntry{pad_supports, plain_layout, define_pad, {}};
  t["softmax"] = OpEntry{softmax_supports, softmax_layout, define_softmax, {}};
  t["resize_bilinear"] = OpEntry{resize_supports, channels_last_layout, define_resize, {}};
  const std::map<std::string, Reduce> reductions{
      {"reduce_mean", Reduce::Mean}, {"reduce_sum", Reduce::Sum}, {"reduce_max", Reduce::Max}, {"reduce_min", Reduce::Min}};
  for (const auto& [name, kind] : reductions) {
    const Reduce k = kind;
    const bool is_max = k == Reduce::Max || k == Reduce::Min;
    t[name] = OpEntry{[is_max](const ir::Graph& g, const ir::Node& n) { return reduce_supports(g, n, is_max); },
                      plain_layout, [k](NodeCtx& c) { define_reduce(c, k); }, {}};
  }
  t["mse_loss"] = OpEntry{mse_supports, plain_layout, define_mse, {}};
  t["concat"] = OpEntry{{}, {}, {}, [](const ir::Graph& g, const ir::Node& n, ConstantStore&) -> std::unique_ptr<Step> {
                          return std::make_unique<ConcatStep>(g, n);
                        }};
}

}  // namespace quorum::backends::xnnpack
