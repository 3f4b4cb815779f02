// The per-node rule's fast path (Thresholds::fast_path) changes no verdict: generated models, run on
// planted faults and on the real libraries built here, give the same findings with and without it.
#include <gtest/gtest.h>

#include <algorithm>

#include "campaign/campaign.h"
#include "campaign/evaluate.h"
#include "campaign/model_source.h"
#include "worker/supervisor.h"
#include "worker/worker_set.h"

namespace quorum::campaign {
namespace {

std::string backends_list() {
  std::string list =
      "faulty:same-pad-off-by-one+bn-eps-outside-sqrt+relu-grad-at-zero+avgpool-counts-padding+softmax-no-max-sub+"
      "maxpool-grad-all-ties+concat-drops-last+relu-nan-to-zero+transpose-grad-as-reshape";
  const auto& built = worker::available_backends();
  for (const char* b : {"torch", "onednn", "armnn"})
    if (std::find(built.begin(), built.end(), b) != built.end()) list += std::string(",") + b;
  return list;
}

std::vector<std::string> described(const Evaluation& ev) {
  std::vector<std::string> out;
  for (const auto& f : ev.findings) out.push_back(f.signature() + " @" + f.node + " " + f.detail);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(FastPath, GivesTheVerdictsOfTheFullPerNodeRule) {
  gen::GenOptions g;
  g.generator = "muffin";
  g.max_nodes = 12;
  const ModelFactory factory = generator_factory(g, "random");
  campaign::Setup fast;
  fast.backends = parse_backends(backends_list());
  fast.mode = Mode::Both;
  campaign::Setup full = fast;
  full.thresholds.fast_path = false;
  ASSERT_TRUE(fast.thresholds.fast_path);
  WorkerSet workers(fast.backends, fast.limits);
  size_t findings = 0;
  for (int64_t i = 0; i < 150; ++i) {
    const ModelCase m = draw_case(factory, 2031, i, fast.loss);
    const Evaluation a = evaluate(m, full, workers);
    const Evaluation b = evaluate(m, fast, workers);
    EXPECT_EQ(described(a), described(b)) << "model " << i;
    findings += a.findings.size();
  }
  EXPECT_GT(findings, 30u);  // the comparison covers findings of every stage, not only clean models
}

}  // namespace
}  // namespace quorum::campaign
