// The shape-checked graph builder.
#include "gen/builder.h"

#include <algorithm>
#include <cmath>

#include "ops/materialize.h"
#include "ops/registry.h"

namespace quorum::gen {
namespace {

using Ints = std::vector<int64_t>;

// The largest w with w^k <= n (integer arithmetic: no libm rounding can change a model).
int64_t floor_root(int64_t n, int k) {
  int64_t w = 1;
  auto fits = [&](int64_t x) {
    int64_t p = 1;
    for (int i = 0; i < k; ++i)
      if ((p *= x) > n) return false;
    return true;
  };
  while (fits(w + 1)) ++w;
  return w;
}

// Dims of a `k`-axis box holding n elements, as even as divisibility allows (largest last).
Ints balanced(int64_t n, int k) {
  Ints d;
  int64_t rem = n;
  for (int i = 0; i < k - 1; ++i) {
    const int64_t want = floor_root(rem, k - i);
    int64_t best = 1;
    for (int64_t x = 1; x <= want; ++x)
      if (rem % x == 0) best = x;
    d.push_back(best);
    rem /= best;
  }
  d.push_back(rem);
  return d;
}

// NumPy broadcasting of `b` into `acc`; false when they do not broadcast. (ops::broadcast_shapes
// says why, which costs a message on every call; here only yes or no is needed.)
bool broadcast_into(Shape& acc, const Shape& b) {
  if (b.size() > acc.size()) acc.insert(acc.begin(), b.size() - acc.size(), 1);
  const size_t off = acc.size() - b.size();
  for (size_t i = 0; i < b.size(); ++i) {
    int64_t& a = acc[off + i];
    if (a == b[i] || b[i] == 1) continue;
    if (a != 1) return false;
    a = b[i];
  }
  return true;
}

// Largest divisor of n that is at most cap.
int64_t divisor_at_most(int64_t n, int64_t cap) {
  int64_t best = 1;
  for (int64_t x = 1; x <= std::min(n, cap); ++x)
    if (n % x == 0) best = x;
  return best;
}

// A shape of rank `r` holding the elements of `s`, batch axis kept and a channel axis next, so
// that windowed layers see an [N, C, spatial...] layout.
Ints rank_shape(const Shape& s, int r, core::Rng& rng) {
  const int64_t n = core::numel(s);
  if (r == 1) return {n};
  const int64_t b = s.size() >= 2 ? s[0] : 1;
  const int64_t rest = n / b;
  if (r == 2) return {b, rest};
  int64_t c = s.size() >= 3 && rest % s[1] == 0 && s[1] <= 16 ? s[1] : divisor_at_most(rest, rng.randint(1, 4));
  Ints out{b, c};
  const Ints sp = balanced(rest / c, r - 2);
  out.insert(out.end(), sp.begin(), sp.end());
  return out;
}

// A shape of target's rank holding n elements, matching target's leading dims where they divide.
Ints aligned_shape(int64_t n, const Shape& target) {
  Ints out;
  int64_t rem = n;
  for (size_t i = 0; i + 1 < target.size(); ++i) {
    const int64_t d = divisor_at_most(rem, target[i]);
    out.push_back(d);
    rem /= d;
  }
  out.push_back(rem);
  return out;
}

}  // namespace

ir::Graph materialize(Model m, core::Rng& rng) {
  for (const auto& [name, spec] : m.pending)
    m.graph.initializers.emplace(name, ops::init_param(spec, rng).to(spec.type.dtype));
  return std::move(m.graph);
}

Builder::Builder(core::Rng& rng, const Limits& lim, core::DType dtype) : rng_(rng), lim_(lim), dtype_(dtype) {}

Vid Builder::input(const Shape& shape, const std::string& name) {
  const TensorType t{dtype_, shape};
  g_.inputs.push_back({name, t});
  vals_.push_back({name, t});
  return static_cast<Vid>(vals_.size() - 1);
}

Vid Builder::constant(const Shape& shape, ops::Init init, const std::string& tag) {
  const std::string name = tag + "_" + std::to_string(counter_++);
  const TensorType t{dtype_, shape};
  pending_.push_back({name, ops::ParamSpec{"const", t, init}});
  vals_.push_back({name, t});
  return static_cast<Vid>(vals_.size() - 1);
}

Vid Builder::constant(const std::string& name, const core::Tensor& value) {
  g_.initializers.insert_or_assign(name, value);
  vals_.push_back({name, value.type()});
  return static_cast<Vid>(vals_.size() - 1);
}

std::vector<TensorType> Builder::types_of(const std::vector<Vid>& in) const {
  std::vector<TensorType> t;
  t.reserve(in.size());
  for (Vid v : in) t.push_back(type(v));
  return t;
}

Builder::Mark Builder::mark() const {
  return {g_.nodes.size(), vals_.size(), pending_.size(), g_.inputs.size(), counter_};
}

void Builder::rollback(const Mark& m) {
  for (size_t i = m.nodes; i < g_.nodes.size(); ++i)
    for (const auto& o : g_.nodes[i].outputs) g_.types.erase(o);
  // Only ever shrink: keep_weight may have removed pending entries since the mark.
  g_.nodes.resize(std::min(m.nodes, g_.nodes.size()));
  vals_.resize(std::min(m.vals, vals_.size()));
  pending_.resize(std::min(m.pending, pending_.size()));
  g_.inputs.resize(std::min(m.inputs, g_.inputs.size()));
  counter_ = m.counter;
}

bool Builder::within_limits(const ops::Signature& sig) const {
  for (const auto& o : sig.outputs) {
    if (o.shape.empty() || static_cast<int>(o.shape.size()) > lim_.max_rank) return false;
    for (int64_t d : o.shape)
      if (d < 1) return false;
    if (core::numel(o.shape) > lim_.max_elems) return false;
  }
  int64_t params = 0;
  for (const auto& p : sig.params) params += core::numel(p.type.shape);
  return params <= lim_.max_params;
}

Vid Builder::emit(const ops::OpSpec& spec, const std::vector<Vid>& in, Attrs attrs, const ops::Signature& sig) {
  ir::Node n;
  n.name = spec.name + "_" + std::to_string(counter_++);
  n.op = spec.name;
  n.inputs.reserve(in.size() + sig.params.size());
  for (Vid v : in) n.inputs.push_back(name(v));
  for (const auto& p : sig.params) {
    n.inputs.push_back(n.name + "." + p.name);
    pending_.push_back({n.inputs.back(), p});
  }
  const auto first = static_cast<Vid>(vals_.size());
  for (size_t i = 0; i < sig.outputs.size(); ++i) {
    const std::string out = sig.outputs.size() == 1 ? n.name : n.name + "_out" + std::to_string(i);
    n.outputs.push_back(out);
    g_.types[out] = sig.outputs[i];
    vals_.push_back({out, sig.outputs[i]});
  }
  n.attrs = std::move(attrs);
  g_.nodes.push_back(std::move(n));
  return first;
}

Vid Builder::emit_known(const std::string& op, Vid in, Attrs full_attrs, const Shape& out) {
  ops::Signature sig;
  sig.outputs.push_back({type(in).dtype, out});
  return emit(ops::op(op), {in}, std::move(full_attrs), sig);
}

Vid Builder::add(const std::string& op, const std::vector<Vid>& in, const Attrs& attrs) {
  const ops::OpSpec& spec = ops::op(op);
  const auto k = static_cast<int>(in.size());
  if (k < spec.min_inputs || (spec.max_inputs != ops::kUnbounded && k > spec.max_inputs))
    throw core::OpError(op + " takes " + std::to_string(spec.min_inputs) + ".." + std::to_string(spec.max_inputs) +
                        " data inputs, got " + std::to_string(k));
  Attrs a = ops::canonical_attrs(spec, attrs);
  const ops::Signature sig = spec.infer(types_of(in), a);
  return emit(spec, in, std::move(a), sig);
}

std::optional<Vid> Builder::try_node(const ops::OpSpec& spec, const std::vector<Vid>& in,
                                     const std::vector<TensorType>& types, Attrs a, const Attrs& fixed,
                                     bool check_limits) {
  for (int pass = 0; pass < 2; ++pass) {
    try {
      Attrs c = ops::canonical_attrs(spec, a);
      const ops::Signature sig = spec.infer(types, c);
      if (check_limits && !within_limits(sig)) return std::nullopt;  // a redraw, not a repair, shrinks it
      return emit(spec, in, std::move(c), sig);
    } catch (const core::OpError&) {
      if (pass == 1) return std::nullopt;
      try {
        a = ops::canonical_attrs(spec, a);
      } catch (const core::OpError&) {
        return std::nullopt;  // outside the domain: nothing to repair from
      }
      if (!repair_attrs(spec, types, a)) return std::nullopt;
      for (const auto& [k, v] : fixed) a[k] = v;
    }
  }
  return std::nullopt;
}

std::optional<Vid> Builder::place(const ops::OpSpec& spec, const std::vector<Vid>& in, const Attrs& fixed,
                                  const Want& want) {
  const auto k = static_cast<int>(in.size());
  if (k < spec.min_inputs || (spec.max_inputs != ops::kUnbounded && k > spec.max_inputs)) return std::nullopt;
  const std::vector<TensorType> types = types_of(in);
  for (int t = 0; t < lim_.tries; ++t) {
    Want w = want;
    if (t == lim_.tries - 1) w.conservative = true;
    Attrs a = draw_attrs(spec, types, rng_, lim_, w, fixed);
    for (const auto& [name, v] : fixed) a[name] = v;
    if (auto v = try_node(spec, in, types, std::move(a), fixed, true)) return v;
  }
  return std::nullopt;
}

namespace {

// The builder's reshaping, as an operator's merge preparation sees it (ops::InputShaper).
class MergeShaper : public ops::InputShaper {
 public:
  MergeShaper(Builder& b, std::vector<Vid>& in) : b_(b), in_(in) {}
  size_t count() const override { return in_.size(); }
  const Shape& shape(size_t i) const override { return b_.shape(in_.at(i)); }
  void to_rank(size_t i, int r) override { in_.at(i) = b_.to_rank(in_.at(i), r); }
  void to_shape(size_t i, const Shape& t) override { in_.at(i) = b_.to_shape(in_.at(i), t); }
  core::Rng& rng() override { return b_.rng(); }
  int64_t max_elems() const override { return b_.limits().max_elems; }

 private:
  Builder& b_;
  std::vector<Vid>& in_;
};

}  // namespace

std::optional<std::vector<Vid>> Builder::prepare_merge(const ops::OpSpec& spec, std::vector<Vid> in, Attrs& fixed,
                                                       const Want& want) {
  const auto k = static_cast<int>(in.size());
  if (k < spec.min_inputs || (spec.max_inputs != ops::kUnbounded && k > spec.max_inputs)) return std::nullopt;
  if (spec.prepare_merge) {
    MergeShaper shaper(*this, in);
    if (!spec.prepare_merge(shaper, fixed)) return std::nullopt;
    return in;
  }
  // Elementwise merges: one shape for all (or, sometimes, shapes that already broadcast).
  bool same = true;
  for (Vid v : in) same = same && shape(v) == shape(in[0]);
  if (same) return in;
  if (want.broadcast || rng_.bernoulli(0.3)) {
    Shape b = shape(in[0]);
    bool ok = true;
    for (Vid v : in) ok = ok && broadcast_into(b, shape(v));
    // A block's bias or scale broadcasts onto its first input and must not grow it.
    if (ok && core::numel(b) <= lim_.max_elems && (!want.broadcast || b == shape(in[0]))) return in;
  }
  const Shape target = want.broadcast ? shape(in[0]) : shape(in[rng_.index(in.size())]);
  for (Vid& v : in) v = to_shape(v, target);
  return in;
}

bool Builder::glue_ok(const std::string& op) const {
  return lim_.glue.empty() || std::find(lim_.glue.begin(), lim_.glue.end(), op) != lim_.glue.end();
}

std::vector<Vid> Builder::guard(const ops::OpSpec& spec, std::vector<Vid> in) {
  std::vector<bool> done(in.size(), false);
  for (const auto& r : spec.valid_ranges) {
    const auto i = static_cast<size_t>(r.input);
    if (i >= in.size() || done[i] || !std::isfinite(r.lo)) continue;
    if (!rng_.bernoulli(guard_p_) || !glue_ok("clip")) continue;
    const double lo = r.lo + 0.1, hi = std::isfinite(r.hi) ? r.hi - 0.1 : r.lo + 100.0;
    in[i] = add("clip", {in[i]}, {{"min", lo}, {"max", hi}});
    done[i] = true;
  }
  return in;
}

std::optional<Vid> Builder::layer(const ops::OpSpec& spec, std::vector<Vid> in, const Attrs& fixed, const Want& want) {
  if (spec.is_loss || in.empty()) return std::nullopt;
  const Mark m = mark();
  try {
    Attrs fx = fixed;
    std::vector<Vid> xs;
    if (!spec.multi_input()) {
      Vid x = in[0];
      const auto& ranks = accepted_ranks(spec);
      if (ranks.empty()) return std::nullopt;
      if (std::find(ranks.begin(), ranks.end(), rank(x)) == ranks.end()) {
        int best = 99;
        std::vector<int> nearest;
        for (int r : ranks) {
          const int dist = std::abs(r - rank(x));
          if (dist < best) nearest.clear();
          if (dist <= best) {
            best = dist;
            nearest.push_back(r);
          }
        }
        x = to_rank(x, nearest[rng_.index(nearest.size())]);
      }
      xs = {x};
    } else {
      auto prepared = prepare_merge(spec, std::move(in), fx, want);
      if (!prepared) {
        rollback(m);
        return std::nullopt;
      }
      xs = std::move(*prepared);
    }
    xs = guard(spec, std::move(xs));
    if (auto v = place(spec, xs, fx, want)) return v;
  } catch (const core::OpError&) {
    // A reshaping step the shape rules refused: give up this layer, leave nothing behind.
  }
  rollback(m);
  return std::nullopt;
}

std::optional<Vid> Builder::adapt(const ops::OpSpec& spec, const std::vector<Vid>& in, const Attrs& attrs) {
  const auto k = static_cast<int>(in.size());
  if (k >= spec.min_inputs && (spec.max_inputs == ops::kUnbounded || k <= spec.max_inputs))
    if (auto v = try_node(spec, in, types_of(in), attrs, {}, false)) return v;
  return layer(spec, in);
}

Vid Builder::to_rank(Vid v, int r) {
  const Shape s = shape(v);
  const int cur = static_cast<int>(s.size());
  if (cur == r) return v;
  if (r == 2 && cur > 2 && rng_.bernoulli(0.4)) return add("flatten", {v}, {{"axis", int64_t{1}}});
  if (r < cur) {
    // Size-1 axes other than the batch axis: squeezing a batch of one would make the next axis the batch.
    Ints ones;
    for (int d = 1; d < cur; ++d)
      if (s[static_cast<size_t>(d)] == 1) ones.push_back(d);
    if (static_cast<int>(ones.size()) >= cur - r && rng_.bernoulli(0.5)) {
      rng_.shuffle(ones);
      ones.resize(static_cast<size_t>(cur - r));
      std::sort(ones.begin(), ones.end());
      return add("squeeze", {v}, {{"axes", ones}});
    }
  }
  if (r == cur + 1 && cur >= 1 && rng_.bernoulli(0.3))
    return add("unsqueeze", {v}, {{"axes", Ints{rng_.randint(1, cur)}}});
  const Ints target = rank_shape(s, r, rng_);
  return emit_known("reshape", v, {{"shape", target}}, target);
}

Vid Builder::crop_and_pad(Vid v, const Shape& t) {
  const size_t r = t.size();
  Ints axes, starts, ends;
  for (size_t d = 0; d < r; ++d) {
    const int64_t have = shape(v)[d];
    if (have <= t[d]) continue;
    const int64_t off = rng_.randint(0, have - t[d]);
    axes.push_back(static_cast<int64_t>(d));
    starts.push_back(off);
    ends.push_back(off + t[d]);
  }
  if (!axes.empty()) {
    Shape out = shape(v);
    for (size_t i = 0; i < axes.size(); ++i) out[static_cast<size_t>(axes[i])] = ends[i] - starts[i];
    v = emit_known("slice", v, {{"starts", starts}, {"ends", ends}, {"axes", axes}, {"steps", Ints{}}}, out);
  }
  Ints pads(2 * r, 0);
  bool any = false, reflect_ok = true;
  for (size_t d = 0; d < r; ++d) {
    const int64_t have = shape(v)[d];
    if (have >= t[d]) continue;
    const int64_t diff = t[d] - have, b = rng_.randint(0, diff);
    pads[d] = b;
    pads[r + d] = diff - b;
    reflect_ok = reflect_ok && std::max(b, diff - b) < have;
    any = true;
  }
  if (!any) return v;
  const double u = rng_.uniform();
  const std::string mode = u < 0.5 || !lim_.glue.empty() ? "constant" : (u < 0.75 || !reflect_ok) ? "edge" : "reflect";
  Shape out = shape(v);
  for (size_t d = 0; d < r; ++d) out[d] += pads[d] + pads[r + d];
  return emit_known("pad", v, {{"pads", pads}, {"mode", mode}, {"value", 0.0}}, out);
}

Vid Builder::to_shape(Vid v, const Shape& target) {
  const Shape s = shape(v);
  if (s == target) return v;
  const int64_t n = core::numel(s);
  if (n == core::numel(target)) {
    if (s.size() == target.size() && std::is_permutation(s.begin(), s.end(), target.begin()) && rng_.bernoulli(0.5) &&
        glue_ok("transpose")) {
      Ints perm;
      std::vector<bool> used(s.size(), false);
      for (int64_t d : target)
        for (size_t j = 0; j < s.size(); ++j)
          if (!used[j] && s[j] == d) {
            used[j] = true;
            perm.push_back(static_cast<int64_t>(j));
            break;
          }
      return add("transpose", {v}, {{"perm", perm}});
    }
    return emit_known("reshape", v, {{"shape", target}}, target);
  }
  // Muffin's other way to change a size: flatten, then a dense layer with the wanted width.
  if (target.size() == 2 && s.size() >= 2 && s[0] == target[0] && target[1] <= 64 &&
      (rng_.bernoulli(0.25) || !glue_ok("slice") || !glue_ok("pad"))) {
    const Vid f = s.size() > 2 ? add("flatten", {v}, {{"axis", int64_t{1}}}) : v;
    return add("dense", {f}, {{"units", target[1]}});
  }
  if (s.size() != target.size()) {
    const Ints aligned = aligned_shape(n, target);
    v = emit_known("reshape", v, {{"shape", aligned}}, aligned);
  }
  return crop_and_pad(v, target);
}

Vid Builder::head(Vid v, const data::DataSpec& d) {
  if (d.task == data::Task::None) return v;
  const int64_t n = d.target[0];
  Vid x = v;
  const Shape s = shape(x);
  if (!(s.size() == 2 && s[0] == n)) {
    const int64_t total = core::numel(s);
    if (total % n == 0) {
      x = s.size() > 2 && s[0] == n && rng_.bernoulli(0.5)
              ? add("flatten", {x}, {{"axis", int64_t{1}}})
              : emit_known("reshape", x, {{"shape", Ints{n, total / n}}}, Ints{n, total / n});
    } else {
      x = to_shape(x, {n, std::max<int64_t>(1, total / n)});
    }
  }
  if (d.task == data::Task::Classification) {
    x = add("dense", {x}, {{"units", d.classes}});
    return add("softmax", {x}, {{"axis", int64_t{-1}}});
  }
  x = add("dense", {x}, {{"units", core::numel(d.target) / n}});
  if (d.target.size() != 2) x = add("reshape", {x}, {{"shape", d.target}});
  return x;
}

bool Builder::keep_weight(const std::string& name, const core::Tensor& value) {
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if (it->first != name) continue;
    if (!(it->second.type == value.type())) return false;
    pending_.erase(it);
    g_.initializers.insert_or_assign(name, value);
    return true;
  }
  return false;
}

void Builder::output(Vid v) { g_.outputs.push_back(name(v)); }

Model Builder::finish(const std::string& name, const data::DataSpec& d) {
  Model m;
  g_.name = name;
  m.graph = std::move(g_);
  m.pending = std::move(pending_);
  m.data = d;
  g_ = ir::Graph();
  vals_.clear();
  pending_.clear();
  counter_ = 0;
  return m;
}

void output_sinks(Builder& b, std::vector<int> sinks, const std::vector<Vid>& val, Vid x) {
  std::reverse(sinks.begin(), sinks.end());
  std::vector<Vid> outs;
  for (int s : sinks) {
    const Vid v = val[static_cast<size_t>(s)];
    if (std::find(outs.begin(), outs.end(), v) == outs.end() && v != x) outs.push_back(v);
  }
  if (outs.empty()) outs.push_back(b.add("relu", {x}));
  for (Vid v : outs) b.output(v);
}

}  // namespace quorum::gen
