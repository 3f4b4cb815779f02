// GRIST: gradient-guided exposure of NaN/Inf at vulnerable operations.
#include "search/grist.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <numeric>
#include <sstream>

#include "core/error.h"
#include "data/values.h"
#include "ir/edit.h"
#include "oracle/judge_util.h"

namespace quorum::search {

using core::Tensor;

namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double sign(double v) { return v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0; }

std::string number(double v) {
  std::ostringstream os;
  os << std::setprecision(6) << v;
  return os.str();
}

// A sample of the search: a candidate and its bookkeeping.
struct Sample {
  Candidate c;
  double score = 0;         // importance
  double loss = ops::kInf;  // the suspect loss at its last step
  double first_loss = std::nan("");
  int linear_left = 0;
  bool dead = false;   // the reference failed on it, or its operand is NaN: replace it
  bool moved = false;  // its last step changed an input or a weight
};

class Search {
 public:
  Search(const ir::Graph& g, const Candidate& start, const GristOptions& opt, const Evaluate& eval)
      : g_(g),
        start_(start),
        opt_(opt),
        eval_(eval),
        rng_(opt.seed == 0 ? 1 : opt.seed),
        t0_(std::chrono::steady_clock::now()) {
    // The sign step of each weight tensor: delta times the width of its initial values (at least 1).
    for (const auto& [name, w] : start_.weights) {
      double lo = ops::kInf, hi = -ops::kInf;
      for (int64_t i = 0; i < w.numel(); ++i) {
        lo = std::min(lo, w.get(i));
        hi = std::max(hi, w.get(i));
      }
      const double width = w.numel() > 0 && std::isfinite(hi - lo) ? hi - lo : 0.0;
      weight_step_[name] = opt_.delta * std::max(width, 1.0);
    }
  }

  GristResult run() {
    std::vector<ref::VulnerableSite> sites = ref::vulnerable_sites(g_);
    // An operand that is a weight moves only when the weights are searched.
    if (!opt_.weights)
      std::erase_if(sites, [&](const ref::VulnerableSite& s) { return g_.initializers.count(s.value) > 0; });
    for (size_t i = 0; i < sites.size(); ++i) {
      if (out_.evaluations >= opt_.budget || timed_out()) break;
      const int64_t share =
          std::max<int64_t>(opt_.samples, (opt_.budget - out_.evaluations) / static_cast<int64_t>(sites.size() - i));
      TargetOutcome t = target(sites[i], std::min(share, opt_.budget - out_.evaluations));
      out_.targets.push_back(std::move(t));
      if (out_.targets.back().triggered && out_.trigger < 0) {
        out_.trigger = static_cast<int>(out_.targets.size()) - 1;
        if (opt_.stop_at_first) break;
      }
    }
    out_.seconds = since(t0_);
    return out_;
  }

 private:
  bool timed_out() const { return opt_.time_limit > 0 && since(t0_) >= opt_.time_limit; }

  Sample fresh(bool original) {
    Sample s;
    s.c.weights = start_.weights;
    if (original) {
      s.c.inputs = start_.inputs;
    } else {
      // Drawn as the campaign draws inputs (uniform in the data range, with its edge values: subnormals,
      // +-1e4, +-1e6), so the windows those values open are reached; the steps below never carry an element
      // farther out of the data range than it started.
      for (const auto& in : g_.inputs)
        s.c.inputs[in.name] = data::random_with_edges(in.type.shape, rng_, opt_.data_range.lo, opt_.data_range.hi);
    }
    s.linear_left = opt_.weights ? opt_.linear_rounds : 0;
    return s;
  }

  // One evaluation; true when it triggered (the outcome records it).
  bool evaluate(const Sample& s, TargetOutcome& t) {
    ++out_.evaluations;
    ++t.evaluations;
    const Verdict v = eval_(s.c, &t.site);
    if (!v.triggered) return false;
    t.triggered = true;
    t.what = v.what;
    t.candidate = s.c;
    if (out_.first_trigger < 0) out_.first_trigger = out_.evaluations;
    return true;
  }

  TargetOutcome target(const ref::VulnerableSite& site, int64_t share) {
    TargetOutcome t;
    t.site = site;
    t.best_loss = ops::kInf;
    std::vector<Sample> samples;
    for (int i = 0; i < opt_.samples; ++i) samples.push_back(fresh(i == 0));
    int last_better = 0;
    bool have_first = false;
    for (int it = 1; t.evaluations < share && !timed_out(); ++it) {
      ++t.iterations;
      ++out_.iterations;
      for (Sample& s : samples) {
        if (t.evaluations >= share) break;
        step(s, site);
        if (!s.dead) {
          if (!have_first) t.first_loss = s.loss;
          have_first = true;
          if (std::isinf(t.best_loss) ? s.loss < t.best_loss
                                      : s.loss < t.best_loss - 1e-9 * std::max(1.0, std::abs(t.best_loss))) {
            t.best_loss = s.loss;
            last_better = it;
          }
        }
        if (evaluate(s, t)) return t;
      }
      if (it - last_better >= opt_.flat_iterations) break;
      // No sample moved: the operand has no gradient (a clip before it, a constant): unreachable.
      if (std::none_of(samples.begin(), samples.end(), [](const Sample& x) { return x.moved; })) break;
      replace(samples);
    }
    return t;
  }

  // Replaces the dead samples and the least important switch_rate share (never the one nearest to
  // the boundary) by fresh ones.
  void replace(std::vector<Sample>& samples) {
    std::vector<size_t> order(samples.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      if (samples[a].dead != samples[b].dead) return samples[a].dead;
      return samples[a].score < samples[b].score;
    });
    size_t best = 0;
    for (size_t i = 1; i < samples.size(); ++i)
      if (!samples[i].dead && (samples[best].dead || samples[i].loss < samples[best].loss)) best = i;
    const auto k = static_cast<size_t>(std::ceil(opt_.switch_rate * static_cast<double>(samples.size())));
    size_t replaced = 0;
    for (size_t i : order) {
      if (i == best && !samples[i].dead) continue;
      if (samples[i].dead || replaced < k) {
        samples[i] = fresh(false);
        ++replaced;
      }
    }
  }

  // The suspect loss of a candidate on the reference and its gradients (d L / d value for every
  // input and weight); false when the reference fails, the operand is already invalid (its
  // evaluation says what that means) or no boundary is finite.
  bool probe(const Candidate& c, const ref::VulnerableSite& site, SuspectLoss& sl, ref::ValueMap& grads) {
    try {
      const ir::Graph gw = ir::with_weights(g_, c.weights);
      const ref::ValueMap values = ref::forward(gw, c.inputs);
      const Tensor& operand = values.at(site.value);
      sl = suspect_loss(site, operand);
      if (sl.invalid || !std::isfinite(sl.loss) || sl.index < 0) return false;
      Tensor seed(core::DType::F64, operand.shape());
      seed.f64()[sl.index] = -sl.toward;  // L = toward * (boundary - v): dL/dv = -toward
      grads = ref::backward(gw, values, {{site.value, seed}});
      return true;
    } catch (const core::UserError&) {
      return false;
    } catch (const core::OpError&) {
      return false;
    }
  }

  // One step of a sample toward the target's invalid boundary: sign steps on the inputs, then (on
  // the gradients at the moved inputs) a linear or a sign step on the weights.
  void step(Sample& s, const ref::VulnerableSite& site) {
    SuspectLoss sl;
    ref::ValueMap grads;
    s.moved = false;
    if (!probe(s.c, site, sl, grads)) {
      s.loss = sl.invalid ? 0.0 : ops::kInf;
      s.dead = true;  // replaced after its evaluation
      return;
    }
    const double improvement = std::isfinite(s.loss) ? (s.loss - sl.loss) / std::max(std::abs(s.loss), 1e-12) : 0;
    s.loss = sl.loss;
    if (std::isnan(s.first_loss)) s.first_loss = sl.loss;

    // Inputs: x <- clip(x - step * sign(dL/dx)).
    const double step = opt_.delta * (opt_.data_range.hi - opt_.data_range.lo);
    int64_t moved = 0, clipped = 0, total = 0;
    for (auto& [name, x] : s.c.inputs) {
      auto git = grads.find(name);
      if (git == grads.end()) continue;
      const Tensor& gx = git->second;
      for (int64_t i = 0; i < x.numel(); ++i) {
        ++total;
        const double gi = gx.get(i);
        if (!std::isfinite(gi) || gi == 0) continue;
        const double want = x.f64()[i] - step * sign(gi);
        const double here = x.f64()[i];
        const double got =
            std::clamp(want, std::min(opt_.data_range.lo, here), std::max(opt_.data_range.hi, here));
        if (got != want) ++clipped;
        if (got != x.f64()[i]) ++moved;
        x.f64()[i] = got;
      }
    }
    // Weights: a linear step to the aimed loss L* = aim * first loss along the gradient at the moved
    // inputs, for the first rounds; then sign steps.
    if (opt_.weights && !s.c.weights.empty()) {
      SuspectLoss now = sl;
      bool linear = s.linear_left > 0 && (moved == 0 || probe(s.c, site, now, grads));
      double norm2 = 0;
      for (const auto& [name, w] : s.c.weights) {
        auto git = grads.find(name);
        if (git == grads.end()) continue;
        for (int64_t i = 0; i < w.numel(); ++i)
          if (std::isfinite(git->second.get(i))) norm2 += git->second.get(i) * git->second.get(i);
      }
      linear = linear && norm2 > 0 && std::isfinite(norm2);
      const double factor = linear ? (now.loss - opt_.aim * s.first_loss) / norm2 : 0;
      if (s.linear_left > 0) --s.linear_left;
      for (auto& [name, w] : s.c.weights) {
        auto git = grads.find(name);
        if (git == grads.end()) continue;
        const double wstep = weight_step_.at(name);
        for (int64_t i = 0; i < w.numel(); ++i) {
          const double gi = git->second.get(i);
          if (!std::isfinite(gi) || gi == 0) continue;
          w.f64()[i] -= linear ? factor * gi : wstep * sign(gi);
          ++moved;
        }
      }
    }
    s.moved = moved > 0;
    // Importance: how much its last step lowered the loss, and how much of it moves, less what the
    // data range clipped.
    const double moved_share = total > 0 ? static_cast<double>(moved) / static_cast<double>(total) : 0;
    const double clipped_share = total > 0 ? static_cast<double>(clipped) / static_cast<double>(total) : 0;
    s.score = 0.5 * s.score + std::clamp(improvement, -1.0, 1.0) + 0.1 * std::min(moved_share, 1.0) - clipped_share;
  }

  const ir::Graph& g_;
  const Candidate& start_;
  const GristOptions& opt_;
  const Evaluate& eval_;
  core::Rng rng_;
  std::chrono::steady_clock::time_point t0_;
  std::map<std::string, double> weight_step_;
  GristResult out_;
};

}  // namespace

SuspectLoss suspect_loss(const ref::VulnerableSite& site, const Tensor& operand) {
  SuspectLoss best;
  best.loss = ops::kInf;
  for (int64_t i = 0; i < operand.numel(); ++i) {
    const double v = operand.get(i);
    if (std::isnan(v)) continue;
    if (ref::invalid_value(site.valid, v)) {
      best.invalid = true;
      best.loss = 0;
      best.index = i;
      best.toward = 0;
      return best;
    }
    const ref::BoundaryDistance d = ref::boundary_distance(site.valid, v);
    if (d.distance < best.loss) {
      best.loss = d.distance;
      best.index = i;
      best.toward = d.toward;
    }
  }
  return best;
}

GristResult grist(const ir::Graph& g, const Candidate& start, const GristOptions& opt, const Evaluate& eval) {
  if (opt.data_range.lo > opt.data_range.hi || !opt.data_range.bounded())
    throw core::UserError("the data range must be finite with lo <= hi");
  return Search(g, start, opt, eval).run();
}

GristResult random_inputs(const ir::Graph& g, const Candidate& start, int64_t budget, uint64_t seed,
                          const ops::Interval& data_range, const Evaluate& eval) {
  const auto t0 = std::chrono::steady_clock::now();
  GristResult r;
  core::Rng rng(seed == 0 ? 1 : seed);
  TargetOutcome t;
  for (int64_t i = 0; i < budget; ++i) {
    Candidate c;
    c.weights = start.weights;
    if (i == 0) {
      c.inputs = start.inputs;
    } else {
      for (const auto& in : g.inputs)
        c.inputs[in.name] = data::random_with_edges(in.type.shape, rng, data_range.lo, data_range.hi);
    }
    ++r.evaluations;
    ++r.iterations;
    ++t.evaluations;
    const Verdict v = eval(c, nullptr);
    if (v.triggered) {
      t.triggered = true;
      t.what = v.what;
      t.candidate = std::move(c);
      r.first_trigger = r.evaluations;
      r.trigger = 0;
      break;
    }
  }
  r.targets.push_back(std::move(t));
  r.seconds = since(t0);
  return r;
}

std::string first_nonfinite_node(const ir::Graph& g, const ref::ValueMap& values) {
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs) {
      auto it = values.find(o);
      if (it != values.end() && oracle::detail::has_nonfinite(it->second)) return n.name;
    }
  return "";
}

Verdict model_verdict(const ir::Graph& g, const Candidate& c, const ref::VulnerableSite* site) {
  ref::ValueMap values;
  try {
    values = ref::forward(ir::with_weights(g, c.weights), c.inputs);
  } catch (const core::UserError& e) {
    return Verdict{false, e.what()};
  }
  const std::string bad = first_nonfinite_node(g, values);
  if (!bad.empty()) return Verdict{true, "the float64 reference produces NaN/Inf, first at node '" + bad + "'"};
  const std::vector<ref::VulnerableSite> all =
      site ? std::vector<ref::VulnerableSite>{*site} : ref::vulnerable_sites(g);
  for (const auto& s : all) {
    const SuspectLoss sl = suspect_loss(s, values.at(s.value));
    if (!sl.invalid) continue;
    return Verdict{true, "operand " + std::to_string(s.input) + " of node '" + s.node + "' (" + s.op + ") reaches " +
                             number(values.at(s.value).get(sl.index)) +
                             " (float32: " + number(static_cast<float>(values.at(s.value).get(sl.index))) +
                             "), outside its valid range (" + s.valid.front().why + ")"};
  }
  return Verdict{};
}

}  // namespace quorum::search
