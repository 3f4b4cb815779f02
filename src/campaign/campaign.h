// The fuzz loop: generate a model, run it on every backend and the reference, judge, deduplicate
// into the findings store, write a bundle for every new finding, print progress once a second.
// The same --out resumes where it stopped: model i is a pure function of (seed, i).
#pragma once
#include <functional>
#include <iosfwd>
#include <map>
#include <string>

#include "campaign/evaluate.h"
#include "campaign/search_case.h"
#include "campaign/summary.h"
#include "coverage/coverage.h"

namespace quorum::campaign {

// Builds model `index` of a campaign from its own Rng stream (throws to skip an invalid model).
// Inputs and target may be left empty: the campaign then draws them (complete_case).
using ModelFactory = std::function<ModelCase(int64_t index, core::Rng& rng)>;

// Model `index` of a campaign with seed `seed`, exactly as the campaign evaluates it: the factory
// on gen::model_rng(seed, index), then complete_case on gen::case_rng(seed, index) with the loss,
// then the extreme values a share of models carries (data::place_extreme_values, on a stream derived
// from the case's). `loss` empty: the loss rotation, the model's loss drawn by choose_loss on a
// stream derived from the case's. `chosen`: set to the loss the case trains with. Throws what the
// factory throws for an invalid model. `quorum gen --index` writes the same case.
ModelCase draw_case(const ModelFactory& factory, uint64_t seed, int64_t index, const std::string& loss,
                    std::string* chosen = nullptr);

struct CampaignOptions {
  std::string generator;  // recorded in the settings; the factory is the generator itself
  Setup setup;
  // Every loss of the catalogue in turn: each model trains with its own (draw_case with no loss),
  // not setup.loss (fuzz without --loss).
  bool rotate_losses = false;
  double time_s = 0;   // stop starting models after this long (0 = no time budget)
  int64_t models = 0;  // models with index below this, in total over every run and shard (0 = no count budget)
  int jobs = 1;
  uint64_t seed = 0;   // 0: the stored seed when resuming, else a fresh one (printed)
  std::string out;     // the campaign directory: bundles (and findings.db with the SQLite store)
  std::string store;   // the findings store (open_store): empty for OUT/findings.db, or a postgresql:// URL
  // Shard `shard` of `shards` evaluates only the model indices i with i % shards == shard, so
  // shards of one seed on many machines cover its stream without overlap.
  int64_t shard = 0, shards = 1;
  std::string command_line;
  bool quiet = false;  // no progress lines (tests)
  int reduce_runs = 0;  // reduce every new finding with at most this many model runs (0: do not)
  // Before the generated models, known-bug transfer (transfer.h) on the campaign's backends: every
  // ledger case of setup.known on every backend and with its operator's siblings, as models -1, -2, ...
  bool transfer = false;
  // A search (ga, diverge) from every model that ran clean, with its budget of evaluations (none: off).
  // Its findings go into the store with the method in their bundles.
  SearchOptions search;
  // The campaign's coverage (coverage/coverage.h), loaded from the store and grown model by model (none:
  // run_campaign makes one with default options). A coverage-guided generator (mcts) reads the same one.
  std::shared_ptr<coverage::Coverage> coverage;
  // Told after each generated model whether it found a new root cause (with reduce_runs 0: a new
  // finding), for a generator that learns from it (mcts; campaign/model_source.h sets it).
  std::function<void(int64_t index, bool success)> on_model;
  // Told the campaign's seed (given, stored or fresh) before the first model, for a factory whose
  // models depend on other models of the same seed (muffin's campaign-wide counts; model_source.h sets it).
  std::function<void(uint64_t seed)> on_seed;
  // Settings of how the factory draws models (model_source.h's DrawOptions), checked like the others
  // when the campaign resumes.
  std::map<std::string, std::string> draw_settings;
};

Summary run_campaign(const CampaignOptions& opt, const ModelFactory& factory, std::ostream& log);

}  // namespace quorum::campaign
