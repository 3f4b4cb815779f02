// The shapes & parameters calculator shared by every generator: draws an operator's attributes so
// that they fit the tensors it will be applied to, and repairs a draw the shape rule rejected.
// Scalar attributes (slopes, epsilons, modes) come from the operator's own sampler, i.e. from its
// valid domain; structural ones (kernels, strides, pads, widths, axes, target shapes) are fitted to
// the input here, because only here is the input known.
#pragma once
#include <vector>

#include "ops/op_spec.h"

namespace quorum::gen {

using core::Attrs;
using core::Shape;
using core::TensorType;

// Bounds that keep generated models small enough for the float64 reference to run thousands of
// them quickly, and every library to load them.
struct Limits {
  int64_t max_elems = 16384;   // elements of any intermediate value
  int64_t max_params = 65536;  // weight elements of one node
  int64_t max_channels = 8;    // conv out_channels when free
  int64_t max_units = 16;      // dense units, recurrent hidden size
  int max_rank = 5;
  int tries = 6;  // draws per placement; each rejected draw is repaired once before the next
  // When not empty, the only operators the builder's own glue may place where it has a choice (the
  // share policy's targets, gen/targets.h): no guard clip outside it, a reshape for a transpose, flatten
  // and dense for a crop or pad where they fit, constant padding.
  std::vector<std::string> glue;
};

// What the caller wants of a layer's output, where it matters.
struct Want {
  bool keep_spatial = false;  // windowed ops: stride 1 and padding that keeps every spatial size
  int64_t channels = 0;       // conv out_channels (0: free; -1: as many as the input has)
  bool depthwise = false;     // conv: one group per input channel
  bool broadcast = false;     // merges: keep inputs whose shapes already broadcast to the first's
  bool conservative = false;  // kernel 1, stride 1, no dilation or padding: the last resort
};

// Number of spatial axes of a windowed operator (conv, pool), from the length of its default
// kernel_shape; -1 for operators without one.
int spatial_rank(const ops::OpSpec& spec);

// A fresh draw of every attribute of `spec` for data inputs `in` (canonical form is left to the
// caller), fitted around the values in `fixed` (a fixed kernel gets pads that suit it), which
// the caller then puts in place. Consumes `rng`.
Attrs draw_attrs(const ops::OpSpec& spec, const std::vector<TensorType>& in, core::Rng& rng, const Limits& lim,
                 const Want& want, const Attrs& fixed = {});

// Adjusts `a` (canonical) after the shape rule rejected it: shrinks kernels and dilations to the
// input, clamps pads, drops groups that do not divide, turns off modes the input cannot take.
// Returns false when it knows no repair for this operator.
bool repair_attrs(const ops::OpSpec& spec, const std::vector<TensorType>& in, Attrs& a);

// Ranks (1..5) of a single data input that the operator accepts, probed once through its shape
// rule with fitted attributes. Empty for multi-input operators.
const std::vector<int>& accepted_ranks(const ops::OpSpec& spec);

}  // namespace quorum::gen
