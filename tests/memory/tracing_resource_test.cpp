// TracingResource: every call passes through and is recorded in order; the file reads back as
// the same sequence; bad files are reported with their name.

#include "memory/buddy.hpp"
#include "memory/host_resource.hpp"
#include "memory/tracing_resource.hpp"
#include "support/onnx_builder.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <thread>

namespace redwood::memory {
namespace {

TEST(TracingResource, RecordsEveryCallInOrderAndReadsBack) {
  const auto file = testing::temp_dir("trace") / "t.rwtrace";
  HostResource upstream;
  std::vector<TraceEvent> expected;
  {
    TracingResource tracer(upstream, file);
    void* a = tracer.allocate(100);
    void* b = tracer.allocate(1 << 20);
    tracer.deallocate(a, 100);
    void* c = tracer.allocate(7);
    EXPECT_EQ(tracer.allocate(0), nullptr);  // not a call that reaches the upstream: not recorded
    tracer.deallocate(c, 7);
    EXPECT_EQ(upstream.stats().bytes_in_use, std::size_t{1} << 20);
    EXPECT_EQ(tracer.recorded_events(), 5u);
    (void)b;  // still live when the trace ends
    expected = {{true, 100}, {true, 1 << 20}, {false, 0}, {true, 7}, {false, 2}};
    tracer.deallocate(b, 1 << 20);
    expected.push_back({false, 1});
  }
  const AllocationTrace t = read_allocation_trace(file);
  ASSERT_EQ(t.events.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(t.events[i].allocate, expected[i].allocate) << i;
    EXPECT_EQ(t.events[i].value, expected[i].value) << i;
  }
  EXPECT_EQ(t.allocations, 3u);
  EXPECT_EQ(t.peak_live_bytes, 100u + (1u << 20));
  EXPECT_LT(std::filesystem::file_size(file), 40u);  // a few bytes per record
}

TEST(TracingResource, WrapsAPoolFromManyThreads) {
  const auto file = testing::temp_dir("trace") / "threads.rwtrace";
  HostResource upstream;
  BuddyResource pool("frames", upstream, BuddyConfig{.max_block_bytes = 1 << 20, .limit_bytes = 64 << 20, .ordering = nullptr});
  {
    TracingResource tracer(pool, file);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 500; ++i) {
          const std::size_t n = 1 + static_cast<std::size_t>((i * 7919 + t) % 50000);
          tracer.deallocate(tracer.allocate(n), n);
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(tracer.stats().allocations, 2000u);  // stats are the wrapped pool's
  }
  const AllocationTrace t = read_allocation_trace(file);
  EXPECT_EQ(t.allocations, 2000u);
  EXPECT_EQ(t.events.size(), 4000u);
}

TEST(TracingResource, ReportsBadFiles) {
  const auto dir = testing::temp_dir("trace");
  std::ofstream(dir / "junk") << "not a trace";
  try {
    read_allocation_trace(dir / "junk");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("junk: not an allocation trace"), std::string::npos) << e.what();
  }
  std::ofstream out(dir / "bad-free", std::ios::binary);
  out.write("RWMTRACE\x01\x00\x00\x00\x07", 13);  // frees allocation -4 of none
  out.close();
  EXPECT_THROW(read_allocation_trace(dir / "bad-free"), Error);
  EXPECT_THROW(read_allocation_trace(dir / "missing"), Error);
  HostResource upstream;
  EXPECT_THROW(TracingResource(upstream, dir / "no-such-dir" / "t"), Error);
}

}  // namespace
}  // namespace redwood::memory
