// The MCTS block chooser guided by coverage: deterministic for a seed (with its outcomes told in
// the same order), other seeds give other models, each model it keeps raised coverage, and it
// covers more than the random graph generators with the same budget.
#include <gtest/gtest.h>

#include <map>

#include "data/dataset.h"
#include "gen/generator.h"
#include "ir/json_io.h"
#include "search/coverage.h"

namespace quorum::search {
namespace {

struct Generated {
  std::vector<std::string> models;
  Parts parts;
  int raised = 0;
};

Generated generate(const std::string& generator, uint64_t seed, int count) {
  const auto source = data::open_source("random");
  Coverage cov;
  gen::GenOptions opt;
  opt.generator = generator;
  opt.seed = seed;
  opt.feedback = &cov;
  gen::Stream stream(opt, *source);
  Generated r;
  for (int i = 0; i < count; ++i) {
    gen::Generated g = stream.next();
    r.raised += cov.add(model_facts(g.graph, i)).empty() ? 0 : 1;
    // A campaign tells each model's outcome: here every fifth found something new.
    stream.generator().outcome(static_cast<uint64_t>(i), i % 5 == 0);
    r.models.push_back(ir::graph_to_json(g.graph));
  }
  r.parts = cov.parts();
  return r;
}

TEST(Mcts, TheSameSeedGivesTheSameModels) {
  const Generated a = generate("mcts", 42, 40), b = generate("mcts", 42, 40), c = generate("mcts", 43, 40);
  ASSERT_EQ(a.models.size(), b.models.size());
  for (size_t i = 0; i < a.models.size(); ++i) EXPECT_EQ(a.models[i], b.models[i]) << "model " << i;
  EXPECT_NE(a.models, c.models);
}

TEST(Mcts, KeepsModelsThatRaiseCoverageAndCoversMoreThanRandomGraphs) {
  constexpr int kModels = 400;
  const Generated m = generate("mcts", 7, kModels);
  EXPECT_GE(m.raised, kModels * 9 / 10);  // a model that raises nothing is returned only after 16 simulations
  // On average over seeds: one seed's margin over rn is within the seeds' spread (measured on seeds 7 to 16,
  // 400 models: MCTS 74.0 to 76.7 % OLC, mean 75.3 %; rn 74.9 to 75.3 %, mean 75.1 %; ws 73.7
  // to 74.2 %). Five seeds were not enough once the catalogue grew by one operator.
  std::map<std::string, double> mean;
  for (uint64_t seed = 7; seed <= 16; ++seed)
    for (const char* g : {"mcts", "ws", "rn"}) mean[g] += generate(g, seed, kModels).parts.olc / 10;
  for (const char* g : {"ws", "rn"}) EXPECT_GT(mean["mcts"], mean[g]) << g << " " << mean[g] << " vs " << mean["mcts"];
}

}  // namespace
}  // namespace quorum::search
