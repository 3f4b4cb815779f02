// quorum fuzz and quorum replay.
#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <tuple>

#include "backends/refusal.h"
#include "campaign/bundle.h"
#include "campaign/campaign.h"
#include "campaign/learned_refusals.h"
#include "campaign/replay.h"
#include "cli/commands.h"
#include "core/error.h"
#include "ir/build.h"
#include "ir/onnx_io.h"
#include "ops/registry.h"
#include "report/html.h"
#include "store/merge.h"
#include "store/store.h"

namespace quorum::cli {

using core::UserError;

namespace {

// Per backend, over the whole campaign (resumed runs too): the models it ran, refused (by reason) and
// was not sent, its crashes and worker time; then what the campaign learned from the backends'
// structured refusals (docs/findings.md).
void print_backends(const campaign::Summary& s, store::Store& store) {
  const auto counts = store.backend_counts();
  if (counts.empty()) return;
  std::cout << "backends (models of the campaign: ran = sent and not refused; crashed, failed among them):\n";
  for (const auto& c : counts) {
    const store::StoredBackend& b = c.models;
    const int64_t all = b.ran + c.refused + c.not_sent;
    std::cout << "  " << b.backend << ": ran " << b.ran << "/" << all << " (" << std::setprecision(1)
              << (all ? 100.0 * static_cast<double>(b.ran) / static_cast<double>(all) : 0.0) << "%), crashed "
              << b.crashed << ", failed " << b.failed << ", refused " << c.refused << ", not sent " << c.not_sent
              << ", worker " << b.seconds << " s\n";
    std::vector<store::StoredRefusal> rows = c.refusals;
    std::stable_sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) {
      return x.refused + x.not_sent > y.refused + y.not_sent;
    });
    constexpr size_t kShown = 8;
    for (size_t i = 0; i < rows.size() && i < kShown; ++i)
      std::cout << "    " << (rows[i].not_sent ? "refused " + std::to_string(rows[i].refused) + ", not sent " +
                                                   std::to_string(rows[i].not_sent)
                                             : "refused " + std::to_string(rows[i].refused))
                << ": " << rows[i].refusal << " (" << (rows[i].ops.empty() ? "?" : rows[i].ops) << ")\n";
    if (rows.size() > kShown) std::cout << "    ... and " << rows.size() - kShown << " other reasons\n";
  }
  std::vector<store::StoredRefusal> learned;
  for (const auto& r : store.refusals())
    if (campaign::learned_key(r.refusal)) learned.push_back(r);
  if (learned.empty()) return;
  std::cout << learned.size() << " learned refusals (no findings; models holding one are not sent to that backend): "
            << s.not_sent << " models not sent in this run\n";
  std::string ops;
  for (const auto& r : learned) {
    std::cout << "  " << r.backend << " does not run " << r.refusal << ": refused " << r.refused << ", not sent "
              << r.not_sent << " (catalogue operators: " << (r.ops.empty() ? "?" : r.ops) << ")\n";
    // Only a refusal of every form of an operator covers all of its catalogue operators' models.
    const auto parsed = backends::parse_refusal("unsupported: " + r.refusal);
    if (!parsed || !parsed->attr.empty()) continue;
    std::stringstream list(r.ops);
    for (std::string op; std::getline(list, op, ',');)
      if (!op.empty() && ("," + ops + ",").find("," + op + ",") == std::string::npos)
        ops += (ops.empty() ? "" : ",") + op;
  }
  if (!ops.empty())
    std::cout << "  to spend the budget on what the backends run: --skip_ops " << ops
              << " (refusals of one attribute value left out: they cover only some of an operator's models)\n";
}

// "I/N" of --shard (empty: the whole stream, 0/1).
std::pair<int64_t, int64_t> parse_shard(const std::string& v) {
  if (v.empty()) return {0, 1};
  const size_t slash = v.find('/');
  auto number = [&](const std::string& t) -> int64_t {
    if (t.empty() || t.size() > 9 || t.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::stoll(t);
  };
  const int64_t i = slash == std::string::npos ? -1 : number(v.substr(0, slash));
  const int64_t n = slash == std::string::npos ? -1 : number(v.substr(slash + 1));
  if (i < 0 || n < 1 || i >= n) throw UserError("--shard: expected I/N with 0 <= I < N (e.g. 0/4), got '" + v + "'");
  return {i, n};
}

// The campaign's coverage: OLC and its parts, OLC over the models (ten points), each backend's
// functionality coverage with the operators and losses it maps that no model invoked on it.
void print_coverage(const coverage::Coverage& cov) {
  std::cout << "coverage: " << coverage::parts_line(cov.parts()) << "\n";
  const auto curve = coverage::coverage_curve(cov.facts(), cov.options(), 10);
  if (curve.size() > 1) {
    std::cout << "OLC over models:";
    for (const auto& [models, p] : curve)
      std::cout << " " << models << ":" << std::setprecision(1) << 100 * p.olc << "%";
    std::cout << "\n";
  }
  for (const auto& f : cov.functionality()) {
    std::cout << "functionality " << f.backend << ": " << f.invoked << "/" << f.mapped
              << " operators and losses it maps"
              << " invoked (" << std::setprecision(1) << 100 * f.share() << "%)";
    if (!f.uncovered.empty()) {
      std::cout << "; never:";
      for (const auto& u : f.uncovered) std::cout << " " << u;
    }
    std::cout << "\n";
    if (!f.fused.empty()) {
      std::cout << "optimizer " << f.backend << ": " << f.fused.size() << " kinds of fusion or pass seen:";
      for (const auto& [x, models] : f.fused) std::cout << " " << x << " (" << models << " models);";
      std::cout << "\n";
    }
    if (!f.opsets.empty()) {
      std::cout << "exchange forms " << f.backend << ": " << f.forms.size() << " forms read at opsets";
      for (int o : f.opsets) std::cout << " " << o;
      const std::string missing = coverage::missing_opsets(f.opsets, ir::kOnnxMinOpset, ir::kOnnxMaxOpset);
      if (!missing.empty()) std::cout << "; opsets never read: " << missing;
      std::cout << "\n";
    }
  }
}

void print_summary(const campaign::Summary& s, const std::string& out, const std::string& store_spec,
                   const coverage::Coverage& cov) {
  const std::unique_ptr<store::Store> opened = store::open_store(store_spec, out);
  store::Store& store = *opened;
  const auto all = store.findings();
  std::cout << "\nsummary: " << s.models_run << " models in " << std::fixed << std::setprecision(1) << s.seconds
            << " s (" << (s.seconds > 0 ? static_cast<double>(s.models_run) / s.seconds : 0.0) << "/s), "
            << s.models_total << " in this campaign; " << s.invalid_models << " invalid, " << s.errors
            << " internal errors; seed " << s.seed << "\n";
  if (s.invalid_models) std::cout << "first invalid model: " << s.first_invalid << "\n";
  if (s.transfer_variants)
    std::cout << "transfer: " << s.transfer_variants << " ledger variants run (models -1 to -" << s.transfer_variants
              << "), " << s.transfer_new << " findings no ledger entry explains\n";
  if (s.searched)
    std::cout << "search: " << s.searched << " clean models searched, a failure found in " << s.search_found << "\n";
  if (s.workers_recycled)
    std::cout << "workers: " << s.workers_recycled << " recycled (--worker_models / --worker_rss)\n";
  const campaign::Timing& t = s.timing;
  std::cout << "time: generate " << t.generate << " s (and " << t.generate_ahead
            << " s while the previous model ran), reference " << t.reference << " s";
  for (const auto& [b, v] : t.compile) std::cout << ", compile " << b << " " << v << " s";
  for (const auto& [b, v] : t.run) std::cout << ", run " << b << " " << v << " s";
  for (const auto& [b, v] : t.optimized) std::cout << ", optimized " << b << " " << v << " s";
  for (const auto& [b, v] : t.batched) std::cout << ", batch relation " << b << " " << v << " s";
  for (const auto& [b, v] : t.formed) std::cout << ", form relation " << b << " " << v << " s";
  for (const auto& [b, v] : t.positioned) std::cout << ", position relation " << b << " " << v << " s";
  std::cout << ", compare " << t.compare << " s, store " << t.store << " s, reduce " << t.reduce << " s\n";
  const double all_time = t.libraries() + t.overhead() + t.reduce;
  if (t.libraries() > 0)
    std::cout << "time shares: libraries " << t.libraries() << " s, overhead " << t.overhead() << " s ("
              << std::setprecision(2) << t.overhead() / t.libraries() << "x the libraries'), reduction "
              << std::setprecision(1) << (all_time > 0 ? 100 * t.reduce / all_time : 0.0)
              << " % of the campaign's time (on its own thread)\n";
  print_backends(s, store);
  print_coverage(cov);
  if (all.empty()) {
    std::cout << "no findings: every backend agreed with the reference on every model\n";
    return;
  }
  std::cout << all.size() << " unique findings (" << s.new_findings << " new in this run), in "
            << (store_spec.empty() ? out : store.where()) << ":\n";
  for (const auto& f : all)
    std::cout << "  " << std::setw(6) << f.hits << "x  " << core::to_string(f.kind) << " [" << core::to_string(f.stage)
              << "] " << f.backend << " " << f.op << (f.node.empty() ? "" : " at '" + f.node + "'")
              << (f.known.empty() ? "" : "  [known: " + f.known + "]")
              << "\n          replay: " << campaign::replay_command(f.bundle)
              << (f.reduced.empty() ? "" : "\n          reduced: " + f.reduced) << "\n";
  const auto roots = store.root_causes();
  std::cout << roots.size() << " root causes (findings merged by the key of their reduced case):\n";
  for (const auto& r : roots)
    std::cout << "  " << std::setw(6) << r.hits << "x  " << r.signature << "  (" << r.findings << " finding"
              << (r.findings == 1 ? "" : "s") << ")" << (r.reduced.empty() ? "" : "\n          reduced: " + r.reduced)
              << "\n";
}

}  // namespace

campaign::Setup setup_of(const Options& o) {
  campaign::Setup setup;
  setup.backends = campaign::parse_backends(o.backends.empty() ? "torch,onednn" : o.backends);
  setup.mode = campaign::mode_from_string(o.mode);
  bool quantized = false;
  setup.dtype = compute_dtype(o, &quantized);
  if (quantized && setup.mode == campaign::Mode::Train)
    throw UserError("--dtype int8: quantized models run inference only (--mode infer)");
  if (quantized) setup.mode = campaign::Mode::Infer;  // both: the inference half
  setup.threads = static_cast<int>(o.threads);
  setup.loss = o.loss.empty() ? "mse_loss" : o.loss;
  if (!ops::op(setup.loss).is_loss) throw UserError("--loss: operator '" + setup.loss + "' is not a loss");
  setup.learning_rate = o.learning_rate;
  setup.thresholds.T = o.threshold;
  setup.thresholds.eps = o.epsilon;
  if (o.metric != "chebyshev" && o.metric != "relative")
    throw UserError("--metric: expected chebyshev or relative, got '" + o.metric + "'");
  setup.thresholds.relative_metric = o.metric == "relative";
  setup.thresholds.rule = oracle::rule_from_string(o.oracle);
  setup.known = std::make_shared<const oracle::Ledger>(oracle::load_ledgers(oracle::default_ledger_dir()));
  setup.thresholds.dtype = setup.dtype;
  setup.limits = limits_of(o);
  if (o.optimized != "on" && o.optimized != "off")
    throw UserError("--optimized: expected on or off, got '" + o.optimized + "'");
  setup.optimized = o.optimized == "on";
  return setup;
}

campaign::SearchOptions search_options_of(const Options& o, const std::string& method, uint64_t budget) {
  campaign::SearchOptions s;
  s.method = campaign::search_method_from_string(method);
  search::GaParams& p = s.ga;
  p.population = static_cast<int64_t>(o.population);
  p.elite = static_cast<int64_t>(o.elite);
  if (p.population < 2) throw UserError("--population: at least 2");
  if (p.elite < 1 || p.elite >= p.population) throw UserError("--elite: from 1 to --population - 1");
  p.crossover = o.crossover;
  p.mutation = o.ga_mutation;
  p.max_ite = static_cast<int64_t>(o.max_ite);
  if (p.max_ite < 1) throw UserError("--max_ite: at least 1");
  p.cauchy_scale = o.cauchy_scale;
  if (o.ga_operators != "floats" && o.ga_operators != "audee")
    throw UserError("--ga_operators: floats or audee, got '" + o.ga_operators + "'");
  p.float_moves = o.ga_operators == "floats";
  p.budget = static_cast<int64_t>(budget);
  p.level = search::level_from_string(o.level);
  p.fitness = search::fitness_from_string(o.fitness);
  p.stop = search::stop_rule_from_string(o.stop_at);
  if (p.fitness == search::Fitness::Diverge && s.method != campaign::SearchMethod::Diverge)
    throw UserError("--fitness diverge: use --method diverge");
  return s;
}

int cmd_fuzz(const Options& o) {
  if (!o.trained.empty()) return fuzz_trained(o);
  campaign::CampaignOptions opt;
  opt.generator = o.generator;
  opt.setup = setup_of(o);
  if (o.batch_relation != "on" && o.batch_relation != "off")
    throw UserError("--batch_relation: expected on or off, got '" + o.batch_relation + "'");
  opt.setup.batch_relation.on = o.batch_relation == "on";
  if (o.form_relation != "on" && o.form_relation != "off")
    throw UserError("--form_relation: expected on or off, got '" + o.form_relation + "'");
  opt.setup.form_relation.on = o.form_relation == "on";
  if (o.position_relation != "on" && o.position_relation != "off")
    throw UserError("--position_relation: expected on or off, got '" + o.position_relation + "'");
  opt.setup.position_relation.on = o.position_relation == "on";
  opt.rotate_losses = o.loss.empty();  // every loss in turn unless --loss names one
  if (!o.search.empty()) {
    opt.search = search_options_of(o, o.search, o.search_budget);
    if (opt.search.method == campaign::SearchMethod::Random)
      throw UserError("--search: expected ga, diverge or grist (a campaign's own draw is the random baseline)");
    if (o.search_budget == 0) throw UserError("--search_budget: at least 1");
  }
  opt.time_s = o.time;
  opt.models = static_cast<int64_t>(o.models);
  if (opt.time_s == 0 && opt.models == 0) throw UserError("fuzz: give a budget, --time (e.g. 10m) or --models N");
  if (o.jobs == 0) throw UserError("--jobs: at least 1");
  opt.jobs = static_cast<int>(o.jobs);
  opt.seed = o.seed;
  opt.out = o.out.empty() ? "campaign" : o.out;
  opt.store = o.store;
  // A shared store's rows name bundles other machines read: absolute paths.
  if (store::is_postgres_url(opt.store)) opt.out = std::filesystem::absolute(opt.out).lexically_normal().string();
  std::tie(opt.shard, opt.shards) = parse_shard(o.shard);
  opt.command_line = o.command_line;
  opt.reduce_runs = static_cast<int>(o.reduce);
  opt.transfer = o.transfer;
  opt.coverage = std::make_shared<coverage::Coverage>(coverage_options(o));
  const campaign::ModelFactory factory = model_factory(o, &opt);
  const campaign::Summary s = campaign::run_campaign(opt, factory, std::cout);
  print_summary(s, opt.out, opt.store, *opt.coverage);
  if (opt.shards > 1) {
    // Other shards may still be running: the page is written once, when all have finished.
    std::cout << "report: when every shard has finished, quorum report " << opt.out
              << (opt.store.empty() ? "" : " --store '" + opt.store + "'") << "\n";
    return 0;
  }
  // Every bundle's reproducer (BUNDLE/repro/) and the campaign's page.
  const std::string html = opt.out + "/report.html";
  report::write_campaign_report(opt.out, html, opt.store, coverage_options(o));
  std::cout << "report: " << std::filesystem::absolute(html).string() << "\n";
  return 0;
}

int cmd_merge(const Options& o) {
  if (o.positional.empty()) throw UserError("merge: expected the shards' campaign stores (merge A B ... -o C)");
  if (o.output.empty()) throw UserError("merge: -o C names the new campaign directory");
  const store::MergeSummary m = store::merge_campaigns(o.positional, o.output);
  std::cout << "merged " << o.positional.size() << " stores into " << o.output << "/findings.db: " << m.models
            << " models, " << m.findings << " unique findings (" << m.hits << " hits), " << m.root_causes
            << " root causes, " << m.bundles << " bundles\n"
            << "report: quorum report " << o.output << "\n";
  return 0;
}

int cmd_replay(const Options& o) {
  if (o.positional.size() != 1) throw UserError("replay: expected one BUNDLE directory");
  const campaign::Replayed r = campaign::replay(o.positional[0]);
  std::cout << "expected: " << r.expected << "\n";
  if (r.reproduced) {
    std::cout << "reproduced: the same finding appears again\n";
  } else {
    std::cout << "not reproduced";
    if (r.found.empty()) std::cout << ": every backend now agrees with the reference";
    std::cout << "\n";
  }
  for (const auto& f : r.found)
    std::cout << "  found " << f.signature() << (f.signature() == r.expected ? "  (this one)" : "") << "\n    "
              << f.detail << "\n";
  return r.reproduced ? 0 : 1;
}

}  // namespace quorum::cli
