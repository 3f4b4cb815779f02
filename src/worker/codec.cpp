// Binary codec.
#include "worker/codec.h"

#include <stdexcept>

namespace quorum::worker {

namespace {
[[noreturn]] void malformed(const std::string& what) { throw MalformedMessage(what); }
}  // namespace

void Writer::type(const core::TensorType& t) {
  u8(static_cast<uint8_t>(t.dtype));
  u32(static_cast<uint32_t>(t.shape.size()));
  for (int64_t d : t.shape) i64(d);
}

void Writer::tensor(const core::Tensor& t) {
  u8(t.defined() ? 1 : 0);
  if (!t.defined()) return;
  type(t.type());
  raw(t.raw(), t.nbytes());
}

void Writer::attrs(const core::Attrs& a) {
  u32(static_cast<uint32_t>(a.size()));
  for (const auto& [k, v] : a) {
    str(k);
    u8(static_cast<uint8_t>(v.index()));
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, int64_t>) {
            i64(x);
          } else if constexpr (std::is_same_v<T, double>) {
            f64(x);
          } else if constexpr (std::is_same_v<T, std::string>) {
            str(x);
          } else {
            u64(x.size());
            for (auto e : x) raw(&e, sizeof e);
          }
        },
        v);
  }
}

void Writer::values(const backends::ValueMap& m) {
  u32(static_cast<uint32_t>(m.size()));
  for (const auto& [k, t] : m) {
    str(k);
    tensor(t);
  }
}

void Writer::graph(const ir::Graph& g) {
  str(g.name);
  u32(static_cast<uint32_t>(g.inputs.size()));
  for (const auto& in : g.inputs) {
    str(in.name);
    type(in.type);
  }
  u32(static_cast<uint32_t>(g.outputs.size()));
  for (const auto& o : g.outputs) str(o);
  values(backends::ValueMap(g.initializers.begin(), g.initializers.end()));
  u32(static_cast<uint32_t>(g.nodes.size()));
  for (const auto& n : g.nodes) {
    str(n.name);
    str(n.op);
    u32(static_cast<uint32_t>(n.inputs.size()));
    for (const auto& i : n.inputs) str(i);
    u32(static_cast<uint32_t>(n.outputs.size()));
    for (const auto& o : n.outputs) str(o);
    attrs(n.attrs);
  }
  u32(static_cast<uint32_t>(g.types.size()));
  for (const auto& [k, t] : g.types) {
    str(k);
    type(t);
  }
  i64(g.form_batch.from);
  i64(g.form_batch.as);
  i64(g.form_batch.axis);
  i64(static_cast<int64_t>(g.form_draw));
}

void Reader::take(void* dst, size_t n) {
  if (n == 0) return;  // (an empty tensor has no buffer to copy to)
  if (static_cast<size_t>(end_ - p_) < n) malformed("truncated");
  std::memcpy(dst, p_, n);
  p_ += n;
}

uint64_t Reader::count(uint64_t n, size_t item_bytes, const char* what) {
  if (n > static_cast<uint64_t>(end_ - p_) / item_bytes) malformed(std::string(what) + " count runs past the end");
  return n;
}

uint8_t Reader::u8() {
  uint8_t v;
  take(&v, 1);
  return v;
}
uint32_t Reader::u32() {
  uint32_t v;
  take(&v, 4);
  return v;
}
uint64_t Reader::u64() {
  uint64_t v;
  take(&v, 8);
  return v;
}
int64_t Reader::i64() {
  int64_t v;
  take(&v, 8);
  return v;
}
double Reader::f64() {
  double v;
  take(&v, 8);
  return v;
}
std::string Reader::str() {
  const uint64_t n = u64();
  if (static_cast<uint64_t>(end_ - p_) < n) malformed("string runs past the end");
  std::string s(p_, n);
  p_ += n;
  return s;
}

core::TensorType Reader::type() {
  core::TensorType t;
  const uint8_t d = u8();
  if (d > static_cast<uint8_t>(core::DType::I32)) malformed("dtype");
  t.dtype = static_cast<core::DType>(d);
  const uint32_t rank = u32();
  if (rank > 16) malformed("rank");
  for (uint32_t i = 0; i < rank; ++i) {
    const int64_t dim = i64();
    if (dim < 0) malformed("negative dimension");
    t.shape.push_back(dim);
  }
  return t;
}

core::Tensor Reader::tensor() {
  if (u8() == 0) return core::Tensor();
  const core::TensorType t = type();
  // The nonzero dimensions' product, dimension by dimension, must fit in the bytes left (so no
  // product overflows 64 bits, even for an empty tensor: numel multiplies every dimension).
  uint64_t bytes = core::dtype_size(t.dtype);
  const uint64_t left = static_cast<uint64_t>(end_ - p_);
  for (int64_t d : t.shape) {
    if (d == 0) continue;
    if (bytes > left / static_cast<uint64_t>(d)) malformed("tensor data runs past the end");
    bytes *= static_cast<uint64_t>(d);
  }
  core::Tensor out(t);
  take(out.raw(), out.nbytes());
  return out;
}

core::Attrs Reader::attrs() {
  core::Attrs a;
  const uint32_t n = u32();
  for (uint32_t i = 0; i < n; ++i) {
    std::string k = str();
    switch (u8()) {
      case 0: a[k] = i64(); break;
      case 1: a[k] = f64(); break;
      case 2: a[k] = str(); break;
      case 3: {
        std::vector<int64_t> v(count(u64(), 8, "attribute list"));
        for (auto& e : v) e = i64();
        a[k] = std::move(v);
        break;
      }
      case 4: {
        std::vector<double> v(count(u64(), 8, "attribute list"));
        for (auto& e : v) e = f64();
        a[k] = std::move(v);
        break;
      }
      default: malformed("attribute kind");
    }
  }
  return a;
}

backends::ValueMap Reader::values() {
  backends::ValueMap m;
  const uint32_t n = u32();
  for (uint32_t i = 0; i < n; ++i) {
    std::string k = str();
    m.insert_or_assign(std::move(k), tensor());
  }
  return m;
}

ir::Graph Reader::graph() {
  ir::Graph g;
  g.name = str();
  for (uint32_t i = 0, n = u32(); i < n; ++i) {
    std::string name = str();
    g.inputs.push_back({std::move(name), type()});
  }
  for (uint32_t i = 0, n = u32(); i < n; ++i) g.outputs.push_back(str());
  for (auto& [k, t] : values()) g.initializers.emplace(k, std::move(t));
  for (uint32_t i = 0, n = u32(); i < n; ++i) {
    ir::Node node;
    node.name = str();
    node.op = str();
    for (uint32_t j = 0, m = u32(); j < m; ++j) node.inputs.push_back(str());
    for (uint32_t j = 0, m = u32(); j < m; ++j) node.outputs.push_back(str());
    node.attrs = attrs();
    g.nodes.push_back(std::move(node));
  }
  for (uint32_t i = 0, n = u32(); i < n; ++i) {
    std::string k = str();
    g.types[k] = type();
  }
  g.form_batch.from = i64();
  g.form_batch.as = i64();
  g.form_batch.axis = i64();
  g.form_draw = static_cast<uint64_t>(i64());
  return g;
}

}  // namespace quorum::worker
