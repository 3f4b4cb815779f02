// Static value ranges (DEBAR, GRIST's baseline; METHODS.md §5): interval analysis over a graph. Each
// graph input starts from the interval its data lies in, each weight from the hull of its values,
// and every node maps its inputs' intervals through its operator's range rule (OpSpec::range; an
// operator without one gives unbounded outputs, which is sound). A vulnerable operation is flagged
// when its operand's interval, as float32 rounds it, meets the invalid region of its valid ranges.
// The same float32 view decides, for the dynamic search, whether one value is invalid (ValidRange).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ops/op_spec.h"

namespace quorum::ref {

using ops::Interval;
using RangeMap = std::map<std::string, Interval>;

// One operand of one vulnerable operation (a node whose operator has valid_ranges).
struct VulnerableSite {
  std::string node, op;
  int input = 0;                       // the operand's position among the node's inputs
  std::string value;                   // the operand's value name
  std::vector<ops::ValidRange> valid;  // the operand's valid intervals (their union is valid)
  Interval range;                      // its static range
  bool flagged = false;                // the range meets the invalid region
};

struct RangeAnalysis {
  RangeMap ranges;                    // every value of the graph
  std::vector<VulnerableSite> sites;  // every vulnerable operand, in graph order
};

// The analysis. `inputs` gives each graph input's interval (a missing one is unbounded); weights
// take the hull of their values (unbounded with `weights_unbounded`: any weight reachable).
RangeAnalysis analyze_ranges(const ir::Graph& g, const RangeMap& inputs, bool weights_unbounded = false);

// The vulnerable operands of a graph (as analyze_ranges lists them, without ranges).
std::vector<VulnerableSite> vulnerable_sites(const ir::Graph& g);

// Whether the value v, as float32 rounds it, lies outside every valid interval.
bool invalid_value(const std::vector<ops::ValidRange>& valid, double v);
// Whether some element of the interval, as float32 rounds it, lies outside every valid interval.
bool reaches_invalid(const std::vector<ops::ValidRange>& valid, const Interval& iv);
// The distance from a valid v to the nearest invalid boundary (0 for an invalid v), and the
// direction (+1 or -1) in which v moves toward that boundary.
struct BoundaryDistance {
  double distance = 0;
  double toward = 0;
  double boundary = 0;
};
BoundaryDistance boundary_distance(const std::vector<ops::ValidRange>& valid, double v);

}  // namespace quorum::ref
