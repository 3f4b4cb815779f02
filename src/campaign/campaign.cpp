// The campaign loop.
#include "campaign/campaign.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "campaign/bundle.h"
#include "campaign/coverage.h"
#include "campaign/fresh_findings.h"
#include "campaign/model_rows.h"
#include "campaign/run_counts.h"
#include "campaign/transfer.h"
#include "core/error.h"
#include "core/memory.h"
#include "data/values.h"
#include "gen/generator.h"
#include "store/store.h"

namespace quorum::campaign {

using Clock = std::chrono::steady_clock;

ModelCase draw_case(const ModelFactory& factory, uint64_t seed, int64_t index, const std::string& loss,
                    std::string* chosen) {
  core::Rng model_rng = gen::model_rng(seed, static_cast<uint64_t>(index));
  ModelCase m = factory(index, model_rng);
  core::Rng data_rng = gen::case_rng(seed, static_cast<uint64_t>(index));
  // Streams of their own (derive does not advance data_rng): a model without extreme values, trained
  // with the loss given, keeps the inputs and target it had before either existed.
  const std::string l = loss.empty() ? choose_loss(m.graph, data_rng.derive("loss")) : loss;
  complete_case(m, l, data_rng);
  if (chosen) *chosen = l;
  data::place_extreme_values(m.graph, m.inputs, data_rng.derive("extreme-values"));
  return m;
}

namespace {

// One campaign's run: its jobs draw model indices from `next`, evaluate them on their own workers,
// record and reduce what is new, and share the counts in `sh`.
class Run {
 public:
  Run(const CampaignOptions& opt, const ModelFactory& factory, std::ostream& log, store::Store& store, uint64_t seed,
      std::map<std::string, std::string> versions, std::shared_ptr<coverage::Coverage> coverage)
      : opt_(opt),
        setup_(opt.setup),
        factory_(factory),
        log_(log),
        store_(store),
        seed_(seed),
        versions_(std::move(versions)),
        cov_(std::move(coverage)),
        hits_(store) {
    // The refusals this campaign learned before (a resumed --out), then those it learns now.
    setup_.refusals = std::make_shared<LearnedRefusals>();
    for (const store::StoredRefusal& r : store_.refusals())
      if (auto parsed = learned_key(r.refusal) ? backends::parse_refusal("unsupported: " + r.refusal) : std::nullopt)
        setup_.refusals->learn(r.backend, *parsed);
    std::vector<FreshFinding> left;
    for (const store::StoredFinding& f : store_.findings()) {
      hits_.stored(f.signature);
      // A finding an earlier run recorded but did not reduce (it stopped first): reduced now.
      if (opt_.reduce_runs > 0 && f.root_cause.empty() && !f.bundle.empty())
        left.push_back({f.signature, f.bundle, f.known, "reduced (left by an earlier run): " + f.signature});
    }
    queue_.push(left);
  }

  // The background reducer (docs/ARCHITECTURE.md, "Where the time goes"): the new findings the jobs
  // hand over, reduced one after another on workers of its own, so that a long reduction never
  // stalls the models after it; until close_reducer() and the queue is empty. A generator that
  // learns from each model's new root causes (CampaignOptions::on_model) needs them before its next
  // model, so there each job reduces its own findings at once and this thread only takes what an
  // earlier run left unreduced.
  void reducer() {
    try {
      std::unique_ptr<WorkerSet> workers;
      for (;;) {
        std::optional<FreshFinding> f = queue_.pop();
        if (!f || stopped_) break;
        if (!workers) workers = std::make_unique<WorkerSet>(setup_.backends, setup_.limits);
        Timing t;
        std::vector<FreshFinding> one{std::move(*f)};
        const std::vector<std::string> roots = reduce_fresh(one, reduction(), store_, *workers, t);
        std::lock_guard<std::mutex> lock(sh_.mu);
        for (const auto& r : roots) sh_.roots.insert(r);
        sh_.timing.add(t);
        if (!opt_.quiet) log_ << one[0].line << "\n";
      }
      if (workers) {
        std::lock_guard<std::mutex> lock(sh_.mu);
        for (size_t i = 0; i < workers->size(); ++i) sh_.recycled += workers->at(i).recycles();
      }
    } catch (const core::SystemError&) {
      std::lock_guard<std::mutex> lock(sh_.mu);
      if (!system_error_) system_error_ = std::current_exception();
      stopped_ = true;
    }
  }

  // No more findings will be handed over: the reducer finishes the queue and returns.
  void close_reducer() { queue_.close(); }

  // Writes the batched hits (after the jobs end, before the summary).
  void flush_hits() { hits_.flush(); }

  // One job: models until the budget is spent, or until the machine refuses (a full disk, no fork):
  // then every job stops and run_campaign throws that SystemError.
  // A job claims its next model and draws it on a thread of its own while its current model runs on the
  // libraries (the draw asks the share policy's workers, not this job's), so generation waits only when
  // the draw takes longer than the run. Model i is the same whoever draws it and when (draw_case), except
  // with a generator that learns from the models' outcomes (on_model: mcts), which draws after the last.
  void job() {
    try {
      WorkerSet workers(setup_.backends, setup_.limits);
      int64_t index = claim();
      std::future<Drawn> drawing;
      if (index >= 0) drawing = std::async(std::launch::deferred, [this, index] { return draw(index); });
      while (index >= 0 && !stopped_) {
        const auto t0 = Clock::now();
        Drawn drawn = drawing.get();
        drawn.waited = std::chrono::duration<double>(Clock::now() - t0).count();
        const int64_t following = claim();
        if (following >= 0)
          drawing = std::async(opt_.on_model ? std::launch::deferred : std::launch::async,
                               [this, following] { return draw(following); });
        model(workers, index, std::move(drawn));
        index = following;
      }
      std::lock_guard<std::mutex> lock(sh_.mu);
      for (size_t i = 0; i < workers.size(); ++i) sh_.recycled += workers.at(i).recycles();
    } catch (const core::SystemError&) {
      std::lock_guard<std::mutex> lock(sh_.mu);
      if (!system_error_) system_error_ = std::current_exception();
      stopped_ = true;
    }
  }

  // The first SystemError a job met, if any.
  std::exception_ptr system_error() {
    std::lock_guard<std::mutex> lock(sh_.mu);
    return system_error_;
  }

  // The progress line, once a second until `done`; the heap's free pages returned to the system every
  // kReleaseEvery (core::release_free_memory). The large tensors of a model's working set are unmapped
  // when freed (core::map_large_blocks at the campaign's start); this trims the small blocks' free pages.
  static constexpr std::chrono::seconds kReleaseEvery{30};
  void progress(const std::atomic<bool>& done, int64_t already) {
    auto last = Clock::now(), released = last;
    while (!done) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (Clock::now() - released >= kReleaseEvery) {
        core::release_free_memory();
        released = Clock::now();
      }
      if (done || opt_.quiet || Clock::now() - last < std::chrono::seconds(1)) continue;
      last = Clock::now();
      std::lock_guard<std::mutex> lock(sh_.mu);
      sh_.progress_line(log_, std::chrono::duration<double>(last - start_).count(), setup_, opt_.reduce_runs > 0,
                        already > 0, cov_->parts().olc);
    }
  }

  Summary summary() {
    Summary s;
    {
      std::lock_guard<std::mutex> lock(sh_.mu);
      s = sh_.summary();
    }
    s.seed = seed_;
    s.models_total = store_.models_done();
    s.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    s.coverage = cov_->parts();
    return s;
  }

 private:
  bool out_of_budget(int64_t index) const {
    if (opt_.models > 0 && index >= opt_.models) return true;
    if (opt_.time_s > 0 && std::chrono::duration<double>(Clock::now() - start_).count() >= opt_.time_s) return true;
    return false;
  }

  // The next model index of this shard not done yet, or -1 at the end of the budget.
  int64_t claim() {
    while (!stopped_) {
      const int64_t index = opt_.shard + opt_.shards * next_++;
      if (out_of_budget(index)) return -1;
      if (!store_.model_done(index)) return index;
    }
    return -1;
  }

  // A drawn model: its case and loss, or why it is invalid; how long the draw took and how long the job
  // waited for it.
  struct Drawn {
    ModelCase m;
    std::string loss;
    std::optional<std::string> invalid;
    double seconds = 0, waited = 0;
  };

  Drawn draw(int64_t index) const {
    const auto t0 = Clock::now();
    Drawn d;
    try {
      d.m = draw_case(factory_, seed_, index, opt_.rotate_losses ? "" : setup_.loss, &d.loss);
    } catch (const std::exception& e) {
      d.invalid = e.what();
    }
    d.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return d;
  }

  // Model `index`: drawn, evaluated, its new findings bundled and reduced, the counts shared.
  void model(WorkerSet& workers, int64_t index, Drawn drawn) {
    Timing t;
    auto t0 = Clock::now();
    Setup setup = setup_;  // with the model's own loss (the rotation)
    if (drawn.invalid) {
      std::lock_guard<std::mutex> lock(sh_.mu);
      if (++sh_.invalid == 1) sh_.first_invalid = *drawn.invalid;
      store_.record(index, {}, nullptr);
      return;
    }
    ModelCase m = std::move(drawn.m);
    setup.loss = drawn.loss;
    // On the hot path: the wait for the draw. The draw's own time overlapped the previous model's run.
    t.generate += drawn.waited;
    t.generate_ahead += std::max(0.0, drawn.seconds - drawn.waited);
    try {
      Evaluation ev = evaluate(m, setup, workers, &t);
      ModelRows rows;
      const BackendRows backend = backend_rows(setup_, m, ev, index, t, rows);
      if (backend.refused) {
        std::lock_guard<std::mutex> lock(sh_.mu);
        sh_.refused += backend.refused;
      }
      // A model that ran clean: the search (--search) from its inputs and weights, on these workers.
      std::string method;
      bool searched = false, search_found = false;
      if (ev.findings.empty() && opt_.search.method != SearchMethod::None) {
        core::Rng rng = gen::case_rng(seed_, static_cast<uint64_t>(index)).derive("search");
        Searched found = search_case(m, opt_.search, setup, workers, rng, &t);
        searched = true;
        if (found.result.found) {
          // A failure of the search's own oracles (a crash the verdicts do not hold; its nan and label checks
          // fire only without the reference, which a campaign always runs) is recorded as `quorum search`
          // records it.
          if (found.evaluation.findings.empty()) found.evaluation.findings.push_back(search_finding(found));
          search_found = true;
          method = to_string(opt_.search.method);
          m = std::move(found.model);
          ev = std::move(found.evaluation);
        }
      }
      t0 = Clock::now();
      // Coverage first: a model interrupted before its record below is redone, its facts kept.
      rows.facts = cov_->add(run_facts(m, ev, setup.loss, index));
      std::vector<FreshFinding> fresh;
      int count = 0;
      if (!hits_.add(ev, index, rows)) {
        write_rows(store_, rows);
        count = record(m, ev, index, fresh, &setup, "", method);
      }
      t.store += std::chrono::duration<double>(Clock::now() - t0).count();
      std::vector<std::string> new_roots;
      if (reduce_in_background()) hand_over(fresh);
      else if (!fresh.empty()) new_roots = reduce_fresh(fresh, reduction(), store_, workers, t);
      std::lock_guard<std::mutex> lock(sh_.mu);
      if (opt_.on_model) {  // a root cause new to this run (with --reduce 0: a new finding)
        bool found = opt_.reduce_runs <= 0 && count > 0;
        for (const auto& r : new_roots) found = found || !sh_.roots.count(r);
        opt_.on_model(index, found);
      }
      sh_.tally(ev, count, new_roots, t);
      ++sh_.models_run;
      sh_.searched += searched ? 1 : 0;
      sh_.search_found += search_found ? 1 : 0;
      for (const auto& r : ev.runs)
        if (r.outcome.status == worker::Status::QuorumError || r.outcome.status == worker::Status::ProtocolError) {
          // Quorum's own failure inside a worker: counted and shown like any internal error.
          if (++sh_.errors <= 5 && !opt_.quiet)
            log_ << "model " << index << ": internal error: " << r.backend << ": " << r.outcome.str() << "\n";
        }
      sh_.not_sent += static_cast<int64_t>(ev.not_sent.size());
      if (!opt_.quiet)
        for (const auto& l : backend.learned) log_ << l << "\n";
      if (!opt_.quiet)
        for (const auto& f : fresh) log_ << f.line << "\n";
    } catch (const core::SystemError&) {
      throw;  // the campaign stops (job)
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(sh_.mu);
      // A Quorum bug, not a library's: shown (the first few), counted, and the model is retried on resume.
      if (!opt_.quiet && ++sh_.errors <= 5) log_ << "model " << index << ": internal error: " << e.what() << "\n";
    }
  }

 public:
  // Known-bug transfer (CampaignOptions::transfer) before the generated models: every variant of
  // every ledger case (transfer.h) is a model of its own, variant k model index -1 - k, recorded and
  // reduced like a generated one, its bundles naming the entry it came from. Skipped on a resume for
  // the variants already done.
  void transfer() {
    if (!setup_.known) return;
    TransferOptions t;
    t.backends = setup_.backends;
    t.limits = setup_.limits;
    t.seed = seed_;
    WorkerSet workers(setup_.backends, setup_.limits);  // the variants' and the reducer's
    int64_t k = 0;
    transfer_known(*setup_.known, t, workers, [&](const TransferVariant& v) {
      const int64_t index = -1 - k++;
      if (!v.skipped.empty() || store_.model_done(index)) return;
      Timing tm;
      std::vector<FreshFinding> fresh;
      const int count = record(v.model, v.evaluation, index, fresh, &v.setup, v.origin());
      const std::vector<std::string> new_roots = reduce_fresh(fresh, reduction(), store_, workers, tm);
      std::lock_guard<std::mutex> lock(sh_.mu);
      sh_.tally(v.evaluation, count, new_roots, tm);
      ++sh_.transfer_variants;
      sh_.transfer_new += static_cast<int64_t>(v.fresh.size());
      if (!opt_.quiet)
        for (const auto& f : fresh)
          if (f.known.empty()) log_ << f.line << "\n";
    });
  }

 private:
  // Whether the background reducer reduces the jobs' new findings (else each job its own, at once).
  bool reduce_in_background() const { return opt_.reduce_runs > 0 && !opt_.on_model; }

  // New findings to the background reducer, which logs each line once it is reduced.
  void hand_over(std::vector<FreshFinding>& fresh) { queue_.push(fresh); }

  // Records the model's findings in the store; each new one gets a bundle (listed in `fresh`).
  // Returns how many were new.
  // `setup` and `origin`: the model's own when it is not the campaign's generated model (a transfer variant).
  // `method`: the search that found the case (empty: the model's own random draw).
  int record(const ModelCase& m, const Evaluation& ev, int64_t index, std::vector<FreshFinding>& fresh,
             const Setup* setup = nullptr, const std::string& origin = "", const std::string& method = "") {
    BundleContext ctx{m,         ev,        setup ? *setup : setup_, seed_, index, opt_.command_line,
                      versions_, origin,    method};
    ctx.defer_layout = reduce_in_background();
    const int count = store_.record(index, ev.findings, [&](const oracle::Finding& f) {
      const std::string path = write_bundle(opt_.out, f, ctx);
      fresh.push_back(fresh_finding(f, path, origin, method));
      return path;
    });
    hits_.stored(ev.findings);
    return count;
  }

  // How the new findings are reduced (reduce_fresh).
  FreshReduction reduction() { return {opt_.reduce_runs, setup_.known.get(), hang_timeout()}; }

  // The time limit of each run while reducing a hang: kHangFactor times the slowest library's mean
  // compile-and-run time per model so far (at least kMinHangLimit seconds, at most the worker
  // timeout); 0 (the bundle's own limit) before kHangMeanOver models have run.
  static constexpr double kHangFactor = 50, kMinHangLimit = 2;
  static constexpr int64_t kHangMeanOver = 20;
  double hang_timeout() {
    std::lock_guard<std::mutex> lock(sh_.mu);
    if (sh_.models_run < kHangMeanOver) return 0;
    double slowest = 0;
    for (const auto& [b, run] : sh_.timing.run) {
      const auto c = sh_.timing.compile.find(b);
      slowest = std::max(slowest, run + (c == sh_.timing.compile.end() ? 0 : c->second));
    }
    const double limit = std::max(kMinHangLimit, kHangFactor * slowest / static_cast<double>(sh_.models_run));
    return std::min(limit, setup_.limits.timeout_s);
  }

  const CampaignOptions& opt_;
  Setup setup_;  // opt_.setup with the campaign's learned refusals
  const ModelFactory& factory_;
  std::ostream& log_;
  store::Store& store_;
  const uint64_t seed_;
  const std::map<std::string, std::string> versions_;
  const std::shared_ptr<coverage::Coverage> cov_;
  const Clock::time_point start_ = Clock::now();
  std::atomic<int64_t> next_{0};
  std::atomic<bool> stopped_{false};
  std::exception_ptr system_error_;  // under sh_.mu
  RunCounts sh_;
  FreshQueue queue_;  // the background reducer's
  HitBatch hits_;  // the batched models that show nothing new
};

// The seed (given, or the one this --out already used, or a fresh one), checked with the other
// settings against what the store already holds.
uint64_t open_settings(store::Store& store, const CampaignOptions& opt) {
  uint64_t seed = opt.seed;
  if (seed == 0) {
    const auto stored = store.setting("seed");
    // Shards choosing seeds of their own would each draw other models.
    if (!stored && opt.shards > 1)
      throw core::UserError("--shard: give every shard the same --seed (this store holds no campaign yet)");
    seed = stored ? std::stoull(*stored) : core::Rng::resolve_seed(0);
  }
  std::string backends;
  for (const auto& b : opt.setup.backends) backends += (backends.empty() ? "" : ",") + b.str();
  std::map<std::string, std::string> settings = {
      {"seed", std::to_string(seed)},
      {"generator", opt.generator},
      {"backends", backends},
      {"mode", to_string(opt.setup.mode)},
      {"dtype", core::to_string(opt.setup.dtype)},
      {"optimized", opt.setup.optimized ? "on" : "off"},
      {"batch_relation", opt.setup.batch_relation.on ? "on" : "off"},
      {"form_relation", opt.setup.form_relation.on ? "on" : "off"},
      {"position_relation", opt.setup.position_relation.on ? "on" : "off"},
      {"loss", opt.rotate_losses ? std::string("every") : opt.setup.loss}};
  settings.insert(opt.draw_settings.begin(), opt.draw_settings.end());
  store.check_settings(settings);
  return seed;
}

// Library versions, for the bundles (and to fail early on a broken backend); on the same workers, the
// operators each backend maps when the store does not hold them yet (coverage).
std::map<std::string, std::string> library_versions(const CampaignOptions& opt, std::ostream& log, store::Store& store,
                                                    coverage::Coverage& cov) {
  std::map<std::string, std::string> versions;
  WorkerSet probe(opt.setup.backends, opt.setup.limits);
  for (size_t i = 0; i < probe.size(); ++i) {
    worker::BackendInfo info;
    const worker::Outcome o = probe.at(i).hello(info);
    // A worker that refused its options (a backend spec's bad option or value): bad input, said before any
    // model runs.
    if (const std::string why = worker::refused_options(o); !why.empty())
      throw core::UserError("--backends " + opt.setup.backends[i].str() + ": " + why);
    versions[opt.setup.backends[i].str()] = o.ok() ? info.version : "unavailable: " + o.str();
    log << "backend " << opt.setup.backends[i].str() << ": " << versions[opt.setup.backends[i].str()] << "\n";
  }
  open_coverage(store, cov, opt.setup.backends, probe);
  return versions;
}

}  // namespace

Summary run_campaign(const CampaignOptions& opt, const ModelFactory& factory, std::ostream& log) {
  if (opt.shards < 1 || opt.shard < 0 || opt.shard >= opt.shards)
    throw core::UserError("--shard: expected I/N with 0 <= I < N, got " + std::to_string(opt.shard) + "/" +
                          std::to_string(opt.shards));
  const std::unique_ptr<store::Store> store = store::open_store(opt.store, opt.out);
  clean_partial_bundles(opt.out);
  const uint64_t seed = open_settings(*store, opt);
  if (opt.on_seed) opt.on_seed(seed);
  const int64_t already = store->models_done();
  log << "seed: " << seed << "\n";
  if (opt.shards > 1)
    log << "shard " << opt.shard << "/" << opt.shards << ": model indices i with i % " << opt.shards
        << " == " << opt.shard << "\n";
  if (already) log << "resuming: " << already << " models already done in " << store->where() << "\n";
  const std::shared_ptr<coverage::Coverage> cov = opt.coverage ? opt.coverage : std::make_shared<coverage::Coverage>();
  std::map<std::string, std::string> versions = library_versions(opt, log, *store, *cov);
  if (already) log << "coverage: " << coverage::parts_line(cov->parts()) << "\n";
  core::map_large_blocks();  // every model's large tensors unmapped when freed: the heap stays bounded
  Run run(opt, factory, log, *store, seed, std::move(versions), cov);
  if (opt.transfer && opt.shard == 0) run.transfer();  // once per campaign: by its first shard
  std::thread reducer([&run] { run.reducer(); });
  std::vector<std::thread> threads;
  for (int j = 0; j < std::max(1, opt.jobs); ++j) threads.emplace_back([&run] { run.job(); });
  std::atomic<bool> done{false};
  std::thread progress([&] { run.progress(done, already); });
  for (auto& t : threads) t.join();
  run.close_reducer();
  reducer.join();
  done = true;
  progress.join();
  if (!run.system_error()) run.flush_hits();
  if (const std::exception_ptr e = run.system_error()) {
    try {
      std::rethrow_exception(e);
    } catch (const core::SystemError& w) {
      throw core::SystemError(std::string(w.what()) + "; the campaign stopped, every finding recorded before is in " +
                             opt.out + "/findings.db");
    }
  }
  return run.summary();
}

}  // namespace quorum::campaign
