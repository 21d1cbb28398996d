#include "memory/buddy.hpp"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <thread>

namespace redwood::memory {
namespace detail {

namespace {
constexpr std::uint32_t kNil = 0xffffffffu;
constexpr std::uint8_t kOrderMask = 0x3f;
constexpr std::uint8_t kFree = 0x40;       // on a free list
constexpr std::uint8_t kAllocated = 0x80;  // held by a caller
// A block start with only its order set is held by the pool: in a hot cache or pending.
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
  std::uint8_t* state = nullptr;  // calloc: untouched pages cost nothing
  std::uint32_t* next = nullptr;
  std::uint32_t* prev = nullptr;
  ~BuddyChunk() {
    std::free(state);
    std::free(next);
    std::free(prev);
  }
};

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
  std::uint32_t head[64];
  std::uint64_t nonempty = 0;                 // bit k: free list of order k is not empty
  std::vector<CacheEntry> cache;              // (order - min_order) * cap + i
  std::uint32_t cache_count[64] = {};
  std::vector<PendingBlock> pending;
  std::vector<BuddyChunk*> chunks;            // chunks this shard owns
  std::size_t in_use = 0, requested = 0, high_water = 0;
  std::size_t free_list_bytes = 0, cached_bytes = 0, pending_bytes = 0;
  std::uint64_t allocations = 0, deallocations = 0;
  BuddyShard() { std::fill(std::begin(head), std::end(head), kNil); }
};

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
}  // namespace

BuddyResource::BuddyResource(std::string name, MemoryResource& upstream, BuddyConfig config)
    : MemoryResource(std::move(name)), upstream_(upstream), config_(std::move(config)) {
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
  const std::size_t cache_orders = max_order_ - min_order_ + 1;
  for (std::size_t i = 0; i < shards; ++i) shards_[i].cache.resize(cache_orders * c.cache_blocks_per_order);
  chunks_by_id_ = std::make_unique<std::atomic<Chunk*>[]>(max_chunks_);
  for (std::size_t i = 0; i < max_chunks_; ++i) chunks_by_id_[i].store(nullptr);
  index_.store(new Index{});
}

BuddyResource::~BuddyResource() {
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

void* BuddyResource::address_of(std::uint32_t id) const {
  const Chunk* c = chunks_by_id_[id >> unit_shift_].load(std::memory_order_acquire);
  const std::size_t unit = id & ((1u << unit_shift_) - 1);
  return c->base + (unit << min_order_);
}

BuddyChunk* BuddyResource::find_chunk(const void* p) const {
  const Index* index = index_.load(std::memory_order_acquire);
  const auto* b = static_cast<const std::byte*>(p);
  auto it = std::upper_bound(index->by_base.begin(), index->by_base.end(), b,
                             [](const std::byte* v, const auto& e) { return v < e.first; });
  if (it == index->by_base.begin()) return nullptr;
  --it;
  Chunk* c = it->second;
  return b < c->base + c->bytes ? c : nullptr;
}

// ---- free lists (the shard's lock is held) ----

namespace {
struct Lists {
  const std::unique_ptr<std::atomic<BuddyChunk*>[]>& chunks;
  std::uint32_t shift, mask;
  BuddyChunk* chunk(std::uint32_t id) const { return chunks[id >> shift].load(std::memory_order_relaxed); }

  void push(detail::BuddyShard& s, std::uint32_t id, std::uint32_t order, std::uint32_t min_order) {
    BuddyChunk* c = chunk(id);
    const std::uint32_t u = id & mask;
    c->state[u] = static_cast<std::uint8_t>(kFree | order);
    c->prev[u] = kNil;
    c->next[u] = s.head[order];
    if (s.head[order] != kNil) chunk(s.head[order])->prev[s.head[order] & mask] = id;
    s.head[order] = id;
    s.nonempty |= 1ull << order;
    s.free_list_bytes += std::size_t{1} << order;
    (void)min_order;
  }
  void remove(detail::BuddyShard& s, std::uint32_t id, std::uint32_t order) {
    BuddyChunk* c = chunk(id);
    const std::uint32_t u = id & mask;
    const std::uint32_t n = c->next[u], p = c->prev[u];
    if (p != kNil) chunk(p)->next[p & mask] = n;
    else s.head[order] = n;
    if (n != kNil) chunk(n)->prev[n & mask] = p;
    if (s.head[order] == kNil) s.nonempty &= ~(1ull << order);
    s.free_list_bytes -= std::size_t{1} << order;
  }
};
}  // namespace

std::uint32_t BuddyResource::split_from_free_lists(Shard& s, std::uint32_t order) {
  const std::uint64_t candidates = s.nonempty & ~((1ull << order) - 1);
  if (candidates == 0) return kNil;
  std::uint32_t j = static_cast<std::uint32_t>(std::countr_zero(candidates));
  Lists lists{chunks_by_id_, unit_shift_, (1u << unit_shift_) - 1};
  const std::uint32_t id = s.head[j];
  lists.remove(s, id, j);
  while (j > order) {
    --j;
    lists.push(s, id + (1u << (j - min_order_)), j, min_order_);
  }
  return id;
}

void BuddyResource::free_block(Shard& s, std::uint32_t id) {
  Lists lists{chunks_by_id_, unit_shift_, (1u << unit_shift_) - 1};
  Chunk* c = lists.chunk(id);
  std::uint32_t u = id & lists.mask;
  std::uint32_t order = c->state[u] & kOrderMask;
  while (order < max_order_) {
    const std::uint32_t bit = 1u << (order - min_order_);
    const std::uint32_t buddy = u ^ bit;
    if (c->state[buddy] != (kFree | order)) break;
    lists.remove(s, (id & ~lists.mask) | buddy, order);
    c->state[u | bit] = 0;
    u &= ~bit;
    ++order;
  }
  lists.push(s, (id & ~lists.mask) | u, order, min_order_);
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
  const std::size_t units = std::size_t{1} << unit_shift_;
  chunk->state = static_cast<std::uint8_t*>(std::calloc(units, 1));
  chunk->next = static_cast<std::uint32_t*>(std::malloc(units * sizeof(std::uint32_t)));
  chunk->prev = static_cast<std::uint32_t*>(std::malloc(units * sizeof(std::uint32_t)));
  if (!chunk->state || !chunk->next || !chunk->prev) {
    upstream_.deallocate(base, bytes);
    reserved_.fetch_sub(bytes, std::memory_order_relaxed);
    throw OutOfMemory(fmt::format("buddy pool '{}': no host memory for the metadata of a {} chunk",
                                  name(), format_bytes(bytes)));
  }
  if (!free_ids_.empty()) {
    chunk->id = free_ids_.back();
    free_ids_.pop_back();
    delete chunk_list_[chunk->id];
    chunk_list_[chunk->id] = nullptr;
  } else {
    chunk->id = static_cast<std::uint32_t>(chunk_list_.size());
    chunk_list_.push_back(nullptr);
  }
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
  lists.push(s, c->id << unit_shift_, max_order_, min_order_);
  return true;
}

void BuddyResource::defer(Shard& s, std::uint32_t id, Stream stream) {
  s.pending.push_back({id, config_.ordering->record(stream)});
  const Chunk* c = chunks_by_id_[id >> unit_shift_].load(std::memory_order_relaxed);
  s.pending_bytes += std::size_t{1} << (c->state[id & ((1u << unit_shift_) - 1)] & kOrderMask);
}

void BuddyResource::poll_pending(Shard& s, bool wait) {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < s.pending.size(); ++i) {
    auto p = s.pending[i];
    if (wait) config_.ordering->wait(p.event);
    if (wait || config_.ordering->completed(p.event)) {
      config_.ordering->release(p.event);
      const Chunk* c = chunks_by_id_[p.id >> unit_shift_].load(std::memory_order_relaxed);
      s.pending_bytes -= std::size_t{1} << (c->state[p.id & ((1u << unit_shift_) - 1)] & kOrderMask);
      free_block(s, p.id);
    } else {
      s.pending[kept++] = p;
    }
  }
  s.pending.resize(kept);
}

void BuddyResource::flush_cache(Shard& s) {
  const std::size_t cap = config_.cache_blocks_per_order;
  for (std::uint32_t k = min_order_; k <= max_order_; ++k) {
    auto& count = s.cache_count[k];
    for (std::uint32_t i = 0; i < count; ++i) {
      const auto& e = s.cache[(k - min_order_) * cap + i];
      if (e.stream != nullptr) defer(s, e.id, e.stream);
      else free_block(s, e.id);
    }
    s.cached_bytes -= static_cast<std::size_t>(count) << k;
    count = 0;
  }
}

bool BuddyResource::try_allocate_in(Shard& s, std::uint32_t order, Stream stream, bool may_grow,
                                    std::uint32_t& id) {
  const std::size_t cap = config_.cache_blocks_per_order;
  if (std::uint32_t& count = s.cache_count[order]; count != 0) {
    detail::CacheEntry* entries = &s.cache[(order - min_order_) * cap];
    for (std::uint32_t i = count; i-- > 0;) {
      if (entries[i].stream == stream || entries[i].stream == nullptr) {
        id = entries[i].id;
        entries[i] = entries[--count];
        s.cached_bytes -= std::size_t{1} << order;
        return true;
      }
    }
  }
  if (!s.pending.empty()) poll_pending(s, false);
  if ((id = split_from_free_lists(s, order)) != kNil) return true;
  if (may_grow && grow(s) && (id = split_from_free_lists(s, order)) != kNil) return true;
  if (!s.pending.empty()) {
    poll_pending(s, true);
    if ((id = split_from_free_lists(s, order)) != kNil) return true;
  }
  if (s.cached_bytes != 0) {
    flush_cache(s);
    poll_pending(s, true);
    if ((id = split_from_free_lists(s, order)) != kNil) return true;
  }
  return false;
}

void* BuddyResource::do_allocate(std::size_t bytes, std::size_t alignment, Stream stream) {
  const std::uint32_t order = order_for(bytes, alignment);
  if (!config_.ordering) stream = nullptr;
  Shard& mine = my_shard();
  for (std::size_t i = 0; i <= shard_mask_; ++i) {
    Shard& s = i == 0 ? mine : shards_[((&mine - shards_.get()) + i) & shard_mask_];
    std::uint32_t id;
    std::lock_guard lock(s.lock);
    if (!try_allocate_in(s, order, stream, i == 0, id)) continue;
    Chunk* c = chunks_by_id_[id >> unit_shift_].load(std::memory_order_relaxed);
    c->state[id & ((1u << unit_shift_) - 1)] = static_cast<std::uint8_t>(kAllocated | order);
    s.in_use += std::size_t{1} << order;
    s.requested += bytes;
    s.high_water = std::max(s.high_water, s.in_use);
    ++s.allocations;
    return address_of(id);
  }
  throw_out_of_memory(bytes);
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
  Shard& s = shards_[c->shard];
  std::lock_guard lock(s.lock);
  const std::uint8_t st = c->state[u];
  RW_EXPECTS(st & kAllocated, InvalidArgument,
             "buddy pool '{}': deallocate of {} which is not allocated (double free?)", name(), p);
  const std::uint32_t order = st & kOrderMask;
  RW_EXPECTS(bytes <= (std::size_t{1} << order), InvalidArgument,
             "buddy pool '{}': deallocate of {} with {} bytes, but its block holds {}", name(), p,
             bytes, std::size_t{1} << order);
  c->state[u] = static_cast<std::uint8_t>(order);  // held by the pool
  s.in_use -= std::size_t{1} << order;
  s.requested -= std::min(s.requested, bytes);
  ++s.deallocations;
  if (!config_.ordering) stream = nullptr;
  const std::size_t cap = config_.cache_blocks_per_order;
  if ((std::size_t{1} << order) <= config_.cache_max_block_bytes && s.cache_count[order] < cap) {
    s.cache[(order - min_order_) * cap + s.cache_count[order]++] = {id, stream};
    s.cached_bytes += std::size_t{1} << order;
  } else if (stream != nullptr) {
    defer(s, id, stream);
  } else {
    free_block(s, id);
  }
}

void BuddyResource::trim() {
  for (std::size_t i = 0; i <= shard_mask_; ++i) {
    Shard& s = shards_[i];
    std::lock_guard lock(s.lock);
    flush_cache(s);
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
      if (c->state[0] != (kFree | max_order_)) return false;
      lists.remove(s, c->id << unit_shift_, max_order_);
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

PoolStats BuddyResource::do_stats() const {
  PoolStats st;
  st.name = name();
  st.limit_bytes = config_.limit_bytes;
  for (std::size_t i = 0; i <= shard_mask_; ++i) {
    Shard& s = shards_[i];
    std::lock_guard lock(s.lock);
    st.bytes_in_use += s.in_use;
    st.requested_bytes += s.requested;
    st.high_water_bytes += s.high_water;
    st.free_bytes += s.free_list_bytes + s.cached_bytes;
    st.pending_bytes += s.pending_bytes;
    if (s.nonempty != 0)
      st.largest_free_block = std::max(st.largest_free_block, std::size_t{1} << (63 - std::countl_zero(s.nonempty)));
    for (std::uint32_t k = max_order_ + 1; k-- > min_order_;) {
      if (s.cache_count[k] != 0) {
        st.largest_free_block = std::max(st.largest_free_block, std::size_t{1} << k);
        break;
      }
    }
    st.allocations += s.allocations;
    st.deallocations += s.deallocations;
  }
  st.reserved_bytes = reserved_.load(std::memory_order_relaxed);
  st.upstream_allocations = upstream_allocations_.load(std::memory_order_relaxed);
  st.upstream_deallocations = upstream_deallocations_.load(std::memory_order_relaxed);
  return st;
}

}  // namespace redwood::memory
