// CUDA peers of the random trace (built with REDWOOD_HAVE_CUDA, meaningful on a GPU host only):
// the device buddy pool (stream-ordered, over cudaMalloc), cudaMalloc/cudaFree,
// cudaMallocAsync/cudaFreeAsync on the device's default memory pool, and cudaHostAlloc/
// cudaFreeHost. Each skips with the runtime's reason where no device is usable.

#include "memory/bench/random_trace.hpp"
#include "memory/buddy.hpp"
#include "memory/cuda/cuda_resources.hpp"

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <fmt/format.h>

namespace redwood::memory::bench {
namespace {

constexpr std::size_t kDeviceMaxUsage = 4ull << 30;

bool skip_without_device(benchmark::State& state) {
  std::string why;
  if (cuda::device_count(&why) > 0) return false;
  state.SkipWithError(why.c_str());
  return true;
}

struct DevicePool {
  cuda::DeviceResource upstream{"device", 0};
  BuddyResource pool{"device", upstream,
                     BuddyConfig{.max_block_bytes = 64ull << 20,
                                 .limit_bytes = 16ull << 30,
                                 .chunk_alignment = 256,
                                 .shards = 8,
                                 .ordering = std::make_shared<cuda::CudaStreamOrdering>()}};
};

DevicePool& device_pool() {
  static DevicePool pool;
  return pool;
}

cudaStream_t thread_stream() {
  thread_local cudaStream_t s = [] {
    cudaStream_t st = nullptr;
    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    return st;
  }();
  return s;
}

template <typename Alloc, typename Free>
void run_trace(benchmark::State& state, Alloc&& alloc, Free&& free, bool sync_stream = false) {
  const auto max_size = static_cast<std::size_t>(state.range(0));
  const auto n = static_cast<std::size_t>(state.range(1));
  const std::size_t max_usage = kDeviceMaxUsage / static_cast<std::size_t>(state.threads());
  std::vector<std::pair<void*, std::size_t>> live;
  live.reserve(n);
  std::uint64_t seed = 1 + static_cast<std::uint64_t>(state.thread_index()) * 7919;
  random_trace(n, max_size, max_usage, seed++, live, alloc, free);  // warm-up, untimed
  for (auto _ : state) {
    random_trace(n, max_size, max_usage, seed++, live, alloc, free);
    if (sync_stream) cudaStreamSynchronize(thread_stream());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

void check(cudaError_t e, const char* what, benchmark::State& state) {
  if (e != cudaSuccess) state.SkipWithError(fmt::format("{}: {}", what, cudaGetErrorString(e)).c_str());
}

void BM_DeviceBuddy(benchmark::State& state) {
  if (skip_without_device(state)) return;
  BuddyResource& pool = device_pool().pool;
  cudaStream_t s = thread_stream();
  run_trace(state, [&](std::size_t b) { return pool.allocate(b, kDefaultAlignment, s); },
            [&](void* p, std::size_t b) { pool.deallocate(p, b, s); }, true);
}

void BM_CudaMalloc(benchmark::State& state) {
  if (skip_without_device(state)) return;
  run_trace(state,
            [&](std::size_t b) {
              void* p = nullptr;
              check(cudaMalloc(&p, b), "cudaMalloc", state);
              return p;
            },
            [&](void* p, std::size_t) { cudaFree(p); });
}

void BM_CudaMallocAsync(benchmark::State& state) {
  if (skip_without_device(state)) return;
  cudaStream_t s = thread_stream();
  run_trace(state,
            [&](std::size_t b) {
              void* p = nullptr;
              check(cudaMallocAsync(&p, b, s), "cudaMallocAsync", state);
              return p;
            },
            [&](void* p, std::size_t) { cudaFreeAsync(p, s); }, true);
}

void BM_CudaHostAlloc(benchmark::State& state) {
  if (skip_without_device(state)) return;
  run_trace(state,
            [&](std::size_t b) {
              void* p = nullptr;
              check(cudaHostAlloc(&p, b, cudaHostAllocDefault), "cudaHostAlloc", state);
              return p;
            },
            [&](void* p, std::size_t) { cudaFreeHost(p); });
}

BENCHMARK(BM_DeviceBuddy)->Apply(trace_args)->Threads(1)->Threads(2)->Threads(8)->UseRealTime();
BENCHMARK(BM_CudaMallocAsync)->Apply(trace_args)->Threads(1)->Threads(2)->Threads(8)->UseRealTime();
BENCHMARK(BM_CudaMalloc)->Apply(trace_args)->Threads(1)->UseRealTime();
BENCHMARK(BM_CudaHostAlloc)->Apply(trace_args)->Threads(1)->UseRealTime();

}  // namespace
}  // namespace redwood::memory::bench
