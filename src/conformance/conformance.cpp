// quorum conformance: the ONNX conformance suite on the reference and on every backend's worker.
#include "conformance/conformance.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <set>
#include <sstream>

#include "backends/backend.h"
#include "core/error.h"
#include "core/fileio.h"
#include "ir/onnx_io.h"
#include "ref/interpreter.h"

namespace quorum::conformance {

namespace fs = std::filesystem;
using core::UserError;

const std::vector<std::string>& conformance_folders() {
  static const std::vector<std::string> f = {"node", "pytorch-converted", "pytorch-operator", "simple"};
  return f;
}

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::Pass: return "pass";
    case Verdict::Fail: return "fail";
    case Verdict::Unsupported: return "unsupported";
  }
  return "?";
}

namespace {

std::string pb(const fs::path& p) { return core::read_file(p.string()); }

// Why an import failure puts a test outside the catalogue (no catalogue operator or data type to
// test), or "" when it is a catalogue operator in a form the catalogue cannot express.
std::string outside_reason(const std::string& message) {
  for (const char* key : {"operator not in the catalogue", "element type", "data type", "is not a tensor",
                          "must be floating point", "no default-domain opset"}) {
    const size_t at = message.find(key);
    if (at == std::string::npos) continue;
    // Drop the path: keep "node 'X' (Op): ..." or the part naming the value.
    const size_t node = message.find("node '");
    return node != std::string::npos ? message.substr(node) : message.substr(message.find(": ") + 2);
  }
  return "";
}

std::string row_of(const std::vector<std::string>& op_types) {
  std::vector<std::string> seen;
  for (const auto& t : op_types)
    if (t != "Constant" && std::find(seen.begin(), seen.end(), t) == seen.end()) seen.push_back(t);
  if (seen.empty()) seen.push_back("Constant");
  std::string s;
  for (const auto& t : seen) s += (s.empty() ? "" : "+") + t;
  return s;
}

std::string sci(double v) {
  std::ostringstream os;
  os << std::scientific << std::setprecision(1) << v;
  return os.str();
}

// Every element within atol + rtol*|want| (NaN matches NaN, infinities must be equal), or the worst
// element. Shapes must be equal.
Cell compare(const core::Tensor& got, const core::Tensor& want, double rtol, double atol) {
  Cell c;
  if (got.shape() != want.shape()) {
    c.verdict = Verdict::Fail;
    c.detail = "shape " + core::to_string(got.shape()) + ", expected " + core::to_string(want.shape());
    c.worst = INFINITY;
    return c;
  }
  int64_t worst_at = -1;
  double worst_excess = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.get(i), w = want.get(i);
    if (std::isnan(g) && std::isnan(w)) continue;
    if (std::isinf(w) && g == w) continue;
    const double d = std::abs(g - w);
    const double excess = std::isnan(d) ? INFINITY : d - (atol + rtol * std::abs(w));
    if (excess > 0 && (worst_at < 0 || excess > worst_excess)) {
      worst_at = i;
      worst_excess = excess;
    }
    if (!std::isnan(d)) c.worst = std::max(c.worst, d);
  }
  if (worst_at < 0) {
    c.worst = 0;
    return c;
  }
  const double g = got.get(worst_at), w = want.get(worst_at);
  c.verdict = Verdict::Fail;
  if (std::isnan(g - w)) c.worst = INFINITY;
  std::ostringstream os;
  os << "max |diff| " << sci(c.worst) << "; element " << worst_at << ": got " << g << ", expected " << w;
  c.detail = os.str();
  return c;
}

// The worst cell of several outputs or data sets: any failure beats a pass, the larger error wins.
void keep_worst(Cell& acc, const Cell& c) {
  if (c.verdict == Verdict::Pass) return;
  if (acc.verdict == Verdict::Pass || (acc.verdict == c.verdict && c.worst > acc.worst) ||
      (c.verdict == Verdict::Fail && acc.verdict != Verdict::Fail))
    acc = c;
}

Cell compare_outputs(const backends::ValueMap& got, const ConformanceSet& s, const ConformanceOptions& opt) {
  Cell acc;
  for (size_t i = 0; i < s.expected.size() && i < s.graph.outputs.size(); ++i) {
    const std::string& name = s.graph.outputs[i];
    if (!got.count(name)) {
      keep_worst(acc, Cell{Verdict::Fail, "output '" + name + "' not returned", INFINITY});
      continue;
    }
    Cell c = compare(got.at(name), s.expected[i], opt.rtol, opt.atol);
    if (c.verdict == Verdict::Fail) c.detail = "output " + std::to_string(i) + ": " + c.detail;
    keep_worst(acc, c);
  }
  return acc;
}

core::DType dtype_of(const ir::Graph& g) {
  for (const auto& in : g.inputs)
    if (in.type.dtype == core::DType::F64) return core::DType::F64;
  return core::DType::F32;
}

Cell run_backend(worker::Worker& w, const ConformanceSet& s, const ConformanceOptions& opt) {
  if (s.graph.nodes.empty()) return Cell{Verdict::Unsupported, "no operator to run: the outputs are constants", 0};
  std::vector<worker::NodeSupport> support;
  worker::Outcome out = w.supports(s.graph, false, support);
  if (!out.ok()) return Cell{Verdict::Fail, out.str(), INFINITY};
  for (const auto& ns : support)
    if (!ns.ok) return Cell{Verdict::Unsupported, "node '" + ns.node + "': " + ns.reason, 0};
  const core::DType dt = dtype_of(s.graph);
  out = w.compile(s.graph, backends::CompileOptions{dt, 1});
  // A library without float64 refuses float64 models when it builds them: that test is not for it.
  if (!out.ok() && dt == core::DType::F64 && out.status == worker::Status::ConversionFailure)
    return Cell{Verdict::Unsupported, "float64 model refused: " + out.message, 0};
  if (!out.ok()) return Cell{Verdict::Fail, out.str(), INFINITY};
  backends::ValueMap inputs, got;
  for (const auto& [name, t] : s.inputs) inputs.emplace(name, t.to(dt));
  out = w.forward(inputs, false, got);
  // A library that builds the model when it runs it (exec) may declare an operator unsupported there.
  if (out.status == worker::Status::Unsupported) return Cell{Verdict::Unsupported, out.message, 0};
  if (!out.ok()) return Cell{Verdict::Fail, out.str(), INFINITY};
  return compare_outputs(got, s, opt);
}

std::vector<std::string> list_tests(const ConformanceOptions& opt) {
  if (!fs::is_directory(opt.suite))
    throw UserError("--suite " + opt.suite +
                    ": not a directory (the ONNX conformance suite comes with libonnx-testdata)");
  std::vector<std::string> tests;
  for (const auto& folder : conformance_folders()) {
    const fs::path dir = fs::path(opt.suite) / folder;
    if (!fs::is_directory(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = folder + "/" + e.path().filename().string();
      if (!fs::exists(e.path() / "model.onnx")) continue;
      if (!opt.filter.empty() && name.find(opt.filter) == std::string::npos) continue;
      tests.push_back(name);
    }
  }
  std::sort(tests.begin(), tests.end());
  if (tests.empty()) throw UserError("--suite " + opt.suite + ": no conformance test" +
                                     (opt.filter.empty() ? "" : " matches --filter " + opt.filter));
  return tests;
}

bool glob_match(const std::string& pattern, const std::string& s) {
  // '*' matches any run of characters; everything else matches itself.
  size_t p = 0, i = 0, star = std::string::npos, mark = 0;
  while (i < s.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = i;
    } else if (p < pattern.size() && pattern[p] == s[i]) {
      ++p;
      ++i;
    } else if (star != std::string::npos) {
      p = star + 1;
      i = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

const std::string* exception_for(const std::string& test) {
  for (const auto& [pattern, reason] : reference_exceptions())
    if (glob_match(pattern, test)) return &reason;
  return nullptr;
}

}  // namespace

ConformanceSet load_conformance_set(const std::string& dir, int k) {
  const fs::path d(dir);
  const std::string model = (d / "model.onnx").string();
  const std::string bytes = core::read_file(model);
  const ir::OnnxSummary summary = ir::onnx_summary(bytes, model);
  const fs::path data = d / ("test_data_set_" + std::to_string(k));
  // Inputs in graph-input order; a TensorProto without a name is the i-th graph input. Read only
  // once the model imports: the inputs of models outside the catalogue may be sequences or optionals.
  std::vector<std::pair<std::string, core::Tensor>> given;
  auto read_inputs = [&] {
    for (size_t i = 0; fs::exists(data / ("input_" + std::to_string(i) + ".pb")); ++i) {
      const fs::path p = data / ("input_" + std::to_string(i) + ".pb");
      std::string name;
      core::Tensor t = ir::tensor_from_onnx(pb(p), p.string(), &name);
      if (name.empty() && i < summary.inputs.size()) name = summary.inputs[i];
      given.emplace_back(name, t);
    }
  };
  ConformanceSet s;
  try {
    s.graph = ir::graph_from_onnx(bytes, model);
    read_inputs();
  } catch (const UserError& e) {
    // Values the catalogue takes as attributes (a shape, axes, bounds, scales) arrive as graph
    // inputs in many tests: every input but the first becomes a constant.
    if (std::string(e.what()).find("must be a constant") == std::string::npos) throw;
    read_inputs();
    if (given.size() < 2) throw;
    std::map<std::string, core::Tensor> constants(given.begin() + 1, given.end());
    s.graph = ir::graph_from_onnx(bytes, model, constants);
  }
  for (const auto& gi : s.graph.inputs) {
    bool found = false;
    for (const auto& [name, t] : given)
      if (name == gi.name) {
        s.inputs[name] = t;
        found = true;
      }
    if (!found) throw UserError(data.string() + ": no input data for graph input '" + gi.name + "'");
  }
  for (size_t i = 0; fs::exists(data / ("output_" + std::to_string(i) + ".pb")); ++i) {
    const fs::path p = data / ("output_" + std::to_string(i) + ".pb");
    s.expected.push_back(ir::tensor_from_onnx(pb(p), p.string()));
  }
  if (s.expected.size() != s.graph.outputs.size())
    throw UserError(data.string() + ": " + std::to_string(s.expected.size()) + " expected outputs for " +
                    std::to_string(s.graph.outputs.size()) + " graph outputs");
  return s;
}

ConformanceReport run_conformance(const ConformanceOptions& opt, const std::function<void(size_t, size_t)>& progress) {
  const std::vector<std::string> tests = list_tests(opt);
  ConformanceReport r;
  r.columns.push_back("ref");
  r.versions.push_back(std::string("quorum-ref ") + QUORUM_VERSION + " (float64)");
  worker::WorkerSet workers(opt.backends, opt.limits);
  for (size_t b = 0; b < opt.backends.size(); ++b) {
    r.columns.push_back(opt.backends[b].str());
    worker::BackendInfo info;
    const worker::Outcome hello = workers.at(b).hello(info);
    r.versions.push_back(hello.ok() ? info.version : "unavailable: " + hello.str());
  }
  for (size_t t = 0; t < tests.size(); ++t) {
    const std::string& name = tests[t];
    const fs::path dir = fs::path(opt.suite) / name;
    std::string row = "?";
    try {
      row = row_of(ir::onnx_summary(core::read_file((dir / "model.onnx").string()), name).op_types);
    } catch (const UserError& e) {
      r.outside.push_back({name, row, e.what()});
      continue;
    }
    int sets = 0;
    while (fs::is_directory(dir / ("test_data_set_" + std::to_string(sets)))) ++sets;
    TestResult res{name, row, std::vector<Cell>(r.columns.size())};
    bool outside = false;
    for (int k = 0; k < sets && !outside; ++k) {
      ConformanceSet s;
      try {
        s = load_conformance_set(dir.string(), k);
      } catch (const UserError& e) {
        const std::string why = outside_reason(e.what());
        if (!why.empty()) {
          r.outside.push_back({name, row, why});
          outside = true;
          break;
        }
        // A catalogue operator in a form the catalogue cannot express: nobody runs it.
        const std::string msg = e.what();
        const size_t node = msg.find("node '");
        const std::string reason = node != std::string::npos ? msg.substr(node) : msg;
        for (size_t c = 0; c < res.cells.size(); ++c)
          res.cells[c] = Cell{Verdict::Unsupported, c == 0 ? reason : "not imported", 0};
        break;
      }
      try {
        keep_worst(res.cells[0], compare_outputs(ref::forward(s.graph, s.inputs), s, opt));
      } catch (const std::exception& e) {
        keep_worst(res.cells[0], Cell{Verdict::Fail, std::string("reference threw: ") + e.what(), INFINITY});
      }
      for (size_t b = 0; b < opt.backends.size(); ++b) keep_worst(res.cells[b + 1], run_backend(workers.at(b), s, opt));
    }
    if (!outside) r.results.push_back(std::move(res));
    if (progress) progress(t + 1, tests.size());
  }
  return r;
}

std::vector<std::string> unexplained_reference_failures(const ConformanceReport& r) {
  std::vector<std::string> out;
  for (const auto& t : r.results)
    if (t.cells[0].verdict != Verdict::Pass && !exception_for(t.test)) out.push_back(t.test + ": " + t.cells[0].detail);
  return out;
}

std::vector<std::string> stale_exceptions(const ConformanceReport& r) {
  std::vector<std::string> out;
  for (const auto& [pattern, reason] : reference_exceptions()) {
    bool used = false;
    for (const auto& t : r.results) used |= t.cells[0].verdict != Verdict::Pass && glob_match(pattern, t.test);
    if (!used) out.push_back(pattern);
  }
  return out;
}

namespace {

struct RowStats {
  int pass = 0, fail = 0, unsupported = 0;
  double worst = 0;
};

std::map<std::string, std::vector<RowStats>> by_row(const ConformanceReport& r) {
  std::map<std::string, std::vector<RowStats>> rows;
  for (const auto& t : r.results) {
    auto& v = rows[t.row];
    v.resize(r.columns.size());
    for (size_t c = 0; c < t.cells.size(); ++c) {
      RowStats& s = v[c];
      switch (t.cells[c].verdict) {
        case Verdict::Pass: ++s.pass; break;
        case Verdict::Fail:
          ++s.fail;
          s.worst = std::max(s.worst, t.cells[c].worst);
          break;
        case Verdict::Unsupported: ++s.unsupported; break;
      }
    }
  }
  return rows;
}

// "3 pass", "2 pass 1 fail (4.1e-02)", "1 unsup"
std::string cell_text(const RowStats& s) {
  std::string out;
  auto add = [&](int n, const std::string& w) {
    if (n) out += (out.empty() ? "" : " ") + std::to_string(n) + " " + w;
  };
  add(s.pass, "pass");
  add(s.fail, "fail");
  if (s.fail) out += std::isinf(s.worst) ? " (crash/error)" : " (" + sci(s.worst) + ")";
  add(s.unsupported, "unsup");
  return out;
}

std::string totals(const ConformanceReport& r, size_t c) {
  int p = 0, f = 0, u = 0;
  for (const auto& t : r.results) {
    const Verdict v = t.cells[c].verdict;
    p += v == Verdict::Pass;
    f += v == Verdict::Fail;
    u += v == Verdict::Unsupported;
  }
  return std::to_string(p) + " pass, " + std::to_string(f) + " fail, " + std::to_string(u) + " unsupported";
}

}  // namespace

std::string conformance_text(const ConformanceReport& r) {
  const auto rows = by_row(r);
  size_t w0 = 8;
  for (const auto& [row, v] : rows) w0 = std::max(w0, row.size());
  std::vector<size_t> w(r.columns.size());
  for (size_t c = 0; c < w.size(); ++c) {
    w[c] = r.columns[c].size();
    for (const auto& [row, v] : rows) w[c] = std::max(w[c], cell_text(v[c]).size());
  }
  std::ostringstream os;
  os << std::left << std::setw(static_cast<int>(w0 + 2)) << "operator";
  for (size_t c = 0; c < w.size(); ++c) os << std::setw(static_cast<int>(w[c] + 2)) << r.columns[c];
  os << "\n";
  for (const auto& [row, v] : rows) {
    os << std::setw(static_cast<int>(w0 + 2)) << row;
    for (size_t c = 0; c < w.size(); ++c) os << std::setw(static_cast<int>(w[c] + 2)) << cell_text(v[c]);
    os << "\n";
  }
  os << "\n";
  for (size_t c = 0; c < r.columns.size(); ++c)
    os << r.columns[c] << ": " << totals(r, c) << "  [" << r.versions[c] << "]\n";
  os << r.outside.size() << " tests outside the catalogue (operator or data type) not run\n";
  for (const auto& t : r.results)
    for (size_t c = 0; c < t.cells.size(); ++c)
      if (t.cells[c].verdict == Verdict::Fail)
        os << "fail  " << r.columns[c] << "  " << t.test << "  " << t.cells[c].detail << "\n";
  return os.str();
}

std::string conformance_markdown(const ConformanceReport& r, const std::string& command_line) {
  const auto rows = by_row(r);
  auto esc = [](std::string s) {
    for (size_t i = 0; (i = s.find('|', i)) != std::string::npos; i += 2) s.replace(i, 1, "\\|");
    for (char& ch : s)
      if (ch == '\n') ch = ' ';
    return s;
  };
  std::ostringstream os;
  os << "# ONNX conformance\n\n"
     << "Generated by `" << command_line << "` from the ONNX conformance suite of Debian's `libonnx-testdata` ("
     << "folders ";
  for (size_t i = 0; i < conformance_folders().size(); ++i)
    os << (i ? ", " : "") << "`" << conformance_folders()[i] << "`";
  os << "). Do not edit by hand: run the command again.\n\n"
     << "Each test whose operators the catalogue has is imported (inputs the catalogue takes as attributes - "
     << "shapes, axes, bounds, scales - become constants), run on the float64 reference and on each backend in the "
     << "precision of its inputs, and compared with the suite's expected outputs element by element within "
     << "|got - expected| <= 1e-7 + 1e-3 |expected| (ONNX's own backend-test tolerance). A cell counts tests: "
     << "pass, fail (with the largest absolute error of any failing test; \"crash/error\" when a test ended in an "
     << "outcome instead of numbers) and unsup (the backend or the catalogue cannot express the test's form; a "
     << "float64 test counts as unsup on a library that refuses float64 models when it builds them).\n\n";
  os << "| column | library |\n| --- | --- |\n";
  for (size_t c = 0; c < r.columns.size(); ++c)
    os << "| " << esc(r.columns[c]) << " | " << esc(r.versions[c]) << "; " << totals(r, c) << " |\n";
  os << "\n## Operator x backend\n\n| ONNX operator |";
  for (const auto& c : r.columns) os << " " << esc(c) << " |";
  os << "\n| --- |";
  for (size_t c = 0; c < r.columns.size(); ++c) os << " --- |";
  os << "\n";
  for (const auto& [row, v] : rows) {
    os << "| " << esc(row) << " |";
    for (const auto& s : v) os << " " << cell_text(s) << " |";
    os << "\n";
  }
  os << "\n## Reference exceptions\n\n"
     << "Tests of catalogue operators the reference does not pass, each with the reason (a real semantic "
        "difference or a form the catalogue does not model). Any other reference failure makes the command exit 1.\n\n"
     << "| test | reference | reason |\n| --- | --- | --- |\n";
  for (const auto& t : r.results) {
    if (t.cells[0].verdict == Verdict::Pass) continue;
    const std::string* why = exception_for(t.test);
    os << "| " << esc(t.test) << " | " << to_string(t.cells[0].verdict) << ": " << esc(t.cells[0].detail) << " | "
       << esc(why ? *why : "UNEXPLAINED (a Quorum bug)") << " |\n";
  }
  os << "\n## Backend failures\n\n"
     << "Every failing (test, backend) pair: the worst output difference, or the outcome.\n\n"
     << "| test | backend | worst error or outcome |\n| --- | --- | --- |\n";
  for (const auto& t : r.results)
    for (size_t c = 1; c < t.cells.size(); ++c)
      if (t.cells[c].verdict == Verdict::Fail)
        os << "| " << esc(t.test) << " | " << esc(r.columns[c]) << " | " << esc(t.cells[c].detail) << " |\n";
  // Why each library does not run the tests it skips: the reason without the node's name, counted.
  os << "\n## Why backends skip tests\n\n"
     << "The reasons the libraries give (their `supports()` rules; see each backend's `known_differences.json`) for "
        "the tests counted as unsup above, with the number of tests (tests the catalogue cannot express are in the "
        "reference exceptions).\n\n| backend | tests | reason |\n| --- | --- | --- |\n";
  for (size_t c = 1; c < r.columns.size(); ++c) {
    std::map<std::string, int> reasons;
    for (const auto& t : r.results) {
      const Cell& cell = t.cells[c];
      if (cell.verdict != Verdict::Unsupported || t.cells[0].verdict != Verdict::Pass) continue;
      std::string why = cell.detail;
      if (why.rfind("node '", 0) == 0)
        if (const size_t end = why.find("': "); end != std::string::npos) why = why.substr(end + 3);
      ++reasons[why];
    }
    std::vector<std::pair<int, std::string>> sorted;
    for (const auto& [why, n] : reasons) sorted.emplace_back(-n, why);
    std::sort(sorted.begin(), sorted.end());
    for (const auto& [n, why] : sorted) os << "| " << esc(r.columns[c]) << " | " << -n << " | " << esc(why) << " |\n";
  }
  std::map<std::string, int> outside_rows;
  for (const auto& t : r.outside) ++outside_rows[t.row];
  os << "\n## Not run: outside the catalogue\n\n"
     << r.outside.size() << " tests use an operator or a data type the catalogue does not have, by ONNX operator "
     << "(tests): ";
  bool first = true;
  for (const auto& [row, n] : outside_rows) {
    os << (first ? "" : ", ") << esc(row) << " (" << n << ")";
    first = false;
  }
  os << ".\n";
  return os.str();
}

}  // namespace quorum::conformance
