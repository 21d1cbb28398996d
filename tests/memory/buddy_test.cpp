// What only the buddy pool does: block rounding and internal waste, split and coalesce, growth
// by chunks up to the limit, oversize requests, and the fragmentation statistics.

#include "memory/buddy.hpp"
#include "memory/host_resource.hpp"

#include <gtest/gtest.h>

#include <thread>

namespace redwood::memory {
namespace {

BuddyConfig small_config(std::size_t limit = 1 << 20) {
  return BuddyConfig{.max_block_bytes = 256 << 10, .limit_bytes = limit, .chunk_alignment = 4096,
                     .shards = 1, .ordering = nullptr};
}

TEST(BuddyPool, RoundsToPowerOfTwoBlocksAndReportsInternalWaste) {
  HostResource upstream;
  BuddyResource pool("frames", upstream, small_config());
  void* a = pool.allocate(1);      // 256 B block
  void* b = pool.allocate(3000);   // 4 KiB block
  PoolStats s = pool.stats();
  EXPECT_EQ(s.bytes_in_use, 256u + 4096u);
  EXPECT_EQ(s.requested_bytes, 3001u);
  EXPECT_NEAR(s.internal_waste(), 1.0 - 3001.0 / 4352.0, 1e-12);
  EXPECT_EQ(s.reserved_bytes, 256u << 10);
  EXPECT_EQ(s.upstream_allocations, 1u);
  EXPECT_EQ(s.free_bytes + s.bytes_in_use, s.reserved_bytes);
  pool.deallocate(a, 1);
  pool.deallocate(b, 3000);
  pool.trim();
  s = pool.stats();
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_EQ(s.high_water_bytes, 256u + 4096u);
  EXPECT_EQ(s.largest_free_block, 256u << 10);
}

TEST(BuddyPool, BuddiesAreAdjacentAndCoalesce) {
  HostResource upstream;
  BuddyConfig c = small_config(256 << 10);
  c.cache_blocks_per_order = 0;  // every free coalesces at once
  BuddyResource pool("p", upstream, c);
  auto* a = static_cast<std::byte*>(pool.allocate(128 << 10));
  auto* b = static_cast<std::byte*>(pool.allocate(128 << 10));
  EXPECT_EQ(std::abs(a - b), 128 << 10);
  EXPECT_THROW(pool.allocate(256), OutOfMemory);
  pool.deallocate(a, 128 << 10);
  EXPECT_EQ(pool.stats().largest_free_block, 128u << 10);
  pool.deallocate(b, 128 << 10);
  EXPECT_EQ(pool.stats().largest_free_block, 256u << 10);
}

TEST(BuddyPool, FragmentationIsLargestFreeAgainstAllFree) {
  HostResource upstream;
  BuddyConfig c = small_config(256 << 10);
  c.cache_blocks_per_order = 0;
  BuddyResource pool("p", upstream, c);
  std::vector<void*> blocks;
  for (int i = 0; i < 64; ++i) blocks.push_back(pool.allocate(4096));
  for (int i = 0; i < 64; i += 2) pool.deallocate(blocks[i], 4096);  // every other block: no merges
  PoolStats s = pool.stats();
  EXPECT_EQ(s.free_bytes, 32u * 4096);
  EXPECT_EQ(s.largest_free_block, 4096u);
  EXPECT_NEAR(s.external_fragmentation(), 1.0 - 1.0 / 32, 1e-12);
  for (int i = 1; i < 64; i += 2) pool.deallocate(blocks[i], 4096);
  EXPECT_DOUBLE_EQ(pool.stats().external_fragmentation(), 0.0);
}

TEST(BuddyPool, GrowsByChunksUpToTheLimitAndGivesFreeChunksBack) {
  HostResource upstream;
  BuddyResource pool("p", upstream, small_config(1 << 20));
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(pool.allocate(200 << 10));
  EXPECT_EQ(pool.stats().upstream_allocations, 4u);
  EXPECT_EQ(upstream.stats().bytes_in_use, 1u << 20);
  for (void* p : blocks) pool.deallocate(p, 200 << 10);
  pool.trim();
  EXPECT_EQ(pool.release_free_chunks(), 4u);
  EXPECT_EQ(upstream.stats().bytes_in_use, 0u);
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
  void* again = pool.allocate(100);  // grows again after giving chunks back
  EXPECT_EQ(pool.stats().upstream_allocations, 5u);
  pool.deallocate(again, 100);
}

TEST(BuddyPool, OversizeRequestSaysWhichLimitItHits) {
  HostResource upstream;
  BuddyResource pool("crops", upstream, small_config());
  try {
    pool.allocate(300 << 10);
    FAIL();
  } catch (const OutOfMemory& e) {
    EXPECT_STREQ(e.what(), "buddy pool 'crops' is out of memory: 300 KiB requested, largest block "
                           "256 KiB (max_block_bytes), limit 1 MiB");
  }
  EXPECT_EQ(pool.stats().upstream_allocations, 0u);
}

TEST(BuddyPool, UpstreamFailureIsThePoolsOutOfMemory) {
  HostResource upstream("host", 512 << 10);  // the upstream runs out before the pool's limit
  BuddyResource pool("p", upstream, small_config(1 << 20));
  void* a = pool.allocate(256 << 10);
  void* b = pool.allocate(256 << 10);
  EXPECT_THROW(pool.allocate(256 << 10), OutOfMemory);
  EXPECT_EQ(pool.stats().reserved_bytes, 512u << 10);
  pool.deallocate(a, 256 << 10);
  pool.deallocate(b, 256 << 10);
}

TEST(BuddyPool, DetectsDoubleFreeAndForeignPointersEvenWithoutDebugChecks) {
  HostResource upstream;
  BuddyResource pool("p", upstream, small_config());
  pool.set_debug_checks(false);
  void* p = pool.allocate(1000);
  pool.deallocate(p, 1000);
  EXPECT_THROW(pool.deallocate(p, 1000), InvalidArgument);
  EXPECT_THROW(pool.deallocate(static_cast<std::byte*>(p) + 16, 16), InvalidArgument);
  int local = 0;
  EXPECT_THROW(pool.deallocate(&local, 4), InvalidArgument);
}

TEST(BuddyPool, FreesTheBlockItsAlignmentAskedFor) {
  HostResource upstream;
  BuddyResource pool("p", upstream, small_config());
  pool.set_debug_checks(true);
  void* p = pool.allocate(100, 4096);  // a 4 KiB block: the alignment, not the size, sets it
  EXPECT_EQ(pool.stats().bytes_in_use, 4096u);
  EXPECT_THROW(pool.deallocate(p, 100), InvalidArgument);  // the default alignment: wrong block
  pool.deallocate(p, 100, 4096, nullptr);
  pool.trim();
  const PoolStats s = pool.stats();
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_EQ(s.largest_free_block, s.reserved_bytes);  // coalesced back into the whole chunk
}

TEST(BuddyPool, WithoutDebugChecksAWrongSizeThatFitsNoBlockIsRefused) {
  HostResource upstream;
  BuddyResource pool("p", upstream, small_config());
  pool.set_debug_checks(false);
  void* a = pool.allocate(256);
  void* b = pool.allocate(256);  // the buddy of a: offset 256, not a 4 KiB boundary
  void* far = static_cast<std::byte*>(a) < static_cast<std::byte*>(b) ? b : a;
  EXPECT_THROW(pool.deallocate(far, 4000), InvalidArgument);
  pool.deallocate(a, 256);
  pool.deallocate(b, 256);
}

TEST(BuddyPool, ADoubleFreeFromTwoThreadsIsDroppedNotHandedOutTwice) {
  HostResource upstream;
  BuddyResource pool("p", upstream, small_config());
  pool.set_debug_checks(false);  // the base class's tracking would catch it first
  void* p = pool.allocate(1000);
  std::thread([&] { pool.deallocate(p, 1000); }).join();  // the thread's exit flushes its cache
  std::thread([&] { pool.deallocate(p, 1000); }).join();  // a second free: logged and dropped
  pool.trim();
  PoolStats s = pool.stats();
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_EQ(s.free_bytes, s.reserved_bytes);
  void* x = pool.allocate(1000);
  void* y = pool.allocate(1000);
  EXPECT_NE(x, y);
  pool.deallocate(x, 1000);
  pool.deallocate(y, 1000);
}

TEST(BuddyPool, RejectsBadConfigs) {
  HostResource upstream;
  BuddyConfig c = small_config();
  c.max_block_bytes = 3000;
  EXPECT_THROW(BuddyResource("p", upstream, c), InvalidArgument);
  c = small_config();
  c.limit_bytes = 1000;
  EXPECT_THROW(BuddyResource("p", upstream, c), InvalidArgument);
  c = small_config();
  c.shards = 3;
  EXPECT_THROW(BuddyResource("p", upstream, c), InvalidArgument);
  BuddyResource ok("p", upstream, small_config());
  EXPECT_THROW(ok.allocate(64, 8192), InvalidArgument);  // beyond chunk_alignment
}

TEST(BuddyPool, ThreadCacheReusesTheNewestBlockOfAnOrder) {
  HostResource upstream;
  BuddyResource pool("p", upstream, small_config());
  void* a = pool.allocate(3000);
  pool.deallocate(a, 3000);
  EXPECT_EQ(pool.allocate(4000), a);  // same order (4 KiB): the block just freed, LIFO
  pool.deallocate(a, 4000);
  const PoolStats s = pool.stats();
  EXPECT_EQ(s.allocations, 2u);
  EXPECT_EQ(s.deallocations, 2u);
  EXPECT_EQ(s.free_bytes + s.bytes_in_use, s.reserved_bytes);
}

TEST(BuddyPool, StatsStayExactWhenThreadsFreeEachOthersBlocks) {
  HostResource upstream;
  BuddyResource pool("p", upstream, BuddyConfig{.max_block_bytes = 256 << 10, .limit_bytes = 64 << 20,
                                                .chunk_alignment = 4096, .shards = 4, .ordering = nullptr});
  constexpr int kBlocks = 3000;
  std::vector<std::pair<void*, std::size_t>> made(kBlocks);
  std::thread producer([&] {
    for (int i = 0; i < kBlocks; ++i) {
      const std::size_t n = 1 + static_cast<std::size_t>(i * 37 % 5000);
      made[i] = {pool.allocate(n), n};
    }
  });
  producer.join();  // its cache is flushed as it exits
  PoolStats s = pool.stats();
  EXPECT_EQ(s.allocations, static_cast<std::uint64_t>(kBlocks));
  std::size_t requested = 0;
  for (auto [p, n] : made) requested += n;
  EXPECT_EQ(s.requested_bytes, requested);
  const std::size_t in_use = s.bytes_in_use;
  EXPECT_GE(s.high_water_bytes, in_use);
  std::thread consumer([&] {
    for (auto [p, n] : made) pool.deallocate(p, n);
    const PoolStats mid = pool.stats();  // the consumer's own counters went below zero
    EXPECT_EQ(mid.bytes_in_use, 0u);
    EXPECT_EQ(mid.requested_bytes, 0u);
  });
  consumer.join();
  pool.trim();
  s = pool.stats();
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_EQ(s.deallocations, static_cast<std::uint64_t>(kBlocks));
  EXPECT_EQ(s.free_bytes, s.reserved_bytes);
  EXPECT_EQ(s.largest_free_block, 256u << 10);  // the exited threads' caches coalesced
  EXPECT_GE(s.high_water_bytes, in_use);
  EXPECT_LE(s.high_water_bytes, in_use + (1u << 20));  // published in 1 MiB steps per thread
}

TEST(BuddyPool, ExhaustionEmptiesTheThreadCacheBeforeFailing) {
  HostResource upstream;
  BuddyResource pool("p", upstream, small_config(256 << 10));
  // Fill the one chunk with 1 KiB blocks and free them: they sit in this thread's cache and on
  // the free lists, uncoalesced; a whole-chunk request must still succeed.
  std::vector<void*> blocks;
  for (int i = 0; i < 256; ++i) blocks.push_back(pool.allocate(1024));
  for (void* p : blocks) pool.deallocate(p, 1024);
  void* whole = pool.allocate(256 << 10);
  EXPECT_NE(whole, nullptr);
  EXPECT_EQ(pool.stats().upstream_allocations, 1u);
  pool.deallocate(whole, 256 << 10);
}

TEST(BuddyPool, AThreadOutlivesAPoolItUsed) {
  HostResource upstream;
  std::thread t([&] {
    for (int round = 0; round < 3; ++round) {
      BuddyResource pool("short-lived", upstream, small_config());
      void* p = pool.allocate(1000);
      pool.deallocate(p, 1000);  // stays in this thread's cache as the pool goes
    }
    BuddyResource last("last", upstream, small_config());
    void* p = last.allocate(1000);
    last.deallocate(p, 1000);
  });
  t.join();
  EXPECT_EQ(upstream.stats().bytes_in_use, 0u);
}

TEST(FormatBytes, PicksTheLargestWholeUnit) {
  EXPECT_EQ(format_bytes(12), "12 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(300ull << 20), "300 MiB");
}

}  // namespace
}  // namespace redwood::memory
