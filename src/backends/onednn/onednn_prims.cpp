// Generic oneDNN building blocks: engine and stream, descriptors for dense and strided buffers,
// the primitive cache, and the cached eltwise / binary / reduction / reorder / sum helpers that the
// operator families compose.
#include <oneapi/dnnl/dnnl_debug.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backends/onednn/lower.h"
#include "backends/onednn/onednn_common.h"
#include "core/error.h"

namespace quorum::backends::onednn {

Buf buf_from_tensor(const core::Tensor& t) {
  Buf b(t.shape());
  if (t.dtype() == core::DType::F32) {
    std::memcpy(b.ptr(), t.f32(), static_cast<size_t>(b.numel()) * sizeof(float));
  } else {
    for (int64_t i = 0; i < b.numel(); ++i) b.data[static_cast<size_t>(i)] = static_cast<float>(t.get(i));
    if (core::is_quantized(t.dtype()) || t.dtype() == core::DType::I32) b.dtype = t.dtype();
  }
  return b;
}

core::Tensor tensor_from_buf(const Buf& b) {
  if (b.dtype != core::DType::F32) {
    core::Tensor q(b.dtype, b.shape);
    for (int64_t i = 0; i < b.numel(); ++i) q.set(i, static_cast<double>(b.data[static_cast<size_t>(i)]));
    return q;
  }
  core::Tensor t(core::DType::F32, b.shape);
  std::memcpy(t.f32(), b.ptr(), static_cast<size_t>(b.numel()) * sizeof(float));
  return t;
}

dnnl::engine& cpu_engine() {
  // oneDNN's own primitive cache sits beneath the backend's (PrimitiveCache, which already hands a
  // model's repeated descriptors the same primitive). 2.6's default capacity of 1024 costs a scan of
  // every entry on each insertion once it is full (its LRU eviction looks for the oldest entry), and
  // a campaign's stream of fresh shapes fills it at once: that scan was ~45 % of the worker's run
  // time. 64 entries keep what a model reuses. A primitive from either cache is the one created for
  // the same descriptor, so what runs does not change. ONEDNN_PRIMITIVE_CACHE_CAPACITY still wins.
  static const bool capped = [] {
    if (!std::getenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY") && !std::getenv("DNNL_PRIMITIVE_CACHE_CAPACITY"))
      dnnl::set_primitive_cache_capacity(64);
    return true;
  }();
  (void)capped;
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& cpu_stream() {
  static dnnl::stream s(cpu_engine());
  return s;
}

Dims dims_of(const Shape& s) { return onednn_lower::dims_of(s); }

Dims dense_strides(const Dims& d) {
  Dims st(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) st[i - 1] = st[i] * d[i];
  return st;
}

memory::desc plain_md(const Dims& d) { return memory::desc(d, memory::data_type::f32, dense_strides(d)); }
memory::desc strided_md(const Dims& d, const Dims& strides) { return memory::desc(d, memory::data_type::f32, strides); }
memory::desc md_of(const Buf& b) { return plain_md(dims_of(b.shape)); }

memory mem(const memory::desc& md, const float* p) { return memory(md, cpu_engine(), const_cast<float*>(p)); }
memory mem(const Buf& b) { return mem(md_of(b), b.ptr()); }

namespace {
thread_local LoweringLog* g_lowering = nullptr;
thread_local const std::string* g_lowering_node = nullptr;

// The algorithm of an operation descriptor whose layout starts with {kind, prop_kind, alg_kind}
// (eltwise, pooling_v2, resampling, softmax_v2, rnn's cell kind) or {kind, alg_kind} (binary,
// reduction).
template <class Desc>
dnnl_alg_kind_t query_alg(const_dnnl_primitive_desc_t pd, dnnl_query_t what) {
  const Desc* d = nullptr;
  if (dnnl_primitive_desc_query(pd, what, 0, &d) != dnnl_success || !d) return dnnl_alg_kind_undef;
  if constexpr (requires { d->cell_kind; }) return d->cell_kind;
  else return d->alg_kind;
}
}  // namespace

std::string lowering_name(const dnnl::primitive& p) {
  const const_dnnl_primitive_desc_t pd = p.get_primitive_desc();
  dnnl_primitive_kind_t kind = dnnl_undefined_primitive;
  dnnl_primitive_desc_query(pd, dnnl_query_primitive_kind, 0, &kind);
  dnnl_alg_kind_t alg = dnnl_alg_kind_undef;
  switch (kind) {
    case dnnl_eltwise: alg = query_alg<dnnl_eltwise_desc_t>(pd, dnnl_query_eltwise_d); break;
    case dnnl_binary: alg = query_alg<dnnl_binary_desc_t>(pd, dnnl_query_binary_d); break;
    case dnnl_reduction: alg = query_alg<dnnl_reduction_desc_t>(pd, dnnl_query_reduction_d); break;
    case dnnl_pooling_v2: alg = query_alg<dnnl_pooling_v2_desc_t>(pd, dnnl_query_pooling_v2_d); break;
    case dnnl_resampling: alg = query_alg<dnnl_resampling_desc_t>(pd, dnnl_query_resampling_d); break;
    case dnnl_softmax_v2: alg = query_alg<dnnl_softmax_v2_desc_t>(pd, dnnl_query_softmax_v2_d); break;
    case dnnl_rnn: alg = query_alg<dnnl_rnn_desc_t>(pd, dnnl_query_rnn_d); break;
    default: break;
  }
  std::string name = alg != dnnl_alg_kind_undef ? dnnl_alg_kind2str(alg) : dnnl_prim_kind2str(kind);
  dnnl_prop_kind_t prop = dnnl_prop_kind_undef;
  if (dnnl_primitive_desc_query(pd, dnnl_query_prop_kind, 0, &prop) == dnnl_success &&
      (prop == dnnl_backward || prop == dnnl_backward_data || prop == dnnl_backward_weights ||
       prop == dnnl_backward_bias))
    name += "_backward";
  return name;
}

LoweringScope::LoweringScope(LoweringLog& log, const std::string& node) {
  g_lowering = &log;
  g_lowering_node = &node;
}

LoweringScope::~LoweringScope() {
  g_lowering = nullptr;
  g_lowering_node = nullptr;
}

void run(const dnnl::primitive& p, const std::unordered_map<int, memory>& args) {
  if (g_lowering) g_lowering->note(*g_lowering_node, lowering_name(p));
  p.execute(cpu_stream(), args);
  cpu_stream().wait();
}

memory to_layout(const memory& m, const memory::desc& want) {
  if (m.get_desc() == want) return m;
  memory r(want, cpu_engine());
  dnnl::reorder(m, r).execute(cpu_stream(), const_cast<memory&>(m), r);
  cpu_stream().wait();
  return r;
}

void reorder_into(const memory& m, const memory& dst) {
  dnnl::reorder(m, dst).execute(cpu_stream(), const_cast<memory&>(m), const_cast<memory&>(dst));
  cpu_stream().wait();
}

int thread_count() { return omp_get_max_threads(); }

PrimitiveCache& PrimitiveCache::instance() {
  static PrimitiveCache c;
  return c;
}

Key& Key::operator<<(const memory::desc& md) {
  *this << md.dims();
  const auto& d = md.data;
  if (d.format_kind == dnnl_blocked) {
    os_ << "s";
    for (int i = 0; i < d.ndims; ++i) os_ << d.format_desc.blocking.strides[i] << ',';
  } else {
    os_ << "fk" << static_cast<int>(d.format_kind);
  }
  os_ << ';';
  return *this;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t r = std::max(a.size(), b.size());
  Shape pa = pad_rank(a, r), pb = pad_rank(b, r), out(r);
  for (size_t i = 0; i < r; ++i) {
    QUORUM_CHECK(pa[i] == pb[i] || pa[i] == 1 || pb[i] == 1, "shapes do not broadcast");
    out[i] = pa[i] == 1 ? pb[i] : pa[i];
  }
  return out;
}

Shape pad_rank(const Shape& s, size_t rank) { return onednn_lower::pad_rank(s, rank); }

// ---- eltwise ----

namespace {

const Cached<dnnl::eltwise_forward::primitive_desc>& eltwise_fwd_pd(algorithm alg, float alpha, float beta,
                                                                    const memory::desc& md) {
  return cached<dnnl::eltwise_forward::primitive_desc>(Key() << static_cast<int>(alg) << alpha << beta << md, [&] {
    dnnl::eltwise_forward::desc d(prop_kind::forward_training, alg, md, alpha, beta);
    return dnnl::eltwise_forward::primitive_desc(d, cpu_engine());
  });
}

}  // namespace

Buf eltwise(algorithm alg, float alpha, float beta, const Buf& x) {
  const memory::desc md = md_of(x);
  const auto& c = eltwise_fwd_pd(alg, alpha, beta, md);
  Buf y(x.shape);
  run(c.prim, {{DNNL_ARG_SRC, mem(md, x.ptr())}, {DNNL_ARG_DST, mem(md, y.ptr())}});
  return y;
}

Buf eltwise_backward(algorithm alg, float alpha, float beta, const Buf& x, const Buf& gy) {
  const memory::desc md = md_of(x);
  const auto& f = eltwise_fwd_pd(alg, alpha, beta, md);
  const auto& c =
      cached<dnnl::eltwise_backward::primitive_desc>(Key() << static_cast<int>(alg) << alpha << beta << md, [&] {
        dnnl::eltwise_backward::desc d(alg, md, md, alpha, beta);
        return dnnl::eltwise_backward::primitive_desc(d, cpu_engine(), f.pd);
      });
  Buf gx(x.shape);
  run(c.prim, {{DNNL_ARG_SRC, mem(md, x.ptr())},
               {DNNL_ARG_DIFF_DST, mem(md, gy.ptr())},
               {DNNL_ARG_DIFF_SRC, mem(md, gx.ptr())}});
  return gx;
}

// ---- binary, broadcast ----

namespace {

// One binary primitive: dst (dims of a) = a (op) b, b broadcasting along its size-1 dims.
void binary_raw(algorithm alg, const memory::desc& amd, const float* a, const memory::desc& bmd, const float* b,
                float* dst) {
  const auto& c = cached<dnnl::binary::primitive_desc>(Key() << static_cast<int>(alg) << amd << bmd, [&] {
    dnnl::binary::desc d(alg, amd, bmd, amd);
    return dnnl::binary::primitive_desc(d, cpu_engine());
  });
  run(c.prim, {{DNNL_ARG_SRC_0, mem(amd, a)}, {DNNL_ARG_SRC_1, mem(bmd, b)}, {DNNL_ARG_DST, mem(amd, dst)}});
}

}  // namespace

Buf broadcast_to(const Buf& x, const Shape& shape) {
  const Shape px = pad_rank(x.shape, shape.size());
  if (px == shape) return x.reshaped(shape);
  // zeros + x: the binary primitive is oneDNN's only broadcasting operation.
  Buf y(shape);
  binary_raw(algorithm::binary_add, md_of(y), y.ptr(), plain_md(dims_of(px)), x.ptr(), y.ptr());
  return y;
}

Buf binary(algorithm alg, const Buf& a, const Buf& b) {
  const Shape out = broadcast_shapes(a.shape, b.shape);
  const Buf full_a = pad_rank(a.shape, out.size()) == out ? a.reshaped(out) : broadcast_to(a, out);
  Buf y(out);
  binary_raw(alg, md_of(y), full_a.ptr(), plain_md(dims_of(pad_rank(b.shape, out.size()))), b.ptr(), y.ptr());
  return y;
}

void accumulate(Buf& dst, const Buf& src) {
  QUORUM_CHECK(dst.numel() == src.numel(), "accumulating buffers of different sizes");
  const memory::desc md = md_of(dst);
  binary_raw(algorithm::binary_add, md, dst.ptr(), md, src.ptr(), dst.ptr());
}

Buf reduce_to(algorithm alg, const Buf& x, const Shape& shape) {
  Shape target = shape;
  while (target.size() > x.shape.size() && !target.empty() && target.front() == 1) target.erase(target.begin());
  const Shape kept = pad_rank(target, x.shape.size());
  if (kept == x.shape) return x.reshaped(shape);
  const memory::desc src = md_of(x), dst = plain_md(dims_of(kept));
  const auto& c = cached<dnnl::reduction::primitive_desc>(Key() << static_cast<int>(alg) << src << dst, [&] {
    dnnl::reduction::desc d(alg, src, dst, 0.0f, 0.0f);
    return dnnl::reduction::primitive_desc(d, cpu_engine());
  });
  Buf y(shape);
  run(c.prim, {{DNNL_ARG_SRC, mem(src, x.ptr())}, {DNNL_ARG_DST, mem(dst, y.ptr())}});
  return y;
}

Buf scaled_sum(const Buf& w, float alpha, const Buf& g) {
  const memory::desc md = md_of(w);
  const auto& c = cached<dnnl::sum::primitive_desc>(Key() << "axpy" << alpha << md, [&] {
    return dnnl::sum::primitive_desc(md, std::vector<float>{1.0f, alpha}, std::vector<memory::desc>{md, md},
                                     cpu_engine());
  });
  Buf y(w.shape);
  run(c.prim, {{DNNL_ARG_MULTIPLE_SRC, mem(md, w.ptr())},
               {DNNL_ARG_MULTIPLE_SRC + 1, mem(md, g.ptr())},
               {DNNL_ARG_DST, mem(md, y.ptr())}});
  return y;
}

// ---- strided copies ----

View view_of(Buf& b) {
  const Dims d = dims_of(b.shape);
  return View{b.ptr(), d, dense_strides(d)};
}

View view_of(const Buf& b) { return view_of(const_cast<Buf&>(b)); }

void copy_view(const View& src, const View& dst, bool accumulate_into) {
  QUORUM_CHECK(src.dims == dst.dims, "copy between views of different dims");
  const memory::desc smd = strided_md(src.dims, src.strides), dmd = strided_md(dst.dims, dst.strides);
  const auto& c = cached<dnnl::reorder::primitive_desc>(Key() << "copy" << accumulate_into << smd << dmd, [&] {
    dnnl::primitive_attr attr;
    if (accumulate_into) {
      dnnl::post_ops po;
      po.append_sum(1.0f);
      attr.set_post_ops(po);
    }
    return dnnl::reorder::primitive_desc(cpu_engine(), smd, cpu_engine(), dmd, attr);
  });
  run(c.prim, {{DNNL_ARG_FROM, mem(smd, src.ptr)}, {DNNL_ARG_TO, mem(dmd, dst.ptr)}});
}

// ---- environment and kernels ----

const Buf& Env::value(const std::string& name) const {
  auto it = values.find(name);
  QUORUM_CHECK(it != values.end(), "no value '" + name + "'");
  return it->second;
}

const Buf* Env::grad(const std::string& name) const {
  auto it = grads.find(name);
  return it == grads.end() ? nullptr : &it->second;
}

void Env::add_grad(const std::string& name, Buf g) {
  auto it = grads.find(name);
  if (it == grads.end()) {
    grads.emplace(name, std::move(g));
    return;
  }
  accumulate(it->second, g);
}

Kernel::Kernel(const ir::Graph& g, const ir::Node& n) : node_(n) {
  for (const auto& i : n.inputs) in_shapes_.push_back(g.types.at(i).shape);
  for (const auto& o : n.outputs) out_shapes_.push_back(g.types.at(o).shape);
  in_types_ = onednn_lower::in_types(g, n);
}

}  // namespace quorum::backends::onednn
