// The buddy pool's thread caches (see buddy.hpp, "Threads"): per pool and thread, a magazine of
// blocks per cached order, refilled from and flushed to the shards in batches under one lock.

#include "memory/detail/buddy_internals.hpp"

#include "core/log.hpp"

namespace redwood::memory {
namespace detail {

std::mutex& cache_registry_mutex() {
  static auto* m = new std::mutex;  // never destroyed: thread exits may come after static destruction
  return *m;
}

thread_local ThreadCaches tl_caches;

}  // namespace detail

detail::ThreadCaches::~ThreadCaches() {
  std::lock_guard lock(cache_registry_mutex());
  for (auto& c : caches) {
    if (c->owner != nullptr) c->owner->retire(*c);
  }
  tl_last_id = 0;
  tl_last = nullptr;
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
  std::size_t lost = 0, bad = 0;
  // Blocks freed on one stream share one event per shard (the event covers all the work queued
  // on the stream so far, so it is as good for each of them): at 16 blocks a magazine, one
  // cudaEventRecord a flush instead of one a block.
  StreamOrdering::Event event = nullptr;
  Stream event_stream = nullptr;
  for (std::uint32_t i = 0; i < count; ++i) {
    Chunk* c = chunks_by_id_[e[i].id >> unit_shift_].load(std::memory_order_relaxed);
    Shard* s = &shards_[c->shard];
    if (s != locked) {
      if (locked) locked->lock.unlock();
      s->lock.lock();
      locked = s;
      event = nullptr;
    }
    // A cached block is held (refilled, never handed out) or still marked allocated (freed into
    // the cache, see do_deallocate). Anything else is a block freed twice by two threads, or
    // freed with a wrong size: it is left alone rather than corrupt the free lists.
    const std::uint32_t u = e[i].id & ((1u << unit_shift_) - 1);
    if ((detail::load_state(c, u) & ~kAllocated) != order) {
      tc.in_use.add(std::uint64_t{1} << order);  // the bad free took it off; the first free did already
      if (++bad == 1)
        redwood::log().error("buddy pool '{}': a block of {} at {} was freed twice or with a wrong size; it is dropped",
                             name(), format_bytes(std::size_t{1} << order), address_of(e[i].id));
      continue;
    }
    detail::store_state(c, u, static_cast<std::uint8_t>(order));  // held by the pool
    if (e[i].stream == nullptr) {
      free_block(*s, e[i].id);
      continue;
    }
    try {
      if (event == nullptr || event_stream != e[i].stream) {
        event = config_.ordering->record(e[i].stream);
        event_stream = e[i].stream;
      }
      defer(*s, e[i].id, event);
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

}  // namespace redwood::memory
