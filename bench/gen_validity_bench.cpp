// The large version of tests/gen/generators_test.cpp's validity and coverage checks: 2 000 models
// per generator from the tests' fixed seed are at least 99.5 % valid (IR validation passes and the
// float64 reference runs them), Muffin uses every operator it may use in 2 000 architectures, ws and
// rn in 1 000. `make test` runs a tenth of each; this program (run by `make bench`) exits 1 when a
// check fails, after printing the reasons.
#include <benchmark/benchmark.h>

#include <iostream>
#include <set>
#include <string>

#include "gen/generator.h"

namespace {

using namespace quorum;

bool g_failed = false;

void fail(benchmark::State& state, const std::string& why) {
  g_failed = true;
  std::cerr << why << "\n";
  state.SkipWithError(why.c_str());
}

gen::GenOptions options(const std::string& g, uint64_t seed) {
  gen::GenOptions opt;
  opt.generator = g;
  opt.seed = seed;
  return opt;
}

void BM_Validity(benchmark::State& state, const char* g) {
  constexpr uint64_t kModels = 2000;
  const auto source = data::open_source("random");
  for (auto _ : state) {
    gen::Stream stream(options(g, 20240601), *source);
    gen::Summary s;
    for (uint64_t i = 0; i < kModels; ++i) {
      gen::Generated m = stream.next();
      s.add(m, gen::check_model(m.graph, m.inputs));
    }
    state.counters["valid"] = static_cast<double>(s.valid);
    state.counters["models"] = static_cast<double>(s.models);
    if (!s.invalid.empty()) {
      std::string why = std::string(g) + ": " + std::to_string(s.models - s.valid) + " of " +
                        std::to_string(s.models) + " models invalid:";
      for (const auto& [reason, n] : s.invalid) why += "\n  " + std::to_string(n) + "x " + reason;
      if (static_cast<double>(s.valid) < 0.995 * static_cast<double>(kModels)) fail(state, why);
      else std::cerr << why << "\n";  // within the allowance, still worth a look
    }
  }
}

void BM_Coverage(benchmark::State& state, const char* g, uint64_t seed, uint64_t count) {
  const auto source = data::open_source("random");
  for (auto _ : state) {
    const auto universe = gen::make_generator(options(g, 1), *source)->operators();
    gen::Stream stream(options(g, seed), *source);
    std::set<std::string> used;
    for (uint64_t i = 0; i < count; ++i)
      for (const auto& n : stream.next_architecture().graph.nodes) used.insert(n.op);
    std::string missing;
    for (const auto& op : universe)
      if (!used.count(op)) missing += " " + op;
    state.counters["operators"] = static_cast<double>(universe.size());
    if (!missing.empty())
      fail(state, std::string(g) + ": never used in " + std::to_string(count) + " models:" + missing);
  }
}

#define VALIDITY(g) BENCHMARK_CAPTURE(BM_Validity, g, #g)->Iterations(1)->Unit(benchmark::kMillisecond)
VALIDITY(muffin);
VALIDITY(unit);
VALIDITY(ws);
VALIDITY(rn);
VALIDITY(mutate);
VALIDITY(zoo);
BENCHMARK_CAPTURE(BM_Coverage, muffin, "muffin", 20240601, 2000)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Coverage, ws, "ws", 8, 1000)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Coverage, rn, "rn", 8, 1000)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return g_failed ? 1 : 0;
}
