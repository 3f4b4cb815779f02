// Per-call overhead of the worker round trip (pipe + binary protocol + process) against running
// the same model in-process, on the reference backend so only the transport differs.
// Report the ratio worker/in-process for each model.
#include <benchmark/benchmark.h>

#include "backends/ref/ref_backend.h"
#include "data/values.h"
#include "ir/build.h"
#include "ir/json_io.h"
#include "ops/registry.h"
#include "ref/interpreter.h"
#include "worker/supervisor.h"

namespace {

using namespace quorum;

struct Model {
  ir::Graph g;
  ref::ValueMap inputs;
};

Model model(const std::string& which) {
  core::Rng rng(1);
  if (which == "relu") {
    ops::Case c;
    c.inputs = {{core::DType::F32, {1, 8}}};
    ir::SingleNode sn = ir::single_node_graph(ops::op("relu"), c, rng);
    return {sn.graph, sn.inputs};
  }
  ir::Graph g = ir::load_graph(std::string(QUORUM_SOURCE_DIR) + "/docs/examples/" + which + ".json");
  ref::ValueMap in;
  data::complete_inputs(g, in, rng);
  return {g, in};
}

void BM_InProcess(benchmark::State& state, const char* which) {
  const Model m = model(which);
  auto backend = backends::make_ref_backend();
  auto session = backend->compile(m.g, {});
  for (auto _ : state) benchmark::DoNotOptimize(session->forward(m.inputs, true));
}

void BM_Worker(benchmark::State& state, const char* which) {
  const Model m = model(which);
  worker::Worker w("ref");
  if (!w.compile(m.g, {}).ok()) state.SkipWithError("compile failed");
  backends::ValueMap out;
  for (auto _ : state) {
    if (!w.forward(m.inputs, true, out).ok()) state.SkipWithError("forward failed");
    benchmark::DoNotOptimize(out);
  }
}

BENCHMARK_CAPTURE(BM_InProcess, relu, "relu")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Worker, relu, "relu")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_InProcess, lenet5, "lenet5")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Worker, lenet5, "lenet5")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_InProcess, residual_small, "residual_small")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Worker, residual_small, "residual_small")->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
