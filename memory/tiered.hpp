#pragma once
// TieredResource: buddy pools by request size, each smaller tier carving its chunks out of the
// tier above, so that small, short-lived buffers never split the large blocks the large requests
// need (the external fragmentation a single buddy pool shows under a pipeline's mix of pictures,
// tensors and crops):
//
//   requests <= 64 KiB   ──► tier 0: buddy, 1 MiB chunks ─┐
//   requests <= 640 KiB  ──► tier 1: buddy, 8 MiB chunks ─┤ chunks are blocks of
//   larger               ──► base:   buddy, 64 MiB chunks ◄┘ the base pool
//                                      │
//                                      ▼ upstream (host or pinned memory)
//
// A request goes to the first tier whose limit it fits; its deallocation, sized as the request
// was (MemoryResource's contract), finds the same tier. Statistics add the tiers up: bytes in
// use are callers' bytes, free bytes are every tier's free blocks (a lower tier's chunks are in
// use in the tier above, not free there), upstream calls are the base pool's.

#include "memory/buddy.hpp"

#include <memory>
#include <vector>

namespace redwood::memory {

struct TierConfig {
  std::size_t max_request_bytes;  // requests up to this size use the tier
  std::size_t chunk_bytes;        // power of two: its blocks come from the tier above in these
};

class TieredResource final : public MemoryResource {
 public:
  /// `tiers` in increasing sizes (each chunk at most the next tier's, or the base's block size);
  /// `base` configures the pool over `upstream`, which must outlive this resource. Throws
  /// InvalidArgument for tiers out of order or chunks that are not powers of two.
  TieredResource(std::string name, MemoryResource& upstream, std::vector<TierConfig> tiers, BuddyConfig base);
  ~TieredResource() override;
  std::string_view kind() const override { return "tiered buddy pool"; }

  /// Free blocks per order over every tier (BuddyResource::free_blocks_by_order each).
  std::vector<std::size_t> free_blocks_by_order();
  /// Each tier's trim(), smallest first, each lower tier then giving its wholly free chunks
  /// back to the tier above (BuddyResource::release_free_chunks), so that stats() shows the
  /// pool's true fragmentation. Chunks a tier keeps are reused without a call to the tier above.
  void trim();
  /// The pools, smallest tier first, the base last.
  const std::vector<std::unique_ptr<BuddyResource>>& pools() const { return pools_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, Stream stream) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, Stream stream) override;
  PoolStats do_stats() const override;
  BuddyResource& pool_for(std::size_t bytes) const;

  std::vector<TierConfig> tiers_;
  std::vector<std::unique_ptr<BuddyResource>> pools_;  // [tier 0, tier 1, ..., base]
};

/// The frame pool (stages/frame_memory.hpp) is built from these, and so is the pool
/// redwood_memory_bench replays the pipeline's trace on: its default chunk and limit, its tiers
/// and its base pool.
inline constexpr std::size_t kFramePoolChunkBytes = 64ull << 20;
inline constexpr std::size_t kFramePoolLimitBytes = 1ull << 30;
/// The tiers of a frame pool under a base of `chunk_bytes` blocks: 64 KiB requests in 1 MiB
/// chunks, 640 KiB requests in 8 MiB chunks (fewer tiers when the base's chunk is smaller than a
/// tier's).
std::vector<TierConfig> frame_pool_tiers(std::size_t chunk_bytes);
/// The base pool of a frame pool: `chunk_bytes` chunks (also its largest block), at most
/// `limit_bytes` from the upstream, one shard and no thread cache.
BuddyConfig frame_pool_base(std::size_t chunk_bytes, std::size_t limit_bytes);

}  // namespace redwood::memory
