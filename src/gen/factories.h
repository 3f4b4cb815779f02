// Internal: one factory per generator, and the selection helpers they share.
#pragma once
#include <map>
#include <memory>

#include "gen/generator.h"

namespace quorum::gen {

std::unique_ptr<Generator> make_muffin(const GenOptions& opt, const data::Source& source);
std::unique_ptr<Generator> make_unit(const GenOptions& opt, const data::Source& source);
std::unique_ptr<Generator> make_ws(const GenOptions& opt, const data::Source& source);
std::unique_ptr<Generator> make_rn(const GenOptions& opt, const data::Source& source);
std::unique_ptr<Generator> make_mutate(const GenOptions& opt, const data::Source& source);
std::unique_ptr<Generator> make_mcts(const GenOptions& opt, const data::Source& source);
std::unique_ptr<Generator> make_zoo(const GenOptions& opt, const data::Source& source);
// The named generator without make_generator's --ops/--skip_ops check of whole models (nullptr for an
// unknown name): its layers are still drawn from the operators `opt` allows.
std::unique_ptr<Generator> make_unrestricted(const GenOptions& opt, const data::Source& source);

// Network-level mutation of a trained model's weights (mutate.cpp): every weight tensor, with
// probability 1/2 (at least one), moved by Gaussian noise of `rate` times its own standard deviation
// (of 1e-3 for a constant tensor). The structure is kept, so the mutant runs on the same data.
void mutate_weights(ir::Graph& g, core::Rng& rng, double rate);

// Muffin's fitness-proportionate selection: a candidate chosen c times so far scores 1/(c+1) and is
// drawn with probability score / sum of scores. `counts[i]` belongs to candidate i; `skip` excludes
// candidates already tried. Returns the index, or -1 when every candidate is skipped.
inline int fitness_pick(const std::vector<int64_t>& counts, const std::vector<bool>& skip, core::Rng& rng) {
  double total = 0;
  for (size_t i = 0; i < counts.size(); ++i)
    if (!skip[i]) total += 1.0 / static_cast<double>(counts[i] + 1);
  if (total <= 0) return -1;
  double u = rng.uniform() * total;
  int last = -1;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (skip[i]) continue;
    last = static_cast<int>(i);
    u -= 1.0 / static_cast<double>(counts[i] + 1);
    if (u < 0) break;
  }
  return last;  // the last candidate also absorbs rounding at the end of the range
}

// The catalogue operators a random-architecture generator may place: neither losses nor quantized ones.
std::vector<const ops::OpSpec*> layer_operators();

}  // namespace quorum::gen
