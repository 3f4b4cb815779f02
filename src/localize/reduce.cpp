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

// `g` cut to `shape` (same rank, no axis larger): each axis that shrank keeps its first part, or its
// last where the input was cut at its end (`tail`). Undefined when the shapes do not fit.
core::Tensor cut_grad(const core::Tensor& g, const core::Shape& shape, bool tail) {
  if (g.shape().size() != shape.size()) return core::Tensor();
  core::Tensor cur = g.to(core::DType::F64);
  for (size_t a = 0; a < shape.size(); ++a) {
    const int64_t d = cur.shape()[a];
    if (shape[a] > d) return core::Tensor();
    if (shape[a] < d) cur = slice_axis(cur, a, tail ? d - shape[a] : 0, shape[a]);
  }
  return cur;
}

// 5. Shapes halved while the finding remains. Every graph input's axes, largest first; the first
//    half, else the second, of the recorded values; a halving the operator's shape rule refuses is
//    skipped. A backward case keeps the matching part of its incoming gradient and a recomputed
//    target. Repeats until nothing halves or the budget is spent.
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
          if (c.grad.defined()) {
            c.grad = cut_grad(cur.grad, c.graph.types.at(c.graph.outputs[0]).shape, start != 0);
            if (!c.grad.defined() || !retarget(c)) continue;
          } else {
            c.target = core::Tensor();
          }
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

// A short name for a set of nodes in a step's line.
std::string set_name(const std::vector<std::string>& nodes) {
  std::string s;
  for (size_t i = 0; i < nodes.size() && i < 4; ++i) s += (i ? ", '" : "'") + nodes[i] + "'";
  if (nodes.size() > 4) s += " and " + std::to_string(nodes.size() - 4) + " more";
  return nodes.size() == 1 ? s : "{" + s + "}";
}

// `cur` without the nodes `drop`: values they computed for the nodes that stay become graph inputs
// fed the recorded values; graph outputs they computed are dropped, and when none is left the
// values they took from the nodes that stay become the outputs (a crash case shrinking from its
// end). A new output 0 loses the case's target (and incoming gradient). False: no valid model.
bool remove_nodes(const Case& cur, const std::vector<std::string>& drop_list, const Case& original,
                  const backends::ValueMap& recorded, Case& out) {
  const std::set<std::string> drop(drop_list.begin(), drop_list.end());
  const ir::Graph& g = cur.graph;
  auto dropped = [&](const std::string& v) {
    const ir::Node* p = g.producer(v);
    return p && drop.count(p->name) > 0;
  };
  auto add = [](std::vector<std::string>& list, const std::string& v) {
    if (std::find(list.begin(), list.end(), v) == list.end()) list.push_back(v);
  };
  std::vector<std::string> outs, cuts;
  for (const auto& o : g.outputs)
    if (!dropped(o)) add(outs, o);
  if (outs.empty())
    for (const auto& n : g.nodes)
      if (drop.count(n.name))
        for (size_t i = 0; i < ir::data_input_count(n); ++i)
          if (g.producer(n.inputs[i]) && !dropped(n.inputs[i])) add(outs, n.inputs[i]);
  if (outs.empty()) return false;
  for (const auto& n : g.nodes)
    if (!drop.count(n.name))
      for (const auto& v : n.inputs)
        if (dropped(v)) add(cuts, v);
  try {
    Case c = cur;
    c.graph.outputs = outs;  // (the types still hold: cut_at and remove_unused re-validate)
    if (cuts.empty()) c.graph = ir::remove_unused(c.graph);
    for (const auto& v : cuts)
      if (c.graph.producer(v)) c.graph = ir::cut_at(c.graph, v);
    for (const auto& n : drop)
      if (c.graph.find_node(n)) return false;
    if (c.graph.outputs[0] != g.outputs[0]) {
      c.target = core::Tensor();
      c.grad = core::Tensor();
      c.loss.clear();
    }
    if (!feed(c, original, recorded)) return false;
    out = std::move(c);
    return true;
  } catch (const core::UserError&) {
    return false;
  }
}

}  // namespace

bool retarget(Case& c, const core::Tensor& given) {
  if (!c.grad.defined() || c.graph.outputs.empty()) return false;
  core::Tensor y = given;
  if (!y.defined()) {
    try {
      ir::Graph g = c.graph;
      if (g.types.empty()) ir::validate(g, "reduced model");
      y = ref::forward(g, c.inputs).at(g.outputs[0]);
    } catch (const std::exception&) {
      return false;
    }
  }
  if (y.shape() != c.grad.shape()) return false;
  core::Tensor t(core::DType::F64, y.shape());
  const double n = static_cast<double>(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) t.f64()[i] = y.get(i) - c.grad.get(i) * n / 2;
  c.target = std::move(t);
  c.loss = "mse_loss";
  return true;
}

Case ddmin_nodes(Case cur, std::vector<std::string> keep, const RemoveFn& remove, const Predicate& holds,
                 const ReduceOptions& opt, Reduced& r) {
  Runner run{holds, opt, r};
  size_t n = 2;
  // Tries the case without `drop`; on success it becomes the current case and `keep` what is left of it.
  auto attempt = [&](const std::vector<std::string>& drop, const std::string& what) {
    Case c;
    if (drop.empty() || !remove(cur, drop, c) || !run.try_case(c, what)) return false;
    cur = std::move(c);
    std::vector<std::string> left;
    for (const auto& k : keep)
      if (cur.graph.find_node(k)) left.push_back(k);
    keep = std::move(left);
    return true;
  };
  while (!keep.empty() && r.runs < opt.max_runs) {
    n = std::min(n, keep.size());
    std::vector<std::vector<std::string>> chunks(n);
    for (size_t i = 0; i < keep.size(); ++i) chunks[i * n / keep.size()].push_back(keep[i]);
    bool reduced = false;
    // One chunk kept, the rest removed (with two chunks, the same as removing the other one).
    for (size_t i = 0; n > 2 && i < n && !reduced && r.runs < opt.max_runs; ++i) {
      std::vector<std::string> drop;
      for (size_t k = 0; k < n; ++k)
        if (k != i) drop.insert(drop.end(), chunks[k].begin(), chunks[k].end());
      if (attempt(drop, "only " + set_name(chunks[i]) + " of " + std::to_string(keep.size()) + " removable")) {
        n = 2;
        reduced = true;
      }
    }
    // One chunk removed.
    for (size_t i = 0; i < n && !reduced && r.runs < opt.max_runs; ++i)
      if (attempt(chunks[i], "without " + set_name(chunks[i]))) {
        n = std::max<size_t>(n - 1, 2);
        reduced = true;
      }
    if (reduced) continue;
    if (n >= keep.size()) break;  // single nodes tried: none can go
    n = std::min(2 * n, keep.size());
  }
  return cur;
}

Reduced reduce(const Case& original, const std::string& blamed_node, bool backward, const backends::ValueMap& recorded,
               const backends::ValueMap& recorded_grads, const Predicate& holds, const ReduceOptions& opt) {
  Reduced r;
  r.reduced = original;
  r.elements_before = r.elements = elements(original);
  Runner run{holds, opt, r};
  // A library that reads memory it should not (past its buffers, another sample's rows) shows a finding on
  // some runs only: the original is tried up to kOriginalTries times before the finding counts as gone.
  bool shown = false;
  for (int t = 0; t < kOriginalTries && !shown; ++t)
    shown = run.try_case(original, t == 0 ? "original model" : "original model, again");
  if (!shown) return r;
  r.intermittent = r.runs > 1;
  r.reproduced = true;
  const RemoveFn remove = [&](const Case& from, const std::vector<std::string>& drop, Case& out) {
    return remove_nodes(from, drop, original, recorded, out);
  };
  const ir::Node* blamed = original.graph.find_node(blamed_node);
  if (!blamed) {
    // A crash (or loss) finding names no node: delta debugging over all the nodes, each set cut
    // where its outputs are used (they become inputs fed the recorded values), the outputs moving
    // up to what it took from the rest when it held them all.
    std::vector<std::string> all;
    for (const auto& n : original.graph.nodes) all.push_back(n.name);
    r.reduced = ddmin_nodes(original, all, remove, holds, opt, r);
    r.one_node = r.reduced.graph.nodes.size() == 1;
    return r;
  }
  // For a backward finding, the case below the loss: trained with mse_loss against a target that
  // gives `out` the blamed backend's recorded incoming gradient, on its recorded value.
  auto below_loss = [&](Case& c, const std::string& out) {
    c.target = core::Tensor();
    if (!backward) return;
    auto y = recorded.find(out);
    auto g = recorded_grads.find(out);
    if (y == recorded.end() || g == recorded_grads.end()) return;
    c.grad = g->second.to(core::DType::F64);
    if (!retarget(c, y->second)) c.grad = core::Tensor();
  };

  // 1. The blamed node alone, fed the recorded values of its inputs. A backward finding whose recorded
  //    incoming gradient mse_loss cannot give (an output element NaN or infinite on the library, where a
  //    library's NaN-swallowing consumer sent back a number: (y - t) is NaN there whatever t) is tried
  //    again trained with the campaign's own loss and target, which may send back a number there too.
  try {
    Case one;
    one.graph = ir::one_node(original.graph, blamed_node);
    below_loss(one, one.graph.outputs[0]);
    if (feed(one, original, recorded)) {
      bool shows = run.try_case(one, "the blamed node '" + blamed_node + "' alone");
      if (!shows && backward && one.grad.defined()) {
        one.grad = core::Tensor();
        one.target = core::Tensor();
        one.loss.clear();
        shows = run.try_case(one, "the blamed node '" + blamed_node + "' alone, with the campaign's loss");
      }
      if (shows) {
        r.reduced = std::move(one);
        r.one_node = true;
        return r;
      }
    }
  } catch (const core::UserError&) {
  }

  // 2. Only what the blamed node depends on. For a backward finding the loss moves to the blamed
  //    node's output, with a target that gives it the recorded incoming gradient.
  Case cur = original;
  // The original model cut at `outputs`: kept as `cur` when the finding shows there.
  auto cut_at = [&](const std::vector<std::string>& outputs, const std::string& what) {
    try {
      Case c = original;
      c.graph.outputs = outputs;
      c.graph.types.clear();
      c.graph = ir::remove_unused(c.graph);
      below_loss(c, outputs[0]);
      if (feed(c, original, recorded) && run.try_case(c, what)) {
        cur = std::move(c);
        return true;
      }
    } catch (const core::UserError&) {
    }
    return false;
  };
  cut_at(blamed->outputs, "ancestors of '" + blamed_node + "'");
  // 2b. Where the finding needs what follows the blamed node (a consumer that turns the node's NaN output
  //     into numbers whose gradient shows the fault), the model cut at the output of each node after it in
  //     turn, nearest first, at most kMaxCuts of them: the first that shows it is kept.
  if (cur.graph.nodes.size() == original.graph.nodes.size()) {
    constexpr int kMaxCuts = 4;
    int cuts = 0;
    // The values the blamed node's outputs reach (the nodes are in topological order).
    std::set<std::string> reached(blamed->outputs.begin(), blamed->outputs.end());
    for (const auto& n : original.graph.nodes) {
      if (cuts >= kMaxCuts || r.runs >= opt.max_runs) break;
      if (n.name == blamed_node ||
          std::none_of(n.inputs.begin(), n.inputs.end(), [&](const std::string& v) { return reached.count(v) > 0; }))
        continue;
      reached.insert(n.outputs.begin(), n.outputs.end());
      if (n.outputs[0] == original.graph.outputs[0]) break;  // the whole model: the original
      ++cuts;
      if (cut_at({n.outputs[0]}, "cut at '" + n.name + "' after '" + blamed_node + "'")) break;
    }
  }

  // 3. Sets of upstream nodes removed by delta debugging: their outputs become inputs fed the
  //    recorded values.
  const std::set<std::string> up = ir::ancestors(cur.graph, blamed_node);
  std::vector<std::string> order;
  for (const auto& n : cur.graph.nodes)
    if (n.name != blamed_node && up.count(n.name)) order.push_back(n.name);
  cur = ddmin_nodes(std::move(cur), order, remove, holds, opt, r);

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
        if (c.grad.defined() && !retarget(c)) continue;  // (its output's shape changed)
        if (run.try_case(c, "'" + n.name + "' " + a.name + " -> default " + core::to_string(a.default_value)))
          cur = std::move(c);
      } catch (const core::UserError&) {
      }
    }
  }
  r.reduced = std::move(cur);
  r.one_node = r.reduced.graph.nodes.size() == 1;
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
        if (c.grad.defined() && !retarget(c)) continue;
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

FixReport localize_fix(const Case& reduced, const Predicate& holds, int max_runs, std::ostream* log,
                       const RanCheck& ran) {
  FixReport rep;
  if (reduced.graph.nodes.empty() || reduced.graph.nodes.size() > kMaxFixNodes) return rep;
  const bool one = reduced.graph.nodes.size() == 1;
  for (size_t k = 0; k < reduced.graph.nodes.size(); ++k) {
    const ir::Node& n = reduced.graph.nodes[k];
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
      // Named by the attribute alone in a one-node case, by operator and attribute in a pattern of several.
      const std::string attribute = one ? a.name : n.op + "." + a.name;
      std::vector<std::string> fixes;
      for (const auto& value : candidates[a.name]) {
        if (value == cur->second || rep.runs >= max_runs) continue;
        Case c = reduced;
        c.graph.nodes[k].attrs[a.name] = value;
        c.graph.types.clear();
        const std::string what = attribute + "=" + core::to_string(value);
        try {
          c.graph.nodes[k].attrs = ops::canonical_attrs(spec, c.graph.nodes[k].attrs);
          ir::validate(c.graph, "localize-fix");
          // A backward case keeps its incoming gradient where the output keeps its shape.
          if (c.grad.defined() && !retarget(c)) c.target = core::Tensor();
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
        rep.causes.push_back({attribute, core::to_string(cur->second), by});
      }
    }
  }
  return rep;
}

std::string InputSearch::verdict() const {
  if (tried == 0) return "";
  if (shown == tried) return "every input";
  if (shown > 0) return "some inputs";
  return search_shown ? "some inputs (found by the genetic search)" : "the recorded inputs only";
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

Culprit find_culprit(const Case& original, const backends::ValueMap& reference, const NodeVerdict& wrong,
                     int max_runs, std::ostream* log) {
  Culprit c;
  for (const auto& n : original.graph.nodes) {
    if (c.runs >= max_runs) break;
    Case one;
    try {
      one.graph = ir::one_node(original.graph, n.name);
    } catch (const core::UserError&) {
      continue;
    }
    if (!feed(one, original, reference)) continue;
    ++c.runs;
    std::string what;
    try {
      what = wrong(one);
    } catch (const std::exception& e) {
      if (log) *log << "  culprit [" << c.runs << "] '" << n.name << "' alone: not judged (" << e.what() << ")\n";
      continue;
    }
    if (log) *log << "  culprit [" << c.runs << "] '" << n.name << "' (" << n.op << ") alone: "
                  << (what.empty() ? "right" : what) << "\n";
    if (!what.empty()) {
      c.node = n.name;
      c.op = n.op;
      c.evidence = what;
      break;
    }
  }
  return c;
}

}  // namespace quorum::localize
