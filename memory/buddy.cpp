#include "memory/buddy.hpp"

#include "core/log.hpp"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <thread>

#include <sys/mman.h>

namespace redwood::memory {
namespace detail {

namespace {
constexpr std::uint32_t kNil = 0xffffffffu;
constexpr std::uint8_t kOrderMask = 0x3f;
constexpr std::uint8_t kFree = 0x40;       // on a free list
constexpr std::uint8_t kAllocated = 0x80;  // held by a caller
// A block start with only its order set is held by the pool: in a thread cache or pending.
// Units that start no block are 0.

class SpinLock {
 public:
  void lock() {
    for (int spins = 0;; ++spins) {
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
      while (locked_.load(std::memory_order_relaxed)) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        if (++spins > 64) {
          std::this_thread::yield();
          spins = 0;
        }
      }
    }
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};
}  // namespace

struct BuddyChunk {
  std::byte* base = nullptr;
  std::size_t bytes = 0;
  std::uint32_t id = 0;
  std::uint32_t shard = 0;
  std::uint8_t* state = nullptr;  // one byte per unit, in the pool's state region
};

// State bytes are read by a shard's coalescing (under its lock) while a thread cache may write
// the state of an allocated block next to it (no lock): relaxed atomics, plain moves on x86.
inline std::uint8_t load_state(const BuddyChunk* c, std::uint32_t u) {
  return std::atomic_ref<std::uint8_t>(c->state[u]).load(std::memory_order_relaxed);
}
inline void store_state(BuddyChunk* c, std::uint32_t u, std::uint8_t v) {
  std::atomic_ref<std::uint8_t>(c->state[u]).store(v, std::memory_order_relaxed);
}

struct CacheEntry {
  std::uint32_t id;
  Stream stream;
};

struct PendingBlock {
  std::uint32_t id;
  StreamOrdering::Event event;
};

struct alignas(64) BuddyShard {
  SpinLock lock;
  std::uint64_t nonempty = 0;                 // bit k: free list of order k is not empty
  std::uint32_t free_count[64] = {};          // free blocks per order
  std::vector<std::uint32_t> stack[64];       // free list per order (see Lists)
  std::vector<PendingBlock> pending;
  std::vector<BuddyChunk*> chunks;            // chunks this shard owns
  std::size_t free_list_bytes = 0, pending_bytes = 0;
};

/// A counter written by one thread (plain load + store, no locked instruction) and read by
/// stats() from any thread.
struct OwnedCounter {
  std::atomic<std::uint64_t> v{0};
  void add(std::uint64_t d) { v.store(v.load(std::memory_order_relaxed) + d, std::memory_order_relaxed); }
  void sub(std::uint64_t d) { v.store(v.load(std::memory_order_relaxed) - d, std::memory_order_relaxed); }
  std::uint64_t get() const { return v.load(std::memory_order_relaxed); }
};

/// One thread's cache for one pool. Magazines and counters are touched by the owning thread
/// only (stats() reads the counters); `owner` is guarded by cache_registry_mutex().
struct alignas(64) BuddyThreadCache {
  BuddyResource* owner = nullptr;
  std::uint64_t owner_id = 0;
  std::uint32_t cap = 0;
  std::int64_t unpublished = 0;               // in-use delta not yet in published_in_use_
  std::uint32_t count[64] = {};
  std::vector<CacheEntry> entries;            // (order - min_order) * cap + i, oldest first
  // In use and requested may wrap below zero in one thread (a block freed by another thread
  // than the one that allocated it); the sum over threads is exact.
  OwnedCounter in_use, requested, cached_bytes, allocations, deallocations;
  std::atomic<std::uint64_t> cached_orders{0};  // bit k: magazine of order k is not empty
};

std::mutex& cache_registry_mutex() {
  static auto* m = new std::mutex;  // never destroyed: thread exits may come after static destruction
  return *m;
}

/// The caches of the calling thread, one per pool it used; the last one looked up is remembered
/// in two trivially constructed thread_locals (a plain %fs load on the fast path).
struct ThreadCaches {
  std::vector<std::unique_ptr<BuddyThreadCache>> caches;
  ~ThreadCaches();
};
thread_local std::uint64_t tl_last_id = 0;
thread_local BuddyThreadCache* tl_last = nullptr;
thread_local ThreadCaches tl_caches;

}  // namespace detail

using detail::BuddyChunk;
using detail::kAllocated;
using detail::kFree;
using detail::kNil;
using detail::kOrderMask;

struct BuddyResource::Index {
  std::vector<std::pair<const std::byte*, Chunk*>> by_base;  // sorted by base
};

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

// Per thread, in-use changes reach the shared published_in_use_ (and the high water) once they
// add up to this much: the high water is exact to within this per thread.
constexpr std::int64_t kPublishBytes = 1 << 20;

}  // namespace

detail::ThreadCaches::~ThreadCaches() {
  std::lock_guard lock(cache_registry_mutex());
  for (auto& c : caches) {
    if (c->owner != nullptr) c->owner->retire(*c);
  }
  tl_last_id = 0;
  tl_last = nullptr;
}

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
    for (auto& p : shards_[i].pending) {
      config_.ordering->wait(p.event);
      config_.ordering->release(p.event);
    }
  }
  for (Chunk* c : chunk_list_) {
    if (c == nullptr) continue;
    if (c->base != nullptr) upstream_.deallocate(c->base, c->bytes);
    delete c;
  }
  delete index_.load();
  munmap(state_region_, state_region_bytes_);
}

std::uint32_t BuddyResource::order_for(std::size_t bytes, std::size_t alignment) const {
  RW_EXPECTS(alignment <= config_.chunk_alignment, InvalidArgument,
             "buddy pool '{}': alignment {} exceeds the pool's chunk_alignment {}", name(),
             alignment, config_.chunk_alignment);
  const std::size_t need = std::max({bytes, alignment, config_.min_block_bytes});
  if (need > config_.max_block_bytes) {
    throw OutOfMemory(fmt::format(
        "buddy pool '{}' is out of memory: {} requested, largest block {} (max_block_bytes), limit {}",
        name(), format_bytes(bytes), format_bytes(config_.max_block_bytes),
        format_bytes(config_.limit_bytes)));
  }
  return static_cast<std::uint32_t>(std::bit_width(need - 1));
}

BuddyResource::Shard& BuddyResource::my_shard() {
  static thread_local const std::uint32_t index = next_thread_index();
  return shards_[index & shard_mask_];
}

// ---- thread caches ----

BuddyResource::ThreadCache& BuddyResource::thread_cache() {
  if (detail::tl_last_id == id_) [[likely]] return *detail::tl_last;
  return thread_cache_slow();
}

BuddyResource::ThreadCache* BuddyResource::existing_thread_cache() {
  if (detail::tl_last_id == id_) return detail::tl_last;
  for (auto& c : detail::tl_caches.caches) {
    if (c->owner_id == id_) return c.get();
  }
  return nullptr;
}

BuddyResource::ThreadCache& BuddyResource::thread_cache_slow() {
  ThreadCache* tc = existing_thread_cache();
  if (tc == nullptr) {
    auto fresh = std::make_unique<ThreadCache>();
    fresh->owner = this;
    fresh->owner_id = id_;
    fresh->cap = static_cast<std::uint32_t>(config_.cache_blocks_per_order);
    if (cache_max_order_ != 0) fresh->entries.resize((cache_max_order_ - min_order_ + 1) * fresh->cap);
    tc = fresh.get();
    auto& mine = detail::tl_caches.caches;
    std::lock_guard lock(detail::cache_registry_mutex());
    // Caches of pools that are gone are dropped here (their owner was cleared under this lock).
    std::erase_if(mine, [](const auto& c) { return c->owner == nullptr; });
    mine.push_back(std::move(fresh));
    caches_.push_back(tc);
  }
  detail::tl_last_id = id_;
  detail::tl_last = tc;
  return *tc;
}

void BuddyResource::retire(ThreadCache& tc) {
  flush_thread_cache(tc);
  publish(tc);
  retired_.in_use += tc.in_use.get();
  retired_.requested += tc.requested.get();
  retired_.allocations += tc.allocations.get();
  retired_.deallocations += tc.deallocations.get();
  tc.owner = nullptr;
  std::erase(caches_, &tc);
}

void BuddyResource::publish(ThreadCache& tc) {
  const std::int64_t now = published_in_use_.fetch_add(tc.unpublished, std::memory_order_relaxed) + tc.unpublished;
  tc.unpublished = 0;
  std::size_t hw = high_water_.load(std::memory_order_relaxed);
  const auto v = static_cast<std::size_t>(std::max<std::int64_t>(now, 0));
  while (v > hw && !high_water_.compare_exchange_weak(hw, v, std::memory_order_relaxed)) {
  }
}

/// Gives the `count` oldest blocks of one magazine back to their shards (one lock per run of
/// blocks from the same shard); blocks freed on a stream wait for its event there.
void BuddyResource::flush_magazine(ThreadCache& tc, std::uint32_t order, std::uint32_t count) {
  detail::CacheEntry* e = &tc.entries[(order - min_order_) * tc.cap];
  Shard* locked = nullptr;
  std::size_t lost = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    const Chunk* c = chunks_by_id_[e[i].id >> unit_shift_].load(std::memory_order_relaxed);
    Shard* s = &shards_[c->shard];
    if (s != locked) {
      if (locked) locked->lock.unlock();
      s->lock.lock();
      locked = s;
    }
    if (e[i].stream == nullptr) {
      free_block(*s, e[i].id);
      continue;
    }
    try {
      defer(*s, e[i].id, e[i].stream);
    } catch (const Error& err) {
      // No event on the freeing stream (destroyed, say, before a thread exits): the block cannot
      // be shown idle, so it stays out of use rather than be reused too early.
      ++lost;
      if (lost == 1) redwood::log().warn("buddy pool '{}': a block freed on a stream is kept out of use: {}", name(), err.what());
    }
  }
  if (locked) locked->lock.unlock();
  const std::uint32_t left = tc.count[order] - count;
  std::copy(e + count, e + count + left, e);
  tc.count[order] = left;
  tc.cached_bytes.sub(static_cast<std::uint64_t>(count) << order);
  if (left == 0) tc.cached_orders.store(tc.cached_orders.load(std::memory_order_relaxed) & ~(1ull << order), std::memory_order_relaxed);
}

void BuddyResource::flush_thread_cache(ThreadCache& tc) {
  for (std::uint32_t k = min_order_; k <= cache_max_order_ && cache_max_order_ != 0; ++k) {
    if (tc.count[k] != 0) flush_magazine(tc, k, tc.count[k]);
  }
}

void* BuddyResource::address_of(std::uint32_t id) const {
  const Chunk* c = chunks_by_id_[id >> unit_shift_].load(std::memory_order_acquire);
  const std::size_t unit = id & ((1u << unit_shift_) - 1);
  return c->base + (unit << min_order_);
}

BuddyChunk* BuddyResource::find_chunk(const void* p) const {
  const Index* index = index_.load(std::memory_order_acquire);
  const auto* b = static_cast<const std::byte*>(p);
  // Branchless search for the last chunk whose base is <= p (random frees mispredict a branchy
  // binary search at every step).
  const auto* first = index->by_base.data();
  std::size_t n = index->by_base.size();
  if (n == 0 || b < first->first) return nullptr;
  while (n > 1) {
    const std::size_t half = n / 2;
    first = first[half].first <= b ? first + half : first;
    n -= half;
  }
  Chunk* c = first->second;
  return b < c->base + c->bytes ? c : nullptr;
}

// ---- free lists (the shard's lock is held) ----

namespace {
/// Free lists as stacks of block ids with lazy deletion: a block leaves its list by changing its
/// state (a merge), and pops skip entries whose block is no longer a free block of that order.
/// No links to follow, so split and coalesce touch one state byte per block, not three
/// scattered link words. An entry is valid iff state == kFree | order, so even duplicates of one
/// block can never hand it out twice: the first pop changes its state.
struct Lists {
  const std::unique_ptr<std::atomic<BuddyChunk*>[]>& chunks;
  std::uint32_t shift, mask;
  BuddyChunk* chunk(std::uint32_t id) const { return chunks[id >> shift].load(std::memory_order_relaxed); }

  void push(detail::BuddyShard& s, std::uint32_t id, std::uint32_t order) {
    detail::store_state(chunk(id), id & mask, static_cast<std::uint8_t>(kFree | order));
    auto& stack = s.stack[order];
    ++s.free_count[order];
    if (stack.size() >= 2 * s.free_count[order] + 256) compact(stack, order);
    stack.push_back(id);
    s.nonempty |= 1ull << order;
    s.free_list_bytes += std::size_t{1} << order;
  }
  /// The block leaves the list; the caller changes its state (which makes its entry stale).
  void remove(detail::BuddyShard& s, std::uint32_t order) {
    if (--s.free_count[order] == 0) s.nonempty &= ~(1ull << order);
    s.free_list_bytes -= std::size_t{1} << order;
  }
  bool valid(std::uint32_t id, std::uint32_t order) const {
    const BuddyChunk* c = chunk(id);
    return c != nullptr && detail::load_state(c, id & mask) == (kFree | order);
  }
  /// A free block of `order` (the list must not be empty); its state is left as it was.
  std::uint32_t pop(detail::BuddyShard& s, std::uint32_t order) {
    auto& stack = s.stack[order];
    for (;;) {
      const std::uint32_t id = stack.back();
      stack.pop_back();
      if (valid(id, order)) {
        remove(s, order);
        return id;
      }
    }
  }
  /// Drops stale entries and duplicates (a block pushed again after a merge and a split): a
  /// valid block is marked (kAllocated | kFree, a state no block has otherwise) when kept.
  void compact(std::vector<std::uint32_t>& stack, std::uint32_t order) const {
    const auto free_state = static_cast<std::uint8_t>(kFree | order);
    const auto marked = static_cast<std::uint8_t>(kAllocated | kFree | order);
    std::size_t kept = 0;
    for (std::uint32_t id : stack) {
      BuddyChunk* c = chunk(id);
      if (c == nullptr || detail::load_state(c, id & mask) != free_state) continue;
      detail::store_state(c, id & mask, marked);
      stack[kept++] = id;
    }
    stack.resize(kept);
    for (std::uint32_t id : stack) detail::store_state(chunk(id), id & mask, free_state);
  }
};
}  // namespace

/// A block of `order` from the smallest nonempty list at or above it, the rest of the split
/// going back to the lists; the block is left held by the pool (state = order).
std::uint32_t BuddyResource::split_from_free_lists(Shard& s, std::uint32_t order) {
  const std::uint64_t candidates = s.nonempty & ~((1ull << order) - 1);
  if (candidates == 0) return kNil;
  std::uint32_t j = static_cast<std::uint32_t>(std::countr_zero(candidates));
  Lists lists{chunks_by_id_, unit_shift_, (1u << unit_shift_) - 1};
  const std::uint32_t id = lists.pop(s, j);
  while (j > order) {
    --j;
    lists.push(s, id + (1u << (j - min_order_)), j);
  }
  detail::store_state(lists.chunk(id), id & lists.mask, static_cast<std::uint8_t>(order));
  return id;
}

void BuddyResource::free_block(Shard& s, std::uint32_t id) {
  Lists lists{chunks_by_id_, unit_shift_, (1u << unit_shift_) - 1};
  Chunk* c = lists.chunk(id);
  std::uint32_t u = id & lists.mask;
  std::uint32_t order = detail::load_state(c, u) & kOrderMask;
  while (order < max_order_) {
    const std::uint32_t bit = 1u << (order - min_order_);
    const std::uint32_t buddy = u ^ bit;
    if (detail::load_state(c, buddy) != (kFree | order)) break;
    lists.remove(s, order);
    detail::store_state(c, u | bit, 0);  // the upper half starts no block; the lower is pushed below
    u &= ~bit;
    ++order;
  }
  lists.push(s, (id & ~lists.mask) | u, order);
}

bool BuddyResource::grow(Shard& s) {
  const std::size_t bytes = config_.max_block_bytes;
  std::size_t cur = reserved_.load(std::memory_order_relaxed);
  do {
    if (cur + bytes > config_.limit_bytes) return false;
  } while (!reserved_.compare_exchange_weak(cur, cur + bytes, std::memory_order_relaxed));

  std::lock_guard lock(grow_mutex_);
  void* base = nullptr;
  try {
    base = upstream_.allocate(bytes, config_.chunk_alignment);
  } catch (const OutOfMemory&) {
    reserved_.fetch_sub(bytes, std::memory_order_relaxed);
    return false;
  }
  upstream_allocations_.fetch_add(1, std::memory_order_relaxed);
  auto chunk = std::make_unique<Chunk>();
  chunk->base = static_cast<std::byte*>(base);
  chunk->bytes = bytes;
  chunk->shard = static_cast<std::uint32_t>(&s - shards_.get());
  if (!free_ids_.empty()) {
    chunk->id = free_ids_.back();
    free_ids_.pop_back();
    delete chunk_list_[chunk->id];
    chunk_list_[chunk->id] = nullptr;
  } else {
    chunk->id = static_cast<std::uint32_t>(chunk_list_.size());
    chunk_list_.push_back(nullptr);
  }
  // A released chunk left its state bytes zero, so a reused id starts clean.
  chunk->state = state_region_ + (static_cast<std::size_t>(chunk->id) << unit_shift_);
  Chunk* c = chunk.release();
  chunk_list_[c->id] = c;
  chunks_by_id_[c->id].store(c, std::memory_order_release);
  auto next = std::make_unique<Index>(*index_.load(std::memory_order_relaxed));
  next->by_base.insert(std::upper_bound(next->by_base.begin(), next->by_base.end(),
                                        std::make_pair(static_cast<const std::byte*>(c->base), c),
                                        [](const auto& a, const auto& b) { return a.first < b.first; }),
                       {c->base, c});
  old_indexes_.emplace_back(index_.exchange(next.release(), std::memory_order_acq_rel));
  s.chunks.push_back(c);
  Lists lists{chunks_by_id_, unit_shift_, (1u << unit_shift_) - 1};
  lists.push(s, c->id << unit_shift_, max_order_);
  return true;
}

void BuddyResource::defer(Shard& s, std::uint32_t id, Stream stream) {
  s.pending.push_back({id, config_.ordering->record(stream)});
  const Chunk* c = chunks_by_id_[id >> unit_shift_].load(std::memory_order_relaxed);
  s.pending_bytes += std::size_t{1} << (detail::load_state(c, id & ((1u << unit_shift_) - 1)) & kOrderMask);
}

void BuddyResource::poll_pending(Shard& s, bool wait) {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < s.pending.size(); ++i) {
    auto p = s.pending[i];
    if (wait) config_.ordering->wait(p.event);
    if (wait || config_.ordering->completed(p.event)) {
      config_.ordering->release(p.event);
      const Chunk* c = chunks_by_id_[p.id >> unit_shift_].load(std::memory_order_relaxed);
      s.pending_bytes -= std::size_t{1} << (detail::load_state(c, p.id & ((1u << unit_shift_) - 1)) & kOrderMask);
      free_block(s, p.id);
    } else {
      s.pending[kept++] = p;
    }
  }
  s.pending.resize(kept);
}

/// A block of `order` from shard `s`: completed pending blocks, the free lists, a new chunk (when
/// `may_grow`), waiting for pending blocks. The shard's lock is held.
bool BuddyResource::try_allocate_in(Shard& s, std::uint32_t order, bool may_grow, std::uint32_t& id) {
  if (!s.pending.empty()) poll_pending(s, false);
  if ((id = split_from_free_lists(s, order)) != kNil) return true;
  if (may_grow && grow(s) && (id = split_from_free_lists(s, order)) != kNil) return true;
  if (!s.pending.empty()) {
    poll_pending(s, true);
    if ((id = split_from_free_lists(s, order)) != kNil) return true;
  }
  return false;
}

/// The slow path: the thread's own shard, then (after emptying the thread's cache, whose blocks
/// may coalesce into what is needed) every shard. Returns a held block or throws OutOfMemory.
std::uint32_t BuddyResource::allocate_from_shards(ThreadCache& tc, std::uint32_t order, std::size_t bytes) {
  Shard& mine = my_shard();
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (std::size_t i = 0; i <= shard_mask_; ++i) {
      Shard& s = i == 0 ? mine : shards_[((&mine - shards_.get()) + i) & shard_mask_];
      std::uint32_t id;
      std::lock_guard lock(s.lock);
      if (try_allocate_in(s, order, i == 0 && attempt == 0, id)) return id;
    }
    if (tc.cached_bytes.get() == 0) break;
    flush_thread_cache(tc);
  }
  throw_out_of_memory(bytes);
}

/// An empty magazine of `order`: half a magazine of fresh blocks from the thread's shard under
/// one lock (consecutive splits hand out neighbouring blocks), else the slow path. Returns one
/// block for the caller; the others stay in the magazine.
std::uint32_t BuddyResource::refill(ThreadCache& tc, std::uint32_t order, std::size_t bytes) {
  const std::uint32_t want = std::max<std::uint32_t>(1, tc.cap / 2);
  // A magazine full of blocks freed on other streams is given back (they wait for their events
  // in the shard) to make room.
  if (tc.count[order] == tc.cap) flush_magazine(tc, order, tc.count[order]);
  std::uint32_t got = 0, id = kNil;
  {
    Shard& s = my_shard();
    std::lock_guard lock(s.lock);
    if (!s.pending.empty()) poll_pending(s, false);
    if ((s.nonempty >> order) == 0) grow(s);
    detail::CacheEntry* e = &tc.entries[(order - min_order_) * tc.cap];
    while (got < want && tc.count[order] < tc.cap) {
      const std::uint32_t b = split_from_free_lists(s, order);
      if (b == kNil) break;
      if (id == kNil) {
        id = b;
      } else {
        e[tc.count[order]++] = {b, nullptr};
      }
      ++got;
    }
  }
  if (got > 1) {
    tc.cached_bytes.add(static_cast<std::uint64_t>(got - 1) << order);
    tc.cached_orders.store(tc.cached_orders.load(std::memory_order_relaxed) | (1ull << order), std::memory_order_relaxed);
  }
  if (id == kNil) id = allocate_from_shards(tc, order, bytes);
  return id;
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

void BuddyResource::do_deallocate(void* p, std::size_t bytes, Stream stream) {
  Chunk* c = find_chunk(p);
  const std::size_t offset = c ? static_cast<std::size_t>(static_cast<std::byte*>(p) - c->base) : 1;
  RW_EXPECTS(c != nullptr && (offset & (config_.min_block_bytes - 1)) == 0, InvalidArgument,
             "buddy pool '{}': deallocate of {} which is not a block of this pool (foreign pointer)",
             name(), p);
  const std::uint32_t u = static_cast<std::uint32_t>(offset >> min_order_);
  const std::uint32_t id = (c->id << unit_shift_) | u;
  // An allocated block's state is written only by whoever holds it, so no lock is needed to
  // check it; two threads freeing one block at once are caught by the debug checks.
  const std::uint8_t st = detail::load_state(c, u);
  RW_EXPECTS(st & kAllocated, InvalidArgument,
             "buddy pool '{}': deallocate of {} which is not allocated (double free?)", name(), p);
  const std::uint32_t order = st & kOrderMask;
  RW_EXPECTS(bytes <= (std::size_t{1} << order), InvalidArgument,
             "buddy pool '{}': deallocate of {} with {} bytes, but its block holds {}", name(), p,
             bytes, std::size_t{1} << order);
  detail::store_state(c, u, static_cast<std::uint8_t>(order));  // held by the pool
  ThreadCache& tc = thread_cache();
  const std::uint64_t block = std::uint64_t{1} << order;
  tc.in_use.sub(block);
  tc.requested.sub(bytes);
  tc.deallocations.add(1);
  if ((tc.unpublished -= static_cast<std::int64_t>(block)) <= -kPublishBytes) publish(tc);
  if (!config_.ordering) stream = nullptr;
  if (order <= cache_max_order_) {
    if (tc.count[order] == tc.cap) flush_magazine(tc, order, tc.cap / 2 == 0 ? tc.cap : tc.cap / 2);
    tc.entries[(order - min_order_) * tc.cap + tc.count[order]++] = {id, stream};
    tc.cached_bytes.add(block);
    tc.cached_orders.store(tc.cached_orders.load(std::memory_order_relaxed) | (1ull << order), std::memory_order_relaxed);
    return;
  }
  Shard& s = shards_[c->shard];
  std::lock_guard lock(s.lock);
  if (stream != nullptr) defer(s, id, stream);
  else free_block(s, id);
}

void BuddyResource::trim() {
  if (ThreadCache* tc = existing_thread_cache(); tc != nullptr && tc->owner == this) flush_thread_cache(*tc);
  for (std::size_t i = 0; i <= shard_mask_; ++i) {
    Shard& s = shards_[i];
    std::lock_guard lock(s.lock);
    poll_pending(s, true);
  }
}

std::size_t BuddyResource::release_free_chunks() {
  std::size_t released = 0;
  for (std::size_t i = 0; i <= shard_mask_; ++i) {
    Shard& s = shards_[i];
    std::lock_guard lock(s.lock);
    std::lock_guard grow_lock(grow_mutex_);
    Lists lists{chunks_by_id_, unit_shift_, (1u << unit_shift_) - 1};
    std::erase_if(s.chunks, [&](Chunk* c) {
      if (detail::load_state(c, 0) != (kFree | max_order_)) return false;
      lists.remove(s, max_order_);
      detail::store_state(c, 0, 0);
      auto next = std::make_unique<Index>(*index_.load(std::memory_order_relaxed));
      std::erase_if(next->by_base, [&](const auto& e) { return e.second == c; });
      old_indexes_.emplace_back(index_.exchange(next.release(), std::memory_order_acq_rel));
      upstream_.deallocate(c->base, c->bytes);
      upstream_deallocations_.fetch_add(1, std::memory_order_relaxed);
      reserved_.fetch_sub(c->bytes, std::memory_order_relaxed);
      c->base = nullptr;  // the Chunk stays until its id is reused: old indexes may point at it
      chunks_by_id_[c->id].store(nullptr, std::memory_order_release);
      free_ids_.push_back(c->id);
      ++released;
      return true;
    });
  }
  return released;
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
