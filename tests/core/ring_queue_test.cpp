// RingQueue: first in, first out across the ring's wrap and its growth; a popped element lets go
// of what it held; room, once grown, is kept.

#include "core/ring_queue.hpp"

#include <gtest/gtest.h>

#include <memory>

namespace redwood {
namespace {

TEST(RingQueue, KeepsOrderAcrossTheWrapAndWhenItGrows) {
  RingQueue<int> q(4);
  int next_in = 0, next_out = 0;
  // Three in, two out, many times: the front walks around the ring of four.
  for (int round = 0; round < 10; ++round) {
    for (int k = 0; k < 3 && q.size() < 4; ++k) q.push_back(next_in++);
    for (int k = 0; k < 2; ++k) {
      ASSERT_EQ(q.front(), next_out++);
      q.pop_front();
    }
  }
  EXPECT_EQ(q.capacity(), 4u);
  // Past the room: it doubles, the order kept, the elements indexed from the front.
  while (q.size() < 11) q.push_back(next_in++);
  EXPECT_GE(q.capacity(), 11u);
  for (std::size_t i = 0; i < q.size(); ++i) EXPECT_EQ(q[i], next_out + static_cast<int>(i));
  EXPECT_EQ(q.back(), next_in - 1);
  q.pop_back();
  EXPECT_EQ(q.back(), next_in - 2);
  const std::size_t room = q.capacity();
  q.clear();
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.capacity(), room);
}

TEST(RingQueue, APoppedElementLetsGoOfWhatItHeld) {
  RingQueue<std::shared_ptr<int>> q;
  auto held = std::make_shared<int>(1);
  q.push_back(held);
  q.push_back(held);
  EXPECT_EQ(held.use_count(), 3);
  q.pop_front();
  EXPECT_EQ(held.use_count(), 2);
  q.pop_back();
  EXPECT_EQ(held.use_count(), 1);
}

}  // namespace
}  // namespace redwood
