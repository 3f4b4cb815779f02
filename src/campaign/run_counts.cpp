#include "campaign/run_counts.h"

#include <iomanip>

namespace quorum::campaign {

void RunCounts::tally(const Evaluation& ev, int fresh, const std::vector<std::string>& new_roots, const Timing& t) {
  for (const auto& r : new_roots) roots.insert(r);
  new_findings += fresh;
  hits += static_cast<int64_t>(ev.findings.size());
  for (const auto& f : ev.findings) {
    ++by_kind[f.kind];
    optimized += f.stage == core::Stage::Optimized;
    batched += f.stage == core::Stage::Batch;
    formed += f.stage == core::Stage::Form;
    positioned += f.stage == core::Stage::Position;
  }
  widened += ev.batch > 0;
  placed += ev.positioned.length > 0;
  timing.add(t);
}

void RunCounts::progress_line(std::ostream& log, double el, const Setup& setup, bool reducing, bool resumed,
                              double olc) const {
  log << "[" << std::fixed << std::setprecision(0) << el << "s] models " << models_run << " (" << std::setprecision(1)
      << (el > 0 ? static_cast<double>(models_run) / el : 0.0) << "/s)";
  log << " findings:";
  for (const auto& k : core::finding_kinds()) {
    const auto it = by_kind.find(k.kind);
    log << " " << k.name << " " << (it == by_kind.end() ? 0 : it->second);
  }
  if (setup.optimized) log << " (optimized stage " << optimized << ")";
  if (setup.batch_relation.on) log << " (batch relation " << batched << ", on " << widened << " models widened)";
  if (setup.form_relation.on) log << " (form relation " << formed << ")";
  if (setup.position_relation.on)
    log << " (position relation " << positioned << ", on " << placed << " models widened)";
  log << " | unique " << new_findings << (resumed ? " new" : "");
  if (reducing) log << " | root causes " << roots.size();
  log << " | OLC " << std::setprecision(1) << 100.0 * olc << "%";
  if (const size_t learned = setup.refusals->size())
    log << " | refusals " << learned << " (models refused " << refused << ", not sent " << not_sent << ")";
  log << std::endl;
}

Summary RunCounts::summary() const {
  Summary s;
  s.models_run = models_run;
  s.invalid_models = invalid;
  s.first_invalid = first_invalid;
  s.errors = errors;
  s.new_findings = new_findings;
  s.hits = hits;
  s.timing = timing;
  s.workers_recycled = recycled;
  s.refused = refused;
  s.searched = searched;
  s.search_found = search_found;
  s.not_sent = not_sent;
  s.transfer_variants = transfer_variants;
  s.transfer_new = transfer_new;
  return s;
}

}  // namespace quorum::campaign
