// Generator glue.
#include "campaign/generators.h"

#include <atomic>
#include <memory>
#include <mutex>

#include "campaign/coverage.h"
#include "gen/targets.h"

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

using Counts = std::map<std::string, int64_t>;

// What every model of a (non-learning) generator's campaign shares: the policy's targets, built at
// the first model, and muffin's counts at the start of each epoch, computed once.
struct Draw {
  gen::GenOptions opt;
  std::shared_ptr<const data::Source> source;
  DrawOptions draw;
  std::shared_ptr<search::Coverage> coverage;  // the campaign's (its backends' probe), or none
  std::atomic<uint64_t> seed{0};

  std::once_flag targets_once;
  gen::TargetPolicy policy;
  std::mutex workers_mu;  // the policy's workers answer one question at a time
  std::unique_ptr<WorkerSet> workers;

  std::mutex epochs_mu;
  std::vector<Counts> epochs{Counts{}};  // epochs[e]: the layer types chosen in models 0 .. e*E - 1

  // The targets: each backend's mapped operators (the campaign's stored probe, else probed now on
  // the policy's own worker) and its supports() answer on that worker.
  void make_targets() {
    const bool applies = draw.backend_share > 0 && !draw.backends.empty() && opt.generator != "zoo";
    if (!applies) return;
    workers = std::make_unique<WorkerSet>(draw.backends, draw.limits);
    std::map<std::string, std::vector<std::string>> stored;
    if (coverage)
      for (const auto& f : coverage->facts())
        if (f.kind == "maps") stored[f.subject].push_back(f.value);
    for (size_t i = 0; i < draw.backends.size(); ++i) {
      gen::Target t;
      t.name = draw.backends[i].str();
      auto it = stored.find(t.name);
      t.ops = it != stored.end() ? it->second : mapped_operators(workers->at(i));
      t.refuses = [this, i](const ir::Graph& g) {
        std::lock_guard<std::mutex> lock(workers_mu);
        std::vector<worker::NodeSupport> sup;
        std::vector<std::string> ops;
        if (!workers->at(i).supports(g, false, sup).ok()) {
          for (const auto& n : g.nodes) ops.push_back(n.op);  // no answer: nothing of it is known to run
          return ops;
        }
        for (const auto& s : sup)
          if (!s.ok)
            for (const auto& n : g.nodes)
              if (n.name == s.node) ops.push_back(n.op);
        return ops;
      };
      policy.targets.push_back(std::move(t));
    }
    policy.share = draw.backend_share;
  }

  gen::Model architecture(uint64_t index, core::Rng& rng, const Counts& counts) {
    gen::GenOptions o = opt;
    o.seed = seed;
    o.layer_counts = counts;
    return gen::generate_for(o, *source, index, rng, policy, gen::targets_of(seed, index, policy));
  }

  // Muffin's counts for model `index`: those of the models before its epoch, each epoch's computed
  // once from the architectures of the epoch before (drawn again from their own streams).
  Counts counts_for(uint64_t index) {
    if (draw.muffin_epoch <= 0 || opt.generator != "muffin") return {};
    const uint64_t epoch_size = static_cast<uint64_t>(draw.muffin_epoch);
    const size_t e = static_cast<size_t>(index / epoch_size);
    std::lock_guard<std::mutex> lock(epochs_mu);
    while (epochs.size() <= e) {
      const size_t k = epochs.size() - 1;
      Counts next = epochs[k];
      for (uint64_t j = k * epoch_size; j < (k + 1) * epoch_size; ++j) {
        core::Rng rng = gen::model_rng(seed, j);
        try {
          for (const auto& [op, n] : architecture(j, rng, epochs[k]).picks) next[op] += n;
        } catch (const std::exception&) {
          // an invalid model: it chose nothing the campaign ran
        }
      }
      epochs.push_back(std::move(next));
    }
    return epochs[e];
  }
};

}  // namespace

bool generator_learns(const std::string& generator) { return generator == "mcts"; }

ModelFactory generator_factory(const gen::GenOptions& opt, const std::string& dataset, CampaignOptions* campaign,
                               const DrawOptions& draw) {
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
  auto d = std::make_shared<Draw>();
  d->opt = opt;
  d->source = source;
  d->draw = draw;
  d->seed = opt.seed;
  if (campaign) {
    d->coverage = campaign->coverage;
    std::weak_ptr<Draw> weak = d;
    campaign->on_seed = [weak](uint64_t seed) {
      if (auto s = weak.lock()) s->seed = seed;
    };
  }
  return [d](int64_t index, core::Rng& rng) {
    std::call_once(d->targets_once, [&] { d->make_targets(); });
    const auto i = static_cast<uint64_t>(index);
    const Counts counts = d->counts_for(i);
    return to_case(gen::finish_model(d->architecture(i, rng, counts), rng, *d->source), index);
  };
}

}  // namespace quorum::campaign
