// quorum known: list the known-issue ledgers; --check re-runs every entry's minimal case.
#include <iostream>
#include <sstream>

#include "campaign/known_check.h"
#include "cli/commands.h"
#include "core/error.h"
#include "worker/supervisor.h"

namespace quorum::cli {

int cmd_known(const Options& o) {
  const std::string dir = o.ledger.empty() ? oracle::default_ledger_dir() : o.ledger;
  const oracle::Ledger ledger = oracle::load_ledgers(dir);
  std::vector<std::string> only;
  std::stringstream ss(o.backends);
  for (std::string b; std::getline(ss, b, ',');)
    if (!b.empty()) {
      worker::worker_path(b);  // an unknown backend name is a UserError naming the built ones
      only.push_back(b);
    }
  if (!o.check) {
    for (const auto& e : ledger.entries) {
      const std::string base = e.backend.substr(0, e.backend.find(':'));
      if (!only.empty() && std::find(only.begin(), only.end(), base) == only.end()) continue;
      std::cout << e.id << "  [" << e.cls << "]  " << e.signature << (e.has_case ? "" : "  (no case)") << "\n";
      for (const auto& p : e.also) std::cout << "    also " << p.str() << "\n";
      std::cout << "    " << e.note.substr(0, 160) << (e.note.size() > 160 ? "..." : "") << "\n";
    }
    std::cout << ledger.entries.size() << " entries in " << dir << "/*/known_differences.json\n";
    return 0;
  }
  campaign::KnownCheckOptions opt;
  opt.backends = only;
  opt.filter = o.filter;
  opt.limits = limits_of(o);
  opt.out = o.out;
  const auto checks = campaign::check_known(ledger, opt);
  int bad = 0, ok = 0, skipped = 0;
  for (const auto& c : checks) {
    using S = campaign::KnownCheck::Status;
    std::cout << campaign::to_string(c.status) << "  " << c.entry->backend << "  " << c.entry->id;
    if (c.status == S::Reproduces) ++ok;
    if (c.status == S::Skipped || c.status == S::NoCase || c.status == S::NotHere) ++skipped;
    if (c.status == S::Skipped) std::cout << ": " << c.why;
    if (c.status == S::NotHere) std::cout << ": not reproduced on this CPU (" << c.why << ")";
    if (c.status == S::Stale)
      std::cout << ": no longer reproduces (fixed in this library version?) - expected " << c.entry->signature;
    if (c.status == S::Differs) {
      std::cout << ": expected " << c.entry->signature << ", found";
      for (const auto& f : c.found) std::cout << " " << f;
    }
    if (c.status == S::Stale || c.status == S::Differs) ++bad;
    if (!c.bundle.empty()) std::cout << "\n    bundle: " << c.bundle;
    std::cout << "\n";
  }
  std::cout << ok << " reproduce, " << bad << " stale or different, " << skipped << " not checked\n";
  return bad ? 1 : 0;
}

}  // namespace quorum::cli
