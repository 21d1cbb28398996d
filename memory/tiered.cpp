#include "memory/tiered.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstdint>

namespace redwood::memory {

TieredResource::TieredResource(std::string name, MemoryResource& upstream, std::vector<TierConfig> tiers, BuddyConfig base)
    : MemoryResource(std::move(name)) {
  for (std::size_t i = 0; i < tiers.size(); ++i) {
    const TierConfig& t = tiers[i];
    // Chunks are blocks of the next buddy pool up (a size-class tier passes them on).
    std::size_t above = base.max_block_bytes;
    for (std::size_t j = i + 1; j < tiers.size(); ++j) {
      if (tiers[j].slots_per_chunk == 0) {
        above = tiers[j].chunk_bytes;
        break;
      }
    }
    RW_EXPECTS(std::has_single_bit(t.chunk_bytes) && t.max_request_bytes > 0 && t.max_request_bytes <= t.chunk_bytes &&
                   t.chunk_bytes <= above && (i == 0 || t.max_request_bytes > tiers[i - 1].max_request_bytes),
               InvalidArgument, "{} '{}': tier {} ({} requests in {} chunks) is out of order or not a power of two", kind(),
               this->name(), i, format_bytes(t.max_request_bytes), format_bytes(t.chunk_bytes));
    RW_EXPECTS(t.slots_per_chunk == 0 || base.ordering == nullptr, InvalidArgument,
               "{} '{}': tier {} is a size-class pool, which ignores streams, in a stream-ordered pool", kind(),
               this->name(), i);
  }
  // Built from the base down: each tier's chunks come from the one above.
  tiers_.resize(tiers.size() + 1);
  auto base_pool = std::make_unique<BuddyResource>(this->name(), upstream, base);
  tiers_.back().max_request_bytes = SIZE_MAX;
  tiers_.back().buddy = base_pool.get();
  tiers_.back().pool = std::move(base_pool);
  for (std::size_t i = tiers.size(); i-- > 0;) {
    const TierConfig& t = tiers[i];
    MemoryResource& above = *tiers_[i + 1].pool;
    const std::string tier_name = fmt::format("{} <= {}", this->name(), format_bytes(t.max_request_bytes));
    Tier& tier = tiers_[i];
    tier.max_request_bytes = t.max_request_bytes;
    if (t.slots_per_chunk == 0) {
      BuddyConfig c = base;
      c.max_block_bytes = t.chunk_bytes;
      c.min_block_bytes = std::min(base.min_block_bytes, t.chunk_bytes);
      auto pool = std::make_unique<BuddyResource>(tier_name, above, c);
      tier.buddy = pool.get();
      tier.pool = std::move(pool);
    } else {
      const SizeClassConfig c{.max_chunk_bytes = t.chunk_bytes,
                              .max_slots_per_chunk = t.slots_per_chunk,
                              .alignment = std::min(base.chunk_alignment, kDefaultAlignment)};
      auto pool = std::make_unique<SizeClassResource>(tier_name, above, c);
      tier.size_classes = pool.get();
      tier.pool = std::move(pool);
    }
  }
  for (const Tier& t : tiers_) {
    if (t.buddy != nullptr) pools_.push_back(t.buddy);
    if (t.size_classes != nullptr) size_class_pools_.push_back(t.size_classes);
  }
}

TieredResource::~TieredResource() {
  // The smaller tiers give their chunks back to the tiers above before those go.
  for (Tier& t : tiers_) t.pool.reset();
}

std::size_t TieredResource::tier_for(std::size_t bytes) const {
  std::size_t i = 0;
  while (bytes > tiers_[i].max_request_bytes) ++i;  // the base's is SIZE_MAX
  return i;
}

void* TieredResource::do_allocate(std::size_t bytes, std::size_t alignment, Stream stream) {
  return tiers_[tier_for(bytes)].pool->allocate(bytes, alignment, stream);
}

void TieredResource::do_deallocate(void* p, std::size_t bytes, std::size_t alignment, Stream stream) {
  tiers_[tier_for(bytes)].pool->deallocate(p, bytes, alignment, stream);
}

std::vector<FreeBlocks> TieredResource::free_blocks() {
  std::vector<FreeBlocks> all;
  for (Tier& t : tiers_) {
    if (t.buddy != nullptr) {
      const auto blocks = t.buddy->free_blocks_by_order();
      for (std::size_t k = 0; k < blocks.size(); ++k) {
        if (blocks[k] != 0) all.push_back({std::size_t{1} << k, blocks[k]});
      }
    } else {
      const auto slots = t.size_classes->free_slots();
      all.insert(all.end(), slots.begin(), slots.end());
    }
  }
  std::sort(all.begin(), all.end(), [](const FreeBlocks& a, const FreeBlocks& b) { return a.block_bytes < b.block_bytes; });
  std::vector<FreeBlocks> merged;
  for (const FreeBlocks& f : all) {
    if (!merged.empty() && merged.back().block_bytes == f.block_bytes) {
      merged.back().count += f.count;
    } else {
      merged.push_back(f);
    }
  }
  return merged;
}

std::vector<FreeBlocks> TieredResource::free_blocks_for(std::size_t bytes) {
  std::size_t i = tier_for(bytes);
  // A size-class tier hands a request no class fits better than a power of two to the tier above.
  for (; tiers_[i].size_classes != nullptr; ++i) {
    if (const FreeBlocks slots = tiers_[i].size_classes->free_slots_for(bytes); slots.block_bytes != 0) {
      return slots.count != 0 ? std::vector<FreeBlocks>{slots} : std::vector<FreeBlocks>{};
    }
  }
  std::vector<FreeBlocks> out;
  const auto blocks = tiers_[i].buddy->free_blocks_by_order();
  for (std::size_t k = 0; k < blocks.size(); ++k) {
    if (blocks[k] != 0 && (std::size_t{1} << k) >= bytes) out.push_back({std::size_t{1} << k, blocks[k]});
  }
  return out;
}

void TieredResource::trim() {
  // Smallest first: a lower tier's wholly free chunks go back to the tier above, where they
  // coalesce with their buddies.
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    Tier& t = tiers_[i];
    if (t.size_classes != nullptr) {
      t.size_classes->release_free_chunks();
      continue;
    }
    t.buddy->trim();
    if (i + 1 < tiers_.size()) t.buddy->release_free_chunks();
  }
}

PoolStats TieredResource::do_stats() const {
  PoolStats st;
  st.name = name();
  std::size_t chunks = 0;  // lower tiers' chunks: in use in the tier above
  std::uint64_t chunk_allocs = 0, chunk_frees = 0;
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    const PoolStats s = tiers_[i].pool->stats();
    st.bytes_in_use += s.bytes_in_use;
    st.requested_bytes += s.requested_bytes;
    st.allocations += s.allocations;
    st.deallocations += s.deallocations;
    st.free_bytes += s.free_bytes;
    st.pending_bytes += s.pending_bytes;
    st.largest_free_block = std::max(st.largest_free_block, s.largest_free_block);
    if (i + 1 < tiers_.size()) {
      chunks += s.reserved_bytes;
      chunk_allocs += s.upstream_allocations;
      chunk_frees += s.upstream_deallocations;
    } else {
      st.high_water_bytes = s.high_water_bytes;
      st.reserved_bytes = s.reserved_bytes;
      st.limit_bytes = s.limit_bytes;
      st.upstream_allocations = s.upstream_allocations;
      st.upstream_deallocations = s.upstream_deallocations;
    }
  }
  st.bytes_in_use -= std::min(st.bytes_in_use, chunks);
  st.requested_bytes -= std::min(st.requested_bytes, chunks);
  st.allocations -= std::min(st.allocations, chunk_allocs);
  st.deallocations -= std::min(st.deallocations, chunk_frees);
  return st;
}

std::vector<TierConfig> frame_pool_tiers(std::size_t chunk_bytes) {
  // Crops and small tensors, then batches and tensors up to 640 KiB, in buddy tiers of their own.
  // Pictures and tensors of 640 KiB to 2 MiB in slots of 4/3 · 2^k, three to a chunk (those a
  // power of two fits as tightly go on to the base): on the pipeline trace, at its peak, eleven
  // buffers of 1.0 to 1.3 MiB take 1.33 MiB slots instead of 2 MiB blocks. Finer classes (five
  // or seven slots to a chunk) round less but keep more idle slots, one chunk's remainder per
  // class: at that peak they leave 12 % and 24 % of the free bytes in slots or blocks too small
  // for the largest request, against 8 % with three. Larger requests stay in the base: the 3.0 MiB
  // frames fit no slot of three better than their 4 MiB block, and a class for the few 2.0 MiB
  // buffers would keep two idle 2.7 MiB slots beside each.
  const TierConfig small{64 << 10, 1 << 20}, middle{640 << 10, 8 << 20}, classes{2 << 20, 4 << 20, 3};
  std::vector<TierConfig> tiers;
  for (const TierConfig t : {small, middle, classes}) {
    if (t.chunk_bytes < chunk_bytes) tiers.push_back(t);
  }
  return tiers;
}

BuddyConfig frame_pool_base(std::size_t chunk_bytes, std::size_t limit_bytes) {
  BuddyConfig b;
  b.max_block_bytes = chunk_bytes;
  b.limit_bytes = limit_bytes;
  // Frame buffers are large (tens of KiB to MiB) and few per frame, so a lock per allocation
  // costs nothing next to the work on them; per-thread caches and shards, on the other hand,
  // would each keep their own blocks of every size (up to 16 per size per thread), multiplying
  // the footprint and letting it grow long after warm-up. One shard, no thread cache: the pool
  // holds what the frames in flight need, and stops growing once it has that. Blocks freed into
  // a thread cache also stay uncoalesced: on the pipeline trace, at its peak, they leave 56 % of
  // the free bytes in blocks too small for the largest request, against 13 % without the cache
  // (the base alone, BM_PipelineTraceUntiered).
  b.shards = 1;
  b.cache_blocks_per_order = 0;
  return b;
}

}  // namespace redwood::memory
