// The train-diff page (train_report.h).
#include "report/train_report.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "report/svg_plot.h"

namespace quorum::report {

namespace {

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f",
                         "#bcbd22", "#17becf"};

// log10 of a distance, floored at 1e-12 so exact agreement stays on the plot.
double lg(double v) { return std::log10(std::max(v, 1e-12)); }

Series series(const std::string& name, size_t color, const std::vector<double>& v, bool log) {
  Series s{name, kColors[color % 10], {}};
  for (size_t k = 0; k < v.size(); ++k) s.points.emplace_back(static_cast<double>(k + 1), log ? lg(v[k]) : v[k]);
  return s;
}

}  // namespace

std::string train_diff_html(const train::DiffResult& r, const train::DiffOptions& o) {
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>quorum train-diff: " << escape(r.model)
    << "</title><style>body{font-family:sans-serif;margin:2em;max-width:70em}td,th{padding:2px 8px;text-align:left}"
       "table{border-collapse:collapse}tr:nth-child(even){background:#f4f4f4}</style></head><body>\n";
  h << "<h1>Multi-step training divergence: " << escape(r.model) << "</h1>\n<p>" << o.steps << " steps, optimizer "
    << escape(o.optimizer.name) << " (lr " << o.optimizer.lr;
  if (o.optimizer.name == "sgd") h << ", momentum " << o.optimizer.momentum;
  else h << ", betas " << o.optimizer.beta1 << "/" << o.optimizer.beta2 << ", eps " << o.optimizer.eps;
  h << "). Drift: ||w<sub>library</sub> &minus; w<sub>reference</sub>|| / ||w<sub>reference</sub>|| per weight. A "
       "library is flagged at the first step whose own error (its step against the reference's step from the "
       "library's own weights and optimizer state, relative to the step) exceeds "
    << o.factor << " &times; max(the float32 twin's step error, 10<sup>-5</sup>).</p>\n";
  h << "<table><tr><th>library</th><th>final loss</th><th>final max drift</th><th>flagged</th></tr>\n";
  for (const auto& c : r.libs) {
    h << "<tr><td>" << escape(c.spec) << "<br><small>" << escape(c.library) << "</small></td><td>"
      << (c.loss.empty() ? std::string("-") : std::to_string(c.loss.back())) << "</td><td>"
      << (c.drift_max.empty() ? std::string("-") : std::to_string(c.drift_max.back())) << "</td><td>";
    if (!c.failure.empty()) h << "failed: " << escape(c.failure);
    else if (c.step > 0)
      h << "step " << c.step << ", weight " << escape(c.weight) << " (node " << escape(c.node) << "): step error "
        << c.step_error_at << " &gt; bound " << c.bound_at << "; drift " << c.drift_at << "; update error "
        << c.update_error_at;
    else h << "no";
    h << "</td></tr>\n";
  }
  h << "</table>\n";
  std::vector<Series> loss{series("reference (float64)", 0, r.ref_loss, false)};
  std::vector<Series> drift;
  size_t color = 1;
  for (const auto& c : r.libs) {
    loss.push_back(series(c.spec, color, c.loss, false));
    drift.push_back(series(c.spec, color, c.drift_max, true));
    ++color;
  }
  std::vector<double> twin_max(r.ref_loss.size(), 0);
  for (const auto& [name, v] : r.twin_drift)
    for (size_t k = 0; k < v.size() && k < twin_max.size(); ++k) twin_max[k] = std::max(twin_max[k], v[k]);
  drift.push_back(series("float32 twin of the reference", color, twin_max, true));
  std::vector<Series> steps;
  color = 1;
  for (const auto& c : r.libs) {
    std::vector<double> worst(c.loss.size(), 0);
    for (const auto& [name, v] : c.step_error)
      for (size_t k = 0; k < v.size() && k < worst.size(); ++k) worst[k] = std::max(worst[k], v[k]);
    steps.push_back(series(c.spec, color++, worst, true));
  }
  h << "<div>" << svg_line_plot("Loss per step", "step", "loss", loss)
    << svg_line_plot("Largest step error per step", "step", "log10 step error", steps)
    << svg_line_plot("Largest weight drift per step", "step", "log10 drift", drift) << "</div>\n";
  for (const auto& c : r.libs) {
    if (c.drift.empty()) continue;
    std::vector<Series> layers;
    size_t i = 0;
    for (const auto& [name, v] : c.drift) layers.push_back(series(name, i++, v, true));
    h << "<h2>" << escape(c.spec) << ": drift per weight</h2>\n<div>"
      << svg_line_plot(c.spec + ": weight drift", "step", "log10 drift", layers, 720, 320) << "</div>\n";
  }
  h << "</body></html>\n";
  return h.str();
}

}  // namespace quorum::report
