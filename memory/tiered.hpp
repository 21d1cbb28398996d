#pragma once
// TieredResource: pools by request size, each smaller tier carving its chunks out of the tier
// above, so that small, short-lived buffers never split the large blocks the large requests need
// (the external fragmentation a single buddy pool shows under a pipeline's mix of pictures,
// tensors and crops). A tier is a buddy pool, or a size-class pool (memory/size_classes.hpp)
// whose slots between powers of two spare middle-sized requests most of a power of two's
// rounding. The frame pool (frame_pool_tiers below):
//
//   requests <= 64 KiB   ──► buddy, 1 MiB chunks               ─┐ chunks are blocks of
//   requests <= 640 KiB  ──► buddy, 8 MiB chunks               ─┤ the buddy pool above
//   requests <= 2 MiB    ──► size classes: 4/3 · 2^k slots,    ─┤ (a size-class pool
//                            3 to a chunk of up to 4 MiB        │ passes them on, and
//   larger               ──► base: buddy, 64 MiB chunks        ◄┘ what no slot fits)
//                                      │
//                                      ▼ upstream (host or pinned memory)
//
// A request goes to the first tier whose limit it fits; its deallocation, sized as the request
// was (MemoryResource's contract), finds the same tier. Statistics add the tiers up: bytes in
// use are callers' bytes, free bytes are every tier's free blocks and slots (a lower tier's
// chunks are in use in the tier above, not free there), upstream calls are the base pool's.

#include "memory/buddy.hpp"
#include "memory/size_classes.hpp"

#include <memory>
#include <vector>

namespace redwood::memory {

struct TierConfig {
  std::size_t max_request_bytes;    // requests up to this size use the tier
  std::size_t chunk_bytes;          // power of two: its blocks come from the tier above in these
                                    // (a size-class tier: its largest chunk)
  std::size_t slots_per_chunk = 0;  // 0: a buddy pool; 3..63: a size-class pool cutting chunks
                                    // into up to this many slots (SizeClassConfig)
};

class TieredResource final : public MemoryResource {
 public:
  /// `tiers` in increasing sizes (each chunk at most the next buddy tier's, or the base's block
  /// size);
  /// `base` configures the pool over `upstream`, which must outlive this resource; size-class
  /// tiers cut slots aligned to min(base.chunk_alignment, 256) and pass requests for more to the
  /// tier above. Throws InvalidArgument for tiers out of order, chunks that are not powers of
  /// two, or a size-class tier in a stream-ordered pool (size-class pools ignore streams).
  TieredResource(std::string name, MemoryResource& upstream, std::vector<TierConfig> tiers, BuddyConfig base);
  ~TieredResource() override;
  std::string_view kind() const override { return "tiered pool"; }

  /// Free blocks and slots by size over every tier, smallest first.
  std::vector<FreeBlocks> free_blocks();
  /// What a request of `bytes` can be served from without a chunk from a tier above: the free
  /// blocks of at least `bytes` of the buddy pool that serves it, or its class's free slots.
  std::vector<FreeBlocks> free_blocks_for(std::size_t bytes);
  /// Each tier's trim(), smallest first, each lower tier then giving its wholly free chunks
  /// back to the tier above (release_free_chunks), so that stats() shows the pool's true
  /// fragmentation. Chunks a tier keeps are reused without a call to the tier above.
  void trim();
  /// The buddy pools, smallest tier first, the base last.
  const std::vector<BuddyResource*>& pools() const { return pools_; }
  /// The size-class pools, smallest first.
  const std::vector<SizeClassResource*>& size_class_pools() const { return size_class_pools_; }

 private:
  struct Tier {
    std::size_t max_request_bytes = 0;  // the base: SIZE_MAX
    std::unique_ptr<MemoryResource> pool;
    BuddyResource* buddy = nullptr;            // the pool, where it is a buddy pool
    SizeClassResource* size_classes = nullptr;  // or a size-class pool
  };
  void* do_allocate(std::size_t bytes, std::size_t alignment, Stream stream) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, Stream stream) override;
  PoolStats do_stats() const override;
  std::size_t tier_for(std::size_t bytes) const;

  std::vector<Tier> tiers_;  // smallest first, the base last
  std::vector<BuddyResource*> pools_;
  std::vector<SizeClassResource*> size_class_pools_;
};

/// The frame pool (stages/frame_memory.hpp) is built from these, and so is the pool
/// redwood_memory_bench replays the pipeline's trace on: its default chunk and limit, its tiers
/// and its base pool.
inline constexpr std::size_t kFramePoolChunkBytes = 64ull << 20;
inline constexpr std::size_t kFramePoolLimitBytes = 1ull << 30;
/// The tiers of a frame pool under a base of `chunk_bytes` blocks: 64 KiB requests in 1 MiB
/// chunks, 640 KiB requests in 8 MiB chunks, 2 MiB requests in size classes of up to three
/// slots in chunks up to 4 MiB (fewer tiers when the base's chunk is not larger than a tier's).
std::vector<TierConfig> frame_pool_tiers(std::size_t chunk_bytes);
/// The base pool of a frame pool: `chunk_bytes` chunks (also its largest block), at most
/// `limit_bytes` from the upstream, one shard and no thread cache.
BuddyConfig frame_pool_base(std::size_t chunk_bytes, std::size_t limit_bytes);

}  // namespace redwood::memory
