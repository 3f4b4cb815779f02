// Reference interpreter throughput on the example models: forward, and forward + loss + backward.
#include <benchmark/benchmark.h>

#include "ir/json_io.h"
#include "data/values.h"
#include "ref/interpreter.h"

namespace {

using namespace quorum;

ir::Graph load(const char* name) { return ir::load_graph(std::string(QUORUM_SOURCE_DIR) + "/docs/examples/" + name); }

void BM_Forward(benchmark::State& state, const char* model) {
  const ir::Graph g = load(model);
  core::Rng rng(1);
  ref::ValueMap in;
  data::complete_inputs(g, in, rng);
  for (auto _ : state) benchmark::DoNotOptimize(ref::forward(g, in));
}

void BM_Train(benchmark::State& state, const char* model) {
  const ir::Graph g = load(model);
  core::Rng rng(1);
  ref::ValueMap in;
  data::complete_inputs(g, in, rng);
  core::Tensor target(core::DType::F64, g.types.at(g.outputs[0]).shape);
  for (auto _ : state) benchmark::DoNotOptimize(ref::train(g, in, target, ref::LossSpec{"mse_loss", {}}));
}

BENCHMARK_CAPTURE(BM_Forward, lenet5, "lenet5.json")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Train, lenet5, "lenet5.json")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Forward, residual_small, "residual_small.json")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Train, residual_small, "residual_small.json")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
