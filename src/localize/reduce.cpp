// The reducer and localize-fix.
#include "localize/reduce.h"

#include <algorithm>
#include <ostream>
#include <set>

#include "core/error.h"
#include "data/values.h"
#include "ir/graph.h"
#include "ir/edit.h"
#include "core/rng.h"
#include "ops/registry.h"
#include "ref/interpreter.h"

namespace quorum::localize {

namespace {

struct Runner {
  const Predicate& holds;
  const ReduceOptions& opt;
  Reduced& r;
  bool try_case(const Case& c, const std::string& what) {
    if (r.runs >= opt.max_runs) return false;
    ++r.runs;
    bool ok = false;
    try {
      ok = holds(c);
    } catch (const std::exception&) {
      ok = false;
    }
    if (opt.log) *opt.log << "  reduce [" << r.runs << "] " << what << ": " << (ok ? "reproduces" : "gone") << " ("
                          << c.graph.nodes.size() << " nodes)\n";
    if (ok) r.steps.push_back(what + " -> " + std::to_string(c.graph.nodes.size()) + " nodes");
    return ok;
  }
};

// The values a case's graph inputs need: the original inputs, else what the blamed backend computed.
bool feed(Case& c, const Case& original, const backends::ValueMap& recorded) {
  backends::ValueMap in;
  for (const auto& gi : c.graph.inputs) {
    if (auto it = original.inputs.find(gi.name); it != original.inputs.end()) {
      in.emplace(gi.name, it->second);
    } else if (auto rec = recorded.find(gi.name); rec != recorded.end() && rec->second.shape() == gi.type.shape) {
      in.emplace(gi.name, rec->second.to(core::DType::F64));
    } else {
      return false;
    }
  }
  c.inputs = std::move(in);
  return true;
}

// A target whose mean-squared-error gradient at the output is the recorded incoming gradient:
// d/dy mean((y - t)^2) = 2 (y - t) / n, so t = y - g n / 2.
core::Tensor target_for(const std::string& out, const backends::ValueMap& recorded, const backends::ValueMap& grads,
                        const core::Tensor& fallback) {
  auto y = recorded.find(out);
  auto gy = grads.find(out);
  if (y == recorded.end() || gy == grads.end() || y->second.shape() != gy->second.shape()) return fallback;
  core::Tensor t(core::DType::F64, y->second.shape());
  const double n = static_cast<double>(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) t.f64()[i] = y->second.get(i) - gy->second.get(i) * n / 2;
  return t;
}

// `t` (float64) restricted to [start, start + len) along `axis`.
core::Tensor slice_axis(const core::Tensor& t, size_t axis, int64_t start, int64_t len) {
  core::Shape shape = t.shape();
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < axis; ++i) outer *= shape[i];
  for (size_t i = axis + 1; i < shape.size(); ++i) inner *= shape[i];
  const int64_t d = shape[axis];
  shape[axis] = len;
  core::Tensor out(core::DType::F64, shape);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < len; ++k)
      for (int64_t i = 0; i < inner; ++i) out.f64()[(o * len + k) * inner + i] = t.get((o * d + start + k) * inner + i);
  return out;
}

int64_t elements(const Case& c) {
  int64_t n = 0;
  for (const auto& in : c.graph.inputs) n += core::numel(in.type.shape);
  return n;
}

// 5. Shapes halved while the finding remains (forward findings and crashes: a backward case's
//    target and incoming gradient are tied to its shapes). Every graph input's axes, largest first;
//    the first half, else the second, of the recorded values; a halving the operator's shape rule
//    refuses is skipped. Repeats until nothing halves or the budget is spent.
Case shrink(Case cur, Runner& run, const ReduceOptions& opt) {
  for (bool progress = true; progress && run.r.runs < opt.max_runs;) {
    progress = false;
    for (size_t gi = 0; gi < cur.graph.inputs.size() && run.r.runs < opt.max_runs; ++gi) {
      const std::string name = cur.graph.inputs[gi].name;
      std::vector<size_t> axes(cur.graph.inputs[gi].type.shape.size());
      for (size_t a = 0; a < axes.size(); ++a) axes[a] = a;
      const core::Shape shape = cur.graph.inputs[gi].type.shape;
      std::stable_sort(axes.begin(), axes.end(), [&](size_t a, size_t b) { return shape[a] > shape[b]; });
      for (size_t a : axes) {
        const int64_t d = cur.graph.inputs[gi].type.shape[a];
        if (d < 2 || run.r.runs >= opt.max_runs) continue;
        const int64_t half = d / 2;
        for (int64_t start : {int64_t{0}, d - half}) {
          Case c = cur;
          c.graph.inputs[gi].type.shape[a] = half;
          c.graph.types.clear();
          try {
            ir::validate(c.graph, "reduced model");
          } catch (const core::UserError&) {
            break;  // the shape rule refuses this size: the other half is refused alike
          }
          c.inputs[name] = slice_axis(cur.inputs.at(name), a, start, half);
          c.target = core::Tensor();
          if (run.try_case(c, "'" + name + "' axis " + std::to_string(a) + " halved (" + (start ? "second" : "first") +
                                  " half) -> " + core::to_string(c.graph.inputs[gi].type.shape))) {
            cur = std::move(c);
            progress = true;
            break;
          }
        }
      }
    }
  }
  return cur;
}

}  // namespace

Reduced reduce(const Case& original, const std::string& blamed_node, bool backward, const backends::ValueMap& recorded,
               const backends::ValueMap& recorded_grads, const Predicate& holds, const ReduceOptions& opt) {
  Reduced r;
  r.reduced = original;
  r.elements_before = r.elements = elements(original);
  Runner run{holds, opt, r};
  if (!run.try_case(original, "original model")) return r;
  r.reproduced = true;
  const ir::Node* blamed = original.graph.find_node(blamed_node);
  if (!blamed) {
    // A crash (or loss) finding names no node: remove nodes one at a time, last first, each cut
    // where its outputs are used (they become inputs fed the recorded values) or dropped with
    // what only it fed; keep every removal after which the finding remains.
    Case cur = original;
    for (size_t pass = 0; pass < 2; ++pass) {
      std::vector<std::string> order;
      for (auto it = cur.graph.nodes.rbegin(); it != cur.graph.nodes.rend(); ++it) order.push_back(it->name);
      for (const auto& name : order) {
        if (r.runs >= opt.max_runs || cur.graph.nodes.size() <= 1) break;
        const ir::Node* n = cur.graph.find_node(name);
        if (!n) continue;
        try {
          Case c = cur;
          // Graph outputs it produces move to its inputs' producers' outputs, or are dropped.
          std::vector<std::string> outs;
          for (const auto& o : c.graph.outputs)
            if (std::find(n->outputs.begin(), n->outputs.end(), o) == n->outputs.end()) outs.push_back(o);
          if (outs.empty())
            for (size_t i = 0; i < ir::data_input_count(*n); ++i)
              if (c.graph.producer(n->inputs[i])) outs.push_back(n->inputs[i]);
          if (outs.empty()) continue;
          c.graph.outputs = outs;
          c.graph.types.clear();
          c.graph = ir::remove_unused(c.graph);
          for (const auto& o : n->outputs)
            if (c.graph.producer(o)) c.graph = ir::cut_at(c.graph, o);
          if (c.graph.find_node(name)) continue;
          c.target = core::Tensor();
          if (feed(c, original, recorded) && run.try_case(c, "without '" + name + "'")) cur = std::move(c);
        } catch (const core::UserError&) {
        }
      }
    }
    r.reduced = std::move(cur);
    r.one_node = r.reduced.graph.nodes.size() == 1;
    return r;
  }

  // 1. The blamed node alone, fed the recorded values of its inputs.
  try {
    Case one;
    one.graph = ir::one_node(original.graph, blamed_node);
    one.target = backward ? target_for(one.graph.outputs[0], recorded, recorded_grads, core::Tensor())
                          : core::Tensor();
    if (feed(one, original, recorded) && run.try_case(one, "the blamed node '" + blamed_node + "' alone")) {
      r.reduced = std::move(one);
      r.one_node = true;
      return r;
    }
  } catch (const core::UserError&) {
  }

  // 2. Only what the blamed node depends on (and, for LC/BC, what leads from it to the loss).
  //    For a backward finding the loss moves to the blamed node's output, with a target that
  //    gives it the recorded incoming gradient.
  Case cur = original;
  try {
    Case c = original;
    c.graph.outputs = blamed->outputs;
    c.graph.types.clear();
    c.graph = ir::remove_unused(c.graph);
    c.target = backward ? target_for(blamed->outputs[0], recorded, recorded_grads, core::Tensor()) : core::Tensor();
    if (feed(c, original, recorded) && run.try_case(c, "ancestors of '" + blamed_node + "'")) cur = std::move(c);
  } catch (const core::UserError&) {
  }

  // 3. Remove upstream nodes one at a time (last first): their outputs become inputs fed the
  //    recorded values.
  const std::set<std::string> up = ir::ancestors(cur.graph, blamed_node);
  std::vector<std::string> order;
  for (auto it = cur.graph.nodes.rbegin(); it != cur.graph.nodes.rend(); ++it)
    if (it->name != blamed_node && up.count(it->name)) order.push_back(it->name);
  for (const auto& name : order) {
    if (r.runs >= opt.max_runs) break;
    const ir::Node* n = cur.graph.find_node(name);
    if (!n) continue;  // already gone with an earlier removal
    try {
      Case c = cur;
      for (const auto& o : n->outputs)
        if (c.graph.producer(o) &&
            std::find(c.graph.outputs.begin(), c.graph.outputs.end(), o) == c.graph.outputs.end())
          c.graph = ir::cut_at(c.graph, o);
      if (c.graph.find_node(name)) continue;
      if (feed(c, original, recorded) && run.try_case(c, "without '" + name + "' (its outputs recorded)"))
        cur = std::move(c);
    } catch (const core::UserError&) {
    }
  }

  // 4. Attributes toward their defaults.
  for (size_t k = 0; k < cur.graph.nodes.size() && r.runs < opt.max_runs; ++k) {
    const ops::OpSpec& spec = ops::op(cur.graph.nodes[k].op);
    for (const auto& a : spec.attrs) {
      if (r.runs >= opt.max_runs) break;
      const ir::Node& n = cur.graph.nodes[k];
      auto it = n.attrs.find(a.name);
      if (it == n.attrs.end() || it->second == a.default_value) continue;
      try {
        Case c = cur;
        c.graph.nodes[k].attrs[a.name] = a.default_value;
        c.graph.types.clear();
        ir::validate(c.graph, "reduced model");
        if (run.try_case(c, "'" + n.name + "' " + a.name + " -> default " + core::to_string(a.default_value)))
          cur = std::move(c);
      } catch (const core::UserError&) {
      }
    }
  }
  r.reduced = std::move(cur);
  return r;
}

void shrink_inputs(Reduced& r, const Predicate& holds, const ReduceOptions& opt) {
  if (!r.reproduced) return;
  Runner run{holds, opt, r};
  r.reduced = shrink(std::move(r.reduced), run, opt);
  r.elements = elements(r.reduced);
  // Then the values: chunks of each input's elements (halves, quarters, ... single elements) set
  // to 0 while the finding remains (delta debugging on the non-zero elements), so what is left
  // non-zero is what triggers it.
  Case cur = r.reduced;
  for (size_t k = 0; k < cur.graph.inputs.size(); ++k) {
    const std::string name = cur.graph.inputs[k].name;  // `cur` is replaced as values go to 0
    const int64_t n = core::numel(cur.graph.inputs[k].type.shape);
    for (int64_t chunk = n / 2; chunk >= 1 && r.runs < opt.max_runs; chunk /= 2) {
      for (int64_t start = 0; start < n && r.runs < opt.max_runs; start += chunk) {
        const core::Tensor x = cur.inputs.at(name);
        bool all_zero = true;
        for (int64_t i = start; i < std::min(n, start + chunk); ++i) all_zero &= x.get(i) == 0;
        if (all_zero) continue;
        Case c = cur;
        core::Tensor y = x.to(core::DType::F64);
        for (int64_t i = start; i < std::min(n, start + chunk); ++i) y.f64()[i] = 0;
        c.inputs[name] = y;
        if (run.try_case(c, "'" + name + "' elements [" + std::to_string(start) + ", " +
                                std::to_string(std::min(n, start + chunk)) + ") -> 0"))
          cur = std::move(c);
      }
    }
  }
  r.reduced = std::move(cur);
  r.nonzero = 0;
  for (const auto& [name, t] : r.reduced.inputs)
    for (int64_t i = 0; i < t.numel(); ++i) r.nonzero += t.get(i) != 0;
}

FixReport localize_fix(const Case& one_node, const Predicate& holds, int max_runs, std::ostream* log,
                       const RanCheck& ran) {
  FixReport rep;
  if (one_node.graph.nodes.size() != 1) return rep;
  const ir::Node& n = one_node.graph.nodes[0];
  const ops::OpSpec& spec = ops::op(n.op);
  // Candidate values: the enumerated domain, else values the operator's sampler draws.
  std::map<std::string, std::vector<core::AttrValue>> candidates;
  for (const auto& a : spec.attrs) {
    std::vector<core::AttrValue>& v = candidates[a.name];
    for (const auto& c : a.choices) v.push_back(c);
    v.push_back(a.default_value);
  }
  if (spec.sample)
    for (uint64_t s = 1; s <= 24; ++s) {
      core::Rng rng(s);
      const ops::Case c = spec.sample(rng);
      for (const auto& [name, value] : c.attrs) {
        auto& v = candidates[name];
        if (v.size() < 10 && std::find(v.begin(), v.end(), value) == v.end()) v.push_back(value);
      }
    }
  for (const auto& a : spec.attrs) {
    auto cur = n.attrs.find(a.name);
    if (cur == n.attrs.end()) continue;
    std::vector<std::string> fixes;
    for (const auto& value : candidates[a.name]) {
      if (value == cur->second || rep.runs >= max_runs) continue;
      Case c = one_node;
      c.graph.nodes[0].attrs[a.name] = value;
      c.graph.types.clear();
      const std::string what = a.name + "=" + core::to_string(value);
      try {
        c.graph.nodes[0].attrs = ops::canonical_attrs(spec, c.graph.nodes[0].attrs);
        ir::validate(c.graph, "localize-fix");
      } catch (const core::UserError&) {
        rep.tried.push_back(what + ": invalid here");
        continue;
      } catch (const core::OpError&) {
        rep.tried.push_back(what + ": invalid here");
        continue;
      }
      ++rep.runs;
      bool still = true;
      try {
        still = holds(c);
      } catch (const std::exception&) {
        still = true;
      }
      bool refused = false;
      if (!still && ran) {
        try {
          refused = !ran(c);
        } catch (const std::exception&) {
          refused = true;
        }
      }
      const char* verdict = still ? "still" : refused ? "not run (refused or crashed)" : "fixes";
      rep.tried.push_back(what + ": " + verdict);
      if (log) *log << "  localize-fix [" << rep.runs << "] " << n.name << " " << what << ": " << verdict << "\n";
      if (!still && !refused) fixes.push_back(core::to_string(value));
    }
    if (!fixes.empty()) {
      std::string by;
      for (const auto& f : fixes) by += (by.empty() ? "" : ", ") + f;
      rep.causes.push_back({a.name, core::to_string(cur->second), by});
    }
  }
  return rep;
}

std::string InputSearch::verdict() const {
  if (tried == 0) return "";
  if (shown == tried) return "every input";
  return shown > 0 ? "some inputs" : "the recorded inputs only";
}

InputSearch search_inputs(const Case& one_node, const Predicate& holds, int tries, std::ostream* log) {
  InputSearch s;
  if (one_node.graph.nodes.size() != 1) return s;
  core::Rng rng(core::fnv1a("search_inputs:" + one_node.graph.nodes[0].name));
  for (int t = 0; t < tries; ++t) {
    Case c = one_node;
    // Plain uniform values in [-1, 1] (no edge values), so that a finding shown on "every input"
    // is one that ordinary inputs show, not the edge values a model's data mixes in.
    c.inputs.clear();
    data::complete_inputs(c.graph, c.inputs, rng, 0.0);
    c.target = core::Tensor();
    bool ok = false;
    try {
      ok = holds(c);
    } catch (const std::exception&) {
    }
    ++s.tried;
    s.shown += ok;
    if (log) *log << "  input search [" << s.tried << "] random inputs: " << (ok ? "reproduces" : "gone") << "\n";
  }
  return s;
}

}  // namespace quorum::localize
