// LruMap: at most `capacity` entries; a find or an insert marks an entry used; the least
// recently used goes first.

#include "core/lru_map.hpp"

#include <gtest/gtest.h>

#include <string>

namespace redwood {
namespace {

TEST(LruMap, EvictsTheLeastRecentlyUsed) {
  LruMap<int, std::string> m(2);
  m.insert(1, "one");
  m.insert(2, "two");
  ASSERT_NE(m.find(1), nullptr);  // 1 is now the most recent
  m.insert(3, "three");           // evicts 2
  EXPECT_EQ(m.find(2), nullptr);
  EXPECT_EQ(*m.find(1), "one");
  EXPECT_EQ(*m.find(3), "three");
  m.insert(3, "drei");            // replaces, evicts nothing
  EXPECT_EQ(*m.find(3), "drei");
  EXPECT_EQ(m.size(), 2u);
  EXPECT_EQ(m.evictions(), 1u);
  m.erase(1);
  EXPECT_EQ(m.size(), 1u);
  EXPECT_EQ((LruMap<int, int>(0).capacity()), 1u);
}

}  // namespace
}  // namespace redwood
