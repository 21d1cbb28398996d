// What only the buddy pool does: block rounding and internal waste, split and coalesce, growth
// by chunks up to the limit, oversize requests, and the fragmentation statistics.

#include "memory/buddy.hpp"
#include "memory/host_resource.hpp"

#include <gtest/gtest.h>

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

TEST(FormatBytes, PicksTheLargestWholeUnit) {
  EXPECT_EQ(format_bytes(12), "12 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(300ull << 20), "300 MiB");
}

}  // namespace
}  // namespace redwood::memory
