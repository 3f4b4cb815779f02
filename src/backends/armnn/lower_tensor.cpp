// ArmNN lowering: dense, softmax, reduction, normalisation, shape and loss operators on ArmNN 20.08 layers:
// FullyConnected, Softmax, LogSoftmax, Mean, Pooling2d (max reductions), BatchNormalization,
// Normalization (LRN), Reshape, Transpose, Slice, StridedSlice and Pad. Batch statistics, layer
// norm, the losses, border padding and the recurrent layers are composed of these and elementwise
// layers.
#include <algorithm>
#include <numeric>

#include "backends/armnn/lower_builder.h"

namespace quorum::backends::armnn_lower {
namespace {

using AF = Act;
using BO = BinaryOp;

// Reduced axes of a catalogue reduction (axes = [] reduces every axis).
std::vector<size_t> reduced_axes(const ir::Node& n, size_t rank) {
  const Ints& axes = core::attr_ints(n.attrs, "axes");
  std::vector<size_t> out;
  if (axes.empty()) {
    out.resize(rank);
    std::iota(out.begin(), out.end(), size_t{0});
  } else {
    for (int64_t a : axes) out.push_back(ops::norm_axis(a, rank));
    std::sort(out.begin(), out.end());
  }
  return out;
}

std::vector<size_t> all_axes(size_t rank) {
  std::vector<size_t> v(rank);
  std::iota(v.begin(), v.end(), size_t{0});
  return v;
}

// Maximum over `axes`: ArmNN 20.08 has no max reduction, so the reduced axes are moved last
// (Transpose), flattened (Reshape) and covered by one Pooling2d max window.
Value reduce_max(Builder& b, const Value& x, const std::vector<size_t>& axes, const Shape& out) {
  b.comment(
      "max over the reduced axes: Transpose them last, Reshape to [1, 1, kept, reduced], one Pooling2d max window");
  std::vector<size_t> perm;
  int64_t kept = 1, reduced = 1;
  for (size_t d = 0; d < x.shape.size(); ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) {
      perm.push_back(d);
      kept *= x.shape[d];
    }
  for (size_t d : axes) {
    perm.push_back(d);
    reduced *= x.shape[d];
  }
  const Value flat = b.reshape(b.transpose(x, perm), Shape{1, 1, kept, reduced});
  const Value y = max_window(b, flat, reduced, Shape{1, 1, kept, 1}, "reduce_max");
  return b.reshape(y, out);
}

// (x - mean) / sqrt(var + eps) over `axes` (biased variance), composed of Mean and elementwise
// layers; x has rank <= 4 (ArmNN 20.08's Mean asserts on more).
Value normalise(Builder& b, const Value& x, const std::vector<size_t>& axes, float eps) {
  const Value mu = b.mean(x, axes, true);
  const Value centred = b.binary(BO::Subtraction, x, mu);
  const Value var = b.mean(b.binary(BO::Multiplication, centred, centred), axes, true);
  const Value rstd = b.unary(b.binary(BO::Addition, var, b.scalar_like(eps, var.shape.size())), UnaryOp::Rsqrt);
  return b.binary(BO::Multiplication, centred, rstd);
}

// ---- dense / softmax -----------------------------------------------------------------------------

// x [M, K] times w [rows, K] transposed (plus bias), as a FullyConnected layer.
Value fully_connected(Builder& b, const Value& x, Weights w, std::optional<Weights> bias) {
  const int64_t rows = w.shape[0];
  return b.add(FullyConnectedLayer{std::move(w), std::move(bias)}, {x}, Shape{x.shape[0], rows}, "fully_connected");
}

void build_dense(Builder& b, const ir::Node& n) {
  const ir::Graph& g = b.graph();
  const Value x = b.value(n.inputs[0]);
  const Shape ws = g.types.at(n.inputs[1]).shape;  // [units, K]
  const int64_t K = ws[1], M = core::numel(x.shape) / K;
  const bool has_bias = core::attr_i(n.attrs, "bias") == 1;
  std::optional<Weights> bias;
  if (has_bias) bias = b.weights(n.inputs[2], b.floats(n.inputs[2]), Shape{ws[0]});
  const Value y =
      fully_connected(b, b.reshape(x, Shape{M, K}), b.weights(n.inputs[1], b.floats(n.inputs[1]), ws), bias);
  b.define(n.outputs[0], b.reshape(y, out_shape(g, n)));
}

void build_softmax(Builder& b, const ir::Node& n) {
  const Value x = b.value(n.inputs[0]);
  const SoftmaxLayer d{n.op == "log_softmax",
                       static_cast<int64_t>(ops::norm_axis(core::attr_i(n.attrs, "axis"), x.shape.size())), true};
  b.define(n.outputs[0], b.add(d, {x}, x.shape, n.op));
}

// ---- reductions ----------------------------------------------------------------------------------

void build_reduce(Builder& b, const ir::Node& n) {
  const Value x = b.value(n.inputs[0]);
  const std::vector<size_t> axes = reduced_axes(n, x.shape.size());
  const Shape& out = out_shape(b.graph(), n);
  const bool keep = core::attr_i(n.attrs, "keepdims") == 1;
  Value y;
  if (n.op == "reduce_mean") {
    y = b.mean(x, axes, keep);
  } else if (n.op == "reduce_sum") {
    b.comment("no sum reduction in ArmNN 20.08: Mean scaled back by the element count");
    int64_t count = 1;
    for (size_t a : axes) count *= x.shape[a];
    y = b.activation(b.mean(x, axes, keep), AF::Linear, static_cast<float>(count), 0);
  } else if (n.op == "reduce_max") {
    y = reduce_max(b, x, axes, out);
  } else {
    b.comment("reduce_min = -max(-x)");
    y = b.unary(reduce_max(b, b.unary(x, UnaryOp::Neg), axes, out), UnaryOp::Neg);
  }
  b.define(n.outputs[0], b.reshape(y, out));
}

// ---- normalisation -------------------------------------------------------------------------------

void build_batch_norm(Builder& b, const ir::Node& n) {
  const ir::Graph& g = b.graph();
  const Value x = b.value(n.inputs[0]);
  const float eps = attr_float(n, "epsilon");
  const int64_t N = x.shape[0], C = x.shape[1], cells = core::numel(x.shape) / (N * C);
  if (core::attr_i(n.attrs, "training") == 1) {
    // Batch statistics over N and the spatial cells of [N, C, cells] (Mean takes rank <= 4).
    const Shape cs{1, C, 1};
    const Value xhat = normalise(b, b.reshape(x, Shape{N, C, cells}), {0, 2}, eps);
    const Value y =
        b.binary(BO::Addition, b.binary(BO::Multiplication, xhat, b.constant(b.floats(n.inputs[1]), cs, n.inputs[1])),
                 b.constant(b.floats(n.inputs[2]), cs, n.inputs[2]));
    b.define(n.outputs[0], b.reshape(y, out_shape(g, n)));
    return;
  }
  // BatchNormalization over [N, C, cells, 1].
  const Shape x4{N, C, cells, 1};
  auto stat = [&](size_t i) { return b.weights(n.inputs[i], b.floats(n.inputs[i]), Shape{C}); };
  const BatchNormLayer d{eps, stat(3), stat(4), stat(2), stat(1)};
  const Value y = b.add(d, {b.reshape(x, x4)}, x4, "batch_norm");
  b.define(n.outputs[0], b.reshape(y, out_shape(g, n)));
}

void build_layer_norm(Builder& b, const ir::Node& n) {
  const ir::Graph& g = b.graph();
  const Value x = b.value(n.inputs[0]);
  const size_t axis = ops::norm_axis(core::attr_i(n.attrs, "axis"), x.shape.size());
  int64_t rows = 1;
  for (size_t d = 0; d < axis; ++d) rows *= x.shape[d];
  // Normalised over the trailing axes, flattened to [rows, k].
  const Value xhat = normalise(b, b.reshape(x, Shape{rows, core::numel(x.shape) / rows}), {1},
                               attr_float(n, "epsilon"));
  const Shape& ps = g.types.at(n.inputs[1]).shape;
  const Value y = b.binary(
      BO::Addition,
      b.binary(BO::Multiplication, b.reshape(xhat, x.shape), b.constant(b.floats(n.inputs[1]), ps, n.inputs[1])),
      b.constant(b.floats(n.inputs[2]), ps, n.inputs[2]));
  b.define(n.outputs[0], y);
}

Support lrn_supports(const ir::Graph&, const ir::Node& n) {
  if (core::attr_i(n.attrs, "size") % 2 == 0)
    return Support::no("ArmNN's Normalization window is symmetric (radius size/2); ONNX LRN with an even size is not");
  return Support::yes();
}

void build_lrn(Builder& b, const ir::Node& n) {
  const Value x = b.value(n.inputs[0]);
  const int64_t size = core::attr_i(n.attrs, "size");
  // ArmNN: k + alpha * sum over the window, ONNX: bias + alpha / size * sum.
  const LrnLayer d{size, static_cast<float>(core::attr_f(n.attrs, "alpha") / static_cast<double>(size)),
                   attr_float(n, "beta"), attr_float(n, "bias")};
  b.define(n.outputs[0], b.add(d, {x}, x.shape, "lrn"));
}

// ---- shape ---------------------------------------------------------------------------------------

void build_reshape(Builder& b, const ir::Node& n) {
  b.define(n.outputs[0], b.reshape(b.value(n.inputs[0]), out_shape(b.graph(), n)));
}

void build_transpose(Builder& b, const ir::Node& n) {
  const Value x = b.value(n.inputs[0]);
  const Ints& p = core::attr_ints(n.attrs, "perm");
  std::vector<size_t> perm;
  if (p.empty())
    for (size_t i = x.shape.size(); i-- > 0;) perm.push_back(i);
  else
    perm.assign(p.begin(), p.end());
  b.define(n.outputs[0], b.transpose(x, perm));
}

void build_slice(Builder& b, const ir::Node& n) {
  const Value x = b.value(n.inputs[0]);
  const size_t rank = x.shape.size();
  const Ints& starts = core::attr_ints(n.attrs, "starts");
  const Ints& ends = core::attr_ints(n.attrs, "ends");
  const Ints& axes_attr = core::attr_ints(n.attrs, "axes");
  const Ints& steps = core::attr_ints(n.attrs, "steps");
  Ints begin(rank, 0), end(x.shape.begin(), x.shape.end()), stride(rank, 1);
  int end_mask = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    const size_t a = axes_attr.empty() ? i : ops::norm_axis(axes_attr[i], rank);
    const int64_t dim = x.shape[a];
    auto wrap = [dim](int64_t v) { return v < 0 ? v + dim : v; };
    stride[a] = steps.empty() ? 1 : steps[i];
    if (stride[a] > 0) {
      begin[a] = std::clamp<int64_t>(wrap(starts[i]), 0, dim);
      end[a] = std::clamp<int64_t>(wrap(ends[i]), 0, dim);
      continue;
    }
    // Backwards: start in [0, dim-1], end in [-1, dim-1]; an end of -1 (through element 0) would count from the
    // back in StridedSlice, so the end mask runs to the front instead.
    begin[a] = std::clamp<int64_t>(wrap(starts[i]), 0, dim - 1);
    end[a] = std::clamp<int64_t>(wrap(ends[i]), -1, dim - 1);
    if (end[a] == -1) end[a] = 0, end_mask |= 1 << a;
  }
  const Shape& out = out_shape(b.graph(), n);
  const bool unit_steps = std::all_of(stride.begin(), stride.end(), [](int64_t s) { return s == 1; });
  if (unit_steps) {
    b.define(n.outputs[0], b.reshape(b.slice(x, begin, out), out));
    return;
  }
  b.define(n.outputs[0], b.add(StridedSliceLayer{begin, end, stride, end_mask}, {x}, out, "strided_slice"));
}

// `count` copies of the size-1 slice at index i along axis d: Concat doubling, then one Slice.
Value repeated_slice(Builder& b, const Value& x, size_t d, int64_t i, int64_t count) {
  Ints begin(x.shape.size(), 0);
  begin[d] = i;
  Shape size = x.shape;
  size[d] = 1;
  Value r = b.slice(x, begin, size);
  while (r.shape[d] < count) r = b.concat({r, r}, d);
  size[d] = count;
  return r.shape[d] == count ? r : b.slice(r, Ints(x.shape.size(), 0), size);
}

// Elements first, first - 1, ..., last (first >= last >= 0) along axis d: a StridedSlice with stride -1.
Value reversed_range(Builder& b, const Value& x, size_t d, int64_t first, int64_t last) {
  const size_t rank = x.shape.size();
  Ints begin(rank, 0), end(x.shape.begin(), x.shape.end()), stride(rank, 1);
  begin[d] = first;
  end[d] = last - 1;
  stride[d] = -1;
  // An end of -1 would count from the back: with last == 0 the end mask runs to the front instead.
  Shape out = x.shape;
  out[d] = first - last + 1;
  return b.add(StridedSliceLayer{begin, end, stride, last == 0 ? (1 << d) : 0}, {x}, out, "reverse");
}

// Reflect and edge padding: ArmNN 20.08's Pad layer pads with a constant only, so each padded axis
// becomes a Concat of the border copies around the input (edge: the border slice repeated; reflect:
// the mirrored cells, reversed by a StridedSlice with stride -1).
Value border_pad(Builder& b, Value x, const Ints& begin, const Ints& end, bool reflect) {
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (begin[d] == 0 && end[d] == 0) continue;
    const int64_t len = x.shape[d];
    std::vector<Value> parts;
    if (begin[d] > 0)
      parts.push_back(reflect ? reversed_range(b, x, d, begin[d], 1) : repeated_slice(b, x, d, 0, begin[d]));
    parts.push_back(x);
    if (end[d] > 0)
      parts.push_back(reflect ? reversed_range(b, x, d, len - 2, len - 1 - end[d])
                              : repeated_slice(b, x, d, len - 1, end[d]));
    x = b.concat(parts, d);
  }
  return x;
}

void build_pad(Builder& b, const ir::Node& n) {
  const Value x = b.value(n.inputs[0]);
  const size_t rank = x.shape.size();
  Ints pads = core::attr_ints(n.attrs, "pads");
  if (pads.empty()) pads.assign(2 * rank, 0);
  const Ints begin(pads.begin(), pads.begin() + static_cast<int64_t>(rank));
  const Ints end(pads.begin() + static_cast<int64_t>(rank), pads.end());
  const std::string& mode = core::attr_s(n.attrs, "mode");
  if (mode == "constant")
    b.define(n.outputs[0], b.pad(x, begin, end, static_cast<float>(core::attr_f(n.attrs, "value"))));
  else {
    b.comment(mode + " padding: ArmNN 20.08's Pad is constant only, so each axis is a Concat of border copies");
    b.define(n.outputs[0], border_pad(b, x, begin, end, mode == "reflect"));
  }
}

// ---- recurrent layers ----------------------------------------------------------------------------

// simple_rnn / lstm / gru unrolled over time (ArmNN 20.08 has no GRU or Elman layer): per step two
// FullyConnected layers (W_ih x + b_ih, W_hh h + b_hh), gate slices and activations, from a zero state;
// ONNX's clip a BoundedReLu before each gate's activation, LSTM's input_forget f = 1 - i (a Linear
// activation), GRU's linear_before_reset 0 a third FullyConnected W_hn (r * h) + b_hn, LSTM's peepholes
// a Multiplication by a constant [1, H] and an Addition per gate.
bool rnn_clips(const ir::Node& n) { return core::attr_f(n.attrs, "clip") > 0; }
bool rnn_coupled(const ir::Node& n) { return n.op == "lstm" && core::attr_i(n.attrs, "input_forget") == 1; }
bool rnn_lbr0(const ir::Node& n) { return n.op == "gru" && core::attr_i(n.attrs, "linear_before_reset") == 0; }
bool rnn_peepholes(const ir::Node& n) { return n.op == "lstm" && core::attr_i(n.attrs, "peepholes") == 1; }

// The layers one step adds in build_rnn below.
int64_t rnn_layers_per_step(const ir::Node& n) {
  const int64_t base = n.op == "lstm" ? 18 : n.op == "gru" ? 21 : 7;
  const int64_t gates = n.op == "lstm" ? 4 : n.op == "gru" ? 3 : 1;
  return base + (rnn_clips(n) ? gates : 0) + (rnn_lbr0(n) ? 4 : 0) + (rnn_peepholes(n) ? 6 : 0);
}

Support rnn_supports(const ir::Graph& g, const ir::Node& n) {
  const core::Shape& x = g.types.at(n.inputs[0]).shape;
  const int64_t T = x.size() == 3 ? x[1] : 0;
  return layer_budget(n, ops::rnn_directions(n.attrs) * T * rnn_layers_per_step(n),
                      "unrolled over " + std::to_string(T) + " steps (ArmNN 20.08 has no recurrent layer)");
}

void build_rnn(Builder& b, const ir::Node& n) {
  const ir::Graph& g = b.graph();
  const Value x = b.value(n.inputs[0]);
  const int64_t N = x.shape[0], T = x.shape[1], F = x.shape[2], H = core::attr_i(n.attrs, "hidden_size");
  const int64_t G = n.op == "lstm" ? 4 : n.op == "gru" ? 3 : 1;
  const std::string& direction = core::attr_s(n.attrs, "direction");
  // simple_rnn's f; LSTM's g and h, GRU's g (the gates stay sigmoid).
  const std::string activation = n.attrs.count("activation") ? core::attr_s(n.attrs, "activation") : "tanh";
  const int64_t dirs = ops::rnn_directions(n.attrs);
  const std::vector<float> w_ih = b.floats(n.inputs[1]), w_hh = b.floats(n.inputs[2]), b_ih = b.floats(n.inputs[3]),
                           b_hh = b.floats(n.inputs[4]);
  b.comment(n.op + " (" + direction +
            ") unrolled over time from its initial state: per step FullyConnected(x) + FullyConnected(h), gate slices, "
            "activations");
  auto gate = [&](const Value& v, int64_t k) { return b.slice(v, {0, k * H}, Shape{N, H}); };
  auto sigmoid = [&](const Value& v) { return b.activation(v, AF::Sigmoid); };
  auto tanh = [&](const Value& v) { return b.activation(v, AF::TanH, 1, 1); };
  auto act = [&](const Value& v) {
    return activation == "relu" ? b.activation(v, AF::ReLu) : activation == "sigmoid" ? sigmoid(v) : tanh(v);
  };
  const auto clip = static_cast<float>(core::attr_f(n.attrs, "clip"));
  // BoundedReLu is min(a, max(b, x)): ONNX's clip of a gate's pre-activation.
  auto cl = [&](const Value& v) { return rnn_clips(n) ? b.activation(v, AF::BoundedReLu, clip, -clip) : v; };
  // Direction d's rows of a stacked [D*G*H, ...] parameter.
  auto rows = [&](const std::vector<float>& v, int64_t d) {
    const auto per = static_cast<int64_t>(v.size()) / dirs;
    return std::vector<float>(v.begin() + d * per, v.begin() + (d + 1) * per);
  };
  std::vector<Value> outputs;  // per direction: [N, T, H] (return_sequences) or the final state [N, H]
  for (int64_t d = 0; d < dirs; ++d) {
    const bool back = ops::rnn_walks_back(n.attrs, d);
    const Weights wi = b.weights(n.inputs[1], rows(w_ih, d), Shape{G * H, F});
    const Weights bi = b.weights(n.inputs[3], rows(b_ih, d), Shape{G * H});
    const Weights wh = b.weights(n.inputs[2], rows(w_hh, d), Shape{G * H, H});
    const Weights bh = b.weights(n.inputs[4], rows(b_hh, d), Shape{G * H});
    // GRU with linear_before_reset 0: W_hn and b_hn, the n gate's rows (the last H), on their own.
    auto last_rows = [&](const std::vector<float>& v, int64_t per_row) {
      const std::vector<float> r = rows(v, d);
      return std::vector<float>(r.end() - H * per_row, r.end());
    };
    std::optional<Weights> wn, bn;
    if (rnn_lbr0(n)) {
      wn = b.weights(n.inputs[2] + "_n", last_rows(w_hh, H), Shape{H, H});
      bn = b.weights(n.inputs[4] + "_n", last_rows(b_hh, 1), Shape{H});
    }
    // LSTM peepholes: direction d's p_i, p_f, p_o as constants [1, H], added to a gate as p * c.
    std::vector<Value> peep;
    if (rnn_peepholes(n)) {
      const std::vector<float> pd = rows(b.floats(n.inputs[5]), d);
      for (int64_t k = 0; k < 3; ++k)
        peep.push_back(b.constant(std::vector<float>(pd.begin() + k * H, pd.begin() + (k + 1) * H), Shape{1, H},
                                  "peephole"));
    }
    auto peeped = [&](const Value& pre, size_t k, const Value& cell) {
      return peep.empty() ? pre : b.binary(BO::Addition, pre, b.binary(BO::Multiplication, peep[k], cell));
    };
    // The initial state: zero, or direction d's h0 (and c0) [H] repeated for every sample, as constants [N, H].
    auto initial = [&](int input, const char* hint) {
      std::vector<float> v(static_cast<size_t>(N * H), 0.0f);
      if (input >= 0) {
        const std::vector<float> s = rows(b.floats(n.inputs[static_cast<size_t>(input)]), d);
        for (int64_t k = 0; k < N; ++k) std::copy(s.begin(), s.end(), v.begin() + k * H);
      }
      return b.constant(v, Shape{N, H}, input >= 0 ? hint : "zero_state");
    };
    Value h = initial(ops::rnn_state_input(n.op, n.attrs, false), "initial_h");
    Value c = initial(ops::rnn_state_input(n.op, n.attrs, true), "initial_c");
    std::vector<Value> steps(static_cast<size_t>(T), h);
    for (int64_t s = 0; s < T; ++s) {
      const int64_t t = back ? T - 1 - s : s;
      const Value xt = b.reshape(b.slice(x, {0, t, 0}, Shape{N, 1, F}), Shape{N, F});
      const Value gi = fully_connected(b, xt, wi, bi);
      const Value gh = fully_connected(b, h, wh, bh);
      if (n.op == "simple_rnn") {
        const Value pre = b.binary(BO::Addition, gi, gh);
        const Value p = cl(pre);
        h = act(p);
      } else if (n.op == "lstm") {
        const Value sum = b.binary(BO::Addition, gi, gh);
        const Value i = sigmoid(cl(peeped(gate(sum, 0), 0, c))), gg = act(cl(gate(sum, 2)));
        const Value f = rnn_coupled(n) ? b.activation(i, AF::Linear, -1, 1) : sigmoid(cl(peeped(gate(sum, 1), 1, c)));
        c = b.binary(BO::Addition, b.binary(BO::Multiplication, f, c), b.binary(BO::Multiplication, i, gg));
        const Value o = sigmoid(cl(peeped(gate(sum, 3), 2, c)));
        h = b.binary(BO::Multiplication, o, act(c));
      } else {  // gru: h' = (1 - z) * n + z * h = n + z * (h - n)
        const Value r = sigmoid(cl(b.binary(BO::Addition, gate(gi, 0), gate(gh, 0))));
        const Value z = sigmoid(cl(b.binary(BO::Addition, gate(gi, 1), gate(gh, 1))));
        const Value hn = wn ? fully_connected(b, b.binary(BO::Multiplication, r, h), *wn, bn)
                                     : b.binary(BO::Multiplication, r, gate(gh, 2));
        const Value nn = act(cl(b.binary(BO::Addition, gate(gi, 2), hn)));
        h = b.binary(BO::Addition, nn, b.binary(BO::Multiplication, z, b.binary(BO::Subtraction, h, nn)));
      }
      steps[static_cast<size_t>(t)] = b.reshape(h, Shape{N, 1, H});
    }
    outputs.push_back(core::attr_i(n.attrs, "return_sequences") == 1 ? b.concat(steps, 1) : h);
  }
  const Value y = dirs == 1 ? outputs[0] : b.concat(outputs, outputs[0].shape.size() - 1);
  b.define(n.outputs[0], b.reshape(y, out_shape(g, n)));
}

// ---- losses --------------------------------------------------------------------------------------

void build_mse(Builder& b, const ir::Node& n) {
  const Value d = b.binary(BO::Subtraction, b.value(n.inputs[0]), b.value(n.inputs[1]));
  b.define(n.outputs[0], b.reshape(b.mean(b.activation(d, AF::Square), all_axes(d.shape.size()), false),
                                   out_shape(b.graph(), n)));
}

// mean over N of -sum_c t * log_softmax(p) = -C * mean over [N, C] of t * log_softmax(p).
void build_softmax_ce(Builder& b, const ir::Node& n) {
  const Value p = b.value(n.inputs[0]), t = b.value(n.inputs[1]);
  const Value ls = b.add(SoftmaxLayer{true, 1, false}, {p}, p.shape, "log_softmax");
  const Value m = b.mean(b.binary(BO::Multiplication, t, ls), {0, 1}, false);
  b.define(n.outputs[0],
           b.reshape(b.activation(m, AF::Linear, -static_cast<float>(p.shape[1]), 0), out_shape(b.graph(), n)));
}

// mean over N of max(0, max_c((1-t)*p) - sum_c(t*p) + 1); sum_c is C * Mean over C.
void build_categorical_hinge(Builder& b, const ir::Node& n) {
  const Value p = b.value(n.inputs[0]), t = b.value(n.inputs[1]);
  const int64_t N = p.shape[0], C = p.shape[1];
  const Value pos =
      b.activation(b.mean(b.binary(BO::Multiplication, t, p), {1}, false), AF::Linear, static_cast<float>(C), 0);
  const Value neg = reduce_max(b, b.binary(BO::Multiplication, b.activation(t, AF::Linear, -1, 1), p), {1}, Shape{N});
  const Value hinge = b.activation(b.activation(b.binary(BO::Subtraction, neg, pos), AF::Linear, 1, 1), AF::ReLu);
  b.define(n.outputs[0], b.reshape(b.mean(hinge, {0}, false), out_shape(b.graph(), n)));
}

}  // namespace

void register_tensor(OpTable& t) {
  t["dense"] = OpEntry{{}, build_dense};
  t["softmax"] = OpEntry{{}, build_softmax};
  t["log_softmax"] = OpEntry{{}, build_softmax};
  for (const char* name : {"reduce_mean", "reduce_sum", "reduce_max", "reduce_min"})
    t[name] = OpEntry{{}, build_reduce};
  t["batch_norm"] = OpEntry{{}, build_batch_norm};
  t["layer_norm"] = OpEntry{{}, build_layer_norm};
  t["lrn"] = OpEntry{lrn_supports, build_lrn};
  for (const char* name : {"reshape", "flatten", "squeeze", "unsqueeze"}) t[name] = OpEntry{{}, build_reshape};
  t["transpose"] = OpEntry{{}, build_transpose};
  t["slice"] = OpEntry{{}, build_slice};
  t["pad"] = OpEntry{{}, build_pad};
  for (const char* name : {"simple_rnn", "lstm", "gru"}) t[name] = OpEntry{rnn_supports, build_rnn};
  t["mse_loss"] = OpEntry{{}, build_mse};
  t["softmax_cross_entropy"] = OpEntry{{}, build_softmax_ce};
  t["categorical_hinge"] = OpEntry{{}, build_categorical_hinge};
}

}  // namespace quorum::backends::armnn_lower
