#include "memory/tiered.hpp"

#include <fmt/format.h>

namespace redwood::memory {

namespace {
bool power_of_two(std::size_t n) { return n != 0 && (n & (n - 1)) == 0; }
}  // namespace

TieredResource::TieredResource(std::string name, MemoryResource& upstream, std::vector<TierConfig> tiers, BuddyConfig base)
    : MemoryResource(std::move(name)), tiers_(std::move(tiers)) {
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    const TierConfig& t = tiers_[i];
    const std::size_t above = i + 1 < tiers_.size() ? tiers_[i + 1].chunk_bytes : base.max_block_bytes;
    RW_EXPECTS(power_of_two(t.chunk_bytes) && t.max_request_bytes > 0 && t.max_request_bytes <= t.chunk_bytes &&
                   t.chunk_bytes <= above && (i == 0 || t.max_request_bytes > tiers_[i - 1].max_request_bytes),
               InvalidArgument, "{} '{}': tier {} ({} requests in {} chunks) is out of order or not a power of two", kind(),
               this->name(), i, format_bytes(t.max_request_bytes), format_bytes(t.chunk_bytes));
  }
  pools_.resize(tiers_.size() + 1);
  pools_.back() = std::make_unique<BuddyResource>(this->name(), upstream, base);
  for (std::size_t i = tiers_.size(); i-- > 0;) {
    BuddyConfig c = base;
    c.max_block_bytes = tiers_[i].chunk_bytes;
    c.limit_bytes = base.limit_bytes;
    c.min_block_bytes = std::min(base.min_block_bytes, tiers_[i].chunk_bytes);
    pools_[i] = std::make_unique<BuddyResource>(fmt::format("{} <= {}", this->name(), format_bytes(tiers_[i].max_request_bytes)),
                                                *pools_[i + 1], c);
  }
}

TieredResource::~TieredResource() {
  // The smaller tiers give their chunks back to the tiers above before those go.
  for (auto& p : pools_) p.reset();
}

BuddyResource& TieredResource::pool_for(std::size_t bytes) const {
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    if (bytes <= tiers_[i].max_request_bytes) return *pools_[i];
  }
  return *pools_.back();
}

void* TieredResource::do_allocate(std::size_t bytes, std::size_t alignment, Stream stream) {
  return pool_for(bytes).allocate(bytes, alignment, stream);
}

void TieredResource::do_deallocate(void* p, std::size_t bytes, std::size_t alignment, Stream stream) {
  pool_for(bytes).deallocate(p, bytes, alignment, stream);
}

std::vector<std::size_t> TieredResource::free_blocks_by_order() {
  std::vector<std::size_t> all;
  for (auto& p : pools_) {
    const auto blocks = p->free_blocks_by_order();
    if (blocks.size() > all.size()) all.resize(blocks.size(), 0);
    for (std::size_t k = 0; k < blocks.size(); ++k) all[k] += blocks[k];
  }
  return all;
}

void TieredResource::trim() {
  // Smallest first: a lower tier's wholly free chunks go back to the tier above, where they
  // coalesce with their buddies.
  for (std::size_t i = 0; i < pools_.size(); ++i) {
    pools_[i]->trim();
    if (i + 1 < pools_.size()) pools_[i]->release_free_chunks();
  }
}

PoolStats TieredResource::do_stats() const {
  PoolStats st;
  st.name = name();
  std::size_t chunks = 0;                     // lower tiers' chunks: in use in the tier above
  std::uint64_t chunk_allocs = 0, chunk_frees = 0;
  for (std::size_t i = 0; i < pools_.size(); ++i) {
    const PoolStats s = pools_[i]->stats();
    st.bytes_in_use += s.bytes_in_use;
    st.requested_bytes += s.requested_bytes;
    st.allocations += s.allocations;
    st.deallocations += s.deallocations;
    st.free_bytes += s.free_bytes;
    st.pending_bytes += s.pending_bytes;
    st.largest_free_block = std::max(st.largest_free_block, s.largest_free_block);
    if (i + 1 < pools_.size()) {
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
  std::vector<TierConfig> tiers;
  for (const TierConfig t : {TierConfig{64 << 10, 1 << 20}, TierConfig{640 << 10, 8 << 20}}) {
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
  // the free bytes in blocks too small for the largest request, against 13 % without the cache.
  b.shards = 1;
  b.cache_blocks_per_order = 0;
  return b;
}

}  // namespace redwood::memory
