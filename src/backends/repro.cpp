#include "backends/repro.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/fileio.h"

namespace quorum::backends {

const ir::Node* ReproCase::blamed() const {
  for (const auto& n : model.nodes)
    if (n.name == node) return &n;
  // A crash names no node; reduced to one, that node is the one that crashed.
  if (node.empty() && crash() && model.nodes.size() == 1) return &model.nodes[0];
  return nullptr;
}

std::string c_literal(double v, bool single) {
  if (std::isnan(v)) return "NAN";
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "-INFINITY";
  char buf[64];
  if (single)
    std::snprintf(buf, sizeof buf, "%af", static_cast<double>(static_cast<float>(v)));
  else
    std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

std::string c_array(const std::string& name, const core::Tensor& t, bool single) {
  std::ostringstream s;
  const auto v = t.values();
  s << "static const " << (single ? "float " : "double ") << name << "[" << (v.empty() ? 1 : v.size())
    << "] = {";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i % 8 == 0) s << "\n    ";
    s << c_literal(v[i], single) << (i + 1 < v.size() ? ", " : "");
  }
  if (v.empty()) s << "0";
  s << "};\n";
  return s.str();
}

std::string py_literal(double v) {
  if (std::isnan(v)) return "float('nan')";
  if (std::isinf(v)) return v > 0 ? "float('inf')" : "-float('inf')";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string quoted(const std::string& s) {
  std::string o = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\';
    if (ch == '\n') {
      o += "\\n";
      continue;
    }
    o += ch;
  }
  return o + "\"";
}

std::string identifier(const std::string& value) {
  std::string s;
  for (char ch : value) s += (std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_');
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "v_" + s;
  return s;
}

std::string repro_header(const ReproCase& c, const std::string& p, const std::string& build_and_run) {
  std::ostringstream s;
  std::string what = std::string(core::to_string(c.kind)) + " at " +
                     (c.stage == core::Stage::Compile ? "model build" : core::to_string(c.stage)) +
                     (c.op.empty() ? "" : " in " + c.op) + (c.node.empty() ? "" : " (node '" + c.node + "')");
  s << p << " Standalone reproducer: " << c.backend << " — " << what << "\n";
  s << p << " Library: " << c.library_version << "\n";
  if (!c.detail.empty()) s << p << " Found: " << c.detail << "\n";
  if (!c.known.empty()) s << p << " Known-issue ledger entry: " << c.known << "\n";
  s << p << " Expected values: Quorum's float64 reference on the same float32 operands;";
  s << " tolerance atol " << c.tol.atol << " (times max(1, max |expected|)), rtol " << c.tol.rtol << ".\n";
  s << p << " Exit status: 1 while the discrepancy shows, 0 once fixed.\n";
  s << p << " Build and run: " << build_and_run << "\n";
  s << p << " From Quorum " << c.quorum_version << " finding " << c.signature << " (seed " << c.seed
    << ", model " << c.model_index << "); replay: " << c.replay << "\n";
  return s.str();
}

void write_repro_file(ReproProgram& p, const std::string& dir, const std::string& name, const std::string& text) {
  core::write_file_atomic(dir + "/" + name, text);
  p.files.push_back(name);
}

std::string cpp_check_function() {
  return R"CPP(// Compares `got` (the library) with `want` (float64 reference): an element is wrong when exactly one
// of them is NaN, when their infinities differ, or when |got - want| > atol * s + rtol * |want|, with
// s = max(1, max |want|) over the finite expected values (how Quorum's oracle scales atol).
// Prints the count and the largest differences; returns the number of wrong elements.
static int quorum_check(const char* what, const float* got, const double* want, size_t n,
                        double atol, double rtol) {
  double s = 1;
  for (size_t i = 0; i < n; ++i)
    if (std::isfinite(want[i]) && std::fabs(want[i]) > s) s = std::fabs(want[i]);
  atol *= s;
  size_t bad = 0, shown = 0;
  double worst = 0;
  size_t worst_i = 0;
  for (size_t i = 0; i < n; ++i) {
    const double g = got[i], w = want[i];
    bool wrong;
    if (std::isnan(g) || std::isnan(w)) wrong = std::isnan(g) != std::isnan(w);
    else if (std::isinf(g) || std::isinf(w)) wrong = g != w;
    else wrong = std::fabs(g - w) > atol + rtol * std::fabs(w);
    if (!wrong) continue;
    ++bad;
    const double d = (std::isfinite(g) && std::isfinite(w)) ? std::fabs(g - w) : INFINITY;
    if (d > worst || bad == 1) { worst = d; worst_i = i; }
    if (shown < 8) {
      std::printf("  %s[%zu]: expected %.9g, actual %.9g\n", what, i, w, g);
      ++shown;
    }
  }
  if (bad)
    std::printf("%s: %zu of %zu elements differ (largest at [%zu]: expected %.9g, actual %.9g)\n", what,
                bad, n, worst_i, want[worst_i], (double)got[worst_i]);
  else
    std::printf("%s: all %zu elements as expected\n", what, n);
  return (int)bad;
}
)CPP";
}

std::string py_check_function() {
  return R"PY(def quorum_check(what, got, want, atol, rtol):
    """Elements wrong: exactly one NaN, different infinities, or |got - want| > atol*s + rtol*|want|
    with s = max(1, max |want|) over the finite expected values (how Quorum's oracle scales atol)."""
    import numpy as np
    got = np.asarray(got, dtype=np.float64).reshape(-1)
    want = np.asarray(want, dtype=np.float64).reshape(-1)
    if got.shape != want.shape:
        print(f"{what}: shape differs (expected {want.size} elements, actual {got.size})")
        return max(1, want.size)
    finite = want[np.isfinite(want)]
    atol = atol * max(1.0, float(np.abs(finite).max()) if finite.size else 1.0)
    gn, wn = np.isnan(got), np.isnan(want)
    wrong = gn != wn
    both = ~gn & ~wn
    inf = both & (np.isinf(got) | np.isinf(want))
    wrong |= inf & (got != want)
    fin = both & ~inf
    with np.errstate(invalid="ignore"):
        diff = np.where(fin, np.abs(got - want), 0.0)
    wrong |= fin & (diff > atol + rtol * np.abs(np.where(fin, want, 0.0)))
    bad = np.flatnonzero(wrong)
    for i in bad[:8]:
        print(f"  {what}[{i}]: expected {want[i]:.9g}, actual {got[i]:.9g}")
    if bad.size:
        key = np.where(fin[bad], diff[bad], np.inf)
        j = bad[int(np.argmax(key))]
        print(f"{what}: {bad.size} of {want.size} elements differ (largest at [{j}]: expected {want[j]:.9g}, actual {got[j]:.9g})")
    else:
        print(f"{what}: all {want.size} elements as expected")
    return int(bad.size)
)PY";
}

std::string js_check_function() {
  return R"JS(// Elements wrong: exactly one NaN, different infinities, or |got - want| > atol*s + rtol*|want| with
// s = max(1, max |want|) over the finite expected values (how Quorum's oracle scales atol).
function quorumCheck(what, got, want, atol, rtol) {
  if (got.length !== want.length) {
    console.log(`${what}: shape differs (expected ${want.length} elements, actual ${got.length})`);
    return Math.max(1, want.length);
  }
  let s = 1;
  for (const w of want) if (Number.isFinite(w)) s = Math.max(s, Math.abs(w));
  const tol = atol * s;
  const bad = [];
  let worst = -1, worstKey = -1;
  for (let i = 0; i < want.length; ++i) {
    const g = Number(got[i]), w = want[i];
    let wrong, key = Infinity;
    if (Number.isNaN(g) || Number.isNaN(w)) wrong = Number.isNaN(g) !== Number.isNaN(w);
    else if (!Number.isFinite(g) || !Number.isFinite(w)) wrong = g !== w;
    else {
      key = Math.abs(g - w);
      wrong = key > tol + rtol * Math.abs(w);
    }
    if (!wrong) continue;
    bad.push(i);
    if (key > worstKey) { worstKey = key; worst = i; }
  }
  const fmt = (v) => Number(v).toPrecision(9);
  for (const i of bad.slice(0, 8)) console.log(`  ${what}[${i}]: expected ${fmt(want[i])}, actual ${fmt(got[i])}`);
  if (bad.length)
    console.log(`${what}: ${bad.length} of ${want.length} elements differ (largest at [${worst}]: expected ` +
                `${fmt(want[worst])}, actual ${fmt(got[worst])})`);
  else console.log(`${what}: all ${want.length} elements as expected`);
  return bad.length;
}
)JS";
}

}  // namespace quorum::backends
