// HostThreads (core/host_threads.hpp): work run with its kernels held to a count of host threads,
// oneTBB's parallelism by an arena, the thread's count for the CPU backend's OpenMP teams.

#include "core/host_threads.hpp"

#include <gtest/gtest.h>

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include <mutex>
#include <set>
#include <thread>

namespace redwood {
namespace {

// The distinct threads a parallel loop of short, blocking-free items ran on.
std::size_t threads_of_a_parallel_loop() {
  std::mutex mutex;
  std::set<std::thread::id> seen;
  oneapi::tbb::parallel_for(0, 2000, [&](int) {
    volatile double x = 0;
    for (int i = 0; i < 20000; ++i) x = x + i;
    std::lock_guard lock(mutex);
    seen.insert(std::this_thread::get_id());
  });
  return seen.size();
}

TEST(HostThreads, RunHoldsOneTbbsParallelismAndSetsTheThreadsCount) {
  EXPECT_EQ(thread_host_threads(), 0);  // outside a run: the process's
  const HostThreads one(1);
  EXPECT_EQ(one.threads(), 1);
  one.run([] {
    EXPECT_EQ(thread_host_threads(), 1);
    EXPECT_EQ(oneapi::tbb::this_task_arena::max_concurrency(), 1);
    EXPECT_EQ(threads_of_a_parallel_loop(), 1u);
  });
  EXPECT_EQ(thread_host_threads(), 0);  // restored
  HostThreads(2).run([] {
    EXPECT_EQ(thread_host_threads(), 2);
    EXPECT_EQ(oneapi::tbb::this_task_arena::max_concurrency(), 2);
    EXPECT_LE(threads_of_a_parallel_loop(), 2u);
    HostThreads(1).run([] { EXPECT_EQ(thread_host_threads(), 1); });  // nested: the inner count, then back
    EXPECT_EQ(thread_host_threads(), 2);
  });
  EXPECT_EQ(HostThreads(3).run([] { return thread_host_threads() * 10; }), 30);  // what the work returns
}

TEST(HostThreads, NoCountCallsStraightThrough) {
  const HostThreads none(0);
  EXPECT_EQ(none.threads(), 0);
  EXPECT_EQ(HostThreads(-4).threads(), 0);
  const std::thread::id caller = std::this_thread::get_id();
  none.run([&] {
    EXPECT_EQ(thread_host_threads(), 0);
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(oneapi::tbb::this_task_arena::max_concurrency(), oneapi::tbb::info::default_concurrency());
  });
}

TEST(HostThreads, ManyThreadsShareOneAndEachSeesTheCount) {
  const HostThreads two(2);
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int r = 0; r < 20; ++r) {
        two.run([&] {
          if (thread_host_threads() != 2 || oneapi::tbb::this_task_arena::max_concurrency() != 2) ++wrong;
        });
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(HostThreads, TheProcessCountFollowsOneTbbsLimit) {
  EXPECT_EQ(process_host_threads(), std::min(oneapi::tbb::info::default_concurrency(),
                                             static_cast<int>(oneapi::tbb::global_control::active_value(
                                                 oneapi::tbb::global_control::max_allowed_parallelism))));
  {
    const oneapi::tbb::global_control limit(oneapi::tbb::global_control::max_allowed_parallelism, 1);
    EXPECT_EQ(process_host_threads(), 1);
  }
  EXPECT_GE(process_host_threads(), 1);
}

}  // namespace
}  // namespace redwood
