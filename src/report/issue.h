// Issue-ready text: a finding bundle as Markdown a library maintainer can paste into a tracker.
#pragma once
#include <string>
#include <vector>

#include "backends/repro.h"

namespace quorum::report {

// One element where the library and the float64 reference disagree.
struct Difference {
  std::string value;  // the value (or gradient) name
  int64_t index = 0;  // flat, row-major
  double expected = 0, actual = 0;
};
// The elements beyond the case's tolerance, the largest first (NaN/Inf disagreements first),
// at most `n`: forward values of the blamed node (and graph outputs), or its gradients for BC.
std::vector<Difference> largest_differences(const backends::ReproCase& c, size_t n);

// The finding's class and explanation: the ledger entry's class and note when the finding is
// known; otherwise the class localize::guess_class suggests from the case (float32's spread at the
// recorded operands, the localized parameter causes from the reduction), marked as suggested.
struct Classification {
  std::string cls;          // bug | convention | precision | unclassified
  bool suggested = false;   // guessed by Quorum, not from the ledger
  std::string explanation;  // one paragraph
  std::string link;
};
Classification classify(const backends::ReproCase& c);

// BUNDLE/reduced/reduction.json (the reducer's steps, causes and input search) as the report reads
// it. A bundle shared by others may hold anything there: a missing or unparsable file gives
// `present` false, a field of the wrong type is left at its default; reading never throws.
struct Reduction {
  struct Cause {
    std::string attribute, value, fixed_by;
  };
  bool present = false;
  int64_t nodes_before = 0, nodes_after = 0, predicate_runs = 0;
  bool one_node = false;
  std::vector<Cause> causes;
  int64_t inputs_tried = 0, inputs_shown = 0;  // the random-input search on a one-node case
  std::string inputs_verdict;
};
Reduction parse_reduction(const std::string& text);
Reduction reduction_of(const std::string& bundle_dir);

// What the library ran, as the finding's lowering says: for an optimized-stage finding the optimizer's
// fused layers and passes (the "fused " entries, prefix dropped) beside the blamed node's pinned-run
// operations; otherwise everything is `pinned`.
struct LoweringSides {
  std::vector<std::string> optimized, pinned;
};
LoweringSides lowering_sides(const backends::ReproCase& c);

// A one-line title ("oneDNN 2.6.3: exp turns NaN into a number (forward, float32)").
std::string issue_title(const backends::ReproCase& c);

// The Markdown: title, environment, minimal reproducer (inline when small; written into
// BUNDLE/repro/ when missing), expected versus actual, class and localized parameter, how it was found.
std::string issue_markdown(const std::string& bundle_dir);

}  // namespace quorum::report
