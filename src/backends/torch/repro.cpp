// libtorch's reproducer: repro.py, a PyTorch Python program (Debian python3-torch 1.13, the same
// library as Quorum's libtorch backend) that builds the finding's model node by node with the
// torch / torch.nn.functional calls Quorum's backend makes (src/backends/torch/torch_ops_*.cpp:
// same kernels, same attribute mapping, ONNX conventions resolved here into explicit arguments),
// with the inputs, weights, training target and expected values as .npy files beside it.
//
// The model is a Python function model(dtype, train) run twice: in the finding's dtype (float32)
// and in float64, the baseline PyTorch's bug template asks for. Every value is compared with
// Quorum's float64 reference (what the oracle judged; it decides the exit status, because some
// libtorch defects are in the float64 kernels too) and with torch's own float64 run (printed for
// the maintainer). Training findings (BC, LC) run one autograd step: inputs and weights are leaf
// tensors, node outputs retain their gradients, the catalogue loss of graph output 0 against the
// target is back-propagated, and the gradients of the blamed node's inputs and weights are
// compared. When Quorum cut a node out of a larger unreduced model for the case, a backward
// finding runs that whole model instead: the layout of the incoming gradient (a following
// transpose makes it non-contiguous) is part of some libtorch bugs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include "backends/repro.h"
#include "core/npy.h"
#include "ops/kernel_util.h"

namespace quorum::backends {

namespace {

using Ints = std::vector<int64_t>;
using Lines = std::vector<std::string>;

// ---- Python literals -------------------------------------------------------------------------------

// A float literal that stays a float in Python (2.0, not 2: torch picks kernels by Scalar kind).
std::string pf(double v) {
  std::string s = py_literal(v);
  for (int prec = 1; prec < 17 && std::isfinite(v); ++prec) {  // the shortest form that reads back exactly
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) {
      s = buf;
      break;
    }
  }
  if (s.find_first_of(".eEn(") == std::string::npos) s += ".0";
  return s;
}

std::string pi(const Ints& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string ps(const std::string& v) {
  std::string s = "'";
  for (char ch : v) {
    if (ch == '\'' || ch == '\\') s += '\\';
    s += ch;
  }
  return s + "'";
}

std::string pb(bool b) { return b ? "True" : "False"; }

// The catalogue's axis rule (ops::norm_axis; a scalar's axis 0 is itself), refused as a reproducer.
int checked_axis(int64_t axis, int64_t rank, const std::string& node) {
  if (rank == 0 && axis == 0) return 0;
  try {
    return ops::norm_axis(axis, static_cast<int>(rank));
  } catch (const core::OpError& e) {
    throw ReproUnsupported("node '" + node + "': " + e.what());
  }
}

// ONNX pads (begin per axis, end per axis) in at::constant_pad_nd / F.pad order: last axis first.
Ints torch_pad_order(const Ints& begin, const Ints& end) {
  Ints out;
  for (size_t i = begin.size(); i-- > 0;) {
    out.push_back(begin[i]);
    out.push_back(end[i]);
  }
  return out;
}

// ---- resize planning (src/backends/torch/torch_ops_spatial.cpp, resize_plan) -----------------------

enum class Kernel { None, Nearest, NearestExact, BilinearHalfPixel, BilinearAlignCorners, Any };
struct AxisChoice {
  Kernel kernel = Kernel::None;
  std::string why;
};

bool half_pixel_has_ties(int64_t in, int64_t out) {
  for (int64_t o = 0; o < out; ++o)
    if (((2 * o + 1) * in) % (2 * out) == 0) return true;
  return false;
}

AxisChoice nearest_axis(const std::string& ctm, const std::string& nm, int64_t in, int64_t out) {
  if (in == 1 || (in == out && ctm != "tf_half_pixel_for_nn")) return {Kernel::Any, ""};
  if ((ctm == "align_corners" || ctm == "pytorch_half_pixel") && out == 1) return {Kernel::Nearest, ""};
  if (ctm == "asymmetric") {
    if (nm == "floor") return {Kernel::Nearest, ""};
    return {Kernel::None, "libtorch's nearest upsampling rounds the asymmetric coordinate down only; nearest_mode '" +
                              nm + "' has no libtorch equivalent"};
  }
  if (ctm == "tf_half_pixel_for_nn") {
    if (nm == "floor") return {Kernel::NearestExact, ""};
    return {Kernel::None, "tf_half_pixel_for_nn with nearest_mode '" + nm + "' has no libtorch equivalent"};
  }
  if (ctm == "half_pixel" || ctm == "pytorch_half_pixel") {
    if (nm == "round_prefer_ceil") return {Kernel::NearestExact, ""};
    if (nm == "round_prefer_floor" && !half_pixel_has_ties(in, out)) return {Kernel::NearestExact, ""};
    if (nm == "round_prefer_floor")
      return {Kernel::None, "half_pixel with round_prefer_floor hits exact half-way coordinates for " + std::to_string(in) +
                                " -> " + std::to_string(out) + "; libtorch's nearest-exact rounds them up"};
    return {Kernel::None, ctm + " with nearest_mode '" + nm + "' has no libtorch equivalent (nearest-exact rounds)"};
  }
  return {Kernel::None, "libtorch's nearest upsampling has no '" + ctm + "' coordinate mode"};
}

AxisChoice bilinear_axis(const std::string& ctm, int64_t in, int64_t out) {
  if (in == 1) return {Kernel::Any, ""};
  if (ctm == "align_corners") return {Kernel::BilinearAlignCorners, ""};
  if (ctm == "half_pixel") return {Kernel::BilinearHalfPixel, ""};
  if (ctm == "pytorch_half_pixel") return {out > 1 ? Kernel::BilinearHalfPixel : Kernel::BilinearAlignCorners, ""};
  if (ctm == "asymmetric") {
    if (in == out) return {Kernel::Any, ""};
    if (out == 1) return {Kernel::BilinearAlignCorners, ""};
    return {Kernel::None, "libtorch's bilinear upsampling has no asymmetric (x / scale) coordinate mode"};
  }
  return {Kernel::None, "libtorch's bilinear upsampling has no '" + ctm + "' coordinate mode"};
}

std::string interpolate(Kernel k, const std::string& x, const Ints& size) {
  switch (k) {
    case Kernel::Nearest: return "F.interpolate(" + x + ", size=" + pi(size) + ", mode='nearest')";
    case Kernel::NearestExact: return "F.interpolate(" + x + ", size=" + pi(size) + ", mode='nearest-exact')";
    case Kernel::BilinearAlignCorners:
      return "F.interpolate(" + x + ", size=" + pi(size) + ", mode='bilinear', align_corners=True)";
    default: return "F.interpolate(" + x + ", size=" + pi(size) + ", mode='bilinear', align_corners=False)";
  }
}

// ---- helpers the generated program may need ---------------------------------------------------------

const std::map<std::string, std::string>& helper_source() {
  static const std::map<std::string, std::string> h = {
      {"crop_to", R"PY(def crop_to(y, shape):
    """Crops the spatial axes (from 2) to `shape`: ATen keeps ceil-mode windows starting in explicitly
    added right padding, ONNX drops them (Quorum's backend does the same crop)."""
    for d in range(2, y.dim()):
        if y.size(d) > shape[d]:
            y = y.narrow(d, 0, shape[d])
    return y
)PY"},
      {"catalogue_loss", R"PY(def catalogue_loss(name, p, t):
    """Quorum's catalogue losses as its torch backend computes them (catalogue_loss in torch_ops_network.cpp)."""
    if name == 'mse_loss':
        return F.mse_loss(p, t, reduction='mean')
    if name == 'binary_cross_entropy':
        return F.binary_cross_entropy(p, t, reduction='mean')
    if name == 'softmax_cross_entropy':  # class-probability targets [N, C]
        return F.cross_entropy(p, t, reduction='mean')
    if name == 'categorical_hinge':  # Keras: mean of max(0, max((1-t)*p) - sum(t*p) + 1)
        pos = torch.sum(torch.mul(t, p), [1])
        neg = torch.amax(torch.mul(torch.rsub(t, 1.0), p), [1])
        return torch.mean(torch.relu(torch.add(torch.sub(neg, pos), 1.0)))
    raise ValueError('unknown loss ' + name)
)PY"},
  };
  return h;
}

// ---- the per-node code -------------------------------------------------------------------------------

// Python statements computing `y` from the node's inputs x0, x1, ... (data inputs then weights).
Lines node_lines(const ir::Graph& g, const ir::Node& n, std::set<std::string>& helpers) {
  const std::string& op = n.op;
  const auto& a = n.attrs;
  auto I = [&](const char* k) { return core::attr_i(a, k); };
  auto Fl = [&](const char* k) { return core::attr_f(a, k); };
  auto S = [&](const char* k) { return core::attr_s(a, k); };
  auto Is = [&](const char* k) { return core::attr_ints(a, k); };
  const core::Shape& xs = g.types.at(n.inputs.at(0)).shape;
  const core::Shape& ys = g.types.at(n.outputs.at(0)).shape;
  const auto rank = static_cast<int64_t>(xs.size());
  auto x = [](size_t i) { return "x" + std::to_string(i); };
  auto one = [](const std::string& e) { return Lines{"y = " + e}; };

  static const std::map<std::string, std::string> plain = {
      {"abs", "torch.abs(x0)"},
      {"exp", "torch.exp(x0)"},
      {"log", "torch.log(x0)"},
      {"neg", "torch.neg(x0)"},
      {"reciprocal", "torch.reciprocal(x0)"},
      {"relu", "torch.relu(x0)"},
      {"relu6", "F.hardtanh(x0, 0.0, 6.0)"},
      {"rsqrt", "torch.rsqrt(x0)"},
      {"selu", "torch.selu(x0)"},
      {"sigmoid", "torch.sigmoid(x0)"},
      {"softplus", "F.softplus(x0, beta=1.0, threshold=20.0)"},
      {"softsign", "torch.div(x0, torch.add(torch.abs(x0), 1.0))"},  // F.softsign's formula
      {"sqrt", "torch.sqrt(x0)"},
      {"square", "torch.square(x0)"},
      {"tanh", "torch.tanh(x0)"},
      {"hardswish", "F.hardswish(x0)"},
      {"add", "torch.add(x0, x1)"},
      {"sub", "torch.sub(x0, x1)"},
      {"mul", "torch.mul(x0, x1)"},
      {"div", "torch.div(x0, x1)"},
      {"maximum", "torch.maximum(x0, x1)"},
      {"minimum", "torch.minimum(x0, x1)"},
      {"matmul", "torch.matmul(x0, x1)"},
  };
  if (auto it = plain.find(op); it != plain.end()) return one(it->second);

  if (op == "clip") return one("torch.clamp(x0, " + pf(Fl("min")) + ", " + pf(Fl("max")) + ")");
  if (op == "elu") return one("F.elu(x0, alpha=" + pf(Fl("alpha")) + ")");
  if (op == "leaky_relu") return one("F.leaky_relu(x0, negative_slope=" + pf(Fl("alpha")) + ")");
  if (op == "gelu") return one("F.gelu(x0, approximate=" + ps(S("approximate")) + ")");
  if (op == "pow") return one("torch.pow(x0, " + pf(Fl("exponent")) + ")");
  if (op == "hard_sigmoid") {
    const double alpha = Fl("alpha"), beta = Fl("beta");
    if (std::abs(alpha - 1.0 / 6.0) < 1e-12 && beta == 0.5) return one("F.hardsigmoid(x0)");
    return one("F.hardtanh(torch.add(torch.mul(x0, " + pf(alpha) + "), " + pf(beta) + "), 0.0, 1.0)  # ONNX slope/offset");
  }
  if (op == "sum") {
    std::string e = "torch.add(x0, x1)";
    for (size_t k = 2; k < n.inputs.size(); ++k) e = "torch.add(" + e + ", " + x(k) + ")";
    return one(e);
  }
  if (op == "concat") {
    std::string l = "[";
    for (size_t k = 0; k < n.inputs.size(); ++k) l += (k ? ", " : "") + x(k);
    return one("torch.cat(" + l + "], " + std::to_string(I("axis")) + ")");
  }

  // ---- shape
  if (op == "reshape" || op == "flatten") return one("torch.reshape(x0, " + pi(ys) + ")");
  if (op == "squeeze") {
    const Ints& axes = Is("axes");
    if (axes.empty()) return one("torch.squeeze(x0)");
    std::vector<int> dims;
    for (int64_t ax : axes) dims.push_back(checked_axis(ax, rank, n.name));
    std::sort(dims.rbegin(), dims.rend());
    std::string e = "x0";
    for (int d : dims) e = "torch.squeeze(" + e + ", " + std::to_string(d) + ")";
    return one(e);
  }
  if (op == "unsqueeze") {
    const Ints& axes = Is("axes");
    const int64_t out_rank = rank + static_cast<int64_t>(axes.size());
    std::vector<int> dims;
    for (int64_t ax : axes) dims.push_back(checked_axis(ax, out_rank, n.name));
    std::sort(dims.begin(), dims.end());
    std::string e = "x0";
    for (int d : dims) e = "torch.unsqueeze(" + e + ", " + std::to_string(d) + ")";
    return one(e);
  }
  if (op == "transpose") {
    Ints perm = Is("perm");
    if (perm.empty())
      for (int64_t d = rank - 1; d >= 0; --d) perm.push_back(d);
    return one("torch.permute(x0, " + pi(perm) + ")");
  }
  if (op == "slice") {
    const Ints &starts = Is("starts"), &ends = Is("ends"), &steps = Is("steps");
    Ints axes = Is("axes");
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    Lines l{"y = x0"};
    for (size_t i = 0; i < starts.size(); ++i) {
      const int d = checked_axis(axes[i], rank, n.name);
      const int64_t len = xs[static_cast<size_t>(d)];
      auto clampi = [len](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + len : v, 0, len); };
      std::string idx;
      for (int k = 0; k < d; ++k) idx += ":, ";
      idx += std::to_string(clampi(starts[i])) + ":" + std::to_string(clampi(ends[i])) + ":" +
             std::to_string(steps.empty() ? 1 : steps[i]);
      l.push_back("y = y[" + idx + "]  # at::slice along axis " + std::to_string(d));
    }
    return l;
  }
  if (op == "pad") {
    Ints pads = Is("pads");
    if (pads.empty()) pads.assign(static_cast<size_t>(2 * rank), 0);
    const Ints begin(pads.begin(), pads.begin() + rank), end(pads.begin() + rank, pads.end());
    const std::string mode = S("mode");
    if (mode == "constant") return one("torch.constant_pad_nd(x0, " + pi(torch_pad_order(begin, end)) + ", " + pf(Fl("value")) + ")");
    const std::string tmode = mode == "reflect" ? "'reflect'" : "'replicate'";
    int64_t first = rank;
    for (int64_t d = rank - 1; d >= 0; --d)
      if (begin[static_cast<size_t>(d)] != 0 || end[static_cast<size_t>(d)] != 0) first = d;
    if (first == rank) return one("x0.clone()  # nothing to pad");
    const int64_t k = rank - first;
    if (k <= 3) {
      // reflection_pad{k}d / replication_pad{k}d pad the trailing k axes of [N, C, ...]: the
      // leading axes are folded into the batch.
      Ints folded{-1, 1};
      for (int64_t d = first; d < rank; ++d) folded.push_back(xs[static_cast<size_t>(d)]);
      const Ints b(begin.begin() + first, begin.end()), e(end.begin() + first, end.end());
      return one("torch.reshape(F.pad(torch.reshape(x0, " + pi(folded) + "), " + pi(torch_pad_order(b, e)) +
                 ", mode=" + tmode + "), " + pi(ys) + ")");
    }
    Lines l{"y = x0  # padded one axis at a time (reflect/edge padding is separable)"};
    Ints cur(xs.begin(), xs.end());
    for (int64_t d = 0; d < rank; ++d) {
      const auto ud = static_cast<size_t>(d);
      if (begin[ud] == 0 && end[ud] == 0) continue;
      Ints moved = cur;
      moved.erase(moved.begin() + d);
      moved.push_back(cur[ud]);
      moved.back() += begin[ud] + end[ud];
      l.push_back("y = torch.reshape(F.pad(torch.reshape(y.movedim(" + std::to_string(d) + ", -1), [-1, 1, " +
                  std::to_string(cur[ud]) + "]), " + pi({begin[ud], end[ud]}) + ", mode=" + tmode + "), " + pi(moved) +
                  ").movedim(-1, " + std::to_string(d) + ")");
      cur[ud] += begin[ud] + end[ud];
    }
    return l;
  }

  // ---- reduce
  if (op.rfind("reduce_", 0) == 0) {
    if (rank == 0) return one("x0.clone()");
    Ints dims;
    for (int64_t ax : Is("axes")) dims.push_back(checked_axis(ax, rank, n.name));
    if (dims.empty())
      for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
    std::sort(dims.begin(), dims.end());
    const bool keep = I("keepdims") == 1;
    static const std::map<std::string, std::string> fns = {
        {"reduce_sum", "torch.sum"}, {"reduce_mean", "torch.mean"}, {"reduce_max", "torch.amax"}, {"reduce_min", "torch.amin"}};
    if (auto it = fns.find(op); it != fns.end())
      return one(it->second + "(x0, " + pi(dims) + ", keepdim=" + pb(keep) + ")");
    if (op == "reduce_prod") {
      Lines l{"y = x0  # torch.prod reduces one axis at a time"};
      for (int64_t d : dims) l.push_back("y = torch.prod(y, " + std::to_string(d) + ", keepdim=True)");
      if (!keep)
        for (auto it = dims.rbegin(); it != dims.rend(); ++it) l.push_back("y = torch.squeeze(y, " + std::to_string(*it) + ")");
      return l;
    }
  }
  if (op == "softmax") return one("torch.softmax(x0, " + std::to_string(I("axis")) + ")");
  if (op == "log_softmax") return one("torch.log_softmax(x0, " + std::to_string(I("axis")) + ")");

  // ---- dense / norm / rnn / loss
  if (op == "dense") return one(std::string("F.linear(x0, x1, ") + (I("bias") == 1 ? "x2" : "None") + ")");
  if (op == "batch_norm") {
    const std::string eps = pf(Fl("epsilon"));
    if (I("training") == 1)
      return one("torch.batch_norm(x0, x1, x2, None, None, True, 0.0, " + eps + ", False)  # batch statistics");
    Ints cshape(static_cast<size_t>(rank), 1);
    cshape[1] = xs[1];
    return {"y = torch.batch_norm(x0, x1, x2, x3.detach(), x4.detach(), False, 0.0, " + eps + ", False)",
            "if x3.requires_grad or x4.requires_grad:",
            "    # libtorch refuses running statistics that require a gradient; Quorum's backend adds a term",
            "    # equal to zero in value that carries d/dmean and d/dvar (torch_ops_network.cpp, batch_norm).",
            "    f = torch.mul(torch.mul(torch.sub(x0.detach(), x3.reshape(" + pi(cshape) + ")), torch.rsqrt(torch.add(x4.reshape(" +
                pi(cshape) + "), " + eps + "))), x1.detach().reshape(" + pi(cshape) + "))",
            "    y = torch.add(y, torch.nan_to_num(torch.sub(f, f.detach()), 0.0, 0.0, 0.0))"};
  }
  if (op == "layer_norm") {
    const int axis = checked_axis(I("axis"), rank, n.name);
    const Ints normalized(xs.begin() + axis, xs.end());
    return one("F.layer_norm(x0, " + pi(normalized) + ", x1, x2, " + pf(Fl("epsilon")) + ")");
  }
  if (op == "lrn") {
    const int64_t size = I("size");
    return {"sq = torch.mul(x0, x0).unsqueeze(1)  # F.local_response_norm's composition, as Quorum's backend",
            "sq = torch.constant_pad_nd(sq, [0, 0, 0, 0, " + std::to_string(size / 2) + ", " + std::to_string((size - 1) / 2) +
                "], 0.0)",
            "avg = F.avg_pool3d(sq, [" + std::to_string(size) + ", 1, 1], [1, 1, 1]).squeeze(1)",
            "y = torch.div(x0, torch.pow(torch.add(torch.mul(avg, " + pf(Fl("alpha")) + "), " + pf(Fl("bias")) + "), " +
                pf(Fl("beta")) + "))"};
  }
  if (op == "simple_rnn" || op == "gru" || op == "lstm") {
    const std::string h0 = "torch.zeros([1, " + std::to_string(xs[0]) + ", " + std::to_string(I("hidden_size")) + "], dtype=x0.dtype)";
    const std::string args = "[x1, x2, x3, x4], True, 1, 0.0, False, False, True)  # biases, 1 layer, no dropout, eval, unidirectional, batch_first";
    Lines l{"h0 = " + h0};
    if (op == "lstm") l.push_back("seq, last, _ = torch.lstm(x0, [h0, torch.zeros_like(h0)], " + args);
    else l.push_back("seq, last = torch." + std::string(op == "gru" ? "gru" : "rnn_tanh") + "(x0, h0, " + args);
    l.push_back(I("return_sequences") == 1 ? "y = seq" : "y = last.select(0, 0)");
    return l;
  }
  if (op == "mse_loss" || op == "softmax_cross_entropy" || op == "binary_cross_entropy" || op == "categorical_hinge") {
    helpers.insert("catalogue_loss");
    return one("catalogue_loss(" + ps(op) + ", x0, x1)");
  }

  // ---- conv
  if (op == "conv1d" || op == "conv2d" || op == "conv3d") {
    const Ints &k = Is("kernel_shape"), &strides = Is("strides"), &dil = Is("dilations");
    Ints eff(k.size());
    for (size_t i = 0; i < k.size(); ++i) eff[i] = dil[i] * (k[i] - 1) + 1;
    const ops::Pads p = ops::resolve_pads(S("auto_pad"), Is("pads"), xs, eff, strides);
    Lines l;
    std::string in = "x0";
    Ints padding = p.begin;
    if (!p.symmetric()) {
      l.push_back("xp = torch.constant_pad_nd(x0, " + pi(torch_pad_order(p.begin, p.end)) + ", 0.0)  # asymmetric pads");
      in = "xp";
      padding.assign(k.size(), 0);
    }
    l.push_back("y = F." + op + "(" + in + ", x1, " + (I("bias") == 1 ? "x2" : "None") + ", stride=" + pi(strides) +
                ", padding=" + pi(padding) + ", dilation=" + pi(dil) + ", groups=" + std::to_string(I("group")) + ")");
    return l;
  }
  if (op == "conv_transpose2d") {
    const Ints& pads = Is("pads");
    const Ints begin{pads[0], pads[1]}, end{pads[2], pads[3]};
    const Ints common{std::min(begin[0], end[0]), std::min(begin[1], end[1])};
    Lines l{"y = F.conv_transpose2d(x0, x1, " + std::string(I("bias") == 1 ? "x2" : "None") + ", stride=" + pi(Is("strides")) +
            ", padding=" + pi(common) + ", output_padding=" + pi(Is("output_padding")) + ", groups=" +
            std::to_string(I("group")) + ", dilation=" + pi(Is("dilations")) + ")"};
    for (size_t d = 0; d < 2; ++d) {
      const int64_t cb = begin[d] - common[d], ce = end[d] - common[d];
      if (cb + ce > 0)
        l.push_back("y = y.narrow(" + std::to_string(d + 2) + ", " + std::to_string(cb) + ", y.size(" + std::to_string(d + 2) +
                    ") - " + std::to_string(cb + ce) + ")  # asymmetric pads: crop the rest");
    }
    return l;
  }

  // ---- pools
  if (op == "max_pool1d" || op == "max_pool2d" || op == "avg_pool1d" || op == "avg_pool2d") {
    helpers.insert("crop_to");
    const Ints &k = Is("kernel_shape"), &strides = Is("strides");
    const ops::Pads p = ops::resolve_pads(S("auto_pad"), Is("pads"), xs, k, strides);
    const bool ceil = S("auto_pad") == "NOTSET" && I("ceil_mode") == 1;
    bool native = p.symmetric();
    for (size_t i = 0; i < k.size() && native; ++i)
      if (p.begin[i] > k[i] / 2) native = false;
    const std::string nd = k.size() == 1 ? "1d" : "2d";
    const Ints zero(k.size(), 0);
    const std::string geo = pi(k) + ", " + pi(strides) + ", ";
    const std::string crop = "y = crop_to(y, " + pi(ys) + ")";
    if (op.rfind("max_pool", 0) == 0) {
      Lines l;
      std::string in = "x0";
      Ints padding = p.begin;
      if (!native) {
        l.push_back("xp = torch.constant_pad_nd(x0, " + pi(torch_pad_order(p.begin, p.end)) +
                    ", -float('inf'))  # padded cells never win");
        in = "xp";
        padding = zero;
      }
      l.push_back("y = F.max_pool" + nd + "(" + in + ", " + geo + pi(padding) + ", " + pi(Ints(k.size(), 1)) + ", " + pb(ceil) + ")");
      l.push_back(crop);
      return l;
    }
    const bool include_pad = I("count_include_pad") == 1;
    if (native)
      return {"y = F.avg_pool" + nd + "(x0, " + geo + pi(p.begin) + ", " + pb(ceil) + ", " + pb(include_pad) + ")", crop};
    const Ints tp = torch_pad_order(p.begin, p.end);
    if (include_pad)
      return {"xp = torch.constant_pad_nd(x0, " + pi(tp) + ", 0.0)",
              "y = F.avg_pool" + nd + "(xp, " + geo + pi(zero) + ", " + pb(ceil) + ", True)", crop};
    // Pads excluded from the divisor: window sums of the padded input over window sums of a padded
    // mask of ones (avg_pool2d with divisor 1), the 1-D case as a 2-D pool over [N, C, 1, L].
    const bool one_d = k.size() == 1;
    Ints k2 = k, s2 = strides, p2 = tp;
    if (one_d) {
      k2.insert(k2.begin(), 1);
      s2.insert(s2.begin(), 1);
      p2.insert(p2.end(), {0, 0});
    }
    Ints plane{1, 1};
    if (one_d) plane.push_back(1);
    for (size_t d = 2; d < xs.size(); ++d) plane.push_back(xs[d]);
    const std::string g2 = pi(k2) + ", " + pi(s2) + ", [0, 0], " + pb(ceil) + ", True, 1)";
    Lines l{std::string("x = ") + (one_d ? "x0.unsqueeze(2)" : "x0"),
            "mask = torch.ones(" + pi(plane) + ", dtype=x.dtype)",
            "sums = F.avg_pool2d(torch.constant_pad_nd(x, " + pi(p2) + ", 0.0), " + g2,
            "counts = F.avg_pool2d(torch.constant_pad_nd(mask, " + pi(p2) + ", 0.0), " + g2,
            "y = torch.div(sums, counts.clamp_min(1.0))"};
    if (one_d) l.push_back("y = y.squeeze(2)");
    l.push_back(crop);
    return l;
  }
  if (op == "global_max_pool" || op == "global_avg_pool") {
    const int64_t spatial = rank - 2;
    if (spatial < 1 || spatial > 3) throw ReproUnsupported("node '" + n.name + "': global pool over rank " + std::to_string(rank));
    const std::string nd = std::to_string(spatial) + "d";
    return one("F.adaptive_" + std::string(op == "global_max_pool" ? "max" : "avg") + "_pool" + nd + "(x0, " +
               pi(Ints(static_cast<size_t>(spatial), 1)) + ")");
  }

  // ---- resize
  if (op == "resize_nearest" || op == "resize_bilinear") {
    const bool bilinear = op == "resize_bilinear";
    const std::string ctm = S("coordinate_transformation_mode");
    const Ints& sizes = Is("sizes");
    auto axis = [&](size_t i) {
      return bilinear ? bilinear_axis(ctm, xs[i + 2], sizes[i]) : nearest_axis(ctm, S("nearest_mode"), xs[i + 2], sizes[i]);
    };
    AxisChoice h = axis(0), w = axis(1);
    const Kernel fallback = bilinear ? Kernel::BilinearHalfPixel : Kernel::Nearest;
    if (h.kernel == Kernel::Any) h.kernel = w.kernel == Kernel::Any || w.kernel == Kernel::None ? fallback : w.kernel;
    if (w.kernel == Kernel::Any) w.kernel = h.kernel == Kernel::None ? fallback : h.kernel;
    if (h.kernel == Kernel::None) throw ReproUnsupported(h.why + " (height); Quorum's torch backend refuses it too");
    if (w.kernel == Kernel::None) throw ReproUnsupported(w.why + " (width); Quorum's torch backend refuses it too");
    if (h.kernel == w.kernel) return one(interpolate(h.kernel, "x0", sizes));
    return {"t = " + interpolate(h.kernel, "x0", {sizes[0], xs[3]}) + "  # height, then width (separable)",
            "y = " + interpolate(w.kernel, "t", sizes)};
  }
  throw ReproUnsupported("the torch reproducer has no mapping for operator '" + op + "'");
}

// The graph to run and its inputs: the case's model, except for a training finding whose node
// Quorum cut out of a larger unreduced model (then the whole model, from the bundle).
struct Plan {
  ir::Graph g;
  ValueMap inputs;
  bool whole_model = false;  // the bundle's full model replaces the one-node cut
  bool feed_incoming = false;  // one-node cut without its model: backward fed the recorded gradient
};

Plan plan_case(const ReproCase& c) {
  Plan p{c.model, c.inputs};
  if (!c.train || c.whole_model.nodes.empty()) return p;
  if (c.target.defined() && c.target.shape() == c.whole_model.types.at(c.whole_model.outputs.at(0)).shape) {
    p.g = c.whole_model;
    p.inputs = c.whole_inputs;
    p.whole_model = true;
  } else {
    p.feed_incoming = !c.incoming.empty();
  }
  return p;
}

std::string npy(ReproProgram& p, const std::string& dir, const std::string& file, const core::Tensor& t) {
  core::write_npy(dir + "/" + file, t);
  p.files.push_back(file);
  return file;
}

}  // namespace

ReproProgram write_repro_torch(const ReproCase& c, const std::string& dir) {
  if (c.dtype != core::DType::F32 && c.dtype != core::DType::F64)
    throw ReproUnsupported("the torch backend computes in float32 or float64, the case is " + core::to_string(c.dtype));
  if (c.train && !c.loss_attrs.empty()) throw ReproUnsupported("the torch backend's losses take no attributes");
  const bool crash = c.crash() || c.stage == core::Stage::Compile;
  const Plan plan = plan_case(c);
  const ir::Graph& g = plan.g;
  const std::set<std::string> multi = multi_consumer_values(g);
  const ir::Node* blamed = g.find_node(c.node);

  // The model's code (throws ReproUnsupported before anything is written).
  std::set<std::string> helpers;
  std::ostringstream body;
  for (const auto& n : g.nodes) {
    if (n.outputs.size() != 1) throw ReproUnsupported("node '" + n.name + "' has several outputs");
    body << "    # node '" << n.name << "': " << n.op << " " << core::to_string(n.attrs) << "\n";
    body << "    ";
    for (size_t i = 0; i < n.inputs.size(); ++i) body << (i ? ", " : "") << "x" << i;
    body << " = ";
    for (size_t i = 0; i < n.inputs.size(); ++i) body << (i ? ", " : "") << "use(" << ps(n.inputs[i]) << ", " << ps(n.name) << ")";
    body << "\n";
    for (const auto& line : node_lines(g, n, helpers)) body << "    " << line << "\n";
    body << "    put(" << ps(n.outputs[0]) << ", y";
    for (size_t i = 0; i < n.inputs.size(); ++i) body << ", x" << i;
    body << ")\n";
  }
  if (c.train) helpers.insert("catalogue_loss");

  ReproProgram p;
  p.main = "repro.py";
  p.run = "/usr/bin/python3 repro.py";
  const bool single = c.dtype == core::DType::F32;
  const std::string lib_dtype = single ? "torch.float32" : "torch.float64";
  const std::string lib_name = single ? "float32" : "float64";

  std::ostringstream py;
  py << "#!/usr/bin/python3\n"
     << repro_header(c, "#", "/usr/bin/python3 repro.py  (Debian python3-torch 1.13, python3-numpy)");
  py << "#\n# The model is built with the torch / torch.nn.functional calls Quorum's libtorch backend makes\n"
        "# (src/backends/torch/torch_ops_*.cpp) and run twice: in "
     << lib_name << " (the finding) and in float64\n"
        "# (PyTorch's own baseline). Two references are compared:\n"
        "#   - Quorum's float64 reference (expected_*.npy): what Quorum's oracle judged; it DECIDES the exit\n"
        "#     status, because some libtorch defects are in the float64 kernels as well;\n"
        "#   - torch's own float64 run of the same model: printed for information.\n";
  if (plan.whole_model)
    py << "# Quorum judged node '" << c.node << "' on its own; this program runs the whole model of the finding\n"
          "# so that the gradient reaching the node keeps the layout autograd gives it.\n";
  py << "import os\nimport sys\n\nimport numpy as np\nimport torch\nimport torch.nn.functional as F\n\n";
  py << py_check_function() << "\n\n";
  for (const auto& h : helpers) py << helper_source().at(h) << "\n\n";
  py << "HERE = os.path.dirname(os.path.abspath(__file__))\n\n\n"
        "def load(name):\n    return np.load(os.path.join(HERE, name))\n\n\n";
  py << "ATOL, RTOL = " << pf(c.tol.atol) << ", " << pf(c.tol.rtol) << "  # Quorum's tolerance for node '" << c.node << "'\n";
  py << "LIB_DTYPE, LIB_NAME = " << lib_dtype << ", '" << lib_name << "'  # the dtype of the finding\n";
  py << "INPUTS = {";
  for (const auto& in : g.inputs)
    py << "\n    " << ps(in.name) << ": load('"
       << npy(p, dir, "input_" + identifier(in.name) + ".npy", plan.inputs.at(in.name).to(c.dtype)) << "'),";
  py << "\n}\nWEIGHTS = {";
  for (const auto& [name, w] : g.initializers)
    py << "\n    " << ps(name) << ": load('" << npy(p, dir, "weight_" + identifier(name) + ".npy", w.to(c.dtype)) << "'),";
  py << "\n}\n";
  py << "MULTI = " << (multi.empty() ? "set(" : "{");
  for (const auto& v : multi) py << ps(v) << ", ";
  py << (multi.empty() ? ")" : "}") << "  # values several nodes consume: each consumer's gradient share is kept apart (as Quorum does)\n\n\n";

  py << R"PY(def model(dtype, train):
    """Runs the model in `dtype`. Returns every value by name (V) and, when training, the
    per-consumer views of shared values as (value@consumer, view) pairs (E)."""
    V, E = {}, []

    def use(name, consumer):
        t = V[name]
        if train and name in MULTI and t.requires_grad:
            t = t.view_as(t)
            t.retain_grad()
            E.append((name + '@' + consumer, t))
        return t

    def put(name, y, *ins):
        if train:
            # A node output is its own autograd node (not an alias of its input) and keeps its gradient.
            if y.is_leaf or any(y is x for x in ins):
                y = y.view_as(y)
            if y.requires_grad:
                y.retain_grad()
        V[name] = y

    for name, a in list(INPUTS.items()) + list(WEIGHTS.items()):
        V[name] = torch.from_numpy(a).to(dtype).requires_grad_(train)
)PY";
  py << body.str() << "    return V, E\n\n\n";

  py << "print('PyTorch', torch.__version__, '| oneDNN (mkldnn) enabled:', torch.backends.mkldnn.is_available())\n";
  py << "torch.set_num_threads(1)  # Quorum's torch backend runs single-threaded\n\n\n";

  if (crash) {
    py << "# The finding is a crash while building or running the model: running it shows it.\n";
    if (c.train) {
      py << "V, E = model(LIB_DTYPE, True)\n"
         << "loss = catalogue_loss(" << ps(c.loss) << ", V[" << ps(g.outputs.at(0)) << "], torch.from_numpy(load('"
         << npy(p, dir, "target.npy", c.target.to(c.dtype)) << "')).to(LIB_DTYPE))\nloss.backward()\n";
    } else {
      py << "with torch.no_grad():\n    V, E = model(LIB_DTYPE, False)\n";
    }
    py << "print('the model ran without crashing')\nsys.exit(0)\n";
    write_repro_file(p, dir, p.main, py.str());
    return p;
  }

  py << R"PY(def compare(what, got, torch64, quorum64):
    """Checks one value; returns the number of elements beyond the tolerance against Quorum's reference."""
    got, torch64 = got.detach().numpy(), torch64.detach().numpy()
    print(f'--- {what}')
    bad = quorum_check(f'{what}, {LIB_NAME} vs Quorum float64 reference [decides]', got, quorum64, ATOL, RTOL)
    quorum_check(f'{what}, {LIB_NAME} vs torch float64 [information]', got, torch64, ATOL, RTOL)
    also = quorum_check(f'{what}, torch float64 vs Quorum float64 reference [information]', torch64, quorum64, ATOL, RTOL)
    if bad and also:
        print(f'  => torch float64 differs from the reference too: the defect is not specific to {LIB_NAME}')
    elif bad:
        print(f'  => torch float64 agrees with the reference: the {LIB_NAME} computation is at fault')
    return bad


)PY";
  py << "bad = 0\n";

  if (!c.train) {
    std::vector<std::string> compared;
    auto add = [&](const std::string& v) {
      if (std::find(compared.begin(), compared.end(), v) == compared.end() && c.expected.count(v)) compared.push_back(v);
    };
    if (blamed)
      for (const auto& o : blamed->outputs) add(o);
    for (const auto& o : g.outputs) add(o);
    if (compared.empty()) throw ReproUnsupported("the case holds no expected value for the blamed node or the outputs");
    py << "with torch.no_grad():\n    V32, _ = model(LIB_DTYPE, False)\n    V64, _ = model(torch.float64, False)\n";
    for (const auto& v : compared)
      py << "bad += compare(\"value '" << v << "'\", V32[" << ps(v) << "], V64[" << ps(v) << "], load('"
         << npy(p, dir, "expected_" + identifier(v) + ".npy", c.expected.at(v)) << "'))\n";
  } else {
    const std::string out0 = g.outputs.at(0);
    py << "TARGET = load('" << npy(p, dir, "target.npy", c.target.to(c.dtype)) << "')\n";
    py << "LOSS = " << ps(c.loss) << "  # Quorum's training objective: catalogue loss of output '" << out0 << "' vs TARGET\n";
    if (plan.feed_incoming) {
      const std::string o = blamed->outputs.at(0);
      py << "# Quorum judged this node on the gradient libtorch sent back to it in the finding's model:\n"
            "# that gradient is fed to backward directly.\n"
         << "INCOMING = load('" << npy(p, dir, "incoming_" + identifier(o) + ".npy", c.incoming.at(o).to(c.dtype)) << "')\n";
    }
    py << "\n\ndef train_step(dtype):\n"
          "    \"\"\"One autograd step; returns every value, every gradient (by value, and by value@consumer\n"
          "    for shared values) and the loss.\"\"\"\n"
          "    V, E = model(dtype, True)\n";
    if (plan.feed_incoming)
      py << "    loss = torch.zeros([], dtype=dtype)\n"
         << "    V[" << ps(blamed->outputs.at(0)) << "].backward(torch.from_numpy(INCOMING).to(dtype))\n";
    else
      py << "    loss = catalogue_loss(LOSS, V[" << ps(out0) << "], torch.from_numpy(TARGET).to(dtype))\n"
         << "    if loss.requires_grad:\n        loss.backward()\n";
    py << "    G = {name: t.grad if t.grad is not None else torch.zeros_like(t) for name, t in V.items()}\n"
          "    for key, t in E:\n"
          "        g = t.grad if t.grad is not None else torch.zeros_like(t)\n"
          "        G[key] = G[key] + g if key in G else g\n"
          "    return V, G, loss\n\n\n"
          "V32, G32, loss32 = train_step(LIB_DTYPE)\n"
          "V64, G64, loss64 = train_step(torch.float64)\n";
    if (!plan.feed_incoming)
      py << "print(f'loss ({LOSS}): " << lib_name << " {loss32.item():.9g}, torch float64 {loss64.item():.9g}')\n";
    if (c.stage == core::Stage::Loss || !blamed) {
      if (!c.expected_grads.count(out0)) throw ReproUnsupported("the case holds no expected loss gradient");
      py << "bad += compare(\"loss gradient d loss / d '" << out0 << "'\", G32[" << ps(out0) << "], G64[" << ps(out0)
         << "], load('" << npy(p, dir, "expected_grad_" + identifier(out0) + ".npy", c.expected_grads.at(out0)) << "'))\n";
    } else {
      if (!plan.feed_incoming)
        for (const auto& o : blamed->outputs)
          if (c.incoming.count(o))
            py << "print('incoming gradient of node " << c.node << " (what autograd sends back to it), compared with what Quorum recorded from libtorch:')\n"
               << "if quorum_check(\"d loss / d '" << o << "' [information]\", G32[" << ps(o) << "].numpy(), load('"
               << npy(p, dir, "incoming_" + identifier(o) + ".npy", c.incoming.at(o)) << "'), ATOL, RTOL):\n"
               << "    print('  WARNING: Quorum computed the reference gradients below from the recorded incoming gradient;'\n"
                  "          ' with a different one they do not apply')\n";
      // Quorum's float64 gradient per input/weight of the node: the vector-Jacobian product on the
      // library's own operands and incoming gradient (what the oracle judged) when the case has it,
      // else the float64 reference's gradient of the case's model.
      const bool node_level = !c.node_grads.empty();
      if (!node_level && plan.whole_model) throw ReproUnsupported("the case holds no float64 gradient of the blamed node");
      int n_compared = 0;
      std::set<std::string> seen;
      for (const auto& in : blamed->inputs) {
        if (!seen.insert(in).second) continue;
        const std::string key = multi.count(in) ? ir::contribution_key(in, blamed->name) : in;
        const core::Tensor* want = nullptr;
        if (node_level) {
          if (auto it = c.node_grads.find(in); it != c.node_grads.end()) want = &it->second;
        } else if (auto it = c.expected_grads.find(key); it != c.expected_grads.end()) {
          want = &it->second;
        }
        if (!want) continue;
        ++n_compared;
        py << "bad += compare(\"gradient of '" << in << "' from node '" << blamed->name << "'" << (key != in ? " (this consumer's share)" : "")
           << "\", G32[" << ps(key) << "], G64[" << ps(key) << "], load('"
           << npy(p, dir, "expected_grad_" + identifier(key) + ".npy", *want) << "'))\n";
      }
      if (!n_compared) throw ReproUnsupported("the case holds no expected gradient for the inputs of node '" + c.node + "'");
      if (node_level)
        py << "print(\"(Quorum's reference gradients: the float64 vector-Jacobian product of node '" << c.node
           << "' on the operands and incoming gradient libtorch had in the finding)\")\n";
    }
  }
  py << "print('RESULT:', 'the discrepancy shows' if bad else 'no discrepancy beyond the tolerance')\n";
  py << "sys.exit(1 if bad else 0)\n";
  write_repro_file(p, dir, p.main, py.str());
  return p;
}

}  // namespace quorum::backends
