#include "core/free_list.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace redwood {
namespace {

TEST(FreeList, HandsBackTheObjectGivenBackLastWithItsBuffers) {
  FreeList<std::vector<int>> pool;
  const std::vector<int>* first = nullptr;
  {
    auto lease = pool.take();
    lease->assign(1000, 7);
    first = &*lease;
  }
  EXPECT_EQ(pool.idle(), 1u);
  auto again = pool.take();
  EXPECT_EQ(&*again, first);  // the same object, its room kept
  EXPECT_GE(again->capacity(), 1000u);
  EXPECT_EQ(pool.idle(), 0u);
}

TEST(FreeList, LeasesOutAtOnceAreDistinctAndAllComeBack) {
  FreeList<std::vector<int>> pool;
  {
    auto a = pool.take();
    auto b = pool.take();
    EXPECT_NE(&*a, &*b);
  }
  EXPECT_EQ(pool.idle(), 2u);
  // Calls one after another on many threads share one object: the pool does not grow per thread.
  for (int i = 0; i < 8; ++i) {
    std::thread([&pool] {
      auto lease = pool.take();
      lease->push_back(1);
    }).join();
  }
  EXPECT_EQ(pool.idle(), 2u);
}

}  // namespace
}  // namespace redwood
