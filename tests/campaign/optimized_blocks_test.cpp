// The optimized stage on real libraries: every fusion subgraph of the block corpus (conv+bn+relu, conv+clip,
// matmul+add+gelu, residual, ...) compiled by each library with an optimizer, on ordinary values. Where the
// pinned run passes, the envelope accepts the optimized run (no noise), except where the library's ledger
// names the fusion as a bug; and the libraries do fuse some of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <set>

#include "campaign/evaluate.h"
#include "core/rng.h"
#include "data/values.h"
#include "gen/corpus.h"
#include "ir/graph.h"
#include "oracle/known.h"
#include "worker/worker_set.h"

namespace quorum::campaign {
namespace {

void check_blocks(const std::string& backend) {
  const auto& have = worker::available_backends();
  if (std::find(have.begin(), have.end(), backend) == have.end()) GTEST_SKIP() << backend << " backend not built";
  Setup setup;
  setup.backends = parse_backends(backend);
  setup.mode = Mode::Infer;
  setup.known = std::make_shared<const oracle::Ledger>(oracle::load_ledgers(oracle::default_ledger_dir()));
  WorkerSet workers(setup.backends, setup.limits);
  int ran = 0, fused = 0;
  std::set<std::string> fused_blocks;
  for (const gen::Block& block : gen::block_corpus()) {
    if (!block.subgraph()) continue;
    for (uint64_t seed = 1; seed <= 10; ++seed) {
      core::Rng rng(seed);
      gen::Builder b(rng);
      std::vector<gen::Vid> in;
      for (int k = 0; k < std::max(1, block.min_in); ++k) in.push_back(b.input({1, 4, 6, 6}, "x" + std::to_string(k)));
      const auto out = gen::instantiate(block, b, in);
      if (!out) continue;
      b.output(*out);
      ModelCase m{gen::materialize(b.finish(block.name, {}), rng), {}, {}};
      ir::validate(m.graph, block.name);
      data::complete_inputs(m.graph, m.inputs, rng, 0.0);  // ordinary values: no edge values
      complete_case(m, "mse_loss", rng);
      const Evaluation ev = evaluate(m, setup, workers);
      const oracle::BackendRun& r = ev.runs.at(1);
      if (!r.optimized.ran || !r.optimized.outcome.ok()) continue;  // refused: the drawn parameters
      ++ran;
      for (const auto& [node, ops] : r.optimized.lowering)
        for (const auto& op : ops)
          if (op.rfind(backends::kFusedPrefix, 0) == 0) ++fused, fused_blocks.insert(block.name);
      bool pinned_passes = true;
      for (const auto& f : ev.findings) pinned_passes &= f.stage == core::Stage::Optimized;
      if (!pinned_passes) continue;
      for (const auto& f : ev.findings)
        EXPECT_FALSE(f.known.empty()) << backend << ", block " << block.name << " seed " << seed << ": "
                                      << f.signature() << "\n  " << f.detail;
    }
  }
  EXPECT_GT(ran, 5) << backend;
  EXPECT_GT(fused, 0) << backend << ": no block fused";
  std::string seen;
  for (const auto& b : fused_blocks) seen += " '" + b + "'";
  std::cout << backend << ": " << ran << " block models ran optimized; fused in" << seen << "\n";
}

TEST(OptimizedBlocks, OpencvFusesAndTheEnvelopeAcceptsIt) { check_blocks("opencv"); }
TEST(OptimizedBlocks, OrtFusesAndTheEnvelopeAcceptsIt) { check_blocks("ort"); }
TEST(OptimizedBlocks, ArmnnFusesAndTheEnvelopeAcceptsIt) { check_blocks("armnn"); }
TEST(OptimizedBlocks, XnnpackFusesAndTheEnvelopeAcceptsIt) { check_blocks("xnnpack"); }
TEST(OptimizedBlocks, OnednnFusesAndTheEnvelopeAcceptsIt) { check_blocks("onednn"); }

}  // namespace
}  // namespace quorum::campaign
