// The reproducer contract: what a finding's standalone program needs, and the helpers every
// library's writer shares. A backend folder may hold `repro.cpp` defining
//
//   quorum::backends::ReproProgram write_repro_<name>(const ReproCase& c, const std::string& dir);
//
// which writes a program in the library's *own* API (no Quorum) into `dir`: it builds the case's
// model, feeds the inputs, compares what the library returns with the expected float64 values and
// exits 1 while the discrepancy shows (0 once fixed). Writers are text generators: no library
// header is included (the build table lists every src/backends/*/repro.cpp; src/report/ calls them).
// A writer that cannot express the case throws ReproUnsupported with the reason.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/finding_kind.h"
#include "ops/op_spec.h"

namespace quorum::backends {

class ReproUnsupported : public std::runtime_error {
 public:
  explicit ReproUnsupported(const std::string& m) : std::runtime_error(m) {}
};

struct ReproCase {
  // The finding.
  std::string backend;          // the blamed backend ("onednn")
  std::string library_version;  // as its worker reported it
  std::string signature;
  core::FindingKind kind = core::FindingKind::Inconsistency;
  core::Stage stage = core::Stage::Forward;
  std::string op, node;         // the blamed operator and node ("" for some crashes)
  std::string detail;           // the oracle's sentence (largest difference, where)
  std::string known;            // ledger id when the finding matches one, else ""
  std::vector<std::string> lowering;  // the library operations the blamed node ran (finding.json)
  std::string bundle;           // the bundle directory it came from
  std::string replay;           // `quorum replay ...`
  std::string quorum_version;
  uint64_t seed = 0;
  int64_t model_index = 0;
  std::string origin;  // how the model came about when not from a campaign's generator (finding.json)
  std::string method;  // how the case was found: random (the campaign's draw), ga, diverge (a search)

  // The case: `model` (weights are initializers) fed `inputs` (graph inputs, as the library ran
  // them, in `dtype`). For a training finding also the loss on graph output 0 against `target`.
  ir::Graph model;
  ValueMap inputs;
  core::DType dtype = core::DType::F32;
  bool train = false;
  core::Tensor target;  // for graph output 0 of `model`, or of `whole_model` when there is one
  std::string loss;  // a catalogue loss operator
  core::Attrs loss_attrs;
  // When `model` is the blamed node cut out of a larger unreduced model: that model and its graph
  // inputs (empty otherwise). A backward bug that needs its neighbours (a non-contiguous incoming
  // gradient from a following transpose) shows only in the whole model.
  ir::Graph whole_model;
  ValueMap whole_inputs;

  // Expected values: Quorum's float64 reference on the same (dtype-rounded) operands.
  ValueMap expected;        // every value of the model (graph inputs, weights, node outputs)
  ValueMap expected_grads;  // train, `model` not cut: d loss / d value (node outputs, weights, graph inputs)
  // What Quorum recorded from the library (may miss values the library did not return).
  ValueMap actual;
  ValueMap actual_grads;

  // A backward finding at one node, judged on the library's own incoming gradient: `incoming`
  // holds the library's d loss / d output for each output of `node`, `node_grads` the float64
  // vector-Jacobian product for each of its inputs and weights (by value name) computed from the
  // node's operands in `expected` and that incoming gradient.
  ValueMap incoming;
  ValueMap node_grads;

  // The blamed operator's tolerance at this case (forward, or backward for LC/BC).
  ops::Tolerance tol;

  bool backward() const { return stage == core::Stage::Backward; }
  bool crash() const { return kind == core::FindingKind::Crash; }
  // The node named `node` in `model`; for a crash (no node named) in a one-node model, that node;
  // else null.
  const ir::Node* blamed() const;
};

struct ReproProgram {
  std::string main;                // file name of the program inside the directory
  std::string run;                 // the command(s) that build and run it from that directory
  std::vector<std::string> files;  // every file written (relative names)
};

using ReproWriter = ReproProgram (*)(const ReproCase&, const std::string& dir);

// ---- helpers shared by the writers ----

// A C/C++ float or double literal that reads back exactly ("0x1.8p+1f", "NAN", "-INFINITY").
std::string c_literal(double v, bool single);
// "static const float NAME[] = {...};" holding `t`'s elements (row-major), 8 per line.
std::string c_array(const std::string& name, const core::Tensor& t, bool single = true);
// Python literal of a float ("float('nan')", "-float('inf')", repr otherwise).
std::string py_literal(double v);
// A double-quoted string literal valid in C, C++ and Python (quotes and backslashes escaped).
std::string quoted(const std::string& s);
// A value name made into an identifier of C and Python ("conv2d_3:0" -> "conv2d_3_0").
std::string identifier(const std::string& value);
// The comment block every reproducer starts with (`prefix` is "//" or "#"): what it shows, where it
// came from (finding, seed, replay), the library version, how to build and run it.
std::string repro_header(const ReproCase& c, const std::string& prefix, const std::string& build_and_run);
// Writes `text` to dir/name and appends name to `p.files`.
void write_repro_file(ReproProgram& p, const std::string& dir, const std::string& name, const std::string& text);

// C++ source of `static int quorum_check(const char* what, const float* got, const double* want,
// size_t n, double atol, double rtol)`: prints expected versus actual (the largest differences,
// NaN/Inf disagreements) and returns the number of elements beyond the tolerance. Every C++
// reproducer includes it, so all of them report the same way.
std::string cpp_check_function();
// Python source of `quorum_check(what, got, want, atol, rtol)` (numpy arrays), the same contract.
std::string py_check_function();
// JavaScript source of `quorumCheck(what, got, want, atol, rtol)` (typed arrays), the same contract.
std::string js_check_function();

}  // namespace quorum::backends
