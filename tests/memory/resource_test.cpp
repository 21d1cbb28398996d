// The MemoryResource suite (resource_suite.hpp) on every host resource: the host upstream, the
// static arena, the buddy pool with and without stream ordering (a fake event source here; CUDA
// events in tests/backends/cuda/memory_resource_test.cpp), and tiered pools with buddy tiers and
// with a size-class tier.

#include "memory/arena.hpp"
#include "memory/buddy.hpp"
#include "memory/tiered.hpp"
#include "memory/host_resource.hpp"
#include "memory/resource_suite.hpp"
#include "memory/tracing_resource.hpp"

#include <algorithm>
#include <bit>
#include <map>
#include <set>

namespace redwood::memory::testing {
namespace {

struct HostFactory {
  static std::string unavailable() { return {}; }
  static std::unique_ptr<MemoryResource> make(std::size_t limit) {
    return std::make_unique<HostResource>("host", limit);
  }
  static void release_all(MemoryResource&) {}
  static constexpr std::size_t kMaxAlignment = 4096;
  static constexpr bool kPooled = false;
  static constexpr std::size_t kBlock = 0;
  using Streams = void;
};

/// An arena together with the upstream it draws from.
class OwningArena : public MemoryResource {
 public:
  explicit OwningArena(std::size_t capacity) : MemoryResource("weights"), arena_("weights", upstream_, capacity) {}
  std::string_view kind() const override { return arena_.kind(); }
  ArenaResource& arena() { return arena_; }

 private:
  void* do_allocate(std::size_t b, std::size_t a, Stream s) override { return arena_.allocate(b, a, s); }
  void do_deallocate(void* p, std::size_t b, std::size_t alignment, Stream s) override { arena_.deallocate(p, b, alignment, s); }
  PoolStats do_stats() const override { return arena_.stats(); }
  HostResource upstream_{"host"};
  ArenaResource arena_;
};

struct ArenaFactory {
  static std::string unavailable() { return {}; }
  static std::unique_ptr<MemoryResource> make(std::size_t limit) { return std::make_unique<OwningArena>(limit); }
  static void release_all(MemoryResource& mr) { static_cast<OwningArena&>(mr).arena().reset(); }
  static constexpr std::size_t kMaxAlignment = 4096;
  static constexpr bool kPooled = true;
  static constexpr std::size_t kBlock = 256 << 10;
  using Streams = void;
};

/// Streams are small integers; an event completes unless its stream was blocked when recorded
/// and is still blocked.
class FakeOrdering final : public StreamOrdering {
 public:
  struct FakeEvent {
    Stream stream;
    std::uint64_t epoch;
  };
  Event record(Stream s) override {
    std::lock_guard lock(mutex_);
    ++recorded_;
    events_.push_back(std::make_unique<FakeEvent>(FakeEvent{s, blocked_[s]}));
    return events_.back().get();
  }
  bool completed(Event e) override {
    std::lock_guard lock(mutex_);
    auto* f = static_cast<FakeEvent*>(e);
    return f->epoch == 0 || blocked_[f->stream] != f->epoch;
  }
  void wait(Event e) override {
    if (!completed(e)) throw Error("FakeOrdering: wait() on a blocked stream would hang");
  }
  void release(Event e) override {
    std::lock_guard lock(mutex_);
    if (!released_.insert(e).second) ++double_releases_;
  }
  std::size_t recorded() {
    std::lock_guard lock(mutex_);
    return recorded_;
  }
  std::size_t released() {
    std::lock_guard lock(mutex_);
    return released_.size();
  }
  std::size_t double_releases() {
    std::lock_guard lock(mutex_);
    return double_releases_;
  }
  void block(Stream s) {
    std::lock_guard lock(mutex_);
    blocked_[s] = ++epoch_;
  }
  void unblock(Stream s) {
    std::lock_guard lock(mutex_);
    blocked_[s] = 0;
  }

 private:
  std::mutex mutex_;
  std::map<Stream, std::uint64_t> blocked_;
  std::uint64_t epoch_ = 0;
  std::vector<std::unique_ptr<FakeEvent>> events_;  // never reused, so released_ can tell them apart
  std::set<Event> released_;
  std::size_t recorded_ = 0, double_releases_ = 0;
};

std::shared_ptr<FakeOrdering>& fake_ordering() {
  static auto ordering = std::make_shared<FakeOrdering>();
  return ordering;
}

class OwningBuddy : public MemoryResource {
 public:
  OwningBuddy(std::size_t limit, std::shared_ptr<StreamOrdering> ordering)
      : MemoryResource("host"),
        pool_("host", upstream_,
              BuddyConfig{.max_block_bytes = 256 << 10,
                          .limit_bytes = std::max<std::size_t>(limit, 256 << 10),
                          .chunk_alignment = 4096,
                          .shards = 4,
                          .ordering = std::move(ordering)}) {}
  std::string_view kind() const override { return pool_.kind(); }
  BuddyResource& pool() { return pool_; }

 private:
  void* do_allocate(std::size_t b, std::size_t a, Stream s) override { return pool_.allocate(b, a, s); }
  void do_deallocate(void* p, std::size_t b, std::size_t alignment, Stream s) override { pool_.deallocate(p, b, alignment, s); }
  PoolStats do_stats() const override { return pool_.stats(); }
  HostResource upstream_{"host upstream"};
  BuddyResource pool_;
};

struct BuddyFactory {
  static std::string unavailable() { return {}; }
  static std::unique_ptr<MemoryResource> make(std::size_t limit) { return std::make_unique<OwningBuddy>(limit, nullptr); }
  static void release_all(MemoryResource& mr) { static_cast<OwningBuddy&>(mr).pool().trim(); }
  static constexpr std::size_t kMaxAlignment = 4096;
  static constexpr bool kPooled = true;
  static constexpr std::size_t kBlock = 256 << 10;
  using Streams = void;
};

// A tiered pool (memory/tiered.hpp): by default requests up to 4 KiB in 64 KiB chunks, up to
// 32 KiB in 256 KiB chunks, the rest in 1 MiB blocks of the base.
class OwningTiered : public MemoryResource {
 public:
  explicit OwningTiered(std::size_t limit,
                        std::vector<TierConfig> tiers = {TierConfig{4 << 10, 64 << 10}, TierConfig{32 << 10, 256 << 10}})
      : MemoryResource("host"),
        pool_("host", upstream_, std::move(tiers),
              BuddyConfig{.max_block_bytes = 1 << 20,
                          .limit_bytes = std::max<std::size_t>(limit, 1 << 20),
                          .chunk_alignment = 4096,
                          .shards = 1,
                          .cache_blocks_per_order = 0,
                          .ordering = nullptr}) {}
  std::string_view kind() const override { return pool_.kind(); }
  TieredResource& pool() { return pool_; }

 private:
  void* do_allocate(std::size_t b, std::size_t a, Stream s) override { return pool_.allocate(b, a, s); }
  void do_deallocate(void* p, std::size_t b, std::size_t alignment, Stream s) override { pool_.deallocate(p, b, alignment, s); }
  PoolStats do_stats() const override { return pool_.stats(); }
  HostResource upstream_{"host upstream"};
  TieredResource pool_;
};

struct TieredFactory {
  static std::string unavailable() { return {}; }
  static std::unique_ptr<MemoryResource> make(std::size_t limit) { return std::make_unique<OwningTiered>(limit); }
  static void release_all(MemoryResource& mr) { static_cast<OwningTiered&>(mr).pool().trim(); }
  static constexpr std::size_t kMaxAlignment = 4096;
  static constexpr bool kPooled = true;
  static constexpr std::size_t kBlock = 1 << 20;
  using Streams = void;
};

// The same with a size-class tier: requests up to 4 KiB in 64 KiB chunks of a buddy pool, up to
// 64 KiB in slots of chunks up to 256 KiB (memory/size_classes.hpp), the rest in the base.
struct SizeClassTieredFactory : TieredFactory {
  static std::unique_ptr<MemoryResource> make(std::size_t limit) {
    return std::make_unique<OwningTiered>(limit, std::vector<TierConfig>{TierConfig{4 << 10, 64 << 10},
                                                                         TierConfig{64 << 10, 256 << 10, 7}});
  }
};

struct FakeStreams {
  Stream a() const { return reinterpret_cast<Stream>(1); }
  Stream b() const { return reinterpret_cast<Stream>(2); }
  void block_a() { fake_ordering()->block(a()); }
  void unblock_a() { fake_ordering()->unblock(a()); }
  ~FakeStreams() { unblock_a(); }
};

struct StreamOrderedBuddyFactory : BuddyFactory {
  static std::unique_ptr<MemoryResource> make(std::size_t limit) {
    return std::make_unique<OwningBuddy>(limit, fake_ordering());
  }
  using Streams = FakeStreams;
};

using Factories = ::testing::Types<HostFactory, ArenaFactory, BuddyFactory, StreamOrderedBuddyFactory, TieredFactory,
                                   SizeClassTieredFactory>;

class FactoryNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if constexpr (std::is_same_v<T, HostFactory>) return "Host";
    if constexpr (std::is_same_v<T, ArenaFactory>) return "Arena";
    if constexpr (std::is_same_v<T, BuddyFactory>) return "Buddy";
    if constexpr (std::is_same_v<T, StreamOrderedBuddyFactory>) return "StreamOrderedBuddy";
    if constexpr (std::is_same_v<T, TieredFactory>) return "Tiered";
    if constexpr (std::is_same_v<T, SizeClassTieredFactory>) return "SizeClassTiered";
    return "Unknown";
  }
};

TEST(StreamOrderedBuddy, BlocksOfAStreamThatLeaveTheCacheTogetherShareOneEvent) {
  auto ordering = std::make_shared<FakeOrdering>();
  HostResource upstream("host");
  BuddyResource pool("p", upstream,
                     BuddyConfig{.max_block_bytes = 256 << 10, .limit_bytes = 1 << 20, .chunk_alignment = 4096,
                                 .shards = 1, .cache_blocks_per_order = 16, .ordering = ordering});
  const Stream a = reinterpret_cast<Stream>(1), b = reinterpret_cast<Stream>(2);
  std::vector<void*> blocks;
  for (int i = 0; i < 12; ++i) blocks.push_back(pool.allocate(1024, kDefaultAlignment, i < 8 ? a : b));
  for (int i = 0; i < 12; ++i) pool.deallocate(blocks[i], 1024, i < 8 ? a : b);
  EXPECT_EQ(ordering->recorded(), 0u);  // all twelve wait in the thread cache
  pool.trim();  // they leave it together: a's eight, then b's four
  EXPECT_EQ(ordering->recorded(), 2u);
  EXPECT_EQ(ordering->released(), 2u);
  EXPECT_EQ(ordering->double_releases(), 0u);
  const PoolStats st = pool.stats();
  EXPECT_EQ(st.pending_bytes, 0u);
  EXPECT_EQ(st.free_bytes, st.reserved_bytes);
}

// Small requests live in their tier's chunks: the base keeps its large blocks whole, which a
// single pool under the same mix splits.
TEST(TieredPool, SmallRequestsDoNotSplitTheBasesLargeBlocks) {
  OwningTiered tiered(8 << 20);
  OwningBuddy single(8 << 20, nullptr);
  std::vector<void*> small, small_single;
  for (int i = 0; i < 40; ++i) {
    small.push_back(tiered.allocate(3000));
    small_single.push_back(single.allocate(3000));
  }
  // The base: one 1 MiB block holds the 4 KiB tier's chunks (and the middle tier's chunk, through
  // it); the other blocks of the base stay whole.
  const auto& base = *tiered.pool().pools().back();
  EXPECT_EQ(base.stats().bytes_in_use, 256u << 10);
  for (void* p : small) tiered.deallocate(p, 3000);
  for (void* p : small_single) single.deallocate(p, 3000);
  const PoolStats st = tiered.stats();
  EXPECT_EQ(st.bytes_in_use, 0u);
  EXPECT_EQ(st.allocations, 40u);
  EXPECT_EQ(st.deallocations, 40u);
}

TEST(TieredPool, TiersOutOfOrderAreRefused) {
  HostResource upstream("host");
  const BuddyConfig base{.max_block_bytes = 1 << 20, .limit_bytes = 1 << 20, .ordering = nullptr};
  EXPECT_THROW(TieredResource("t", upstream, {TierConfig{64 << 10, 32 << 10}}, base), InvalidArgument);
  EXPECT_THROW(TieredResource("t", upstream, {TierConfig{4 << 10, 64 << 10}, TierConfig{2 << 10, 128 << 10}}, base),
               InvalidArgument);
  EXPECT_THROW(TieredResource("t", upstream, {TierConfig{4 << 10, 3 << 20}}, base), InvalidArgument);
  EXPECT_THROW(TieredResource("t", upstream, {TierConfig{64 << 10, 256 << 10, 2}}, base), InvalidArgument);
  // A buddy tier's chunks are blocks of the next buddy pool up: a size-class tier between them
  // passes them on, whatever its own chunks.
  EXPECT_NO_THROW(TieredResource("t", upstream, {TierConfig{4 << 10, 256 << 10}, TierConfig{64 << 10, 128 << 10, 3}}, base));
  BuddyConfig ordered = base;
  ordered.ordering = std::make_shared<FakeOrdering>();
  EXPECT_THROW(TieredResource("t", upstream, {TierConfig{64 << 10, 256 << 10, 3}}, ordered), InvalidArgument);
}

// The frame pool, built by the functions stages/frame_memory.cpp builds it with, on the recorded
// pipeline trace (memory/bench/traces/). At the trace's peak its free bytes in blocks and slots
// too small for the trace's largest request are no more than its classes and blocks force, and
// under a tenth of the free bytes: a class holds whole chunks of slots, so its idle slots are at
// least those its last chunk has left; the requests no class takes have power-of-two blocks,
// which fill whole regions of the largest request's block size but the last (more idle slots,
// a thread cache, or tier chunks that hold small free blocks, leave more). It grows only while
// warming up and coalesces back to whole chunks at the end.
TEST(TieredPool, FramePoolOnThePipelineTraceLeavesNoMoreUnusableBytesThanItsClassesAndBlocksForce) {
  const AllocationTrace t = read_allocation_trace(REDWOOD_SOURCE_DIR "/memory/bench/traces/ocr-video.rwtrace");
  std::vector<std::size_t> sizes;
  for (const TraceEvent& e : t.events) {
    if (e.allocate) sizes.push_back(e.value);
  }
  ASSERT_FALSE(sizes.empty());
  const std::size_t region = std::bit_ceil(*std::max_element(sizes.begin(), sizes.end()));
  const auto block = [](std::size_t bytes) { return std::max<std::size_t>(std::bit_ceil(bytes), kDefaultAlignment); };

  HostResource upstream("host");
  const std::vector<TierConfig> tiers = frame_pool_tiers(kFramePoolChunkBytes);
  TieredResource pool("frames", upstream, tiers, frame_pool_base(kFramePoolChunkBytes, kFramePoolLimitBytes));
  // The slot a request takes in the frame pool (zero: a block).
  const auto slot_class = [&](std::size_t bytes) {
    std::size_t k = 0;  // which size-class pool
    for (const TierConfig& tier : tiers) {
      if (bytes <= tier.max_request_bytes) {
        return tier.slots_per_chunk != 0 ? pool.size_class_pools()[k]->slot_class(bytes) : SlotClass{};
      }
      if (tier.slots_per_chunk != 0) ++k;
    }
    return SlotClass{};
  };
  std::vector<void*> ptrs(sizes.size(), nullptr);
  const auto replay = [&](bool check_peak) {
    std::size_t next = 0;
    for (std::size_t i = 0; i < t.events.size(); ++i) {
      const TraceEvent& e = t.events[i];
      if (e.allocate) {
        ptrs[next++] = pool.allocate(e.value);
      } else {
        pool.deallocate(ptrs[e.value], sizes[e.value]);
        ptrs[e.value] = nullptr;
      }
      if (!check_peak || i != t.peak_event) continue;
      std::size_t live_blocks = 0;
      std::map<std::size_t, std::pair<SlotClass, std::size_t>> live_slots;  // slot bytes -> class, live
      for (std::size_t a = 0; a < next; ++a) {
        if (ptrs[a] == nullptr) continue;
        const SlotClass c = slot_class(sizes[a]);
        if (c.slot_bytes == 0) {
          live_blocks += block(sizes[a]);
        } else {
          live_slots[c.slot_bytes].first = c;
          ++live_slots[c.slot_bytes].second;
        }
      }
      ASSERT_FALSE(live_slots.empty()) << "no request at the peak takes a slot";
      std::size_t forced = (live_blocks + region - 1) / region * region - live_blocks;
      for (const auto& [slot, c] : live_slots) {
        forced += ((c.second + c.first.slots - 1) / c.first.slots * c.first.slots - c.second) * slot;
      }
      std::size_t unusable = 0, free = 0;
      for (const FreeBlocks& f : pool.free_blocks()) {
        free += f.block_bytes * f.count;
        if (f.block_bytes < region) unusable += f.block_bytes * f.count;
      }
      EXPECT_LE(unusable, forced) << "at the trace's peak, event " << i;
      EXPECT_LT(unusable, free / 10) << "at the trace's peak, event " << i;
    }
    for (std::size_t a = 0; a < ptrs.size(); ++a) {
      if (ptrs[a] != nullptr) pool.deallocate(ptrs[a], sizes[a]);
      ptrs[a] = nullptr;
    }
  };
  replay(true);
  const std::uint64_t warmed_up = pool.stats().upstream_allocations;
  replay(false);
  EXPECT_EQ(pool.stats().upstream_allocations, warmed_up);
  pool.trim();
  const PoolStats end = pool.stats();
  EXPECT_EQ(end.bytes_in_use, 0u);
  EXPECT_EQ(end.reserved_bytes, kFramePoolChunkBytes);  // the trace's peak fits one chunk
  EXPECT_EQ(end.free_bytes, end.reserved_bytes);
  EXPECT_EQ(end.largest_free_block, end.reserved_bytes);
}

}  // namespace

INSTANTIATE_TYPED_TEST_SUITE_P(Memory, MemoryResourceTest, Factories, FactoryNames);

}  // namespace redwood::memory::testing
