#include "campaign/fresh_findings.h"

#include <chrono>

#include "campaign/bundle.h"
#include "campaign/reduce_bundle.h"
#include "core/error.h"

namespace quorum::campaign {

FreshFinding fresh_finding(const oracle::Finding& f, const std::string& bundle, const std::string& origin,
                           const std::string& method) {
  return {f.signature(), bundle, f.known,
          "new " + std::string(oracle::to_string(f.kind)) + " [" + oracle::to_string(f.stage) + "] " + f.backend + " " +
              (f.op.empty() ? "" : f.op + " ") + (f.node.empty() ? "" : "at '" + f.node + "' ") +
              (f.known.empty() ? "" : "(known: " + f.known + ") ") +
              (method.empty() ? "" : "(search " + method + ") ") + "- " + f.detail +
              (origin.empty() ? "" : "\n  from: " + origin) + "\n  replay: " + replay_command(bundle)};
}

void FreshQueue::push(std::vector<FreshFinding>& fresh) {
  if (fresh.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (FreshFinding& f : fresh) q_.push_back(std::move(f));
  }
  fresh.clear();
  cv_.notify_one();
}

std::optional<FreshFinding> FreshQueue::pop() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !q_.empty() || closed_; });
  if (q_.empty()) return std::nullopt;
  FreshFinding f = std::move(q_.front());
  q_.pop_front();
  return f;
}

void FreshQueue::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

namespace {

// The line's addition for a reduced finding.
std::string reduced_line(const BundleReduction& r) {
  return "\n  reduced: " + std::to_string(r.nodes_before) + " -> " + std::to_string(r.nodes_after) + " nodes" +
         (r.fix.causes.empty() ? "" : ", caused by " + r.fix.causes[0].attribute + " = " + r.fix.causes[0].value) +
         (r.culprit.node.empty() ? "" : ", culprit '" + r.culprit.node + "' (" + r.culprit.op + ")") + " (" +
         r.reduced_dir + ")";
}

}  // namespace

std::vector<std::string> reduce_fresh(std::vector<FreshFinding>& fresh, const FreshReduction& how, store::Store& store,
                                      WorkerSet& workers, Timing& t) {
  using Clock = std::chrono::steady_clock;
  std::vector<std::string> roots;
  for (FreshFinding& f : fresh) {
    if (how.runs <= 0) break;
    const auto t0 = Clock::now();
    try {
      lay_out_map(f.bundle);  // a map the bundle left for Graphviz (BundleContext::defer_layout)
      const BundleReduction r = reduce_bundle(f.bundle, how.runs, nullptr, &workers, how.hang_timeout_s);
      // A finding the ledger does not know, or a crash naming no node, whose reduced case it knows is that
      // entry's (oracle::Ledger::match_reduced).
      std::string through_reduced;
      if (how.known)
        if (const oracle::KnownEntry* e = how.known->match_reduced(f.signature, f.known, r.root_cause))
          through_reduced = e->id;
      store.set_root_cause(f.signature, r.root_cause, r.reduced_dir, through_reduced);
      if (!through_reduced.empty()) f.known = through_reduced;
      // A finding the ledger knows belongs to that entry's root cause (one entry per cause).
      roots.push_back(f.known.empty() ? r.root_cause : "known:" + f.known);
      if (!r.reduced_dir.empty()) f.line += reduced_line(r);
      if (!through_reduced.empty()) f.line += "\n  known: " + through_reduced + " (through its reduced case)";
    } catch (const core::SystemError&) {
      throw;
    } catch (const std::exception& e) {
      roots.push_back(f.signature);
    }
    t.reduce += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  return roots;
}

}  // namespace quorum::campaign
