// CumSum: the ONNX node tests use float64, which Redwood does not hold, so every case is here:
// exclusive and reverse along inner and outer axes, an int64 or int32 axis input, integer data,
// and the error paths.

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <cstdint>

namespace redwood {
namespace {

using testing::expect_close;
using testing::f32;
using testing::i64;
using testing::Ints;
using testing::make_spec;
using testing::run_node;

Tensor cumsum(const Tensor& x, const Tensor& axis, std::int64_t exclusive = 0, std::int64_t reverse = 0) {
  return run_node(make_spec("CumSum", {x, axis}, {{"exclusive", exclusive}, {"reverse", reverse}})).at(0);
}

TEST(CumSum, ExclusiveAndReverse) {
  const Tensor x = f32({5}, {1, 2, 3, 4, 5});
  const Tensor axis = Tensor::scalar<std::int32_t>(0);
  expect_close(cumsum(x, axis), f32({5}, {1, 3, 6, 10, 15}));
  expect_close(cumsum(x, axis, 1), f32({5}, {0, 1, 3, 6, 10}));
  expect_close(cumsum(x, axis, 0, 1), f32({5}, {15, 14, 12, 9, 5}));
  expect_close(cumsum(x, axis, 1, 1), f32({5}, {14, 12, 9, 5, 0}));
}

TEST(CumSum, AlongEachAxis) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  expect_close(cumsum(x, Tensor::scalar<std::int64_t>(0)), f32({2, 3}, {1, 2, 3, 5, 7, 9}));
  expect_close(cumsum(x, i64({1})), f32({2, 3}, {1, 3, 6, 4, 9, 15}));
  expect_close(cumsum(x, Tensor::scalar<std::int32_t>(-1), 0, 1), f32({2, 3}, {6, 5, 3, 15, 11, 6}));
}

TEST(CumSum, IntegerData) {
  const Tensor x = Tensor::from_vector<std::int32_t>({2, 2}, {1, -2, 3, 4});
  const Tensor r = cumsum(x, Tensor::scalar<std::int64_t>(0), 1);
  EXPECT_EQ(r.dtype(), DType::kI32);
  EXPECT_EQ(r.to_int64_vector(), (Ints{0, 0, 1, -2}));
  EXPECT_EQ(cumsum(i64({3}, {5, 6, 7}), i64({0})).to_int64_vector(), (Ints{5, 11, 18}));
}

TEST(CumSum, Rejects) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_THROWS_SAYING(cumsum(x, i64({2})), InvalidArgument, "node 'CumSum_0' (CumSum)",
                       "axis 2 is out of range for input [2, 3]");
  EXPECT_THROWS_SAYING(cumsum(x, i64({0, 1})), InvalidArgument, "axis int64[2] must be one int32 or int64 value");
  EXPECT_THROWS_SAYING(cumsum(x, f32({}, {0})), Unsupported, "axis of type float");
  EXPECT_THROWS_SAYING(cumsum(x.cast(DType::kU8), i64({0})), Unsupported, "x of type uint8");
}

}  // namespace
}  // namespace redwood
