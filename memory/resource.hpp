#pragma once
// MemoryResource: the one interface every Redwood allocator implements, upstream (host, pinned,
// device) and pool (arena, buddy) alike. As in RMM's device_memory_resource, the public
// allocate/deallocate are a thin non-virtual shell (argument checks, optional debug tracking of
// live pointers) over the private virtual do_allocate/do_deallocate that the subclass writes.
//
// Streams are opaque (`void*`, a cudaStream_t on CUDA builds) so that this header needs no CUDA
// headers. nullptr means "no stream": the memory may be reused as soon as deallocate returns.

#include "core/error.hpp"

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace redwood::memory {

using Stream = void*;

/// Alignment when none is asked for: 256 bytes, cudaMalloc's guarantee and a multiple of every
/// SIMD width Redwood uses.
inline constexpr std::size_t kDefaultAlignment = 256;

/// A pool (or upstream) cannot satisfy a request within its limit. The message names the pool,
/// the request, the limit and what is in use.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

/// "12 B", "1.5 KiB", "300 MiB": byte counts for messages.
std::string format_bytes(std::size_t bytes);

/// What every resource reports; the metrics endpoint reads these. Pools fill every field;
/// pass-through upstreams report in-use, high water and their own calls as upstream calls.
struct PoolStats {
  std::string name;
  std::size_t bytes_in_use = 0;        // bytes held by callers, in whole blocks
  std::size_t requested_bytes = 0;     // bytes callers asked for, of the live allocations
  std::size_t high_water_bytes = 0;    // peak of bytes_in_use (see BuddyResource for shards)
  std::size_t reserved_bytes = 0;      // bytes taken from the upstream and not given back
  std::size_t free_bytes = 0;          // reserved, not in use, reusable now
  std::size_t pending_bytes = 0;       // freed on a stream whose work has not completed yet
  std::size_t largest_free_block = 0;  // biggest single request that needs no upstream call
  std::size_t limit_bytes = 0;         // 0: unlimited
  std::uint64_t allocations = 0;       // calls that returned memory
  std::uint64_t deallocations = 0;
  std::uint64_t upstream_allocations = 0;
  std::uint64_t upstream_deallocations = 0;

  /// 1 - requested / in use: share of in-use bytes lost to rounding up to a block.
  double internal_waste() const;
  /// 1 - largest free block / free bytes: share of free bytes no single request can use.
  double external_fragmentation() const;
};

class MemoryResource {
 public:
  explicit MemoryResource(std::string name);
  virtual ~MemoryResource() = default;
  MemoryResource(const MemoryResource&) = delete;
  MemoryResource& operator=(const MemoryResource&) = delete;

  /// `bytes` of memory aligned to `alignment` (a power of two), usable in stream order on
  /// `stream`. Zero bytes returns nullptr. Throws OutOfMemory naming the pool, the request and
  /// its limit; InvalidArgument for a bad alignment.
  void* allocate(std::size_t bytes, std::size_t alignment = kDefaultAlignment, Stream stream = nullptr) {
    RW_EXPECTS(alignment != 0 && (alignment & (alignment - 1)) == 0, InvalidArgument,
               "{} '{}': alignment {} is not a power of two", kind(), name_, alignment);
    if (bytes == 0) return nullptr;
    void* p = do_allocate(bytes, alignment, stream);
    if (debug_checks_) track_allocate(p, bytes, alignment);
    return p;
  }

  /// Gives back what allocate(bytes, alignment, stream) returned, with the same bytes and
  /// alignment (as std::pmr asks: a pool may size the block from them instead of reading its
  /// own metadata). With a stream, the memory is reused only once the work queued on that
  /// stream so far has completed. With debug checks on, a double free, a foreign pointer or a
  /// wrong size or alignment throws InvalidArgument.
  void deallocate(void* p, std::size_t bytes, std::size_t alignment, Stream stream) {
    if (p == nullptr) return;
    if (debug_checks_) track_deallocate(p, bytes, alignment);
    do_deallocate(p, bytes, alignment, stream);
  }
  /// For memory allocated with the default alignment.
  void deallocate(void* p, std::size_t bytes, Stream stream = nullptr) {
    deallocate(p, bytes, kDefaultAlignment, stream);
  }

  PoolStats stats() const { return do_stats(); }
  const std::string& name() const { return name_; }
  /// "host resource", "buddy pool", ...: the first words of every message about this resource.
  virtual std::string_view kind() const = 0;

  /// Debug checks (on by default when NDEBUG is not defined) track every live pointer, so that a
  /// double free or a pointer from elsewhere is reported instead of corrupting the pool.
  void set_debug_checks(bool on);
  bool debug_checks() const { return debug_checks_; }

 private:
  virtual void* do_allocate(std::size_t bytes, std::size_t alignment, Stream stream) = 0;
  virtual void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, Stream stream) = 0;
  virtual PoolStats do_stats() const = 0;

  void track_allocate(void* p, std::size_t bytes, std::size_t alignment);
  void track_deallocate(void* p, std::size_t bytes, std::size_t alignment);

  std::string name_;
#ifdef NDEBUG
  bool debug_checks_ = false;
#else
  bool debug_checks_ = true;
#endif
  std::mutex live_mutex_;
  struct Live {
    std::size_t bytes, alignment;
  };
  std::unordered_map<void*, Live> live_;
};

}  // namespace redwood::memory
