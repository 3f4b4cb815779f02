// The MCTS block chooser of graph-based fuzzing (METHODS.md §3). Tree nodes are blocks of the
// corpus; a path from the root is a sequence of blocks. Each model: selection by UCT
// v/n + e·sqrt(ln N / n) (e = 1/√2) down the fully expanded nodes; expansion adds, below a node with
// fewer than 3 children, the block of lowest coverage not yet on the path; simulation builds a model
// from the path's blocks (the same path for tc2 models); back-propagation adds 1 up the path when the
// model raises coverage (and again when the campaign reports a new root cause for it, outcome()).
// Depth limit tc1. Each model is the one of kKeepAfter simulations that raises coverage most; a
// model that raises no coverage is not kept: more are simulated (at most kSimulations per model;
// when none raises anything, the first is returned). Coverage comes from gen::Feedback
// (GenOptions::feedback); without one every block counts as uncovered and every model as raising.
#include <algorithm>
#include <cmath>
#include <map>

#include "gen/corpus.h"
#include "gen/dag.h"
#include "gen/factories.h"
#include "ops/registry.h"

namespace quorum::gen {
namespace {

constexpr int kMaxChildren = 3;
constexpr int kSimulations = 16;
constexpr int kKeepAfter = 4;
const double kExplore = 1.0 / std::sqrt(2.0);

class Mcts : public Generator {
 public:
  Mcts(const GenOptions& opt, const data::Source& source) : opt_(opt), source_(source) {
    for (const Block& b : block_corpus())
      if (std::all_of(b.ops.begin(), b.ops.end(), [&](const BlockOp& o) { return op_allowed(opt, o.op); }))
        blocks_.push_back(&b);
    tree_.push_back({});  // the root: no block
  }

  std::string name() const override { return "mcts"; }

  std::vector<std::string> operators() const override {
    std::vector<std::string> v;
    for (const ops::OpSpec* s : layer_operators()) v.push_back(s->name);
    return v;
  }

  Model generate(uint64_t index, core::Rng& rng) override {
    Model best;
    size_t best_gain = 0;
    std::vector<int> best_path;
    bool have = false;
    for (int t = 0; t < kSimulations; ++t) {
      if (visits_left_ <= 0 || path_.empty()) {
        path_ = select_and_expand(rng);
        visits_left_ = std::max(opt_.mcts_visits, 1);
      }
      --visits_left_;
      Model m = simulate(index, rng);
      const size_t gain = opt_.feedback ? opt_.feedback->gain(m.graph) : 1;
      backpropagate(path_, gain > 0 ? 1.0 : 0.0, true);
      if (!have || gain > best_gain) {
        best = std::move(m);
        best_gain = gain;
        best_path = path_;
        have = true;
      }
      // The model kept: the one that raises coverage most of kKeepAfter simulations, or of more
      // (up to kSimulations) while none raises anything.
      if (t + 1 >= kKeepAfter && best_gain > 0) break;
    }
    paths_[index] = best_path;
    while (paths_.size() > 64) paths_.erase(paths_.begin());  // outcomes come soon after the model
    return best;
  }

  void outcome(uint64_t index, bool success) override {
    const auto it = paths_.find(index);
    if (it == paths_.end()) return;
    if (success) backpropagate(it->second, 1.0, false);
    paths_.erase(it);
  }

 private:
  struct TreeNode {
    int block = -1;  // index into blocks_ (-1: the root)
    std::vector<int> children;
    double value = 0;
    int64_t visits = 0;
  };

  double block_coverage(const Block& b) const {
    if (!opt_.feedback) return 0;
    double sum = 0;
    for (const BlockOp& o : b.ops) sum += opt_.feedback->op_coverage(o.op);
    return sum / static_cast<double>(std::max<size_t>(b.ops.size(), 1));
  }

  // Down the tree by UCT while nodes are fully expanded, then one new child (the block of lowest
  // coverage not on the path; ties drawn at random). Returns the path's tree nodes, root excluded.
  std::vector<int> select_and_expand(core::Rng& rng) {
    std::vector<int> path;
    int cur = 0;
    const int depth_limit = std::max(opt_.mcts_depth, 1);
    while (static_cast<int>(path.size()) < depth_limit) {
      if (static_cast<int>(tree_[static_cast<size_t>(cur)].children.size()) < kMaxChildren) {
        std::vector<bool> on_path(blocks_.size(), false);
        for (int p : path) on_path[static_cast<size_t>(tree_[static_cast<size_t>(p)].block)] = true;
        for (int c : tree_[static_cast<size_t>(cur)].children)
          on_path[static_cast<size_t>(tree_[static_cast<size_t>(c)].block)] = true;  // a sibling already
        double lowest = 2;
        std::vector<int> best;
        for (size_t i = 0; i < blocks_.size(); ++i) {
          if (on_path[i]) continue;
          const double c = block_coverage(*blocks_[i]);
          if (c < lowest - 1e-12) {
            lowest = c;
            best.clear();
          }
          if (c <= lowest + 1e-12) best.push_back(static_cast<int>(i));
        }
        if (!best.empty()) {
          TreeNode child;
          child.block = rng.pick(best);
          tree_.push_back(child);
          const int id = static_cast<int>(tree_.size()) - 1;
          tree_[static_cast<size_t>(cur)].children.push_back(id);
          path.push_back(id);
          break;
        }
      }
      const TreeNode& node = tree_[static_cast<size_t>(cur)];
      if (node.children.empty()) break;
      int pick = -1;
      double best_score = -1;
      const double log_n = std::log(static_cast<double>(std::max<int64_t>(node.visits, 1)));
      for (int c : node.children) {
        const TreeNode& ch = tree_[static_cast<size_t>(c)];
        const double score = ch.visits == 0 ? 1e300
                                            : ch.value / static_cast<double>(ch.visits) +
                                                  kExplore * std::sqrt(log_n / static_cast<double>(ch.visits));
        if (score > best_score) {
          best_score = score;
          pick = c;
        }
      }
      path.push_back(pick);
      cur = pick;
    }
    return path;
  }

  void backpropagate(const std::vector<int>& path, double reward, bool visit) {
    if (visit) ++tree_[0].visits;
    for (int p : path) {
      TreeNode& n = tree_[static_cast<size_t>(p)];
      if (visit) ++n.visits;
      n.value += reward;
    }
  }

  // A model of the path's blocks on a Residual Network graph as rn draws it (k of 2, 4 or 6) on
  // max(--max_nodes, path length) nodes: node v takes path block v (in path order) when it accepts
  // v's in-degree, else the block accepting it that adds the most successor pairs coverage lacks
  // (pred's last operator -> the block's first), then the least covered. Nodes without a
  // predecessor read the model input; values nothing reads are the outputs.
  Model simulate(uint64_t index, core::Rng& rng) {
    data::DataSpec d = source_.spec(rng, data::Want::Any);
    d.task = data::Task::None;  // inference: every sink is an output
    d.target.clear();
    const int n = std::max({opt_.max_nodes, static_cast<int>(path_.size()), 2});
    const int k = static_cast<int>(rng.pick(std::vector<int64_t>{2, 4, 6}));
    const Dag dag = residual_network(rng, n, k, 0.9);
    Builder b(rng, opt_.limits);
    const Vid x = b.input(d.input);
    std::vector<Vid> val(static_cast<size_t>(dag.size()));
    std::map<Vid, std::string> last_op;  // the operator that made each value
    for (int v = 0; v < dag.size(); ++v) {
      std::vector<Vid> in;
      for (int u : dag.preds[static_cast<size_t>(v)]) in.push_back(val[static_cast<size_t>(u)]);
      if (in.empty()) in.push_back(x);
      std::vector<const Block*> order;
      if (static_cast<size_t>(v) < path_.size()) {
        const Block* p = blocks_[static_cast<size_t>(tree_[static_cast<size_t>(path_[static_cast<size_t>(v)])].block)];
        if (p->accepts(static_cast<int>(in.size()))) order.push_back(p);
      }
      for (const Block* c : fillers(in, last_op, rng)) order.push_back(c);
      Vid out = in[0];
      bool placed = false;
      for (const Block* blk : order) {
        if (auto o = instantiate(*blk, b, in)) {
          out = *o;
          last_op[out] = blk->ops.back().op;
          placed = true;
          break;
        }
      }
      if (!placed)
        if (auto o = b.layer(ops::op(in.size() > 1 ? "sum" : "relu"), in)) out = *o;
      val[static_cast<size_t>(v)] = out;
    }
    output_sinks(b, dag.sinks(), val, x);
    return b.finish("mcts_" + std::to_string(index), d);
  }

  // The blocks accepting the in-degree of a node reading `in`, best first (the most successor pairs
  // new to coverage, then the lowest coverage; ties in a drawn order).
  std::vector<const Block*> fillers(const std::vector<Vid>& in, const std::map<Vid, std::string>& last_op,
                                    core::Rng& rng) const {
    std::vector<const Block*> ok;
    for (const Block* blk : blocks_)
      if (blk->accepts(static_cast<int>(in.size()))) ok.push_back(blk);
    rng.shuffle(ok);
    std::vector<std::pair<double, const Block*>> scored;
    for (const Block* blk : ok) {
      double score = -block_coverage(*blk);
      if (opt_.feedback)
        for (Vid u : in)
          if (auto it = last_op.find(u);
              it != last_op.end() && !opt_.feedback->has_successor(it->second, blk->ops[0].op))
            score += 1;
      scored.emplace_back(score, blk);
    }
    std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<const Block*> out;
    for (const auto& [sc, blk] : scored) out.push_back(blk);
    return out;
  }

  GenOptions opt_;
  const data::Source& source_;
  std::vector<const Block*> blocks_;
  std::vector<TreeNode> tree_;
  std::vector<int> path_;  // the path being simulated, for visits_left_ more models
  int visits_left_ = 0;
  std::map<uint64_t, std::vector<int>> paths_;  // each recent model's path, until its outcome
};

}  // namespace

std::unique_ptr<Generator> make_mcts(const GenOptions& opt, const data::Source& source) {
  return std::make_unique<Mcts>(opt, source);
}

}  // namespace quorum::gen
