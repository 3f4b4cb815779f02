// The backend-share policy (gen/targets.h): the targets are asked about the whole model as a backend
// sees it when it runs — weights drawn and every value typed, graph inputs and weights included
// (backends' support rules read the operands' types) — and what a target refuses is drawn again
// without the refused operator.
#include "gen/targets.h"

#include <gtest/gtest.h>

#include <set>

#include "gen/factories.h"
#include "gen/generator.h"
#include "ops/registry.h"

namespace quorum::gen {
namespace {

// Whether node n reads a data operand of rank 4 (weights aside), its type from the graph's types or
// inputs (a generator's graph types node outputs only).
bool reads_rank4(const ir::Graph& g, const ir::Node& n, int* untyped = nullptr) {
  for (size_t k = 0; k < ir::data_input_count(n); ++k) {
    const std::string& v = n.inputs[k];
    const core::TensorType* t = nullptr;
    if (const auto it = g.types.find(v); it != g.types.end()) t = &it->second;
    if (!t && untyped) {
      ++*untyped;
      continue;
    }
    for (const auto& in : g.inputs)
      if (!t && in.name == v) t = &in.type;
    if (t && t->shape.size() == 4) return true;
  }
  return false;
}

TEST(Targets, AskedAboutTypedModelsAndRefusedOperatorsAreDrawnAgain) {
  const auto source = data::open_source("random");
  GenOptions opt;
  opt.generator = "muffin";
  opt.seed = 31;
  TargetPolicy p;
  p.share = 1;
  Target t;
  t.name = "rank-refusing";
  for (const ops::OpSpec* s : layer_operators()) t.ops.push_back(s->name);
  p.targets.push_back(t);
  p.targets.push_back(t);
  int asked = 0, untyped = 0, refused = 0;
  // The first target refuses every node reading a rank-4 data operand (as libraries refuse by shape).
  p.refuses = [&](const ir::Graph& g, const std::vector<size_t>& which) {
    ++asked;
    std::vector<std::vector<std::string>> out(which.size());
    for (const auto& n : g.nodes)
      if (reads_rank4(g, n, &untyped) && n.op != "reshape" && n.op != "flatten") {
        out[0].push_back(n.op);
        ++refused;
      }
    return out;
  };
  int taken = 0;
  for (uint64_t i = 0; i < 40; ++i) {
    core::Rng rng = model_rng(opt.seed, i);
    const Model m = generate_for(opt, *source, i, rng, p, {0, 1});
    bool rank4 = false;
    for (const auto& n : m.graph.nodes)
      rank4 = rank4 || (reads_rank4(m.graph, n) && n.op != "reshape" && n.op != "flatten");
    taken += !rank4;
  }
  EXPECT_GT(asked, 0);
  EXPECT_EQ(untyped, 0) << "the targets were asked about values without a type";
  EXPECT_GT(refused, 0) << "no draw held what the target refuses: the test proves nothing";
  std::cout << "asked " << asked << ", refused nodes " << refused << ", models the target takes " << taken << "/40\n";
  EXPECT_GT(taken, 20) << "refused operators are drawn again without them";
}

}  // namespace
}  // namespace quorum::gen
