// The oracles of METHODS.md §1 (Muffin) with the graph-fuzzing relative-error rule as an option.
#include "oracle/oracle.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "core/error.h"
#include "ops/kernel_util.h"
#include "ops/registry.h"
#include "oracle/compare.h"
#include "oracle/judge_util.h"
#include "oracle/node_kernel.h"

namespace quorum::oracle {

Rule rule_from_string(const std::string& s) {
  std::string names;
  for (const auto& r : oracle_rules()) {
    if (s == r.name) return r.rule;
    names += std::string(names.empty() ? "" : " or ") + r.name;
  }
  throw core::UserError("--oracle: expected " + names + ", got '" + s + "'");
}

const OracleRule& oracle_rule(Rule r) {
  for (const auto& o : oracle_rules())
    if (o.rule == r) return o;
  core::internal_error("oracle rule " + std::to_string(static_cast<int>(r)) + " is not registered in oracle_rules()");
}

const char* to_string(Rule r) { return oracle_rule(r).name; }

std::string Finding::signature() const {
  const std::string s = std::string(to_string(kind)) + "|" + to_string(stage) + "|" + backend + "|" + op;
  switch (core::info(kind).signature) {
    case core::SignatureBy::Message: return s + "|" + message;
    case core::SignatureBy::Params: return s + "|" + params;
    case core::SignatureBy::Operator: break;
  }
  if (stage == Stage::Optimized) return s + "|" + params;
  return s;  // by layer type
}

double chebyshev(const core::Tensor& a, const core::Tensor& b) {
  if (a.shape() != b.shape()) return INFINITY;
  double d = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.get(i), y = b.get(i);
    if (!std::isfinite(x) || !std::isfinite(y)) {
      const bool same = (std::isnan(x) && std::isnan(y)) || (x == y);
      if (!same) return INFINITY;
      continue;
    }
    d = std::max(d, std::abs(x - y));
  }
  return d;
}

std::string normalize_message(const std::string& msg) {
  // Hand-written rather than std::regex: this runs on every crash message of a campaign.
  std::string out;
  const size_t n = msg.size();
  auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  auto is_hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  for (size_t i = 0; i < n;) {
    const char c = msg[i];
    // A digit after '_' starts a number too: generated names (muffin_103487) differ only there.
    const bool word_start = i == 0 || !std::isalnum(static_cast<unsigned char>(msg[i - 1]));
    if (c == '0' && i + 2 < n && (msg[i + 1] == 'x' || msg[i + 1] == 'X') && is_hex(msg[i + 2])) {
      out += "ADDR";
      i += 2;
      while (i < n && is_hex(msg[i])) ++i;
    } else if (c == '/' &&
               (i == 0 || msg[i - 1] == ' ' || msg[i - 1] == '(' || msg[i - 1] == '\'' || msg[i - 1] == '"')) {
      out += "PATH";
      while (i < n && msg[i] != ' ' && msg[i] != ':' && msg[i] != '\'' && msg[i] != '"' && msg[i] != ')') ++i;
    } else if (is_digit(c) && word_start) {
      out += "N";
      while (i < n && (is_digit(msg[i]) || msg[i] == '.')) ++i;
      if (i + 1 < n && (msg[i] == 'e' || msg[i] == 'E') &&
          (is_digit(msg[i + 1]) || msg[i + 1] == '-' || msg[i + 1] == '+')) {
        i += 2;
        while (i < n && is_digit(msg[i])) ++i;
      }
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      out += ' ';
      while (i < n && std::isspace(static_cast<unsigned char>(msg[i]))) ++i;
    } else {
      out += c;
      ++i;
    }
  }
  if (out.size() > 300) out.resize(300);
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

namespace {

using detail::has_nonfinite;
using detail::key_params;

struct Judge {
  const ir::Graph& g;
  const std::vector<BackendRun>& runs;
  const Thresholds& th;
  const backends::ValueMap* inputs;
  std::vector<Finding> out;
  std::map<std::string, std::vector<std::string>> consumers;  // value -> nodes using it as data input

  ops::Tolerance tol_of(const ir::Node& n, bool grad) const {
    return detail::node_tolerance(g, n, th.dtype, grad);
  }

  bool relative_ok(const core::Tensor& a, const core::Tensor& b) const {
    if (a.shape() != b.shape()) return false;
    int64_t good = 0;
    for (int64_t i = 0; i < a.numel(); ++i) {
      const double x = a.get(i), y = b.get(i);
      if ((std::isnan(x) && std::isnan(y)) || x == y || std::abs(x - y) <= th.rel_err * std::abs(y)) ++good;
    }
    return a.numel() == 0 || static_cast<double>(good) >= th.rel_share * static_cast<double>(a.numel());
  }

  // Distance, and whether it is inconsistent / in agreement, for one value on two runs.
  struct Cmp {
    double d = 0;
    bool inconsistent = false, agree = true;
  };
  Cmp cmp(const core::Tensor& a, const core::Tensor& b, const ops::Tolerance& tol) const {
    Cmp c;
    c.d = chebyshev(a, b);
    const bool within = compare(a, b, tol).ok;
    if (!std::isfinite(c.d)) {
      // NaN/Inf on one side only: the NaN oracle reports it, not as an inconsistency.
      c.agree = false;
      return c;
    }
    if (th.relative_metric) {
      c.inconsistent = !relative_ok(a, b) && !within;
    } else {
      c.inconsistent = c.d > th.T && !within;
    }
    c.agree = c.d < th.eps || within;
    return c;
  }

  // Voting: the backend in most inconsistent pairs; ties go to the one farther from the reference
  // (so the reference loses every tie). The reference is blamed only when it disagrees with more
  // backends than any library does: the libraries agree among themselves (float32 precision, or
  // a bug they share).
  std::string blame(const std::vector<std::pair<size_t, size_t>>& pairs,
                    const std::function<double(size_t)>& dist_to_ref) const {
    std::map<size_t, int> count;
    for (auto [j, k] : pairs) {
      ++count[j];
      ++count[k];
    }
    size_t best = SIZE_MAX;
    for (auto [i, c] : count) {
      if (best == SIZE_MAX || c > count[best]) {
        best = i;
        continue;
      }
      if (c < count[best]) continue;
      const double di = dist_to_ref(i), db = dist_to_ref(best);
      if (di > db || (di == db && runs[best].is_reference)) best = i;
    }
    return runs[best].backend;
  }

  size_t reference() const {
    for (size_t i = 0; i < runs.size(); ++i)
      if (runs[i].is_reference) return i;
    return SIZE_MAX;
  }

  void add_inconsistency(Stage stage, const ir::Node* n, const std::string& op, const std::string& value,
                         const std::vector<std::pair<size_t, size_t>>& pairs,
                         const std::map<std::pair<size_t, size_t>, double>& dist, double d_pre,
                         const std::function<double(size_t)>& dist_to_ref) {
    Finding f;
    f.kind = Kind::Inconsistency;
    f.stage = stage;
    f.backend = blame(pairs, dist_to_ref);
    f.node = n ? n->name : "loss";
    f.op = op;
    f.params = n ? key_params(*n) : "";
    for (auto [j, k] : pairs) {
      const std::string& other = runs[j].backend == f.backend ? runs[k].backend : runs[j].backend;
      if (runs[j].backend != f.backend && runs[k].backend != f.backend) continue;
      f.against.push_back(other);
      f.distance = std::max(f.distance, dist.at({j, k}));
    }
    f.rate = (f.distance - d_pre) / (d_pre + 1e-7);
    f.detail = std::string(to_string(stage)) + " inconsistency at '" + value + "': Chebyshev distance " +
               std::to_string(f.distance) + ", born here (inputs agree within " + std::to_string(d_pre) + ")";
    out.push_back(std::move(f));
  }

  // Values whose gradients node n produces or receives: its outputs and its weights.
  static std::vector<std::string> produced_by(const ir::Node& n) {
    std::vector<std::string> vals = n.outputs;
    for (size_t i = ir::data_input_count(n); i < n.inputs.size(); ++i) vals.push_back(n.inputs[i]);
    return vals;
  }

  // Whether the reference itself is non-finite in one of these values: then the NaN/Inf is the
  // model's (0/0, log of a negative), and a library that keeps it is right.
  bool reference_nonfinite(const std::vector<std::string>& values, bool grads) const {
    const size_t ref = reference();
    if (ref == SIZE_MAX) return false;
    const backends::ValueMap& m = grads ? runs[ref].grads : runs[ref].values;
    for (const auto& v : values)
      if (m.count(v) && has_nonfinite(m.at(v))) return true;
    return false;
  }

  // NaN/Inf where another library ran the same stage clean and the reference is finite there;
  // never blamed on the reference.
  void nans() {
    const size_t ref_index = reference();
    const BackendRun* ref_run = ref_index == SIZE_MAX ? nullptr : &runs[ref_index];
    auto forward_first = [&](const BackendRun& r) -> const ir::Node* {
      for (const auto& n : g.nodes)
        for (const auto& o : n.outputs)
          if (r.values.count(o) && has_nonfinite(r.values.at(o))) return &n;
      return nullptr;
    };
    auto backward_first = [&](const BackendRun& r) -> const ir::Node* {
      for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it) {
        for (const auto& v : produced_by(*it))
          if (r.grads.count(v) && has_nonfinite(r.grads.at(v))) return &*it;
      }
      return nullptr;
    };
    auto ran_forward = [](const BackendRun& r) { return !r.values.empty(); };
    for (size_t j = 0; j < runs.size(); ++j) {
      const BackendRun& r = runs[j];
      if (r.is_reference) continue;
      // Clean elsewhere means another library: the float64 reference does not overflow where
      // every float32 library must (exp(100)), so it does not count as a clean run here.
      auto clean_elsewhere = [&](auto&& ran, auto&& dirty) {
        for (size_t k = 0; k < runs.size(); ++k)
          if (k != j && !runs[k].is_reference && ran(runs[k]) && !dirty(runs[k])) return true;
        return false;
      };
      if (ran_forward(r)) {
        if (const ir::Node* n = forward_first(r);
            n && !reference_nonfinite(n->outputs, false) &&
            clean_elsewhere(ran_forward, [&](const BackendRun& o) { return forward_first(o) != nullptr; })) {
          add_nan(r, Stage::Forward, n);
          continue;
        }
      }
      if (r.trained && !std::isfinite(r.loss) && !(ref_run && ref_run->trained && !std::isfinite(ref_run->loss)) &&
          clean_elsewhere([](const BackendRun& o) { return o.trained; },
                          [](const BackendRun& o) { return !std::isfinite(o.loss); })) {
        add_nan(r, Stage::Loss, nullptr);
        continue;
      }
      if (r.trained) {
        if (const ir::Node* n = backward_first(r);
            n && !reference_nonfinite(produced_by(*n), true) &&
            clean_elsewhere([](const BackendRun& o) { return o.trained; },
                            [&](const BackendRun& o) { return backward_first(o) != nullptr; }))
          add_nan(r, Stage::Backward, n);
      }
    }
  }

  void add_nan(const BackendRun& r, Stage stage, const ir::Node* n) {
    Finding f;
    f.kind = Kind::NaN;
    f.stage = stage;
    f.backend = r.backend;
    f.node = n ? n->name : "loss";
    f.op = n ? n->op : "loss";
    f.params = n ? key_params(*n) : "";
    f.detail = std::string("NaN/Inf first appears in ") + to_string(stage) + " at '" + f.node + "'";
    out.push_back(std::move(f));
  }

  std::vector<size_t> forward_runs() const {
    std::vector<size_t> v;
    for (size_t i = 0; i < runs.size(); ++i)
      if (!runs[i].values.empty()) v.push_back(i);
    return v;
  }

  void forward_inconsistencies() {
    const auto idx = forward_runs();
    const size_t ref = reference();
    for (const auto& n : g.nodes) {
      const ops::Tolerance tol = tol_of(n, false);
      for (const auto& v : n.outputs) {
        std::vector<std::pair<size_t, size_t>> pairs;
        std::map<std::pair<size_t, size_t>, double> dist;
        double d_pre_max = 0;
        for (size_t a = 0; a < idx.size(); ++a)
          for (size_t b = a + 1; b < idx.size(); ++b) {
            const BackendRun &rj = runs[idx[a]], &rk = runs[idx[b]];
            if (!rj.values.count(v) || !rk.values.count(v)) continue;
            const Cmp c = cmp(rj.values.at(v), rk.values.at(v), tol);
            if (!c.inconsistent) continue;
            // Born here: every data input agrees on both backends.
            bool inputs_agree = true;
            double d_pre = 0;
            for (size_t i = 0; i < ir::data_input_count(n); ++i) {
              const std::string& in = n.inputs[i];
              const ir::Node* p = g.producer(in);
              if (!p) continue;  // a graph input: identical on every backend
              if (!rj.values.count(in) || !rk.values.count(in)) continue;
              const Cmp ci = cmp(rj.values.at(in), rk.values.at(in), tol_of(*p, false));
              d_pre = std::max(d_pre, ci.d);
              inputs_agree &= ci.agree;
            }
            if (!inputs_agree) continue;
            // Inherited, not born here: both computed this node right on their own inputs, whose
            // difference (allowed by the producer's tolerance) the node amplified.
            if (right_on_own_inputs(n, v, rj, tol) && right_on_own_inputs(n, v, rk, tol)) continue;
            pairs.push_back({idx[a], idx[b]});
            dist[{idx[a], idx[b]}] = c.d;
            d_pre_max = std::max(d_pre_max, d_pre);
          }
        if (pairs.empty()) continue;
        auto to_ref = [&](size_t i) {
          return ref == SIZE_MAX || !runs[ref].values.count(v)
                     ? 0.0
                     : chebyshev(runs[i].values.at(v), runs[ref].values.at(v));
        };
        add_inconsistency(Stage::Forward, &n, n.op, v, pairs, dist, d_pre_max, to_ref);
      }
    }
  }

  // Whether run `r` computed node `n`'s output `v` as the catalogue's float64 kernel does on r's
  // own values of n's inputs (graph inputs and weights rounded to r's precision), within the
  // operator's tolerance. The reference is right by definition. False when it cannot be judged.
  bool right_on_own_inputs(const ir::Node& n, const std::string& v, const BackendRun& r,
                           const ops::Tolerance& tol) const {
    if (r.is_reference) return true;
    const auto out = std::find(n.outputs.begin(), n.outputs.end(), v);
    const auto got = r.values.find(v);
    if (out == n.outputs.end() || got == r.values.end()) return false;
    const std::vector<core::Tensor> held = detail::own_inputs(g, n, r.values, inputs, got->second.dtype());
    if (held.size() != n.inputs.size()) return false;
    try {
      const std::vector<core::Tensor> want = node_forward(n, held);
      const size_t k = static_cast<size_t>(out - n.outputs.begin());
      return k < want.size() && compare(got->second, detail::rounded_to(want[k], got->second.dtype()), tol).ok;
    } catch (const std::exception&) {
      return false;
    }
  }

  const core::Tensor* value_of(const BackendRun& r, const std::string& v) const {
    auto it = r.values.find(v);
    if (it != r.values.end()) return &it->second;
    if (inputs) {
      auto in = inputs->find(v);
      if (in != inputs->end()) return &in->second;
    }
    return nullptr;
  }

  // Whether every element where two backends' gradients of `p` differ is explained by a
  // convention: an input tied for an extreme (maximum, reduce_max, max pooling) on either backend,
  // or one that is the extreme on one backend and not on the other (near-equal inputs ordered
  // differently by rounding), or a kink whose derivative libraries choose differently (clip at
  // its bounds).
  bool tie_explained(const ir::Node& n, const std::string& p, const BackendRun& rj, const BackendRun& rk,
                     const ops::Tolerance& tol) const {
    const ops::OpSpec& spec = ops::op(n.op);
    if (spec.kink_derivatives) return kink_explained(n, p, rj, rk, tol);
    if (!spec.extremes) return false;
    const auto at = std::find(n.inputs.begin(), n.inputs.end(), p);
    const auto input = static_cast<size_t>(at - n.inputs.begin());
    if (at == n.inputs.end() || input >= ir::data_input_count(n)) return false;
    std::vector<int8_t> ext[2];
    const BackendRun* run[2] = {&rj, &rk};
    for (int b = 0; b < 2; ++b) {
      std::vector<core::Tensor> held;
      for (size_t i = 0; i < ir::data_input_count(n); ++i) {
        const core::Tensor* t = value_of(*run[b], n.inputs[i]);
        if (!t) return false;
        held.push_back(t->to(core::DType::F64));
      }
      ops::Inputs in;
      for (const auto& t : held) in.push_back(&t);
      ext[b] = spec.extremes(in, n.attrs, input);
    }
    const core::Tensor &gj = rj.grads.at(p), &gk = rk.grads.at(p);
    if (gj.shape() != gk.shape() || ext[0].size() != static_cast<size_t>(gj.numel()) || ext[1].size() != ext[0].size())
      return false;
    const double scale = tolerance_scale(gk);
    double sum_j = 0, sum_k = 0, mass = 0;
    for (int64_t i = 0; i < gj.numel(); ++i) {
      sum_j += gj.get(i);
      sum_k += gk.get(i);
      mass += std::abs(gk.get(i));
      if (element_within(gj.get(i), gk.get(i), scale, tol)) continue;
      const int8_t ej = ext[0][static_cast<size_t>(i)], ek = ext[1][static_cast<size_t>(i)];
      // Explained: tied on either backend, or an extreme on one backend and not the same on the other.
      const bool explained = ej >= ops::OpSpec::kTiedExtreme || ek >= ops::OpSpec::kTiedExtreme || ej != ek;
      if (!explained) return false;
    }
    // Routing moves gradient among candidates, it does not make any: with one data input every
    // valid routing keeps the total (two inputs of maximum can trade it between them), unless a tie
    // with padding may send some of it nowhere.
    for (const auto& e : ext)
      if (std::find(e.begin(), e.end(), ops::OpSpec::kTiedWithPadding) != e.end()) return true;
    return ir::data_input_count(n) != 1 || element_within(sum_j, sum_k, mass, tol);
  }

  // For piecewise operators (relu, clip, abs, ...): every differing gradient element has its input
  // at a kink on either backend, and both gradients lie between the incoming gradient times the two
  // one-sided derivatives there (which side a library takes is a convention).
  bool kink_explained(const ir::Node& n, const std::string& p, const BackendRun& rj, const BackendRun& rk,
                      const ops::Tolerance& tol) const {
    if (p != n.inputs[0]) return false;
    const auto& kink = ops::op(n.op).kink_derivatives;
    const core::Tensor *xj = value_of(rj, p), *xk = value_of(rk, p);
    if (!xj || !xk || !rj.grads.count(n.outputs[0]) || !rk.grads.count(n.outputs[0])) return false;
    const core::Tensor &gj = rj.grads.at(p), &gk = rk.grads.at(p);
    const core::Tensor &gyj = rj.grads.at(n.outputs[0]), &gyk = rk.grads.at(n.outputs[0]);
    if (gj.shape() != xj->shape() || gk.shape() != gj.shape() || xk->shape() != gj.shape() ||
        gyj.shape() != gj.shape() || gyk.shape() != gj.shape())
      return false;
    const double scale = tolerance_scale(gk);
    for (int64_t i = 0; i < gj.numel(); ++i) {
      if (element_within(gj.get(i), gk.get(i), scale, tol)) continue;
      auto range = kink(xj->get(i), n.attrs);
      if (!range) range = kink(xk->get(i), n.attrs);
      if (!range) return false;
      // Each backend's gradient within its own incoming gradient times [left, right].
      for (const auto& [g, gy] : {std::pair{gj.get(i), gyj.get(i)}, std::pair{gk.get(i), gyk.get(i)}}) {
        const double a = gy * range->first, b = gy * range->second;
        const double lo = std::min(a, b), hi = std::max(a, b);
        if (!(element_within(g, std::clamp(g, lo, hi), scale, tol))) return false;
      }
    }
    return true;
  }


  std::vector<size_t> trained_runs() const {
    std::vector<size_t> v;
    for (size_t i = 0; i < runs.size(); ++i)
      if (runs[i].trained) v.push_back(i);
    return v;
  }

  bool outputs_agree(const BackendRun& a, const BackendRun& b) const {
    for (const auto& o : g.outputs) {
      const ir::Node* p = g.producer(o);
      if (!p || !a.values.count(o) || !b.values.count(o)) return false;
      if (!cmp(a.values.at(o), b.values.at(o), tol_of(*p, false)).agree) return false;
    }
    return true;
  }

  void loss_and_backward(const std::string& loss_op) {
    const auto idx = trained_runs();
    const size_t ref = reference();
    const ir::Node* out_node = g.producer(g.outputs[0]);
    if (!out_node) return;
    const ops::Tolerance ltol = tol_of(*out_node, true);
    // LC: only where the model outputs agree.
    std::vector<std::pair<size_t, size_t>> lc_pairs;
    std::map<std::pair<size_t, size_t>, double> lc_dist;
    std::set<std::pair<size_t, size_t>> loss_agrees;
    for (size_t a = 0; a < idx.size(); ++a)
      for (size_t b = a + 1; b < idx.size(); ++b) {
        const BackendRun &rj = runs[idx[a]], &rk = runs[idx[b]];
        if (!outputs_agree(rj, rk)) continue;
        const Cmp cl = cmp(core::Tensor::scalar(rj.loss), core::Tensor::scalar(rk.loss), ltol);
        Cmp cg;
        if (rj.loss_grad.defined() && rk.loss_grad.defined()) cg = cmp(rj.loss_grad, rk.loss_grad, ltol);
        if (cl.inconsistent || cg.inconsistent) {
          lc_pairs.push_back({idx[a], idx[b]});
          lc_dist[{idx[a], idx[b]}] = std::max(cl.d, cg.d);
        } else if (cl.agree) {
          loss_agrees.insert({idx[a], idx[b]});
        }
      }
    if (!lc_pairs.empty()) {
      auto to_ref = [&](size_t i) {
        if (ref == SIZE_MAX || !runs[ref].trained) return 0.0;
        double d = std::abs(runs[i].loss - runs[ref].loss);
        if (runs[i].loss_grad.defined() && runs[ref].loss_grad.defined())
          d = std::max(d, chebyshev(runs[i].loss_grad, runs[ref].loss_grad));
        return d;
      };
      add_inconsistency(Stage::Loss, nullptr, loss_op, "loss", lc_pairs, lc_dist, 0.0, to_ref);
    }
    // BC: only where the loss agrees; born at L when the gradient arriving at L's output agrees
    // and a gradient L produces (its weights', or an input's it alone consumes) does not.
    for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it) {
      const ir::Node& n = *it;
      const ops::Tolerance gtol = tol_of(n, true);
      std::vector<std::string> produced;
      const size_t nd = ir::data_input_count(n);
      for (size_t i = nd; i < n.inputs.size(); ++i) produced.push_back(n.inputs[i]);
      for (size_t i = 0; i < nd; ++i)
        if (consumers[n.inputs[i]].size() == 1) produced.push_back(n.inputs[i]);
      if (produced.empty()) continue;
      std::vector<std::pair<size_t, size_t>> pairs;
      std::map<std::pair<size_t, size_t>, double> dist;
      double d_in_max = 0;
      for (auto [j, k] : loss_agrees) {
        const BackendRun &rj = runs[j], &rk = runs[k];
        bool incoming_agree = true;
        double d_in = 0;
        for (const auto& o : n.outputs) {
          if (!rj.grads.count(o) || !rk.grads.count(o)) continue;
          const Cmp c = cmp(rj.grads.at(o), rk.grads.at(o), gtol);
          incoming_agree &= c.agree;
          d_in = std::max(d_in, c.d);
        }
        if (!incoming_agree) continue;
        double d = 0;
        bool bad = false;
        for (const auto& p : produced) {
          if (!rj.grads.count(p) || !rk.grads.count(p)) continue;
          const Cmp c = cmp(rj.grads.at(p), rk.grads.at(p), gtol);
          if (c.inconsistent && !tie_explained(n, p, rj, rk, gtol)) {
            bad = true;
            d = std::max(d, c.d);
          }
        }
        if (!bad) continue;
        pairs.push_back({j, k});
        dist[{j, k}] = d;
        d_in_max = std::max(d_in_max, d_in);
      }
      if (pairs.empty()) continue;
      auto to_ref = [&](size_t i) {
        double d = 0;
        if (ref == SIZE_MAX) return d;
        for (const auto& p : produced)
          if (runs[i].grads.count(p) && runs[ref].grads.count(p))
            d = std::max(d, chebyshev(runs[i].grads.at(p), runs[ref].grads.at(p)));
        return d;
      };
      add_inconsistency(Stage::Backward, &n, n.op, n.outputs[0], pairs, dist, d_in_max, to_ref);
    }
  }
};

Judge make_judge(const ir::Graph& g, const std::vector<BackendRun>& runs, const Thresholds& th,
                 const backends::ValueMap* inputs) {
  Judge j{g, runs, th, inputs, {}, {}};
  for (const auto& n : g.nodes)
    for (size_t i = 0; i < ir::data_input_count(n); ++i) j.consumers[n.inputs[i]].push_back(n.name);
  return j;
}

// Muffin's numbers: NaN/Inf born where inputs are finite, and pairwise inconsistencies born where
// inputs agree, blamed by vote.
std::vector<Finding> muffin_numbers(const ir::Graph& g, const std::vector<BackendRun>& runs, const Thresholds& th,
                                    const backends::ValueMap* inputs, const core::Tensor*) {
  Judge j = make_judge(g, runs, th, inputs);
  j.nans();
  j.forward_inconsistencies();
  j.loss_and_backward(th.loss_op);
  return j.out;
}

}  // namespace

const std::vector<OracleRule>& oracle_rules() {
  static const std::vector<OracleRule> rules = {
      {Rule::PerNode, "node", "each library node against the float64 kernel on its own inputs", detail::per_node},
      {Rule::Muffin, "muffin", "pairwise born-here rule with voting", muffin_numbers},
  };
  return rules;
}

std::vector<Finding> judge(const ir::Graph& g, const std::vector<BackendRun>& runs, const Thresholds& th,
                           const backends::ValueMap* inputs, const core::Tensor* target) {
  std::vector<Finding> out = crash_findings(g, runs);
  for (auto& f : oracle_rule(th.rule).judge(g, runs, th, inputs, target)) out.push_back(std::move(f));
  for (auto& f : detail::judge_optimized(g, runs, th, inputs)) out.push_back(std::move(f));
  return out;
}

}  // namespace quorum::oracle
