// Reducer cost: the time and model runs `quorum reduce` spends per finding (reduction, localize-fix
// and halving the inputs) with a budget of 30 runs (the campaign's default) and of 200 (quorum
// reduce's). A 400-model muffin campaign on the five libraries (no reduction during it, seed 2026)
// provides the bundles; each benchmark reduces all of them from scratch.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "campaign/bundle.h"
#include "campaign/campaign.h"
#include "campaign/model_source.h"
#include "campaign/reduce_bundle.h"

namespace {

using namespace quorum;
namespace fs = std::filesystem;

std::vector<std::string> campaign_bundles(const std::string& backends) {
  const std::string out = (fs::temp_directory_path() / "quorum_reduce_bench").string();
  fs::remove_all(out);
  gen::GenOptions g;
  g.generator = "muffin";
  g.max_nodes = 10;
  campaign::CampaignOptions opt;
  opt.generator = "muffin";
  opt.setup.backends = campaign::parse_backends(backends);
  opt.setup.mode = campaign::Mode::Both;
  opt.models = 400;
  opt.seed = 2026;
  opt.quiet = true;
  opt.out = out;
  opt.reduce_runs = 0;
  std::ostringstream log;
  campaign::run_campaign(opt, campaign::generator_factory(g, "random"), log);
  std::vector<std::string> bundles;
  for (const auto& e : fs::directory_iterator(fs::path(out) / "bundles")) bundles.push_back(e.path().string());
  std::sort(bundles.begin(), bundles.end());
  return bundles;
}

void BM_ReduceFindings(benchmark::State& state, const char* backends) {
  static const std::vector<std::string> bundles = campaign_bundles(backends);
  const int max_runs = static_cast<int>(state.range(0));
  int64_t runs = 0, reduced = 0, one_node = 0, nodes_before = 0, nodes_after = 0;
  double seconds = 0;
  if (bundles.empty()) return;
  // One set of workers for all, as a campaign's job reuses its own.
  const campaign::Setup setup = campaign::bundle_setup(bundles.front());
  campaign::WorkerSet workers(setup.backends, setup.limits);
  for (auto _ : state) {
    runs = reduced = one_node = nodes_before = nodes_after = 0;
    seconds = 0;
    for (const auto& b : bundles) {
      fs::remove_all(fs::path(b) / "reduced");
      const campaign::BundleReduction r = campaign::reduce_bundle(b, max_runs, nullptr, &workers);
      seconds += r.seconds;
      runs += r.reduction.runs + r.fix.runs;
      reduced += r.reduction.reproduced;
      one_node += r.reduction.reproduced && r.nodes_after == 1;
      nodes_before += r.nodes_before;
      nodes_after += r.nodes_after;
    }
  }
  const double n = static_cast<double>(std::max<size_t>(1, bundles.size()));
  state.counters["findings"] = n;
  state.counters["s_per_finding"] = seconds / n;
  state.counters["runs_per_finding"] = static_cast<double>(runs) / n;
  state.counters["reduced"] = static_cast<double>(reduced);
  state.counters["one_node"] = static_cast<double>(one_node);
  state.counters["mean_nodes_before"] = static_cast<double>(nodes_before) / n;
  state.counters["mean_nodes_after"] = static_cast<double>(nodes_after) / n;
}

BENCHMARK_CAPTURE(BM_ReduceFindings, five_libraries, "torch,onednn,opencv,armnn,xnnpack")
    ->Arg(30)
    ->Arg(200)
    ->Unit(benchmark::kSecond)
    ->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
