#pragma once
// BuddyResource: the dynamic level. Power-of-two blocks carved from chunks that it takes from an
// upstream resource (one chunk = one largest block), split on allocation and coalesced with
// their buddy on free through per-order free lists, so that memory does not fragment over days.
//
//   chunk (max_block_bytes)  [               order 26                ]
//   split for 256 KiB        [ 18 ][ 18 ][   19   ][ 20 ... ][   25  ]
//   each block at offset k*2^order; its buddy is at offset ^ 2^order
//
// Threads: the pool has `shards` (power of two) independent sets of free lists, each behind its
// own spin lock; a thread allocates from its shard and a block is freed into the shard of the
// chunk it came from. Hot path: each shard keeps, per order up to `cache_max_block_bytes`, a short
// LIFO of freed blocks that are not coalesced, so the common sizes skip split and coalesce.
//
// Stream order: with a StreamOrdering, deallocate(p, n, stream) keeps the block tagged with its
// stream; it is reused at once for allocations on the same stream, and for others only after an
// event recorded on `stream` has completed (the event is recorded when the block leaves the cache).
//
// Metadata lives outside the managed memory (it may be device memory): one state byte and two
// 32-bit links per min_block_bytes unit, about 3.5 % of the pool with 256 B units, allocated lazily
// so that pages are touched only where blocks are.

#include "memory/resource.hpp"
#include "memory/stream_ordering.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

namespace redwood::memory {

struct BuddyConfig {
  std::size_t min_block_bytes = 256;             // power of two, >= 16
  std::size_t max_block_bytes = 64ull << 20;     // power of two; also the chunk size
  std::size_t limit_bytes = 1ull << 30;          // most bytes taken from the upstream
  std::size_t chunk_alignment = 256;             // asked of the upstream for each chunk
  std::size_t shards = 0;                        // power of two; 0: min(hardware threads, 8)
  std::size_t cache_blocks_per_order = 16;       // hot-path LIFO length; 0 disables it
  std::size_t cache_max_block_bytes = 1ull << 20;
  std::shared_ptr<StreamOrdering> ordering;      // null: deallocate ignores the stream
};

namespace detail {
struct BuddyChunk;
struct BuddyShard;
}  // namespace detail

class BuddyResource final : public MemoryResource {
 public:
  /// `upstream` must outlive the pool. Throws InvalidArgument for an inconsistent config.
  BuddyResource(std::string name, MemoryResource& upstream, BuddyConfig config = {});
  ~BuddyResource() override;
  std::string_view kind() const override { return "buddy pool"; }

  /// Empties the hot caches into the free lists (coalescing) and waits for every block freed on
  /// a stream, so that stats() shows the pool's true fragmentation. Chunks stay reserved.
  void trim();
  /// Gives chunks that are wholly free back to the upstream (after trim()).
  std::size_t release_free_chunks();
  const BuddyConfig& config() const { return config_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, Stream stream) override;
  void do_deallocate(void* p, std::size_t bytes, Stream stream) override;
  PoolStats do_stats() const override;

  using Shard = detail::BuddyShard;
  using Chunk = detail::BuddyChunk;
  std::uint32_t order_for(std::size_t bytes, std::size_t alignment) const;
  Shard& my_shard();
  bool try_allocate_in(Shard& s, std::uint32_t order, Stream stream, bool may_grow, std::uint32_t& id);
  std::uint32_t split_from_free_lists(Shard& s, std::uint32_t order);
  bool grow(Shard& s);
  void free_block(Shard& s, std::uint32_t id);
  void defer(Shard& s, std::uint32_t id, Stream stream);
  void poll_pending(Shard& s, bool wait);
  void flush_cache(Shard& s);
  Chunk* find_chunk(const void* p) const;
  void* address_of(std::uint32_t id) const;
  [[noreturn]] void throw_out_of_memory(std::size_t bytes) const;

  MemoryResource& upstream_;
  BuddyConfig config_;
  std::uint32_t min_order_, max_order_, unit_shift_;  // unit_shift_: log2(units per chunk)
  std::size_t max_chunks_;
  std::unique_ptr<Shard[]> shards_;
  std::size_t shard_mask_;
  std::unique_ptr<std::atomic<Chunk*>[]> chunks_by_id_;  // chunk id -> chunk
  std::atomic<std::size_t> reserved_{0};
  std::mutex grow_mutex_;                                // chunk creation and the index below
  std::vector<Chunk*> chunk_list_;                       // by id; owned
  std::vector<std::uint32_t> free_ids_;                  // ids of released chunks
  // Sorted (base, chunk) pairs, replaced whole on growth so that readers need no lock.
  struct Index;
  std::atomic<const Index*> index_{nullptr};
  std::vector<std::unique_ptr<const Index>> old_indexes_;
  std::atomic<std::uint64_t> upstream_allocations_{0}, upstream_deallocations_{0};
};

}  // namespace redwood::memory
