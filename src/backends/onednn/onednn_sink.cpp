// The oneDNN backend's sink (onednn_sink.h): each forward step of the lowering as the backend's
// cached primitives on the run's buffers, and the per-family forward primitive descriptors.
#include "backends/onednn/onednn_sink.h"

#include "core/error.h"

namespace quorum::backends::onednn {

algorithm to_dnnl(lw::Alg a) {
  switch (a) {
#define QUORUM_ONEDNN_ALG_CASE(x) \
  case lw::Alg::x:                \
    return algorithm::x;
    QUORUM_ONEDNN_ALGS(QUORUM_ONEDNN_ALG_CASE)
#undef QUORUM_ONEDNN_ALG_CASE
  }
  throw std::logic_error("unknown oneDNN algorithm");
}

prop_kind to_dnnl(lw::Prop p) {
  return p == lw::Prop::forward_training ? prop_kind::forward_training : prop_kind::forward_inference;
}

memory::desc any_md(const Dims& d) { return memory::desc(d, memory::data_type::f32, memory::format_tag::any); }

// ---- forward primitive descriptors ----

std::string pool_key(const lw::PoolGeo& g) {
  return Key() << static_cast<int>(to_dnnl(g.alg)) << plain_md(g.src) << plain_md(g.dst) << g.kernel << g.strides
               << g.pad_l << g.pad_r;
}

const Cached<dnnl::pooling_v2_forward::primitive_desc>& pool_fwd_pd(const lw::PoolGeo& g, prop_kind prop) {
  return cached<dnnl::pooling_v2_forward::primitive_desc>(Key() << pool_key(g) << static_cast<int>(prop), [&] {
    const Dims dil(g.kernel.size(), 0);
    dnnl::pooling_v2_forward::desc d(prop, to_dnnl(g.alg), plain_md(g.src), plain_md(g.dst), g.strides, g.kernel, dil,
                                     g.pad_l, g.pad_r);
    return dnnl::pooling_v2_forward::primitive_desc(d, cpu_engine());
  });
}

std::string softmax_key(const lw::SoftmaxGeo& g) {
  return Key() << static_cast<int>(to_dnnl(g.alg)) << g.axis << plain_md(g.dims);
}

const Cached<dnnl::softmax_v2_forward::primitive_desc>& softmax_fwd_pd(const lw::SoftmaxGeo& g, prop_kind prop) {
  return cached<dnnl::softmax_v2_forward::primitive_desc>(Key() << softmax_key(g) << static_cast<int>(prop), [&] {
    const memory::desc md = plain_md(g.dims);
    dnnl::softmax_v2_forward::desc d(prop, to_dnnl(g.alg), md, md, g.axis);
    return dnnl::softmax_v2_forward::primitive_desc(d, cpu_engine());
  });
}

std::string resample_key(const lw::ResampleGeo& g) {
  return Key() << static_cast<int>(to_dnnl(g.alg)) << plain_md(g.src) << plain_md(g.dst);
}

const Cached<dnnl::resampling_forward::primitive_desc>& resample_fwd_pd(const lw::ResampleGeo& g, prop_kind prop) {
  return cached<dnnl::resampling_forward::primitive_desc>(Key() << resample_key(g) << static_cast<int>(prop), [&] {
    dnnl::resampling_forward::desc d(prop, to_dnnl(g.alg), plain_md(g.src), plain_md(g.dst));
    return dnnl::resampling_forward::primitive_desc(d, cpu_engine());
  });
}

std::string lrn_key(const lw::LrnGeo& g) { return Key() << plain_md(g.src) << g.size << g.alpha << g.beta << g.bias; }

const Cached<dnnl::lrn_forward::primitive_desc>& lrn_fwd_pd(const lw::LrnGeo& g, prop_kind prop) {
  return cached<dnnl::lrn_forward::primitive_desc>(Key() << lrn_key(g) << static_cast<int>(prop), [&] {
    dnnl::lrn_forward::desc d(prop, algorithm::lrn_across_channels, plain_md(g.src), g.size, g.alpha, g.beta, g.bias);
    return dnnl::lrn_forward::primitive_desc(d, cpu_engine());
  });
}

dnnl::normalization_flags bn_flags(const lw::BnGeo& g) {
  auto f = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  return g.batch_stats ? f : f | dnnl::normalization_flags::use_global_stats;
}

std::string bn_key(const lw::BnGeo& g) {
  return Key() << plain_md(g.src) << g.eps << static_cast<unsigned>(bn_flags(g));
}

const Cached<dnnl::batch_normalization_forward::primitive_desc>& bn_fwd_pd(const lw::BnGeo& g, prop_kind prop) {
  return cached<dnnl::batch_normalization_forward::primitive_desc>(Key() << bn_key(g) << static_cast<int>(prop), [&] {
    dnnl::batch_normalization_forward::desc d(prop, plain_md(g.src), g.eps, bn_flags(g));
    return dnnl::batch_normalization_forward::primitive_desc(d, cpu_engine());
  });
}

std::string ln_key(const lw::LnGeo& g) { return Key() << plain_md({g.rows, g.k}) << g.eps; }

const Cached<dnnl::layer_normalization_forward::primitive_desc>& ln_fwd_pd(const lw::LnGeo& g, prop_kind prop) {
  return cached<dnnl::layer_normalization_forward::primitive_desc>(Key() << ln_key(g) << static_cast<int>(prop), [&] {
    dnnl::layer_normalization_forward::desc d(prop, plain_md({g.rows, g.k}), plain_md({g.rows}), g.eps,
                                              dnnl::normalization_flags::use_scale |
                                                  dnnl::normalization_flags::use_shift);
    return dnnl::layer_normalization_forward::primitive_desc(d, cpu_engine());
  });
}

std::string dense_key(const lw::DenseGeo& g) { return Key() << g.rows << g.in << g.units << g.bias; }

const Cached<dnnl::inner_product_forward::primitive_desc>& dense_fwd_pd(const lw::DenseGeo& g, prop_kind prop) {
  return cached<dnnl::inner_product_forward::primitive_desc>(Key() << dense_key(g) << static_cast<int>(prop), [&] {
    const memory::desc src = plain_md({g.rows, g.in}), w = plain_md({g.units, g.in}), b = plain_md({g.units}),
                       dst = plain_md({g.rows, g.units});
    auto d = g.bias ? dnnl::inner_product_forward::desc(prop, src, w, b, dst)
                    : dnnl::inner_product_forward::desc(prop, src, w, dst);
    return dnnl::inner_product_forward::primitive_desc(d, cpu_engine());
  });
}

memory::desc conv_weight_md(const lw::ConvGeo& g) {
  return g.w_strides.empty() ? plain_md(g.w_dims) : strided_md(g.w_dims, g.w_strides);
}

memory::desc conv_user_dst_md(const lw::ConvGeo& g) { return strided_md(g.dst, dense_strides(g.out)); }

std::string conv_key(const lw::ConvGeo& g) {
  return Key() << g.src << g.dst << conv_weight_md(g) << g.strides << g.dil << g.pad_l << g.pad_r << g.prim_bias();
}

// ---- the sink ----

ExecSink::ExecSink(Env& env, const ir::Node& n, const std::vector<Shape>& out_shapes, bool training, Saved& saved)
    : env_(env), node_(n), out_shapes_(out_shapes), training_(training), saved_(saved) {}

// A training forward that has a workspace keeps it for the backward (pooling's argmax, lrn's).
void ExecSink::keep_workspace(lw::Prop p, const memory::desc& ws, std::unordered_map<int, memory>& args) {
  saved_.workspace = memory();
  if (p == lw::Prop::forward_training && ws.get_size() > 0) {
    saved_.workspace = memory(ws, cpu_engine());
    args[DNNL_ARG_WORKSPACE] = saved_.workspace;
  }
}

const Buf& ExecSink::get(const std::string& v) const {
  const auto it = temps_.find(v);
  return it != temps_.end() ? it->second : env_.value(v);
}

void ExecSink::put(const std::string& v, Buf b) {
  for (size_t i = 0; i < node_.outputs.size(); ++i)
    if (node_.outputs[i] == v) {
      b.shape = out_shapes_[i];  // the same elements; rank 0 was carried as [1]
      env_.values[v] = std::move(b);
      return;
    }
  if (v.empty() || v[0] != '%') saved_.values[v] = b;
  temps_[v] = std::move(b);
}

void ExecSink::alias(const std::string& y, const std::string& x) { put(y, get(x)); }

void ExecSink::constant(const std::string& v, const std::string&, const Shape& shape, const std::vector<float>& data,
                        const std::string&) {
  Buf b(shape);
  b.data = data;
  temps_[v] = std::move(b);
}

void ExecSink::eltwise(const lw::Eltwise& e, const Dims&, const std::string& x, const std::string& y) {
  Buf r = onednn::eltwise(to_dnnl(e.alg), e.alpha, e.beta, get(x));
  if (training_) saved_.step_inputs.push_back(get(x));
  put(y, std::move(r));
}

void ExecSink::binary(lw::Alg alg, const Dims& out, const Dims& ad, const std::string& a, const Dims& bd,
                      const std::string& b, const std::string& y) {
  // The operands as the lowering lays them out (a bias [OC] is [1, OC, 1...]); a plain padding of
  // the rank is left to the building block.
  auto as = [](const Buf& v, const Dims& d) {
    return dims_of(pad_rank(v.shape, d.size())) == d ? v : v.reshaped(Shape(d.begin(), d.end()));
  };
  Buf first = as(get(a), ad);
  const Buf second = as(get(b), bd);
  // The result has the dims the lowering gives it, as the reproducer's binary_op makes it: where
  // they are larger than the operands' broadcast (the first add of a sum over broadcasting inputs),
  // the first operand is materialised at full size first.
  const Shape full(out.begin(), out.end());
  if (broadcast_shapes(first.shape, second.shape) != full) first = broadcast_to(first, full);
  put(y, onednn::binary(to_dnnl(alg), first, second));
}

void ExecSink::sum(const Dims& d, const std::vector<std::string>& xs, const std::string& y) {
  const memory::desc md = plain_md(d);
  const size_t n = xs.size();
  const auto& c = cached<dnnl::sum::primitive_desc>(Key() << "sum" << n << md, [&] {
    return dnnl::sum::primitive_desc(md, std::vector<float>(n, 1.0f), std::vector<memory::desc>(n, md), cpu_engine());
  });
  Buf r(Shape(d.begin(), d.end()));
  std::unordered_map<int, memory> args{{DNNL_ARG_DST, mem(md, r.ptr())}};
  for (size_t i = 0; i < n; ++i) args[DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i)] = mem(md, get(xs[i]).ptr());
  run(c.prim, args);
  put(y, std::move(r));
}

void ExecSink::concat(const Dims& out, int axis, const std::vector<Dims>& ds, const std::vector<std::string>& xs,
                      const std::string& y) {
  std::vector<memory::desc> srcs;
  Key key;
  key << "concat" << axis;
  for (const auto& d : ds) {
    srcs.push_back(plain_md(d));
    key << srcs.back();
  }
  const memory::desc dst = plain_md(out);
  const auto& c = cached<dnnl::concat::primitive_desc>(
      key, [&] { return dnnl::concat::primitive_desc(dst, axis, srcs, cpu_engine()); });
  Buf r(Shape(out.begin(), out.end()));
  std::unordered_map<int, memory> args{{DNNL_ARG_DST, mem(dst, r.ptr())}};
  for (size_t i = 0; i < xs.size(); ++i)
    args[DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i)] = mem(srcs[i], get(xs[i]).ptr());
  run(c.prim, args);
  put(y, std::move(r));
}

void ExecSink::transpose(const Dims& yd, const Dims& permuted_strides, const std::string& x, const std::string& y) {
  Buf r(Shape(yd.begin(), yd.end()));
  copy_view(View{const_cast<float*>(get(x).ptr()), yd, permuted_strides}, view_of(r));
  put(y, std::move(r));
}

void ExecSink::reduce(lw::Alg alg, const Dims&, const std::string& x, const Dims& keep, const std::string& y) {
  put(y, reduce_to(to_dnnl(alg), get(x), Shape(keep.begin(), keep.end())));
}

void ExecSink::softmax(lw::Prop p, const lw::SoftmaxGeo& g, const std::string& x, const std::string& y) {
  const auto& f = softmax_fwd_pd(g, to_dnnl(p));
  const memory::desc md = plain_md(g.dims);
  Buf r(Shape(g.dims.begin(), g.dims.end()));
  run(f.prim, {{DNNL_ARG_SRC, mem(md, get(x).ptr())}, {DNNL_ARG_DST, mem(md, r.ptr())}});
  put(y, std::move(r));
}

void ExecSink::matmul(const Dims& ad, const std::string& a, const Dims& bd, const std::string& b, const Dims& yd,
                      const std::string& y) {
  Buf r(Shape(yd.begin(), yd.end()));
  matmul_raw(plain_md(ad), get(a).ptr(), plain_md(bd), get(b).ptr(), plain_md(yd), r.ptr());
  put(y, std::move(r));
}

void ExecSink::pool(lw::Prop p, const lw::PoolGeo& g, const std::string& x, const std::string& y) {
  const auto& f = pool_fwd_pd(g, to_dnnl(p));
  Buf r(Shape(g.dst.begin(), g.dst.end()));
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(plain_md(g.src), get(x).ptr())},
                                       {DNNL_ARG_DST, mem(plain_md(g.dst), r.ptr())}};
  keep_workspace(p, f.pd.workspace_desc(), args);
  run(f.prim, args);
  put(y, std::move(r));
}

template <class Fwd>
static Buf conv_forward(lw::Prop p, const lw::ConvGeo& g, const Buf& x, const Buf& w, const Buf* b) {
  const auto& f = conv_fwd_pd<Fwd>(g, to_dnnl(p));
  const memory xm = to_layout(mem(plain_md(g.src), x.ptr()), f.pd.src_desc());
  const memory wm = to_layout(mem(conv_weight_md(g), w.ptr()), f.pd.weights_desc());
  Buf y(Shape(g.out.begin(), g.out.end()));
  const memory user_y = mem(conv_user_dst_md(g), y.ptr());
  const memory dst = f.pd.dst_desc() == user_y.get_desc() ? user_y : memory(f.pd.dst_desc(), cpu_engine());
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, dst}};
  if (b) args[DNNL_ARG_BIAS] = mem(plain_md({g.oc}), b->ptr());
  run(f.prim, args);
  if (dst != user_y) reorder_into(dst, user_y);
  return y;
}

void ExecSink::conv(lw::Prop p, const lw::ConvGeo& g, const std::string& x, const std::string& w, const std::string& b,
                    const std::string& y) {
  const Buf* bias = b.empty() ? nullptr : &get(b);
  put(y, g.transposed ? conv_forward<dnnl::deconvolution_forward>(p, g, get(x), get(w), bias)
                      : conv_forward<dnnl::convolution_forward>(p, g, get(x), get(w), bias));
}

void ExecSink::dense(lw::Prop p, const lw::DenseGeo& g, const std::string& x, const std::string& w,
                     const std::string& b, const std::string& y) {
  const auto& f = dense_fwd_pd(g, to_dnnl(p));
  Buf r(Shape{g.rows, g.units});
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(plain_md({g.rows, g.in}), get(x).ptr())},
                                       {DNNL_ARG_WEIGHTS, mem(plain_md({g.units, g.in}), get(w).ptr())},
                                       {DNNL_ARG_DST, mem(plain_md({g.rows, g.units}), r.ptr())}};
  if (!b.empty()) args[DNNL_ARG_BIAS] = mem(plain_md({g.units}), get(b).ptr());
  run(f.prim, args);
  put(y, std::move(r));
}

void ExecSink::batch_norm(lw::Prop p, const lw::BnGeo& g, const std::vector<std::string>& in, const std::string& y) {
  const auto& f = bn_fwd_pd(g, to_dnnl(p));
  const memory::desc data = plain_md(g.src), chan = plain_md({g.src[1]});
  Buf r(Shape(g.src.begin(), g.src.end()));
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(data, get(in.at(0)).ptr())},
                                       {DNNL_ARG_DST, mem(data, r.ptr())},
                                       {DNNL_ARG_SCALE, mem(chan, get(in.at(1)).ptr())},
                                       {DNNL_ARG_SHIFT, mem(chan, get(in.at(2)).ptr())}};
  if (g.batch_stats) {
    saved_.mean = Buf(get(in.at(1)).shape);
    saved_.var = Buf(get(in.at(1)).shape);
    args[DNNL_ARG_MEAN] = mem(chan, saved_.mean.ptr());
    args[DNNL_ARG_VARIANCE] = mem(chan, saved_.var.ptr());
  } else {
    args[DNNL_ARG_MEAN] = mem(chan, get(in.at(3)).ptr());
    args[DNNL_ARG_VARIANCE] = mem(chan, get(in.at(4)).ptr());
  }
  run(f.prim, args);
  put(y, std::move(r));
}

void ExecSink::layer_norm(const lw::LnGeo& g, const std::string& x, const std::string& scale,
                          const std::string& shift, const std::string& y) {
  // Always the training flavour: backward needs the statistics and the reference has no
  // stored-statistics mode for layer norm.
  const auto& f = ln_fwd_pd(g, prop_kind::forward_training);
  const memory::desc data = plain_md({g.rows, g.k}), stat = plain_md({g.rows}), param = plain_md({g.k});
  Buf r(Shape{g.rows, g.k});
  saved_.mean = Buf({g.rows});
  saved_.var = Buf({g.rows});
  run(f.prim, {{DNNL_ARG_SRC, mem(data, get(x).ptr())},
               {DNNL_ARG_DST, mem(data, r.ptr())},
               {DNNL_ARG_SCALE, mem(param, get(scale).ptr())},
               {DNNL_ARG_SHIFT, mem(param, get(shift).ptr())},
               {DNNL_ARG_MEAN, mem(stat, saved_.mean.ptr())},
               {DNNL_ARG_VARIANCE, mem(stat, saved_.var.ptr())}});
  put(y, std::move(r));
}

void ExecSink::lrn(lw::Prop p, const lw::LrnGeo& g, const std::string& x, const std::string& y) {
  const auto& f = lrn_fwd_pd(g, to_dnnl(p));
  const memory::desc data = plain_md(g.src);
  Buf r(Shape(g.src.begin(), g.src.end()));
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(data, get(x).ptr())}, {DNNL_ARG_DST, mem(data, r.ptr())}};
  keep_workspace(p, f.pd.workspace_desc(), args);
  run(f.prim, args);
  put(y, std::move(r));
}

void ExecSink::resample(lw::Prop p, const lw::ResampleGeo& g, const std::string& x, const std::string& y) {
  const auto& f = resample_fwd_pd(g, to_dnnl(p));
  Buf r(Shape(g.dst.begin(), g.dst.end()));
  run(f.prim, {{DNNL_ARG_SRC, mem(plain_md(g.src), get(x).ptr())}, {DNNL_ARG_DST, mem(plain_md(g.dst), r.ptr())}});
  put(y, std::move(r));
}

void ExecSink::rnn(lw::Prop, const lw::RnnGeo& g, const std::vector<std::string>&, const std::string&) {
  // The RNN kernel (ops_rnn.cpp) still runs its own forward, from the lowering's geometry.
  throw ConversionError("the oneDNN backend's sink does not carry out '" + g.op + "' (ops_rnn.cpp runs it)");
}

void lowered_forward(Env& env, const ir::Node& n, const std::vector<Shape>& in_shapes,
                     const std::vector<Shape>& out_shapes, bool training, Saved& saved) {
  saved.step_inputs.clear();
  saved.values.clear();
  ExecSink sink(env, n, out_shapes, training, saved);
  lw::lower_forward(n, in_shapes, out_shapes, training ? lw::Prop::forward_training : lw::Prop::forward_inference,
                    sink);
}

}  // namespace quorum::backends::onednn

namespace quorum::backends::onednn_lower {

// Runs the forward steps on zero-filled operands (the calls, not the values, are compared).
std::vector<std::string> library_sink_calls(const ir::Graph& g) {
  using namespace quorum::backends::onednn;
  std::vector<std::string> all;
  for (const Prop p : {Prop::forward_training, Prop::forward_inference}) {
    Env env;
    for (const auto& in : g.inputs) env.values[in.name] = Buf(in.type.shape);
    for (const auto& [name, t] : g.initializers) env.values[name] = buf_from_tensor(t);
    std::vector<std::string> calls;
    for (const auto& n : g.nodes) {
      if (!forward_mapped(n.op)) return {"refused: not lowered: " + n.op};
      const Support s = node_support(g, n);
      if (!s.ok) return {"refused: " + s.reason};
      std::vector<Shape> ins, outs;
      for (const auto& v : n.inputs) ins.push_back(g.types.at(v).shape);
      for (const auto& v : n.outputs) outs.push_back(g.types.at(v).shape);
      Saved saved;
      ExecSink exec(env, n, outs, p == Prop::forward_training, saved);
      RecordingSink rec(exec);
      try {
        lower_forward(n, ins, outs, p, rec);
      } catch (const ConversionError& e) {
        return {std::string("refused by the library's sink: ") + e.what()};
      }
      calls.insert(calls.end(), rec.calls().begin(), rec.calls().end());
    }
    all.insert(all.end(), calls.begin(), calls.end());
  }
  return all;
}

}  // namespace quorum::backends::onednn_lower
