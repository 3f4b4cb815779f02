// The reducer: the smallest model that still shows a finding, by checked graph edits only
// (ir/edit.h), each kept only when the finding's predicate still holds. Deterministic and bounded
// by a number of predicate runs. Steps: the blamed node alone, fed the blamed backend's recorded
// values of its inputs (for a backward finding, trained with mse_loss against a target whose loss
// gradient is the recorded incoming gradient, else, where mse_loss cannot give it at a NaN or infinite
// output, with the campaign's own loss); else the ancestors of the blamed node (the loss moved to its
// output the same way), else the model cut at the output of one of the nearest nodes after it (a consumer
// the finding needs); then delta debugging (ddmin) over sets of upstream nodes (each removed node's
// outputs become graph inputs fed the recorded values); then attributes toward their defaults. A
// crash that names no node: ddmin over all the nodes, and find_culprit.
#pragma once
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "ir/graph.h"

namespace quorum::localize {

struct Case {
  ir::Graph graph;
  backends::ValueMap inputs;  // float64
  core::Tensor target;
  // A backward case cut below its loss: the incoming gradient its output 0 must receive, and the loss
  // whose target gives it (mse_loss: d/dy mean((y - t)^2) = 2 (y - t) / N, so t = y - g N / 2).
  // `target` is recomputed from `grad` whenever the case's inputs or shapes change. Empty: the
  // case trains with the campaign's loss and its own target.
  core::Tensor grad;
  std::string loss;
};

// The target that gives output 0 of `c` the incoming gradient `c.grad` under mse_loss, computed on
// `y` (the output's value: recorded, else the float64 reference's on c.inputs when empty).
// Sets c.target and c.loss; false (c unchanged) when the shapes do not match or the reference fails.
bool retarget(Case& c, const core::Tensor& y = core::Tensor());

// Whether a candidate still shows the finding.
using Predicate = std::function<bool(const Case&)>;
// For localize-fix: whether the blamed backend ran a candidate at all (a replacement the library
// refuses, or that crashes instead, fixes nothing). Null: every candidate counts as run.
using RanCheck = std::function<bool(const Case&)>;

struct ReduceOptions {
  int max_runs = 200;
  std::ostream* log = nullptr;  // each step, one line
};

struct Reduced {
  Case reduced;
  bool reproduced = false;  // the original shows the finding at all
  bool intermittent = false;  // ... but not on its first run (the reduction's steps may then miss it too)
  bool one_node = false;    // reduced to the blamed node alone
  int runs = 0;             // predicate runs spent
  int64_t elements_before = 0, elements = 0;  // graph input elements, original and reduced
  int64_t nonzero = -1;  // non-zero input elements after shrink_inputs (-1: not run)
  std::vector<std::string> steps;
};

// Delta debugging (Zeller's ddmin) over sets of `removable` nodes of `c`: the chunks of the set
// (halves, then quarters, ...) tried as what is kept (the rest removed) and as what is removed, a
// success restarting on what is left, until no single node can go. `remove(c, set)` builds the
// candidate without the set (false: not a valid model) and `r` counts the predicate runs.
using RemoveFn = std::function<bool(const Case& from, const std::vector<std::string>& drop, Case& out)>;
Case ddmin_nodes(Case cur, std::vector<std::string> removable, const RemoveFn& remove, const Predicate& holds,
                 const ReduceOptions& opt, Reduced& r);

// A crash (or conversion failure, library error) whose message names no node: the nodes of `c` run
// alone, in order, each fed c's inputs where it has them, else the float64 reference's values
// (`reference`); the first that `wrong` reports (it fails alone, or its own output is wrong: its
// shape or its values) is the culprit, where the failure begins. `wrong` returns what is wrong
// ("" when the node runs right). At most max_runs nodes are run.
using NodeVerdict = std::function<std::string(const Case& one_node)>;
struct Culprit {
  std::string node, op, evidence;  // empty node: none found
  int runs = 0;
};
Culprit find_culprit(const Case& c, const backends::ValueMap& reference, const NodeVerdict& wrong, int max_runs,
                     std::ostream* log = nullptr);

// Runs of the original model before a finding that does not show counts as gone (reduce()).
inline constexpr int kOriginalTries = 3;

// `recorded`: the blamed backend's value of every node output (and `recorded_grads` its gradients,
// for backward findings), used to feed what a removed part of the model computed.
Reduced reduce(const Case& original, const std::string& blamed_node, bool backward, const backends::ValueMap& recorded,
               const backends::ValueMap& recorded_grads, const Predicate& holds, const ReduceOptions& opt);

// Shapes halved while the finding remains: every graph input's axes, largest first, keeping the
// first half of the values, else the second; a size the shape rules refuse is skipped; repeated
// until nothing halves. Then the values: chunks of elements set to 0 while it remains (delta
// debugging), leaving non-zero only what triggers it. A backward case (Case::grad) keeps the part
// of its incoming gradient that matches the output's kept part (output axes that shrank are cut at
// the same end as the input), and its target is recomputed so the output still receives it. Spends
// r.runs up to opt.max_runs; appends its steps.
void shrink_inputs(Reduced& r, const Predicate& holds, const ReduceOptions& opt);

// Localize-fix (Audee, METHODS.md §4) on a reduced case of at most kMaxFixNodes nodes (one node, or the
// few nodes an optimizer fused): every attribute of each node replaced by other values of its domain; a
// replacement under which the finding disappears names that attribute (and value) as a cause — by its
// name in a one-node case, as "op.attribute" in a case of several nodes.
inline constexpr size_t kMaxFixNodes = 4;
struct Cause {
  std::string attribute, value, fixed_by;  // fixed_by: the replacement values that remove the finding
};
struct FixReport {
  std::vector<Cause> causes;
  std::vector<std::string> tried;  // "attr=value: fixes|still|invalid"
  int runs = 0;
};
FixReport localize_fix(const Case& reduced, const Predicate& holds, int max_runs, std::ostream* log = nullptr,
                       const RanCheck& ran = nullptr);

// Where no single parameter change removes a one-node finding: the node fed fresh random inputs
// (uniform in [-1, 1], seeded by the node's name) `tries` times, to tell a bug for every input
// (shown on all) from one for some inputs (shown on the recorded values only, or a few).
// Where the random draws do not all show it, the caller may search further (the campaign runs Audee's
// genetic search on the one-node model, src/search/): `searched` evaluations, `search_shown` whether
// it found fresh inputs that show the finding.
struct InputSearch {
  int tried = 0, shown = 0;
  int searched = 0;
  bool search_shown = false;
  // "every input" | "some inputs" | "some inputs (found by the genetic search)" | "the recorded inputs
  // only" | "" (not run)
  std::string verdict() const;
};
InputSearch search_inputs(const Case& one_node, const Predicate& holds, int tries, std::ostream* log = nullptr);

}  // namespace quorum::localize
