// Muffin: a random DAG first (chain with skips, or cells), then a layer per vertex: the input
// layer from the data set, a single-input layer where one edge comes in, a multi-input layer
// where several do, each type drawn fitness-proportionately; output layer for the task.
#include <algorithm>

#include "gen/dag.h"
#include "gen/factories.h"
#include "ops/registry.h"

namespace quorum::gen {
namespace {

class Muffin : public Generator {
 public:
  Muffin(const GenOptions& opt, const data::Source& source) : opt_(opt), source_(source) {
    for (const ops::OpSpec* s : layer_operators()) {
      if (!op_allowed(opt, s->name)) continue;  // --ops / --skip_ops
      (s->multi_input() ? mi_ : si_).push_back(s);
      (s->multi_input() ? mi_names_ : si_names_).push_back(s->name);
    }
    si_count_.assign(si_.size(), 0);
    mi_count_.assign(mi_.size(), 0);
    for (size_t i = 0; i < si_.size(); ++i)
      if (const auto it = opt.layer_counts.find(si_[i]->name); it != opt.layer_counts.end()) si_count_[i] = it->second;
    for (size_t i = 0; i < mi_.size(); ++i)
      if (const auto it = opt.layer_counts.find(mi_[i]->name); it != opt.layer_counts.end()) mi_count_[i] = it->second;
  }

  std::string name() const override { return "muffin"; }

  std::vector<std::string> operators() const override {
    std::vector<std::string> all = si_names_;
    all.insert(all.end(), mi_names_.begin(), mi_names_.end());
    std::sort(all.begin(), all.end());
    return all;
  }

  Model generate(uint64_t index, core::Rng& rng) override {
    const data::DataSpec d = source_.spec(rng, data::Want::Any);
    const int max_v = std::max(opt_.max_nodes, 2);
    Dag dag;
    if (rng.bernoulli(0.5)) {
      const int n = static_cast<int>(rng.randint(2, max_v));
      dag = chain_with_skips(rng, n, std::min(0.3, 1.5 / n));
    } else {
      dag = cell_based(rng, max_v, opt_.max_cells);
    }
    Builder b(rng, opt_.limits);
    picks_.clear();
    std::vector<Vid> val(static_cast<size_t>(dag.size()));
    val[0] = b.input(d.input);
    for (int v = 1; v < dag.size(); ++v) {
      std::vector<Vid> in;
      for (int u : dag.preds[static_cast<size_t>(v)]) in.push_back(val[static_cast<size_t>(u)]);
      val[static_cast<size_t>(v)] = vertex(b, in, rng);
    }
    b.output(b.head(val.back(), d));
    Model m = b.finish("muffin_" + std::to_string(index), d);
    m.picks = std::move(picks_);
    return m;
  }

 private:
  // A layer for one vertex: single-input when one edge comes in, multi-input otherwise; a type that
  // cannot be placed is set aside and another drawn (at most kDraws).
  Vid vertex(Builder& b, const std::vector<Vid>& in, core::Rng& rng) {
    const bool multi = in.size() > 1;
    const auto& pool = multi ? mi_ : si_;
    auto& counts = multi ? mi_count_ : si_count_;
    std::vector<bool> skip(pool.size(), false);
    for (size_t i = 0; i < pool.size(); ++i)
      skip[i] = pool[i]->max_inputs != ops::kUnbounded && static_cast<int>(in.size()) > pool[i]->max_inputs;
    constexpr int kDraws = 8;
    for (int t = 0; t < kDraws; ++t) {
      const int pick = fitness_pick(counts, skip, rng);
      if (pick < 0) break;
      if (auto v = b.layer(*pool[static_cast<size_t>(pick)], in)) {
        ++counts[static_cast<size_t>(pick)];
        ++picks_[pool[static_cast<size_t>(pick)]->name];
        return *v;
      }
      skip[static_cast<size_t>(pick)] = true;
    }
    // Fallbacks that fit any input: an activation, or a sum after bringing the inputs to one shape.
    if (auto v = b.layer(ops::op(multi ? "sum" : "relu"), in)) return *v;
    return in[0];
  }

  GenOptions opt_;
  const data::Source& source_;
  std::vector<const ops::OpSpec*> si_, mi_;
  std::vector<std::string> si_names_, mi_names_;
  std::vector<int64_t> si_count_, mi_count_;  // how often each layer type was placed so far
  std::map<std::string, int64_t> picks_;       // the layer types placed in the model being generated
};

}  // namespace

std::vector<const ops::OpSpec*> layer_operators() {
  std::vector<const ops::OpSpec*> v;
  for (const ops::OpSpec* s : ops::catalogue().all())
    if (!s->is_loss && !s->is_quantized) v.push_back(s);
  return v;
}

std::unique_ptr<Generator> make_muffin(const GenOptions& opt, const data::Source& source) {
  return std::make_unique<Muffin>(opt, source);
}

}  // namespace quorum::gen
