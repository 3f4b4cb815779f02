// The MCTS block chooser guided by coverage: deterministic for a seed (with its outcomes told in
// the same order), other seeds give other models, each model it keeps raised coverage, and it
// covers more than ws and as much as rn (within the seeds' spread) with the same budget.
#include <gtest/gtest.h>

#include <map>

#include "coverage/coverage.h"
#include "data/dataset.h"
#include "gen/generator.h"
#include "ir/json_io.h"

namespace quorum::coverage {
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
  // On average over seeds, against the random graph generators. Measured on seeds 7 to 26, 400 models, with 69
  // operators (resize's given scales one more draw): MCTS 74.1 to 76.9 % OLC, mean 75.3 %; rn 75.0 to 75.4 %,
  // mean 75.2 %; ws 73.7 to 74.2 %, mean 73.9 %. MCTS is clearly ahead of ws; its lead over rn is within the
  // seeds' spread (the first ten seeds: 75.0 % against 75.2 %), so against rn it must only not fall behind by
  // more than that spread.
  std::map<std::string, double> mean;
  for (uint64_t seed = 7; seed <= 16; ++seed)
    for (const char* g : {"mcts", "ws", "rn"}) mean[g] += generate(g, seed, kModels).parts.olc / 10;
  EXPECT_GT(mean["mcts"], mean["ws"] + 0.005) << mean["ws"] << " vs " << mean["mcts"];
  EXPECT_GT(mean["mcts"], mean["rn"] - 0.005) << mean["rn"] << " vs " << mean["mcts"];
}

}  // namespace
}  // namespace quorum::coverage
