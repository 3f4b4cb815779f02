// Generator glue.
#include "campaign/generators.h"

#include <memory>
#include <mutex>

namespace quorum::campaign {

namespace {

ModelCase to_case(gen::Generated out, int64_t index) {
  ModelCase m;
  m.graph = std::move(out.graph);
  ir::validate(m.graph, "model " + std::to_string(index));  // types every value; an invalid model is skipped
  m.inputs = std::move(out.inputs);
  m.target = std::move(out.target);
  return m;
}

}  // namespace

bool generator_learns(const std::string& generator) { return generator == "mcts"; }

ModelFactory generator_factory(const gen::GenOptions& opt, const std::string& dataset, CampaignOptions* campaign) {
  std::shared_ptr<const data::Source> source = data::open_source(dataset);
  gen::make_generator(opt, *source);  // validates the name and options now
  if (generator_learns(opt.generator)) {
    gen::GenOptions o = opt;
    std::shared_ptr<search::Coverage> cov;
    if (campaign) {
      if (!campaign->coverage) campaign->coverage = std::make_shared<search::Coverage>();
      cov = campaign->coverage;
      o.feedback = cov.get();
    }
    struct Shared {
      std::mutex mu;
      std::unique_ptr<gen::Generator> gen;
    };
    auto shared = std::make_shared<Shared>();
    shared->gen = gen::make_generator(o, *source);
    if (campaign)
      campaign->on_model = [shared](int64_t index, bool success) {
        std::lock_guard<std::mutex> lock(shared->mu);
        shared->gen->outcome(static_cast<uint64_t>(index), success);
      };
    return [shared, source, cov](int64_t index, core::Rng& rng) {
      gen::Model arch;
      {
        std::lock_guard<std::mutex> lock(shared->mu);
        arch = shared->gen->generate(static_cast<uint64_t>(index), rng);
      }
      return to_case(gen::finish_model(std::move(arch), rng, *source), index);
    };
  }
  return [opt, source](int64_t index, core::Rng& rng) {
    const auto g = gen::make_generator(opt, *source);
    return to_case(gen::finish_model(g->generate(static_cast<uint64_t>(index), rng), rng, *source), index);
  };
}

}  // namespace quorum::campaign
