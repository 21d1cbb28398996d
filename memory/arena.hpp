#pragma once
// ArenaResource: the static level. One upstream allocation of a fixed capacity, handed out by
// bumping an offset while a plan loads (weights, constants, slot buffers, workspaces), released
// as a whole by reset() or the destructor. deallocate() of one allocation only updates counters:
// its bytes come back with the rest of the arena.
//
//   [ weights | constants | workspace |        free        ]
//   ^ base                            ^ offset_            ^ capacity

#include "memory/resource.hpp"

#include <mutex>

namespace redwood::memory {

class ArenaResource final : public MemoryResource {
 public:
  /// Takes `capacity` bytes from `upstream` on the first allocation; `upstream` must outlive it.
  ArenaResource(std::string name, MemoryResource& upstream, std::size_t capacity,
                std::size_t base_alignment = 4096);
  ~ArenaResource() override;
  std::string_view kind() const override { return "arena"; }

  /// Forgets every allocation (they must no longer be used) and keeps the upstream block.
  void reset();
  /// Forgets every allocation and gives the block back to the upstream.
  void release();
  std::size_t capacity() const { return capacity_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, Stream stream) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, Stream stream) override;
  PoolStats do_stats() const override;

  MemoryResource& upstream_;
  std::size_t capacity_, base_alignment_;
  mutable std::mutex mutex_;
  std::byte* base_ = nullptr;
  std::size_t offset_ = 0, requested_ = 0, live_ = 0, high_water_ = 0;
  std::uint64_t allocations_ = 0, deallocations_ = 0, upstream_allocations_ = 0,
                upstream_deallocations_ = 0;
};

}  // namespace redwood::memory
