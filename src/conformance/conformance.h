// The ONNX conformance suite (Debian libonnx-testdata) run on the reference and on backends:
// `quorum conformance`. Every test whose operators the catalogue has is imported, run on the float64
// reference and on each backend's worker, and compared with the suite's expected outputs; the
// result is an ONNX-operator x backend table of pass / fail / unsupported with the worst error of
// each failure. A reference failure is either listed in reference_exceptions() with its reason, or
// it is a Quorum bug (the command exits 1).
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "worker/worker_set.h"

namespace quorum::conformance {

constexpr const char* kConformanceSuite = "/usr/share/libonnx-testdata/data";
// The suite's folders that hold runnable tests (`real` holds only download links).
const std::vector<std::string>& conformance_folders();

// One test data set, loaded: the graph (inputs the catalogue takes as attributes are imported as
// constants), its inputs by graph-input name, and the expected outputs in graph-output order.
struct ConformanceSet {
  ir::Graph graph;
  backends::ValueMap inputs;
  std::vector<core::Tensor> expected;
};
// Loads test_data_set_<k> of the test in `dir`. Throws UserError when the model or data does not
// import (an operator or data type outside the catalogue, a form it cannot express).
ConformanceSet load_conformance_set(const std::string& dir, int k);

enum class Verdict { Pass, Fail, Unsupported };
const char* to_string(Verdict v);

struct Cell {
  Verdict verdict = Verdict::Pass;
  std::string detail;  // the worst error of a failure, the outcome, or why unsupported
  double worst = 0;    // largest |got - want| of a numeric failure (0 otherwise)
};

struct TestResult {
  std::string test;   // "node/test_relu"
  std::string row;    // its ONNX operators, e.g. "Relu" or "Conv+Relu"
  std::vector<Cell> cells;  // the reference first, then each backend of the options
};

struct OutsideTest {
  std::string test, row, reason;  // not run: operator or data type outside the catalogue
};

struct ConformanceOptions {
  std::string suite = kConformanceSuite;
  std::string filter;  // run only tests whose "folder/name" contains this
  std::vector<worker::BackendSpec> backends;
  worker::Limits limits;
  double rtol = 1e-3, atol = 1e-7;  // ONNX's backend-test defaults
};

struct ConformanceReport {
  std::vector<std::string> columns;   // "ref", then each backend spec
  std::vector<std::string> versions;  // each column's library version
  std::vector<TestResult> results;
  std::vector<OutsideTest> outside;
};

// `progress` (optional) is called after each test with (done, total).
ConformanceReport run_conformance(const ConformanceOptions& opt,
                                  const std::function<void(size_t, size_t)>& progress = {});

// Reference failures and refusals that are real semantic differences, by test name, with the reason.
const std::map<std::string, std::string>& reference_exceptions();
// Tests the reference fails (or cannot import) that reference_exceptions() does not explain.
std::vector<std::string> unexplained_reference_failures(const ConformanceReport& r);
// Exceptions that match no test the reference fails (they would hide nothing; remove them).
std::vector<std::string> stale_exceptions(const ConformanceReport& r);

std::string conformance_text(const ConformanceReport& r);  // the table for a terminal
std::string conformance_markdown(const ConformanceReport& r, const std::string& command_line);

}  // namespace quorum::conformance
