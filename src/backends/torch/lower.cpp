// The libtorch lowering (lower.h): each catalogue operator's libtorch calls, by family. The
// backend (torch_sink.cpp) runs the statements with ATen, the reproducer writer (repro.cpp) prints
// them as PyTorch Python; both see exactly what is emitted here.
#include "backends/torch/lower.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <tuple>

#include "core/error.h"
#include "ops/kernel_util.h"
#include "ops/quant_util.h"

namespace quorum::backends::torch {
namespace {

// ---- building expressions ------------------------------------------------------------------------

CallPtr var(const std::string& name) {
  auto c = std::make_shared<Call>();
  c->var = name;
  return c;
}

CallPtr call(const std::string& fn, std::vector<Arg> args) {
  auto c = std::make_shared<Call>();
  c->fn = fn;
  c->args = std::move(args);
  return c;
}

Arg tensor(CallPtr t) { return {.kind = Arg::Kind::Tensor, .t = std::move(t)}; }
Arg tensor(const std::string& name) { return tensor(var(name)); }
Arg tensors(std::vector<CallPtr> ts) { return {.kind = Arg::Kind::Tensors, .ts = std::move(ts)}; }
Arg int_(int64_t v) { return {.kind = Arg::Kind::Int, .i = v}; }
Arg ints(Ints v) { return {.kind = Arg::Kind::Ints, .ints = std::move(v)}; }
Arg flt(double v) { return {.kind = Arg::Kind::Float, .f = v}; }
Arg flts(std::vector<double> v) { return {.kind = Arg::Kind::Floats, .fs = std::move(v)}; }
// A constant the mapping itself writes (not an attribute's value).
Arg literal(double v) { return {.kind = Arg::Kind::Float, .f = v, .literal = true}; }
Arg boolean(bool v) { return {.kind = Arg::Kind::Bool, .b = v}; }
Arg str(const std::string& v) { return {.kind = Arg::Kind::Str, .s = v}; }
Arg none() { return Arg{}; }
Arg dtype_of(const std::string& name) { return {.kind = Arg::Kind::DTypeOf, .t = var(name)}; }
Arg size_minus(const std::string& name, int64_t axis, int64_t minus) {
  return {.kind = Arg::Kind::SizeMinus, .t = var(name), .i = axis, .minus = minus};
}
Arg dtype(const std::string& name) { return {.kind = Arg::Kind::DType, .s = name}; }
Arg kw(const std::string& keyword, Arg a) {
  a.keyword = keyword;
  return a;
}

// A unary call on a variable or expression.
CallPtr fn1(const std::string& fn, CallPtr x) { return call(fn, {tensor(std::move(x))}); }

// The node being lowered: attributes, shapes, and the statements' destination.
struct Node {
  const ir::Graph& g;
  const ir::Node& n;
  Sink& sink;

  int64_t i(const char* k) const { return core::attr_i(n.attrs, k); }
  double f(const char* k) const { return core::attr_f(n.attrs, k); }
  const std::string& s(const char* k) const { return core::attr_s(n.attrs, k); }
  const Ints& is(const char* k) const { return core::attr_ints(n.attrs, k); }
  const core::Shape& in_shape(size_t k = 0) const { return g.types.at(n.inputs.at(k)).shape; }
  const core::Shape& out_shape() const { return g.types.at(n.outputs.at(0)).shape; }
  int64_t rank() const { return static_cast<int64_t>(in_shape().size()); }

  void let(const std::string& out, CallPtr e, const std::string& note = "") const { sink.assign({out}, e, note); }
  void y(CallPtr e, const std::string& note = "") const { let("y", std::move(e), note); }
  // The optional bias input x2 (attribute bias = 1), else None.
  Arg bias() const { return i("bias") == 1 ? tensor("x2") : none(); }
  // The catalogue's axis rule (ops::norm_axis; a scalar's axis 0 is itself).
  int axis(int64_t a, int64_t r) const {
    if (r == 0 && a == 0) return 0;
    try {
      return ops::norm_axis(a, static_cast<int>(r));
    } catch (const core::OpError& e) {
      throw LoweringError("node '" + n.name + "': " + e.what());
    }
  }
};

// ONNX pads (begin per axis, end per axis) in at::constant_pad_nd / F.pad order: last axis first.
Ints torch_pad_order(const Ints& begin, const Ints& end) {
  Ints out;
  for (size_t i = begin.size(); i-- > 0;) {
    out.push_back(begin[i]);
    out.push_back(end[i]);
  }
  return out;
}

using Lower = std::function<void(const Node&)>;
using Table = std::map<std::string, Lower>;

// ---- eltwise, binary ------------------------------------------------------------------------------

void add_elementwise(Table& t) {
  // One call on x0 (and x1): the ATen function of the same meaning.
  const std::pair<const char*, const char*> unary[] = {{"abs", "torch.abs"},
                                                       {"exp", "torch.exp"},
                                                       {"log", "torch.log"},
                                                       {"neg", "torch.neg"},
                                                       {"reciprocal", "torch.reciprocal"},
                                                       {"relu", "torch.relu"},
                                                       {"rsqrt", "torch.rsqrt"},
                                                       {"selu", "torch.selu"},
                                                       {"sigmoid", "torch.sigmoid"},
                                                       {"sqrt", "torch.sqrt"},
                                                       {"square", "torch.square"},
                                                       {"tanh", "torch.tanh"},
                                                       {"hardswish", "F.hardswish"}};
  for (const auto& [op, fn] : unary) {
    const std::string f = fn;
    t[op] = [f](const Node& c) { c.y(fn1(f, var("x0"))); };
  }
  const std::pair<const char*, const char*> binary[] = {
      {"add", "torch.add"},         {"sub", "torch.sub"},         {"mul", "torch.mul"},      {"div", "torch.div"},
      {"maximum", "torch.maximum"}, {"minimum", "torch.minimum"}, {"matmul", "torch.matmul"}};
  for (const auto& [op, fn] : binary) {
    const std::string f = fn;
    t[op] = [f](const Node& c) { c.y(call(f, {tensor("x0"), tensor("x1")})); };
  }
  t["relu6"] = [](const Node& c) { c.y(call("F.hardtanh", {tensor("x0"), literal(0.0), literal(6.0)})); };  // F.relu6
  t["softplus"] = [](const Node& c) {  // F.softplus defaults
    c.y(call("F.softplus", {tensor("x0"), kw("beta", literal(1.0)), kw("threshold", literal(20.0))}));
  };
  // ATen has no softsign kernel; torch.nn.functional.softsign is x / (1 + |x|).
  t["softsign"] = [](const Node& c) {
    c.y(call("torch.div",
             {tensor("x0"), tensor(call("torch.add", {tensor(fn1("torch.abs", var("x0"))), literal(1.0)}))}));
  };
  t["clip"] = [](const Node& c) { c.y(call("torch.clamp", {tensor("x0"), flt(c.f("min")), flt(c.f("max"))})); };
  t["elu"] = [](const Node& c) { c.y(call("F.elu", {tensor("x0"), kw("alpha", flt(c.f("alpha")))})); };
  t["leaky_relu"] = [](const Node& c) {
    c.y(call("F.leaky_relu", {tensor("x0"), kw("negative_slope", flt(c.f("alpha")))}));
  };
  t["gelu"] = [](const Node& c) { c.y(call("F.gelu", {tensor("x0"), kw("approximate", str(c.s("approximate")))})); };
  t["pow"] = [](const Node& c) { c.y(call("torch.pow", {tensor("x0"), flt(c.f("exponent"))})); };
  t["hard_sigmoid"] = [](const Node& c) {
    const double alpha = c.f("alpha"), beta = c.f("beta");
    // ATen's hardsigmoid is fixed at slope 1/6, offset 1/2 (ONNX defaults to 0.2, 0.5): use it when
    // the attributes match, otherwise clamp(alpha*x + beta, 0, 1) as ONNX defines it.
    if (std::abs(alpha - 1.0 / 6.0) < 1e-12 && beta == 0.5) return c.y(fn1("F.hardsigmoid", var("x0")));
    const CallPtr lin = call("torch.add", {tensor(call("torch.mul", {tensor("x0"), flt(alpha)})), flt(beta)});
    c.y(call("F.hardtanh", {tensor(lin), literal(0.0), literal(1.0)}), "ONNX slope/offset");
  };
  t["sum"] = [](const Node& c) {  // ONNX Sum: a left fold of broadcasting additions
    CallPtr acc = call("torch.add", {tensor("x0"), tensor("x1")});
    for (size_t k = 2; k < c.n.inputs.size(); ++k)
      acc = call("torch.add", {tensor(acc), tensor("x" + std::to_string(k))});
    c.y(acc);
  };
  t["concat"] = [](const Node& c) {
    std::vector<CallPtr> xs;
    for (size_t k = 0; k < c.n.inputs.size(); ++k) xs.push_back(var("x" + std::to_string(k)));
    c.y(call("torch.cat", {tensors(xs), int_(c.i("axis"))}));
  };
}

// ---- shape ----------------------------------------------------------------------------------------

// ONNX Slice: negative start/end count from the end, then clamp to [0, dim]. at::slice takes positive steps
// only: a negative step slices the axis flipped (element i at n-1-i), from n-1-start up to n-1-end.
void lower_slice(const Node& c) {
  const Ints &starts = c.is("starts"), &ends = c.is("ends"), &steps = c.is("steps");
  Ints axes = c.is("axes");
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  c.y(var("x0"));
  for (size_t i = 0; i < starts.size(); ++i) {
    const int d = c.axis(axes[i], c.rank());
    const int64_t len = c.in_shape()[static_cast<size_t>(d)];
    const int64_t step = steps.empty() ? 1 : steps[i];
    auto wrap = [len](int64_t v) { return v < 0 ? v + len : v; };
    if (step < 0) {
      const int64_t start = std::clamp<int64_t>(wrap(starts[i]), 0, len - 1);
      const int64_t end = std::clamp<int64_t>(wrap(ends[i]), -1, len - 1);
      c.y(call("torch.flip", {tensor("y"), ints({d})}), "at::flip along axis " + std::to_string(d));
      c.y(call("slice", {tensor("y"), int_(d), int_(len - 1 - start), int_(len - 1 - end), int_(-step)}),
          "at::slice along axis " + std::to_string(d) + ", flipped");
      continue;
    }
    auto clamp_index = [&](int64_t v) { return std::clamp<int64_t>(wrap(v), 0, len); };
    c.y(call("slice", {tensor("y"), int_(d), int_(clamp_index(starts[i])), int_(clamp_index(ends[i])), int_(step)}),
        "at::slice along axis " + std::to_string(d));
  }
}

// ONNX Pad. Constant padding of any rank is constant_pad_nd. The reflect/edge kernels
// (reflection_pad{k}d / replication_pad{k}d, F.pad's modes) pad only the trailing 1-3 axes of a
// [N, C, ...] tensor: when the padded axes all lie in the last three, the leading axes are folded
// into the batch; otherwise the axes are padded one at a time (reflect and edge padding are
// separable, so the result is the same).
void lower_pad(const Node& c) {
  const int64_t rank = c.rank();
  const core::Shape& xs = c.in_shape();
  Ints pads = c.is("pads");
  if (pads.empty()) pads.assign(static_cast<size_t>(2 * rank), 0);
  const Ints begin(pads.begin(), pads.begin() + rank), end(pads.begin() + rank, pads.end());
  const std::string& mode = c.s("mode");
  if (mode == "constant")
    return c.y(call("torch.constant_pad_nd", {tensor("x0"), ints(torch_pad_order(begin, end)), flt(c.f("value"))}));
  const Arg tmode = kw("mode", str(mode == "reflect" ? "reflect" : "replicate"));
  int64_t first = rank;  // first padded axis
  for (int64_t d = rank - 1; d >= 0; --d)
    if (begin[static_cast<size_t>(d)] != 0 || end[static_cast<size_t>(d)] != 0) first = d;
  if (first == rank) return c.y(fn1(".clone", var("x0")), "nothing to pad");
  if (rank - first <= 3) {
    Ints folded{-1, 1};
    for (int64_t d = first; d < rank; ++d) folded.push_back(xs[static_cast<size_t>(d)]);
    const Ints b(begin.begin() + first, begin.end()), e(end.begin() + first, end.end());
    const CallPtr padded = call(
        "F.pad", {tensor(call("torch.reshape", {tensor("x0"), ints(folded)})), ints(torch_pad_order(b, e)), tmode});
    return c.y(call("torch.reshape", {tensor(padded), ints(Ints(c.out_shape().begin(), c.out_shape().end()))}));
  }
  c.y(var("x0"), "padded one axis at a time (reflect/edge padding is separable)");
  Ints cur(xs.begin(), xs.end());
  for (int64_t d = 0; d < rank; ++d) {
    const auto ud = static_cast<size_t>(d);
    if (begin[ud] == 0 && end[ud] == 0) continue;
    Ints moved = cur;
    moved.erase(moved.begin() + d);
    moved.push_back(cur[ud] + begin[ud] + end[ud]);
    const CallPtr last = call(".movedim", {tensor("y"), int_(d), int_(-1)});
    const CallPtr padded = call("F.pad", {tensor(call("torch.reshape", {tensor(last), ints({-1, 1, cur[ud]})})),
                                          ints({begin[ud], end[ud]}), tmode});
    c.y(call(".movedim", {tensor(call("torch.reshape", {tensor(padded), ints(moved)})), int_(-1), int_(d)}));
    cur[ud] += begin[ud] + end[ud];
  }
}

void add_shape(Table& t) {
  // Reshape and Flatten keep the row-major order: the graph already holds the output shape.
  auto to_output_shape = [](const Node& c) {
    c.y(call("torch.reshape", {tensor("x0"), ints(Ints(c.out_shape().begin(), c.out_shape().end()))}));
  };
  t["reshape"] = to_output_shape;
  t["flatten"] = to_output_shape;
  t["squeeze"] = [](const Node& c) {
    const Ints& axes = c.is("axes");
    if (axes.empty()) return c.y(fn1("torch.squeeze", var("x0")));
    std::vector<int> dims;
    for (int64_t a : axes) dims.push_back(c.axis(a, c.rank()));
    std::sort(dims.rbegin(), dims.rend());  // highest first keeps the rest valid
    CallPtr e = var("x0");
    for (int d : dims) e = call("torch.squeeze", {tensor(e), int_(d)});
    c.y(e);
  };
  t["unsqueeze"] = [](const Node& c) {
    const Ints& axes = c.is("axes");
    const int64_t out_rank = c.rank() + static_cast<int64_t>(axes.size());
    std::vector<int> dims;
    for (int64_t a : axes) dims.push_back(c.axis(a, out_rank));
    std::sort(dims.begin(), dims.end());  // lowest first: each is an output position
    CallPtr e = var("x0");
    for (int d : dims) e = call("torch.unsqueeze", {tensor(e), int_(d)});
    c.y(e);
  };
  t["transpose"] = [](const Node& c) {
    Ints perm = c.is("perm");
    if (perm.empty())
      for (int64_t d = c.rank() - 1; d >= 0; --d) perm.push_back(d);
    c.y(call("torch.permute", {tensor("x0"), ints(perm)}));
  };
  t["slice"] = lower_slice;
  t["pad"] = lower_pad;
}

// ---- reduce, softmax ------------------------------------------------------------------------------

void add_reduce(Table& t) {
  const std::pair<const char*, const char*> reducers[] = {{"reduce_sum", "torch.sum"},
                                                          {"reduce_mean", "torch.mean"},
                                                          {"reduce_max", "torch.amax"},
                                                          {"reduce_min", "torch.amin"},
                                                          {"reduce_prod", "torch.prod"}};
  for (const auto& [op, fn] : reducers) {
    const std::string f = fn;
    t[op] = [f](const Node& c) {
      if (c.rank() == 0) return c.y(fn1(".clone", var("x0")));
      Ints dims;
      for (int64_t a : c.is("axes")) dims.push_back(c.axis(a, c.rank()));
      if (dims.empty()) {
        // ONNX: no axes reduces all of them. Spelled out, because an empty list means "no
        // reduction" in some ATen overloads and "all" in others.
        for (int64_t d = 0; d < c.rank(); ++d) dims.push_back(d);
      }
      std::sort(dims.begin(), dims.end());
      const bool keep = c.i("keepdims") == 1;
      if (f != "torch.prod") return c.y(call(f, {tensor("x0"), ints(dims), kw("keepdim", boolean(keep))}));
      // torch.prod reduces one dim at a time: fold every axis with keepdim, then drop them if asked.
      c.y(var("x0"), "torch.prod reduces one axis at a time");
      for (int64_t d : dims) c.y(call(f, {tensor("y"), int_(d), kw("keepdim", boolean(true))}));
      if (!keep)
        for (auto it = dims.rbegin(); it != dims.rend(); ++it) c.y(call("torch.squeeze", {tensor("y"), int_(*it)}));
    };
  }
  t["softmax"] = [](const Node& c) { c.y(call("torch.softmax", {tensor("x0"), int_(c.i("axis"))})); };
  t["log_softmax"] = [](const Node& c) { c.y(call("torch.log_softmax", {tensor("x0"), int_(c.i("axis"))})); };
}

// ---- dense, norm, rnn, loss -----------------------------------------------------------------------

void lower_batch_norm(const Node& c) {
  const double eps = c.f("epsilon");
  if (c.i("training") == 1) {
    // Batch statistics; without running buffers nothing is updated in place.
    return c.y(call("torch.batch_norm", {tensor("x0"), tensor("x1"), tensor("x2"), none(), none(), boolean(true),
                                         literal(0.0), flt(eps), boolean(false)}),
               "batch statistics");
  }
  // libtorch refuses running_mean / running_var that require a gradient ("not differentiable with
  // respect to argument 'running_mean'"), but the catalogue differentiates through them. The
  // output comes from batch_norm on detached statistics; a term equal to zero in value carries
  // their gradients without changing the output: (x - mean) * qv + qm, with x and mean detached,
  // qv = (var - var.detach()) * s * rstd * rstd * rstd * -0.5 and qm = -((mean - mean.detach()) * s * rstd),
  // zero in value, their derivatives d/dvar and d/dmean of the scaled normalisation. Autograd multiplies
  // in the reverse order of the statements, so the variance's gradient is
  // sum(gy * (x - mean)) * -0.5 * rstd * rstd * rstd * s, the catalogue kernel's own order (its float32
  // mark on that raw dot, ops/norm.cpp) with the scale last (as oneDNN's lowering): multiplying gy by the
  // scale first overflowed float32 where the gradient fits (seed 2613: scale FLT_MAX, elements dropped;
  // and gy * |scale| = inf times rsqrt's rstd^3 = 0 gave NaN), and gy * xhat with xhat = (x - mean) * rstd
  // was 0 * -inf = NaN where a stored mean at FLT_MAX makes xhat overflow and the exact gradient is 0
  // (seed 10411; tests/backends/stored_statistics_test.cpp). Where x is infinite the term is inf * 0 = NaN
  // in value, which nan_to_num zeroes; its gradient there is the kernel's (NaN where gy is 0).
  c.y(call("torch.batch_norm",
           {tensor("x0"), tensor("x1"), tensor("x2"), tensor(fn1(".detach", var("x3"))),
            tensor(fn1(".detach", var("x4"))), boolean(false), literal(0.0), flt(eps), boolean(false)}));
  Ints shape(static_cast<size_t>(c.rank()), 1);
  shape[1] = c.in_shape()[1];
  auto per_channel = [&](CallPtr v) { return tensor(call(".reshape", {tensor(std::move(v)), ints(shape)})); };
  auto mul = [](const std::string& a, Arg b) { return call("torch.mul", {tensor(a), std::move(b)}); };
  c.sink.begin_if_requires_grad({"x3", "x4"});
  c.sink.comment("libtorch refuses running statistics that require a gradient; Quorum's backend adds a term");
  c.sink.comment("equal to zero in value that carries d/dmean and d/dvar (lower.cpp, lower_batch_norm).");
  c.let("s", call(".reshape", {tensor(fn1(".detach", var("x1"))), ints(shape)}));
  c.let("r", fn1("torch.rsqrt", call("torch.add", {per_channel(fn1(".detach", var("x4"))), flt(eps)})));
  c.let("xm", call("torch.sub", {tensor(fn1(".detach", var("x0"))), per_channel(fn1(".detach", var("x3")))}));
  c.let("qv", call("torch.sub", {per_channel(var("x4")), per_channel(fn1(".detach", var("x4")))}));
  for (const char* f : {"s", "r", "r", "r"}) c.let("qv", mul("qv", tensor(f)));
  c.let("qv", mul("qv", literal(-0.5)));
  c.let("qm", call("torch.sub", {per_channel(var("x3")), per_channel(fn1(".detach", var("x3")))}));
  for (const char* f : {"s", "r"}) c.let("qm", mul("qm", tensor(f)));
  c.let("qm", fn1("torch.neg", var("qm")));
  const CallPtr zero = call("torch.add", {tensor(mul("xm", tensor("qv"))), tensor("qm")});
  c.y(call("torch.add",
           {tensor("y"), tensor(call("torch.nan_to_num", {tensor(zero), literal(0.0), literal(0.0), literal(0.0)}))}));
  c.sink.end_if();
}

// ONNX LRN across channels, composed as torch.nn.functional.local_response_norm does it: the
// squares are averaged over a window of `size` channels (zero-padded, the divisor always `size`),
// so bias + alpha * mean = bias + alpha/size * sum. The window is ONNX's, [c - floor((size-1)/2),
// c + ceil((size-1)/2)]: for an even size F.local_response_norm pads the other way round (size/2
// channels before c), so the zero padding here is ONNX's, not F.local_response_norm's.
void lower_lrn(const Node& c) {
  const int64_t size = c.i("size");
  c.let("sq", call(".unsqueeze", {tensor(call("torch.mul", {tensor("x0"), tensor("x0")})), int_(1)}),
        "F.local_response_norm's composition, as Quorum's backend");
  c.let("sq",
        call("torch.constant_pad_nd", {tensor("sq"), ints({0, 0, 0, 0, (size - 1) / 2, size / 2}), literal(0.0)}));
  c.let("avg",
        call(".squeeze", {tensor(call("F.avg_pool3d", {tensor("sq"), ints({size, 1, 1}), ints({1, 1, 1})})), int_(1)}));
  const CallPtr base =
      call("torch.add", {tensor(call("torch.mul", {tensor("avg"), flt(c.f("alpha"))})), flt(c.f("bias"))});
  c.y(call("torch.div", {tensor("x0"), tensor(call("torch.pow", {tensor(base), flt(c.f("beta"))}))}));
}

// One layer, no dropout, inference semantics (train only matters for dropout), batch first:
// PyTorch's own weight layout, which the catalogue shares. Bidirectional is libtorch's own
// (bidirectional=True, the catalogue's stacked [forward; reverse] rows narrowed into its eight
// parameters, outputs concatenated as the catalogue's); a reverse-only layer, which torch.nn has no
// flag for, is the forward layer on the sequence flipped in time, its outputs flipped back. A given
// initial state (h0, c0 [D*H]) is libtorch's hx [D, N, H], each direction's state repeated for every sample.
void lower_rnn(const Node& c) {
  const auto batch = static_cast<int64_t>(c.in_shape()[0]);
  const int64_t hs = c.i("hidden_size");
  const int64_t dirs = ops::rnn_directions(c.n.attrs);
  const bool bi = dirs == 2, rev = !bi && ops::rnn_walks_back(c.n.attrs, 0);
  auto state = [&](int i) {
    if (i < 0) return call("torch.zeros", {ints({dirs, batch, hs}), kw("dtype", dtype_of("x0"))});
    const CallPtr per_direction = call("torch.reshape", {tensor("x" + std::to_string(i)), ints({dirs, 1, hs})});
    return call(".repeat", {tensor(per_direction), ints({1, batch, 1})});
  };
  c.let("h0", state(ops::rnn_state_input(c.n.op, c.n.attrs, false)));
  const int c0 = ops::rnn_state_input(c.n.op, c.n.attrs, true);
  std::vector<CallPtr> params;
  for (int64_t d = 0; d < dirs; ++d)
    for (size_t k = 1; k <= 4; ++k) {
      const std::string w = "x" + std::to_string(k);
      const int64_t rows = c.in_shape(k)[0] / dirs;
      params.push_back(bi ? call(".narrow", {tensor(w), int_(0), int_(d * rows), int_(rows)}) : var(w));
    }
  const std::vector<Arg> rest{tensors(params), boolean(true), int_(1),    literal(0.0),
                              boolean(false),  boolean(bi),   boolean(true)};
  const std::string note = std::string("biases, 1 layer, no dropout, eval, ") +
                           (bi ? "bidirectional" : "unidirectional") + ", batch_first";
  std::vector<Arg> args{rev ? tensor(call("torch.flip", {tensor("x0"), ints({1})})) : tensor("x0")};
  if (c.n.op == "lstm") {
    args.push_back(tensors({var("h0"), c0 >= 0 ? state(c0) : fn1("torch.zeros_like", var("h0"))}));
    args.insert(args.end(), rest.begin(), rest.end());
    c.sink.assign({"seq", "last", "_"}, call("torch.lstm", args), note);
  } else {
    args.push_back(tensor("h0"));
    args.insert(args.end(), rest.begin(), rest.end());
    const bool relu = c.n.op == "simple_rnn" && c.s("activation") == "relu";
    const char* fn = c.n.op == "gru" ? "torch.gru" : relu ? "torch.rnn_relu" : "torch.rnn_tanh";
    c.sink.assign({"seq", "last"}, call(fn, args), note);
  }
  // return_sequences=0 reads the final state h_n [D, N, H] that libtorch returns separately.
  if (c.i("return_sequences") == 1)
    c.y(rev ? call("torch.flip", {tensor("seq"), ints({1})}) : var("seq"));
  else if (bi)
    c.y(call("torch.reshape", {tensor(call("torch.permute", {tensor("last"), ints({1, 0, 2})})),
                               ints({batch, 2 * hs})}));
  else
    c.y(call(".select", {tensor("last"), int_(0), int_(0)}));
}

void add_network(Table& t) {
  // Weight [units, in_features] is torch.nn.Linear's layout.
  t["dense"] = [](const Node& c) { c.y(call("F.linear", {tensor("x0"), tensor("x1"), c.bias()})); };
  t["batch_norm"] = lower_batch_norm;
  t["layer_norm"] = [](const Node& c) {
    const int axis = c.axis(c.i("axis"), c.rank());
    const Ints normalized(c.in_shape().begin() + axis, c.in_shape().end());
    c.y(call("F.layer_norm", {tensor("x0"), ints(normalized), tensor("x1"), tensor("x2"), flt(c.f("epsilon"))}));
  };
  t["lrn"] = lower_lrn;
  for (const char* op : {"simple_rnn", "lstm", "gru"}) t[op] = lower_rnn;
  // The catalogue losses as the backend's train_step computes them (catalogue_loss).
  for (const char* op : {"mse_loss", "softmax_cross_entropy", "binary_cross_entropy", "categorical_hinge"}) {
    const std::string loss = op;
    t[op] = [loss](const Node& c) { c.y(call("catalogue_loss", {str(loss), tensor("x0"), tensor("x1")})); };
  }
}

// ---- conv -----------------------------------------------------------------------------------------

// ATen takes one symmetric pad per axis; ONNX allows asymmetric pads and SAME_* auto_pad: those
// pad the input with zeros first and convolve without padding.
// A convolution's input `x` and the symmetric padding ATen applies: pads as ONNX resolves them (auto_pad over the
// dilated kernel extent); asymmetric ones are added explicitly with `fill` (into xp) and ATen pads nothing.
std::pair<std::string, Ints> conv_input(const Node& c, const std::string& x, const Arg& fill, const std::string& note) {
  const Ints &k = c.is("kernel_shape"), &strides = c.is("strides"), &dil = c.is("dilations");
  Ints eff(k.size());  // the dilated kernel extent per axis
  for (size_t i = 0; i < k.size(); ++i) eff[i] = dil[i] * (k[i] - 1) + 1;
  const ops::Pads p = ops::resolve_pads(c.s("auto_pad"), c.is("pads"), c.in_shape(), eff, strides);
  if (p.symmetric()) return {x, p.begin};
  c.let("xp", call("torch.constant_pad_nd", {tensor(x), ints(torch_pad_order(p.begin, p.end)), fill}), note);
  return {"xp", Ints(k.size(), 0)};
}

void lower_conv(const Node& c) {
  const auto [in, padding] = conv_input(c, "x0", literal(0.0), "asymmetric pads");
  c.y(call("F." + c.n.op, {tensor(in), tensor("x1"), c.bias(), kw("stride", ints(c.is("strides"))),
                           kw("padding", ints(padding)), kw("dilation", ints(c.is("dilations"))),
                           kw("groups", int_(c.i("group")))}));
}

// ATen's transposed convolution removes `padding` from both ends; an asymmetric pair removes the
// smaller one there and crops the rest from the larger side afterwards.
void lower_conv_transpose(const Node& c) {
  const Ints& pads = c.is("pads");
  const Ints begin{pads[0], pads[1]}, end{pads[2], pads[3]};
  const Ints common{std::min(begin[0], end[0]), std::min(begin[1], end[1])};
  c.y(call("F.conv_transpose2d", {tensor("x0"), tensor("x1"), c.bias(), kw("stride", ints(c.is("strides"))),
                                  kw("padding", ints(common)), kw("output_padding", ints(c.is("output_padding"))),
                                  kw("groups", int_(c.i("group"))), kw("dilation", ints(c.is("dilations")))}));
  for (size_t d = 0; d < 2; ++d) {
    const int64_t cb = begin[d] - common[d], ce = end[d] - common[d];
    const auto axis = static_cast<int64_t>(d + 2);
    if (cb + ce > 0)
      c.y(call(".narrow", {tensor("y"), int_(axis), int_(cb), size_minus("y", axis, cb + ce)}),
          "asymmetric pads: crop the rest");
  }
}

// ---- pools ----------------------------------------------------------------------------------------

// ATen pools with a symmetric pad of at most half the kernel; other pads are added explicitly (-inf
// for max, zeros for average) and ATen pools without padding. ATen keeps ceil-mode windows that
// start in explicitly added right padding, ONNX drops them: crop_to cuts the output to the graph's
// shape.
// A window pool's pads as ONNX resolves them, its ceil mode, and whether ATen's own (symmetric, at most half the
// kernel) padding takes them.
struct PoolPlan {
  ops::Pads p;
  Ints dil;
  bool ceil = false;
  bool native = false;
};

PoolPlan pool_plan(const ir::Graph& g, const ir::Node& n, bool is_max) {
  const Ints &k = core::attr_ints(n.attrs, "kernel_shape"), &strides = core::attr_ints(n.attrs, "strides");
  const std::string& auto_pad = core::attr_s(n.attrs, "auto_pad");
  PoolPlan plan;
  // MaxPool's dilations spread the window over dil*(k-1)+1 cells (SAME pads follow that extent).
  plan.dil = is_max && n.attrs.count("dilations") ? core::attr_ints(n.attrs, "dilations") : Ints(k.size(), 1);
  Ints extent(k.size());
  for (size_t i = 0; i < k.size(); ++i) extent[i] = plan.dil[i] * (k[i] - 1) + 1;
  plan.p = ops::resolve_pads(auto_pad, core::attr_ints(n.attrs, "pads"), g.types.at(n.inputs.at(0)).shape, extent,
                             strides);
  // ONNX: ceil_mode has no effect unless the pads are explicit.
  plan.ceil = auto_pad == "NOTSET" && core::attr_i(n.attrs, "ceil_mode") == 1;
  plan.native = plan.p.symmetric();
  for (size_t i = 0; i < k.size() && plan.native; ++i)
    if (plan.p.begin[i] > k[i] / 2) plan.native = false;
  return plan;
}

// The pool of input `x0` (a quantized twin's: its quantized tensor).
void lower_window_pool(const Node& c, const std::string& x0 = "x0") {
  const Ints &k = c.is("kernel_shape"), &strides = c.is("strides");
  const bool is_max = c.n.op.rfind("max_pool", 0) == 0 || c.n.op == "qlinear_max_pool2d";
  const PoolPlan plan = pool_plan(c.g, c.n, is_max);
  const ops::Pads& p = plan.p;
  const Ints& dil = plan.dil;
  const bool ceil = plan.ceil, native = plan.native;
  const std::string nd = k.size() == 1 ? "1d" : "2d";
  const Ints zero(k.size(), 0);
  const Ints out_shape(c.out_shape().begin(), c.out_shape().end());
  auto crop = [&] { c.y(call("crop_to", {tensor("y"), ints(out_shape)})); };
  if (is_max) {
    std::string in = x0;
    Ints padding = p.begin;
    if (!native) {
      c.let("xp",
            call("torch.constant_pad_nd", {tensor(x0), ints(torch_pad_order(p.begin, p.end)),
                                           literal(-std::numeric_limits<double>::infinity())}),
            "padded cells win only a window of -inf cells (a tie); a quantized tensor pads with its lowest "
            "integer (measured), which ties at most");
      in = "xp";
      padding = zero;
    }
    c.y(call("F.max_pool" + nd,
             {tensor(in), ints(k), ints(strides), ints(padding), ints(dil), boolean(ceil)}));
    return crop();
  }
  const bool include_pad = c.i("count_include_pad") == 1;
  if (native) {
    c.y(call("F.avg_pool" + nd,
             {tensor(x0), ints(k), ints(strides), ints(p.begin), boolean(ceil), boolean(include_pad)}));
    return crop();
  }
  const Ints tp = torch_pad_order(p.begin, p.end);
  if (include_pad) {
    // Zero cells added explicitly are counted like ATen counts its own padding; the divisor still
    // stops at the padded input's end, as in ONNX.
    c.let("xp", call("torch.constant_pad_nd", {tensor(x0), ints(tp), literal(0.0)}));
    c.y(call("F.avg_pool" + nd, {tensor("xp"), ints(k), ints(strides), ints(zero), boolean(ceil), boolean(true)}));
    return crop();
  }
  // Excluding asymmetric pads from the divisor: window sums of the zero-padded input divided by
  // window sums of a zero-padded mask of ones (avg_pool2d with divisor 1 gives both sums). The
  // 1-D case runs as a 2-D pool over [N, C, 1, L].
  const bool one_d = k.size() == 1;
  Ints k2 = k, s2 = strides, p2 = tp;
  if (one_d) {
    k2.insert(k2.begin(), 1);
    s2.insert(s2.begin(), 1);
    p2.insert(p2.end(), {0, 0});
  }
  Ints plane{1, 1};
  if (one_d) plane.push_back(1);
  for (size_t d = 2; d < c.in_shape().size(); ++d) plane.push_back(c.in_shape()[d]);
  c.let("x", one_d ? call(".unsqueeze", {tensor(x0), int_(2)}) : var(x0));
  c.let("mask", call("torch.ones", {ints(plane), kw("dtype", dtype_of("x"))}));
  auto window_sums = [&](const std::string& v) {
    return call("F.avg_pool2d", {tensor(call("torch.constant_pad_nd", {tensor(v), ints(p2), literal(0.0)})), ints(k2),
                                 ints(s2), ints({0, 0}), boolean(ceil), boolean(true), int_(1)});
  };
  c.let("sums", window_sums("x"));
  c.let("counts", window_sums("mask"));
  // Windows that start in the right padding hold no input cell (count 0); they are cropped below,
  // but a 0/0 there would send NaN back through the division, so those counts become 1.
  c.y(call("torch.div", {tensor("sums"), tensor(call(".clamp_min", {tensor("counts"), literal(1.0)}))}));
  if (one_d) c.y(call(".squeeze", {tensor("y"), int_(2)}));
  crop();
}

void lower_global_pool(const Node& c, const std::string& x0 = "x0") {
  const int64_t spatial = c.rank() - 2;
  if (spatial < 1 || spatial > 3)
    throw LoweringError("node '" + c.n.name + "': global pool over rank " + std::to_string(c.rank()));
  const std::string kind = c.n.op == "global_max_pool" ? "max" : "avg";
  c.y(call("F.adaptive_" + kind + "_pool" + std::to_string(spatial) + "d",
           {tensor(x0), ints(Ints(static_cast<size_t>(spatial), 1))}));
}

// ---- resize ---------------------------------------------------------------------------------------

// ATen's resize kernels per axis: upsample_nearest2d ("nearest": floor(o * in/out)),
// _upsample_nearest_exact2d ("nearest-exact": floor((o + 0.5) * in/out)), upsample_bilinear2d and
// upsample_bicubic2d (Keys' kernel with a = -0.75, edge cells for indices outside the axis) with
// align_corners false (half-pixel) or true.
enum class Kernel {
  None,
  Nearest,
  NearestExact,
  BilinearHalfPixel,
  BilinearAlignCorners,
  BicubicHalfPixel,
  BicubicAlignCorners,
  Any
};

struct AxisChoice {
  Kernel kernel = Kernel::None;
  std::string why;  // when None
};

// Whether half_pixel's source coordinate (o + 0.5) * in/out - 0.5 (with a given scale (o + 0.5) / scale
// - 0.5) lands exactly half-way between two cells for some output o (where ONNX's round_prefer_floor
// and ATen's round-half-up differ). A float32 scale times a small integer is exact in double.
bool half_pixel_has_ties(int64_t in, int64_t out, double scale) {
  for (int64_t o = 0; o < out; ++o) {
    if (scale > 0) {
      const double c = (static_cast<double>(o) + 0.5) / scale;
      if (c == std::floor(c)) return true;
    } else if (((2 * o + 1) * in) % (2 * out) == 0) {
      return true;
    }
  }
  return false;
}

// `scale`: the node's given scale on this axis (ops::resize_given_scale), 0 for out / in; ATen's
// kernels divide by it when it is passed on (F.interpolate's scale_factor, recompute_scale_factor=False).
AxisChoice nearest_axis(const std::string& ctm, const std::string& nm, int64_t in, int64_t out, double scale) {
  // One input cell, or an unchanged length with an integral coordinate: every mode picks cell o.
  if (in == 1 || (in == out && scale == 0 && ctm != "tf_half_pixel_for_nn" && ctm != "tf_crop_and_resize"))
    return {Kernel::Any, ""};
  if ((ctm == "align_corners" || ctm == "pytorch_half_pixel") && out == 1) return {Kernel::Nearest, ""};  // x = 0
  if (ctm == "asymmetric") {
    if (nm == "floor") return {Kernel::Nearest, ""};
    return {Kernel::None, "libtorch's nearest upsampling rounds the asymmetric coordinate down only; nearest_mode '" +
                              nm + "' has no libtorch equivalent"};
  }
  if (ctm == "tf_half_pixel_for_nn") {
    if (nm == "floor") return {Kernel::NearestExact, ""};  // floor((o + 0.5) * in/out)
    return {Kernel::None, "tf_half_pixel_for_nn with nearest_mode '" + nm + "' has no libtorch equivalent"};
  }
  if (ctm == "half_pixel" || ctm == "pytorch_half_pixel") {
    // nearest-exact rounds the half-pixel coordinate half-up, i.e. round_prefer_ceil.
    if (nm == "round_prefer_ceil") return {Kernel::NearestExact, ""};
    if (nm == "round_prefer_floor" && !half_pixel_has_ties(in, out, scale)) return {Kernel::NearestExact, ""};
    if (nm == "round_prefer_floor")
      return {Kernel::None, "half_pixel with round_prefer_floor hits exact half-way coordinates for " +
                                std::to_string(in) + " -> " + std::to_string(out) +
                                "; libtorch's nearest-exact rounds them up"};
    return {Kernel::None, ctm + " with nearest_mode '" + nm + "' has no libtorch equivalent (nearest-exact rounds)"};
  }
  return {Kernel::None, "libtorch's nearest upsampling has no '" + ctm + "' coordinate mode"};
}

AxisChoice bilinear_axis(const std::string& ctm, int64_t in, int64_t out, double scale) {
  if (in == 1) return {Kernel::Any, ""};  // every coordinate reads cell 0 (a crop's too: start * 0)
  if (ctm == "align_corners") return {Kernel::BilinearAlignCorners, ""};  // and 0 when out = 1, like ONNX
  if (ctm == "half_pixel") return {Kernel::BilinearHalfPixel, ""};
  if (ctm == "pytorch_half_pixel")
    return {out > 1 ? Kernel::BilinearHalfPixel : Kernel::BilinearAlignCorners, ""};  // out = 1 reads cell 0
  if (ctm == "asymmetric") {
    if (in == out && scale == 0) return {Kernel::Any, ""};
    if (out == 1) return {Kernel::BilinearAlignCorners, ""};
    return {Kernel::None, "libtorch's bilinear upsampling has no asymmetric (x / scale) coordinate mode"};
  }
  return {Kernel::None, "libtorch's bilinear upsampling has no '" + ctm + "' coordinate mode"};
}

// ATen's bicubic kernel places its taps as ONNX cubic does (floor(x)-1 .. floor(x)+2, edge cells
// outside), with its coefficient fixed and every tap read; its half-pixel coordinate is not clamped.
AxisChoice bicubic_axis(const ir::Node& n, int64_t in, int64_t out, double scale) {
  const double a = core::attr_f(n.attrs, "cubic_coeff_a");
  if (a != -0.75)
    return {Kernel::None, "libtorch's bicubic upsampling has its cubic coefficient fixed at -0.75, not " +
                              core::to_string(core::AttrValue(a))};
  if (core::attr_i(n.attrs, "exclude_outside") != 0)
    return {Kernel::None, "libtorch's bicubic upsampling reads the edge cell for taps outside the input "
                          "(no exclude_outside)"};
  const AxisChoice b = bilinear_axis(core::attr_s(n.attrs, "coordinate_transformation_mode"), in, out, scale);
  switch (b.kernel) {
    case Kernel::BilinearHalfPixel:
      return {Kernel::BicubicHalfPixel, ""};
    case Kernel::BilinearAlignCorners:
      return {Kernel::BicubicAlignCorners, ""};
    case Kernel::None: {
      std::string why = b.why;
      if (auto at = why.find("bilinear"); at != std::string::npos) why.replace(at, 8, "bicubic");
      return {Kernel::None, why};
    }
    default:
      return b;
  }
}

bool is_resize(const std::string& op) {
  return op == "resize_nearest" || op == "resize_bilinear" || op == "resize_bicubic";
}

// The kernel per axis (H, W) of a resize node.
std::pair<AxisChoice, AxisChoice> resize_plan(const ir::Graph& g, const ir::Node& n) {
  const std::string& ctm = core::attr_s(n.attrs, "coordinate_transformation_mode");
  const core::Shape& x = g.types.at(n.inputs.at(0)).shape;
  const Ints& sizes = core::attr_ints(n.attrs, "sizes");
  auto axis = [&](size_t i) {
    const double s = ops::resize_given_scale(n.attrs, i);
    if (n.op == "resize_bicubic") return bicubic_axis(n, x[i + 2], sizes[i], s);
    if (n.op == "resize_bilinear") return bilinear_axis(ctm, x[i + 2], sizes[i], s);
    return nearest_axis(ctm, core::attr_s(n.attrs, "nearest_mode"), x[i + 2], sizes[i], s);
  };
  AxisChoice h = axis(0), w = axis(1);
  // "Any" follows the other axis, so one ATen call covers both where possible.
  const Kernel fallback = n.op == "resize_bicubic"    ? Kernel::BicubicHalfPixel
                          : n.op == "resize_bilinear" ? Kernel::BilinearHalfPixel
                                                      : Kernel::Nearest;
  if (h.kernel == Kernel::Any) h.kernel = w.kernel == Kernel::Any || w.kernel == Kernel::None ? fallback : w.kernel;
  if (w.kernel == Kernel::Any) w.kernel = h.kernel == Kernel::None ? fallback : h.kernel;
  return {h, w};
}

// `scales` (given scales, one per axis) empty: F.interpolate to `size`; else F.interpolate by
// scale_factor with recompute_scale_factor=False, so ATen divides the coordinate by the given scale.
CallPtr interpolate(Kernel k, const std::string& x, const Ints& size, const std::vector<double>& scales) {
  std::vector<Arg> args{tensor(x), scales.empty() ? kw("size", ints(size)) : kw("scale_factor", flts(scales))};
  switch (k) {
    case Kernel::Nearest:
      args.push_back(kw("mode", str("nearest")));
      break;
    case Kernel::NearestExact:
      args.push_back(kw("mode", str("nearest-exact")));
      break;
    case Kernel::BicubicHalfPixel:
    case Kernel::BicubicAlignCorners:
      args.push_back(kw("mode", str("bicubic")));
      args.push_back(kw("align_corners", boolean(k == Kernel::BicubicAlignCorners)));
      break;
    default:
      args.push_back(kw("mode", str("bilinear")));
      args.push_back(kw("align_corners", boolean(k == Kernel::BilinearAlignCorners)));
  }
  if (!scales.empty()) args.push_back(kw("recompute_scale_factor", boolean(false)));
  return call("F.interpolate", args);
}

void lower_resize(const Node& c) {
  const auto [h, w] = resize_plan(c.g, c.n);
  const Ints& sizes = c.is("sizes");
  const std::vector<double>& scales = core::attr_floats(c.n.attrs, "scales");
  if (h.kernel == w.kernel) return c.y(interpolate(h.kernel, "x0", sizes, scales));
  // Different kernels per axis: resizing is separable, so resize the height, then the width (a
  // length kept unchanged, or scaled by 1, is the identity in every ATen kernel).
  auto only = [&](size_t axis) {
    if (scales.empty()) return scales;
    return axis == 0 ? std::vector<double>{scales[0], 1.0} : std::vector<double>{1.0, scales[1]};
  };
  c.let("t", interpolate(h.kernel, "x0", {sizes[0], c.in_shape()[3]}, only(0)), "height, then width (separable)");
  c.y(interpolate(w.kernel, "t", sizes, only(1)));
}

void add_spatial(Table& t) {
  for (const char* op : {"conv1d", "conv2d", "conv3d"}) t[op] = lower_conv;
  t["conv_transpose2d"] = lower_conv_transpose;
  for (const char* op : {"max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d"})
    t[op] = [](const Node& c) { lower_window_pool(c); };
  for (const char* op : {"global_max_pool", "global_avg_pool"}) t[op] = [](const Node& c) { lower_global_pool(c); };
  for (const char* op : {"resize_nearest", "resize_bilinear", "resize_bicubic"}) t[op] = lower_resize;
}

// ---- quantized: ONNX's QLinear operators on libtorch's quantized tensors ----------------------------------

// libtorch's quantized convolution and linear take quint8 activations and qint8 weights (measured on both
// engines of this build: "data type of input should be QUint8"). An int8 value v with zero point z holds the same
// real values as the uint8 v + 128 with zero point z + 128, and a uint8 weight as the int8 v - 128: the shift is
// exact, so int8 activations and uint8 weights run through them too.
struct Quant {
  std::string var;
  int64_t zp;
};

core::DType type_named(const std::string& t) { return t == "int8" ? core::DType::I8 : core::DType::U8; }

// `x` (an integer tensor of type `have`, zero point `zp`) as `want` ("uint8" or "int8"), in `out` when shifted.
Quant as_type(const Node& c, const std::string& x, core::DType have, const std::string& want, int64_t zp,
              const std::string& out) {
  if (have == type_named(want)) return {x, zp};
  const int64_t d = want == "uint8" ? 128 : -128;
  const CallPtr wide = call(".to", {tensor(x), dtype("int16")});
  c.let(out, call(".to", {tensor(call("torch.add", {tensor(wide), int_(d)})), dtype(want)}),
        "as " + want + " with zero point " + std::to_string(zp + d) + ": the same real values");
  return {out, zp + d};
}

CallPtr quantized(const Quant& q, double scale) {
  return call("torch._make_per_tensor_quantized_tensor", {tensor(q.var), flt(scale), int_(q.zp)});
}

// The zero point of libtorch's quint8 result for the node's output type (`to`).
int64_t result_zero_point(const Node& c) { return c.i("y_zero_point") + (c.s("to") == "int8" ? 128 : 0); }

// y = the integers of libtorch's quint8 result `q`, as the node's output type.
void quantized_result(const Node& c, CallPtr q) {
  c.y(call(".int_repr", {tensor(std::move(q))}));
  if (c.s("to") == "int8") as_type(c, "y", core::DType::U8, "int8", result_zero_point(c), "y");
}

// The weight's output channels: a convolution's weight dimension 0, a matmul's column (weight [K, N]).
int64_t weight_channels(const Node& c) { return c.in_shape(1).at(c.n.op == "qlinear_conv2d" ? 0 : 1); }

// The quantized weight `w` (input 1 of type w_type, its output channels along axis 0) as qint8: per tensor, or per
// channel (w_scales) as torch._make_per_channel_quantized_tensor with float64 scales and int64 zero points, axis 0.
CallPtr quantized_weight(const Node& c, const std::string& w) {
  const Quant q = as_type(c, w, type_named(c.s("w_type")), "int8", c.i("w_zero_point"), "wi");
  if (!ops::per_channel_weight(c.n.attrs)) return quantized(q, c.f("w_scale"));
  const int64_t shift = q.zp - c.i("w_zero_point");  // -128 for a uint8 weight, else 0
  Ints zps;
  for (const double z : ops::weight_zero_points(c.n.attrs, weight_channels(c)))
    zps.push_back(static_cast<int64_t>(z) + shift);
  c.let("ws", call("torch.tensor", {flts(ops::weight_scales(c.n.attrs, weight_channels(c))), kw("dtype",
                                                                                                  dtype("float64"))}),
        "the weight's scale per output channel");
  c.let("wz", call("torch.tensor", {ints(zps), kw("dtype", dtype("int64"))}), "its zero point per output channel");
  return call("torch._make_per_channel_quantized_tensor", {tensor(q.var), tensor("ws"), tensor("wz"), int_(0)});
}

// quantized::conv2d's packed weight carries a float32 bias, which libtorch quantizes back with the scale
// x_scale * w_scale (per channel x_scale * w_scales[c]): the int32 bias times that scale (in float64, then rounded
// once) is given.
void lower_qconv(const Node& c) {
  Quant x = as_type(c, "x0", c.g.types.at(c.n.inputs[0]).dtype, "uint8", c.i("x_zero_point"), "xu");
  Ints padding;
  std::tie(x.var, padding) =
      conv_input(c, x.var, flt(static_cast<double>(x.zp)), "asymmetric pads, holding the zero point");
  Arg bias = none();
  if (c.i("bias") == 1) {
    // x_scale and each weight scale are float32: their product is exact in float64.
    Arg bias_scale = flt(c.f("x_scale") * c.f("w_scale"));
    if (ops::per_channel_weight(c.n.attrs)) {
      std::vector<double> units;
      for (const double ws : ops::weight_scales(c.n.attrs, weight_channels(c)))
        units.push_back(static_cast<double>(static_cast<float>(c.f("x_scale"))) * ws);
      c.let("bs", call("torch.tensor", {flts(units), kw("dtype", dtype("float64"))}),
            "x_scale * w_scales[c], exact in float64");
      bias_scale = tensor("bs");
    }
    c.let("b", call(".to", {tensor(call("torch.mul", {tensor(call(".to", {tensor("x2"), dtype("float64")})),
                                                         bias_scale})),
                            dtype("float32")}),
          "the int32 bias in real units");
    bias = tensor("b");
  }
  const CallPtr packed = call("torch.ops.quantized.conv2d_prepack",
                              {tensor(quantized_weight(c, "x1")), bias, ints(c.is("strides")), ints(padding),
                               ints(c.is("dilations")), int_(c.i("group"))});
  quantized_result(c, call("torch.ops.quantized.conv2d", {tensor(quantized(x, c.f("x_scale"))), tensor(packed),
                                                          flt(c.f("y_scale")), int_(result_zero_point(c))}));
}

// QLinearMatMul's weight [K, N] is libtorch's linear weight [N, K] transposed.
void lower_qmatmul(const Node& c) {
  const Quant x = as_type(c, "x0", c.g.types.at(c.n.inputs[0]).dtype, "uint8", c.i("a_zero_point"), "xu");
  c.let("wt", call(".contiguous", {tensor(call("torch.permute", {tensor("x1"), ints({1, 0})}))}),
        "the weight [K, N] as the linear weight [N, K]");
  const CallPtr packed = call("torch.ops.quantized.linear_prepack", {tensor(quantized_weight(c, "wt")), none()});
  quantized_result(c, call("torch.ops.quantized.linear", {tensor(quantized(x, c.f("a_scale"))), tensor(packed),
                                                          flt(c.f("y_scale")), int_(result_zero_point(c))}));
}

// ---- the quantized twins (ops/qlinear.cpp): libtorch's quantized operators with output scale and zero point ------

// Each data input k as a quantized tensor of its own type (int8 as qint8, uint8 as quint8: libtorch's operators
// below take both, so no shift), with x_scales[k] (as float32, the reference's scale) and x_zero_points[k]; the
// result's integers are the node's output of type `to`.
double f32(double v) { return static_cast<double>(static_cast<float>(v)); }

std::vector<CallPtr> twin_inputs(const Node& c) {
  const std::vector<double>& scales = core::attr_floats(c.n.attrs, "x_scales");
  const Ints& zps = c.is("x_zero_points");
  std::vector<CallPtr> qs;
  for (size_t k = 0; k < c.n.inputs.size(); ++k) {
    const std::string q = "q" + std::to_string(k);
    c.let(q, quantized({"x" + std::to_string(k), zps.at(k)}, f32(scales.at(k))),
          "input " + std::to_string(k) + " as a quantized tensor");
    qs.push_back(var(q));
  }
  return qs;
}

// The output scale and zero point a quantized operator is given.
Arg y_scale(const Node& c) { return flt(f32(c.f("y_scale"))); }
Arg y_zero_point(const Node& c) { return int_(c.i("y_zero_point")); }

void lower_twin(const Node& c) {
  const std::vector<CallPtr> q = twin_inputs(c);
  const std::string& op = c.n.op;
  if (op == "qlinear_add" || op == "qlinear_mul") {
    const std::string fn = op == "qlinear_add" ? "torch.ops.quantized.add" : "torch.ops.quantized.mul";
    c.y(call(fn, {tensor(q[0]), tensor(q[1]), y_scale(c), y_zero_point(c)}));
  } else if (op == "qlinear_concat") {
    c.y(call("torch.ops.quantized.cat", {tensors(q), int_(c.i("axis")), y_scale(c), y_zero_point(c)}));
  } else if (op == "qlinear_leaky_relu") {
    c.y(call("torch.ops.quantized.leaky_relu",
             {tensor(q[0]), flt(c.f("alpha")), boolean(false), y_scale(c), y_zero_point(c)}));
  } else if (op == "qlinear_sigmoid") {
    c.y(call("torch.ops.quantized.sigmoid", {tensor(q[0]), y_scale(c), y_zero_point(c)}));
  } else if (op == "qlinear_avg_pool2d" || op == "qlinear_max_pool2d") {
    // libtorch's quantized pools keep the input's scale and zero point: the support rule asks ONNX's output to
    // have them too, so no requantization follows.
    lower_window_pool(c, "q0");
  } else {
    lower_global_pool(c, "q0");
  }
  c.y(call(".int_repr", {tensor("y")}));
}

// quantize_linear's / dequantize_linear's per-axis parameters (scales, zero_points along axis) as libtorch's
// per-channel quantizer takes them: "qs" float64 scales, "qz" int64 zero points; returns the axis, >= 0.
int64_t per_axis_params(const Node& c) {
  const auto rank = static_cast<int64_t>(c.in_shape().size());
  const int64_t axis = c.i("axis") < 0 ? c.i("axis") + rank : c.i("axis");
  const int64_t n = c.in_shape()[static_cast<size_t>(axis)];
  Ints zps;
  for (const double z : ops::weight_zero_points(c.n.attrs, n, "")) zps.push_back(static_cast<int64_t>(z));
  c.let("qs", call("torch.tensor", {flts(ops::weight_scales(c.n.attrs, n, "")), kw("dtype", dtype("float64"))}),
        "the scale per index of axis " + std::to_string(axis));
  c.let("qz", call("torch.tensor", {ints(zps), kw("dtype", dtype("int64"))}), "the zero point per index");
  return axis;
}

void add_quantized(Table& t) {
  // Per axis: torch.quantize_per_channel and a per-channel quantized tensor's dequantize.
  t["quantize_linear"] = [](const Node& c) {
    const std::string q = c.s("to") == "int8" ? "qint8" : "quint8";
    if (ops::per_channel_weight(c.n.attrs, "")) {
      const int64_t axis = per_axis_params(c);
      c.y(call(".int_repr", {tensor(call("torch.quantize_per_channel",
                                         {tensor("x0"), tensor("qs"), tensor("qz"), int_(axis), dtype(q)}))}));
      return;
    }
    c.y(call(".int_repr",
             {tensor(call("torch.quantize_per_tensor", {tensor("x0"), flt(c.f("scale")), int_(c.i("zero_point")),
                                                        dtype(q)}))}));
  };
  t["dequantize_linear"] = [](const Node& c) {
    if (ops::per_channel_weight(c.n.attrs, "")) {
      const int64_t axis = per_axis_params(c);
      c.y(call(".dequantize", {tensor(call("torch._make_per_channel_quantized_tensor",
                                           {tensor("x0"), tensor("qs"), tensor("qz"), int_(axis)}))}));
      return;
    }
    c.y(call(".dequantize", {tensor(quantized({"x0", c.i("zero_point")}, c.f("scale")))}));
  };
  t["qlinear_conv2d"] = lower_qconv;
  t["qlinear_matmul"] = lower_qmatmul;
  for (const char* op : {"qlinear_add", "qlinear_mul", "qlinear_avg_pool2d", "qlinear_global_avg_pool",
                         "qlinear_max_pool2d", "qlinear_concat", "qlinear_leaky_relu", "qlinear_sigmoid"})
    t[op] = lower_twin;
}

const Table& table() {
  static const Table t = [] {
    Table t;
    add_elementwise(t);
    add_shape(t);
    add_reduce(t);
    add_network(t);
    add_spatial(t);
    add_quantized(t);
    return t;
  }();
  return t;
}

// ---- describing statements ------------------------------------------------------------------------

std::string describe(const Call& c);

std::string describe(const Arg& a) {
  std::string s = a.keyword.empty() ? "" : a.keyword + "=";
  switch (a.kind) {
    case Arg::Kind::Tensor:
      return s + describe(*a.t);
    case Arg::Kind::Tensors: {
      s += "[";
      for (size_t i = 0; i < a.ts.size(); ++i) s += (i ? ", " : "") + describe(*a.ts[i]);
      return s + "]";
    }
    case Arg::Kind::Int:
      return s + std::to_string(a.i);
    case Arg::Kind::Ints: {
      s += "[";
      for (size_t i = 0; i < a.ints.size(); ++i) s += (i ? ", " : "") + std::to_string(a.ints[i]);
      return s + "]";
    }
    case Arg::Kind::Float: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", a.f);
      return s + "float " + buf;
    }
    case Arg::Kind::Floats: {
      s += "(";
      for (size_t i = 0; i < a.fs.size(); ++i) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.17g", a.fs[i]);
        s += (i ? ", " : "") + std::string(buf);
      }
      return s + ")";
    }
    case Arg::Kind::Bool:
      return s + (a.b ? "true" : "false");
    case Arg::Kind::Str:
      return s + "'" + a.s + "'";
    case Arg::Kind::None:
      return s + "none";
    case Arg::Kind::DTypeOf:
      return s + "dtype of " + describe(*a.t);
    case Arg::Kind::SizeMinus:
      return s + "size(" + describe(*a.t) + ", " + std::to_string(a.i) + ") - " + std::to_string(a.minus);
    case Arg::Kind::DType:
      return s + "torch." + a.s;
  }
  return s;
}

std::string describe(const Call& c) {
  if (c.fn.empty()) return c.var;
  std::string s = c.fn + "(";
  for (size_t i = 0; i < c.args.size(); ++i) s += (i ? ", " : "") + describe(c.args[i]);
  return s + ")";
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

// What libtorch's quantized convolution and linear cannot take (measured with python3-torch 1.13). Per-channel
// weights (w_scales: a qint8 tensor quantized per channel along the output channels) run on both engines; each
// rule holds for every channel's scale and zero point.
Support quantized_support(const ir::Graph& g, const ir::Node& n, const std::string& qengine) {
  const bool u8_weight = core::attr_s(n.attrs, "w_type") == "uint8";
  const core::Shape& w_shape = g.types.at(n.inputs.at(1)).shape;
  const int64_t channels = w_shape.at(n.op == "qlinear_conv2d" ? 0 : 1);
  const std::vector<double> w_scales = ops::weight_scales(n.attrs, channels);
  const std::vector<double> w_zps = ops::weight_zero_points(n.attrs, channels);
  if (qengine == "onednn")
    for (size_t ch = 0; ch < w_zps.size(); ++ch) {
      const int64_t wzp = static_cast<int64_t>(w_zps[ch]) - (u8_weight ? 128 : 0);  // as qint8
      if (wzp == 0) continue;
      return Support::no("libtorch's onednn quantized engine takes symmetric weights only (\"ONEDNN only supports "
                         "symmetric quantization of weight, whose zero point must be 0\"); this weight's zero point "
                         "is " + std::to_string(wzp) + " as qint8" +
                         (ops::per_channel_weight(n.attrs) ? " (channel " + std::to_string(ch) + ")" : "") +
                         " (torch:qengine=qnnpack takes it)");
    }
  if (qengine == "qnnpack") {
    // QNNPACK's requantization scale x_scale * w_scale / y_scale (per channel x_scale * w_scales[c] / y_scale) must
    // be a normal float32. libtorch forms it in float32 in an order that differs by operator (measured at the
    // scales' float32 edges: x_scale FLT_MAX, w_scale FLT_MIN, y_scale 1e-3 fails as inf, the other way round runs),
    // so a scale any order takes out of the normal range, or the exact value within 2^-10 of FLT_MIN, is refused.
    const double xs = core::attr_f(n.attrs, n.op == "qlinear_conv2d" ? "x_scale" : "a_scale");
    const double ys = core::attr_f(n.attrs, "y_scale");
    // libtorch pads QNNPACK's weight scales with 1 and checks those channels' scale x_scale / y_scale too, per tensor
    // and per channel (measured: x_scale FLT_MIN, w_scale 4, y_scale 2 fails with "requantization scale: 5.87747e-39").
    std::vector<double> checked = w_scales;
    checked.push_back(1.0);
    for (const double ws : checked) {
      const double exact = xs * ws / ys;
      for (const double m : {f32(f32(xs / ys) * ws), f32(f32(xs * ws) / ys), f32(xs * f32(ws / ys)), exact}) {
        if (m >= FLT_MIN * (1 + 0x1p-10) && m <= FLT_MAX) continue;
        char shown[32];
        std::snprintf(shown, sizeof shown, "%g", exact);
        return Support::no("QNNPACK takes a requantization scale x_scale * w_scale / y_scale that is a normal "
                           "float32 in the float32 products libtorch forms (measured: \"requantization scale must "
                           "be finite and positive\"), this one is " + std::string(shown));
      }
    }
  }
  if (n.op == "qlinear_conv2d" && core::attr_i(n.attrs, "bias") == 1) {
    // The bias in real units, b * x_scale * w_scale (per channel w_scales[c]), must be a normal float32 that
    // rounds back to b.
    const double xs = core::attr_f(n.attrs, "x_scale");
    auto it = g.initializers.find(n.inputs.at(2));
    if (it != g.initializers.end())
      for (int64_t i = 0; i < it->second.numel(); ++i) {
        const double unit = xs * w_scales.at(static_cast<size_t>(i) % w_scales.size());
        const double b = std::abs(it->second.get(i)), real = b * unit;
        if (b > 4194304.0 || (b > 0 && !(real >= FLT_MIN && real <= FLT_MAX)))
          return Support::no("libtorch's quantized convolution takes a float32 bias and quantizes it back with "
                             "x_scale * w_scale: an int32 bias beyond 2^22 in magnitude, or one whose real value "
                             "is not a normal float32, is not held exactly");
      }
  }
  return Support::yes();
}

// A ratio of float32 scales libtorch's engines form in float32 (measured: each rule's bounds hold in float32): the
// exact ratio and the float32 products in every order, all in [lo, hi).
bool ratio_within(const std::vector<double>& factors, double divisor, double lo, double hi) {
  double exact = 1, left = 1;
  for (const double v : factors) exact *= v, left = f32(left * v);
  std::vector<double> forms = {exact, f32(left / divisor)};
  if (factors.size() == 2) forms.push_back(f32(factors[0] * f32(factors[1] / divisor)));
  forms.push_back(f32(f32(factors[0] / divisor) * (factors.size() == 2 ? factors[1] : 1.0)));
  return std::all_of(forms.begin(), forms.end(), [&](double m) { return m >= lo && m < hi; });
}

// What libtorch's quantized operators cannot take for the quantized twins (measured with python3-torch 1.13 on both
// engines of Debian's build; int8 runs as qint8 and uint8 as quint8).
Support twin_support(const ir::Graph& g, const ir::Node& n, const std::string& qengine) {
  const std::vector<double>& xs = core::attr_floats(n.attrs, "x_scales");
  const Ints& xz = core::attr_ints(n.attrs, "x_zero_points");
  const double ys = f32(core::attr_f(n.attrs, "y_scale"));
  const int64_t yz = core::attr_i(n.attrs, "y_zero_point");
  const bool int8 = core::attr_s(n.attrs, "to") == "int8";
  const auto show = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", v);
    return std::string(b);
  };
  if (n.op == "qlinear_max_pool2d") {
    if (f32(xs.at(0)) != ys || xz.at(0) != yz)
      return Support::no("libtorch's quantized max_pool2d keeps the input's scale and zero point: ONNX's y_scale " +
                         show(ys) + " / y_zero_point " + std::to_string(yz) + " differ from the input's " +
                         show(f32(xs.at(0))) + " / " + std::to_string(xz.at(0)));
    // Measured with python3-torch 1.13: quint8 on QNNPACK asserts for one cell (qint8 runs on libtorch's own kernel).
    if (qengine == "qnnpack" && !int8 && core::attr_ints(n.attrs, "kernel_shape") == Ints{1, 1})
      return Support::no("libtorch's quantized max_pool2d on QNNPACK (quint8) refuses a 1x1 kernel (measured: "
                         "\"failed to create max pooling with 1 pooling element: 1x1 pooling is meaningless\", an "
                         "internal assert)");
  }
  if (n.op == "qlinear_avg_pool2d" || n.op == "qlinear_global_avg_pool") {
    if (f32(xs.at(0)) != ys || xz.at(0) != yz)
      return Support::no("libtorch's quantized average pools keep the input's scale and zero point and it has no "
                         "native requantization (a float one would round twice): ONNX's y_scale " + show(ys) +
                         " / y_zero_point " + std::to_string(yz) + " differ from the input's " + show(f32(xs.at(0))) +
                         " / " + std::to_string(xz.at(0)));
    if (n.op == "qlinear_avg_pool2d" && core::attr_i(n.attrs, "count_include_pad") == 0 &&
        !pool_plan(g, n, false).native)
      return Support::no("pads that are asymmetric or beyond half the kernel, excluded from the divisor, take a "
                         "division of window sums, which libtorch's quantized tensors do not have");
    // Measured (campaign seed 13401): libtorch sends quint8 avg_pool2d without ceil mode to QNNPACK, whose average
    // pooling refuses one cell ("1x1 pooling is meaningless"; an exception, not a crash).
    if (n.op == "qlinear_avg_pool2d" && qengine == "qnnpack" && !int8 &&
        core::attr_ints(n.attrs, "kernel_shape") == Ints{1, 1} && !pool_plan(g, n, false).ceil)
      return Support::no("libtorch's quantized avg_pool2d on QNNPACK (quint8, no ceil mode) refuses a 1x1 kernel "
                         "(measured: \"failed to create average pooling with 1 pooling element: 1x1 pooling is "
                         "meaningless\")");
  }
  if (n.op == "qlinear_add" && qengine == "qnnpack") {
    // Measured: qint8 goes to XNNPACK's qs8 add ("xnnp_add(): xnn create operator failed(4)" outside [2^-10, 2^8));
    // quint8 of equal shapes to QNNPACK's add ("scale ratio must be in [2**-14, 2**8) range"); quint8 broadcasting
    // to libtorch's own kernel, which takes any ratio.
    const bool same = g.types.at(n.inputs.at(0)).shape == g.types.at(n.inputs.at(1)).shape;
    const double lo = int8 ? 0x1p-10 : 0x1p-14;
    if (int8 || same)
      for (size_t k = 0; k < 2; ++k)
        if (!ratio_within({f32(xs.at(k))}, ys, lo, 0x1p8))
          return Support::no(std::string("libtorch's quantized add on QNNPACK runs ") +
                             (int8 ? "qint8 through XNNPACK's qs8 add" : "quint8 of equal shapes through QNNPACK") +
                             ", which takes an input-to-output scale ratio in [" + show(lo) +
                             ", 256) only (measured: " +
                             (int8 ? "\"xnn create operator failed\"" : "\"scale ratio must be in [2**-14, 2**8)\"") +
                             "); x_scales[" + std::to_string(k) + "] / y_scale is " + show(f32(xs.at(k)) / ys));
  }
  if (n.op == "qlinear_mul" && int8 && !ratio_within({f32(xs.at(0)), f32(xs.at(1))}, ys, 0x1p-16, 0x1p8))
    return Support::no("libtorch's quantized mul runs qint8 through XNNPACK's qs8 multiply on both engines, which "
                       "takes a product-to-output scale ratio a_scale * b_scale / y_scale in [2^-16, 256) only "
                       "(measured: \"xnnp_mul(): xnn create operator failed(4)\"); this one is " +
                       show(f32(xs.at(0)) * f32(xs.at(1)) / ys));
  if (n.op == "qlinear_sigmoid" && qengine == "qnnpack" && !int8 && (ys != 0x1p-8 || yz != 0))
    return Support::no("libtorch's quantized sigmoid on QNNPACK (quint8) takes the output scale 1/256 and zero point "
                       "0 only (measured: \"only output scale of 1/256 is supported\", an internal assert); this "
                       "one has scale " + show(ys) + " and zero point " + std::to_string(yz));
  return Support::yes();
}

}  // namespace

bool has_lowering(const std::string& op) { return table().count(op) > 0; }

Support support(const ir::Graph& g, const ir::Node& n, const std::string& qengine) {
  if (!has_lowering(n.op)) return Support::no("libtorch has no mapping for operator '" + n.op + "'");
  if (n.op == "qlinear_conv2d" || n.op == "qlinear_matmul") return quantized_support(g, n, qengine);
  if (n.op.rfind("qlinear_", 0) == 0) return twin_support(g, n, qengine);
  if (n.op == "simple_rnn" && core::attr_s(n.attrs, "activation") == "sigmoid")
    return Support::no("torch.nn.RNN's nonlinearity is tanh or relu (at::rnn_tanh, at::rnn_relu): no sigmoid");
  if ((n.op == "lstm" || n.op == "gru") && n.attrs.count("activation") && core::attr_s(n.attrs, "activation") != "tanh")
    return Support::no("torch.nn." + std::string(n.op == "lstm" ? "LSTM" : "GRU") +
                       "'s cell activation is tanh (ONNX activations)");
  if (n.attrs.count("clip") && core::attr_f(n.attrs, "clip") > 0)
    return Support::no("torch.nn's recurrent layers have no cell clip (ONNX clip)");
  if (n.op == "lstm" && core::attr_i(n.attrs, "input_forget") == 1)
    return Support::no("torch.nn.LSTM has no coupled input and forget gates (ONNX input_forget)");
  if (n.op == "lstm" && core::attr_i(n.attrs, "peepholes") == 1)
    return Support::no("torch.nn.LSTM has no peepholes (ONNX LSTM's P)");
  if (n.op == "gru" && core::attr_i(n.attrs, "linear_before_reset") == 0)
    return Support::no("torch.nn.GRU applies the reset gate after W_hn (linear_before_reset=1 only)");
  if (is_resize(n.op)) {
    const auto [h, w] = resize_plan(g, n);
    if (h.kernel == Kernel::None) return Support::no(h.why + " (height)");
    if (w.kernel == Kernel::None) return Support::no(w.why + " (width)");
  }
  return Support::yes();
}

void lower_node(const ir::Graph& g, const ir::Node& n, Sink& sink) {
  auto it = table().find(n.op);
  if (it == table().end()) throw LoweringError("libtorch has no mapping for operator '" + n.op + "'");
  it->second(Node{g, n, sink});
}

std::string describe_assign(const std::vector<std::string>& outs, const Call& e, const std::string& note) {
  return join(outs) + " = " + describe(e) + (note.empty() ? "" : "  # " + note);
}

void RecordingSink::assign(const std::vector<std::string>& outs, const CallPtr& e, const std::string& note) {
  log_.push_back(describe_assign(outs, *e, note));
  inner_.assign(outs, e, note);
}

void RecordingSink::begin_if_requires_grad(const std::vector<std::string>& vars) {
  log_.push_back("if requires_grad(" + join(vars) + ")");
  inner_.begin_if_requires_grad(vars);
}

void RecordingSink::end_if() {
  log_.push_back("end if");
  inner_.end_if();
}

void RecordingSink::comment(const std::string& text) {
  log_.push_back("# " + text);
  inner_.comment(text);
}

}  // namespace quorum::backends::torch
