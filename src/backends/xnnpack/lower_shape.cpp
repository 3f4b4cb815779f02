// Shape and data-movement operators, softmax, bilinear resize and reductions on XNNPACK (part of
// the lowering: no XNNPACK header):
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
//  - concat: the subgraph API of 2022-02 has no concatenation; it runs between segments on the
//    operator API, one strided xnn_copy_nc_x32 per input.
#include <algorithm>
#include <limits>
#include <numeric>

#include "backends/xnnpack/lower_ops.h"
#include "ops/kernel_util.h"

namespace quorum::backends::xnnpack {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// ---- reshape family ----

void define_reshape(NodeLowering& c) {
  const ValueId x = c.input(0);
  c.sink.static_reshape(xnn_dims(c.out_shape(), Layout::Plain), x, c.output());
}

// ---- pad ----

Support pad_supports(const ir::Graph&, const ir::Node& n) {
  if (core::attr_s(n.attrs, "mode") != "constant")
    return Support::no("XNNPACK 2022-02 pads only with a constant ('" + core::attr_s(n.attrs, "mode") +
                       "' padding has no operator)");
  return Support::yes();
}

void define_pad(NodeLowering& c) {
  const auto& pads = core::attr_ints(c.attrs(), "pads");
  const size_t r = c.in_shape(0).size();
  Dims pre(r), post(r);
  for (size_t i = 0; i < r; ++i) {
    pre[i] = static_cast<size_t>(pads[i]);
    post[i] = static_cast<size_t>(pads[r + i]);
  }
  const ValueId x = c.input(0);
  c.sink.static_constant_pad(pre, post, c.attr_float("value"), x, c.output());
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
  return ops::norm_axis(core::attr_i(n.attrs, "axis"), static_cast<int>(r)) == static_cast<int>(r) - 1
             ? Layout::Plain
             : Layout::ChannelsLast;
}

void define_softmax(NodeLowering& c) {
  const ValueId x = c.input(0);
  c.sink.softmax(x, c.output());
}

// ---- resize_bilinear ----

Support resize_supports(const ir::Graph& g, const ir::Node& n) {
  const Shape& x = g.types.at(n.inputs[0]).shape;
  const Shape& y = g.types.at(n.outputs[0]).shape;
  const std::string& mode = core::attr_s(n.attrs, "coordinate_transformation_mode");
  for (size_t i = 0; i < 2; ++i)
    if (ops::resize_scale_matters(n.attrs, i, x[i + 2], y[i + 2]))
      return Support::no("xnn_define_static_resize_bilinear_2d takes the output size only (its coordinate scale is "
                         "in/out); the given scale " +
                         core::to_string(core::AttrValue(ops::resize_given_scale(n.attrs, i))) + " is not " +
                         std::to_string(y[i + 2]) + "/" + std::to_string(x[i + 2]));
  if (mode == "tf_crop_and_resize")
    return Support::no("xnn_define_static_resize_bilinear_2d has no crop (tf_crop_and_resize: roi, "
                       "extrapolation_value)");
  if (mode == "pytorch_half_pixel")
    for (size_t i = 2; i < 4; ++i)
      if (y[i] == 1 && x[i] > 1)
        return Support::no(
            "pytorch_half_pixel samples 0 for an output size of 1; XNNPACK's half-pixel grid samples "
            "the centre");
  return Support::yes();
}

void define_resize(NodeLowering& c) {
  const std::string& mode = core::attr_s(c.attrs(), "coordinate_transformation_mode");
  const uint32_t flags = mode == "align_corners" ? uint32_t{kAlignCorners}
                         : mode == "asymmetric"  ? uint32_t{kTensorflowLegacyMode}
                                                 : 0;  // half_pixel, pytorch_half_pixel
  const Shape& y = c.out_shape();
  const ValueId x = c.input(0);
  c.sink.static_resize_bilinear_2d(static_cast<size_t>(y[2]), static_cast<size_t>(y[3]), x, c.output(), flags);
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
void define_block_pool(NodeLowering& c, ValueId x, const Block& b, bool is_max, ValueId out, const Dims& out_dims) {
  const ValueId v = c.reshape(x, {b.outer, b.reduced, 1, b.inner});
  const ValueId pooled = c.temp({b.outer, 1, 1, b.inner});
  if (is_max) {
    Window2d w;  // the reduced block, unpadded
    w.kh = static_cast<uint32_t>(b.reduced);
    w.attribute_window = false;
    c.sink.max_pooling_2d(w, v, pooled);
  } else {
    c.sink.global_average_pooling_2d(v, pooled);
  }
  c.sink.static_reshape(out_dims, pooled, out);
}

enum class Reduce { Mean, Sum, Max, Min };

void define_reduce(NodeLowering& c, Reduce kind) {
  const Block b = *reduce_block(c.in_shape(0), core::attr_ints(c.attrs(), "axes"));
  const Dims od = xnn_dims(c.out_shape(), Layout::Plain);
  const bool is_max = kind == Reduce::Max || kind == Reduce::Min;
  ValueId x = c.input(0);
  if (kind == Reduce::Min) {
    const ValueId neg = c.temp(xnn_dims(c.in_shape(0), Layout::Plain));
    c.sink.unary(Unary::Negate, x, neg);
    x = neg;
  }
  if (kind == Reduce::Mean || kind == Reduce::Max) {
    const ValueId y = c.output();
    return define_block_pool(c, x, b, is_max, y, od);
  }
  const ValueId pooled = c.temp(od);
  define_block_pool(c, x, b, is_max, pooled, od);
  if (kind == Reduce::Min) return c.sink.unary(Unary::Negate, pooled, c.output());
  const ValueId count = c.scalar(static_cast<float>(b.reduced));
  c.sink.arithmetic(Arithmetic::Multiply, -kInf, kInf, pooled, count, c.output());
}

void define_mse(NodeLowering& c) {
  const ValueId p = c.input(0), t = c.input(1);
  const Shape& s = c.in_shape(0);
  const ValueId sq = c.temp(xnn_dims(s, Layout::Plain));
  c.sink.binary(Binary::SquaredDifference, p, t, sq);
  const ValueId y = c.output();
  define_block_pool(c, sq, Block{1, static_cast<size_t>(core::numel(s)), 1}, false, y,
                    xnn_dims(c.out_shape(), Layout::Plain));
}

Support mse_supports(const ir::Graph& g, const ir::Node& n) {
  if (g.types.at(n.inputs[0]).shape != g.types.at(n.inputs[1]).shape)
    return Support::no("mse_loss maps to squared_difference without broadcasting");
  return Support::yes();
}

// ---- concat (operator API) ----

void host_concat(const ir::Graph& g, const ir::Node& n, Sink& sink) {
  Concat c;
  c.output = n.outputs[0];
  c.shape = g.types.at(c.output).shape;
  const size_t axis = ops::norm_axis(core::attr_i(n.attrs, "axis"), c.shape.size());
  c.batch = prod(c.shape, 0, axis);
  c.stride = prod(c.shape, axis, c.shape.size());
  size_t offset = 0;
  for (const auto& in : n.inputs) {
    const Shape& s = g.types.at(in).shape;
    ConcatCopy k;
    k.value = in;
    if (g.is_initializer(in)) k.data = f32_values(g.initializers.at(in));
    k.channels = prod(s, axis, s.size());
    k.offset = offset;
    offset += k.channels;
    c.copies.push_back(std::move(k));
  }
  sink.concat(n, c);
}

}  // namespace

void register_shape(OpTable& t) {
  for (const char* name : {"reshape", "flatten", "squeeze", "unsqueeze"})
    t[name] = OpEntry{{}, plain_layout, define_reshape, {}};
  t["pad"] = OpEntry{pad_supports, plain_layout, define_pad, {}};
  t["softmax"] = OpEntry{softmax_supports, softmax_layout, define_softmax, {}};
  t["resize_bilinear"] = OpEntry{resize_supports, channels_last_layout, define_resize, {}};
  const std::map<std::string, Reduce> reductions{{"reduce_mean", Reduce::Mean},
                                                 {"reduce_sum", Reduce::Sum},
                                                 {"reduce_max", Reduce::Max},
                                                 {"reduce_min", Reduce::Min}};
  for (const auto& [name, kind] : reductions) {
    const Reduce k = kind;
    const bool is_max = k == Reduce::Max || k == Reduce::Min;
    t[name] = OpEntry{[is_max](const ir::Graph& g, const ir::Node& n) { return reduce_supports(g, n, is_max); },
                      plain_layout,
                      [k](NodeLowering& c) { define_reduce(c, k); },
                      {}};
  }
  t["mse_loss"] = OpEntry{mse_supports, plain_layout, define_mse, {}};
  t["concat"] = OpEntry{{}, {}, {}, host_concat};
}

}  // namespace quorum::backends::xnnpack
