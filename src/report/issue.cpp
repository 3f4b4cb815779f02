// Issue-ready Markdown for one finding.
#include "report/issue.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/cpu.h"
#include "core/fileio.h"
#include "localize/classify.h"
#include "ops/registry.h"
#include "oracle/compare.h"
#include "oracle/known.h"
#include "oracle/node_kernel.h"
#include "report/repro.h"

namespace quorum::report {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

bool wrong(double g, double w, double scale, const ops::Tolerance& t) {
  if (std::isnan(g) || std::isnan(w)) return std::isnan(g) != std::isnan(w);
  if (std::isinf(g) || std::isinf(w)) return g != w;
  return !oracle::element_within(g, w, scale, t);
}

double severity(const Difference& d) {
  if (!std::isfinite(d.expected) || !std::isfinite(d.actual)) return INFINITY;
  return std::fabs(d.actual - d.expected);
}

// The library's display name: the version string's words before the first digit ("oneDNN").
std::string library_name(const backends::ReproCase& c) {
  std::istringstream s(c.library_version);
  std::string w, name;
  while (s >> w && !std::isdigit(static_cast<unsigned char>(w[0]))) name += (name.empty() ? "" : " ") + w;
  return name.empty() ? c.backend : name;
}

std::string stage_words(core::Stage stage) {
  switch (stage) {
    case core::Stage::Forward: return "forward";
    case core::Stage::Backward: return "backward";
    case core::Stage::Loss: return "loss";
    case core::Stage::Optimized: return "optimized";
    case core::Stage::Batch: return "batch relation";
    case core::Stage::Form: return "form relation";
    case core::Stage::Position: return "position relation";
    case core::Stage::Compile: break;
  }
  return "model build";
}

std::string first_line_of_file(const std::string& path, const std::string& key) {
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);)
    if (line.rfind(key, 0) == 0) {
      std::string v = line.substr(key.size());
      if (v.size() > 1 && v.front() == '"') v = v.substr(1, v.size() - 2);
      return v;
    }
  return "";
}

std::string fmt(double v) {
  std::ostringstream s;
  s.precision(9);
  s << v;
  return s.str();
}

}  // namespace

namespace {
int64_t int_field(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}
std::string string_field(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}
}  // namespace

Reduction parse_reduction(const std::string& text) {
  Reduction r;
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return r;
  r.present = true;
  r.nodes_before = int_field(j, "nodes_before");
  r.nodes_after = int_field(j, "nodes_after");
  r.predicate_runs = int_field(j, "predicate_runs");
  const auto one = j.find("one_node");
  r.one_node = one != j.end() && one->is_boolean() && one->get<bool>();
  const auto causes = j.find("causes");
  if (causes != j.end() && causes->is_array())
    for (const auto& c : *causes)
      if (c.is_object())
        r.causes.push_back({string_field(c, "attribute"), string_field(c, "value"), string_field(c, "fixed_by")});
  const auto ri = j.find("random_inputs");
  if (ri != j.end() && ri->is_object()) {
    r.inputs_tried = int_field(*ri, "tried");
    r.inputs_shown = int_field(*ri, "shown");
    r.inputs_verdict = string_field(*ri, "verdict");
  }
  return r;
}

Reduction reduction_of(const std::string& bundle) {
  const fs::path p = fs::path(bundle) / "reduced" / "reduction.json";
  std::error_code ec;
  if (!fs::exists(p, ec)) return {};
  try {
    return parse_reduction(core::read_file(p.string()));
  } catch (const core::UserError&) {  // unreadable
    return {};
  }
}

std::vector<Difference> largest_differences(const backends::ReproCase& c, size_t n) {
  std::vector<Difference> out;
  auto scan = [&](const std::string& v, const core::Tensor& want, const core::Tensor& got) {
    if (!want.defined() || !got.defined() || want.numel() != got.numel()) return;
    const double scale = oracle::tolerance_scale(want);
    for (int64_t i = 0; i < want.numel(); ++i)
      if (wrong(got.get(i), want.get(i), scale, c.tol)) out.push_back({v, i, want.get(i), got.get(i)});
  };
  const ir::Node* node = c.blamed();
  if (c.backward() && node) {
    for (const auto& [v, want] : c.node_grads) {
      const auto it = c.actual_grads.find(v);
      if (it != c.actual_grads.end()) scan("d/d " + v, want, it->second);
    }
  } else {
    std::vector<std::string> values;
    if (node) values = node->outputs;
    for (const auto& o : c.model.outputs)
      if (std::find(values.begin(), values.end(), o) == values.end()) values.push_back(o);
    for (const auto& v : values) {
      const auto w = c.expected.find(v);
      const auto g = c.actual.find(v);
      if (w != c.expected.end() && g != c.actual.end()) scan(v, w->second, g->second);
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Difference& a, const Difference& b) { return severity(a) > severity(b); });
  if (out.size() > n) out.resize(n);
  return out;
}

Classification classify(const backends::ReproCase& c) {
  Classification k;
  if (!c.known.empty()) {
    const oracle::Ledger ledger = oracle::load_ledgers(oracle::default_ledger_dir());
    for (const auto& e : ledger.entries)
      if (e.id == c.known) {
        k.cls = e.cls;
        k.explanation = e.note;
        k.link = e.link;
        return k;
      }
  }
  k.cls = "unclassified";
  const Reduction r = reduction_of(c.bundle);
  std::string causes;
  std::vector<std::string> cause_attrs;
  for (const auto& cause : r.causes) {
    causes += (causes.empty() ? "" : "; ") + cause.attribute + " = " + cause.value +
              " (the discrepancy disappears with " + cause.fixed_by + ")";
    cause_attrs.push_back(cause.attribute);
  }
  std::string localized;
  if (!causes.empty()) localized = " Localized parameter: " + causes + ".";
  else if (r.one_node)
    localized = " No single parameter change removes it: the operator fails for these inputs whatever its parameters.";
  if (r.inputs_tried > 0)
    localized += " On fresh random inputs it shows " + std::to_string(r.inputs_shown) + " of " +
                 std::to_string(r.inputs_tried) + " times: a problem for " + r.inputs_verdict + ".";
  // Quorum's suggestion, from the blamed node's recorded operands and results.
  if (const ir::Node* n = c.blamed()) {
    const ops::OpSpec& spec = ops::op(n->op);
    std::vector<core::Tensor> operands, got;
    bool have = true;
    for (const auto& v : n->inputs) {
      const auto it = c.expected.find(v);
      if (it == c.expected.end()) have = false;
      else operands.push_back(it->second);
    }
    oracle::Kernel kernel;
    if (c.backward()) {
      std::vector<core::Tensor> incoming;
      for (const auto& o : n->outputs) {
        const auto it = c.incoming.find(o);
        if (it == c.incoming.end()) have = false;
        else incoming.push_back(it->second);
      }
      std::vector<size_t> judged;  // inputs with a gradient the library returned
      for (size_t i = 0; i < n->inputs.size(); ++i)
        if (c.node_grads.count(n->inputs[i]) && c.actual_grads.count(n->inputs[i])) {
          judged.push_back(i);
          got.push_back(c.actual_grads.at(n->inputs[i]));
        }
      have &= spec.differentiable() && !judged.empty();
      kernel = oracle::backward_kernel(*n, incoming, judged);
    } else {
      for (const auto& o : n->outputs) {
        const auto it = c.actual.find(o);
        if (it == c.actual.end()) have = false;
        else got.push_back(it->second);
      }
      kernel = oracle::forward_kernel(*n);
    }
    if (have || c.kind != core::FindingKind::Inconsistency) {
      const localize::ClassGuess guess =
          localize::guess_class(c.kind, *n, kernel, operands, got, c.tol, c.dtype, cause_attrs);
      k.cls = guess.cls;
      k.suggested = true;
      k.explanation = "Suggested by Quorum (not in its known-issue ledger yet; confirm before filing): " + guess.why +
                      "." + localized;
      return k;
    }
  } else if (c.crash()) {
    k.cls = "bug";
    k.suggested = true;
    k.explanation =
        "Suggested by Quorum (not in its known-issue ledger yet): the library fails on a model the catalogue defines.";
    return k;
  }
  k.explanation = "Not in Quorum's known-issue ledger yet: decide whether it is a library bug, a convention "
                  "difference or float32 precision before filing." + localized;
  return k;
}

LoweringSides lowering_sides(const backends::ReproCase& c) {
  LoweringSides s;
  for (const auto& x : c.lowering) {
    const std::string fused = backends::fused_entry(x);
    if (c.stage == core::Stage::Optimized && !fused.empty()) s.optimized.push_back(fused);
    else s.pinned.push_back(x);
  }
  return s;
}

std::string issue_title(const backends::ReproCase& c) {
  std::string what;
  const std::string op = c.op.empty() ? "the model" : c.op;
  if (c.crash())
    what = (c.stage == core::Stage::Compile ? "building the model fails: " : "running the model fails: ") +
           c.detail.substr(0, 80);
  else
    what = op + " " + core::info(c.kind).what;
  return library_name(c) + ": " + what + " (" + stage_words(c.stage) + ", " + core::to_string(c.dtype) + ")";
}

std::string issue_markdown(const std::string& bundle_dir) {
  const backends::ReproCase c = load_repro_case(bundle_dir);
  const fs::path repro_dir = fs::path(bundle_dir) / "repro";
  Repro repro;
  repro.dir = repro_dir.string();
  if (!fs::exists(repro_dir)) repro = write_repro(bundle_dir);
  std::string main;
  if (fs::exists(repro_dir / "README.txt")) repro.reason = core::read_file((repro_dir / "README.txt").string());
  else main = repro_main(repro_dir.string());
  const Classification k = classify(c);
  std::ostringstream md;
  md << "# " << issue_title(c) << "\n\n";
  md << "## Environment\n\n";
  md << "- Library: " << c.library_version << "\n";
  md << "- OS: " << first_line_of_file("/etc/os-release", "PRETTY_NAME=") << ", " << core::cpu_model() << "\n";
  md << "- Data type: " << core::to_string(c.dtype) << "\n\n";
  md << "## What happens\n\n";
  md << (c.detail.empty() ? c.signature : c.detail) << ".\n\n";
  if (const ir::Node* n = c.blamed()) {
    md << "Operator `" << n->op << "` (node `" << n->name << "`";
    for (const auto& [name, v] : n->attrs) md << ", " << name << " = " << core::to_string(v);
    md << "); the model has " << c.model.nodes.size() << " node" << (c.model.nodes.size() == 1 ? "" : "s") << ".\n\n";
  }
  const LoweringSides sides = lowering_sides(c);
  auto list = [&](const std::vector<std::string>& v) {
    for (size_t i = 0; i < v.size(); ++i) md << (i ? ", " : " ") << "`" << v[i] << "`";
  };
  if (c.stage == core::Stage::Optimized) {
    md << "| run | what the library ran |\n| --- | --- |\n| optimized (only the graph's outputs requested) |";
    list(sides.optimized.empty() ? std::vector<std::string>{"no fusion reported"} : sides.optimized);
    md << " |\n| pinned (every value requested; right here) |";
    list(sides.pinned);
    md << " |\n\n";
  } else if (!sides.pinned.empty()) {
    md << "The library ran it as:";
    list(sides.pinned);
    md << ".\n\n";
  }
  const auto diffs = largest_differences(c, 8);
  if (!diffs.empty()) {
    md << "## Expected versus actual\n\n";
    md << "Expected: float64 on the same float32 operands; tolerance atol " << c.tol.atol
       << " (times max(1, max |expected|)), rtol " << c.tol.rtol << ".\n\n";
    md << "| value | element | expected | actual |\n| --- | --- | --- | --- |\n";
    for (const auto& d : diffs)
      md << "| `" << d.value << "` | " << d.index << " | " << fmt(d.expected) << " | " << fmt(d.actual) << " |\n";
    md << "\n";
  }
  md << "## Classification\n\n**" << k.cls << "**" << (k.suggested ? " (suggested)" : "") << ". " << k.explanation
     << "\n";
  if (!k.link.empty()) md << "\nSee also: " << k.link << "\n";
  md << "\n## Minimal reproducer\n\n";
  if (main.empty()) {
    md << "No standalone program for this case: " << repro.reason << "\n";
  } else {
    const std::string text = core::read_file((repro_dir / main).string());
    const std::string lang = main.substr(main.rfind('.') + 1) == "py" ? "python" : "cpp";
    std::string build;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
      if (line.find("Build and run: ") != std::string::npos) {
        build = line.substr(line.find("Build and run: ") + 15);
        break;
      }
    md << "Uses only the library's own API; exits 1 while the problem shows. Files in `" << repro_dir.string() << "`";
    if (!build.empty()) md << "; build and run: `" << build << "`";
    md << ".\n\n";
    if (text.size() <= 6000) md << "```" << lang << "\n" << text << (text.back() == '\n' ? "" : "\n") << "```\n";
    else md << "(" << main << " is " << text.size() / 1024 << " KiB with its embedded data; attach it.)\n";
  }
  md << "\n## How it was found\n\n";
  md << "Quorum " << c.quorum_version << " (differential testing of deep-learning libraries against a float64 "
     << "reference) found it with seed " << c.seed << ", model " << c.model_index
     << (c.method == "random" ? "" : ", by its " + c.method + " search over the model's inputs and weights")
     << " (finding `" << c.signature << "`).";
  if (!c.origin.empty()) md << " The model came from " << c.origin << ".";
  const Reduction r = reduction_of(bundle_dir);
  if (r.present)
    md << " Reduced from " << r.nodes_before << " to " << r.nodes_after << " node(s) in " << r.predicate_runs
       << " runs.";
  md << " Replay: `" << c.replay << "`\n";
  return md.str();
}

}  // namespace quorum::report
