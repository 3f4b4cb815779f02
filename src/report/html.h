// The HTML campaign report: one self-contained page (docs/report.md).
#pragma once
#include <string>

#include "coverage/coverage.h"

namespace quorum::report {

// The page for a campaign directory: setup and library versions, models/s and findings/root causes
// over time (SVG plots), root causes per library and class, and per root cause its title, largest
// differences, reduction and localized parameter, localization maps, reproducer and replay command.
// Reproducers missing from a bundle are written on the way. Everything from a model, message or
// file is escaped; maps are embedded as data: images; the page holds no script.
// `store` names the findings store as --store does (empty: CAMPAIGN/findings.db). The coverage
// section (OLC and its parts over the models, functionality per library) uses `coverage`'s weights.
std::string campaign_report_html(const std::string& campaign_dir, const std::string& store = "",
                                 const coverage::CoverageOptions& coverage = {});
void write_campaign_report(const std::string& campaign_dir, const std::string& out_path,
                           const std::string& store = "", const coverage::CoverageOptions& coverage = {});

}  // namespace quorum::report
