// Graph-based fuzzing's generators: a Watts–Strogatz or Residual-Network random graph on n nodes,
// each node filled with a block from the corpus whose allowed in-degree matches the node's. Blocks
// are drawn fitness-proportionately (rarely used ones first), standing in for the paper's
// coverage-guided chooser. Nodes without a predecessor read the model input; nodes without a
// successor are the model outputs (inference engines are tested on every one).
#include <algorithm>

#include "gen/corpus.h"
#include "gen/dag.h"
#include "gen/factories.h"
#include "ops/registry.h"

namespace quorum::gen {
namespace {

enum class GraphModel { WattsStrogatz, ResidualNetwork };

class GraphFuzz : public Generator {
 public:
  GraphFuzz(GraphModel model, const GenOptions& opt, const data::Source& source)
      : model_(model), opt_(opt), source_(source) {
    for (const Block& b : block_corpus())
      if (std::all_of(b.ops.begin(), b.ops.end(), [&](const BlockOp& o) { return op_allowed(opt, o.op); }))
        blocks_.push_back(&b);  // --ops / --skip_ops
    used_.assign(blocks_.size(), 0);
  }

  std::string name() const override { return model_ == GraphModel::WattsStrogatz ? "ws" : "rn"; }

  std::vector<std::string> operators() const override {
    std::vector<std::string> v;
    for (const ops::OpSpec* s : layer_operators()) v.push_back(s->name);
    return v;
  }

  Model generate(uint64_t index, core::Rng& rng) override {
    data::DataSpec d = source_.spec(rng, data::Want::Any);
    d.task = data::Task::None;  // inference: every sink is an output, no task head
    d.target.clear();
    const int n = std::max(opt_.max_nodes, 2);
    const int k = static_cast<int>(rng.pick(std::vector<int64_t>{2, 4, 6}));
    const Dag dag = model_ == GraphModel::WattsStrogatz ? watts_strogatz(rng, n, k, 0.5)
                                                        : residual_network(rng, n, k, 0.9);
    Builder b(rng, opt_.limits);
    const Vid x = b.input(d.input);
    std::vector<Vid> val(static_cast<size_t>(dag.size()));
    for (int v = 0; v < dag.size(); ++v) {
      std::vector<Vid> in;
      for (int u : dag.preds[static_cast<size_t>(v)]) in.push_back(val[static_cast<size_t>(u)]);
      if (in.empty()) in.push_back(x);
      val[static_cast<size_t>(v)] = node(b, in, rng);
    }
    output_sinks(b, dag.sinks(), val, x);
    return b.finish(name() + "_" + std::to_string(index), d);
  }

 private:
  // A block whose allowed in-degree matches; subgraphs get a fixed share so that the fused
  // structures a random choice would rarely build appear often.
  Vid node(Builder& b, const std::vector<Vid>& in, core::Rng& rng) {
    const int deg = static_cast<int>(in.size());
    const bool want_subgraph = rng.bernoulli(0.35);
    std::vector<bool> skip(blocks_.size());
    for (int pass = 0; pass < 2; ++pass) {
      bool any = false;
      for (size_t i = 0; i < blocks_.size(); ++i) {
        skip[i] = !blocks_[i]->accepts(deg) || (pass == 0 && blocks_[i]->subgraph() != want_subgraph);
        any = any || !skip[i];
      }
      if (any) break;
    }
    constexpr int kDraws = 8;
    for (int t = 0; t < kDraws; ++t) {
      const int pick = fitness_pick(used_, skip, rng);
      if (pick < 0) break;
      if (auto v = instantiate(*blocks_[static_cast<size_t>(pick)], b, in)) {
        ++used_[static_cast<size_t>(pick)];
        return *v;
      }
      skip[static_cast<size_t>(pick)] = true;
    }
    if (auto v = b.layer(ops::op(deg > 1 ? "sum" : "relu"), in)) return *v;
    return in[0];
  }

  GraphModel model_;
  GenOptions opt_;
  const data::Source& source_;
  std::vector<const Block*> blocks_;
  std::vector<int64_t> used_;  // how often each block was placed so far
};

}  // namespace

std::unique_ptr<Generator> make_ws(const GenOptions& opt, const data::Source& source) {
  return std::make_unique<GraphFuzz>(GraphModel::WattsStrogatz, opt, source);
}

std::unique_ptr<Generator> make_rn(const GenOptions& opt, const data::Source& source) {
  return std::make_unique<GraphFuzz>(GraphModel::ResidualNetwork, opt, source);
}

}  // namespace quorum::gen
