// quorum repro BUNDLE|CAMPAIGN [-o DIR]: standalone reproducers in each blamed library's own API.
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "campaign/bundle.h"
#include "cli/commands.h"
#include "core/error.h"
#include "report/repro.h"

namespace quorum::cli {

namespace {

namespace fs = std::filesystem;

bool print(const report::Repro& r) {
  if (!r.written) {
    std::cout << "no reproducer: " << r.reason << " (" << r.dir << "/README.txt)\n";
    return false;
  }
  std::cout << "reproducer: " << r.dir << "/" << r.program.main << "\n  run: cd " << r.dir << " && " << r.program.run
            << "\n";
  return true;
}

}  // namespace

int cmd_repro(const Options& o) {
  if (o.positional.size() != 1) throw core::UserError("repro: expected one BUNDLE directory or a CAMPAIGN directory");
  const fs::path p(o.positional[0]);
  if (fs::exists(p / "finding.json")) {
    print(report::write_repro(p.string(), o.output));
    return 0;
  }
  if (!fs::exists(p / "bundles"))
    throw core::UserError(p.string() + ": neither a bundle (finding.json) nor a campaign (bundles/)");
  if (!o.output.empty())
    throw core::UserError("repro: -o names one reproducer's folder; a campaign's go into each BUNDLE/repro");
  const std::vector<std::string> bundles = campaign::list_bundles(p.string());
  size_t written = 0, failed = 0;
  for (const auto& b : bundles) {
    std::cout << fs::path(b).filename().string() << ": ";
    try {
      written += print(report::write_repro(b));
    } catch (const std::exception& e) {  // one unreadable bundle does not stop the others
      std::cout << "failed: " << e.what() << "\n";
      ++failed;
    }
  }
  std::cout << bundles.size() << " bundles: " << written << " reproducers written";
  if (failed) std::cout << ", " << failed << " failed";
  std::cout << "\n";
  return failed ? 1 : 0;
}

}  // namespace quorum::cli
