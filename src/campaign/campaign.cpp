// The campaign loop.
#include "campaign/campaign.h"

#include <set>

#include "campaign/reduce_bundle.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "campaign/bundle.h"
#include "campaign/store.h"
#include "core/error.h"
#include "gen/generator.h"

namespace quorum::campaign {

using Clock = std::chrono::steady_clock;

ModelCase draw_case(const ModelFactory& factory, uint64_t seed, int64_t index, const std::string& loss) {
  core::Rng model_rng = gen::model_rng(seed, static_cast<uint64_t>(index));
  ModelCase m = factory(index, model_rng);
  core::Rng data_rng = gen::case_rng(seed, static_cast<uint64_t>(index));
  complete_case(m, loss, data_rng);
  return m;
}

namespace {

struct Shared {
  std::mutex mu;
  std::map<core::FindingKind, int64_t> by_kind;  // hits per finding kind
  int64_t models_run = 0, invalid = 0, errors = 0, new_findings = 0, hits = 0;
  std::string first_invalid;
  Timing timing;
  std::set<std::string> roots;  // root causes of the findings new in this run
};

}  // namespace

Summary run_campaign(const CampaignOptions& opt, const ModelFactory& factory, std::ostream& log) {
  Store store(opt.out);
  clean_partial_bundles(opt.out);
  // The seed: given, or the one this --out already used, or a fresh one.
  uint64_t seed = opt.seed;
  if (seed == 0) {
    const auto stored = store.setting("seed");
    seed = stored ? std::stoull(*stored) : core::Rng::resolve_seed(0);
  }
  store.check_settings({{"seed", std::to_string(seed)},
                        {"generator", opt.generator},
                        {"backends", [&] {
                           std::string s;
                           for (const auto& b : opt.setup.backends) s += (s.empty() ? "" : ",") + b.str();
                           return s;
                         }()},
                        {"mode", to_string(opt.setup.mode)},
                        {"dtype", core::to_string(opt.setup.dtype)},
                        {"loss", opt.setup.loss}});
  const int64_t already = store.models_done();
  log << "seed: " << seed << "\n";
  if (already) log << "resuming: " << already << " models already done in " << opt.out << "\n";

  // Library versions, for the bundles (and to fail early on a broken backend).
  std::map<std::string, std::string> versions;
  {
    WorkerSet probe(opt.setup.backends, opt.setup.limits);
    for (size_t i = 0; i < probe.size(); ++i) {
      worker::BackendInfo info;
      const worker::Outcome o = probe.at(i).hello(info);
      versions[opt.setup.backends[i].str()] = o.ok() ? info.version : "unavailable: " + o.str();
      log << "backend " << opt.setup.backends[i].str() << ": " << versions[opt.setup.backends[i].str()] << "\n";
    }
  }

  Shared sh;
  std::atomic<int64_t> next{0};
  std::atomic<bool> stop{false};
  const auto t_start = Clock::now();
  auto out_of_budget = [&](int64_t index) {
    if (opt.models > 0 && index >= opt.models) return true;
    if (opt.time_s > 0 && std::chrono::duration<double>(Clock::now() - t_start).count() >= opt.time_s) return true;
    return false;
  };

  auto job = [&]() {
    WorkerSet workers(opt.setup.backends, opt.setup.limits);
    while (!stop) {
      const int64_t index = next++;
      if (out_of_budget(index)) break;
      if (store.model_done(index)) continue;
      Timing t;
      auto t0 = Clock::now();
      ModelCase m;
      try {
        m = draw_case(factory, seed, index, opt.setup.loss);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(sh.mu);
        if (++sh.invalid == 1) sh.first_invalid = e.what();
        store.record(index, {}, nullptr);
        continue;
      }
      t.generate += std::chrono::duration<double>(Clock::now() - t0).count();
      try {
        const Evaluation ev = evaluate(m, opt.setup, workers, &t);
        t0 = Clock::now();
        const BundleContext ctx{m, ev, opt.setup, seed, index, opt.command_line, versions};
        std::vector<std::string> fresh_lines;
        std::vector<std::tuple<std::string, std::string, std::string>> fresh_bundles;  // (signature, bundle, known)
        const int fresh = store.record(index, ev.findings, [&](const oracle::Finding& f) {
          const std::string path = write_bundle(opt.out, f, ctx);
          fresh_bundles.push_back({f.signature(), path, f.known});
          fresh_lines.push_back("new " + std::string(oracle::to_string(f.kind)) + " [" + oracle::to_string(f.stage) +
                                "] " + f.backend + " " + (f.op.empty() ? "" : f.op + " ") +
                                (f.node.empty() ? "" : "at '" + f.node + "' ") +
                                (f.known.empty() ? "" : "(known: " + f.known + ") ") + "- " + f.detail + "\n  replay: " +
                                replay_command(path));
          return path;
        });
        t.store += std::chrono::duration<double>(Clock::now() - t0).count();
        // Each new finding reduced at once (bounded by opt.reduce_runs model runs), on this job's
        // workers: its root cause is the key of its reduced case.
        std::vector<std::string> new_roots;
        for (const auto& [sig, path, known] : fresh_bundles) {
          if (opt.reduce_runs <= 0) break;
          t0 = Clock::now();
          try {
            const BundleReduction r = reduce_bundle(path, opt.reduce_runs, nullptr, &workers);
            store.set_root_cause(sig, r.root_cause, r.reduced_dir);
            // A finding the ledger knows belongs to that entry's root cause (one entry per cause).
            new_roots.push_back(known.empty() ? r.root_cause : "known:" + known);
            if (!r.reduced_dir.empty())
              for (auto& l : fresh_lines)
                if (l.find(path) != std::string::npos)
                  l += "\n  reduced: " + std::to_string(r.nodes_before) + " -> " + std::to_string(r.nodes_after) +
                       " nodes" + (r.fix.causes.empty() ? "" : ", caused by " + r.fix.causes[0].attribute + " = " +
                                                               r.fix.causes[0].value) + " (" + r.reduced_dir + ")";
          } catch (const std::exception& e) {
            new_roots.push_back(sig);
          }
          t.reduce += std::chrono::duration<double>(Clock::now() - t0).count();
        }
        std::lock_guard<std::mutex> lock(sh.mu);
        for (const auto& r : new_roots) sh.roots.insert(r);
        ++sh.models_run;
        sh.new_findings += fresh;
        sh.hits += static_cast<int64_t>(ev.findings.size());
        for (const auto& f : ev.findings) ++sh.by_kind[f.kind];
        for (const auto& r : ev.runs)
          if (r.outcome.status == worker::Status::QuorumError || r.outcome.status == worker::Status::ProtocolError) {
            // Quorum's own failure inside a worker: counted and shown like any internal error.
            if (++sh.errors <= 5 && !opt.quiet)
              log << "model " << index << ": internal error: " << r.backend << ": " << r.outcome.str() << "\n";
          }
        sh.timing.add(t);
        if (!opt.quiet)
          for (const auto& l : fresh_lines) log << l << "\n";
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(sh.mu);
        // A Quorum bug, not a library's: shown (the first few), counted, and the model is retried on resume.
        if (!opt.quiet && ++sh.errors <= 5) log << "model " << index << ": internal error: " << e.what() << "\n";
      }
    }
  };

  std::vector<std::thread> threads;
  for (int j = 0; j < std::max(1, opt.jobs); ++j) threads.emplace_back(job);
  std::atomic<bool> done{false};
  std::thread progress([&] {
    auto last = Clock::now();
    while (!done) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (done || opt.quiet || Clock::now() - last < std::chrono::seconds(1)) continue;
      last = Clock::now();
      std::lock_guard<std::mutex> lock(sh.mu);
      const double el = std::chrono::duration<double>(last - t_start).count();
      log << "[" << std::fixed << std::setprecision(0) << el << "s] models " << sh.models_run << " ("
          << std::setprecision(1) << (el > 0 ? static_cast<double>(sh.models_run) / el : 0.0) << "/s)";
      log << " findings:";
      for (const auto& k : core::finding_kinds()) log << " " << k.name << " " << sh.by_kind[k.kind];
      log << " | unique " << sh.new_findings << (already ? " new" : "");
      if (opt.reduce_runs > 0) log << " | root causes " << sh.roots.size();
      log << std::endl;
    }
  });
  for (auto& t : threads) t.join();
  done = true;
  progress.join();

  Summary s;
  s.seed = seed;
  s.models_run = sh.models_run;
  s.invalid_models = sh.invalid;
  s.first_invalid = sh.first_invalid;
  s.errors = sh.errors;
  s.new_findings = sh.new_findings;
  s.hits = sh.hits;
  s.models_total = store.models_done();
  s.seconds = std::chrono::duration<double>(Clock::now() - t_start).count();
  s.timing = sh.timing;
  return s;
}

}  // namespace quorum::campaign
