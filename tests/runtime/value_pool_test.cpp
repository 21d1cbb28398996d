// The split's value pool (runtime/value_pool.hpp): a freed tensor's block comes back for the next
// request it fits, a batch of fewer rows takes a fuller batch's block, and a block more than twice
// a request stays free for the requests it fits; what its upstream refuses is not counted.

#include "memory/host_resource.hpp"
#include "runtime/value_pool.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

namespace redwood::runtime {
namespace {

// A batch of `rows` rows of 1,000 floats.
Tensor rows_of(ValuePool& pool, std::int64_t rows) { return pool.make(DType::kF32, {rows, 1000}); }

TEST(ValuePool, AFreedBlockComesBackForTheNextTensorOfItsSize) {
  auto pool = std::make_shared<ValuePool>(nullptr);
  void* first = nullptr;
  {
    Tensor t = rows_of(*pool, 8);
    first = t.raw_data();
    t.data<float>()[7999] = 1.0f;  // the whole batch is there
  }
  Tensor again = rows_of(*pool, 8);
  EXPECT_EQ(again.raw_data(), first);
  EXPECT_EQ(again.shape(), (Shape{8, 1000}));
  EXPECT_EQ(pool->counts().fresh, 1u);
  EXPECT_EQ(pool->counts().reused, 1u);
}

TEST(ValuePool, ABatchOfFewerRowsTakesAFullerBatchsBlock) {
  auto pool = std::make_shared<ValuePool>(nullptr);
  void* eight = nullptr;
  { eight = rows_of(*pool, 8).raw_data(); }
  {
    Tensor seven = rows_of(*pool, 7);
    EXPECT_EQ(seven.raw_data(), eight);
    EXPECT_EQ(seven.shape(), (Shape{7, 1000}));
  }
  // The block went back whole: a batch of eight rows fits it again.
  Tensor full = rows_of(*pool, 8);
  EXPECT_EQ(full.raw_data(), eight);
  EXPECT_EQ(pool->counts().fresh, 1u);
  EXPECT_EQ(pool->counts().reused, 2u);
}

TEST(ValuePool, ABlockMoreThanTwiceARequestStaysForTheRequestsItFits) {
  auto pool = std::make_shared<ValuePool>(nullptr);
  void* eight = nullptr;
  { eight = rows_of(*pool, 8).raw_data(); }
  Tensor three = rows_of(*pool, 3);  // 8 rows are more than twice 3
  EXPECT_NE(three.raw_data(), eight);
  Tensor four = rows_of(*pool, 4);  // and exactly twice 4
  EXPECT_EQ(four.raw_data(), eight);
  EXPECT_EQ(pool->counts().fresh, 2u);
  EXPECT_EQ(pool->counts().reused, 1u);
}

TEST(ValuePool, TheSmallestBlockThatFitsIsTaken) {
  auto pool = std::make_shared<ValuePool>(nullptr);
  void* six = nullptr;
  {
    Tensor eight = rows_of(*pool, 8);
    Tensor held = rows_of(*pool, 6);
    six = held.raw_data();
  }
  Tensor five = rows_of(*pool, 5);
  EXPECT_EQ(five.raw_data(), six);
  Tensor seven = rows_of(*pool, 7);  // the eight-row block is still free
  EXPECT_NE(seven.raw_data(), six);
  EXPECT_EQ(pool->counts().fresh, 2u);
  EXPECT_EQ(pool->counts().reused, 2u);
}

TEST(ValuePool, ABlockItsUpstreamRefusesIsNotCounted) {
  memory::HostResource upstream("test limited", 8 * 1000 * sizeof(float));  // room for one 8-row block
  auto pool = std::make_shared<ValuePool>(&upstream);
  Tensor eight = rows_of(*pool, 8);
  EXPECT_THROW(rows_of(*pool, 1), memory::OutOfMemory);
  EXPECT_EQ(pool->counts().fresh, 1u);
  EXPECT_EQ(pool->counts().reused, 0u);
}

}  // namespace
}  // namespace redwood::runtime
