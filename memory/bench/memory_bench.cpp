// redwood_memory_bench: the random-allocation trace (see random_trace.hpp) on the host buddy pool
// and on its peer, malloc/free, in the same process; CUDA peers are in cuda_peers.cpp. The
// items_per_second counter is allocate+free pairs per second. Run with
//   redwood_memory_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true

#include "memory/bench/random_trace.hpp"
#include "memory/buddy.hpp"
#include "memory/host_resource.hpp"

#include <benchmark/benchmark.h>

#include <cstdlib>

namespace redwood::memory::bench {
namespace {

// All live bytes of one run, shared by its threads (RMM caps the trace's usage the same way).
constexpr std::size_t kHostMaxUsage = 1ull << 30;

BuddyResource& host_buddy() {
  static HostResource upstream("host");
  static BuddyResource pool("host", upstream,
                            BuddyConfig{.max_block_bytes = 64ull << 20,
                                        .limit_bytes = 16ull << 30,
                                        .chunk_alignment = 4096,
                                        .shards = 8,
                                        .ordering = nullptr});
  return pool;
}

template <typename Alloc, typename Free>
void run_trace(benchmark::State& state, Alloc&& alloc, Free&& free) {
  const auto max_size = static_cast<std::size_t>(state.range(0));
  const auto n = static_cast<std::size_t>(state.range(1));
  const std::size_t max_usage = kHostMaxUsage / static_cast<std::size_t>(state.threads());
  std::vector<std::pair<void*, std::size_t>> live;
  live.reserve(n);
  std::uint64_t seed = 1 + static_cast<std::uint64_t>(state.thread_index()) * 7919;
  random_trace(n, max_size, max_usage, seed++, live, alloc, free);  // warm-up, untimed
  for (auto _ : state) random_trace(n, max_size, max_usage, seed++, live, alloc, free);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

void BM_HostBuddy(benchmark::State& state) {
  BuddyResource& pool = host_buddy();
  run_trace(state, [&](std::size_t b) { return pool.allocate(b); },
            [&](void* p, std::size_t b) { pool.deallocate(p, b); });
  state.counters["reserved_MiB"] = static_cast<double>(pool.stats().reserved_bytes) / (1 << 20);
}

void BM_Malloc(benchmark::State& state) {
  run_trace(state, [](std::size_t b) {
              void* p = std::malloc(b);
              benchmark::DoNotOptimize(p);
              return p;
            },
            [](void* p, std::size_t) { std::free(p); });
}

BENCHMARK(BM_HostBuddy)->Apply(trace_args)->Threads(1)->Threads(2)->Threads(8)->UseRealTime();
BENCHMARK(BM_Malloc)->Apply(trace_args)->Threads(1)->Threads(2)->Threads(8)->UseRealTime();

}  // namespace
}  // namespace redwood::memory::bench

BENCHMARK_MAIN();
