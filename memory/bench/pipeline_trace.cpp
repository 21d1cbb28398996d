// BM_PipelineTrace: replays the allocation sequence of a real pipeline run (recorded by
// memory::TracingResource, see docs/memory.md) on a single buddy pool with its defaults, on the
// pipeline's frame pool as stages/frame_memory.cpp builds it (memory/tiered.hpp), on that pool's
// base without its tiers, and on malloc/free in the same process. items_per_second is
// allocate+free pairs per second. Counters on the pool runs:
//   frag_end  external fragmentation (1 - largest free block / free bytes) at the end of the
//             replay, with the blocks the run still held live, after trim()
//   frag_peak the same when the trace's live bytes first peak (no trim: thread-cache blocks
//             count as free, as PoolStats reports them)
//   frag_max  the largest of 64 such samples taken along the replay
//   unusable_peak, unusable_max: the share of free bytes in blocks or slots smaller than the
//             trace's largest request (free memory that cannot serve the workload's critical
//             request), at the peak and the largest of the samples
//   unservable_peak the share of free bytes at the peak that the largest request cannot be
//             served from: in blocks too small for it, or in tiers other than the one serving
//             it (a tier's free 4 MiB block is not too small, but that tier does not take it)
//   waste_peak internal waste (1 - requested / block bytes in use) at the trace's peak; `waste`
//             is the same at the end of the replay
//   upstream  upstream allocations during the timed replays (0: steady state never grows)
// The trace: $REDWOOD_PIPELINE_TRACE, else the one shipped in memory/bench/traces/.

#include "memory/buddy.hpp"
#include "memory/host_resource.hpp"
#include "memory/tiered.hpp"
#include "memory/tracing_resource.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

#ifndef REDWOOD_PIPELINE_TRACE_DEFAULT
#define REDWOOD_PIPELINE_TRACE_DEFAULT ""
#endif

namespace redwood::memory::bench {
namespace {

/// The trace, loaded once; null after marking `state` skipped with the reason when it cannot be read.
const AllocationTrace* pipeline_trace(benchmark::State& state) {
  static std::optional<AllocationTrace> trace;
  static std::string error;
  static bool loaded = false;
  if (!loaded) {
    loaded = true;
    const char* env = std::getenv("REDWOOD_PIPELINE_TRACE");
    const std::string path = env && *env ? env : REDWOOD_PIPELINE_TRACE_DEFAULT;
    try {
      RW_EXPECTS(!path.empty(), Error, "no pipeline trace: set REDWOOD_PIPELINE_TRACE");
      trace = read_allocation_trace(path);
    } catch (const Error& e) {
      error = e.what();
    }
  }
  if (!trace) state.SkipWithError(error.c_str());
  return trace ? &*trace : nullptr;
}

/// Replays the trace once; `sample(i)` is called after event i when i % every == every - 1 or
/// i is the trace's peak (every == 0: never). Leaves the allocations the run never freed live in
/// `ptrs` (non-null entries).
template <typename Alloc, typename Free, typename Sample>
void replay(const AllocationTrace& t, std::vector<void*>& ptrs, Alloc&& alloc, Free&& free,
            std::size_t every, Sample&& sample) {
  std::uint64_t next = 0;
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const TraceEvent& e = t.events[i];
    if (e.allocate) {
      ptrs[next++] = alloc(e.value);
    } else {
      free(ptrs[e.value], e.value);
      ptrs[e.value] = nullptr;
    }
    if (every != 0 && (i % every == every - 1 || i == t.peak_event)) sample(i);
  }
}

std::size_t bytes_of(const std::vector<FreeBlocks>& blocks) {
  std::size_t all = 0;
  for (const FreeBlocks& f : blocks) all += f.block_bytes * f.count;
  return all;
}

/// The share of free bytes in blocks or slots too small for the trace's largest request: free
/// memory that cannot serve the workload's critical request without growing the pool.
double unusable_share(const std::vector<FreeBlocks>& free_blocks, std::size_t largest_request) {
  std::size_t small = 0;
  for (const FreeBlocks& f : free_blocks) {
    if (f.block_bytes < largest_request) small += f.block_bytes * f.count;
  }
  const std::size_t all = bytes_of(free_blocks);
  return all == 0 ? 0.0 : static_cast<double>(small) / static_cast<double>(all);
}

/// Free blocks by size, and those a request of `bytes` can be served from (a tiered pool: only
/// those of the tier that serves it).
std::vector<FreeBlocks> free_blocks(TieredResource& pool) { return pool.free_blocks(); }
std::vector<FreeBlocks> free_blocks_for(TieredResource& pool, std::size_t bytes) { return pool.free_blocks_for(bytes); }
std::vector<FreeBlocks> free_blocks(BuddyResource& pool, std::size_t at_least = 0) {
  std::vector<FreeBlocks> out;
  const std::vector<std::size_t> orders = pool.free_blocks_by_order();
  for (std::size_t k = 0; k < orders.size(); ++k) {
    if (orders[k] != 0 && (std::size_t{1} << k) >= at_least) out.push_back({std::size_t{1} << k, orders[k]});
  }
  return out;
}
std::vector<FreeBlocks> free_blocks_for(BuddyResource& pool, std::size_t bytes) { return free_blocks(pool, bytes); }

struct Sizes {
  std::vector<std::size_t> bytes;  // allocation index -> bytes
  explicit Sizes(const AllocationTrace& t) {
    for (const auto& e : t.events) {
      if (e.allocate) bytes.push_back(e.value);
    }
  }
};

/// Replays the trace on `pool` (a BuddyResource or a TieredResource): one untimed replay that
/// samples fragmentation along the way, then the timed replays; sets the counters listed above.
template <typename Pool>
void replay_on_pool(benchmark::State& state, const AllocationTrace& t, Pool& pool) {
  const Sizes sizes(t);
  std::vector<void*> ptrs(t.allocations, nullptr);
  auto alloc = [&](std::uint64_t b) { return pool.allocate(b); };
  auto free = [&](void* p, std::uint64_t index) { pool.deallocate(p, sizes.bytes[index]); };
  auto free_rest = [&] {
    for (std::size_t i = 0; i < ptrs.size(); ++i) {
      if (ptrs[i] != nullptr) pool.deallocate(ptrs[i], sizes.bytes[i]);
      ptrs[i] = nullptr;
    }
  };
  const std::size_t largest_request = *std::max_element(sizes.bytes.begin(), sizes.bytes.end());
  double frag_max = 0, frag_peak = 0, unusable_max = 0, unusable_peak = 0, unservable_peak = 0, waste_peak = 0;
  const std::size_t every = std::max<std::size_t>(1, t.events.size() / 64);
  replay(t, ptrs, alloc, free, every, [&](std::size_t i) {
    const PoolStats st = pool.stats();
    const double f = st.external_fragmentation();
    const std::vector<FreeBlocks> blocks = free_blocks(pool);
    const double u = unusable_share(blocks, largest_request);
    frag_max = std::max(frag_max, f);
    unusable_max = std::max(unusable_max, u);
    if (i != t.peak_event) return;
    frag_peak = f, unusable_peak = u, waste_peak = st.internal_waste();
    const std::size_t all = bytes_of(blocks);
    const std::size_t servable = bytes_of(free_blocks_for(pool, largest_request));
    unservable_peak = all == 0 ? 0.0 : 1.0 - static_cast<double>(servable) / static_cast<double>(all);
  });
  pool.trim();
  const PoolStats end = pool.stats();
  free_rest();
  const std::uint64_t upstream_before = pool.stats().upstream_allocations;
  for (auto _ : state) {
    replay(t, ptrs, alloc, free, 0, [](std::size_t) {});
    free_rest();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * t.allocations));
  state.counters["frag_peak"] = frag_peak;
  state.counters["unusable_peak"] = unusable_peak;
  state.counters["unusable_max"] = unusable_max;
  state.counters["unservable_peak"] = unservable_peak;
  state.counters["frag_end"] = end.external_fragmentation();
  state.counters["frag_max"] = frag_max;
  state.counters["upstream"] = static_cast<double>(pool.stats().upstream_allocations - upstream_before);
  state.counters["peak_MiB"] = static_cast<double>(t.peak_live_bytes) / (1 << 20);
  state.counters["reserved_MiB"] = static_cast<double>(end.reserved_bytes) / (1 << 20);
  state.counters["waste"] = end.internal_waste();
  state.counters["waste_peak"] = waste_peak;
}

// The replay on one buddy pool of the frame pool's chunk size and limit, with the buddy pool's
// defaults otherwise (shards and thread caches).
void BM_PipelineTrace(benchmark::State& state) {
  const AllocationTrace* t = pipeline_trace(state);
  if (t == nullptr) return;
  HostResource upstream("host");
  BuddyResource pool("frames", upstream,
                     BuddyConfig{.max_block_bytes = kFramePoolChunkBytes, .limit_bytes = kFramePoolLimitBytes, .ordering = nullptr});
  replay_on_pool(state, *t, pool);
}

// The same replay on the frame pool as stages/frame_memory.cpp makes it (the same functions of
// memory/tiered.hpp): small and middle-sized requests in tiers of their own (buddy pools and
// size classes), one shard, no thread cache.
void BM_PipelineTraceTiered(benchmark::State& state) {
  const AllocationTrace* t = pipeline_trace(state);
  if (t == nullptr) return;
  HostResource upstream("host");
  TieredResource pool("frames", upstream, frame_pool_tiers(kFramePoolChunkBytes),
                      frame_pool_base(kFramePoolChunkBytes, kFramePoolLimitBytes));
  replay_on_pool(state, *t, pool);
}

// The frame pool's base alone, without its tiers: what the tiers add.
void BM_PipelineTraceUntiered(benchmark::State& state) {
  const AllocationTrace* t = pipeline_trace(state);
  if (t == nullptr) return;
  HostResource upstream("host");
  TieredResource pool("frames", upstream, {}, frame_pool_base(kFramePoolChunkBytes, kFramePoolLimitBytes));
  replay_on_pool(state, *t, pool);
}

void BM_PipelineTraceMalloc(benchmark::State& state) {
  const AllocationTrace* t = pipeline_trace(state);
  if (t == nullptr) return;
  std::vector<void*> ptrs(t->allocations, nullptr);
  auto alloc = [](std::uint64_t b) {
    void* p = std::malloc(b);
    benchmark::DoNotOptimize(p);
    return p;
  };
  auto free = [](void* p, std::uint64_t) { std::free(p); };
  auto free_rest = [&] {
    for (void*& p : ptrs) {
      std::free(p);
      p = nullptr;
    }
  };
  replay(*t, ptrs, alloc, free, 0, [](std::size_t) {});
  free_rest();
  for (auto _ : state) {
    replay(*t, ptrs, alloc, free, 0, [](std::size_t) {});
    free_rest();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * t->allocations));
}

BENCHMARK(BM_PipelineTrace)->UseRealTime();
BENCHMARK(BM_PipelineTraceTiered)->UseRealTime();
BENCHMARK(BM_PipelineTraceUntiered)->UseRealTime();
BENCHMARK(BM_PipelineTraceMalloc)->UseRealTime();

}  // namespace
}  // namespace redwood::memory::bench
