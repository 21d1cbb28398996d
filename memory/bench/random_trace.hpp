#pragma once
// The random-allocation trace of RMM's random_allocations benchmark: sizes uniform in
// [1, max_size]; each step allocates with probability 0.73 (while fewer than num_allocations have
// been made and the live bytes stay under max_usage) and otherwise frees a random live block.
// Every allocation is freed by the end, so one call is num_allocations allocate+free pairs.

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace redwood::memory::bench {

/// xorshift64*: cheap enough not to dominate a 50 ns allocate+free pair.
struct FastRng {
  std::uint64_t s;
  explicit FastRng(std::uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  std::uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
  }
  std::uint64_t below(std::uint64_t n) { return static_cast<std::uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }
};

template <typename Alloc, typename Free>
void random_trace(std::size_t num_allocations, std::size_t max_size, std::size_t max_usage,
                  std::uint64_t seed, std::vector<std::pair<void*, std::size_t>>& live, Alloc&& alloc,
                  Free&& free) {
  FastRng rng(seed);
  live.clear();
  std::size_t made = 0, usage = 0;
  while (made < num_allocations || !live.empty()) {
    const std::size_t size = 1 + rng.below(max_size);
    bool do_alloc = made < num_allocations;
    if (do_alloc && !live.empty()) do_alloc = rng.below(100) < 73 && usage + size <= max_usage;
    if (do_alloc) {
      live.emplace_back(alloc(size), size);
      usage += size;
      ++made;
    } else {
      const std::size_t i = rng.below(live.size());
      free(live[i].first, live[i].second);
      usage -= live[i].second;
      live[i] = live.back();
      live.pop_back();
    }
  }
}

/// Trace arguments: {max_size, num_allocations}.
inline void trace_args(benchmark::internal::Benchmark* b) {
  for (std::int64_t max_size : {4ll << 10, 64ll << 10, 1ll << 20, 64ll << 20})
    for (std::int64_t n : {1000, 10000, 100000}) b->Args({max_size, n});
  b->ArgNames({"max_size", "allocations"});
}

}  // namespace redwood::memory::bench
