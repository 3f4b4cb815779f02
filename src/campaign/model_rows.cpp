#include "campaign/model_rows.h"

#include <algorithm>

namespace quorum::campaign {

BackendRows backend_rows(const Setup& setup, const ModelCase& m, const Evaluation& ev, int64_t index, const Timing& t,
                         ModelRows& rows) {
  BackendRows out;
  std::vector<store::StoredBackend> counts;
  for (const auto& spec : setup.backends) {
    store::StoredBackend b;
    b.backend = spec.str();
    b.model = index;
    const auto c = t.compile.find(spec.name), r = t.run.find(spec.name);
    b.seconds = (c == t.compile.end() ? 0 : c->second) + (r == t.run.end() ? 0 : r->second);
    counts.push_back(b);
  }
  for (const auto& r : ev.runs) {
    if (r.is_reference) continue;
    const bool kept =
        std::any_of(ev.not_sent.begin(), ev.not_sent.end(), [&](const NotSent& n) { return n.backend == r.backend; });
    if (kept) continue;  // recorded below
    if (r.outcome.status != worker::Status::Unsupported) {
      for (auto& b : counts) {
        if (b.backend != r.backend) continue;
        b.ran = 1;
        const worker::Status st = r.outcome.status;
        b.crashed = st == worker::Status::Crash || st == worker::Status::Timeout || st == worker::Status::OutOfMemory;
        b.failed = st == worker::Status::ConversionFailure || st == worker::Status::LibraryError;
      }
      continue;
    }
    const CountedRefusal refusal = counted_refusal(m.graph, r.outcome.message);
    rows.refusals.push_back({r.backend, refusal.key, index, 1, 0, refusal.ops});
    ++out.refused;
    if (!refusal.learned || !setup.refusals->learn(r.backend, *refusal.learned)) continue;
    std::string names;
    for (const auto& op : refusal.ops) names += (names.empty() ? "" : ",") + op;
    out.learned.push_back(
        "learned: " + r.backend + " does not run " + refusal.key +
        ": models holding it are no longer sent to it (catalogue operators: " + (names.empty() ? "?" : names) + ")");
  }
  for (const NotSent& n : ev.not_sent) rows.refusals.push_back({n.backend, n.refusal.key(), index, 0, 1, n.ops});
  rows.backends = std::move(counts);
  return out;
}

void write_rows(store::Store& store, const ModelRows& rows) {
  if (!rows.facts.empty()) store.record_coverage(rows.facts);
  store.record_backend_models(rows.backends);
  for (const auto& r : rows.refusals) store.record_refusal(r.backend, r.key, r.model, r.refused, r.not_sent, r.ops);
}

void HitBatch::stored(const std::vector<oracle::Finding>& findings) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& f : findings) stored_.insert(f.signature());
}

void HitBatch::stored(const std::string& signature) {
  std::lock_guard<std::mutex> lock(mu_);
  stored_.insert(signature);
}

bool HitBatch::add(const Evaluation& ev, int64_t index, ModelRows& rows) {
  store::KnownModel k{index, {}};
  for (const auto& f : ev.findings) k.signatures.push_back(f.signature());
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& sig : k.signatures)
    if (!stored_.count(sig)) return false;
  pending_.push_back(std::move(k));
  for (coverage::Fact& f : rows.facts) pending_rows_.facts.push_back(std::move(f));
  for (store::StoredBackend& b : rows.backends) pending_rows_.backends.push_back(std::move(b));
  for (auto& r : rows.refusals) {  // summed per refusal over the batch
    auto same = std::find_if(pending_rows_.refusals.begin(), pending_rows_.refusals.end(),
                             [&](const auto& p) { return p.backend == r.backend && p.key == r.key; });
    if (same == pending_rows_.refusals.end()) {
      pending_rows_.refusals.push_back(std::move(r));
      continue;
    }
    same->model = std::min(same->model, r.model);
    same->refused += r.refused;
    same->not_sent += r.not_sent;
    for (auto& op : r.ops)
      if (std::find(same->ops.begin(), same->ops.end(), op) == same->ops.end()) same->ops.push_back(std::move(op));
  }
  const auto now = std::chrono::steady_clock::now();
  if (pending_.size() == 1) pending_since_ = now;
  if (pending_.size() >= kHitBatch || now - pending_since_ >= kHitBatchAge) flush_locked();
  return true;
}

void HitBatch::flush() {
  std::lock_guard<std::mutex> lock(mu_);
  flush_locked();
}

void HitBatch::flush_locked() {
  write_rows(store_, pending_rows_);
  pending_rows_ = {};
  store_.record_known(pending_);
  pending_.clear();
}

}  // namespace quorum::campaign
