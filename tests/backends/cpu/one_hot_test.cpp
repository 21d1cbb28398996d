// OneHot beyond the ONNX node tests: out-of-range indices (all `off`, not an error), axis 0,
// int64 depth, bool values, and the error paths.

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

namespace redwood {
namespace {

using testing::i64;
using testing::Ints;
using testing::make_spec;
using testing::run_node;

Tensor one_hot(const Tensor& indices, const Tensor& depth, const Tensor& values, std::int64_t axis = -1) {
  return run_node(make_spec("OneHot", {indices, depth, values}, {{"axis", axis}})).at(0);
}

TEST(OneHot, OutOfRangeIndicesAreAllOff) {
  const Tensor y = one_hot(i64({-4, 3, -3, 2}), Tensor::scalar<std::int64_t>(3), i64({0, 7}));
  EXPECT_EQ(y.shape(), (Shape{4, 3}));
  EXPECT_EQ(y.to_int64_vector(), (Ints{0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 7}));
}

TEST(OneHot, AxisZeroWithBoolValues) {
  const Tensor y = one_hot(Tensor::from_vector<std::int32_t>({2}, {1, 0}), Tensor::scalar(2.0f),
                           Tensor::from_vector<bool>({2}, {false, true}), 0);
  EXPECT_EQ(y.dtype(), DType::kBool);
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(y.to_int64_vector(), (Ints{0, 1, 1, 0}));  // y[d, i] = (indices[i] == d)
}

TEST(OneHot, Errors) {
  EXPECT_THROWS_SAYING(one_hot(i64({0}), Tensor::scalar<std::int64_t>(2), i64({0, 1, 2})), InvalidArgument,
                       "node 'OneHot_0' (OneHot)", "values must be [off, on]");
  EXPECT_THROWS_SAYING(one_hot(i64({0}), Tensor::scalar<std::int64_t>(-1), i64({0, 1})), InvalidArgument,
                       "node 'OneHot_0'", "depth -1 is not an extent");
  EXPECT_THROWS_SAYING(one_hot(i64({0}), i64({2, 3}), i64({0, 1})), InvalidArgument, "node 'OneHot_0'",
                       "depth must hold one value");
  EXPECT_THROWS_SAYING(one_hot(i64({0}), Tensor::scalar<std::int64_t>(2), i64({0, 1}), 2), InvalidArgument,
                       "axis 2 is out of range");
}

}  // namespace
}  // namespace redwood
