// A second run of a model by the same library, judged end to end (internal to src/oracle/): the optimized
// run (optimized.cpp) and the relations' runs (relation.cpp: batch and form) hold values the library computed
// another way for the same numbers; each is judged against the float64 reference and the library's own
// pinned run within an envelope that every correct float32 evaluation of the graph can reach.
//
// The envelope is the spread (oracle/spread.h) run over the whole graph: the graph is evaluated again
// kTrials times, each node's kernel in the trial's float32 model (its stored intermediates rounded and
// moved, as the spread's trials do) on the operands the trial's upstream nodes gave, and each node's
// result moved within kMargin times its operator's tolerance (what the per-node verdict accepts of every
// library: fixed directions in the deterministic trials, random fractions in the others) and rounded to the
// run's precision. Per element the envelope is the largest distance of a trial from the reference; a value
// is wrong where it lies beyond its operator's tolerance plus kMargin envelopes from both the reference and
// the pinned run, where the pinned run itself lies within them (elsewhere the per-node stage judges the
// library). It is computed only where that plain tolerance fails, as the spread is.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "oracle/oracle.h"
#include "ops/op_spec.h"

namespace quorum::oracle::detail {

// Per value of `values` (node outputs of `g`), per element: the envelope (above). Infinite where a trial is
// non-finite and the reference finite, or where a trial could not run.
backends::ValueMap graph_envelope(const ir::Graph& g, const backends::ValueMap& inputs,
                                  const backends::ValueMap& reference, core::DType dtype,
                                  const std::vector<std::string>& values);

// What a second run `a` of one value shows against the pinned run `p` and the reference `w` (rounded to the
// run's dtype), under the value's operator tolerance and the envelope (asked for lazily: `envelope` returns
// the value's envelope tensor, or nullptr where none could be made).
struct SecondRunVerdict {
  int64_t produced = 0;   // NaN/Inf where the pinned run and the reference are finite
  int64_t swallowed = 0;  // numbers where the pinned run and the reference are NaN
  int64_t wrong = 0;      // beyond the envelope of both, where the pinned run is within it
  int64_t first = -1;     // an element that shows it (the worst wrong one)
  double worst = 0;       // the largest distance from the reference of a wrong element
  bool any() const { return produced || swallowed || wrong; }
  Kind kind() const { return produced ? Kind::NaN : wrong ? Kind::Inconsistency : Kind::NaNSwallowed; }
  int64_t count() const { return produced ? produced : wrong ? wrong : swallowed; }
};
SecondRunVerdict judge_second_run(const core::Tensor& a, const core::Tensor& p, const core::Tensor& w,
                                  const ops::Tolerance& tol, const std::function<const core::Tensor*()>& envelope);

// The detail's sentence: "output 'v': K of M elements of the <what> run ...; e.g. element i: <what> x,
// <pinned> y, float64 z".
std::string second_run_detail(const std::string& value, const SecondRunVerdict& v, const core::Tensor& a,
                              const core::Tensor& p, const core::Tensor& w, const std::string& what,
                              const std::string& pinned);

}  // namespace quorum::oracle::detail
