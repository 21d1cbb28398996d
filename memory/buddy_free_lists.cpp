// The buddy pool's shards: per-order free lists, split and coalesce, growth by chunks from the
// upstream, the chunk index, and blocks freed on a stream waiting for its event. Every function
// here but find_chunk and address_of runs with the shard's lock held (or takes it).

#include "memory/detail/buddy_internals.hpp"

namespace redwood::memory {

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
  const std::byte* const* first = index->bases.data();
  std::size_t n = index->bases.size();
  if (n == 0 || b < *first) return nullptr;
  while (n > 1) {
    const std::size_t half = n / 2;
    first = first[half] <= b ? first + half : first;
    n -= half;
  }
  const std::size_t i = static_cast<std::size_t>(first - index->bases.data());
  return static_cast<std::size_t>(b - *first) < config_.max_block_bytes ? index->chunks[i] : nullptr;
}

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
  next->insert(c);
  old_indexes_.emplace_back(index_.exchange(next.release(), std::memory_order_acq_rel));
  s.chunks.push_back(c);
  Lists lists{chunks_by_id_, unit_shift_, (1u << unit_shift_) - 1};
  lists.push(s, c->id << unit_shift_, max_order_);
  return true;
}

void BuddyResource::defer(Shard& s, std::uint32_t id, StreamOrdering::Event event) {
  s.pending.push_back({id, event});
  const Chunk* c = chunks_by_id_[id >> unit_shift_].load(std::memory_order_relaxed);
  s.pending_bytes += std::size_t{1} << (detail::load_state(c, id & ((1u << unit_shift_) - 1)) & kOrderMask);
}

/// Frees the pending blocks whose event has completed (all of them, waiting, with `wait`). The
/// blocks that share an event are adjacent in the list (they were deferred together, and an
/// event is reused only once released), so each event is queried and released once.
void BuddyResource::poll_pending(Shard& s, bool wait) {
  std::size_t kept = 0;
  for (std::size_t i = 0, end; i < s.pending.size(); i = end) {
    const StreamOrdering::Event event = s.pending[i].event;
    for (end = i + 1; end < s.pending.size() && s.pending[end].event == event;) ++end;
    if (wait) config_.ordering->wait(event);
    if (wait || config_.ordering->completed(event)) {
      config_.ordering->release(event);
      for (std::size_t j = i; j < end; ++j) {
        const std::uint32_t id = s.pending[j].id;
        const Chunk* c = chunks_by_id_[id >> unit_shift_].load(std::memory_order_relaxed);
        s.pending_bytes -= std::size_t{1} << (detail::load_state(c, id & ((1u << unit_shift_) - 1)) & kOrderMask);
        free_block(s, id);
      }
    } else {
      for (std::size_t j = i; j < end; ++j) s.pending[kept++] = s.pending[j];
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
      next->erase(c);
      old_indexes_.emplace_back(index_.exchange(next.release(), std::memory_order_acq_rel));
      upstream_.deallocate(c->base, c->bytes, config_.chunk_alignment, nullptr);
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

}  // namespace redwood::memory
