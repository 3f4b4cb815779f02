// The campaign report: one self-contained HTML file (inline CSS and SVG, images as data: URIs, no
// script, no network).
#include "report/html.h"

#include <cstdio>
#include <algorithm>
#include <ctime>
#include <iomanip>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "campaign/bundle.h"
#include "store/store.h"
#include "core/error.h"
#include "core/fileio.h"
#include "ir/onnx_io.h"
#include "oracle/known.h"
#include "report/issue.h"
#include "report/repro.h"
#include "report/svg_plot.h"

namespace quorum::report {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

double seconds_of(const std::string& iso) {
  std::tm tm{};
  if (sscanf(iso.c_str(), "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
             &tm.tm_sec) != 6)
    return 0;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<double>(timegm(&tm));
}

std::string base64(const std::string& in) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8) |
                       static_cast<unsigned char>(in[i + 2]);
    out += t[v >> 18], out += t[(v >> 12) & 63], out += t[(v >> 6) & 63], out += t[v & 63];
  }
  if (i + 1 == in.size()) {
    const unsigned v = static_cast<unsigned char>(in[i]) << 16;
    out += t[v >> 18], out += t[(v >> 12) & 63], out += "==";
  } else if (i + 2 == in.size()) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8);
    out += t[v >> 18], out += t[(v >> 12) & 63], out += t[(v >> 6) & 63], out += '=';
  }
  return out;
}

// An SVG file as an <img>: a data: URI image never runs script, whatever a node name holds.
std::string svg_image(const fs::path& p, const std::string& alt) {
  std::error_code ec;
  if (!fs::exists(p, ec)) return "";
  return "<img class=\"map\" alt=\"" + escape(alt) + "\" src=\"data:image/svg+xml;base64," +
         base64(core::read_file(p.string())) + "\">";
}

struct Group {
  std::string key, backend, cls, title;
  std::string method;  // how its first finding was found (random, ga, diverge)
  bool suggested = false;  // class guessed by Quorum (not from the ledger)
  std::vector<Difference> diffs;
  bool optimized = false;  // an optimized-stage finding: its lowering's two runs side by side
  LoweringSides lowering;
  std::string note;  // why the case could not be loaded
  std::vector<store::StoredFinding> findings;
  int64_t hits = 0;
  std::string first_seen;
};

const char* kStyle = R"CSS(
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1100px; color: #222; padding: 0 16px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 28px; border-bottom: 1px solid #ddd; } h3 { font-size: 15px; }
table { border-collapse: collapse; margin: 8px 0; } td, th { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } code, pre { font: 12px/1.35 ui-monospace, monospace; } pre { background: #f7f7f7; padding: 8px; overflow-x: auto; max-height: 420px; }
.bug { color: #b00; font-weight: bold; } .convention { color: #a60; } .precision { color: #06a; } .unclassified { color: #555; font-style: italic; }
.plots { display: flex; flex-wrap: wrap; gap: 16px; } img.map { max-width: 100%; border: 1px solid #eee; margin: 4px 0; }
details { margin: 6px 0 14px; } summary { cursor: pointer; }
)CSS";

// Library versions as the first finding that records them says.
std::map<std::string, std::string> library_versions(const std::vector<store::StoredFinding>& findings) {
  std::map<std::string, std::string> versions;
  for (const auto& f : findings) {
    try {
      const auto j = campaign::read_finding(f.bundle);
      for (const auto& b : j.value("backends", nlohmann::ordered_json::array()))
        versions.emplace(b.value("backend", ""), b.value("version", ""));
    } catch (const std::exception&) {
    }
    if (!versions.empty()) break;
  }
  return versions;
}

// Findings grouped by root cause (ledger entry, else root-cause key, else signature), each with its
// first finding's case: title, largest differences, class (the ledger's, else Quorum's suggestion).
std::map<std::string, Group> root_causes(const std::vector<store::StoredFinding>& findings) {
  const oracle::Ledger ledger = oracle::load_ledgers(oracle::default_ledger_dir());
  std::map<std::string, Group> groups;
  for (const auto& f : findings) {
    const std::string key = !f.known.empty() ? "known:" + f.known : !f.root_cause.empty() ? f.root_cause : f.signature;
    Group& g = groups[key];
    g.key = key;
    g.backend = f.backend;
    g.findings.push_back(f);
    g.hits += f.hits;
    if (g.first_seen.empty() || f.first_seen < g.first_seen) g.first_seen = f.first_seen;
    if (!f.known.empty())
      if (const auto* e = ledger.find(f.known)) g.cls = e->cls;
  }
  for (auto& [key, g] : groups) {
    const store::StoredFinding& f = g.findings.front();
    try {
      const backends::ReproCase c = load_repro_case(f.bundle);
      g.title = issue_title(c);
      g.method = c.method;
      g.diffs = largest_differences(c, 5);
      g.optimized = c.stage == core::Stage::Optimized;
      g.lowering = lowering_sides(c);
      const Classification k = classify(c);
      if (k.cls != "unclassified") {
        g.cls = k.cls;
        g.suggested = k.suggested;
      }
    } catch (const std::exception& e) {
      g.title = f.signature;
      g.note = e.what();
    }
  }
  return groups;
}

// The two plots: models per second, and unique findings and root causes (cumulative) over time.
std::string over_time_plots(const std::vector<std::pair<std::string, int64_t>>& per_second,
                            const std::vector<store::StoredFinding>& findings,
                            const std::map<std::string, Group>& groups) {
  double t0 = per_second.empty() ? 0 : seconds_of(per_second.front().first);
  for (const auto& f : findings)
    if (t0 == 0 || seconds_of(f.first_seen) < t0) t0 = seconds_of(f.first_seen);
  Series rate{"models/s", "#3366cc", {}};
  for (const auto& [t, n] : per_second) rate.points.emplace_back(seconds_of(t) - t0, static_cast<double>(n));
  // One series counting up at each time in `ts`.
  auto cumulative = [](Series s, std::vector<double> ts) {
    std::sort(ts.begin(), ts.end());
    for (size_t i = 0; i < ts.size(); ++i) s.points.emplace_back(ts[i], static_cast<double>(i + 1));
    return s;
  };
  std::vector<double> found, caused;
  for (const auto& f : findings) found.push_back(seconds_of(f.first_seen) - t0);
  for (const auto& [k, g] : groups) caused.push_back(seconds_of(g.first_seen) - t0);
  const Series uniq = cumulative(Series{"unique findings", "#cc3333", {}}, found);
  const Series causes = cumulative(Series{"root causes", "#228833", {}}, caused);
  return "<h2>Over time</h2>\n<div class=\"plots\">\n" +
         svg_line_plot("Models per second", "seconds", "models/s", {rate}) +
         svg_line_plot("Findings and root causes", "seconds", "count (cumulative)", {uniq, causes}) + "</div>\n";
}

std::string class_of(const Group& g) { return g.cls.empty() ? "unclassified" : g.cls; }

// Library x class (ledger classes, then Quorum's suggestions for the rest).
void write_summary(std::ostream& h, const std::map<std::string, Group>& groups) {
  std::map<std::string, std::map<std::string, int>> by_lib;
  for (const auto& [k, g] : groups) ++by_lib[g.backend][class_of(g) + (g.suggested ? "?" : "")];
  h << "<h2>Root causes by library</h2>\n<p>Classes from the known-issue ledgers; <i>n?</i> counts the root causes "
       "the ledgers do not know yet, by the class Quorum suggests (float32's spread at the recorded operands, the "
       "localized parameter).</p>\n<table id=\"summary\"><tr><th>library</th><th>bug</th><th>convention</th>"
       "<th>precision</th><th>unclassified</th></tr>\n";
  for (const auto& [lib, m] : by_lib) {
    h << "<tr><td>" << escape(lib) << "</td>";
    for (const std::string c : {"bug", "convention", "precision", "unclassified"}) {
      h << "<td>" << (m.count(c) ? m.at(c) : 0);
      if (m.count(c + "?")) h << " + <i>" << m.at(c + "?") << "?</i>";
      h << "</td>";
    }
    h << "</tr>\n";
  }
  h << "</table>\n";
}

// The table of root causes by library and first sighting; returns them in that order with anchors.
std::vector<std::pair<const Group*, std::string>> write_findings_table(std::ostream& h,
                                                                       const std::map<std::string, Group>& groups) {
  h << "<h2>Findings by root cause</h2>\n<table id=\"findings\"><tr><th>library</th><th>root cause</th><th>class</th>"
       "<th>findings</th><th>hits</th><th>first seen</th></tr>\n";
  std::vector<const Group*> order;
  for (const auto& [k, g] : groups) order.push_back(&g);
  std::sort(order.begin(), order.end(), [](const Group* a, const Group* b) {
    return a->backend != b->backend ? a->backend < b->backend : a->first_seen < b->first_seen;
  });
  std::vector<std::pair<const Group*, std::string>> anchored;
  for (const Group* g : order) {
    const std::string anchor = "rc" + std::to_string(anchored.size() + 1);
    anchored.emplace_back(g, anchor);
    const std::string cls = class_of(*g);
    h << "<tr><td>" << escape(g->backend) << "</td><td><a href=\"#" << anchor << "\">" << escape(g->key)
      << "</a></td><td class=\"" << cls << "\">" << cls << (g->suggested ? "?" : "") << "</td><td>"
      << g->findings.size() << "</td><td>" << g->hits << "</td><td>" << escape(g->first_seen) << "</td></tr>\n";
  }
  h << "</table>\n";
  return anchored;
}

void write_differences(std::ostream& h, const std::vector<Difference>& diffs) {
  if (diffs.empty()) return;
  h << "<table class=\"diffs\"><tr><th>value</th><th>element</th><th>expected (float64)</th><th>actual</th></tr>";
  for (const auto& d : diffs) {
    std::ostringstream e, a;
    e.precision(9), a.precision(9);
    e << d.expected, a << d.actual;
    h << "<tr><td>" << escape(d.value) << "</td><td>" << d.index << "</td><td>" << escape(e.str()) << "</td><td>"
      << escape(a.str()) << "</td></tr>";
  }
  h << "</table>\n";
}

// What the library ran: for an optimized-stage finding the optimized run's fusions and the pinned run's
// operations side by side, otherwise the pinned run's.
void write_lowering(std::ostream& h, const Group& g) {
  auto list = [&](const std::vector<std::string>& v) {
    std::string t;
    for (const auto& x : v) t += (t.empty() ? "" : ", ") + x;
    return "<code>" + escape(t) + "</code>";
  };
  if (g.optimized) {
    h << "<table class=\"lowering\"><tr><th>pinned run (every value requested; right here)</th><th>optimized run "
         "(only the graph's outputs requested)</th></tr><tr><td>"
      << list(g.lowering.pinned) << "</td><td>"
      << (g.lowering.optimized.empty() ? std::string("no fusion reported") : list(g.lowering.optimized))
      << "</td></tr></table>\n";
  } else if (!g.lowering.pinned.empty()) {
    h << "<p>The library ran it as " << list(g.lowering.pinned) << ".</p>\n";
  }
}

// The reproducer's text (written now when the bundle has none), or why there is none.
void write_reproducer(std::ostream& h, const std::string& bundle_dir, std::string note) {
  const fs::path rdir = fs::path(bundle_dir) / "repro";
  if (!fs::exists(rdir) || fs::exists(rdir / "README.txt")) {
    try {
      write_repro(bundle_dir);
    } catch (const core::SystemError&) {  // a full disk stops the report
      throw;
    } catch (const std::exception& e) {
      note = e.what();
    }
  }
  const std::string main = repro_main(rdir.string());
  if (!main.empty()) {
    const std::string text = core::read_file((rdir / main).string());
    h << "<details><summary>Reproducer <code>" << escape((rdir / main).string()) << "</code> (" << text.size() / 1024
      << " KiB)</summary><pre>" << escape(text.size() > 20000 ? text.substr(0, 20000) + "\n... (truncated)" : text)
      << "</pre></details>\n";
  } else if (fs::exists(rdir / "README.txt")) {
    h << "<p>No standalone reproducer: " << escape(core::read_file((rdir / "README.txt").string())) << "</p>\n";
  } else if (!note.empty()) {
    h << "<p>No standalone reproducer: " << escape(note) << "</p>\n";
  }
}

// One root cause: its case, reduction, maps, reproducer, replay and the findings it groups.
void write_root_cause(std::ostream& h, const Group& g, const std::string& anchor) {
  const store::StoredFinding& f = g.findings.front();
  const std::string cls = class_of(g);
  h << "<h3 id=\"" << anchor << "\">" << escape(g.backend) << ": " << escape(g.key) << " <span class=\"" << cls
    << "\">[" << cls << (g.suggested ? ", suggested" : "") << "]</span></h3>\n";
  h << "<p><b>" << escape(g.title) << "</b><br>" << escape(f.detail.empty() ? f.message : f.detail) << "</p>\n";
  write_differences(h, g.diffs);
  write_lowering(h, g);
  if (!g.method.empty() && g.method != "random")
    h << "<p>Found by the " << escape(g.method) << " search (from a model that ran clean on its random inputs).</p>\n";
  const fs::path bundle(f.bundle);
  const fs::path reduced = bundle / "reduced";
  const bool has_reduced = fs::exists(reduced / "model.json");
  const Reduction red = reduction_of(f.bundle);
  if (red.present) {
    h << "<p>Reduced from " << red.nodes_before << " to " << red.nodes_after << " node(s).";
    for (const auto& c : red.causes)
      h << " Cause: <code>" << escape(c.attribute + " = " + c.value) << "</code> (fixed by " << escape(c.fixed_by)
        << ").";
    h << "</p>\n";
  }
  const std::string map_img =
      svg_image((has_reduced ? reduced : bundle) / "map.svg", "localization map of " + f.signature);
  const std::string orig_img =
      has_reduced ? svg_image(bundle / "map.svg", "localization map of the original model") : "";
  if (!map_img.empty())
    h << "<div>Localization map" << (has_reduced ? " (reduced model)" : "") << ":<br>" << map_img << "</div>\n";
  if (!orig_img.empty()) h << "<details><summary>Original model's map</summary>" << orig_img << "</details>\n";
  write_reproducer(h, f.bundle, g.note);
  h << "<p>Replay: <code>" << escape(campaign::replay_command(has_reduced ? reduced.string() : f.bundle))
    << "</code></p>\n";
  if (g.findings.size() > 1) {
    h << "<details><summary>" << g.findings.size() << " findings with this root cause</summary><ul>";
    for (const auto& m : g.findings)
      h << "<li><code>" << escape(m.signature) << "</code> (" << m.hits << " hits, model " << m.first_model << ")</li>";
    h << "</ul></details>\n";
  }
}

// The campaign's coverage (coverage/coverage.h): OLC and its five parts over the models as a plot, and
// per backend its functionality coverage with the operators and losses it maps that no model invoked.
std::string coverage_section(const std::vector<coverage::Fact>& facts, const coverage::CoverageOptions& opt) {
  if (facts.empty()) return "";
  coverage::Coverage cov(opt);
  cov.add(facts);
  std::ostringstream h;
  h << "<h2>Coverage</h2>\n<p>Operator-level coverage of the campaign's models: "
    << escape(coverage::parts_line(cov.parts())) << " (n_maxspc " << opt.n_maxspc << "; <code>quorum coverage</code> "
    << "prints it per operator).</p>\n";
  const auto curve = coverage::coverage_curve(facts, opt, 60);
  if (!curve.empty()) {
    std::vector<Series> series = {{"OLC", "#000000", {}}, {"OTC", "#3366cc", {}}, {"IDC", "#cc3333", {}},
                                  {"ODC", "#228833", {}}, {"SEC", "#aa7700", {}}, {"SPC", "#884499", {}}};
    for (const auto& [models, p] : curve) {
      const double x = static_cast<double>(models), v[] = {p.olc, p.otc, p.idc, p.odc, p.sec, p.spc};
      for (size_t i = 0; i < series.size(); ++i) series[i].points.emplace_back(x, 100 * v[i]);
    }
    h << "<div class=\"plots\">\n" << svg_line_plot("Coverage over models", "models", "%", series) << "</div>\n";
  }
  const auto fn = cov.functionality();
  if (!fn.empty()) {
    h << "<table id=\"functionality\"><tr><th>library</th><th>functionality coverage</th><th>operators and losses "
         "it maps that no model invoked on it</th><th>ONNX exchange forms read (opsets never read)</th><th>optimizer: "
         "what it fused or folded in the optimized runs (models)</th></tr>\n";
    for (const auto& f : fn) {
      std::string never, forms, fused;
      for (const auto& [x, models] : f.fused)
        fused += (fused.empty() ? "" : "; ") + x + " (" + std::to_string(models) + ")";
      for (const auto& u : f.uncovered) never += (never.empty() ? "" : ", ") + u;
      if (!f.opsets.empty()) {
        forms = std::to_string(f.forms.size()) + " forms, opsets";
        for (int o : f.opsets) forms += " " + std::to_string(o);
        const std::string missing = coverage::missing_opsets(f.opsets, ir::kOnnxMinOpset, ir::kOnnxMaxOpset);
        if (!missing.empty()) forms += " (never " + missing + ")";
      }
      h << "<tr><td>" << escape(f.backend) << "</td><td>" << f.invoked << "/" << f.mapped << " ("
        << std::fixed << std::setprecision(1) << 100 * f.share() << "%)</td><td>" << escape(never) << "</td><td>"
        << escape(forms) << "</td><td>" << escape(fused) << "</td></tr>\n";
    }
    h << "</table>\n";
  }
  return h.str();
}

}  // namespace

std::string campaign_report_html(const std::string& campaign_dir, const std::string& store_spec,
                                 const coverage::CoverageOptions& coverage) {
  const fs::path dir(campaign_dir);
  if (store_spec.empty() && !fs::exists(dir / "findings.db"))
    throw core::UserError(campaign_dir + ": not a campaign directory (no findings.db)");
  const std::unique_ptr<store::Store> opened = store::open_store(store_spec, campaign_dir);
  store::Store& store = *opened;
  const auto findings = store.findings();
  const std::map<std::string, Group> groups = root_causes(findings);

  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; style-src "
       "'unsafe-inline'\">\n"
    << "<title>Quorum campaign report: " << escape(campaign_dir) << "</title>\n<style>" << kStyle
    << "</style></head><body>\n";
  h << "<h1>Quorum campaign report</h1>\n<p>Campaign <code>" << escape(fs::absolute(dir).string()) << "</code>: "
    << store.models_done() << " models, " << findings.size() << " unique findings, " << groups.size()
    << " root causes.</p>\n";
  h << "<h2>Setup</h2>\n<table id=\"setup\">";
  for (const char* k : {"generator", "backends", "mode", "dtype", "seed", "loss", "oracle", "max_nodes", "dataset"})
    if (auto v = store.setting(k)) h << "<tr><th>" << escape(k) << "</th><td>" << escape(*v) << "</td></tr>";
  for (const auto& [b, v] : library_versions(findings))
    h << "<tr><th>" << escape(b) << "</th><td>" << escape(v) << "</td></tr>";
  h << "</table>\n";
  h << over_time_plots(store.models_per_second(), findings, groups);
  h << coverage_section(store.coverage(), coverage);
  if (const auto counts = store.backend_counts(); !counts.empty()) {
    // Per backend: the models it ran, refused by reason, and was not sent (docs/findings.md).
    h << "<h2>Backends</h2>\n<p>The campaign's models per backend: ran (sent and not refused; crashed and "
         "failed among them), refused by the backend (no finding; by reason below), not sent because of a "
         "refusal it declared before; its worker's compile and run time.</p>\n<table id=\"backends\"><tr>"
         "<th>library</th><th>ran</th><th>share</th><th>crashed</th><th>failed</th><th>refused</th>"
         "<th>not sent</th><th>worker s</th></tr>\n";
    for (const auto& c : counts) {
      const int64_t all = c.models.ran + c.refused + c.not_sent;
      char share[32];
      std::snprintf(share, sizeof share, "%.1f %%",
                    all ? 100.0 * static_cast<double>(c.models.ran) / static_cast<double>(all) : 0.0);
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%.1f", c.models.seconds);
      h << "<tr><td>" << escape(c.models.backend) << "</td><td>" << c.models.ran << "</td><td>" << share
        << "</td><td>" << c.models.crashed << "</td><td>" << c.models.failed << "</td><td>" << c.refused
        << "</td><td>" << c.not_sent << "</td><td>" << seconds << "</td></tr>\n";
    }
    h << "</table>\n";
  }
  if (const auto refusals = store.refusals(); !refusals.empty()) {
    // What the backends declared they do not run: no findings; the structured ones learned (docs/findings.md).
    h << "<h2>Refusals</h2>\n<p>Why a backend refused models: no findings. A structured refusal (an operator it "
         "declared it does not run) is learned: models holding one were not sent to that backend after the first; "
         "a <code>reason:</code> row is a backend's own words, counted only.</p>\n<table id=\"refusals\"><tr>"
         "<th>library</th><th>does not run</th><th>models refused</th><th>not sent</th><th>catalogue operators</th>"
         "</tr>\n";
    for (const auto& r : refusals)
      h << "<tr><td>" << escape(r.backend) << "</td><td><code>" << escape(r.refusal) << "</code></td><td>"
        << r.refused << "</td><td>" << r.not_sent << "</td><td>" << escape(r.ops) << "</td></tr>\n";
    h << "</table>\n";
  }
  write_summary(h, groups);
  for (const auto& [g, anchor] : write_findings_table(h, groups)) write_root_cause(h, *g, anchor);
  h << "<hr><p>Written by quorum " << QUORUM_VERSION
    << ". Plots and page drawn by Quorum (inline SVG); maps laid out by Graphviz.</p>\n";
  h << "</body></html>\n";
  return h.str();
}

void write_campaign_report(const std::string& campaign_dir, const std::string& out_path, const std::string& store,
                           const coverage::CoverageOptions& coverage) {
  core::write_file_atomic(out_path, campaign_report_html(campaign_dir, store, coverage));
}

}  // namespace quorum::report
