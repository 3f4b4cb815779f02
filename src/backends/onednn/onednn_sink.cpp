// The oneDNN backend's sink (onednn_sink.h): each forward and backward step of the lowering as the
// backend's cached primitives on the run's buffers, and the per-family forward primitive descriptors
// (the backward primitives are cached under the same keys and hinted by the forward_training ones).
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
               << g.pad_l << g.pad_r << g.dil;
}

const Cached<dnnl::pooling_v2_forward::primitive_desc>& pool_fwd_pd(const lw::PoolGeo& g, prop_kind prop,
                                                                    const PostOps* po) {
  const std::string key = PostOps::keyed(Key() << pool_key(g) << static_cast<int>(prop), po);
  return cached<dnnl::pooling_v2_forward::primitive_desc>(key, [&] {
    dnnl::pooling_v2_forward::desc d(prop, to_dnnl(g.alg), plain_md(g.src), plain_md(g.dst), g.strides, g.kernel, g.dil,
                                     g.pad_l, g.pad_r);
    if (po) return dnnl::pooling_v2_forward::primitive_desc(d, po->attr(), cpu_engine());
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

const Cached<dnnl::inner_product_forward::primitive_desc>& dense_fwd_pd(const lw::DenseGeo& g, prop_kind prop,
                                                                       const PostOps* po) {
  const std::string key = PostOps::keyed(Key() << dense_key(g) << static_cast<int>(prop), po);
  return cached<dnnl::inner_product_forward::primitive_desc>(key, [&] {
    const memory::desc src = plain_md({g.rows, g.in}), w = plain_md({g.units, g.in}), b = plain_md({g.units}),
                       dst = plain_md({g.rows, g.units});
    auto d = g.bias ? dnnl::inner_product_forward::desc(prop, src, w, b, dst)
                    : dnnl::inner_product_forward::desc(prop, src, w, dst);
    if (po) return dnnl::inner_product_forward::primitive_desc(d, po->attr(), cpu_engine());
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

ExecSink::ExecSink(Env& env, const ir::Node& n, const std::vector<Shape>& in_shapes,
                   const std::vector<Shape>& out_shapes, bool training, Saved& saved, bool backward)
    : env_(env),
      node_(n),
      in_shapes_(in_shapes),
      out_shapes_(out_shapes),
      training_(training),
      backward_(backward),
      saved_(saved) {}

// A training forward that has a workspace keeps it for the backward (pooling's argmax, lrn's).
void ExecSink::keep_workspace(lw::Prop p, const memory::desc& ws, std::unordered_map<int, memory>& args) {
  saved_.workspace = memory();
  if (p == lw::Prop::forward_training && ws.get_size() > 0) {
    saved_.workspace = memory(ws, cpu_engine());
    args[DNNL_ARG_WORKSPACE] = saved_.workspace;
  }
}

// A temporary, an output's incoming gradient, a value the forward kept, or a graph value.
const Buf& ExecSink::get(const std::string& v) const {
  const auto it = temps_.find(v);
  if (it != temps_.end()) return it->second;
  for (const auto& o : node_.outputs)
    if (v == lw::grad(o)) return *env_.grad(o);
  const auto s = saved_.values.find(v);
  return s != saved_.values.end() ? s->second : env_.value(v);
}

std::unordered_map<int, memory> ExecSink::post_op_operands() const {
  std::unordered_map<int, memory> args;
  if (post_ops_) post_ops_->bind([this](const std::string& v) -> const Buf& { return get(v); }, args);
  return args;
}

void ExecSink::put(const std::string& v, Buf b) {
  if (backward_) {
    for (size_t i = 0; i < node_.inputs.size(); ++i)
      if (v == lw::grad(node_.inputs[i])) {
        b.shape = in_shapes_[i];
        add_input_grad(env_, node_, i, std::move(b));
        return;
      }
    temps_[v] = std::move(b);
    return;
  }
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
  put(y, onednn::eltwise(to_dnnl(e.alg), e.alpha, e.beta, get(x)));
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

void ExecSink::view(const Dims& yd, const Dims& strides, int64_t offset, const std::string& x, const std::string& y) {
  Buf r(Shape(yd.begin(), yd.end()));
  copy_view(View{const_cast<float*>(get(x).ptr()) + offset, yd, strides}, view_of(r));
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
  matmul_raw(plain_md(ad), get(a).ptr(), plain_md(bd), get(b).ptr(), plain_md(yd), r.ptr(), post_ops_,
             post_op_operands());
  put(y, std::move(r));
}

void ExecSink::matmul_strided(const Dims& ad, const Dims& as, const std::string& a, const Dims& bd, const Dims& bs,
                              const std::string& b, const Dims& yd, const std::string& y) {
  Buf r(Shape(yd.begin(), yd.end()));
  const memory::desc amd = as.empty() ? plain_md(ad) : strided_md(ad, as);
  const memory::desc bmd = bs.empty() ? plain_md(bd) : strided_md(bd, bs);
  matmul_raw(amd, get(a).ptr(), bmd, get(b).ptr(), plain_md(yd), r.ptr());
  put(y, std::move(r));
}

void ExecSink::pool(lw::Prop p, const lw::PoolGeo& g, const std::string& x, const std::string& y) {
  const auto& f = pool_fwd_pd(g, to_dnnl(p), post_ops_);
  Buf r(Shape(g.dst.begin(), g.dst.end()));
  std::unordered_map<int, memory> args = post_op_operands();
  args[DNNL_ARG_SRC] = mem(plain_md(g.src), get(x).ptr());
  args[DNNL_ARG_DST] = mem(plain_md(g.dst), r.ptr());
  keep_workspace(p, f.pd.workspace_desc(), args);
  run(f.prim, args);
  put(y, std::move(r));
}

// With `po`, the primitive's post-ops, whose operands `args` holds already.
template <class Fwd>
static Buf conv_forward(lw::Prop p, const lw::ConvGeo& g, const Buf& x, const Buf& w, const Buf* b, const PostOps* po,
                        std::unordered_map<int, memory> args) {
  const auto& f = conv_fwd_pd<Fwd>(g, to_dnnl(p), po);
  const memory xm = to_layout(mem(plain_md(g.src), x.ptr()), f.pd.src_desc());
  const memory wm = to_layout(mem(conv_weight_md(g), w.ptr()), f.pd.weights_desc());
  Buf y(Shape(g.out.begin(), g.out.end()));
  const memory user_y = mem(conv_user_dst_md(g), y.ptr());
  const memory dst = f.pd.dst_desc() == user_y.get_desc() ? user_y : memory(f.pd.dst_desc(), cpu_engine());
  args[DNNL_ARG_SRC] = xm;
  args[DNNL_ARG_WEIGHTS] = wm;
  args[DNNL_ARG_DST] = dst;
  if (b) args[DNNL_ARG_BIAS] = mem(plain_md({g.oc}), b->ptr());
  run(f.prim, args);
  if (dst != user_y) reorder_into(dst, user_y);
  return y;
}

void ExecSink::conv(lw::Prop p, const lw::ConvGeo& g, const std::string& x, const std::string& w, const std::string& b,
                    const std::string& y) {
  const Buf* bias = b.empty() ? nullptr : &get(b);
  const Buf &xb = get(x), &wb = get(w);
  put(y, g.transposed ? conv_forward<dnnl::deconvolution_forward>(p, g, xb, wb, bias, post_ops_, post_op_operands())
                      : conv_forward<dnnl::convolution_forward>(p, g, xb, wb, bias, post_ops_, post_op_operands()));
}

// ---- int8: quantized buffers hold exact integers in float32; each operand is reordered into the
// primitive's data type and layout (exact), the result back into a float32 buffer of the output's type.

memory::data_type to_dnnl(lw::DataType t) {
  switch (t) {
    case lw::DataType::s8:
      return memory::data_type::s8;
    case lw::DataType::u8:
      return memory::data_type::u8;
    case lw::DataType::s32:
      return memory::data_type::s32;
    case lw::DataType::f32:
      break;
  }
  return memory::data_type::f32;
}

namespace {

core::DType quorum_dtype(lw::DataType t) {
  if (t == lw::DataType::s8) return core::DType::I8;
  if (t == lw::DataType::u8) return core::DType::U8;
  if (t == lw::DataType::s32) return core::DType::I32;
  return core::DType::F32;
}

memory::desc typed_md(const Dims& d, lw::DataType t) { return memory::desc(d, to_dnnl(t), dense_strides(d)); }
memory::desc typed_any(const Dims& d, lw::DataType t) { return memory::desc(d, to_dnnl(t), memory::format_tag::any); }

// set_output_scales (mask 0) and set_zero_points (mask 0) for each non-zero zero point.
dnnl::primitive_attr quant_primitive_attr(float scale, int32_t src_zp, int32_t wei_zp, int32_t dst_zp) {
  dnnl::primitive_attr attr;
  attr.set_output_scales(0, {scale});
  if (src_zp) attr.set_zero_points(DNNL_ARG_SRC, 0, {src_zp});
  if (wei_zp) attr.set_zero_points(DNNL_ARG_WEIGHTS, 0, {wei_zp});
  if (dst_zp) attr.set_zero_points(DNNL_ARG_DST, 0, {dst_zp});
  return attr;
}

// A convolution's or matmul's: per-channel output scales (mask 1 << 1) when given.
dnnl::primitive_attr quant_primitive_attr(const lw::QuantAttr& q) {
  dnnl::primitive_attr attr = quant_primitive_attr(q.scale, q.src_zp, q.wei_zp, q.dst_zp);
  if (!q.scales.empty()) attr.set_output_scales(1 << 1, q.scales);
  return attr;
}

std::string quant_key(const lw::QuantAttr& q) {
  Key k;
  k << lw::name(q.src) << lw::name(q.dst) << q.scale << q.src_zp << q.wei_zp << q.dst_zp;
  for (float s : q.scales) k << s;
  return k;
}

// A float32 buffer's integers as a memory of `want` (exact reorders: plain f32 -> plain `t` -> want).
memory quantized_operand(const Buf& b, const Dims& d, lw::DataType t, const memory::desc& want) {
  const memory user = mem(plain_md(d), b.ptr());
  if (t == lw::DataType::f32) return to_layout(user, want);
  memory typed(typed_md(d, t), cpu_engine());
  reorder_into(user, typed);
  return to_layout(typed, want);
}

// The primitive's result `m` (dims d, type t) as a float32 buffer of that type.
Buf quantized_result(const memory& m, const Dims& d, lw::DataType t) {
  Buf r(Shape(d.begin(), d.end()));
  r.dtype = quorum_dtype(t);
  reorder_into(m, mem(plain_md(d), r.ptr()));
  return r;
}

}  // namespace

const Cached<dnnl::reorder::primitive_desc>& qreorder_pd(const lw::QReorderGeo& g) {
  Key key;
  key << g.dims << lw::name(g.src) << lw::name(g.dst) << g.scale << g.src_zp << g.dst_zp << g.axis;
  for (float s : g.scales) key << s;
  return cached<dnnl::reorder::primitive_desc>(key, [&] {
    dnnl::primitive_attr attr = quant_primitive_attr(g.scale, g.src_zp, 0, g.dst_zp);
    if (!g.scales.empty()) attr.set_output_scales(1 << g.axis, g.scales);  // per axis
    return dnnl::reorder::primitive_desc(cpu_engine(), typed_md(g.dims, g.src), cpu_engine(), typed_md(g.dims, g.dst),
                                         attr);
  });
}

const Cached<dnnl::convolution_forward::primitive_desc>& qconv_pd(const lw::ConvGeo& g, const lw::QuantAttr& q) {
  return cached<dnnl::convolution_forward::primitive_desc>(Key() << conv_key(g) << quant_key(q), [&] {
    const memory::desc src = typed_any(g.src, q.src), wei = typed_any(g.w_dims, lw::DataType::s8),
                       dst = typed_any(g.dst, q.dst);
    const auto alg = algorithm::convolution_direct;
    const auto prop = prop_kind::forward_inference;
    auto d = g.bias ? dnnl::convolution_forward::desc(prop, alg, src, wei, typed_md({g.oc}, lw::DataType::s32), dst,
                                                      g.strides, g.dil, g.pad_l, g.pad_r)
                    : dnnl::convolution_forward::desc(prop, alg, src, wei, dst, g.strides, g.dil, g.pad_l, g.pad_r);
    return dnnl::convolution_forward::primitive_desc(d, quant_primitive_attr(q),
                                                     cpu_engine());
  });
}

const Cached<dnnl::matmul::primitive_desc>& qmatmul_pd(const lw::QMatmulGeo& g, const lw::QuantAttr& q) {
  return cached<dnnl::matmul::primitive_desc>(Key() << g.rows << g.k << g.n << quant_key(q), [&] {
    dnnl::matmul::desc d(typed_md({g.rows, g.k}, q.src), typed_md({g.k, g.n}, lw::DataType::s8),
                         typed_md({g.rows, g.n}, q.dst));
    return dnnl::matmul::primitive_desc(d, quant_primitive_attr(q),
                                        cpu_engine());
  });
}

namespace {

// set_scales per source (mask 0) and the requantizing eltwise_linear post-ops.
dnnl::primitive_attr elem_attr(const lw::QElemAttr& q) {
  dnnl::primitive_attr attr;
  const int args[] = {DNNL_ARG_SRC_0, DNNL_ARG_SRC_1};
  for (size_t i = 0; i < q.scales.size() && i < 2; ++i) attr.set_scales(args[i], 0, {q.scales[i]});
  if (!q.linear.empty()) {
    dnnl::post_ops po;
    for (const auto& [alpha, beta] : q.linear) po.append_eltwise(1.0f, algorithm::eltwise_linear, alpha, beta);
    attr.set_post_ops(po);
  }
  return attr;
}

std::string elem_key(const lw::QElemAttr& q) {
  Key k;
  k << lw::name(q.type);
  for (float s : q.scales) k << s;
  k << "linear";
  for (const auto& [alpha, beta] : q.linear) k << alpha << beta;
  return k;
}

// Channels last ([N, C, spatial...] stored N, spatial..., C), as int8 pipelines keep activations.
memory::desc channels_last(const Dims& d, lw::DataType t) {
  Dims st(d.size(), 1);
  int64_t acc = d.size() > 1 ? d[1] : 1;
  for (size_t i = d.size(); i-- > 2;) {
    st[i] = acc;
    acc *= d[i];
  }
  st[0] = acc;
  return memory::desc(d, to_dnnl(t), st);
}

}  // namespace

const Cached<dnnl::binary::primitive_desc>& qbinary_pd(lw::Alg alg, const lw::QElemAttr& q, const Dims& out,
                                                       const Dims& bd) {
  return cached<dnnl::binary::primitive_desc>(Key() << "qbinary" << lw::name(alg) << out << bd << elem_key(q), [&] {
    const memory::desc a = typed_md(out, q.type);
    return dnnl::binary::primitive_desc(dnnl::binary::desc(to_dnnl(alg), a, typed_md(bd, q.type), a), elem_attr(q),
                                        cpu_engine());
  });
}

const Cached<dnnl::pooling_v2_forward::primitive_desc>& qpool_pd(const lw::PoolGeo& g, const lw::QElemAttr& q) {
  return cached<dnnl::pooling_v2_forward::primitive_desc>(Key() << "qpool" << pool_key(g) << elem_key(q), [&] {
    dnnl::pooling_v2_forward::desc d(prop_kind::forward_inference, to_dnnl(g.alg), channels_last(g.src, q.type),
                                     channels_last(g.dst, q.type), g.strides, g.kernel, g.dil, g.pad_l, g.pad_r);
    return dnnl::pooling_v2_forward::primitive_desc(d, elem_attr(q), cpu_engine());
  });
}

const Cached<dnnl::eltwise_forward::primitive_desc>& qeltwise_pd(const lw::Eltwise& e, const lw::QElemAttr& q,
                                                                 const Dims& d) {
  return cached<dnnl::eltwise_forward::primitive_desc>(
      Key() << "qeltwise" << lw::name(e.alg) << e.alpha << e.beta << d << elem_key(q), [&] {
        dnnl::eltwise_forward::desc ed(prop_kind::forward_inference, to_dnnl(e.alg), typed_md(d, q.type), e.alpha,
                                       e.beta);
        return dnnl::eltwise_forward::primitive_desc(ed, elem_attr(q), cpu_engine());
      });
}

void ExecSink::qbinary(lw::Alg alg, const lw::QElemAttr& q, const Dims& out, const Dims& ad, const std::string& a,
                       const Dims& bd, const std::string& b, const std::string& y) {
  auto as = [](const Buf& v, const Dims& d) {
    return dims_of(pad_rank(v.shape, d.size())) == d ? v : v.reshaped(Shape(d.begin(), d.end()));
  };
  Buf first = as(get(a), ad);
  const Buf second = as(get(b), bd);
  // oneDNN broadcasts only the second source: a first that must broadcast is copied out first (its integers).
  if (ad != out) first = broadcast_to(first, Shape(out.begin(), out.end()));
  const auto& f = qbinary_pd(alg, q, out, bd);
  memory dst(typed_md(out, q.type), cpu_engine());
  run(f.prim, {{DNNL_ARG_SRC_0, quantized_operand(first, out, q.type, typed_md(out, q.type))},
               {DNNL_ARG_SRC_1, quantized_operand(second, bd, q.type, typed_md(bd, q.type))},
               {DNNL_ARG_DST, dst}});
  put(y, quantized_result(dst, out, q.type));
}

void ExecSink::qpool(const lw::PoolGeo& g, const lw::QElemAttr& q, const std::string& x, const std::string& y) {
  const auto& f = qpool_pd(g, q);
  memory dst(f.pd.dst_desc(), cpu_engine());
  run(f.prim, {{DNNL_ARG_SRC, quantized_operand(get(x), g.src, q.type, f.pd.src_desc())}, {DNNL_ARG_DST, dst}});
  put(y, quantized_result(dst, g.dst, q.type));
}

void ExecSink::qeltwise(const lw::Eltwise& e, const lw::QElemAttr& q, const Dims& d, const std::string& x,
                        const std::string& y) {
  const auto& f = qeltwise_pd(e, q, d);
  memory dst(typed_md(d, q.type), cpu_engine());
  run(f.prim, {{DNNL_ARG_SRC, quantized_operand(get(x), d, q.type, typed_md(d, q.type))}, {DNNL_ARG_DST, dst}});
  put(y, quantized_result(dst, d, q.type));
}

void ExecSink::qconcat(lw::DataType t, const Dims& out, int axis, const std::vector<Dims>& ds,
                       const std::vector<std::string>& xs, const std::string& y) {
  std::vector<memory::desc> srcs;
  Key key;
  key << "qconcat" << lw::name(t) << axis;
  for (const auto& d : ds) {
    srcs.push_back(typed_md(d, t));
    key << d;
  }
  const memory::desc dmd = typed_md(out, t);
  const auto& c = cached<dnnl::concat::primitive_desc>(
      key, [&] { return dnnl::concat::primitive_desc(dmd, axis, srcs, cpu_engine()); });
  memory dst(dmd, cpu_engine());
  std::unordered_map<int, memory> args{{DNNL_ARG_DST, dst}};
  for (size_t i = 0; i < xs.size(); ++i)
    args[DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i)] = quantized_operand(get(xs[i]), ds[i], t, srcs[i]);
  run(c.prim, args);
  put(y, quantized_result(dst, out, t));
}

void ExecSink::qreorder(const lw::QReorderGeo& g, const std::string& x, const std::string& y) {
  const auto& f = qreorder_pd(g);
  const memory src = quantized_operand(get(x), g.dims, g.src, typed_md(g.dims, g.src));
  memory dst(typed_md(g.dims, g.dst), cpu_engine());
  run(f.prim, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}});
  put(y, quantized_result(dst, g.dims, g.dst));
}

void ExecSink::qconv(const lw::ConvGeo& g, const lw::QuantAttr& q, const std::string& x, const std::string& w,
                     const std::string& b, const std::string& y) {
  const auto& f = qconv_pd(g, q);
  std::unordered_map<int, memory> args;
  args[DNNL_ARG_SRC] = quantized_operand(get(x), g.src, q.src, f.pd.src_desc());
  args[DNNL_ARG_WEIGHTS] = quantized_operand(get(w), g.w_dims, lw::DataType::s8, f.pd.weights_desc());
  if (!b.empty()) args[DNNL_ARG_BIAS] = quantized_operand(get(b), {g.oc}, lw::DataType::s32, f.pd.bias_desc());
  memory dst(f.pd.dst_desc(), cpu_engine());
  args[DNNL_ARG_DST] = dst;
  run(f.prim, args);
  put(y, quantized_result(dst, g.dst, q.dst));
}

void ExecSink::qmatmul(const lw::QMatmulGeo& g, const lw::QuantAttr& q, const std::string& x, const std::string& w,
                       const std::string& y) {
  const auto& f = qmatmul_pd(g, q);
  memory dst(f.pd.dst_desc(), cpu_engine());
  run(f.prim, {{DNNL_ARG_SRC, quantized_operand(get(x), {g.rows, g.k}, q.src, f.pd.src_desc())},
               {DNNL_ARG_WEIGHTS, quantized_operand(get(w), {g.k, g.n}, lw::DataType::s8, f.pd.weights_desc())},
               {DNNL_ARG_DST, dst}});
  put(y, quantized_result(dst, {g.rows, g.n}, q.dst));
}

void ExecSink::dense(lw::Prop p, const lw::DenseGeo& g, const std::string& x, const std::string& w,
                     const std::string& b, const std::string& y) {
  const auto& f = dense_fwd_pd(g, to_dnnl(p), post_ops_);
  Buf r(Shape{g.rows, g.units});
  std::unordered_map<int, memory> args = post_op_operands();
  args[DNNL_ARG_SRC] = mem(plain_md({g.rows, g.in}), get(x).ptr());
  args[DNNL_ARG_WEIGHTS] = mem(plain_md({g.units, g.in}), get(w).ptr());
  args[DNNL_ARG_DST] = mem(plain_md({g.rows, g.units}), r.ptr());
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

// ---- backward steps ----

void ExecSink::zeros(const Dims& d, const std::string& y) { put(y, Buf(Shape(d.begin(), d.end()))); }

void ExecSink::broadcast(const Shape& from, const std::string& x, const Shape& to, const std::string& y) {
  put(y, broadcast_to(get(x).reshaped(from), to));
}

void ExecSink::eltwise_backward(const lw::Eltwise& e, const Dims&, const std::string& src, const std::string& dy,
                                const std::string& dx) {
  put(dx, onednn::eltwise_backward(to_dnnl(e.alg), e.alpha, e.beta, get(src), get(dy)));
}

void ExecSink::softmax_backward(const lw::SoftmaxGeo& g, const std::string&, const std::string& y,
                                const std::string& dy, const std::string& dx) {
  const auto& f = softmax_fwd_pd(g, prop_kind::forward_training);
  const memory::desc md = plain_md(g.dims);
  const auto& b = cached<dnnl::softmax_v2_backward::primitive_desc>(softmax_key(g), [&] {
    dnnl::softmax_v2_backward::desc d(to_dnnl(g.alg), md, md, md, g.axis);
    return dnnl::softmax_v2_backward::primitive_desc(d, cpu_engine(), f.pd);
  });
  Buf gx(Shape(g.dims.begin(), g.dims.end()));
  run(b.prim, {{DNNL_ARG_DST, mem(md, get(y).ptr())},
               {DNNL_ARG_DIFF_DST, mem(md, get(dy).ptr())},
               {DNNL_ARG_DIFF_SRC, mem(md, gx.ptr())}});
  put(dx, std::move(gx));
}

void ExecSink::pool_backward(const lw::PoolGeo& g, const std::string&, const std::string& dy, const std::string& dx) {
  const auto& f = pool_fwd_pd(g, prop_kind::forward_training);
  const memory::desc src = plain_md(g.src), dst = plain_md(g.dst);
  const auto& b = cached<dnnl::pooling_v2_backward::primitive_desc>(pool_key(g), [&] {
    dnnl::pooling_v2_backward::desc d(to_dnnl(g.alg), src, dst, g.strides, g.kernel, g.dil, g.pad_l, g.pad_r);
    return dnnl::pooling_v2_backward::primitive_desc(d, cpu_engine(), f.pd);
  });
  Buf gx(Shape(g.src.begin(), g.src.end()));
  std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, mem(dst, get(dy).ptr())},
                                       {DNNL_ARG_DIFF_SRC, mem(src, gx.ptr())}};
  if (b.pd.workspace_desc().get_size() > 0) args[DNNL_ARG_WORKSPACE] = saved_.workspace;
  run(b.prim, args);
  put(dx, std::move(gx));
}

namespace {

// Primitive types of one convolution flavour.
struct ConvTypes {
  using Fwd = dnnl::convolution_forward;
  using BwdData = dnnl::convolution_backward_data;
  using BwdWeights = dnnl::convolution_backward_weights;
  static constexpr algorithm alg = algorithm::convolution_direct;
};
struct DeconvTypes {
  using Fwd = dnnl::deconvolution_forward;
  using BwdData = dnnl::deconvolution_backward_data;
  using BwdWeights = dnnl::deconvolution_backward_weights;
  static constexpr algorithm alg = algorithm::deconvolution_direct;
};

struct ConvGrads {
  Buf gx, gw, gb;
};

// Backward-data then backward-weights (with the bias when the primitive has it), reordered from and
// to the plain user buffers.
template <class T>
ConvGrads conv_grads(const lw::ConvGeo& g, const Buf& x, const Buf& w, const Buf& gy) {
  const auto& f = conv_fwd_pd<typename T::Fwd>(g, prop_kind::forward_training);
  const memory::desc weight_md = conv_weight_md(g);
  const std::string key = conv_key(g);
  const memory user_gy = mem(conv_user_dst_md(g), gy.ptr());
  ConvGrads r;
  {
    const auto& bd = cached<typename T::BwdData::primitive_desc>(key, [&] {
      typename T::BwdData::desc d(T::alg, any_md(g.src), any_md(weight_md.dims()), any_md(g.dst), g.strides, g.dil,
                                  g.pad_l, g.pad_r);
      return typename T::BwdData::primitive_desc(d, cpu_engine(), f.pd);
    });
    r.gx = Buf(Shape(g.src.begin(), g.src.end()));
    const memory user_gx = mem(plain_md(g.src), r.gx.ptr());
    const memory diff_src =
        bd.pd.diff_src_desc() == user_gx.get_desc() ? user_gx : memory(bd.pd.diff_src_desc(), cpu_engine());
    run(bd.prim, {{DNNL_ARG_DIFF_DST, to_layout(user_gy, bd.pd.diff_dst_desc())},
                  {DNNL_ARG_WEIGHTS, to_layout(mem(weight_md, w.ptr()), bd.pd.weights_desc())},
                  {DNNL_ARG_DIFF_SRC, diff_src}});
    if (diff_src != user_gx) reorder_into(diff_src, user_gx);
  }
  const auto& bw = cached<typename T::BwdWeights::primitive_desc>(key, [&] {
    const Dims wd = weight_md.dims();
    auto d = g.prim_bias() ? typename T::BwdWeights::desc(T::alg, any_md(g.src), any_md(wd), plain_md({g.oc}),
                                                          any_md(g.dst), g.strides, g.dil, g.pad_l, g.pad_r)
                           : typename T::BwdWeights::desc(T::alg, any_md(g.src), any_md(wd), any_md(g.dst), g.strides,
                                                          g.dil, g.pad_l, g.pad_r);
    return typename T::BwdWeights::primitive_desc(d, cpu_engine(), f.pd);
  });
  const Dims wdims = weight_md.dims();
  r.gw = Buf(Shape(wdims.begin(), wdims.end()));
  const memory user_gw = mem(weight_md, r.gw.ptr());
  const memory diff_w =
      bw.pd.diff_weights_desc() == user_gw.get_desc() ? user_gw : memory(bw.pd.diff_weights_desc(), cpu_engine());
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, to_layout(mem(plain_md(g.src), x.ptr()), bw.pd.src_desc())},
                                       {DNNL_ARG_DIFF_DST, to_layout(user_gy, bw.pd.diff_dst_desc())},
                                       {DNNL_ARG_DIFF_WEIGHTS, diff_w}};
  if (g.prim_bias()) {
    r.gb = Buf(Shape{g.oc});
    args[DNNL_ARG_DIFF_BIAS] = mem(plain_md({g.oc}), r.gb.ptr());
  }
  run(bw.prim, args);
  if (diff_w != user_gw) reorder_into(diff_w, user_gw);
  return r;
}

}  // namespace

void ExecSink::conv_backward(const lw::ConvGeo& g, const std::string& x, const std::string& w, const std::string& dy,
                             const std::vector<std::string>& grads) {
  ConvGrads r = g.transposed ? conv_grads<DeconvTypes>(g, get(x), get(w), get(dy))
                             : conv_grads<ConvTypes>(g, get(x), get(w), get(dy));
  put(grads.at(0), std::move(r.gx));
  put(grads.at(1), std::move(r.gw));
  if (!grads.at(2).empty()) put(grads[2], std::move(r.gb));
}

void ExecSink::dense_backward(const lw::DenseGeo& g, const std::string& x, const std::string& w,
                              const std::string& dy, const std::vector<std::string>& grads) {
  const auto& f = dense_fwd_pd(g, prop_kind::forward_training);
  const memory::desc src = plain_md({g.rows, g.in}), wd = plain_md({g.units, g.in}), bd = plain_md({g.units}),
                     dst = plain_md({g.rows, g.units});
  const std::string key = dense_key(g);
  const Buf& gy = get(dy);
  const auto& bdata = cached<dnnl::inner_product_backward_data::primitive_desc>(key, [&] {
    dnnl::inner_product_backward_data::desc d(src, wd, dst);
    return dnnl::inner_product_backward_data::primitive_desc(d, cpu_engine(), f.pd);
  });
  Buf gx(Shape{g.rows, g.in});
  run(bdata.prim, {{DNNL_ARG_DIFF_DST, mem(dst, gy.ptr())},
                   {DNNL_ARG_WEIGHTS, mem(wd, get(w).ptr())},
                   {DNNL_ARG_DIFF_SRC, mem(src, gx.ptr())}});
  put(grads.at(0), std::move(gx));
  const auto& bw = cached<dnnl::inner_product_backward_weights::primitive_desc>(key, [&] {
    auto d = g.bias ? dnnl::inner_product_backward_weights::desc(src, wd, bd, dst)
                    : dnnl::inner_product_backward_weights::desc(src, wd, dst);
    return dnnl::inner_product_backward_weights::primitive_desc(d, cpu_engine(), f.pd);
  });
  Buf gw(Shape{g.units, g.in});
  Buf gb;
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(src, get(x).ptr())},
                                       {DNNL_ARG_DIFF_DST, mem(dst, gy.ptr())},
                                       {DNNL_ARG_DIFF_WEIGHTS, mem(wd, gw.ptr())}};
  if (g.bias) {
    gb = Buf(Shape{g.units});
    args[DNNL_ARG_DIFF_BIAS] = mem(bd, gb.ptr());
  }
  run(bw.prim, args);
  put(grads.at(1), std::move(gw));
  if (g.bias) put(grads.at(2), std::move(gb));
}

void ExecSink::batch_norm_backward(const lw::BnGeo& g, const std::vector<std::string>& in, const std::string& dy,
                                   const std::vector<std::string>& grads) {
  const auto& f = bn_fwd_pd(g, prop_kind::forward_training);
  const memory::desc data = plain_md(g.src), chan = plain_md({g.src[1]});
  const auto& b = cached<dnnl::batch_normalization_backward::primitive_desc>(bn_key(g), [&] {
    dnnl::batch_normalization_backward::desc d(prop_kind::backward, data, data, g.eps, bn_flags(g));
    return dnnl::batch_normalization_backward::primitive_desc(d, cpu_engine(), f.pd);
  });
  const Buf& mean = g.batch_stats ? saved_.mean : get(in.at(3));
  const Buf& var = g.batch_stats ? saved_.var : get(in.at(4));
  const Shape cs{g.src[1]};
  Buf gx(Shape(g.src.begin(), g.src.end())), gscale(cs), gshift(cs);
  run(b.prim, {{DNNL_ARG_SRC, mem(data, get(in.at(0)).ptr())},
               {DNNL_ARG_MEAN, mem(chan, mean.ptr())},
               {DNNL_ARG_VARIANCE, mem(chan, var.ptr())},
               {DNNL_ARG_DIFF_DST, mem(data, get(dy).ptr())},
               {DNNL_ARG_SCALE, mem(chan, get(in.at(1)).ptr())},
               {DNNL_ARG_SHIFT, mem(chan, get(in.at(2)).ptr())},  // unused by the math, required by 2.6
               {DNNL_ARG_DIFF_SRC, mem(data, gx.ptr())},
               {DNNL_ARG_DIFF_SCALE, mem(chan, gscale.ptr())},
               {DNNL_ARG_DIFF_SHIFT, mem(chan, gshift.ptr())}});
  put(grads.at(0), std::move(gx));
  put(grads.at(1), std::move(gscale));
  put(grads.at(2), std::move(gshift));
}

void ExecSink::layer_norm_backward(const lw::LnGeo& g, const std::vector<std::string>& in, const std::string& dy,
                                   const std::vector<std::string>& grads) {
  const auto& f = ln_fwd_pd(g, prop_kind::forward_training);
  const memory::desc data = plain_md({g.rows, g.k}), stat = plain_md({g.rows}), param = plain_md({g.k});
  const auto& b = cached<dnnl::layer_normalization_backward::primitive_desc>(ln_key(g), [&] {
    dnnl::layer_normalization_backward::desc d(prop_kind::backward, data, data, stat, g.eps,
                                               dnnl::normalization_flags::use_scale |
                                                   dnnl::normalization_flags::use_shift);
    return dnnl::layer_normalization_backward::primitive_desc(d, cpu_engine(), f.pd);
  });
  Buf gx(Shape{g.rows, g.k}), gscale(Shape{g.k}), gshift(Shape{g.k});
  run(b.prim, {{DNNL_ARG_SRC, mem(data, get(in.at(0)).ptr())},
               {DNNL_ARG_MEAN, mem(stat, saved_.mean.ptr())},
               {DNNL_ARG_VARIANCE, mem(stat, saved_.var.ptr())},
               {DNNL_ARG_DIFF_DST, mem(data, get(dy).ptr())},
               {DNNL_ARG_SCALE, mem(param, get(in.at(1)).ptr())},
               {DNNL_ARG_SHIFT, mem(param, get(in.at(2)).ptr())},  // unused by the math, required by 2.6
               {DNNL_ARG_DIFF_SRC, mem(data, gx.ptr())},
               {DNNL_ARG_DIFF_SCALE, mem(param, gscale.ptr())},
               {DNNL_ARG_DIFF_SHIFT, mem(param, gshift.ptr())}});
  put(grads.at(0), std::move(gx));
  put(grads.at(1), std::move(gscale));
  put(grads.at(2), std::move(gshift));
}

void ExecSink::lrn_backward(const lw::LrnGeo& g, const std::string& x, const std::string& dy, const std::string& dx) {
  const auto& f = lrn_fwd_pd(g, prop_kind::forward_training);
  const memory::desc data = plain_md(g.src);
  const auto& b = cached<dnnl::lrn_backward::primitive_desc>(lrn_key(g), [&] {
    dnnl::lrn_backward::desc d(algorithm::lrn_across_channels, data, data, g.size, g.alpha, g.beta, g.bias);
    return dnnl::lrn_backward::primitive_desc(d, cpu_engine(), f.pd);
  });
  Buf gx(Shape(g.src.begin(), g.src.end()));
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(data, get(x).ptr())},
                                       {DNNL_ARG_DIFF_DST, mem(data, get(dy).ptr())},
                                       {DNNL_ARG_DIFF_SRC, mem(data, gx.ptr())}};
  if (b.pd.workspace_desc().get_size() > 0) args[DNNL_ARG_WORKSPACE] = saved_.workspace;
  run(b.prim, args);
  put(dx, std::move(gx));
}

void ExecSink::resample_backward(const lw::ResampleGeo& g, const std::string&, const std::string& dy,
                                 const std::string& dx) {
  const auto& f = resample_fwd_pd(g, prop_kind::forward_training);
  const memory::desc src = plain_md(g.src), dst = plain_md(g.dst);
  const auto& b = cached<dnnl::resampling_backward::primitive_desc>(resample_key(g), [&] {
    dnnl::resampling_backward::desc d(to_dnnl(g.alg), src, dst);
    return dnnl::resampling_backward::primitive_desc(d, cpu_engine(), f.pd);
  });
  Buf gx(Shape(g.src.begin(), g.src.end()));
  run(b.prim, {{DNNL_ARG_DIFF_DST, mem(dst, get(dy).ptr())}, {DNNL_ARG_DIFF_SRC, mem(src, gx.ptr())}});
  put(dx, std::move(gx));
}

void lowered_forward(Env& env, const ir::Node& n, const std::vector<Shape>& in_shapes,
                     const std::vector<Shape>& out_shapes, bool training, Saved& saved, const PostOps* po,
                     const std::vector<core::DType>& in_types) {
  saved.values.clear();
  ExecSink sink(env, n, in_shapes, out_shapes, training, saved);
  sink.fuse(po);
  lw::lower_forward(n, in_shapes, out_shapes, training ? lw::Prop::forward_training : lw::Prop::forward_inference,
                    sink, in_types);
}

void lowered_backward(Env& env, const ir::Node& n, const std::vector<Shape>& in_shapes,
                      const std::vector<Shape>& out_shapes, Saved& saved) {
  ExecSink sink(env, n, in_shapes, out_shapes, true, saved, true);
  lw::lower_backward(n, in_shapes, out_shapes, sink);
}

}  // namespace quorum::backends::onednn

namespace quorum::backends::onednn_lower {

// Runs the forward steps on zero-filled operands (the calls, not the values, are compared), then
// the backward steps of every node after its training forward, on zero incoming gradients.
std::vector<std::string> library_sink_calls(const ir::Graph& g) {
  using namespace quorum::backends::onednn;
  std::vector<std::string> all;
  auto shapes = [&](const std::vector<std::string>& vs) {
    std::vector<Shape> r;
    for (const auto& v : vs) r.push_back(g.types.at(v).shape);
    return r;
  };
  std::vector<Saved> saved(g.nodes.size());
  Env train;
  for (const Prop p : {Prop::forward_training, Prop::forward_inference}) {
    Env local;
    Env& env = p == Prop::forward_training ? train : local;
    for (const auto& in : g.inputs) env.values[in.name] = Buf(in.type.shape);
    for (const auto& [name, t] : g.initializers) env.values[name] = buf_from_tensor(t);
    std::vector<std::string> calls;
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      const ir::Node& n = g.nodes[k];
      if (!forward_mapped(n.op)) return {"refused: not lowered: " + n.op};
      const Support s = node_support(g, n);
      if (!s.ok) return {"refused: " + s.reason};
      const std::vector<Shape> ins = shapes(n.inputs), outs = shapes(n.outputs);
      Saved local_saved;
      const bool training = p == Prop::forward_training;
      ExecSink exec(env, n, ins, outs, training, training ? saved[k] : local_saved);
      RecordingSink rec(exec);
      try {
        lower_forward(n, ins, outs, p, rec, in_types(g, n));
      } catch (const ConversionError& e) {
        return {std::string("refused by the library's sink: ") + e.what()};
      }
      calls.insert(calls.end(), rec.calls().begin(), rec.calls().end());
    }
    all.insert(all.end(), calls.begin(), calls.end());
  }
  for (const auto& o : g.outputs) train.grads[o] = Buf(g.types.at(o).shape);
  for (size_t k = g.nodes.size(); k-- > 0;) {
    const ir::Node& n = g.nodes[k];
    if (!backward_mapped(n)) {
      all.push_back("backward refused: " + n.op);
      continue;
    }
    const std::vector<Shape> ins = shapes(n.inputs), outs = shapes(n.outputs);
    for (const auto& o : n.outputs)
      if (!train.grad(o)) train.grads[o] = Buf(g.types.at(o).shape);
    ExecSink exec(train, n, ins, outs, true, saved[k], true);
    RecordingSink rec(exec);
    lower_backward(n, ins, outs, rec);
    all.insert(all.end(), rec.calls().begin(), rec.calls().end());
  }
  return all;
}

}  // namespace quorum::backends::onednn_lower
