#pragma once
// BuddyResource: the dynamic level. Power-of-two blocks carved from chunks that it takes from an
// upstream resource (one chunk = one largest block), split on allocation and coalesced with
// their buddy on free through per-order free lists, so that memory does not fragment over days.
//
//   chunk (max_block_bytes)  [               order 26                ]
//   split for 256 KiB        [ 18 ][ 18 ][   19   ][ 20 ... ][   25  ]
//   each block at offset k*2^order; its buddy is at offset ^ 2^order
//
// Threads, two levels:
//  - Thread cache (the fast path, no lock, no atomic read-modify-write): each thread keeps, per
//    order up to `cache_max_block_bytes`, a magazine (LIFO) of up to `cache_blocks_per_order`
//    uncoalesced blocks. allocate pops from it, deallocate pushes to it; an empty magazine is
//    refilled with half a magazine from the shared lists under one lock, a full one gives its
//    older half back under one lock. Counters are per thread (written by the owner only, summed
//    by stats()). A thread's cache is flushed when the thread exits, when it calls trim(), or
//    when it would otherwise run out of memory; at most cache_blocks_per_order blocks per cached
//    order sit in one thread's cache (<= 2 * cache_blocks_per_order * cache_max_block_bytes).
//  - Shards: `shards` (power of two) independent sets of free lists, each behind its own spin
//    lock; a thread refills from its own shard (others when it is exhausted) and a block goes back
//    to the shard of the chunk it came from. Larger blocks go straight to the shards.
//
// Stream order: with a StreamOrdering, deallocate(p, n, stream) keeps the block tagged with its
// stream; it is reused at once for allocations on the same stream (stream order protects it),
// and for others only after an event recorded on `stream` has completed: the event is recorded
// when the block leaves the thread cache (one event for all the blocks of one stream that leave
// together), and the block waits in its shard's pending list.
//
// deallocate(p, bytes, alignment) takes the block's size from the caller (the same bytes and
// alignment as allocate, as std::pmr asks), not from the block's state byte, which would be a
// cache miss on every free of an old block. Wrong sizes and double frees are still caught: at
// once with debug checks, a second free of a block still in the thread cache at once, and
// anything else when the block leaves the cache (logged, the block dropped, never handed out
// twice).
//
// Metadata lives outside the managed memory (it may be device memory): one state byte per
// min_block_bytes unit (0.4 % of the pool with 256 B units) in one region reserved for the whole
// limit (pages materialize where blocks are; transparent huge pages where allowed), and per
// shard and order a stack of free block ids with lazy deletion (see Lists in buddy.cpp).

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
  std::size_t cache_blocks_per_order = 16;       // thread-cache magazine length; 0 disables it
  std::size_t cache_max_block_bytes = 1ull << 20;  // larger blocks always go to the shards
  std::shared_ptr<StreamOrdering> ordering;      // null: deallocate ignores the stream
};

namespace detail {
struct BuddyChunk;
struct BuddyShard;
struct BuddyThreadCache;
struct ThreadCaches;
}  // namespace detail

class BuddyResource final : public MemoryResource {
 public:
  /// `upstream` must outlive the pool. Throws InvalidArgument for an inconsistent config.
  BuddyResource(std::string name, MemoryResource& upstream, BuddyConfig config = {});
  ~BuddyResource() override;
  std::string_view kind() const override { return "buddy pool"; }

  /// Empties the calling thread's cache into the free lists (coalescing) and waits for every
  /// block freed on a stream, so that stats() shows the pool's true fragmentation. Other threads'
  /// caches are emptied when those threads exit or call trim(). Chunks stay reserved.
  void trim();
  /// Gives chunks that are wholly free back to the upstream (after trim()).
  std::size_t release_free_chunks();
  /// Free blocks per order (index: log2 of the block size): the shards' free lists and the
  /// calling thread's cache (other threads' caches are not read). For fragmentation figures that
  /// depend on the request sizes (redwood_memory_bench's BM_PipelineTrace).
  std::vector<std::size_t> free_blocks_by_order();
  const BuddyConfig& config() const { return config_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, Stream stream) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, Stream stream) override;
  PoolStats do_stats() const override;

  using Shard = detail::BuddyShard;
  using Chunk = detail::BuddyChunk;
  using ThreadCache = detail::BuddyThreadCache;
  friend struct detail::ThreadCaches;
  std::uint32_t order_for(std::size_t bytes, std::size_t alignment) const;
  std::uint32_t block_order(std::size_t bytes, std::size_t alignment) const;  // 0: no block fits
  void count_deallocation(ThreadCache& tc, std::size_t bytes, std::uint64_t block);
  Shard& my_shard();
  ThreadCache& thread_cache();
  ThreadCache& thread_cache_slow();
  ThreadCache* existing_thread_cache();
  void retire(ThreadCache& tc);  // the registry mutex is held
  std::uint32_t refill(ThreadCache& tc, std::uint32_t order, std::size_t bytes);
  std::uint32_t allocate_from_shards(ThreadCache& tc, std::uint32_t order, std::size_t bytes);
  bool try_allocate_in(Shard& s, std::uint32_t order, bool may_grow, std::uint32_t& id);
  std::uint32_t split_from_free_lists(Shard& s, std::uint32_t order);
  bool grow(Shard& s);
  void free_block(Shard& s, std::uint32_t id);
  void defer(Shard& s, std::uint32_t id, StreamOrdering::Event event);
  void poll_pending(Shard& s, bool wait);
  void flush_magazine(ThreadCache& tc, std::uint32_t order, std::uint32_t count);
  void flush_thread_cache(ThreadCache& tc);
  void publish(ThreadCache& tc);
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
  // Thread caches: registered under one process-wide mutex (detail::cache_registry_mutex) that
  // also orders thread exit against pool destruction. The counters of exited threads are kept in
  // retired_. In use is published to published_in_use_ in steps of kPublishBytes per thread, so
  // that the high water needs no shared atomic on the fast path.
  std::uint8_t* state_region_ = nullptr;                 // state bytes, chunk id * units + unit
  std::size_t state_region_bytes_ = 0;
  std::uint64_t id_;                                     // unique per pool, never reused
  std::uint32_t cache_max_order_ = 0;
  std::vector<ThreadCache*> caches_;
  struct Retired {
    std::size_t in_use = 0, requested = 0;
    std::uint64_t allocations = 0, deallocations = 0;
  } retired_;
  std::atomic<std::int64_t> published_in_use_{0};
  mutable std::atomic<std::size_t> high_water_{0};
};

}  // namespace redwood::memory
