// CRADLE's detection on trained models: the validation set on every backend, the pairs judged by
// src/detect/, each unique inconsistency's most inconsistent input through evaluate().
#include "campaign/trained_detection.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <set>

#include <nlohmann/json.hpp>

#include "campaign/bundle.h"
#include "campaign/reduce_bundle.h"
#include "core/error.h"
#include "core/stats.h"
#include "gen/factories.h"
#include "gen/generator.h"
#include "ir/json_io.h"
#include "ref/interpreter.h"

namespace quorum::campaign {

namespace fs = std::filesystem;
using core::UserError;
using detect::Metric;
using detect::Outputs;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Rows [start, start + rows) of `images` (first dimension), zero rows past its end, as one batch.
core::Tensor slice_rows(const core::Tensor& images, int64_t start, int64_t rows) {
  core::Shape s = images.shape();
  const int64_t n = s[0], row = images.numel() / std::max<int64_t>(n, 1);
  s[0] = rows;
  core::Tensor t(core::DType::F64, s);
  for (int64_t r = 0; r < rows && start + r < n; ++r)
    std::copy(images.f64() + (start + r) * row, images.f64() + (start + r + 1) * row, t.f64() + r * row);
  return t;
}

// Appends the first `rows` rows of a [B, classes] output to `o`.
void append_rows(Outputs& o, const core::Tensor& t, int64_t rows) {
  const core::Tensor d = t.to(core::DType::F64);
  const int64_t classes = d.shape().empty() ? 0 : d.numel() / std::max<int64_t>(d.shape()[0], 1);
  o.classes = classes;
  o.v.insert(o.v.end(), d.f64(), d.f64() + rows * classes);
  o.n += rows;
}

std::string output_name(const ir::Graph& g) {
  if (g.outputs.empty()) throw UserError("model '" + g.name + "' has no output");
  return g.outputs[0];
}

const oracle::BackendRun* run_named(const Evaluation& ev, const std::string& name) {
  for (const auto& r : ev.runs)
    if (name == kReferenceName ? r.is_reference : (!r.is_reference && r.backend == name)) return &r;
  return nullptr;
}

// The output row of a run on a one-input case, or nothing when it did not run.
std::optional<std::vector<double>> output_row(const oracle::BackendRun* r, const std::string& out) {
  if (!r || !r->outcome.ok()) return std::nullopt;
  auto it = r->values.find(out);
  if (it == r->values.end() || !it->second.defined()) return std::nullopt;
  const core::Tensor t = it->second.to(core::DType::F64);
  return std::vector<double>(t.f64(), t.f64() + t.numel());
}

std::string detection_json(const std::string& a, const std::string& b, Metric m, const detect::Thresholds& th,
                           const DetectedCase& c, const DetectOptions& opt, int64_t images) {
  nlohmann::ordered_json j = {{"pair", {a, b}},
                              {"metric", detect::to_string(m)},
                              {"k", th.k},
                              {"class_t", th.class_t},
                              {"mad_t", th.mad_t},
                              {"p", th.p},
                              {"pattern", c.pattern.key()},
                              {"input", c.input},
                              {"label", c.label},
                              {"distance", c.distance},
                              {"images", images},
                              {"model", opt.model_path}};
  return j.dump();
}

}  // namespace

int64_t Detection::inconsistent_pairs() const {
  int64_t n = 0;
  for (const auto& p : pairs) n += (p.by_class.inconsistent || p.by_mad.inconsistent) ? 1 : 0;
  return n;
}

int64_t Detection::label_changes() const {
  int64_t n = 0;
  for (const auto& p : pairs) n += p.label_changes;
  return n;
}

ir::Graph rebatched(const ir::Graph& g, int64_t n) {
  if (g.inputs.empty() || g.inputs[0].type.shape.empty())
    throw UserError("model '" + g.name + "': its first input has no batch dimension");
  ir::Graph b = g;
  const int64_t was = b.inputs[0].type.shape[0];
  if (was == n) return b;
  b.inputs[0].type.shape[0] = n;
  // A target shape that holds the old batch in its first dimension (a zoo model's reshape before its
  // classifier, [batch, features]) holds the new one.
  for (auto& node : b.nodes)
    for (auto& [name, v] : node.attrs)
      if (auto* dims = std::get_if<std::vector<int64_t>>(&v); dims && name == "shape" && !dims->empty() &&
                                                                  (*dims)[0] == was)
        (*dims)[0] = n;
  b.types.clear();
  try {
    ir::validate(b, g.name);
  } catch (const UserError& e) {
    throw UserError("model '" + g.name + "' cannot run with a batch of " + std::to_string(n) + ": " + e.what());
  }
  return b;
}

std::optional<oracle::Finding> detection_finding(const ModelCase& m, const Evaluation& ev, const std::string& a,
                                                 const std::string& b, Metric metric, const detect::Thresholds& th,
                                                 localize::RateMap* map_out) {
  const std::string out = output_name(m.graph);
  const oracle::BackendRun *ra = run_named(ev, a), *rb = run_named(ev, b), *rr = run_named(ev, kReferenceName);
  const auto ya = output_row(ra, out), yb = output_row(rb, out), yr = output_row(rr, out);
  if (!ya || !yb || !yr || ya->size() != yb->size() || ya->empty()) return std::nullopt;
  const int64_t classes = static_cast<int64_t>(ya->size());
  const core::Tensor target = m.target.to(core::DType::F64);
  const int64_t label = core::top1(target.f64(), std::min<int64_t>(classes, target.numel()));
  const double d = metric == Metric::Class ? detect::class_distance(ya->data(), yb->data(), classes, label, th.k)
                                           : detect::mad_distance(ya->data(), yb->data(), classes, label);
  const double threshold = metric == Metric::Class ? th.class_t : th.mad_t;
  if (!(d > threshold) && !std::isnan(d)) return std::nullopt;
  // The library farther from the reference is blamed; against the reference, the library.
  const auto from_reference = [&](const std::vector<double>& y) {
    return y.size() == yr->size() ? core::mean_abs_difference(y.data(), yr->data(), static_cast<int64_t>(y.size())) : 0;
  };
  bool blame_a = from_reference(*ya) >= from_reference(*yb);
  if (a == kReferenceName) blame_a = false;
  if (b == kReferenceName) blame_a = true;
  const oracle::BackendRun* blamed = blame_a ? ra : rb;
  const oracle::BackendRun* other = blame_a ? rb : ra;
  const std::string blamed_name = blame_a ? a : b, other_name = blame_a ? b : a;
  const localize::RateMap map =
      localize::rate_map(m.graph, false, blamed_name, blamed->values, other_name, other->values, rr->values);
  oracle::Finding f;
  f.kind = core::FindingKind::Detection;
  f.stage = core::Stage::Forward;
  f.backend = blamed_name;
  f.against = {other_name};
  f.node = map.first;
  if (const ir::Node* n = m.graph.find_node(map.first)) f.op = n->op;
  for (const auto& mn : map.nodes)
    if (mn.node == map.first) f.rate = mn.rate;
  f.distance = d;
  f.message = std::string(detect::to_string(metric)) + " distance vs " + other_name;
  std::ostringstream s;
  s << detect::to_string(metric) << " distance " << d << " > " << threshold << " between " << blamed_name << " and "
    << other_name << " (label " << label << "; top-1 " << blamed_name << " "
    << core::top1(blamed == ra ? ya->data() : yb->data(), classes) << ", " << other_name << " "
    << core::top1(blamed == ra ? yb->data() : ya->data(), classes)
    << (other_name == kReferenceName ? "" : ", reference " + std::to_string(core::top1(yr->data(), classes))) << ")"
    << (map.first.empty() ? "" : "; prime suspect '" + map.first + "'");
  f.detail = s.str();
  if (map_out) *map_out = map;
  return f;
}

std::optional<oracle::Finding> replay_detection(const ModelCase& m, const Evaluation& ev,
                                                const std::string& detection_json) {
  try {
    const auto j = nlohmann::json::parse(detection_json);
    detect::Thresholds th;
    th.k = j.at("k").get<int>();
    th.class_t = j.at("class_t").get<double>();
    th.mad_t = j.at("mad_t").get<double>();
    const std::string metric = j.at("metric").get<std::string>();
    if (metric != "class" && metric != "MAD") throw UserError("unknown metric '" + metric + "'");
    return detection_finding(m, ev, j.at("pair").at(0).get<std::string>(), j.at("pair").at(1).get<std::string>(),
                             metric == "class" ? Metric::Class : Metric::Mad, th);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(std::string("finding.json: malformed \"detection\": ") + e.what());
  }
}

Detection detect_model(const ir::Graph& g, const data::Validation& v, const DetectOptions& opt, WorkerSet& workers,
                       store::Store* store, int64_t index, std::ostream* log) {
  Detection d;
  d.model = g.name;
  d.images = v.images.shape()[0];
  d.batch = std::max<int64_t>(1, std::min(opt.batch, d.images));
  const ir::Graph gb = rebatched(g, d.batch);
  const std::string in = gb.inputs[0].name, out = output_name(gb);
  const core::DType dtype = opt.setup.dtype;
  const int64_t chunks = (d.images + d.batch - 1) / d.batch;
  std::vector<Outputs> outs;

  // The float64 reference, in-process, on the inputs and weights rounded to the libraries' dtype.
  {
    ir::Graph gr = gb;
    for (auto& [name, w] : gr.initializers) w = w.to(dtype).to(core::DType::F64);
    Outputs o;
    const auto t0 = Clock::now();
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t rows = std::min(d.batch, d.images - c * d.batch);
      const backends::ValueMap x = {{in, slice_rows(v.images, c * d.batch, d.batch).to(dtype).to(core::DType::F64)}};
      append_rows(o, ref::forward(gr, x).at(out), rows);
    }
    d.seconds[kReferenceName] = since(t0);
    d.backends.push_back(kReferenceName);
    outs.push_back(std::move(o));
  }
  // Every library, one compile and one forward call per batch.
  for (size_t i = 0; i < workers.size(); ++i) {
    const std::string name = opt.setup.backends[i].str();
    worker::Worker& w = workers.at(i);
    std::vector<worker::NodeSupport> sup;
    worker::Outcome o = w.supports(gb, false, sup);
    for (const auto& s : sup)
      if (!s.ok && o.ok()) o = {worker::Status::Unsupported, "node '" + s.node + "': " + s.reason, 0, ""};
    auto t0 = Clock::now();
    if (o.ok()) o = w.compile(gb, backends::CompileOptions{dtype, opt.setup.threads});
    d.compile_seconds[name] = since(t0);
    Outputs rows_out;
    t0 = Clock::now();
    for (int64_t c = 0; c < chunks && o.ok(); ++c) {
      const int64_t rows = std::min(d.batch, d.images - c * d.batch);
      backends::ValueMap res;
      o = w.forward({{in, slice_rows(v.images, c * d.batch, d.batch).to(dtype)}}, false, res);
      if (o.ok() && !res.count(out)) o = {worker::Status::QuorumError, "no output '" + out + "' returned", 0, ""};
      if (o.ok()) append_rows(rows_out, res.at(out), rows);
    }
    d.seconds[name] = since(t0);
    if (!o.ok()) {
      d.failed[name] = o.str();
      continue;
    }
    d.backends.push_back(name);
    outs.push_back(std::move(rows_out));
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    int64_t ok = 0;
    for (int64_t r = 0; r < outs[i].n; ++r) ok += core::top1(outs[i].row(r), outs[i].classes) == v.labels[r];
    d.correct[d.backends[i]] = ok;
  }
  for (size_t i = 0; i < outs.size(); ++i)
    for (size_t k = i + 1; k < outs.size(); ++k)
      d.pairs.push_back(detect::compare_pair(d.backends[i], outs[i], d.backends[k], outs[k], v.labels, opt.thresholds));
  d.unique = detect::unique_inconsistencies(d.pairs);

  // Each unique inconsistency on its most inconsistent input, alone; a library that failed, on the
  // first input (its crash goes through the crash rule). Every case is judged by evaluate().
  Setup one = opt.setup;
  one.mode = Mode::Infer;
  std::optional<ir::Graph> g1;  // the model with a batch of 1, made when a case needs it
  std::vector<ModelCase> cases;
  std::vector<Evaluation> evals;
  auto one_case = [&](int64_t input) {
    if (!g1) g1 = rebatched(g, 1);
    ModelCase m;
    m.graph = *g1;
    m.inputs[in] = slice_rows(v.images, input, 1);
    const int64_t classes = outs[0].classes;
    m.target = core::Tensor(core::DType::F64, {1, classes});
    for (int64_t j = 0; j < classes; ++j) m.target.f64()[j] = j == v.labels[input] ? 1.0 : 0.0;
    cases.push_back(m);
    evals.push_back(evaluate(m, one, workers));
  };
  for (const auto& u : d.unique) {
    const detect::PairResult& p = d.pairs[u.pairs[0]];
    const detect::MetricResult& r = detect::metric_of(p, u.pattern.metric);
    DetectedCase c;
    c.pattern = u.pattern;
    c.a = p.a;
    c.b = p.b;
    c.metric = u.pattern.metric;
    c.input = r.worst;
    c.label = v.labels[r.worst];
    c.distance = r.distance[r.worst];
    for (size_t i = 0; i < outs.size(); ++i)
      c.top1[d.backends[i]] = core::top1(outs[i].row(r.worst), outs[i].classes);
    one_case(c.input);
    c.verdicts = evals.back().findings;
    c.finding = detection_finding(cases.back(), evals.back(), c.a, c.b, c.metric, opt.thresholds, &c.map);
    if (!c.finding) c.note = "the input alone (batch 1) no longer triggers: the difference depends on the batch";
    d.cases.push_back(std::move(c));
  }
  if (!d.failed.empty()) one_case(0);

  // Findings: each case's detection finding, then its per-node verdicts; a failure's crash findings.
  struct Item {
    oracle::Finding f;
    size_t at;  // its case
    std::string detection;
  };
  std::vector<Item> items;
  for (size_t k = 0; k < evals.size(); ++k) {
    if (k < d.cases.size() && d.cases[k].finding)
      items.push_back({*d.cases[k].finding, k,
                       detection_json(d.cases[k].a, d.cases[k].b, d.cases[k].metric, opt.thresholds, d.cases[k], opt,
                                      d.images)});
    for (const auto& f : evals[k].findings) items.push_back({f, k, ""});
  }
  std::vector<oracle::Finding> findings;
  for (const auto& it : items) findings.push_back(it.f);
  d.findings = findings;
  if (store) {
    std::vector<std::pair<std::string, std::string>> fresh;  // signature, bundle of new per-node findings
    store->record(index, findings, [&](const oracle::Finding& f) {
      const std::string sig = f.signature();
      const Item& it = *std::find_if(items.begin(), items.end(), [&](const Item& x) { return x.f.signature() == sig; });
      BundleContext ctx{cases[it.at], evals[it.at], one, opt.seed, index, opt.command_line, opt.versions,
                        opt.origin, "detect"};
      ctx.detection = it.detection;
      const std::string path = write_bundle(opt.out, f, ctx);
      if (f.kind == core::FindingKind::Detection) d.cases[it.at].bundle = path;
      else fresh.emplace_back(sig, path);
      return path;
    });
    // A per-node verdict is reduced as a campaign's finding is.
    for (const auto& [sig, path] : fresh) {
      if (opt.reduce_runs <= 0) break;
      try {
        const BundleReduction r = reduce_bundle(path, opt.reduce_runs, nullptr, &workers);
        store->set_root_cause(sig, r.root_cause, r.reduced_dir);
        if (!r.reduced_dir.empty())
          for (size_t k = 0; k < items.size(); ++k)
            if (items[k].f.signature() == sig && items[k].at < d.cases.size()) {
              auto& reduced = d.cases[items[k].at].reduced;
              const std::string line = sig + " -> " + r.reduced_dir;
              if (std::find(reduced.begin(), reduced.end(), line) == reduced.end()) reduced.push_back(line);
            }
      } catch (const core::SystemError&) {
        throw;
      } catch (const std::exception& e) {
        if (log) *log << "reduce " << path << ": " << e.what() << "\n";
      }
    }
  }
  return d;
}

void print_detection(const Detection& d, std::ostream& os) {
  os << "model " << d.model << ": " << d.images << " images, batches of " << d.batch << "\n";
  for (const auto& name : d.backends) {
    const double s = d.seconds.count(name) ? d.seconds.at(name) : 0;
    os << "  " << std::left << std::setw(24) << name << std::right << " accuracy " << std::fixed
       << std::setprecision(1) << 100.0 * static_cast<double>(d.correct.at(name)) / static_cast<double>(d.images)
       << " %, " << std::setprecision(2) << s * 1000.0 / static_cast<double>(d.images) << " s per 1000 images";
    if (d.compile_seconds.count(name)) os << " (compile " << d.compile_seconds.at(name) << " s)";
    os << "\n";
  }
  os.unsetf(std::ios::floatfield);
  for (const auto& [name, why] : d.failed) os << "  " << name << ": no outputs: " << why << "\n";
  // A library that gave no outputs, judged on the first image (the crash rule).
  for (const auto& f : d.findings)
    if (d.failed.count(f.backend))
      os << "  finding: " << core::to_string(f.kind) << " [" << core::to_string(f.stage) << "] " << f.backend << " "
         << f.op << ": " << f.detail << "\n";
  os << "pairs (class: inputs with D_class > T_C; MAD: D_MAD > T_M; label changes):\n";
  for (const auto& p : d.pairs)
    os << "  " << p.a << " vs " << p.b << ": class " << p.by_class.triggering
       << (p.by_class.inconsistent ? " INCONSISTENT" : "") << ", MAD " << p.by_mad.triggering
       << (p.by_mad.inconsistent ? " INCONSISTENT" : "") << ", label changes " << p.label_changes
       << " (largest D_class " << (p.by_class.worst < 0 ? 0.0 : p.by_class.distance[p.by_class.worst]) << ", D_MAD "
       << (p.by_mad.worst < 0 ? 0.0 : p.by_mad.distance[p.by_mad.worst]) << ")\n";
  os << "inconsistent pairs: " << d.inconsistent_pairs() << " of " << d.pairs.size()
     << "; unique inconsistencies: " << d.unique.size() << "; label changes: " << d.label_changes() << "\n";
  for (size_t k = 0; k < d.cases.size(); ++k) {
    const DetectedCase& c = d.cases[k];
    const detect::Unique& u = d.unique[k];
    os << "unique " << k + 1 << ": " << c.pattern.key() << " (" << u.pairs.size() << " pair"
       << (u.pairs.size() == 1 ? "" : "s") << ", first " << c.a << " vs " << c.b << ")\n";
    os << "  most inconsistent input #" << c.input << " (label " << c.label << "), distance " << c.distance
       << "; top-1:";
    for (const auto& [b, t] : c.top1) os << " " << b << " " << t;
    os << "\n";
    if (c.finding) os << "  " << c.finding->detail << "\n";
    if (!c.note.empty()) os << "  " << c.note << "\n";
    if (!c.map.nodes.empty()) {
      os << "  localization map (" << c.map.blamed << " vs " << c.map.other << "):";
      for (const auto& n : c.map.nodes)
        if (n.judged) os << " " << n.node << (n.highlighted ? "*" : "") << "=" << n.delta;
      os << "\n";
    }
    os << "  per-node verdicts: " << (c.verdicts.empty() ? "none (every node within its tolerance)" : "") << "\n";
    for (const auto& f : c.verdicts)
      os << "    " << core::to_string(f.kind) << " [" << core::to_string(f.stage) << "] " << f.backend << " "
         << f.op << (f.node.empty() ? "" : " at '" + f.node + "'") << ": " << f.detail << "\n";
    for (const auto& r : c.reduced) os << "  reduced: " << r << "\n";
    if (!c.bundle.empty()) os << "  bundle: " << c.bundle << "\n  replay: " << replay_command(c.bundle) << "\n";
  }
}

std::vector<std::string> trained_models(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (fs::exists(fs::path(dir) / "model.json", ec)) return {(fs::path(dir) / "model.json").string()};
  if (fs::is_directory(dir, ec))
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.is_directory() && fs::exists(e.path() / "model.json")) out.push_back((e.path() / "model.json").string());
  std::sort(out.begin(), out.end());
  if (out.empty()) throw UserError("--trained " + dir + ": no DIR/model.json nor DIR/*/model.json");
  return out;
}

int64_t run_trained_campaign(const TrainedCampaign& tc, const DetectOptions& opt_in, std::ostream& log) {
  const std::vector<std::string> paths = trained_models(tc.dir);
  if (tc.data != "fashion-mnist")
    throw UserError("--dataset " + tc.data + ": detection runs on fashion-mnist (the trained models' data)");
  DetectOptions opt = opt_in;
  const std::unique_ptr<store::Store> store = store::open_store(tc.store, opt.out);
  clean_partial_bundles(opt.out);
  uint64_t seed = opt.seed;
  if (seed == 0) {
    const auto stored = store->setting("seed");
    seed = stored ? std::stoull(*stored) : core::Rng::resolve_seed(0);
  }
  opt.seed = seed;
  std::string backends;
  for (const auto& b : opt.setup.backends) backends += (backends.empty() ? "" : ",") + b.str();
  store->check_settings({{"seed", std::to_string(seed)},
                         {"generator", "zoo --trained " + tc.dir},
                         {"backends", backends},
                         {"mode", "detect"},
                         {"dtype", core::to_string(opt.setup.dtype)},
                         {"loss", ""}});
  log << "seed: " << seed << "\n";
  WorkerSet workers(opt.setup.backends, opt.setup.limits);
  const int64_t count = static_cast<int64_t>(paths.size());
  const int64_t total = tc.models > 0 ? tc.models : count;
  const auto start = Clock::now();
  int64_t ran = 0;
  std::map<core::Shape, data::Validation> sets;
  for (int64_t i = 0; i < total; ++i) {
    if (tc.time_s > 0 && since(start) >= tc.time_s) break;
    if (store->model_done(i)) continue;
    const std::string& path = paths[static_cast<size_t>(i % count)];
    ir::Graph g = ir::load_graph(path);
    opt.model_path = path;
    opt.origin.clear();
    if (i >= count) {
      core::Rng rng = gen::model_rng(seed, static_cast<uint64_t>(i));
      gen::mutate_weights(g, rng, tc.mutation_rate);
      g.name += "_weights_mutant_" + std::to_string(i);
      opt.origin = "trained model " + path + " with its weights mutated (rate " + std::to_string(tc.mutation_rate) +
                   ", seed " + std::to_string(seed) + ", model index " + std::to_string(i) + ")";
    }
    const core::Shape& shape = g.inputs.at(0).type.shape;
    auto it = sets.find(shape);
    if (it == sets.end())
      it = sets.emplace(shape, data::fashion_mnist_validation(data::fashion_mnist_dir(), tc.images, shape)).first;
    const Detection d = detect_model(g, it->second, opt, workers, store.get(), i, &log);
    ++ran;
    if (!tc.quiet) {
      log << "model " << i << " (" << g.name << "): inconsistent pairs " << d.inconsistent_pairs() << " of "
          << d.pairs.size() << ", unique " << d.unique.size() << ", label changes " << d.label_changes();
      for (const auto& c : d.cases)
        if (!c.bundle.empty())
          log << "\n  new detection: " << c.finding->detail << "\n  replay: " << replay_command(c.bundle);
      log << "\n";
    }
  }
  return ran;
}

}  // namespace quorum::campaign
