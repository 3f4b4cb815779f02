// The share policy of "every backend exercised" (docs/generators.md): a campaign draws a share of its
// models from what its backends support, so that a backend that maps few operators still runs a good
// part of the models. The backends are targets here, known only by what the campaign tells: the
// operators each maps (its probe) and whether it takes a whole model (its supports() answer). Model i
// stays a pure function of the seed, i and the targets: which targets it is drawn for comes from
// Rng(seed).derive("target:i"), and a model is drawn again from its own stream until the targets take it.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "gen/generator.h"

namespace quorum::gen {

struct Target {
  std::string name;               // the backend spec, for messages
  std::vector<std::string> ops;   // the catalogue operators it maps
  // The operators of the nodes it refuses in the whole model (weights drawn): empty when it takes the
  // model. None: it takes any model holding only `ops`.
  std::function<std::vector<std::string>(const ir::Graph&)> refuses;
};

struct TargetPolicy {
  std::vector<Target> targets;
  // The share of the models drawn for targets: half of it for every target at once (the operators
  // they all map), half for one target in turn (uniformly); the rest are drawn freely. With k targets
  // each runs at least share * (1/2 + 1/(2k)) of the models, plus the free ones it takes.
  double share = 0;
};

// The targets model `index` of a campaign with seed `seed` is drawn for (indices into p.targets): none
// (a free model), all of them, or one.
std::vector<size_t> targets_of(uint64_t seed, uint64_t index, const TargetPolicy& p);

// Model `index` drawn for `which` (indices into p.targets; none: as make_generator(opt) draws it):
// the generator places only the operators every one of them maps (and --ops/--skip_ops allow), its
// builder's glue too where it has a choice (Limits::glue), and a model that still holds another
// operator or that a target refuses is drawn again from `rng`, without the operators refused in it,
// at most kTargetDraws times; then the last draw is kept (the backend refuses it).
// Throws as make_generator's restriction does when no draw holds only what --ops/--skip_ops allow.
constexpr int kTargetDraws = 6;
Model generate_for(const GenOptions& opt, const data::Source& source, uint64_t index, core::Rng& rng,
                   const TargetPolicy& p, const std::vector<size_t>& which);

}  // namespace quorum::gen
