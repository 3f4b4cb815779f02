// Convolutions, transposed convolution, window and global pools, and fully connected layers on
// XNNPACK's subgraph nodes. Quirks handled here:
//  - XNNPACK is NHWC with OHWI filters: the data runs channels-last, filters are permuted when the
//    model is compiled; 1-D operators run as 2-D ones with a height of 1.
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
#include <limits>

#include "backends/xnnpack/xnnpack_common.h"
#include "ops/kernel_util.h"

namespace quorum::backends::xnnpack {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Window {
  uint32_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  uint32_t top = 0, right = 0, bottom = 0, left = 0;
  uint32_t flags = 0;
  bool any_padding = false;  // explicit or SAME padding of some cell
};

// Geometry of a 1-D or 2-D window operator. `out` is the declared output's spatial extent, used to
// size the end padding of ceil_mode pools.
Window window(const ir::Node& n, const Shape& x, const Shape& y, bool is_pool) {
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
  Window w;
  const size_t h = r == 2 ? 0 : r;  // index of the height axis, r (none) for 1-D
  const size_t wi = r - 1;
  auto u = [](int64_t v) { return static_cast<uint32_t>(v); };
  if (h != r) {
    w.kh = u(k[h]), w.sh = u(s[h]), w.dh = u(d[h]), w.top = u(begin[h]), w.bottom = u(end[h]);
  }
  w.kw = u(k[wi]), w.sw = u(s[wi]), w.dw = u(d[wi]), w.left = u(begin[wi]), w.right = u(end[wi]);
  w.any_padding = w.top + w.bottom + w.left + w.right > 0;
  if (auto_pad == "SAME_UPPER" && r == 2 && !same_overhang) {
    w.flags = XNN_FLAG_TENSORFLOW_SAME_PADDING;  // XNNPACK computes the same padding itself
    w.top = w.right = w.bottom = w.left = 0;
  }
  return w;
}

Window node_window(const NodeCtx& c, bool is_pool) { return window(c.node, c.in_shape(0), c.out_shape(), is_pool); }

uint32_t optional_bias(NodeCtx& c, size_t index) {
  if (core::attr_i(c.attrs(), "bias") != 1) return XNN_INVALID_VALUE_ID;
  const core::Tensor& b = c.weight(index);
  return c.constant(std::vector<float>(b.f32(), b.f32() + b.numel()), {static_cast<size_t>(b.numel())});
}

// ---- convolution ----

Support conv_supports(const ir::Graph& g, const ir::Node& n) {
  if (!g.is_initializer(n.inputs.at(1)))
    return Support::no("XNNPACK 2022-02 convolutions need a static filter, '" + n.inputs[1] + "' is computed");
  return Support::yes();
}

void define_conv(NodeCtx& c) {
  const Window w = node_window(c, false);
  const Shape& x = c.in_shape(0);
  const core::Tensor& wt = c.weight(1);  // [OC, C/G, k...]
  const size_t oc = static_cast<size_t>(wt.shape()[0]), cg = static_cast<size_t>(wt.shape()[1]);
  const size_t ch = static_cast<size_t>(x[1]);
  const size_t groups = static_cast<size_t>(core::attr_i(c.attrs(), "group"));
  const size_t kh = w.kh, kw = w.kw, taps = kh * kw;
  const float* src = wt.f32();
  const bool depthwise = groups == ch && groups > 1;
  std::vector<float> filter(oc * taps * cg);
  // ONNX [OC, Cg, kh, kw] -> OHWI [OC, kh, kw, Cg]; depthwise [1, kh, kw, OC] (Cg = 1).
  for (size_t o = 0; o < oc; ++o)
    for (size_t i = 0; i < cg; ++i)
      for (size_t t = 0; t < taps; ++t) {
        const float v = src[(o * cg + i) * taps + t];
        if (depthwise)
          filter[t * oc + o] = v;
        else
          filter[(o * taps + t) * cg + i] = v;
      }
  const uint32_t x_id = c.input(0);
  const uint32_t f_id = c.constant(std::move(filter), depthwise ? Dims{1, kh, kw, oc} : Dims{oc, kh, kw, cg});
  const uint32_t b_id = optional_bias(c, 2);
  const uint32_t y_id = c.output();
  if (depthwise) {
    c.check(xnn_define_depthwise_convolution_2d(c.subgraph(), w.top, w.right, w.bottom, w.left, w.kh, w.kw, w.sh,
                                                w.sw, w.dh, w.dw, static_cast<uint32_t>(oc / ch), ch, -kInf, kInf,
                                                x_id, f_id, b_id, y_id, w.flags),
            "xnn_define_depthwise_convolution_2d");
  } else {
    c.check(xnn_define_convolution_2d(c.subgraph(), w.top, w.right, w.bottom, w.left, w.kh, w.kw, w.sh, w.sw, w.dh,
                                      w.dw, static_cast<uint32_t>(groups), cg, oc / groups, -kInf, kInf, x_id, f_id,
                                      b_id, y_id, w.flags),
            "xnn_define_convolution_2d");
  }
}

// ---- transposed convolution ----

void define_deconv(NodeCtx& c) {
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
  const float* src = wt.f32();
  for (size_t g = 0; g < groups; ++g)
    for (size_t ic = 0; ic < cg; ++ic)
      for (size_t o = 0; o < ocg; ++o)
        for (size_t t = 0; t < taps; ++t)
          filter[((g * ocg + o) * taps + t) * cg + ic] = src[((g * cg + ic) * ocg + o) * taps + t];
  auto u = [](int64_t v) { return static_cast<uint32_t>(v); };
  const uint32_t x_id = c.input(0);
  const uint32_t f_id = c.constant(std::move(filter), {oc, kh, kw, cg});
  const uint32_t b_id = optional_bias(c, 2);
  const uint32_t y_id = c.output();
  c.check(xnn_define_deconvolution_2d(c.subgraph(), u(pads[0]), u(pads[3]), u(pads[2]), u(pads[1]), u(adj[0]),
                                      u(adj[1]), u(k[0]), u(k[1]), u(s[0]), u(s[1]), u(d[0]), u(d[1]),
                                      static_cast<uint32_t>(groups), cg, ocg, -kInf, kInf, x_id, f_id, b_id, y_id, 0),
          "xnn_define_deconvolution_2d");
}

Support deconv_supports(const ir::Graph& g, const ir::Node& n) {
  const Support s = conv_supports(g, n);
  if (!s.ok) return s;
  const auto& adj = core::attr_ints(n.attrs, "output_padding");
  const auto& st = core::attr_ints(n.attrs, "strides");
  for (size_t i = 0; i < 2; ++i)
    if (adj[i] >= st[i])
      return Support::no("XNNPACK deconvolution needs output adjustment < stride (xnn_setup_runtime refuses it), ONNX "
                         "output_padding " + std::to_string(adj[i]) + " >= stride " + std::to_string(st[i]));
  return Support::yes();
}

// ---- pools ----

Support pool_supports(const ir::Graph& g, const ir::Node& n, bool is_max) {
  const Shape& x = g.types.at(n.inputs[0]).shape;
  const Window w = window(n, x, g.types.at(n.outputs[0]).shape, true);
  if (w.kh * w.kw == 1) return Support::no("XNNPACK 2022-02 refuses 1x1 pooling windows (xnn_status_invalid_parameter)");
  if (!is_max && core::attr_i(n.attrs, "count_include_pad") == 1 && w.any_padding)
    return Support::no(
        "XNNPACK average pooling divides by the cells inside the input; count_include_pad=1 with padding differs");
  return Support::yes();
}

void define_pool(NodeCtx& c, bool is_max) {
  const Window w = node_window(c, true);
  const uint32_t x_id = c.input(0), y_id = c.output();
  if (is_max)
    c.check(xnn_define_max_pooling_2d(c.subgraph(), w.top, w.right, w.bottom, w.left, w.kh, w.kw, w.sh, w.sw, 1, 1,
                                      -kInf, kInf, x_id, y_id, w.flags),
            "xnn_define_max_pooling_2d");
  else
    c.check(xnn_define_average_pooling_2d(c.subgraph(), w.top, w.right, w.bottom, w.left, w.kh, w.kw, w.sh, w.sw,
                                          -kInf, kInf, x_id, y_id, w.flags),
            "xnn_define_average_pooling_2d");
}

Support global_supports(const ir::Graph& g, const ir::Node& n, bool is_max) {
  const Shape& x = g.types.at(n.inputs[0]).shape;
  if (x.size() > 4) return Support::no("XNNPACK 2022-02 has only 2-D pooling (input rank " + std::to_string(x.size()) + ")");
  if (is_max && core::numel(Shape(x.begin() + 2, x.end())) == 1)
    return Support::no("global max pool over one cell would be a 1x1 max pooling, which XNNPACK 2022-02 refuses");
  return Support::yes();
}

void define_global(NodeCtx& c, bool is_max) {
  const Shape& x = c.in_shape(0);
  const uint32_t h = x.size() == 4 ? static_cast<uint32_t>(x[2]) : 1;
  const uint32_t w = static_cast<uint32_t>(x.back());
  const uint32_t x_id = c.input(0), y_id = c.output();
  if (is_max)
    c.check(xnn_define_max_pooling_2d(c.subgraph(), 0, 0, 0, 0, h, w, 1, 1, 1, 1, -kInf, kInf, x_id, y_id, 0),
            "xnn_define_max_pooling_2d");
  else
    c.check(xnn_define_global_average_pooling_2d(c.subgraph(), -kInf, kInf, x_id, y_id, 0),
            "xnn_define_global_average_pooling_2d");
}

// ---- fully connected ----

void define_dense(NodeCtx& c) {
  const core::Tensor& wt = c.weight(1);  // [units, in]
  const uint32_t x_id = c.input(0);
  const uint32_t f_id = c.constant(std::vector<float>(wt.f32(), wt.f32() + wt.numel()),
                                   {static_cast<size_t>(wt.shape()[0]), static_cast<size_t>(wt.shape()[1])});
  const uint32_t b_id = optional_bias(c, 2);
  c.check(xnn_define_fully_connected(c.subgraph(), -kInf, kInf, x_id, f_id, b_id, c.output(), 0),
          "xnn_define_fully_connected");
}

Support matmul_supports(const ir::Graph& g, const ir::Node& n) {
  const std::string& b = n.inputs.at(1);
  if (!g.is_initializer(b) || g.types.at(b).shape.size() != 2)
    return Support::no(
        "XNNPACK 2022-02 has no batch matrix multiply; only a static rank-2 right operand maps (fully connected)");
  return Support::yes();
}

void define_matmul(NodeCtx& c) {
  const core::Tensor& b = c.weight(1);  // [K, N]: a transposed fully-connected filter
  const uint32_t x_id = c.input(0);
  const uint32_t f_id = c.constant(std::vector<float>(b.f32(), b.f32() + b.numel()),
                                   {static_cast<size_t>(b.shape()[0]), static_cast<size_t>(b.shape()[1])});
  c.check(xnn_define_fully_connected(c.subgraph(), -kInf, kInf, x_id, f_id, XNN_INVALID_VALUE_ID, c.output(),
                                     XNN_FLAG_TRANSPOSE_WEIGHTS),
          "xnn_define_fully_connected");
}

}  // namespace

void register_conv_pool(OpTable& t) {
  for (const char* name : {"conv1d", "conv2d"}) t[name] = OpEntry{conv_supports, channels_last_layout, define_conv, {}};
  t["conv3d"] = OpEntry{[](const ir::Graph&, const ir::Node&) {
                          return Support::no("XNNPACK 2022-02 has no 3-D convolution");
                        },
                        {}, {}, {}};
  t["conv_transpose2d"] = OpEntry{deconv_supports, channels_last_layout, define_deconv, {}};
  for (const bool is_max : {true, false}) {
    const std::string kind = is_max ? "max" : "avg";
    auto sup = [is_max](const ir::Graph& g, const ir::Node& n) { return pool_supports(g, n, is_max); };
    auto def = [is_max](NodeCtx& c) { define_pool(c, is_max); };
    t[kind + "_pool1d"] = OpEntry{sup, channels_last_layout, def, {}};
    t[kind + "_pool2d"] = OpEntry{sup, channels_last_layout, def, {}};
    t["global_" + kind + "_pool"] =
        OpEntry{[is_max](const ir::Graph& g, const ir::Node& n) { return global_supports(g, n, is_max); },
                channels_last_layout, [is_max](NodeCtx& c) { define_global(c, is_max); }, {}};
  }
  t["dense"] = OpEntry{{}, plain_layout, define_dense, {}};
  t["matmul"] = OpEntry{matmul_supports, plain_layout, define_matmul, {}};
}

}  // namespace quorum::backends::xnnpack
