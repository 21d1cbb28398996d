// redwood_placement_bench: how long each placer takes on synthetic problems (runtime/random_problem.hpp)
// of 14 to 400 nodes on a host and a GPU, and how good its placement is against HEFT's, the
// baseline, in the same run:
//
//   redwood_placement_bench [--benchmark_filter=...]
//
// Counters: `objective_ms` (the placer's own objective: makespan for HEFT, local search and the
// exhaustive search; bottleneck for the throughput placers), `vs_heft` (that objective over
// HEFT's placement's: below 1 is better), `proven` (1 where the placement is proven optimal).

#include "runtime/placement.hpp"
#include "runtime/random_problem.hpp"

#include <benchmark/benchmark.h>

namespace {

using namespace redwood::runtime;

constexpr std::uint32_t kSeed = 2026;

template <typename Place, typename Objective>
void run(benchmark::State& state, Place place, Objective objective) {
  const PlacementProblem p = random_problem(kSeed, static_cast<int>(state.range(0)));
  const Placement heft = place_heft(p);
  Placement placed;
  for (auto _ : state) {
    placed = place(p);
    benchmark::DoNotOptimize(placed.device.data());
  }
  state.counters["objective_ms"] = objective(placed);
  state.counters["vs_heft"] = objective(placed) / objective(heft);
  state.counters["proven"] = placed.proven_optimal ? 1 : 0;
}

double makespan_of(const Placement& p) { return p.makespan_ms; }
double bottleneck_of(const Placement& p) { return p.bottleneck_ms; }

void BM_Heft(benchmark::State& state) { run(state, place_heft, makespan_of); }
void BM_Latency(benchmark::State& state) { run(state, place_latency, makespan_of); }
void BM_Exhaustive(benchmark::State& state) {
  run(state, [](const PlacementProblem& p) { return place_exhaustive(p); }, makespan_of);
}
void BM_ThroughputIlp(benchmark::State& state) {
  run(state, [](const PlacementProblem& p) { return place_throughput_ilp(p, 60); }, bottleneck_of);
}
void BM_ThroughputExhaustive(benchmark::State& state) {
  run(state, [](const PlacementProblem& p) { return place_throughput_exhaustive(p); }, bottleneck_of);
}

BENCHMARK(BM_Heft)->Arg(14)->Arg(50)->Arg(100)->Arg(200)->Arg(400)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Latency)->Arg(14)->Arg(50)->Arg(100)->Arg(200)->Arg(400)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Exhaustive)->Arg(14)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ThroughputIlp)->Arg(14)->Arg(50)->Arg(100)->Arg(200)->Arg(400)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ThroughputExhaustive)->Arg(14)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
