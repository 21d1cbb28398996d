#pragma once
// CUDA upstreams and stream ordering, built only with the CUDA toolkit (REDWOOD_HAVE_CUDA).
// The header needs no CUDA headers: streams are opaque (memory::Stream is a cudaStream_t).
// Every failing CUDA call throws redwood::Error naming the call and cudaGetErrorName/String.

#include "memory/detail/upstream_counters.hpp"
#include "memory/resource.hpp"
#include "memory/stream_ordering.hpp"

#include <mutex>
#include <string>
#include <vector>

namespace redwood::memory::cuda {

/// Number of CUDA devices, or 0 with `why` set (no driver, no device, ...). Never throws.
int device_count(std::string* why = nullptr);

/// Page-locked host memory (cudaHostAlloc), for staging buffers that DMA to and from the GPU.
/// Alignment up to 4096 (cudaHostAlloc returns whole pages).
class PinnedHostResource final : public MemoryResource {
 public:
  explicit PinnedHostResource(std::string name = "pinned", std::size_t limit = 0);
  std::string_view kind() const override { return "pinned host resource"; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, Stream stream) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, Stream stream) override;
  PoolStats do_stats() const override { return counters_.stats(name(), limit_); }
  std::size_t limit_;
  detail::UpstreamCounters counters_;
};

/// Device memory on one GPU (cudaMalloc / cudaFree). Alignment up to 256.
class DeviceResource final : public MemoryResource {
 public:
  explicit DeviceResource(std::string name = "device", int device = 0, std::size_t limit = 0);
  std::string_view kind() const override { return "device resource"; }
  int device() const { return device_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, Stream stream) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, Stream stream) override;
  PoolStats do_stats() const override { return counters_.stats(name(), limit_); }
  int device_;
  std::size_t limit_;
  detail::UpstreamCounters counters_;
};

/// StreamOrdering through cudaEvents (timing disabled), recycled from a free list.
class CudaStreamOrdering final : public StreamOrdering {
 public:
  CudaStreamOrdering() = default;
  ~CudaStreamOrdering() override;
  Event record(Stream stream) override;
  bool completed(Event event) override;
  void wait(Event event) override;
  void release(Event event) override;

 private:
  std::mutex mutex_;
  std::vector<Event> free_;
  std::vector<Event> all_;
};

}  // namespace redwood::memory::cuda
