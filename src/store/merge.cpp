// quorum merge: shards' stores into one.
#include "store/merge.h"

#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "store/store.h"
#include "core/error.h"

namespace quorum::store {

namespace fs = std::filesystem;

namespace {

// A finding with the bundle folder it is copied from.
struct Merged {
  StoredFinding f;
  fs::path from;
};

// Where a stored bundle is now: a campaign directory's bundles/ folder (the stored path may be
// relative to where the campaign ran), else the stored path itself.
fs::path bundle_source(const std::string& source, const std::string& stored) {
  if (stored.empty()) return {};
  if (!is_postgres_url(source)) {
    const fs::path here = fs::path(source) / "bundles" / fs::path(stored).filename();
    if (fs::exists(here)) return here;
  }
  return stored;
}

}  // namespace

MergeSummary merge_campaigns(const std::vector<std::string>& sources, const std::string& out) {
  if (sources.empty()) throw core::UserError("merge: expected the campaign stores to merge (merge A B ... -o C)");
  if (out.empty()) throw core::UserError("merge: -o names the new campaign directory");
  if (fs::exists(fs::path(out) / "findings.db"))
    throw core::UserError(out + ": already holds a findings store; merge into a new directory");
  std::map<std::string, std::string> settings;
  std::string settings_from;
  std::map<int64_t, std::pair<ModelRecord, std::string>> models;  // index -> record, its source
  std::map<std::string, Merged> merged;
  std::vector<StoredRefusal> refusals;  // every shard's learned refusals, summed into the merged store
  std::vector<coverage::Fact> coverage;   // every shard's coverage facts, their union (earliest model each)
  std::vector<StoredBackend> backend_models;  // every shard's per-model backend rows (shards hold other models)
  for (const std::string& src : sources) {
    if (!is_postgres_url(src) && !fs::exists(fs::path(src) / "findings.db"))
      throw core::UserError(src + ": not a campaign directory (no findings.db)");
    const std::unique_ptr<Store> store = open_store(src, src);
    const auto s = store->settings();
    if (settings_from.empty()) {
      settings = s;
      settings_from = src;
    } else {
      std::set<std::string> keys;
      for (const auto& [k, v] : settings) keys.insert(k);
      for (const auto& [k, v] : s) keys.insert(k);
      for (const auto& k : keys) {
        const auto a = settings.find(k);
        const auto b = s.find(k);
        const std::string va = a == settings.end() ? "(none)" : a->second, vb = b == s.end() ? "(none)" : b->second;
        if (va != vb)
          throw core::UserError("merge: " + settings_from + " ran with " + k + " = " + va + ", " + src + " with " + vb +
                                ": not shards of one campaign");
      }
    }
    for (const ModelRecord& m : store->models()) {
      const auto [it, fresh] = models.try_emplace(m.index, m, src);
      if (!fresh)
        throw core::UserError("merge: " + it->second.second + " and " + src + " both hold model " +
                              std::to_string(m.index) + " (each shard's store once, shards without overlap)");
    }
    for (StoredRefusal& r : store->refusals()) refusals.push_back(std::move(r));
    for (coverage::Fact& f : store->coverage()) coverage.push_back(std::move(f));
    for (StoredBackend& b : store->backend_models()) backend_models.push_back(std::move(b));
    for (StoredFinding& f : store->findings()) {
      const fs::path from = bundle_source(src, f.bundle);
      auto it = merged.find(f.signature);
      if (it == merged.end()) {
        const std::string sig = f.signature;
        merged.emplace(sig, Merged{std::move(f), from});
        continue;
      }
      Merged& m = it->second;
      const int64_t hits = m.f.hits + f.hits;
      const std::string first_seen = std::min(m.f.first_seen, f.first_seen);
      const std::string last_seen = std::max(m.f.last_seen, f.last_seen);
      if (f.first_model < m.f.first_model) m = Merged{std::move(f), from};  // the earliest model's bundle
      m.f.hits = hits;
      m.f.first_seen = first_seen;
      m.f.last_seen = last_seen;
    }
  }
  // Bundles first (a store naming a missing bundle would be worse than a bundle without a row).
  MergeSummary sum;
  const fs::path bundles = fs::path(out) / "bundles";
  fs::create_directories(bundles);
  std::vector<StoredFinding> rows;
  for (auto& [sig, m] : merged) {
    if (!m.from.empty() && fs::is_directory(m.from)) {
      const fs::path to = bundles / m.from.filename();
      std::error_code ec;
      fs::remove_all(to, ec);
      fs::copy(m.from, to, fs::copy_options::recursive, ec);
      if (ec) throw core::UserError(to.string() + ": cannot copy the bundle " + m.from.string() + ": " + ec.message());
      if (!m.f.reduced.empty()) {
        const fs::path rel = fs::path(m.f.reduced).lexically_relative(fs::path(m.f.bundle));
        m.f.reduced = (rel.empty() || *rel.begin() == ".." ? to / "reduced" : to / rel).string();
      }
      m.f.bundle = to.string();
      ++sum.bundles;
    }
    sum.hits += m.f.hits;
    rows.push_back(std::move(m.f));
  }
  std::vector<ModelRecord> model_rows;
  for (auto& [i, m] : models) model_rows.push_back(m.first);
  const std::unique_ptr<Store> dest = open_sqlite_store(out);
  dest->check_settings(settings);
  dest->insert(rows, model_rows);
  dest->record_coverage(coverage);
  dest->record_backend_models(backend_models);
  for (const StoredRefusal& r : refusals) {
    std::vector<std::string> ops;
    std::stringstream list(r.ops);
    for (std::string op; std::getline(list, op, ',');) ops.push_back(op);
    dest->record_refusal(r.backend, r.refusal, r.first_model, r.refused, r.not_sent, ops);
  }
  sum.models = static_cast<int64_t>(model_rows.size());
  sum.findings = static_cast<int64_t>(rows.size());
  sum.root_causes = static_cast<int64_t>(dest->root_causes().size());
  return sum;
}

}  // namespace quorum::store
