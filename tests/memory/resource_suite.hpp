#pragma once
// The one test suite every MemoryResource passes (RMM's mr_ref_test.hpp does the same). A
// resource joins with a Factory type and one INSTANTIATE_TYPED_TEST_SUITE_P line; see
// resource_test.cpp (host) and tests/backends/cuda/memory_resource_test.cpp (GPU). The suite
// never touches the memory it gets (it may be device memory): it checks addresses and stats.
//
// A Factory provides:
//   static std::string unavailable();              // why it cannot run here ("" when it can)
//   static std::unique_ptr<MemoryResource> make(std::size_t limit);  // at most `limit` live
//   static void release_all(MemoryResource&);      // arena: reset(); buddy: trim(); else nothing
//   static constexpr std::size_t kMaxAlignment;    // largest alignment it supports
//   static constexpr bool kPooled;                 // reuses memory without upstream calls
//   static constexpr std::size_t kBlock;           // pooled: the size whose blocks coalesce
//   using Streams;  // stream-ordered resources: a(), b(), block_a(), unblock_a(); else void

#include "memory/resource.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <thread>
#include <type_traits>
#include <vector>

namespace redwood::memory::testing {

template <typename Factory>
class MemoryResourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = Factory::unavailable(); !why.empty()) GTEST_SKIP() << why;
  }
};

TYPED_TEST_SUITE_P(MemoryResourceTest);

TYPED_TEST_P(MemoryResourceTest, AlignsEveryPowerOfTwo) {
  auto mr = TypeParam::make(64 << 20);
  for (std::size_t a = 1; a <= TypeParam::kMaxAlignment; a *= 2) {
    for (std::size_t bytes : {std::size_t{1}, std::size_t{3}, a, a + 1, std::size_t{1000}}) {
      void* p = mr->allocate(bytes, a);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % a, 0u) << "alignment " << a << ", bytes " << bytes;
      mr->deallocate(p, bytes, a, nullptr);
    }
  }
  EXPECT_THROW(mr->allocate(64, 3), InvalidArgument);
  EXPECT_THROW(mr->allocate(64, 0), InvalidArgument);
}

TYPED_TEST_P(MemoryResourceTest, ZeroBytesIsNullAndFree) {
  auto mr = TypeParam::make(1 << 20);
  const PoolStats before = mr->stats();
  EXPECT_EQ(mr->allocate(0), nullptr);
  mr->deallocate(nullptr, 0);
  const PoolStats after = mr->stats();
  EXPECT_EQ(after.allocations, before.allocations);
  EXPECT_EQ(after.bytes_in_use, 0u);
  EXPECT_EQ(after.upstream_allocations, before.upstream_allocations);
}

TYPED_TEST_P(MemoryResourceTest, ReusesWithoutUpstreamCallsAndAccountsExactly) {
  auto mr = TypeParam::make(64 << 20);
  std::uint64_t upstream_after_first = 0;
  for (int round = 0; round < 4; ++round) {
    std::vector<std::pair<void*, std::size_t>> live;
    for (std::size_t i = 1; i <= 64; ++i) live.emplace_back(mr->allocate(i * 1000), i * 1000);
    const PoolStats during = mr->stats();
    EXPECT_GE(during.bytes_in_use, during.requested_bytes);
    EXPECT_EQ(during.requested_bytes, 64u * 65 / 2 * 1000);
    EXPECT_GE(during.high_water_bytes, during.bytes_in_use);
    for (auto [p, n] : live) mr->deallocate(p, n);
    TypeParam::release_all(*mr);
    const PoolStats after = mr->stats();
    EXPECT_EQ(after.bytes_in_use, 0u);
    EXPECT_EQ(after.requested_bytes, 0u);
    if (round == 0) {
      upstream_after_first = after.upstream_allocations;
    } else if (TypeParam::kPooled) {
      EXPECT_EQ(after.upstream_allocations, upstream_after_first) << "round " << round;
    }
  }
}

TYPED_TEST_P(MemoryResourceTest, CoalescesBackToOneBlock) {
  if (!TypeParam::kPooled) GTEST_SKIP() << "a pass-through resource has no blocks to coalesce";
  constexpr std::size_t kBlock = TypeParam::kBlock;
  auto mr = TypeParam::make(kBlock);
  // Fill the pool with small blocks of mixed sizes, free them in a shuffled order.
  std::vector<std::pair<void*, std::size_t>> live;
  std::mt19937 rng(7);
  std::size_t used = 0;
  while (used + 4096 <= kBlock) {
    const std::size_t n = std::size_t{256} << (rng() % 5);  // 256 B .. 4 KiB
    if (used + n > kBlock) break;
    live.emplace_back(mr->allocate(n), n);
    used += n;
  }
  std::shuffle(live.begin(), live.end(), rng);
  for (auto [p, n] : live) mr->deallocate(p, n);
  TypeParam::release_all(*mr);
  const PoolStats s = mr->stats();
  EXPECT_EQ(s.largest_free_block, kBlock);
  EXPECT_EQ(s.free_bytes, kBlock);
  EXPECT_DOUBLE_EQ(s.external_fragmentation(), 0.0);
  const std::uint64_t upstream = s.upstream_allocations;
  void* whole = mr->allocate(kBlock);
  EXPECT_EQ(mr->stats().upstream_allocations, upstream);
  mr->deallocate(whole, kBlock);
}

TYPED_TEST_P(MemoryResourceTest, ExhaustionNamesPoolLimitAndRequestAndLeaksNothing) {
  constexpr std::size_t kLimit = 1 << 20;
  auto mr = TypeParam::make(kLimit);
  std::vector<void*> live;
  for (int i = 0; i < 4; ++i) live.push_back(mr->allocate(kLimit / 4));
  const PoolStats before = mr->stats();
  try {
    mr->allocate(kLimit / 4);
    FAIL() << "a fifth quarter of the limit was granted";
  } catch (const OutOfMemory& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'" + mr->name() + "'"), std::string::npos) << what;
    EXPECT_NE(what.find("256 KiB requested"), std::string::npos) << what;
    EXPECT_NE(what.find("limit 1 MiB"), std::string::npos) << what;
    EXPECT_NE(what.find("1 MiB in use"), std::string::npos) << what;
  }
  EXPECT_EQ(mr->stats().bytes_in_use, before.bytes_in_use);
  for (void* p : live) mr->deallocate(p, kLimit / 4);
  TypeParam::release_all(*mr);
  EXPECT_EQ(mr->stats().bytes_in_use, 0u);
  void* again = mr->allocate(kLimit / 4);  // still usable after the failure
  mr->deallocate(again, kLimit / 4);
}

TYPED_TEST_P(MemoryResourceTest, ManyThreadsGetDisjointMemory) {
  auto mr = TypeParam::make(64 << 20);
  constexpr int kThreads = 8;
  std::vector<std::vector<std::pair<std::uintptr_t, std::size_t>>> kept(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<std::pair<void*, std::size_t>> live;
      for (int i = 0; i < 2000; ++i) {
        if (live.size() < 16 && (live.empty() || rng() % 4 != 0)) {
          const std::size_t n = 1 + rng() % 4096;
          live.emplace_back(mr->allocate(n), n);
        } else {
          const std::size_t k = rng() % live.size();
          mr->deallocate(live[k].first, live[k].second);
          live[k] = live.back();
          live.pop_back();
        }
      }
      for (auto [p, n] : live) kept[t].emplace_back(reinterpret_cast<std::uintptr_t>(p), n);
    });
  }
  for (auto& th : threads) th.join();
  std::vector<std::pair<std::uintptr_t, std::size_t>> all;
  for (auto& k : kept) all.insert(all.end(), k.begin(), k.end());
  std::sort(all.begin(), all.end());
  for (std::size_t i = 1; i < all.size(); ++i)
    ASSERT_LE(all[i - 1].first + all[i - 1].second, all[i].first) << "live blocks overlap";
  std::size_t requested = 0;
  for (auto [p, n] : all) requested += n;
  EXPECT_EQ(mr->stats().requested_bytes, requested);
  for (auto [p, n] : all) mr->deallocate(reinterpret_cast<void*>(p), n);
  TypeParam::release_all(*mr);
  EXPECT_EQ(mr->stats().bytes_in_use, 0u);
}

TYPED_TEST_P(MemoryResourceTest, CatchesDoubleFreeAndForeignPointers) {
  auto mr = TypeParam::make(1 << 20);
  mr->set_debug_checks(true);
  void* p = mr->allocate(512);
  mr->deallocate(p, 512);
  EXPECT_THROW(mr->deallocate(p, 512), InvalidArgument);
  int local = 0;
  EXPECT_THROW(mr->deallocate(&local, sizeof local), InvalidArgument);
  void* q = mr->allocate(512);
  EXPECT_THROW(mr->deallocate(q, 4096), InvalidArgument);  // wrong size
  mr->deallocate(q, 512);
}

TYPED_TEST_P(MemoryResourceTest, StreamOrderedReuseWaitsForTheFreeingStream) {
  if constexpr (std::is_void_v<typename TypeParam::Streams>) {
    GTEST_SKIP() << "not a stream-ordered resource";
  } else {
    auto mr = TypeParam::make(64 << 20);
    typename TypeParam::Streams streams;
    std::vector<void*> first;
    for (int i = 0; i < 64; ++i) first.push_back(mr->allocate(1024, kDefaultAlignment, streams.a()));
    streams.block_a();  // work queued on a from now on does not complete until unblock_a()
    for (void* p : first) mr->deallocate(p, 1024, streams.a());
    std::vector<void*> second;
    for (int i = 0; i < 256; ++i) {
      void* q = mr->allocate(1024, kDefaultAlignment, streams.b());
      EXPECT_EQ(std::find(first.begin(), first.end(), q), first.end()) << "reused before a's work completed";
      second.push_back(q);
    }
    // On the freeing stream itself the blocks may be reused at once: its order protects them.
    void* same = mr->allocate(1024, kDefaultAlignment, streams.a());
    mr->deallocate(same, 1024, streams.a());
    streams.unblock_a();
    TypeParam::release_all(*mr);  // waits for a's events; everything coalesces
    for (void* q : second) mr->deallocate(q, 1024, streams.b());
    TypeParam::release_all(*mr);
    const PoolStats s = mr->stats();
    EXPECT_EQ(s.bytes_in_use, 0u);
    EXPECT_EQ(s.pending_bytes, 0u);
    EXPECT_EQ(s.free_bytes, s.reserved_bytes);
  }
}

REGISTER_TYPED_TEST_SUITE_P(MemoryResourceTest, AlignsEveryPowerOfTwo, ZeroBytesIsNullAndFree,
                            ReusesWithoutUpstreamCallsAndAccountsExactly, CoalescesBackToOneBlock,
                            ExhaustionNamesPoolLimitAndRequestAndLeaksNothing,
                            ManyThreadsGetDisjointMemory, CatchesDoubleFreeAndForeignPointers,
                            StreamOrderedReuseWaitsForTheFreeingStream);

}  // namespace redwood::memory::testing
