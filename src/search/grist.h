// GRIST (METHODS.md §5): gradient-guided search for the inputs (and weights) that drive one
// vulnerable operation's operand into its invalid region. The suspect loss of a target is the
// distance of its operand's nearest element to the nearest invalid boundary (ref/ranges.h); its
// gradients with respect to the graph inputs and the weights come from the float64 reference's
// own VJPs, back-propagated from the operand (ref::backward). Inputs take sign steps clipped to the
// data range (an element that started outside it, an edge value, no farther out than it started);
// weights take linear steps toward a point at the boundary, then sign steps. A few samples are kept;
// each iteration the least important (importance: how much a sample's steps lowered its loss and
// moved it, less how much was clipped) are replaced by fresh ones, drawn as the campaign draws inputs
// (uniform in the data range with its edge values: subnormals, +-1e4, +-1e6). A target is
// left when its loss trend is flat or its share of the budget is spent.
//
// The search runs nothing but the reference itself: what counts as a trigger is the caller's
// `Evaluate` (the campaign's workers and oracles for a library, model_verdict for the model).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ref/interpreter.h"
#include "ref/ranges.h"
#include "search/candidate.h"

namespace quorum::search {


// A candidate's weights: ir::graph_weights; the graph with them: ir::with_weights (ir/edit.h).

struct Verdict {
  bool triggered = false;
  std::string what;  // for people: what fired, where
};
// Judges one candidate; `site` is the operation being targeted (null for a random draw).
using Evaluate = std::function<Verdict(const Candidate& c, const ref::VulnerableSite* site)>;

struct GristOptions {
  uint64_t seed = 1;
  int64_t budget = 200;             // evaluations (calls of Evaluate), over all targets
  double time_limit = 0;            // seconds; 0: none
  double delta = 0.1;               // an input's sign step, as a fraction of the data range
  double switch_rate = 0.25;        // the share of samples replaced by fresh ones each iteration
  int samples = 4;                  // samples kept per target
  bool weights = true;              // search the weights too
  int linear_rounds = 10;           // linear steps on the weights of a sample before sign steps
  int flat_iterations = 5;          // a target is left after this many iterations without a lower loss
  ops::Interval data_range{-1, 1};  // every input element stays in it
  // Where the weights' linear steps aim, as a fraction of the target's first loss: inside the valid
  // region (> 0: a library's behaviour next to the boundary, the reference still finite) or past the
  // boundary (< 0: the model's own NaN/Inf).
  double aim = 0.05;
  bool stop_at_first = true;  // false: every target gets its share (model mode reports them all)
};

struct TargetOutcome {
  ref::VulnerableSite site;
  bool triggered = false;
  std::string what;
  double first_loss = 0, best_loss = 0;  // the suspect loss at the start and the smallest reached
  int64_t evaluations = 0;
  int iterations = 0;
  Candidate candidate;  // the failure-inducing candidate when triggered
};

struct GristResult {
  std::vector<TargetOutcome> targets;  // in graph order, those searched
  int trigger = -1;                    // the first triggered target's index, or -1
  int64_t evaluations = 0;             // all of them
  int64_t first_trigger = -1;          // evaluations spent up to and including the first trigger
  int iterations = 0;                  // search iterations (each a step of every sample)
  double seconds = 0;
  bool triggered() const { return trigger >= 0; }
};

// The suspect loss of one operand: the element nearest to an invalid boundary, its distance, and
// the direction that moves it toward the boundary. Infinite loss when no boundary is finite.
struct SuspectLoss {
  double loss = 0;
  int64_t index = -1;
  double toward = 0;
  bool invalid = false;  // some element already lies in the invalid region
};
SuspectLoss suspect_loss(const ref::VulnerableSite& site, const core::Tensor& operand);

GristResult grist(const ir::Graph& g, const Candidate& start, const GristOptions& opt, const Evaluate& eval);

// The baseline: `budget` candidates with fresh random inputs (data/values.h's policy: uniform in the
// data range with edge values) and the graph's own weights, stopping at the first trigger.
GristResult random_inputs(const ir::Graph& g, const Candidate& start, int64_t budget, uint64_t seed,
                          const ops::Interval& data_range, const Evaluate& eval);

// Model mode's verdict: on the float64 reference, a value holds NaN/Inf, or the targeted operand
// (every vulnerable operand for a null site) as float32 rounds it lies in its invalid region.
Verdict model_verdict(const ir::Graph& g, const Candidate& c, const ref::VulnerableSite* site);

// The first node (graph order) whose reference output holds NaN/Inf; empty when none does.
std::string first_nonfinite_node(const ir::Graph& g, const ref::ValueMap& values);

}  // namespace quorum::search
