// Convolutions, transposed convolution, window and global pools, and fully connected layers on
// XNNPACK's subgraph nodes (part of the lowering: no XNNPACK header). Quirks handled here:
//  - XNNPACK is NHWC with OHWI filters: the data runs channels-last, filters are permuted when the
//    model is lowered; 1-D operators run as 2-D ones with a height of 1.
//  - padding arguments are ordered top, right, bottom, left; dilation counts from 1.
//  - ONNX auto_pad SAME_UPPER is XNN_FLAG_TENSORFLOW_SAME_PADDING; SAME_LOWER and ceil_mode become
//    explicit padding (pools: extra bottom/right padding, just enough for the last window).
//    XNNPACK 2022-02 computes wrong convolutions and average pools with that flag when an axis
//    needs a negative total padding ((out - 1) * stride + kernel < in: the stride skips input
//    cells), see known_differences.json; those cases get explicit zero padding instead.
//  - average pooling with any padding divides by the cells inside the input (count_include_pad=0),
//    so count_include_pad=1 maps only where no window reaches into padding.
//  - a depthwise convolution (group == C > 1) uses xnn_define_depthwise_convolution_2d with a
//    [1, kH, kW, C*M] filter.
#include <algorithm>

#include "backends/xnnpack/lower_ops.h"
#include "ops/kernel_util.h"

namespace quorum::backends::xnnpack {
namespace {

struct Geometry {
  Window2d w;
  bool any_padding = false;  // explicit or SAME padding of some cell
};

// Geometry of a 1-D or 2-D window operator. `y` is the declared output's shape, used to size the
// end padding of ceil_mode pools.
Geometry window(const ir::Node& n, const Shape& x, const Shape& y, bool is_pool) {
  const core::Attrs& a = n.attrs;
  const size_t r = x.size() - 2;
  const auto& k = core::attr_ints(a, "kernel_shape");
  const auto& s = core::attr_ints(a, "strides");
  const auto& pads = core::attr_ints(a, "pads");
  const std::vector<int64_t> d = a.count("dilations") ? core::attr_ints(a, "dilations") : std::vector<int64_t>(r, 1);
  const std::string auto_pad = a.count("auto_pad") ? core::attr_s(a, "auto_pad") : "NOTSET";
  std::vector<int64_t> eff(r);
  for (size_t i = 0; i < r; ++i) eff[i] = d[i] * (k[i] - 1) + 1;
  const ops::Pads p = ops::resolve_pads(auto_pad, pads, x, eff, s);
  std::vector<int64_t> begin = p.begin, end = p.end;
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  bool same_overhang = false;  // some axis where SAME would need less than no padding (clamped to 0)
  for (size_t i = 0; i < r; ++i) {
    const int64_t in = x[i + 2], out = y[i + 2];
    // The last of the ceil(in / stride) windows ends before the input does.
    if (same) same_overhang = same_overhang || ((in + s[i] - 1) / s[i] - 1) * s[i] + eff[i] < in;
    // ceil_mode: room for the last window
    if (is_pool) end[i] = std::max(end[i], (out - 1) * s[i] + eff[i] - in - begin[i]);
  }
  Geometry g;
  Window2d& w = g.w;
  const size_t h = r == 2 ? 0 : r;  // index of the height axis, r (none) for 1-D
  const size_t wi = r - 1;
  auto u = [](int64_t v) { return static_cast<uint32_t>(v); };
  if (h != r) {
    w.kh = u(k[h]), w.sh = u(s[h]), w.dh = u(d[h]), w.top = u(begin[h]), w.bottom = u(end[h]);
  }
  w.kw = u(k[wi]), w.sw = u(s[wi]), w.dw = u(d[wi]), w.left = u(begin[wi]), w.right = u(end[wi]);
  g.any_padding = w.top + w.bottom + w.left + w.right > 0;
  if (auto_pad == "SAME_UPPER" && r == 2 && !same_overhang) {
    w.flags = kTensorflowSamePadding;  // XNNPACK computes the same padding itself
    w.top = w.right = w.bottom = w.left = 0;
  }
  return g;
}

}  // namespace

Window2d conv_window(const ir::Node& n, const Shape& x, const Shape& y) { return window(n, x, y, false).w; }

namespace {

Window2d node_window(const NodeLowering& c, bool is_pool) {
  return window(c.node, c.in_shape(0), c.out_shape(), is_pool).w;
}

ValueId optional_bias(NodeLowering& c, size_t index) {
  if (core::attr_i(c.attrs(), "bias") != 1) return kNoValue;
  std::vector<float> b = f32_values(c.weight(index));
  const size_t n = b.size();
  return c.constant(std::move(b), {n}, "bias '" + c.node.inputs[index] + "'");
}

// ---- convolution ----

Support conv_supports(const ir::Graph& g, const ir::Node& n) {
  if (!g.is_initializer(n.inputs.at(1)))
    return Support::no("XNNPACK 2022-02 convolutions need a static filter, '" + n.inputs[1] + "' is computed");
  return Support::yes();
}

void define_conv(NodeLowering& c) {
  const Window2d w = node_window(c, false);
  const Shape& x = c.in_shape(0);
  const core::Tensor& wt = c.weight(1);  // [OC, C/G, k...]
  const size_t oc = static_cast<size_t>(wt.shape()[0]), cg = static_cast<size_t>(wt.shape()[1]);
  const size_t ch = static_cast<size_t>(x[1]);
  const size_t groups = static_cast<size_t>(core::attr_i(c.attrs(), "group"));
  const size_t kh = w.kh, kw = w.kw, taps = kh * kw;
  const bool depthwise = groups == ch && groups > 1;
  std::vector<float> filter = xnn_filter(f32_values(wt), oc, cg, taps, depthwise);
  const ValueId x_id = c.input(0);
  const ValueId f_id = c.constant(std::move(filter), depthwise ? Dims{1, kh, kw, oc} : Dims{oc, kh, kw, cg},
                                  "filter '" + c.node.inputs[1] + "' " + (depthwise ? "[1, kH, kW, C*M]" : "OHWI"));
  const ValueId b_id = optional_bias(c, 2);
  const ValueId y_id = c.output();
  if (depthwise)
    c.sink.depthwise_convolution_2d(w, static_cast<uint32_t>(oc / ch), ch, x_id, f_id, b_id, y_id);
  else
    c.sink.convolution_2d(w, static_cast<uint32_t>(groups), cg, oc / groups, x_id, f_id, b_id, y_id);
}

// ---- transposed convolution ----

void define_deconv(NodeLowering& c) {
  const core::Attrs& a = c.attrs();
  const auto& k = core::attr_ints(a, "kernel_shape");
  const auto& s = core::attr_ints(a, "strides");
  const auto& d = core::attr_ints(a, "dilations");
  const auto& pads = core::attr_ints(a, "pads");  // [top, left, bottom, right]
  const auto& adj = core::attr_ints(a, "output_padding");
  const core::Tensor& wt = c.weight(1);  // [C, OC/G, kh, kw]
  const size_t ch = static_cast<size_t>(wt.shape()[0]), ocg = static_cast<size_t>(wt.shape()[1]);
  const size_t groups = static_cast<size_t>(core::attr_i(a, "group"));
  const size_t cg = ch / groups, oc = ocg * groups;
  const size_t kh = static_cast<size_t>(k[0]), kw = static_cast<size_t>(k[1]), taps = kh * kw;
  // filter[g*OCg + o, i, j, ic] = W[g*Cg + ic, o, i, j]
  std::vector<float> filter(oc * taps * cg);
  const std::vector<float> src = f32_values(wt);
  for (size_t g = 0; g < groups; ++g)
    for (size_t ic = 0; ic < cg; ++ic)
      for (size_t o = 0; o < ocg; ++o)
        for (size_t t = 0; t < taps; ++t)
          filter[((g * ocg + o) * taps + t) * cg + ic] = src[((g * cg + ic) * ocg + o) * taps + t];
  auto u = [](int64_t v) { return static_cast<uint32_t>(v); };
  Window2d w;
  w.top = u(pads[0]), w.right = u(pads[3]), w.bottom = u(pads[2]), w.left = u(pads[1]);
  w.kh = u(k[0]), w.kw = u(k[1]), w.sh = u(s[0]), w.sw = u(s[1]), w.dh = u(d[0]), w.dw = u(d[1]);
  const ValueId x_id = c.input(0);
  const ValueId f_id = c.constant(std::move(filter), {oc, kh, kw, cg}, "filter '" + c.node.inputs[1] + "' OHWI");
  const ValueId b_id = optional_bias(c, 2);
  const ValueId y_id = c.output();
  c.sink.deconvolution_2d(w, u(adj[0]), u(adj[1]), static_cast<uint32_t>(groups), cg, ocg, x_id, f_id, b_id, y_id);
}

Support deconv_supports(const ir::Graph& g, const ir::Node& n) {
  const Support s = conv_supports(g, n);
  if (!s.ok) return s;
  const auto& adj = core::attr_ints(n.attrs, "output_padding");
  const auto& st = core::attr_ints(n.attrs, "strides");
  for (size_t i = 0; i < 2; ++i)
    if (adj[i] >= st[i])
      return Support::no(
          "XNNPACK deconvolution needs output adjustment < stride (xnn_setup_runtime refuses it), ONNX "
          "output_padding " +
          std::to_string(adj[i]) + " >= stride " + std::to_string(st[i]));
  return Support::yes();
}

// ---- pools ----

Support pool_supports(const ir::Graph& g, const ir::Node& n, bool is_max) {
  const Shape& x = g.types.at(n.inputs[0]).shape;
  const Geometry geo = window(n, x, g.types.at(n.outputs[0]).shape, true);
  if (geo.w.kh * geo.w.kw == 1)
    return Support::no("XNNPACK 2022-02 refuses 1x1 pooling windows (xnn_status_invalid_parameter)");
  if (!is_max && core::attr_i(n.attrs, "count_include_pad") == 1 && geo.any_padding)
    return Support::no(
        "XNNPACK average pooling divides by the cells inside the input; count_include_pad=1 with padding differs");
  return Support::yes();
}

void define_pool(NodeLowering& c, bool is_max) {
  const Window2d w = node_window(c, true);
  const ValueId x_id = c.input(0), y_id = c.output();
  if (is_max)
    c.sink.max_pooling_2d(w, x_id, y_id);
  else
    c.sink.average_pooling_2d(w, x_id, y_id);
}

Support global_supports(const ir::Graph& g, const ir::Node& n, bool is_max) {
  const Shape& x = g.types.at(n.inputs[0]).shape;
  if (x.size() > 4)
    return Support::no("XNNPACK 2022-02 has only 2-D pooling (input rank " + std::to_string(x.size()) + ")");
  if (is_max && core::numel(Shape(x.begin() + 2, x.end())) == 1)
    return Support::no("global max pool over one cell would be a 1x1 max pooling, which XNNPACK 2022-02 refuses");
  return Support::yes();
}

void define_global(NodeLowering& c, bool is_max) {
  const Shape& x = c.in_shape(0);
  const ValueId x_id = c.input(0), y_id = c.output();
  if (!is_max) return c.sink.global_average_pooling_2d(x_id, y_id);
  Window2d w;  // the whole spatial extent, unpadded
  w.kh = x.size() == 4 ? static_cast<uint32_t>(x[2]) : 1;
  w.kw = static_cast<uint32_t>(x.back());
  w.attribute_window = false;
  c.sink.max_pooling_2d(w, x_id, y_id);
}

// ---- fully connected ----

// A rank-2 weight as a fully-connected filter: dense's [units, in], or matmul's [K, N] with
// XNN_FLAG_TRANSPOSE_WEIGHTS.
ValueId fc_filter(NodeLowering& c, const std::string& layout) {
  const core::Tensor& wt = c.weight(1);
  const Dims d{static_cast<size_t>(wt.shape()[0]), static_cast<size_t>(wt.shape()[1])};
  return c.constant(f32_values(wt), d, "filter '" + c.node.inputs[1] + "' " + layout);
}

void define_dense(NodeLowering& c) {
  const ValueId x_id = c.input(0);
  const ValueId f_id = fc_filter(c, "[units, in]");
  const ValueId b_id = optional_bias(c, 2);
  c.sink.fully_connected(x_id, f_id, b_id, c.output(), 0);
}

Support matmul_supports(const ir::Graph& g, const ir::Node& n) {
  const std::string& b = n.inputs.at(1);
  if (!g.is_initializer(b) || g.types.at(b).shape.size() != 2)
    return Support::no(
        "XNNPACK 2022-02 has no batch matrix multiply; only a static rank-2 right operand maps (fully connected)");
  return Support::yes();
}

void define_matmul(NodeLowering& c) {
  const ValueId x_id = c.input(0);
  const ValueId f_id = fc_filter(c, "[K, N] (transposed weights)");
  c.sink.fully_connected(x_id, f_id, kNoValue, c.output(), kTransposeWeights);
}

}  // namespace

void register_conv_pool(OpTable& t) {
  for (const char* name : {"conv1d", "conv2d"}) t[name] = OpEntry{conv_supports, channels_last_layout, define_conv, {}};
  t["conv3d"] =
      OpEntry{[](const ir::Graph&, const ir::Node&) { return Support::no("XNNPACK 2022-02 has no 3-D convolution"); },
              {},
              {},
              {}};
  t["conv_transpose2d"] = OpEntry{deconv_supports, channels_last_layout, define_deconv, {}};
  for (const bool is_max : {true, false}) {
    const std::string kind = is_max ? "max" : "avg";
    auto sup = [is_max](const ir::Graph& g, const ir::Node& n) { return pool_supports(g, n, is_max); };
    auto def = [is_max](NodeLowering& c) { define_pool(c, is_max); };
    t[kind + "_pool1d"] = OpEntry{sup, channels_last_layout, def, {}};
    t[kind + "_pool2d"] = OpEntry{sup, channels_last_layout, def, {}};
    t["global_" + kind + "_pool"] =
        OpEntry{[is_max](const ir::Graph& g, const ir::Node& n) { return global_supports(g, n, is_max); },
                channels_last_layout,
                [is_max](NodeLowering& c) { define_global(c, is_max); },
                {}};
  }
  t["dense"] = OpEntry{{}, plain_layout, define_dense, {}};
  t["matmul"] = OpEntry{matmul_supports, plain_layout, define_matmul, {}};
}

}  // namespace quorum::backends::xnnpack
