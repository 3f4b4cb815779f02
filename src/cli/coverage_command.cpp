// quorum coverage CAMPAIGN [--store URL] [--ops LIST|all]: the campaign's coverage from its store.
#include <filesystem>
#include <iostream>
#include <sstream>

#include "store/store.h"
#include "cli/commands.h"
#include "core/error.h"

namespace quorum::cli {

int cmd_coverage(const Options& o) {
  if (o.positional.size() != 1) throw core::UserError("coverage: expected one CAMPAIGN directory");
  const std::string dir = o.positional[0];
  const coverage::CoverageOptions copt = coverage_options(o);
  if (o.store.empty() && !std::filesystem::exists(dir + "/findings.db"))
    throw core::UserError("coverage: " + dir + " holds no campaign (no findings.db)");
  const std::unique_ptr<store::Store> store = store::open_store(o.store, dir);
  std::vector<std::string> ops;
  std::stringstream in(o.ops);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) ops.push_back(item);
  for (const auto& op : ops)
    if (op != "all" && std::find(coverage::operator_types().begin(), coverage::operator_types().end(), op) ==
                           coverage::operator_types().end())
      throw core::UserError("--ops: '" + op + "' is not an operator type of the coverage (quorum ops lists them)");
  coverage::Coverage cov(copt);
  cov.add(store->coverage());
  std::cout << "campaign: " << store->where() << ", " << store->models_done() << " models\n";
  std::cout << coverage::coverage_text(cov, ops);
  const auto curve = coverage::coverage_curve(cov.facts(), copt, 10);
  if (curve.size() > 1) {
    std::cout << "over models:\n";
    for (const auto& [models, p] : curve) std::cout << "  " << models << ": " << coverage::parts_line(p) << "\n";
  }
  return 0;
}

}  // namespace quorum::cli
