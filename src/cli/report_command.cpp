// quorum report BUNDLE --issue | quorum report CAMPAIGN [-o report.html]
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "core/error.h"
#include "core/fileio.h"
#include "report/html.h"
#include "report/issue.h"

namespace quorum::cli {

int cmd_report(const Options& o) {
  namespace fs = std::filesystem;
  if (o.positional.size() != 1)
    throw core::UserError("report: expected one BUNDLE (with --issue) or CAMPAIGN directory");
  const fs::path p(o.positional[0]);
  if (fs::exists(p / "finding.json")) {
    if (!o.issue)
      throw core::UserError("report: " + p.string() +
                            " is a bundle; use --issue for its issue text, or give a campaign directory");
    const std::string md = report::issue_markdown(p.string());
    if (o.output.empty()) std::cout << md;
    else {
      core::write_file_atomic(o.output, md);
      std::cout << "issue text: " << o.output << "\n";
    }
    return 0;
  }
  if (o.issue) throw core::UserError("report --issue: " + p.string() + " is not a bundle (no finding.json)");
  const std::string out = o.output.empty() ? (p / "report.html").string() : o.output;
  report::write_campaign_report(p.string(), out, o.store, coverage_options(o));
  std::cout << "report: " << fs::absolute(out).string() << "\n";
  return 0;
}

}  // namespace quorum::cli
