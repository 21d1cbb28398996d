// What only the size-class pool does: the class a request takes, slots carved from chunks of
// the parent and reused last in first out, chunks given back when wholly free, requests passed
// to the parent as they are, its checks on frees, and several threads at once. The pool inside
// a tiered pool also runs the MemoryResource suite (resource_test.cpp).

#include "memory/buddy.hpp"
#include "memory/host_resource.hpp"
#include "memory/size_classes.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <random>
#include <set>
#include <thread>

namespace redwood::memory {
namespace {

constexpr std::size_t kMiB = 1 << 20;

/// A buddy pool of 4 MiB blocks over the host: the size-class pool's parent, whose statistics
/// show what the size-class pool took.
struct Parent {
  explicit Parent(std::size_t limit = 256 * kMiB)
      : pool("parent", host, BuddyConfig{.max_block_bytes = 8 * kMiB, .limit_bytes = limit, .chunk_alignment = 4096,
                                         .shards = 1, .cache_blocks_per_order = 0, .ordering = nullptr}) {}
  HostResource host{"host"};
  BuddyResource pool;
};

TEST(SizeClassPool, TakesTheSmallestClassThatFitsBetterThanAPowerOfTwo) {
  Parent parent;
  SizeClassResource seven("mid", parent.pool, SizeClassConfig{.max_chunk_bytes = 8 * kMiB});
  // An octave's four classes with cuts up to 7: 8/7, 4/3, 8/5 and 2 times 1 MiB (that one the parent's).
  const SlotClass a = seven.slot_class(kMiB + 1);
  EXPECT_EQ(a.slot_bytes, 8 * kMiB / 7 / 256 * 256);
  EXPECT_EQ(a.chunk_bytes, 8 * kMiB);
  EXPECT_EQ(a.slots, 7u);
  EXPECT_EQ(seven.slot_class(1200000).slot_bytes, 4 * kMiB / 3 / 256 * 256);
  EXPECT_EQ(seven.slot_class(1200000).slots, 3u);
  EXPECT_EQ(seven.slot_class(1500000).slot_bytes, 8 * kMiB / 5 / 256 * 256);
  EXPECT_EQ(seven.slot_class(1700000).slot_bytes, 0u);  // 2 MiB: the parent's block
  EXPECT_EQ(seven.slot_class(kMiB).slot_bytes, 0u);     // a power of two
  EXPECT_EQ(seven.slot_class(3 * kMiB).slot_bytes, 0u);  // its class would need a 16 MiB chunk
  EXPECT_EQ(seven.slot_class(1200000, 4096).slot_bytes, 0u);  // more than the slots' alignment

  SizeClassResource three("mid", parent.pool, SizeClassConfig{.max_chunk_bytes = 8 * kMiB, .max_slots_per_chunk = 3});
  EXPECT_EQ(three.slot_class(kMiB + 1).slot_bytes, 4 * kMiB / 3 / 256 * 256);
  EXPECT_EQ(three.slot_class(1500000).slot_bytes, 0u);

  // Every size: a slot fits it, is tighter than its power of two, a multiple of the alignment,
  // and its chunk holds its slots with at most 1/64 left over; with cuts up to 7 no request
  // rounds up by more than a quarter.
  SizeClassResource wide("wide", parent.pool, SizeClassConfig{.max_chunk_bytes = 64 * kMiB});
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    const std::size_t bytes = std::uniform_int_distribution<std::size_t>(64 << 10, 16 * kMiB)(rng);
    const SlotClass c = wide.slot_class(bytes);
    const std::size_t taken = c.slot_bytes != 0 ? c.slot_bytes : std::bit_ceil(bytes);
    ASSERT_GE(taken, bytes);
    ASSERT_LE(static_cast<double>(taken), 1.25 * static_cast<double>(bytes) + 256) << bytes;
    if (c.slot_bytes == 0) continue;
    ASSERT_LT(c.slot_bytes, std::bit_ceil(bytes));
    ASSERT_EQ(c.slot_bytes % 256, 0u);
    ASSERT_TRUE(std::has_single_bit(c.chunk_bytes));
    ASSERT_LE(c.slots * c.slot_bytes, c.chunk_bytes);
    ASSERT_LE(c.chunk_bytes - c.slots * c.slot_bytes, c.chunk_bytes / 64);
  }
}

TEST(SizeClassPool, SlotsAreAlignedDistinctAndReusedLastFreedFirst) {
  for (std::size_t alignment : {std::size_t{64}, std::size_t{256}, std::size_t{4096}}) {
    Parent parent;
    SizeClassResource pool("mid", parent.pool, SizeClassConfig{.max_chunk_bytes = 8 * kMiB, .alignment = alignment});
    std::set<std::uintptr_t> seen;
    std::vector<void*> live;
    for (int i = 0; i < 10; ++i) {
      void* p = pool.allocate(1200000, alignment);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % alignment, 0u);
      EXPECT_TRUE(seen.insert(reinterpret_cast<std::uintptr_t>(p)).second);
      std::memset(p, i, 1200000);  // slots do not overlap: each keeps its pattern
      live.push_back(p);
    }
    for (int i = 0; i < 10; ++i) EXPECT_EQ(static_cast<unsigned char*>(live[i])[1199999], i);
    const std::uint64_t chunks = pool.stats().upstream_allocations;
    pool.deallocate(live[3], 1200000, alignment, nullptr);
    pool.deallocate(live[7], 1200000, alignment, nullptr);
    EXPECT_EQ(pool.allocate(1200000, alignment), live[7]);
    EXPECT_EQ(pool.allocate(1250000, alignment), live[3]);  // the same class
    EXPECT_EQ(pool.stats().upstream_allocations, chunks);
    for (void* p : live) pool.deallocate(p, p == live[3] ? 1250000 : 1200000, alignment, nullptr);
  }
}

TEST(SizeClassPool, TakesAChunkOnlyWhenEverySlotIsInUseAndReportsItsSlots) {
  Parent parent;
  SizeClassResource pool("mid", parent.pool, SizeClassConfig{.max_chunk_bytes = 8 * kMiB});
  const std::size_t slot = pool.slot_class(1200000).slot_bytes;  // three in a 4 MiB chunk
  std::vector<void*> live;
  for (int i = 0; i < 3; ++i) live.push_back(pool.allocate(1200000));
  EXPECT_EQ(pool.stats().upstream_allocations, 1u);
  live.push_back(pool.allocate(1200000));
  PoolStats st = pool.stats();
  EXPECT_EQ(st.upstream_allocations, 2u);
  EXPECT_EQ(st.reserved_bytes, 8 * kMiB);
  EXPECT_EQ(st.bytes_in_use, 4 * slot);
  EXPECT_EQ(st.requested_bytes, 4u * 1200000);
  EXPECT_EQ(st.high_water_bytes, 4 * slot);
  EXPECT_EQ(st.free_bytes, 2 * slot);
  EXPECT_EQ(st.largest_free_block, slot);
  EXPECT_EQ(st.allocations, 4u);
  EXPECT_EQ(parent.pool.stats().bytes_in_use, 8 * kMiB);  // the chunks, in use in the parent
  const std::vector<FreeBlocks> free = pool.free_slots();
  ASSERT_EQ(free.size(), 1u);
  EXPECT_EQ(free[0].block_bytes, slot);
  EXPECT_EQ(free[0].count, 2u);
  EXPECT_EQ(pool.free_slots_for(1300000).count, 2u);
  EXPECT_EQ(pool.free_slots_for(1500000).count, 0u);
  for (void* p : live) pool.deallocate(p, 1200000);
  st = pool.stats();
  EXPECT_EQ(st.bytes_in_use, 0u);
  EXPECT_EQ(st.requested_bytes, 0u);
  EXPECT_EQ(st.deallocations, 4u);
  EXPECT_EQ(st.free_bytes, 6 * slot);
}

TEST(SizeClassPool, GivesWhollyFreeChunksBackToTheParent) {
  Parent parent;
  SizeClassResource pool("mid", parent.pool, SizeClassConfig{.max_chunk_bytes = 8 * kMiB});
  std::vector<void*> a, b;  // two chunks of three slots, and one of five
  for (int i = 0; i < 6; ++i) a.push_back(pool.allocate(1200000));
  for (int i = 0; i < 2; ++i) b.push_back(pool.allocate(1500000));
  // One slot freed in each 4 MiB chunk: neither is wholly free.
  pool.deallocate(a[0], 1200000);
  pool.deallocate(a[5], 1200000);
  EXPECT_EQ(pool.release_free_chunks(), 0u);
  for (void* p : b) pool.deallocate(p, 1500000);
  EXPECT_EQ(pool.release_free_chunks(), 1u);  // the 8 MiB chunk of the 1.6 MiB class
  EXPECT_EQ(pool.stats().reserved_bytes, 8 * kMiB);
  for (int i = 1; i < 5; ++i) pool.deallocate(a[i], 1200000);
  EXPECT_EQ(pool.release_free_chunks(), 2u);
  const PoolStats st = pool.stats();
  EXPECT_EQ(st.reserved_bytes, 0u);
  EXPECT_EQ(st.free_bytes, 0u);
  EXPECT_EQ(st.upstream_deallocations, 3u);
  EXPECT_TRUE(pool.free_slots().empty());
  parent.pool.trim();
  EXPECT_EQ(parent.pool.stats().bytes_in_use, 0u);
  // The slots of the chunks given back are gone: the next request takes a chunk.
  void* again = pool.allocate(1200000);
  EXPECT_EQ(pool.stats().upstream_allocations, 4u);
  pool.deallocate(again, 1200000);
}

TEST(SizeClassPool, PassesWhatNoClassFitsBetterToTheParentAsItIs) {
  Parent parent;
  SizeClassResource pool("mid", parent.pool, SizeClassConfig{.max_chunk_bytes = 8 * kMiB});
  void* p = pool.allocate(1900000);  // a 2 MiB block of the parent
  void* q = pool.allocate(kMiB);
  EXPECT_EQ(parent.pool.stats().bytes_in_use, 3 * kMiB);
  PoolStats st = pool.stats();
  EXPECT_EQ(st.upstream_allocations, 2u);
  EXPECT_EQ(st.bytes_in_use, 1900000 + kMiB);
  EXPECT_EQ(st.reserved_bytes, st.bytes_in_use);
  EXPECT_EQ(st.free_bytes, 0u);
  pool.deallocate(p, 1900000);
  pool.deallocate(q, kMiB);
  st = pool.stats();
  EXPECT_EQ(st.bytes_in_use, 0u);
  EXPECT_EQ(st.reserved_bytes, 0u);
  EXPECT_EQ(st.upstream_deallocations, 2u);
  EXPECT_EQ(parent.pool.stats().bytes_in_use, 0u);
}

TEST(SizeClassPool, AParentOutOfMemoryGetsTheWhollyFreeChunksFirst) {
  Parent parent(8 * kMiB);  // room for two 4 MiB chunks
  SizeClassResource pool("mid", parent.pool, SizeClassConfig{.max_chunk_bytes = 4 * kMiB});
  std::vector<void*> a;
  for (int i = 0; i < 6; ++i) a.push_back(pool.allocate(1200000));  // 4/3 MiB slots: all 8 MiB
  for (void* p : a) pool.deallocate(p, 1200000);                      // free, kept
  void* b = pool.allocate(700000);  // a 4/5 MiB class: its chunk needs the others given back
  const PoolStats st = pool.stats();
  EXPECT_EQ(st.reserved_bytes, 4 * kMiB);
  EXPECT_EQ(st.upstream_deallocations, 2u);
  std::vector<void*> more;
  for (int i = 0; i < 3; ++i) more.push_back(pool.allocate(1200000));  // the other 4 MiB
  EXPECT_THROW(pool.allocate(1200000), OutOfMemory);
  for (void* p : more) pool.deallocate(p, 1200000);
  pool.deallocate(b, 700000);
}

TEST(SizeClassPool, RefusesBadConfigsAndBadFrees) {
  Parent parent;
  EXPECT_THROW(SizeClassResource("m", parent.pool, SizeClassConfig{.max_chunk_bytes = 3 * kMiB}), InvalidArgument);
  EXPECT_THROW(SizeClassResource("m", parent.pool, SizeClassConfig{.max_slots_per_chunk = 2}), InvalidArgument);
  EXPECT_THROW(SizeClassResource("m", parent.pool, SizeClassConfig{.max_slots_per_chunk = 64}), InvalidArgument);
  EXPECT_THROW(SizeClassResource("m", parent.pool, SizeClassConfig{.alignment = 32}), InvalidArgument);
  EXPECT_THROW(SizeClassResource("m", parent.pool, SizeClassConfig{.alignment = 1000}), InvalidArgument);

  // The pool's own checks, without MemoryResource's tracking of live pointers.
  SizeClassResource pool("mid", parent.pool, SizeClassConfig{.max_chunk_bytes = 8 * kMiB});
  pool.set_debug_checks(false);
  auto* p = static_cast<std::byte*>(pool.allocate(1200000));
  void* q = pool.allocate(1200000);
  std::byte foreign[64];
  EXPECT_THROW(pool.deallocate(foreign, 1200000), InvalidArgument);
  EXPECT_THROW(pool.deallocate(p + 256, 1200000), InvalidArgument);    // inside a slot
  EXPECT_THROW(pool.deallocate(p, 1500000), InvalidArgument);          // another class's size
  pool.deallocate(p, 1200000);
  EXPECT_THROW(pool.deallocate(p, 1200000), InvalidArgument);          // twice
  EXPECT_EQ(pool.allocate(1200000), p);                                // and still handed out once
  EXPECT_NE(pool.allocate(1200000), p);
  const PoolStats st = pool.stats();
  EXPECT_EQ(st.allocations - st.deallocations, 3u);
  (void)q;
}

TEST(SizeClassPool, ThreadsShareItWithoutHandingASlotOutTwice) {
  Parent parent;
  SizeClassResource pool("mid", parent.pool, SizeClassConfig{.max_chunk_bytes = 8 * kMiB});
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&pool, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<std::pair<unsigned char*, std::size_t>> live;
      for (int i = 0; i < 3000; ++i) {
        if (live.size() < 6 && (live.empty() || rng() % 3 != 0)) {
          const std::size_t bytes = std::uniform_int_distribution<std::size_t>(300 << 10, 3 * kMiB)(rng);
          auto* p = static_cast<unsigned char*>(pool.allocate(bytes));
          std::memset(p, t + 1, 64);  // the first and last bytes mark the owner
          std::memset(p + bytes - 64, t + 1, 64);
          live.emplace_back(p, bytes);
        } else {
          const std::size_t k = rng() % live.size();
          auto [p, bytes] = live[k];
          ASSERT_EQ(p[0], t + 1);
          ASSERT_EQ(p[bytes - 1], t + 1);
          pool.deallocate(p, bytes);
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        }
      }
      for (auto [p, bytes] : live) pool.deallocate(p, bytes);
    });
  }
  for (auto& th : threads) th.join();
  PoolStats st = pool.stats();
  EXPECT_EQ(st.bytes_in_use, 0u);
  EXPECT_EQ(st.requested_bytes, 0u);
  EXPECT_EQ(st.allocations, st.deallocations);
  pool.release_free_chunks();
  st = pool.stats();
  EXPECT_EQ(st.reserved_bytes, 0u);
  parent.pool.trim();
  EXPECT_EQ(parent.pool.stats().bytes_in_use, 0u);
}

}  // namespace
}  // namespace redwood::memory
