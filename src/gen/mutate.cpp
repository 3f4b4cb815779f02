// The six mutations of graph-based fuzzing, applied with rate r to any model (an imported one, or
// generated WS/RN models): Graph Edges Addition (ceil(E*r) edges), Graph Edges Removal
// (floor(E*r)), Block Nodes Addition and Removal (each node with probability r), Tensor Shape
// Mutation (the input shape) and Parameter Mutation (each node with probability r: a random
// enumeration value, or a random value in range). Each model draws which mutations it gets (each
// with probability 1/2, at least one). The mutated structure is then rebuilt through the builder,
// which repairs what the mutation broke (attributes that no longer fit, inputs of a merge that
// no longer match) and keeps every weight whose node and type survived.
#include <algorithm>
#include <cmath>
#include <set>

#include "gen/factories.h"
#include "ops/registry.h"

namespace quorum::gen {
namespace {

constexpr int kConstBase = -1000000;  // refs <= this name constants (initializers used as data)

struct ENode {
  std::string op;
  Attrs attrs;
  std::vector<int> data;            // refs: node index >= 0, graph input -1-k, constant kConstBase-c
  std::vector<std::string> params;  // the original weights' names
  bool removed = false;
  int alias = 0;  // removed: what its consumers read instead
};

struct Const {
  std::string name;
  std::optional<core::Tensor> value;  // kept as it is
  ops::ParamSpec pending;             // or drawn at materialize
};

struct EGraph {
  std::vector<ir::ValueInfo> inputs;
  std::vector<Const> consts;
  std::vector<ENode> nodes;  // storage; order gives the topological order
  std::vector<int> order;
  std::vector<int> outputs;
  std::map<std::string, core::Tensor> weights;
};

bool is_node(int r) { return r >= 0; }
bool is_const(int r) { return r <= kConstBase; }

EGraph from_model(const Model& m) {
  const ir::Graph& g = m.graph;
  EGraph e;
  std::map<std::string, int> refs;
  std::map<std::string, ops::ParamSpec> pending(m.pending.begin(), m.pending.end());
  for (size_t k = 0; k < g.inputs.size(); ++k) {
    e.inputs.push_back(g.inputs[k]);
    refs[g.inputs[k].name] = -1 - static_cast<int>(k);
  }
  auto const_ref = [&](const std::string& name) {
    auto it = refs.find(name);
    if (it != refs.end()) return it->second;
    Const c{name, std::nullopt, {}};
    if (auto w = g.initializers.find(name); w != g.initializers.end()) c.value = w->second;
    else if (auto p = pending.find(name); p != pending.end()) c.pending = p->second;
    else throw core::UserError("mutate: value '" + name + "' is not defined");
    e.consts.push_back(std::move(c));
    const int r = kConstBase - static_cast<int>(e.consts.size() - 1);
    refs[name] = r;
    return r;
  };
  for (const auto& n : g.nodes) {
    if (n.outputs.size() != 1)
      throw core::UserError("mutate: node '" + n.name + "' has " + std::to_string(n.outputs.size()) +
                            " outputs; only single-output nodes can be mutated");
    ENode en;
    en.op = n.op;
    en.attrs = n.attrs;
    const size_t nd = ir::data_input_count(n);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (i >= nd) {
        en.params.push_back(n.inputs[i]);
        continue;
      }
      auto it = refs.find(n.inputs[i]);
      en.data.push_back(it != refs.end() ? it->second : const_ref(n.inputs[i]));
    }
    refs[n.outputs[0]] = static_cast<int>(e.nodes.size());
    e.order.push_back(static_cast<int>(e.nodes.size()));
    e.nodes.push_back(std::move(en));
  }
  for (const auto& o : g.outputs) e.outputs.push_back(refs.at(o));
  e.weights = g.initializers;
  return e;
}

int resolve(const EGraph& e, int r) {
  while (is_node(r) && e.nodes[static_cast<size_t>(r)].removed) r = e.nodes[static_cast<size_t>(r)].alias;
  return r;
}

std::vector<int> alive(const EGraph& e) {
  std::vector<int> v;
  for (int i : e.order)
    if (!e.nodes[static_cast<size_t>(i)].removed) v.push_back(i);
  return v;
}

int edge_count(const EGraph& e) {
  int n = 0;
  for (int i : alive(e))
    for (int r : e.nodes[static_cast<size_t>(i)].data) n += is_const(r) ? 0 : 1;
  return n;
}

void insert_before(EGraph& e, int before, int node) {
  e.order.insert(std::find(e.order.begin(), e.order.end(), before), node);
}

// Every consumer (and output) of `from` reads `to` instead, except `to` itself.
void redirect(EGraph& e, int from, int to) {
  for (size_t i = 0; i < e.nodes.size(); ++i) {
    if (static_cast<int>(i) == to) continue;
    for (int& r : e.nodes[i].data)
      if (r == from) r = to;
  }
  for (int& r : e.outputs)
    if (r == from) r = to;
}

// ---- the six mutations ----------------------------------------------------------------------

int edges_addition(EGraph& e, core::Rng& rng, double r) {
  const int count = static_cast<int>(std::ceil(edge_count(e) * r));
  const std::vector<std::string> merges = {"add", "sub", "mul", "maximum", "minimum", "concat", "sum"};
  int done = 0;
  for (int c = 0; c < count; ++c) {
    const std::vector<int> live = alive(e);
    if (live.empty()) break;
    const size_t pos = rng.index(live.size());
    const int v = live[pos];
    std::vector<int> from;
    for (size_t k = 0; k < e.inputs.size(); ++k) from.push_back(-1 - static_cast<int>(k));
    for (size_t p = 0; p < pos; ++p) from.push_back(live[p]);
    std::vector<int> have;
    for (int x : e.nodes[static_cast<size_t>(v)].data) have.push_back(resolve(e, x));
    std::erase_if(from, [&](int u) { return std::find(have.begin(), have.end(), u) != have.end(); });
    if (from.empty() || e.nodes[static_cast<size_t>(v)].data.empty()) continue;
    const int u = from[rng.index(from.size())];
    ENode& target = e.nodes[static_cast<size_t>(v)];
    if (ops::op(target.op).max_inputs == ops::kUnbounded) {
      target.data.push_back(u);
    } else {
      // A fixed-arity node gets the new edge through a merge placed in front of it.
      ENode m;
      m.op = merges[rng.index(merges.size())];
      m.data = {target.data[0], u};
      const int mi = static_cast<int>(e.nodes.size());
      e.nodes.push_back(std::move(m));
      e.nodes[static_cast<size_t>(v)].data[0] = mi;
      insert_before(e, v, mi);
    }
    ++done;
  }
  return done;
}

int edges_removal(EGraph& e, core::Rng& rng, double r) {
  const int count = static_cast<int>(std::floor(edge_count(e) * r));
  int done = 0;
  for (int c = 0; c < count; ++c) {
    std::vector<int> cand;
    for (int i : alive(e)) {
      int n = 0;
      for (int x : e.nodes[static_cast<size_t>(i)].data) n += is_const(x) ? 0 : 1;
      if (n >= 2) cand.push_back(i);
    }
    if (cand.empty()) break;
    ENode& v = e.nodes[static_cast<size_t>(cand[rng.index(cand.size())])];
    std::vector<size_t> edges;
    for (size_t j = 0; j < v.data.size(); ++j)
      if (!is_const(v.data[j])) edges.push_back(j);
    const size_t j = edges[rng.index(edges.size())];
    if (ops::op(v.op).max_inputs == ops::kUnbounded && v.data.size() > 2) {
      v.data.erase(v.data.begin() + static_cast<std::ptrdiff_t>(j));
    } else {
      // A two-input node left with one input is gone: its consumers read the remaining input.
      v.removed = true;
      v.alias = v.data[j == 0 ? 1 : 0];
    }
    ++done;
  }
  return done;
}

int nodes_addition(EGraph& e, core::Rng& rng, double r) {
  int done = 0;
  for (int v : alive(e)) {
    const ENode& src = e.nodes[static_cast<size_t>(v)];
    if (ops::op(src.op).multi_input() || !rng.bernoulli(r)) continue;
    ENode d;
    d.op = src.op;
    d.attrs = src.attrs;
    d.data = {v};
    const int di = static_cast<int>(e.nodes.size());
    e.nodes.push_back(std::move(d));
    redirect(e, v, di);
    auto at = std::find(e.order.begin(), e.order.end(), v);
    e.order.insert(at + 1, di);
    ++done;
  }
  return done;
}

int nodes_removal(EGraph& e, core::Rng& rng, double r) {
  int done = 0;
  for (int v : alive(e)) {
    ENode& n = e.nodes[static_cast<size_t>(v)];
    // Keep at least one node, and never let a consumer fall back onto a constant.
    if (alive(e).size() <= 1 || n.data.empty() || is_const(n.data[0]) || !rng.bernoulli(r)) continue;
    n.removed = true;
    n.alias = n.data[0];
    ++done;
  }
  return done;
}

int shape_mutation(EGraph& e, core::Rng& rng, const Limits& lim) {
  int done = 0;
  for (auto& in : e.inputs) {
    Shape s = in.type.shape;
    if (s.empty()) continue;
    const int changes = rng.bernoulli(0.7) ? 1 : 2;
    for (int c = 0; c < changes; ++c) {
      const size_t axis = s.size() >= 2 && rng.bernoulli(0.85)
                              ? static_cast<size_t>(rng.randint(1, static_cast<int64_t>(s.size()) - 1))
                              : 0;
      const int64_t d = s[axis];
      const int64_t nd =
          axis == 0 ? rng.randint(1, 2) : rng.randint(std::max<int64_t>(1, d / 2), std::max<int64_t>(2, 2 * d));
      Shape t = s;
      t[axis] = nd;
      if (core::numel(t) <= lim.max_elems / 2) s = t;
    }
    if (s != in.type.shape) ++done;
    in.type.shape = s;
  }
  return done;
}

// A random value from an attribute's domain: a random choice of an enumeration, a random value in
// a range (around the current value where the range is unbounded).
core::AttrValue domain_value(const ops::AttrSpec& a, const core::AttrValue& cur, core::Rng& rng) {
  if (!a.choices.empty()) return a.choices[rng.index(a.choices.size())];
  auto int_in_range = [&](int64_t c) {
    const double lo = std::isfinite(a.lo) ? a.lo : static_cast<double>(c) - 2;
    const double hi = std::isfinite(a.hi) ? a.hi : std::max(lo + 2, static_cast<double>(std::llabs(c)) * 2 + 2);
    return rng.randint(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
  };
  switch (a.kind) {
    case core::AttrKind::Int: return int_in_range(std::get<int64_t>(cur));
    case core::AttrKind::Float: {
      const double c = std::get<double>(cur);
      double v;
      if (std::isfinite(a.lo) && std::isfinite(a.hi)) v = rng.uniform(a.lo, a.hi);
      else if (std::isfinite(a.lo)) v = a.lo + (c > a.lo ? (c - a.lo) * rng.uniform(0.5, 2.0) : rng.uniform(0.0, 1.0));
      else v = c * rng.uniform(0.5, 2.0) + rng.uniform(-0.5, 0.5);
      return std::round(v * 1000.0) / 1000.0;
    }
    case core::AttrKind::Ints: {
      auto v = std::get<std::vector<int64_t>>(cur);
      if (!v.empty()) {
        auto& x = v[rng.index(v.size())];
        x = int_in_range(x);
      }
      return v;
    }
    default: return cur;
  }
}

int parameter_mutation(EGraph& e, core::Rng& rng, double r) {
  int done = 0;
  for (int v : alive(e)) {
    ENode& n = e.nodes[static_cast<size_t>(v)];
    const ops::OpSpec& spec = ops::op(n.op);
    if (spec.attrs.empty() || !rng.bernoulli(r)) continue;
    const ops::AttrSpec& a = spec.attrs[rng.index(spec.attrs.size())];
    n.attrs = ops::canonical_attrs(spec, n.attrs, true);
    n.attrs[a.name] = domain_value(a, n.attrs.at(a.name), rng);
    ++done;
  }
  return done;
}

// ---- rebuild --------------------------------------------------------------------------------

// Drops nodes no output depends on, and the weights only they used.
void prune(Model& m) {
  ir::Graph& g = m.graph;
  std::set<std::string> needed(g.outputs.begin(), g.outputs.end());
  std::vector<bool> keep(g.nodes.size(), false);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const auto& n = g.nodes[i];
    if (!std::any_of(n.outputs.begin(), n.outputs.end(), [&](const std::string& o) { return needed.count(o); }))
      continue;
    keep[i] = true;
    needed.insert(n.inputs.begin(), n.inputs.end());
  }
  std::vector<ir::Node> nodes;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (keep[i]) nodes.push_back(std::move(g.nodes[i]));
    else
      for (const auto& o : g.nodes[i].outputs) g.types.erase(o);
  g.nodes = std::move(nodes);
  std::erase_if(m.pending, [&](const auto& p) { return !needed.count(p.first); });
  std::erase_if(g.initializers, [&](const auto& kv) { return !needed.count(kv.first); });
}

Model rebuild(const EGraph& e, core::Rng& rng, const Limits& lim, const std::string& name) {
  Builder b(rng, lim);
  std::map<int, Vid> val;
  for (size_t k = 0; k < e.inputs.size(); ++k)
    val[-1 - static_cast<int>(k)] = b.input(e.inputs[k].type.shape, e.inputs[k].name);
  for (size_t c = 0; c < e.consts.size(); ++c) {
    const Const& k = e.consts[c];
    val[kConstBase - static_cast<int>(c)] =
        k.value ? b.constant(k.name, *k.value) : b.constant(k.pending.type.shape, k.pending.init, "const");
  }
  for (int i : e.order) {
    const ENode& n = e.nodes[static_cast<size_t>(i)];
    if (n.removed) continue;
    std::vector<Vid> in;
    for (int r : n.data) in.push_back(val.at(resolve(e, r)));
    const ops::OpSpec& spec = ops::op(n.op);
    if (auto v = b.adapt(spec, in, n.attrs)) {
      val[i] = *v;
      // Weights of a node whose parameter types survived are kept.
      const ir::Node& made = b.last_node();
      const size_t nd = ir::data_input_count(made);
      for (size_t p = 0; p < n.params.size() && nd + p < made.inputs.size(); ++p)
        if (auto w = e.weights.find(n.params[p]); w != e.weights.end()) b.keep_weight(made.inputs[nd + p], w->second);
    } else {
      val[i] = in[0];  // the operator fits nowhere any more: the node is dropped
    }
  }
  std::vector<Vid> outs;
  for (int r : e.outputs) {
    Vid v = val.at(resolve(e, r));
    if (!is_node(resolve(e, r))) v = b.add("relu", {v});  // an output must be computed by a node
    if (std::find(outs.begin(), outs.end(), v) == outs.end()) outs.push_back(v);
  }
  for (Vid v : outs) b.output(v);
  Model m = b.finish(name, {});
  prune(m);
  return m;
}

class Mutate : public Generator {
 public:
  Mutate(const GenOptions& opt, const data::Source& source) : opt_(opt) {
    if (!(opt.mutation_rate >= 0 && opt.mutation_rate < 1))
      throw core::UserError("--mutation_rate must lie in [0, 1), got " + std::to_string(opt.mutation_rate));
    if (opt.seed_models.empty()) {
      ws_ = make_ws(opt, source);
      rn_ = make_rn(opt, source);
    }
  }

  std::string name() const override { return "mutate"; }

  std::vector<std::string> operators() const override {
    std::vector<std::string> v;
    for (const ops::OpSpec* s : layer_operators()) v.push_back(s->name);
    return v;
  }

  Model generate(uint64_t index, core::Rng& rng) override {
    Model seed;
    std::string origin;
    if (!opt_.seed_models.empty()) {
      seed.graph = opt_.seed_models[index % opt_.seed_models.size()];
      origin = seed.graph.name;
    } else {
      core::Rng sr = rng.derive("seed model");
      seed = (index % 2 == 0 ? ws_ : rn_)->generate(index / 2, sr);
      origin = seed.graph.name;
    }
    Limits lim = opt_.limits;
    for (const auto& [v, t] : seed.graph.types) lim.max_elems = std::max(lim.max_elems, 2 * core::numel(t.shape));
    lim.max_params = std::max(lim.max_params, lim.max_elems * 4);

    EGraph e = from_model(seed);
    const double r = opt_.mutation_rate;
    bool on[6];
    bool any = false;
    for (bool& f : on) any = (f = rng.bernoulli(0.5)) || any;
    if (!any) on[rng.index(6)] = true;
    std::string note = "mutants of " + origin + ":";
    auto log = [&](const char* what, int n) { note += std::string(" ") + what + "(" + std::to_string(n) + ")"; };
    if (on[0]) log("GEA", edges_addition(e, rng, r));
    if (on[1]) log("GER", edges_removal(e, rng, r));
    if (on[2]) log("BNA", nodes_addition(e, rng, r));
    if (on[3]) log("BNR", nodes_removal(e, rng, r));
    if (on[4]) log("TSM", shape_mutation(e, rng, lim));
    if (on[5]) log("PM", parameter_mutation(e, rng, r));
    Model m = rebuild(e, rng, lim, "mutate_" + std::to_string(index));
    m.note = note;
    return m;
  }

 private:
  GenOptions opt_;
  std::unique_ptr<Generator> ws_, rn_;
};

}  // namespace

std::unique_ptr<Generator> make_mutate(const GenOptions& opt, const data::Source& source) {
  return std::make_unique<Mutate>(opt, source);
}

void mutate_weights(ir::Graph& g, core::Rng& rng, double rate) {
  std::vector<std::string> names;
  for (const auto& [name, w] : g.initializers)
    if (core::is_float(w.dtype()) && w.numel() > 0) names.push_back(name);
  if (names.empty()) return;
  std::vector<bool> pick(names.size());
  bool any = false;
  for (size_t i = 0; i < names.size(); ++i) any |= (pick[i] = rng.bernoulli(0.5));
  if (!any) pick[rng.index(names.size())] = true;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!pick[i]) continue;
    core::Tensor& w = g.initializers.at(names[i]);
    const core::DType dtype = w.dtype();
    core::Tensor d = w.to(core::DType::F64);
    double mean = 0, var = 0;
    for (int64_t k = 0; k < d.numel(); ++k) mean += d.f64()[k];
    mean /= static_cast<double>(d.numel());
    for (int64_t k = 0; k < d.numel(); ++k) var += (d.f64()[k] - mean) * (d.f64()[k] - mean);
    const double sd = var > 0 ? std::sqrt(var / static_cast<double>(d.numel())) : 1e-3;
    for (int64_t k = 0; k < d.numel(); ++k) d.f64()[k] += rng.normal(0.0, rate * sd);
    w = d.to(dtype);
  }
}

}  // namespace quorum::gen
