// The buddy pool (buddy.hpp): configuration, the allocate/deallocate fast paths through the
// calling thread's cache, and statistics. The thread caches are in buddy_thread_cache.cpp, the
// shards' free lists in buddy_free_lists.cpp.

#include "memory/detail/buddy_internals.hpp"

#include "core/log.hpp"

#include <bit>
#include <cstdlib>

#include <sys/mman.h>

namespace redwood::memory {
namespace detail {

constinit thread_local std::uint64_t tl_last_id = 0;
constinit thread_local BuddyThreadCache* tl_last = nullptr;

}  // namespace detail

namespace {
bool is_pow2(std::size_t v) { return v != 0 && (v & (v - 1)) == 0; }
std::uint32_t log2_exact(std::size_t v) { return static_cast<std::uint32_t>(std::countr_zero(v)); }

std::uint32_t next_thread_index() {
  static std::atomic<std::uint32_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t next_pool_id() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

BuddyResource::BuddyResource(std::string name, MemoryResource& upstream, BuddyConfig config)
    : MemoryResource(std::move(name)), upstream_(upstream), config_(std::move(config)), id_(next_pool_id()) {
  const auto& c = config_;
  RW_EXPECTS(is_pow2(c.min_block_bytes) && c.min_block_bytes >= 16, InvalidArgument,
             "buddy pool '{}': min_block_bytes {} must be a power of two >= 16", this->name(), c.min_block_bytes);
  RW_EXPECTS(is_pow2(c.max_block_bytes) && c.max_block_bytes >= c.min_block_bytes, InvalidArgument,
             "buddy pool '{}': max_block_bytes {} must be a power of two >= min_block_bytes {}",
             this->name(), c.max_block_bytes, c.min_block_bytes);
  RW_EXPECTS(c.limit_bytes >= c.max_block_bytes, InvalidArgument,
             "buddy pool '{}': limit {} is below one chunk (max_block_bytes {})", this->name(),
             format_bytes(c.limit_bytes), format_bytes(c.max_block_bytes));
  RW_EXPECTS(is_pow2(c.chunk_alignment), InvalidArgument,
             "buddy pool '{}': chunk_alignment {} must be a power of two", this->name(), c.chunk_alignment);
  min_order_ = log2_exact(c.min_block_bytes);
  max_order_ = log2_exact(c.max_block_bytes);
  RW_EXPECTS(max_order_ < 63, InvalidArgument, "buddy pool '{}': max_block_bytes too large", this->name());
  unit_shift_ = max_order_ - min_order_;
  max_chunks_ = c.limit_bytes / c.max_block_bytes;
  RW_EXPECTS(unit_shift_ < 32 && (static_cast<std::uint64_t>(max_chunks_) << unit_shift_) < kNil,
             InvalidArgument,
             "buddy pool '{}': limit {} / min_block_bytes {} exceeds 2^32 blocks; raise min_block_bytes",
             this->name(), format_bytes(c.limit_bytes), c.min_block_bytes);
  std::size_t shards = c.shards;
  if (shards == 0) shards = std::bit_ceil(std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 8));
  RW_EXPECTS(is_pow2(shards), InvalidArgument, "buddy pool '{}': shards {} must be a power of two",
             this->name(), shards);
  config_.shards = shards;
  shard_mask_ = shards - 1;
  shards_ = std::make_unique<Shard[]>(shards);
  // Orders min_order_ .. cache_max_order_ go through the thread caches (none when disabled).
  const std::size_t cache_max = std::min(c.cache_max_block_bytes, c.max_block_bytes);
  cache_max_order_ = c.cache_blocks_per_order == 0 || cache_max < c.min_block_bytes
                         ? 0
                         : static_cast<std::uint32_t>(std::bit_width(cache_max) - 1);
  chunks_by_id_ = std::make_unique<std::atomic<Chunk*>[]>(max_chunks_);
  for (std::size_t i = 0; i < max_chunks_; ++i) chunks_by_id_[i].store(nullptr);
  // State bytes of every chunk the limit allows, reserved at once (address space only: pages
  // are zero and materialize when touched) and on transparent huge pages where the kernel
  // allows: a free or a coalesce reads the state of a random block, and with 4 KiB pages that
  // is a TLB miss per access once the pool spans more than a few chunks.
  state_region_bytes_ = max_chunks_ << unit_shift_;
  void* region = mmap(nullptr, state_region_bytes_, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  RW_EXPECTS(region != MAP_FAILED, OutOfMemory, "buddy pool '{}': cannot reserve {} for block states",
             this->name(), format_bytes(state_region_bytes_));
  madvise(region, state_region_bytes_, MADV_HUGEPAGE);  // advice only: failure is harmless
  state_region_ = static_cast<std::uint8_t*>(region);
  index_.store(new Index{});
}

BuddyResource::~BuddyResource() {
  {
    // Threads that used the pool keep their (now empty) caches until they exit; the blocks in
    // them belong to chunks given back below.
    std::lock_guard lock(detail::cache_registry_mutex());
    for (ThreadCache* tc : caches_) tc->owner = nullptr;
    caches_.clear();
  }
  for (std::size_t i = 0; i <= shard_mask_; ++i) {
    const auto& pending = shards_[i].pending;
    for (std::size_t j = 0; j < pending.size(); ++j) {
      if (j > 0 && pending[j].event == pending[j - 1].event) continue;  // one event, adjacent blocks
      config_.ordering->wait(pending[j].event);
      config_.ordering->release(pending[j].event);
    }
  }
  for (Chunk* c : chunk_list_) {
    if (c == nullptr) continue;
    if (c->base != nullptr) upstream_.deallocate(c->base, c->bytes, config_.chunk_alignment, nullptr);
    delete c;
  }
  delete index_.load();
  munmap(state_region_, state_region_bytes_);
}

std::uint32_t BuddyResource::order_for(std::size_t bytes, std::size_t alignment) const {
  RW_EXPECTS(alignment <= config_.chunk_alignment, InvalidArgument,
             "buddy pool '{}': alignment {} exceeds the pool's chunk_alignment {}", name(),
             alignment, config_.chunk_alignment);
  if (const std::uint32_t order = block_order(bytes, alignment); order != 0) return order;
  throw OutOfMemory(fmt::format(
      "buddy pool '{}' is out of memory: {} requested, largest block {} (max_block_bytes), limit {}",
      name(), format_bytes(bytes), format_bytes(config_.max_block_bytes), format_bytes(config_.limit_bytes)));
}

std::uint32_t BuddyResource::block_order(std::size_t bytes, std::size_t alignment) const {
  const std::size_t need = std::max({bytes, alignment, config_.min_block_bytes});
  if (need > config_.max_block_bytes || alignment > config_.chunk_alignment || (alignment & (alignment - 1)) != 0) return 0;
  return static_cast<std::uint32_t>(std::bit_width(need - 1));
}

BuddyResource::Shard& BuddyResource::my_shard() {
  static thread_local const std::uint32_t index = next_thread_index();
  return shards_[index & shard_mask_];
}

BuddyResource::ThreadCache& BuddyResource::thread_cache() {
  if (detail::tl_last_id == id_) [[likely]] return *detail::tl_last;
  return thread_cache_slow();
}

void* BuddyResource::do_allocate(std::size_t bytes, std::size_t alignment, Stream stream) {
  const std::uint32_t order = order_for(bytes, alignment);
  if (!config_.ordering) stream = nullptr;
  ThreadCache& tc = thread_cache();
  std::uint32_t id = kNil;
  if (order <= cache_max_order_) {
    // Fast path: the newest block of this order freed on the same stream (or on none).
    if (std::uint32_t& count = tc.count[order]; count != 0) {
      detail::CacheEntry* e = &tc.entries[(order - min_order_) * tc.cap];
      for (std::uint32_t i = count; i-- > 0;) {
        if (e[i].stream == stream || e[i].stream == nullptr) {
          id = e[i].id;
          std::copy(e + i + 1, e + count, e + i);
          if (--count == 0) tc.cached_orders.store(tc.cached_orders.load(std::memory_order_relaxed) & ~(1ull << order), std::memory_order_relaxed);
          tc.cached_bytes.sub(std::uint64_t{1} << order);
          break;
        }
      }
    }
    if (id == kNil) id = refill(tc, order, bytes);
  } else {
    id = allocate_from_shards(tc, order, bytes);
  }
  Chunk* c = chunks_by_id_[id >> unit_shift_].load(std::memory_order_acquire);
  const std::uint32_t u = id & ((1u << unit_shift_) - 1);
  detail::store_state(c, u, static_cast<std::uint8_t>(kAllocated | order));
  const std::uint64_t block = std::uint64_t{1} << order;
  tc.in_use.add(block);
  tc.requested.add(bytes);
  tc.allocations.add(1);
  if ((tc.unpublished += static_cast<std::int64_t>(block)) >= kPublishBytes) publish(tc);
  return c->base + (static_cast<std::size_t>(u) << min_order_);
}

void BuddyResource::throw_out_of_memory(std::size_t bytes) const {
  const PoolStats st = do_stats();
  throw OutOfMemory(fmt::format("buddy pool '{}' is out of memory: {} requested, limit {}, {} in use",
                                name(), format_bytes(bytes), format_bytes(config_.limit_bytes),
                                format_bytes(st.bytes_in_use)));
}

void BuddyResource::do_deallocate(void* p, std::size_t bytes, std::size_t alignment, Stream stream) {
  Chunk* c = find_chunk(p);
  const std::size_t offset = c ? static_cast<std::size_t>(static_cast<std::byte*>(p) - c->base) : 1;
  RW_EXPECTS(c != nullptr && (offset & (config_.min_block_bytes - 1)) == 0, InvalidArgument,
             "buddy pool '{}': deallocate of {} which is not a block of this pool (foreign pointer)",
             name(), p);
  // The block's order comes from the caller's bytes and alignment (the contract), not from its
  // state byte: that byte is a cache miss for a block allocated long ago, and reading it would be
  // most of the cost of a free. The state is checked where it is read anyway (when the block leaves the
  // thread cache); with debug checks on, MemoryResource's tracking has checked the call already.
  const std::uint32_t order = block_order(bytes, alignment);
  RW_EXPECTS(order != 0 && (offset & ((std::size_t{1} << order) - 1)) == 0, InvalidArgument,
             "buddy pool '{}': deallocate of {} with {} bytes (alignment {}), which is no block of "
             "this pool of that size",
             name(), p, bytes, alignment);
  const std::uint32_t u = static_cast<std::uint32_t>(offset >> min_order_);
  const std::uint32_t id = (c->id << unit_shift_) | u;
  ThreadCache& tc = thread_cache();
  const std::uint64_t block = std::uint64_t{1} << order;
  if (!config_.ordering) stream = nullptr;
  if (order <= cache_max_order_) {
    detail::CacheEntry* e = &tc.entries[(order - min_order_) * tc.cap];
    // A second free of a block still in this thread's cache would hand it out twice.
    for (std::uint32_t i = 0; i < tc.count[order]; ++i) {
      RW_EXPECTS(e[i].id != id, InvalidArgument,
                 "buddy pool '{}': deallocate of {} which is already free (double free)", name(), p);
    }
    count_deallocation(tc, bytes, block);
    if (tc.count[order] == tc.cap) flush_magazine(tc, order, tc.cap / 2 == 0 ? tc.cap : tc.cap / 2);
    e[tc.count[order]++] = {id, stream};
    tc.cached_bytes.add(block);
    tc.cached_orders.store(tc.cached_orders.load(std::memory_order_relaxed) | (1ull << order), std::memory_order_relaxed);
    return;
  }
  Shard& s = shards_[c->shard];
  {
    std::lock_guard lock(s.lock);
    RW_EXPECTS(detail::load_state(c, u) == (kAllocated | order), InvalidArgument,
               "buddy pool '{}': deallocate of {} which is not an allocated block of {} (double free, "
               "or a wrong size?)",
               name(), p, format_bytes(std::size_t{1} << order));
    detail::store_state(c, u, static_cast<std::uint8_t>(order));  // held by the pool
    if (stream != nullptr) defer(s, id, config_.ordering->record(stream));
    else free_block(s, id);
  }
  count_deallocation(tc, bytes, block);
}

void BuddyResource::count_deallocation(ThreadCache& tc, std::size_t bytes, std::uint64_t block) {
  tc.in_use.sub(block);
  tc.requested.sub(bytes);
  tc.deallocations.add(1);
  if ((tc.unpublished -= static_cast<std::int64_t>(block)) <= -kPublishBytes) publish(tc);
}

void BuddyResource::trim() {
  if (ThreadCache* tc = existing_thread_cache(); tc != nullptr && tc->owner == this) flush_thread_cache(*tc);
  for (std::size_t i = 0; i <= shard_mask_; ++i) {
    Shard& s = shards_[i];
    std::lock_guard lock(s.lock);
    poll_pending(s, true);
  }
}

std::vector<std::size_t> BuddyResource::free_blocks_by_order() {
  std::vector<std::size_t> counts(64, 0);
  for (std::size_t i = 0; i <= shard_mask_; ++i) {
    Shard& s = shards_[i];
    std::lock_guard lock(s.lock);
    for (std::uint32_t k = min_order_; k <= max_order_; ++k) counts[k] += s.free_count[k];
  }
  if (ThreadCache* tc = existing_thread_cache(); tc != nullptr && cache_max_order_ != 0) {
    for (std::uint32_t k = min_order_; k <= cache_max_order_; ++k) counts[k] += tc->count[k];
  }
  return counts;
}

PoolStats BuddyResource::do_stats() const {
  PoolStats st;
  st.name = name();
  st.limit_bytes = config_.limit_bytes;
  {
    std::lock_guard lock(detail::cache_registry_mutex());
    st.bytes_in_use = retired_.in_use;
    st.requested_bytes = retired_.requested;
    st.allocations = retired_.allocations;
    st.deallocations = retired_.deallocations;
    for (const ThreadCache* tc : caches_) {
      // Unsigned sums wrap: a thread's negative in-use (frees of others' blocks) cancels out.
      st.bytes_in_use += tc->in_use.get();
      st.requested_bytes += tc->requested.get();
      st.allocations += tc->allocations.get();
      st.deallocations += tc->deallocations.get();
      st.free_bytes += tc->cached_bytes.get();
      if (const std::uint64_t m = tc->cached_orders.load(std::memory_order_relaxed); m != 0)
        st.largest_free_block = std::max(st.largest_free_block, std::size_t{1} << (63 - std::countl_zero(m)));
    }
  }
  for (std::size_t i = 0; i <= shard_mask_; ++i) {
    Shard& s = shards_[i];
    std::lock_guard lock(s.lock);
    st.free_bytes += s.free_list_bytes;
    st.pending_bytes += s.pending_bytes;
    if (s.nonempty != 0)
      st.largest_free_block = std::max(st.largest_free_block, std::size_t{1} << (63 - std::countl_zero(s.nonempty)));
  }
  // The high water is published per thread in steps of kPublishBytes; what is in use now is
  // exact, so a reader never sees a high water below it.
  std::size_t hw = high_water_.load(std::memory_order_relaxed);
  while (st.bytes_in_use > hw && !high_water_.compare_exchange_weak(hw, st.bytes_in_use, std::memory_order_relaxed)) {
  }
  st.high_water_bytes = std::max(hw, st.bytes_in_use);
  st.reserved_bytes = reserved_.load(std::memory_order_relaxed);
  st.upstream_allocations = upstream_allocations_.load(std::memory_order_relaxed);
  st.upstream_deallocations = upstream_deallocations_.load(std::memory_order_relaxed);
  return st;
}

}  // namespace redwood::memory
