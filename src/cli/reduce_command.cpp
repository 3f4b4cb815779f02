// quorum reduce BUNDLE|CAMPAIGN: the smallest model that still shows a finding, its parameter causes.
#include <filesystem>
#include <iostream>

#include "campaign/bundle.h"
#include "campaign/reduce_bundle.h"
#include "cli/commands.h"
#include "core/error.h"

namespace quorum::cli {

namespace {

void report(const campaign::BundleReduction& r) {
  if (!r.reduction.reproduced) {
    std::cout << "not reproduced: " << r.bundle << " (" << r.signature << ") no longer shows; nothing reduced\n";
    return;
  }
  std::cout << "reduced " << r.signature << ": " << r.nodes_before << " -> " << r.nodes_after << " node"
            << (r.nodes_after == 1 ? "" : "s") << " in "
            << r.culprit.runs + r.reduction.runs + r.fix.runs + r.inputs.tried << " runs, " << r.seconds << " s\n";
  if (r.reduction.intermittent)
    std::cout << "  intermittent: the original model showed it only on a later run (the library's result varies "
                 "from run to run; steps judged gone may have missed it)\n";
  if (!r.culprit.node.empty())
    std::cout << "  culprit: '" << r.culprit.node << "' (" << r.culprit.op << ") alone: " << r.culprit.evidence
              << "\n";
  for (const auto& c : r.fix.causes)
    std::cout << "  cause: " << c.attribute << " = " << c.value << " (the finding disappears with " << c.fixed_by
              << ")\n";
  if (r.reduction.one_node && r.fix.causes.empty())
    std::cout
        << "  no single attribute change removes it: the operator fails for these inputs whatever its parameters\n";
  if (r.inputs.tried)
    std::cout << "  on fresh random inputs: shown " << r.inputs.shown << " of " << r.inputs.tried
              << " times (it shows for " << r.inputs.verdict() << ")\n";
  if (!r.reduced_dir.empty())
    std::cout << "  reduced bundle: " << r.reduced_dir << "\n  replay: quorum replay " << r.reduced_dir << "\n";
}

}  // namespace

int cmd_reduce(const Options& o) {
  if (o.positional.size() != 1) throw core::UserError("reduce: expected one BUNDLE directory or a CAMPAIGN directory");
  namespace fs = std::filesystem;
  const fs::path p(o.positional[0]);
  std::ostream* log = o.verbose ? &std::cout : nullptr;
  const int max_runs = static_cast<int>(o.max_runs);
  if (fs::exists(p / "finding.json")) {
    report(campaign::reduce_bundle(p.string(), max_runs, log ? log : &std::cout));
    return 0;
  }
  if (!fs::exists(p / "bundles"))
    throw core::UserError(p.string() + ": neither a bundle (finding.json) nor a campaign (bundles/)");
  const std::vector<std::string> bundles = campaign::list_bundles(p.string());
  int one = 0, done = 0;
  for (const auto& b : bundles) {
    const campaign::BundleReduction r = campaign::reduce_bundle(b, max_runs, log);
    report(r);
    done += r.reduction.reproduced;
    one += r.nodes_after == 1 && r.reduction.reproduced;
  }
  std::cout << bundles.size() << " bundles: " << done << " reduced, " << one << " to one node\n";
  return 0;
}

}  // namespace quorum::cli
