// The planner's timed runs carry sample values (runtime/sample_values.hpp), not zeros.

#include "runtime/sample_values.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

namespace redwood::runtime {
namespace {

TEST(SampleValues, FloatsAreSpreadOverZeroToOneAndTheSameEachCall) {
  std::vector<float> a(4096, -1.0f), b(4096, -1.0f);
  fill_sample_values(a.data(), DType::kF32, a.size() * sizeof(float));
  fill_sample_values(b.data(), DType::kF32, b.size() * sizeof(float));
  EXPECT_EQ(a, b);
  std::set<int> tenths;
  for (float v : a) {
    ASSERT_GE(v, 0.0f);
    ASSERT_LT(v, 1.0f);
    tenths.insert(static_cast<int>(v * 10));
  }
  EXPECT_EQ(tenths.size(), 10u);  // every tenth of [0, 1) is hit
}

TEST(SampleValues, OtherDtypesAreZeros) {
  std::vector<std::int64_t> ids(64, 7);
  fill_sample_values(ids.data(), DType::kI64, ids.size() * sizeof(std::int64_t));
  for (auto v : ids) EXPECT_EQ(v, 0);
}

}  // namespace
}  // namespace redwood::runtime
