// Generator glue.
#include "campaign/model_source.h"

#include <atomic>
#include <deque>
#include <future>
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
  std::shared_ptr<coverage::Coverage> coverage;  // the campaign's (its backends' probe), or none
  std::atomic<uint64_t> seed{0};

  std::once_flag targets_once;
  gen::TargetPolicy policy;
  std::deque<std::mutex> worker_mu;  // each target's policy worker answers one question at a time
  std::unique_ptr<WorkerSet> workers;

  std::mutex epochs_mu;
  std::vector<Counts> epochs{Counts{}};  // epochs[e]: the layer types chosen in models 0 .. e*E - 1
  // The layer types the jobs' own draws chose, for models whose epoch's successor is not computed yet:
  // the same architectures counts_for would draw again (a model's architecture is a function of the
  // seed, its index and its epoch's counts), so it takes them from here.
  std::map<uint64_t, Counts> drawn;

  // The targets: each backend's mapped operators (the campaign's stored probe, else probed now on
  // the policy's own worker) and its supports() answer on that worker.
  void make_targets() {
    const bool applies = draw.backend_share > 0 && !draw.backends.empty() && opt.generator != "zoo";
    if (!applies) return;
    workers = std::make_unique<WorkerSet>(draw.backends, draw.limits);
    std::map<std::string, std::vector<std::string>> stored;
    if (coverage)
      for (const auto& f : coverage->facts())
        if (f.kind == coverage::FactKind::Maps) stored[f.subject].push_back(f.value);
    for (size_t i = 0; i < draw.backends.size(); ++i) {
      gen::Target t;
      t.name = draw.backends[i].str();
      auto it = stored.find(t.name);
      t.ops = it != stored.end() ? it->second : mapped_operators(workers->at(i));
      policy.targets.push_back(std::move(t));
    }
    worker_mu.resize(draw.backends.size());
    policy.share = draw.backend_share;
    // The targets' questions go out at once, one thread per target beyond the first: the answer
    // is a round trip to an idle process, whose latency the waiting job would otherwise pay per target.
    policy.refuses = [this](const ir::Graph& g, const std::vector<size_t>& which) {
      std::vector<std::future<std::vector<std::string>>> rest;
      for (size_t k = 1; k < which.size(); ++k)
        rest.push_back(std::async(std::launch::async, [this, &g, i = which[k]] { return refused(i, g); }));
      std::vector<std::vector<std::string>> out;
      if (!which.empty()) out.push_back(refused(which[0], g));
      for (auto& f : rest) out.push_back(f.get());
      return out;
    };
  }

  // The operators of the nodes target i refuses in g (its supports() answer on the policy's worker).
  std::vector<std::string> refused(size_t i, const ir::Graph& g) {
    std::lock_guard<std::mutex> lock(worker_mu[i]);
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
        if (auto it = drawn.find(j); it != drawn.end()) {
          for (const auto& [op, n] : it->second) next[op] += n;
          drawn.erase(it);
          continue;
        }
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

  // Keeps what model `index`'s own draw chose (nothing: its architecture could not be drawn) until
  // its epoch is counted.
  void note_drawn(uint64_t index, Counts chosen) {
    if (draw.muffin_epoch <= 0 || opt.generator != "muffin") return;
    std::lock_guard<std::mutex> lock(epochs_mu);
    if (index / static_cast<uint64_t>(draw.muffin_epoch) + 1 < epochs.size()) return;  // counted already
    drawn[index] = std::move(chosen);
  }

  gen::Model draw_architecture(uint64_t index, core::Rng& rng) {
    const Counts counts = counts_for(index);
    gen::Model arch;
    try {
      arch = architecture(index, rng, counts);
    } catch (const std::exception&) {
      note_drawn(index, {});
      throw;
    }
    note_drawn(index, arch.picks);
    return arch;
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
    std::shared_ptr<coverage::Coverage> cov;
    if (campaign) {
      if (!campaign->coverage) campaign->coverage = std::make_shared<coverage::Coverage>();
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
    return to_case(gen::finish_model(d->draw_architecture(i, rng), rng, *d->source), index);
  };
}

}  // namespace quorum::campaign
