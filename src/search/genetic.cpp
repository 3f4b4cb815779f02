// Audee's genetic search and divergence seeking (METHODS.md §4; docs/search.md).
#include "search/genetic.h"

#include <algorithm>
#include <chrono>
#include <cfloat>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "core/error.h"
#include "core/stats.h"
#include "data/values.h"
#include "oracle/judge_util.h"
#include "ref/ranges.h"
#include "search/grist.h"

namespace quorum::search {

using core::Tensor;
using core::UserError;

Level level_from_string(const std::string& s) {
  if (s == "input") return Level::Input;
  if (s == "weights") return Level::Weights;
  if (s == "both") return Level::Both;
  throw UserError("--level: expected input, weights or both, got '" + s + "'");
}

const char* to_string(Level l) {
  switch (l) {
    case Level::Input: return "input";
    case Level::Weights: return "weights";
    case Level::Both: return "both";
  }
  return "?";
}

Fitness fitness_from_string(const std::string& s) {
  if (s == "inconsistency") return Fitness::Inconsistency;
  if (s == "nan") return Fitness::Nan;
  if (s == "diverge") return Fitness::Diverge;
  if (s == "edge") return Fitness::Edge;
  throw UserError("--fitness: expected inconsistency, nan, diverge or edge, got '" + s + "'");
}

const char* to_string(Fitness f) {
  switch (f) {
    case Fitness::Inconsistency: return "inconsistency";
    case Fitness::Nan: return "nan";
    case Fitness::Diverge: return "diverge";
    case Fitness::Edge: return "edge";
  }
  return "?";
}

bool StopRule::stops(const std::string& known) const {
  switch (kind) {
    case Kind::First: return true;
    case Kind::Unknown: return known.empty();
    case Kind::Entry: return known == entry;
  }
  return true;
}

StopRule stop_rule_from_string(const std::string& s) {
  if (s.empty()) throw UserError("--stop_at: expected unknown, first or a ledger entry's id");
  StopRule r;
  if (s == "unknown") r.kind = StopRule::Kind::Unknown;
  else if (s == "first") r.kind = StopRule::Kind::First;
  else {
    r.kind = StopRule::Kind::Entry;
    r.entry = s;
  }
  return r;
}

const char* to_string(Oracle o) {
  switch (o) {
    case Oracle::Crash: return "crash";
    case Oracle::Nan: return "nan";
    case Oracle::Verdict: return "verdict";
    case Oracle::Label: return "label";
  }
  return "?";
}

void add_met(std::vector<Met>& met, const std::string& known, int64_t evaluation) {
  if (std::none_of(met.begin(), met.end(), [&](const Met& m) { return m.known == known; }))
    met.push_back({known, evaluation});
}

std::string met_text(const std::vector<Met>& met) {
  std::string s;
  for (const auto& m : met) s += (s.empty() ? "" : ",") + m.name() + "@" + std::to_string(m.evaluation);
  return s.empty() ? "none" : s;
}

namespace {

// The noise scale of a segment: `scale` times the median |value| of its finite values (robust to the
// edge values random inputs carry), at least 1e-3.
double segment_scale(const Tensor& t, double scale) {
  const Tensor d = t.to(core::DType::F64);
  std::vector<double> mags;
  mags.reserve(static_cast<size_t>(d.numel()));
  for (int64_t i = 0; i < d.numel(); ++i)
    if (std::isfinite(d.f64()[i])) mags.push_back(std::fabs(d.f64()[i]));
  if (mags.empty()) return scale;
  std::nth_element(mags.begin(), mags.begin() + static_cast<long>(mags.size() / 2), mags.end());
  return scale * std::max(mags[mags.size() / 2], 1e-3);
}

const Tensor& segment_value(const Candidate& c, const Segment& s) {
  if (s.weight) return c.weights.at(s.name);
  return c.inputs.at(s.name);
}

}  // namespace

Layout layout_of(const ir::Graph& g, const Candidate& seed, Level level, double cauchy_scale) {
  Layout l;
  auto add = [&](bool weight, const std::string& name, const Tensor& t) {
    Segment s;
    s.weight = weight;
    s.name = name;
    s.shape = t.shape();
    s.offset = l.genes;
    s.size = static_cast<size_t>(t.numel());
    s.scale = segment_scale(t, cauchy_scale);
    l.genes += s.size;
    l.segments.push_back(std::move(s));
  };
  if (level != Level::Weights)
    for (const auto& in : g.inputs) {
      auto it = seed.inputs.find(in.name);
      if (it != seed.inputs.end() && core::is_float(in.type.dtype)) add(false, in.name, it->second);
    }
  if (level != Level::Input)
    for (const auto& [name, t] : g.initializers) {
      if (!core::is_float(t.dtype())) continue;
      auto it = seed.weights.find(name);
      add(true, name, it != seed.weights.end() ? it->second : t);
    }
  // Next to 0 (log's, sqrt's, a division's edge) the neighbours that matter are float32's smallest: its
  // subnormals and FLT_MIN; elsewhere one part in 2^20 either side.
  for (const ref::VulnerableSite& site : ref::vulnerable_sites(g))
    for (const ops::ValidRange& r : site.valid)
      for (const double b : {r.lo, r.hi}) {
        if (!std::isfinite(b)) continue;
        const double d = std::ldexp(std::fabs(b), -20);
        const std::vector<double> near =
            b == 0 ? std::vector<double>{0.0, 1.4e-45, -1.4e-45, 1e-40, -1e-40, FLT_MIN, -FLT_MIN}
                   : std::vector<double>{b, b + d, b - d};
        for (const double v : near)
          if (std::find(l.edges.begin(), l.edges.end(), v) == l.edges.end()) l.edges.push_back(v);
      }
  return l;
}

std::vector<double> genes_of(const Candidate& c, const Layout& l) {
  std::vector<double> genes(l.genes);
  for (const auto& s : l.segments) {
    const Tensor d = segment_value(c, s).to(core::DType::F64);
    std::copy(d.f64(), d.f64() + s.size, genes.begin() + static_cast<long>(s.offset));
  }
  return genes;
}

Candidate with_genes(const Candidate& base, const Layout& l, const std::vector<double>& genes) {
  Candidate c = base;
  for (const auto& s : l.segments) {
    Tensor t(core::DType::F64, s.shape);
    std::copy(genes.begin() + static_cast<long>(s.offset), genes.begin() + static_cast<long>(s.offset + s.size),
              t.f64());
    (s.weight ? c.weights[s.name] : c.inputs[s.name]) = std::move(t);
  }
  return c;
}

std::vector<double> crossover(const std::vector<double>& a, const std::vector<double>& b, double r1, core::Rng& rng) {
  std::vector<double> child(a.size());
  for (size_t i = 0; i < a.size(); ++i) child[i] = rng.uniform() < r1 ? a[i] : b[i];
  return child;
}

void mutate(std::vector<double>& genes, const Layout& l, double r2, core::Rng& rng, bool float_moves) {
  for (const auto& s : l.segments)
    for (size_t i = s.offset; i < s.offset + s.size; ++i)
      if (rng.uniform() < r2) {
        if (float_moves && rng.bernoulli(0.5))
          genes[i] = float_move(genes[i], rng, &l.edges);
        else
          genes[i] += rng.cauchy(0.0, s.scale);
      }
}

double float_move(double x, core::Rng& rng, const std::vector<double>* edges) {
  switch (rng.index(4)) {
    case 0: return std::ldexp(x, static_cast<int>(rng.randint(-40, 40)));
    case 1: return -x;
    case 2: return edges && !edges->empty() && rng.bernoulli(0.5) ? rng.pick(*edges) : rng.pick(data::edge_values());
    default: {
      static const std::vector<double> ends = {FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX, INFINITY, -INFINITY, NAN};
      return rng.pick(ends);
    }
  }
}

namespace {

const Tensor* logits(const ir::Graph& g, const oracle::BackendRun& r) {
  if (!r.outcome.ok() || r.unsupported || g.outputs.empty()) return nullptr;
  auto it = r.values.find(g.outputs[0]);
  return it == r.values.end() ? nullptr : &it->second;
}

// The libraries that ran the forward pass to the logits (not the reference).
std::vector<const oracle::BackendRun*> libraries(const ir::Graph& g, const Trial& t) {
  std::vector<const oracle::BackendRun*> out;
  for (const auto& r : t.runs)
    if (!r.is_reference && logits(g, r)) out.push_back(&r);
  return out;
}

const oracle::BackendRun* reference(const Trial& t) {
  for (const auto& r : t.runs)
    if (r.is_reference) return &r;
  return nullptr;
}

double mean_abs_diff(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(core::DType::F64), y = b.to(core::DType::F64);
  return x.numel() == y.numel() ? core::mean_abs_difference(x.f64(), y.f64(), x.numel()) : 0;
}

// Top-1 label per row over the last axis.
// -1 for a row holding NaN or an infinity: it has no top-1 label (a NaN compares false, so the largest element
// would be an accident of the order), and the per-node rule has judged how the value got there.
std::vector<int64_t> labels(const Tensor& t) {
  const Tensor d = t.to(core::DType::F64);
  const int64_t c = d.shape().empty() ? 1 : d.shape().back();
  std::vector<int64_t> out;
  if (c <= 1) return out;
  for (int64_t r = 0; r * c < d.numel(); ++r) {
    const double* p = d.f64() + r * c;
    const bool finite = std::all_of(p, p + c, [](double v) { return std::isfinite(v); });
    out.push_back(finite ? core::top1(p, c) : -1);
  }
  return out;
}

}  // namespace

std::optional<Failure> failure_of(const ir::Graph& g, const Trial& t) {
  // A crash the verdicts hold as a finding is told as that finding (with its ledger label).
  for (const auto& r : t.runs) {
    const auto s = r.outcome.status;
    const bool judged = std::any_of(t.findings.begin(), t.findings.end(),
                                    [&](const oracle::Finding& f) { return f.backend == r.backend; });
    if (!judged && (s == worker::Status::Crash || s == worker::Status::Timeout || s == worker::Status::OutOfMemory))
      return Failure{Oracle::Crash, r.backend + ": " + r.outcome.str(), "", r.backend};
  }
  if (!t.findings.empty()) {
    const oracle::Finding& f = t.findings[0];
    return Failure{Oracle::Verdict,
                   std::string(core::to_string(f.kind)) + " [" + core::to_string(f.stage) + "] " + f.backend + " " +
                       f.op + (f.node.empty() ? "" : " at '" + f.node + "'") +
                       (f.known.empty() ? "" : " (known: " + f.known + ")"),
                   f.known, f.backend};
  }
  // With the reference, the per-node rule has judged every node already: a NaN/Inf it left unjudged, or a top-1
  // label it does not hold, is float32's (seed 10477: five label flips, each after float32 differences an
  // ill-conditioned graph amplified with every node within its spread). Only a run without one needs these.
  if (reference(t)) return std::nullopt;
  for (const auto& r : t.runs) {
    if (!r.outcome.ok()) continue;
    for (const auto& [name, v] : r.values)
      if (oracle::detail::has_nonfinite(v))
        return Failure{Oracle::Nan, r.backend + ": NaN/Inf at '" + name + "'", "", r.backend};
  }
  const auto libs = libraries(g, t);
  for (size_t i = 0; i < libs.size(); ++i)
    for (size_t k = i + 1; k < libs.size(); ++k) {
      const auto a = labels(*logits(g, *libs[i])), b = labels(*logits(g, *libs[k]));
      if (a.size() != b.size()) continue;
      for (size_t row = 0; row < a.size(); ++row) {
        if (a[row] < 0 || b[row] < 0 || a[row] == b[row]) continue;
        return Failure{Oracle::Label,
                       libs[i]->backend + " says " + std::to_string(a[row]) + ", " + libs[k]->backend + " says " +
                           std::to_string(b[row]) + " (row " + std::to_string(row) + ")",
                       "", libs[i]->backend};
      }
    }
  return std::nullopt;
}

namespace {

// Chebyshev distance of `v` to the reference `r` over (1 + max |r|); 1e3 for NaN/Inf the reference lacks.
double relative_distance(const Tensor& v, const Tensor& r) {
  const Tensor x = v.to(core::DType::F64), y = r.to(core::DType::F64);
  if (x.numel() != y.numel()) return 0;
  double d = 0, m = 0;
  for (int64_t i = 0; i < y.numel(); ++i)
    if (std::isfinite(y.f64()[i])) m = std::max(m, std::fabs(y.f64()[i]));
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double a = x.f64()[i], b = y.f64()[i];
    if (!std::isfinite(b)) continue;  // the model's own overflow: not the library's
    if (!std::isfinite(a)) return 1e3;
    d = std::max(d, std::fabs(a - b));
  }
  return d / (1 + m);
}

// Over every value of `pick(run)`: the largest lead of one library's distance over the others'.
template <class Pick>
double lead(const std::vector<const oracle::BackendRun*>& libs, const oracle::BackendRun& ref, Pick pick) {
  double best = 0;
  for (const auto& [name, r] : pick(ref)) {
    std::vector<double> d;
    for (const auto* l : libs) {
      auto it = pick(*l).find(name);
      d.push_back(it == pick(*l).end() ? 0.0 : relative_distance(it->second, r));
    }
    for (size_t j = 0; j < d.size(); ++j) {
      double others = 0;
      for (size_t k = 0; k < d.size(); ++k)
        if (k != j) others = std::max(others, d[k]);
      best = std::max(best, d[j] - others);
    }
  }
  return best;
}

}  // namespace

double divergence(const ir::Graph& g, const Trial& t) {
  (void)g;
  const oracle::BackendRun* ref = reference(t);
  if (!ref) return 0;
  std::vector<const oracle::BackendRun*> libs;
  for (const auto& r : t.runs)
    if (!r.is_reference && r.outcome.ok() && !r.unsupported) libs.push_back(&r);
  double best = lead(libs, *ref, [](const oracle::BackendRun& r) -> const backends::ValueMap& { return r.values; });
  if (ref->trained) {
    std::vector<const oracle::BackendRun*> trained;
    for (const auto* l : libs)
      if (l->trained) trained.push_back(l);
    best = std::max(best, lead(trained, *ref, [](const oracle::BackendRun& r) -> const backends::ValueMap& {
                      return r.grads;
                    }));
  }
  return best;
}

double edge_closeness(const ir::Graph& g, const Trial& t, const Candidate* c) {
  const oracle::BackendRun* ref = reference(t);
  double best = 0;
  for (const ref::VulnerableSite& site : ref::vulnerable_sites(g)) {
    const Tensor* operand = nullptr;
    if (ref) {
      auto it = ref->values.find(site.value);
      if (it != ref->values.end()) operand = &it->second;
    }
    if (!operand && c) {
      auto in = c->inputs.find(site.value);
      auto w = c->weights.find(site.value);
      operand = in != c->inputs.end() ? &in->second : w != c->weights.end() ? &w->second : nullptr;
    }
    if (!operand) {
      auto it = g.initializers.find(site.value);
      if (it != g.initializers.end()) operand = &it->second;
    }
    if (!operand) continue;
    const SuspectLoss sl = suspect_loss(site, *operand);
    if (std::isfinite(sl.loss)) best = std::max(best, 1 / (1 + sl.loss));
  }
  return best;
}

double fitness_of(const ir::Graph& g, const Trial& t, Fitness f, const Candidate* c) {
  if (f == Fitness::Diverge) return divergence(g, t);
  if (f == Fitness::Edge) return fitness_of(g, t, Fitness::Inconsistency) + edge_closeness(g, t, c);
  const auto libs = libraries(g, t);
  if (f == Fitness::Nan) {
    double best = 0;
    for (const auto* l : libs) {
      const Tensor d = logits(g, *l)->to(core::DType::F64);
      double lo = std::numeric_limits<double>::infinity(), hi = -lo;
      for (int64_t i = 0; i < d.numel(); ++i) {
        // NaN/Inf are the oracles' to judge; an infinity a float move put at the input would otherwise give
        // every candidate holding one the same unbeatable spread.
        if (!std::isfinite(d.f64()[i])) continue;
        lo = std::min(lo, d.f64()[i]);
        hi = std::max(hi, d.f64()[i]);
      }
      if (hi >= lo) best = std::max(best, std::isfinite(hi - lo) ? hi - lo : DBL_MAX);
    }
    return best;
  }
  std::vector<const Tensor*> sides;
  for (const auto* l : libs) sides.push_back(logits(g, *l));
  if (sides.size() == 1)
    if (const oracle::BackendRun* ref = reference(t))
      if (const Tensor* r = logits(g, *ref)) sides.push_back(r);
  double best = 0;
  for (size_t i = 0; i < sides.size(); ++i)
    for (size_t k = i + 1; k < sides.size(); ++k) best = std::max(best, mean_abs_diff(*sides[i], *sides[k]));
  return best;
}

namespace {

using Clock = std::chrono::steady_clock;

struct Scored {
  std::vector<double> genes;
  double fitness = 0;
};

// A search's running state: its result so far and the first known failure it went past (StopRule).
struct State {
  Result res;
  std::optional<Result> first_known;
  // Ends the search: with nothing else found, the first known failure met is the result.
  Result finish(std::chrono::steady_clock::time_point t0) {
    if (!res.found && first_known) {
      res.found = true;
      res.failure = first_known->failure;
      res.candidate = std::move(first_known->candidate);
      res.trial = std::move(first_known->trial);
    }
    res.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return std::move(res);
  }
};

// Evaluates one batch; returns true (filling `st.res`) when an oracle fired that the stop rule stops at. A
// failure it goes past is met (the first of each ledger entry listed) and scores 0: a known bug is no
// progress toward another.
bool run_batch(const ir::Graph& g, const Candidate& base, const Layout& l, std::vector<Scored>& batch,
               const GaParams& p, Evaluator& ev, State& st, std::vector<Candidate>* explicit_candidates = nullptr) {
  Result& res = st.res;
  std::vector<Candidate> cands;
  if (explicit_candidates) cands = *explicit_candidates;
  else
    for (const auto& s : batch) cands.push_back(with_genes(base, l, s.genes));
  std::vector<Trial> trials = ev.evaluate(cands);
  for (size_t i = 0; i < trials.size() && i < batch.size(); ++i) {
    ++res.evaluations;
    batch[i].fitness = fitness_of(g, trials[i], p.fitness, &cands[i]);
    if (!std::isfinite(batch[i].fitness)) batch[i].fitness = 1e300;
    if (auto f = failure_of(g, trials[i])) {
      if (p.stop.stops(f->known)) {
        res.found = true;
        res.failure = *f;
        res.candidate = std::move(cands[i]);
        res.trial = std::move(trials[i]);
        res.best = std::max(res.best, batch[i].fitness);
        return true;
      }
      add_met(res.met, f->known, res.evaluations);
      if (!st.first_known) {
        st.first_known = Result{};
        st.first_known->failure = *f;
        st.first_known->candidate = cands[i];
        st.first_known->trial = trials[i];
      }
      batch[i].fitness = 0;
      continue;
    }
    if (batch[i].fitness > res.best || res.trial.runs.empty()) {
      res.best = std::max(res.best, batch[i].fitness);
      res.candidate = cands[i];
      res.trial = std::move(trials[i]);
    }
  }
  return false;
}

int64_t remaining(const GaParams& p, const Result& r) {
  return p.budget > 0 ? p.budget - r.evaluations : std::numeric_limits<int64_t>::max();
}

// `seed` with the inputs of `l`'s input segments drawn afresh as the campaign draws inputs (data/values.h).
Candidate drawn_inputs(const ir::Graph& g, const Candidate& seed, const Layout& l, core::Rng& rng) {
  Candidate c = seed;
  for (const auto& s : l.segments)
    if (!s.weight) c.inputs.erase(s.name);
  data::complete_inputs(g, c.inputs, rng);
  return c;
}

// Genes whose input segments are drawn afresh (drawn_inputs), the weights' genes `from`'s.
std::vector<double> fresh_inputs(const ir::Graph& g, const Candidate& seed, const Layout& l,
                                 const std::vector<double>& from, core::Rng& rng) {
  std::vector<double> genes = genes_of(drawn_inputs(g, seed, l, rng), l);
  for (const auto& s : l.segments)
    if (s.weight)
      std::copy(from.begin() + static_cast<long>(s.offset), from.begin() + static_cast<long>(s.offset + s.size),
                genes.begin() + static_cast<long>(s.offset));
  return genes;
}

bool has_inputs(const Layout& l) {
  return std::any_of(l.segments.begin(), l.segments.end(), [](const Segment& s) { return !s.weight; });
}

}  // namespace

Result genetic_search(const ir::Graph& g, const Candidate& seed, const GaParams& p, Evaluator& ev, core::Rng& rng) {
  if (p.population < 2) throw UserError("--population: at least 2");
  if (p.elite < 1 || p.elite >= p.population) throw UserError("--elite: from 1 to --population - 1");
  const auto t0 = Clock::now();
  State st;
  Result& res = st.res;
  const Layout l = layout_of(g, seed, p.level, p.cauchy_scale);
  const std::vector<double> centre = genes_of(seed, l);
  // With float moves and inputs to draw: three of four of the first generation's inputs drawn afresh as the
  // campaign draws them (random search's whole budget is such draws), and half of each later generation's
  // children immigrants whose inputs are such draws (their weights bred): on the ledger's bugs
  // (bench/ledger_rediscovery.py) fewer draws lose the bugs one edge value triggers, more lose those a float
  // move reaches (NaN or an infinity at the input).
  const bool draws = p.float_moves && has_inputs(l);
  // The initial population: the seed's genes, each with Cauchy noise, or fresh inputs (above).
  std::vector<Scored> pop(static_cast<size_t>(std::min<int64_t>(p.population, remaining(p, res))));
  for (size_t i = 0; i < pop.size(); ++i) {
    if (draws && i % 4 != 0) {
      pop[i].genes = fresh_inputs(g, seed, l, centre, rng);
      continue;
    }
    pop[i].genes = centre;
    mutate(pop[i].genes, l, 1.0, rng);
  }
  bool stop = pop.empty() || run_batch(g, seed, l, pop, p, ev, st);
  res.generations = pop.empty() ? 0 : 1;
  auto best_of = [](const std::vector<Scored>& v) {
    double b = 0;
    for (const auto& s : v) b = std::max(b, s.fitness);
    return b;
  };
  if (!pop.empty()) res.best_by_generation.push_back(best_of(pop));
  while (!stop && res.generations < p.max_ite && remaining(p, res) > 0) {
    // The m fittest survive (ties keep the earlier), and breed the rest.
    std::stable_sort(pop.begin(), pop.end(), [](const Scored& a, const Scored& b) { return a.fitness > b.fitness; });
    pop.resize(static_cast<size_t>(std::min<int64_t>(p.elite, static_cast<int64_t>(pop.size()))));
    const size_t parents = pop.size();
    std::vector<Scored> children(static_cast<size_t>(std::min<int64_t>(p.population - p.elite, remaining(p, res))));
    for (auto& c : children) {
      const Scored& a = pop[rng.index(parents)];
      const Scored& b = pop[rng.index(parents)];
      c.genes = crossover(a.genes, b.genes, p.crossover, rng);
      mutate(c.genes, l, p.mutation, rng, p.float_moves);
      if (draws && rng.bernoulli(0.5)) c.genes = fresh_inputs(g, seed, l, c.genes, rng);
    }
    stop = run_batch(g, seed, l, children, p, ev, st);
    ++res.generations;
    for (auto& c : children) pop.push_back(std::move(c));
    res.best_by_generation.push_back(best_of(pop));
  }
  return st.finish(t0);
}

Result random_search(const ir::Graph& g, const Candidate& seed, const GaParams& p, Evaluator& ev, core::Rng& rng) {
  const auto t0 = Clock::now();
  State st;
  Result& res = st.res;
  const Layout l = layout_of(g, seed, Level::Input, p.cauchy_scale);
  const int64_t budget = p.budget > 0 ? p.budget : p.population + (p.max_ite - 1) * (p.population - p.elite);
  while (res.evaluations < budget) {
    const int64_t n = std::min<int64_t>(p.population, budget - res.evaluations);
    std::vector<Candidate> cands;
    for (int64_t i = 0; i < n; ++i) cands.push_back(drawn_inputs(g, seed, l, rng));
    std::vector<Scored> batch(cands.size());
    const bool stop = run_batch(g, seed, l, batch, p, ev, st, &cands);
    ++res.generations;
    res.best_by_generation.push_back(res.best);
    if (stop) break;
  }
  return st.finish(t0);
}

}  // namespace quorum::search
