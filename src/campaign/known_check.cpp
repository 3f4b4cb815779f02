// Re-running the known-issue ledger.
#include "campaign/known_check.h"

#include <algorithm>

#include "campaign/bundle.h"
#include "core/error.h"

namespace quorum::campaign {

const char* to_string(KnownCheck::Status s) {
  switch (s) {
    case KnownCheck::Status::Reproduces: return "reproduces";
    case KnownCheck::Status::Stale: return "STALE";
    case KnownCheck::Status::Differs: return "DIFFERS";
    case KnownCheck::Status::NoCase: return "no case";
    case KnownCheck::Status::Skipped: return "skipped";
    case KnownCheck::Status::NotHere: return "not here";
  }
  return "?";
}

std::vector<KnownCheck> check_known(const oracle::Ledger& ledger, const KnownCheckOptions& opt) {
  const auto& backends = opt.backends;
  const auto& limits = opt.limits;
  std::vector<KnownCheck> out;
  for (const auto& e : ledger.entries) {
    KnownCheck c;
    c.entry = &e;
    const std::string base = e.backend.substr(0, e.backend.find(':'));
    if (!backends.empty() && std::find(backends.begin(), backends.end(), base) == backends.end()) continue;
    if (!opt.filter.empty() && e.id.find(opt.filter) == std::string::npos) continue;
    if (!e.has_case) {
      out.push_back(c);
      continue;
    }
    Setup s;
    try {
      s.backends = parse_backends(e.backend);
    } catch (const core::UserError& err) {
      c.status = KnownCheck::Status::Skipped;
      c.why = err.what();
      out.push_back(c);
      continue;
    }
    s.mode = e.mode == "train" ? Mode::Both : Mode::Infer;
    if (!e.loss.empty()) s.loss = e.loss;
    s.limits = limits;
    ModelCase m{e.model, e.inputs, e.target};
    core::Rng rng(1);
    complete_case(m, s.loss, rng);
    WorkerSet workers(s.backends, limits);
    const Evaluation ev = evaluate(m, s, workers);
    const std::string want = oracle::base_signature(e.signature);
    bool hit = false;
    for (const auto& f : ev.findings) {
      if (f.backend != s.backends[0].str()) continue;
      c.found.push_back(f.signature());
      if (oracle::base_signature(f.signature()) != want || hit) continue;
      // An entry with a lowering is its case's finding only where the node ran it (the exchange form forced).
      if (!e.lowering.empty() && !oracle::KnownPattern{e.signature, e.lowering}.matches(want, f.lowering)) continue;
      hit = true;
      if (opt.out.empty()) continue;
      // The entry's finding as a campaign bundle (labelled with the entry), for reproducers and reports.
      std::map<std::string, std::string> versions;
      worker::BackendInfo info;
      if (workers.at(0).hello(info).ok()) versions[s.backends[0].str()] = info.version;
      oracle::Finding labelled = f;
      labelled.known = e.id;
      const BundleContext ctx{m, ev, s, 0, 0, "quorum known --check (entry " + e.id + ")", versions, {}, {}};
      c.bundle = write_bundle(opt.out, labelled, ctx);
    }
    const std::string lacks = hit ? "" : e.cpu_unmet();
    c.status = hit               ? KnownCheck::Status::Reproduces
               : !lacks.empty()  ? KnownCheck::Status::NotHere
               : c.found.empty() ? KnownCheck::Status::Stale
                                 : KnownCheck::Status::Differs;
    if (!lacks.empty()) c.why = lacks;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace quorum::campaign
