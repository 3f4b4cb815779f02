// Shared pieces of the oneDNN backend: float32 buffers, the per-run value/gradient environment,
// the node-kernel interface and its op table, the primitive cache, and generic building blocks
// (eltwise, binary with NumPy broadcasting, reductions, strided copies) that every operator family
// composes. Everything numeric runs through oneDNN primitives; C++ here only moves buffers around.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <sstream>
#include <string>
#include <typeinfo>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"
#include "ops/kernel_util.h"

namespace quorum::backends::onednn {

using core::Shape;
using dnnl::algorithm;
using dnnl::memory;
using dnnl::prop_kind;
using Dims = memory::dims;

// A dense row-major float32 tensor. oneDNN 2.6 has no float64 on CPU, so every value lives here.
// A quantized value (int8, uint8, an int32 bias) is held as its exact integers, `dtype` naming its type.
struct Buf {
  Shape shape;
  std::vector<float> data;
  core::DType dtype = core::DType::F32;
  Buf() = default;
  explicit Buf(Shape s) : shape(std::move(s)), data(static_cast<size_t>(core::numel(shape)), 0.0f) {}
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
  float* ptr() { return data.data(); }
  const float* ptr() const { return data.data(); }
  // Same elements, new shape: the reshape family is pure reinterpretation.
  Buf reshaped(Shape s) const {
    Buf b = *this;
    b.shape = std::move(s);
    return b;
  }
};

Buf buf_from_tensor(const core::Tensor& t);
core::Tensor tensor_from_buf(const Buf& b);

// ---- engine, descriptors, execution ----
dnnl::engine& cpu_engine();
dnnl::stream& cpu_stream();
Dims dims_of(const Shape& s);  // rank 0 becomes {1}: oneDNN has no rank-0 tensors
Dims dense_strides(const Dims& d);
memory::desc plain_md(const Dims& d);
memory::desc strided_md(const Dims& d, const Dims& strides);
memory::desc md_of(const Buf& b);
// execute() wants non-const memory; the primitive only reads inputs, so casting away const is safe.
memory mem(const memory::desc& md, const float* p);
memory mem(const Buf& b);
// Executes `p`; inside a LoweringScope, notes it under the scope's node (lowering_name).
void run(const dnnl::primitive& p, const std::unordered_map<int, memory>& args);
// A primitive as oneDNN names it: its algorithm where it has one ("binary_ge", "eltwise_relu",
// "pooling_max", an RNN's cell "vanilla_gru"), else its kind ("convolution", "sum"), with
// "_backward" for a backward propagation kind.
std::string lowering_name(const dnnl::primitive& p);
// While one lives, run() notes every primitive in `log` under `node` (Session::lowering).
class LoweringScope {
 public:
  LoweringScope(LoweringLog& log, const std::string& node);
  ~LoweringScope();
  LoweringScope(const LoweringScope&) = delete;
  LoweringScope& operator=(const LoweringScope&) = delete;
};
// A memory in layout `want`: `m` itself when it already is, else a reordered copy.
memory to_layout(const memory& m, const memory::desc& want);
// Copies `m` into `dst` (any layout to any layout).
void reorder_into(const memory& m, const memory& dst);

// ---- the primitive cache: primitive descriptors and primitives keyed by op, shapes and attributes ----
// Some oneDNN kernels split their work by the thread count when created, so it is part of the key.
int thread_count();

template <class Pd>
struct Cached {
  Pd pd;
  dnnl::primitive prim;
};

class PrimitiveCache {
 public:
  static PrimitiveCache& instance();
  template <class Pd, class Make>
  const Cached<Pd>& get(const std::string& key, Make&& make) {
    const std::string full = std::string(typeid(Pd).name()) + "|t" + std::to_string(thread_count()) + "|" + key;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(full);
    if (it == entries_.end()) {
      auto e = std::make_shared<Cached<Pd>>();
      e->pd = make();
      e->prim = dnnl::primitive(e->pd.get());
      it = entries_.emplace(full, e).first;
    }
    return *static_cast<const Cached<Pd>*>(it->second.get());
  }
  // Drops every entry once there are more than `max_entries`. Entries are handed out by
  // reference, so this runs only between models (at compile), never while a session executes.
  void trim(size_t max_entries) {
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.size() > max_entries) entries_.clear();
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<void>> entries_;
};

template <class Pd, class Make>
const Cached<Pd>& cached(const std::string& key, Make&& make) {
  return PrimitiveCache::instance().get<Pd>(key, std::forward<Make>(make));
}

// Builds cache keys from dims, numbers and strings. Numbers print with every significant digit:
// two attributes that differ only in the 7th digit must not share a primitive.
class Key {
 public:
  Key() { os_.precision(17); }
  Key& operator<<(const Dims& d) {
    os_ << '[';
    for (auto v : d) os_ << v << ',';
    os_ << ']';
    return *this;
  }
  Key& operator<<(const memory::desc& md);
  template <class T>
  Key& operator<<(const T& v) {
    os_ << v << ';';
    return *this;
  }
  std::string str() const { return os_.str(); }
  operator std::string() const { return str(); }

 private:
  std::ostringstream os_;
};

// ---- generic building blocks (each one oneDNN primitive, cached) ----
Buf eltwise(algorithm alg, float alpha, float beta, const Buf& x);
// d(eltwise(x))/dx * gy, the library's own backward kernel.
Buf eltwise_backward(algorithm alg, float alpha, float beta, const Buf& x, const Buf& gy);
inline Buf linear(const Buf& x, float alpha, float beta = 0.0f) {
  return eltwise(algorithm::eltwise_linear, alpha, beta, x);
}
// a (op) b with NumPy broadcasting (oneDNN broadcasts only its second operand; the first is
// materialised at full size when it must broadcast too).
Buf binary(algorithm alg, const Buf& a, const Buf& b);
Buf broadcast_to(const Buf& x, const Shape& shape);
// Reduces x to `shape` (right-aligned, NumPy style) with a reduction primitive; a copy when equal.
Buf reduce_to(algorithm alg, const Buf& x, const Shape& shape);
inline Buf sum_to(const Buf& g, const Shape& shape) { return reduce_to(algorithm::reduction_sum, g, shape); }
// dst += src (same shape).
void accumulate(Buf& dst, const Buf& src);
// w + alpha * g through the sum primitive's scales (the SGD update).
Buf scaled_sum(const Buf& w, float alpha, const Buf& g);

// A strided window into a buffer, for transposes, slices, pads and splits done by reorders.
struct View {
  float* ptr = nullptr;
  Dims dims, strides;
};
View view_of(Buf& b);
View view_of(const Buf& b);
// dst = src (or dst += src with a sum post-op) between two strided views of equal dims.
void copy_view(const View& src, const View& dst, bool accumulate = false);

Shape broadcast_shapes(const Shape& a, const Shape& b);
Shape pad_rank(const Shape& s, size_t rank);  // prepends 1s

// ---- node kernels and the op table ----
struct Env {
  std::map<std::string, Buf> values;
  std::map<std::string, Buf> grads;
  // Values several nodes consume, and what each consumer sent back (backends::contribution_key).
  std::set<std::string> multi;
  std::map<std::string, Buf> contributions;
  const Buf& value(const std::string& name) const;
  const Buf* grad(const std::string& name) const;
  void add_grad(const std::string& name, Buf g);
};

// Adds g to the gradient of node n's input i (and to its contribution when several nodes consume it).
inline void add_input_grad(Env& env, const ir::Node& n, size_t i, Buf g) {
  const std::string& v = n.inputs[i];
  if (env.multi.count(v)) {
    const std::string key = contribution_key(v, n.name);
    auto it = env.contributions.find(key);
    if (it == env.contributions.end()) env.contributions.emplace(key, g);
    else accumulate(it->second, g);
  }
  env.add_grad(v, std::move(g));
}

class Kernel {
 public:
  Kernel(const ir::Graph& g, const ir::Node& n);
  virtual ~Kernel() = default;
  // `training` keeps what backward needs (workspaces, statistics) and selects training primitives.
  virtual void forward(Env& env, bool training) = 0;
  // Reads the gradients of the node's outputs from env and accumulates those of its inputs.
  virtual void backward(Env& env) = 0;
  // The node its primitives are noted under (Session::lowering): its own, or a fused producer's.
  const std::string& name() const { return node_.name; }

 protected:
  const Buf& in(const Env& env, size_t i) const { return env.value(node_.inputs[i]); }
  const Shape& in_shape(size_t i) const { return in_shapes_[i]; }
  const Shape& out_shape(size_t i) const { return out_shapes_[i]; }
  void set_out(Env& env, size_t i, Buf b) const { env.values[node_.outputs[i]] = std::move(b); }
  const Buf* gout(const Env& env, size_t i) const { return env.grad(node_.outputs[i]); }
  void add_gin(Env& env, size_t i, Buf g) const { add_input_grad(env, node_, i, std::move(g)); }
  const core::Attrs& attrs() const { return node_.attrs; }

  ir::Node node_;
  std::vector<Shape> in_shapes_, out_shapes_;
  std::vector<core::DType> in_types_;  // the operands' types (the int8 steps' data types)
};

using SupportFn = std::function<Support(const ir::Graph&, const ir::Node&)>;
using MakeFn = std::function<std::unique_ptr<Kernel>(const ir::Graph&, const ir::Node&)>;

struct OpEntry {
  MakeFn make;
  SupportFn supports;  // null: every attribute combination maps
  SupportFn trains;    // null: the backward path exists for every supported case
};
using OpTable = std::map<std::string, OpEntry>;

const OpTable& op_table();
void register_conv(OpTable& t);
void register_pool(OpTable& t);
void register_dense(OpTable& t);
void register_eltwise(OpTable& t);
void register_binary(OpTable& t);
void register_norm(OpTable& t);
void register_softmax_reduce(OpTable& t);
void register_shape(OpTable& t);
void register_resize(OpTable& t);
void register_rnn(OpTable& t);
void register_loss(OpTable& t);
void register_quant(OpTable& t);

// Losses over a prediction and a target of the same shape, shared by the loss operators and
// train_step. `grad` is d loss / d prediction.
struct LossValue {
  Buf loss;  // shape {} (one element)
  Buf grad;
};
bool loss_known(const std::string& name);
LossValue compute_loss(const std::string& name, const Buf& pred, const Buf& target);

template <class K>
MakeFn maker() {
  return [](const ir::Graph& g, const ir::Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<K>(g, n); };
}

}  // namespace quorum::backends::onednn
