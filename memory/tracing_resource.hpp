#pragma once
// TracingResource: wraps any MemoryResource and records every allocate and deallocate, in call
// order, to a compact file, so that the allocation sequence of a real run can be replayed
// against any allocator (redwood_memory_bench's BM_PipelineTrace). Calls pass through unchanged.
//
// File format (little-endian, varints are LEB128):
//   "RWMTRACE" u32 version (1)
//   records:  varint(bytes << 1)        allocate of `bytes` (the n-th allocate gets index n)
//             varint(back << 1 | 1)     deallocate of the allocation with index n - 1 - back,
//                                       n being the number of allocates recorded so far
// Allocations still live when the trace ends are simply not freed in it. A typical record is
// 2-4 bytes. Threads are serialized in the order their calls took the adaptor's lock.

#include "memory/resource.hpp"

#include <cstdio>
#include <filesystem>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace redwood::memory {

class TracingResource final : public MemoryResource {
 public:
  /// Records to `path` (created or truncated); `upstream` must outlive it. Throws Error naming
  /// the file when it cannot be opened.
  TracingResource(MemoryResource& upstream, const std::filesystem::path& path);
  ~TracingResource() override;
  std::string_view kind() const override { return "tracing adaptor"; }

  /// Writes what is buffered to the file.
  void flush();
  std::uint64_t recorded_events() const;
  MemoryResource& upstream() { return upstream_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, Stream stream) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, Stream stream) override;
  PoolStats do_stats() const override { return upstream_.stats(); }
  void put_varint(std::uint64_t v);

  MemoryResource& upstream_;
  std::filesystem::path path_;
  mutable std::mutex mutex_;
  std::FILE* file_ = nullptr;
  std::vector<unsigned char> buffer_;
  std::unordered_map<void*, std::uint64_t> index_of_;  // live pointer -> allocation index
  std::uint64_t allocations_ = 0, events_ = 0;
};

/// One recorded call of a trace: an allocate of `bytes`, or a deallocate of allocation `index`.
struct TraceEvent {
  bool allocate = true;
  std::uint64_t value = 0;  // allocate: bytes; deallocate: the allocation's index
};

struct AllocationTrace {
  std::vector<TraceEvent> events;
  std::uint64_t allocations = 0;
  std::uint64_t peak_live_bytes = 0;  // the largest sum of requested bytes live at once
  std::size_t peak_event = 0;         // the event after which peak_live_bytes is first live
};

/// Reads a file TracingResource wrote. Throws Error naming the file and the byte offset for a
/// file that is not a trace, truncated, or frees what it never allocated.
AllocationTrace read_allocation_trace(const std::filesystem::path& path);

}  // namespace redwood::memory
