// Generation throughput per generator, in models per second on one core: architectures alone
// (what the 20 000 models/s target of muffin is about), then with weights and a data batch drawn.
// Sizes are chosen so that models have about ten nodes; the mean is reported as a counter.
#include <benchmark/benchmark.h>

#include "gen/generator.h"

namespace {

using namespace quorum;

// --max_nodes giving about ten IR nodes per model: muffin's vertices become one layer each (plus
// reshaping and the output layer); a ws/rn node holds a block of one to six operators.
int max_nodes_for(const std::string& g) {
  if (g == "ws" || g == "rn" || g == "mutate") return 4;
  return 8;
}

gen::GenOptions options(const std::string& g) {
  gen::GenOptions opt;
  opt.generator = g;
  opt.seed = 1;
  opt.max_nodes = max_nodes_for(g);
  return opt;
}

void BM_Architecture(benchmark::State& state, const char* g) {
  const auto source = data::open_source("random");
  gen::Stream stream(options(g), *source);
  size_t nodes = 0;
  for (auto _ : state) {
    gen::Model m = stream.next_architecture();
    nodes += m.graph.nodes.size();
    benchmark::DoNotOptimize(m);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["models/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["nodes"] = static_cast<double>(nodes) / static_cast<double>(state.iterations());
}

void BM_WithWeightsAndData(benchmark::State& state, const char* g) {
  const auto source = data::open_source("random");
  gen::Stream stream(options(g), *source);
  size_t nodes = 0;
  for (auto _ : state) {
    gen::Generated m = stream.next();
    nodes += m.graph.nodes.size();
    benchmark::DoNotOptimize(m);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["models/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["nodes"] = static_cast<double>(nodes) / static_cast<double>(state.iterations());
}

// Architecture, weights, data, then IR validation and one reference run: what `quorum gen` does
// per model before writing it.
void BM_Checked(benchmark::State& state, const char* g) {
  const auto source = data::open_source("random");
  gen::Stream stream(options(g), *source);
  for (auto _ : state) {
    gen::Generated m = stream.next();
    benchmark::DoNotOptimize(gen::check_model(m.graph, m.inputs));
  }
  state.counters["models/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

#define GEN_BENCH(fn, g) BENCHMARK_CAPTURE(fn, g, #g)->Unit(benchmark::kMicrosecond)
GEN_BENCH(BM_Architecture, muffin);
GEN_BENCH(BM_Architecture, unit);
GEN_BENCH(BM_Architecture, ws);
GEN_BENCH(BM_Architecture, rn);
GEN_BENCH(BM_Architecture, mutate);
GEN_BENCH(BM_Architecture, zoo);
GEN_BENCH(BM_WithWeightsAndData, muffin);
GEN_BENCH(BM_WithWeightsAndData, unit);
GEN_BENCH(BM_WithWeightsAndData, ws);
GEN_BENCH(BM_WithWeightsAndData, rn);
GEN_BENCH(BM_WithWeightsAndData, mutate);
GEN_BENCH(BM_WithWeightsAndData, zoo);
GEN_BENCH(BM_Checked, muffin);

}  // namespace

BENCHMARK_MAIN();
