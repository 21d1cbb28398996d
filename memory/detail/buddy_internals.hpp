#pragma once
// The buddy pool's internals, shared by its three source files: buddy.cpp (configuration,
// allocate/deallocate, statistics), buddy_thread_cache.cpp (the per-thread magazines) and
// buddy_free_lists.cpp (shards: free lists, split and coalesce, chunks, stream-ordered pending
// blocks). Not for use outside memory/.

#include "memory/buddy.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace redwood::memory {
namespace detail {

inline constexpr std::uint32_t kNil = 0xffffffffu;
inline constexpr std::uint8_t kOrderMask = 0x3f;
inline constexpr std::uint8_t kFree = 0x40;       // on a free list
inline constexpr std::uint8_t kAllocated = 0x80;  // held by a caller
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

/// Orders thread caches' registration and retirement against pool destruction.
std::mutex& cache_registry_mutex();

/// The caches of the calling thread, one per pool it used; the last one looked up is remembered
/// in two trivially constructed thread_locals (a plain %fs load on the fast path).
struct ThreadCaches {
  std::vector<std::unique_ptr<BuddyThreadCache>> caches;
  ~ThreadCaches();
};
extern constinit thread_local std::uint64_t tl_last_id;
extern constinit thread_local BuddyThreadCache* tl_last;
extern thread_local ThreadCaches tl_caches;

// Per thread, in-use changes reach the shared published_in_use_ (and the high water) once they
// add up to this much: the high water is exact to within this per thread.
inline constexpr std::int64_t kPublishBytes = 1 << 20;

}  // namespace detail

// The three source files use these unqualified.
using detail::BuddyChunk;
using detail::kAllocated;
using detail::kFree;
using detail::kNil;
using detail::kOrderMask;
using detail::kPublishBytes;

/// The chunks sorted by base address, bases in their own array so that a lookup's binary search
/// walks one or two cache lines, and every chunk is max_block_bytes long, so that the range check
/// needs no Chunk either.
struct BuddyResource::Index {
  std::vector<const std::byte*> bases;  // sorted
  std::vector<Chunk*> chunks;           // chunks[i] starts at bases[i]

  void insert(Chunk* c) {
    const auto at = std::upper_bound(bases.begin(), bases.end(), static_cast<const std::byte*>(c->base));
    chunks.insert(chunks.begin() + (at - bases.begin()), c);
    bases.insert(at, c->base);
  }
  void erase(const Chunk* c) {
    const auto at = std::find(chunks.begin(), chunks.end(), c);
    bases.erase(bases.begin() + (at - chunks.begin()));
    chunks.erase(at);
  }
};

}  // namespace redwood::memory
