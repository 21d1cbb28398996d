// Range, Size and EyeLike beyond the ONNX node tests: int64 and empty ranges, a negative float
// step, Size of an empty tensor, EyeLike's negative k and bool type, and the error paths.

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

namespace redwood {
namespace {

using testing::expect_close;
using testing::f32;
using testing::Ints;
using testing::make_spec;
using testing::run_node;

template <typename T>
Tensor range(T start, T limit, T delta) {
  return run_node(make_spec("Range", {Tensor::scalar(start), Tensor::scalar(limit), Tensor::scalar(delta)})).at(0);
}

TEST(Range, Int64AndEmpty) {
  EXPECT_EQ(range<std::int64_t>(-3, 4, 3).to_int64_vector(), (Ints{-3, 0, 3}));
  EXPECT_EQ(range<std::int64_t>(5, 5, 1).shape(), (Shape{0}));
  EXPECT_EQ(range<std::int64_t>(5, 0, 1).shape(), (Shape{0}));  // wrong direction: empty
  EXPECT_EQ(range<std::int32_t>(10, 0, -4).to_int64_vector(), (Ints{10, 6, 2}));
}

TEST(Range, FloatNegativeDelta) {
  // numpy: np.arange(1.0, -0.5, -0.5, dtype=np.float32)
  expect_close(range<float>(1.0f, -0.5f, -0.5f), f32({3}, {1.0f, 0.5f, 0.0f}));
}

TEST(Range, Errors) {
  EXPECT_THROWS_SAYING(range<std::int64_t>(0, 4, 0), InvalidArgument, "node 'Range_0' (Range)", "delta is 0");
  EXPECT_THROWS_SAYING(
      run_node(make_spec("Range", {Tensor::scalar<std::int64_t>(0), Tensor::scalar<std::int32_t>(4),
                                   Tensor::scalar<std::int64_t>(1)})),
      InvalidArgument, "node 'Range_0'", "must have one type");
  EXPECT_THROWS_SAYING(run_node(make_spec("Range", {Tensor::from_vector<float>({2}, {0, 1}), Tensor::scalar(4.0f),
                                                    Tensor::scalar(1.0f)})),
                       InvalidArgument, "node 'Range_0'", "start must hold one value");
}

TEST(Size, EmptyAndScalar) {
  const Tensor n = run_node(make_spec("Size", {Tensor::zeros(DType::kU8, {3, 0, 2})})).at(0);
  EXPECT_EQ(n.dtype(), DType::kI64);
  EXPECT_EQ(n.rank(), 0);
  EXPECT_EQ(n.to_int64_vector(), (Ints{0}));
  EXPECT_EQ(run_node(make_spec("Size", {Tensor::scalar(2.0f)})).at(0).to_int64_vector(), (Ints{1}));
}

TEST(EyeLike, NegativeKAndBool) {
  const Tensor y = run_node(make_spec("EyeLike", {Tensor::zeros(DType::kF32, {3, 2})},
                                      {{"k", std::int64_t{-1}}, {"dtype", std::int64_t{9}}}))
                       .at(0);
  EXPECT_EQ(y.dtype(), DType::kBool);
  EXPECT_EQ(y.to_int64_vector(), (Ints{0, 0, 1, 0, 0, 1}));
  // k past the last column: all zeros.
  const Tensor z = run_node(make_spec("EyeLike", {Tensor::zeros(DType::kI64, {2, 2})}, {{"k", std::int64_t{5}}})).at(0);
  EXPECT_EQ(z.to_int64_vector(), (Ints{0, 0, 0, 0}));
}

TEST(EyeLike, Errors) {
  EXPECT_THROWS_SAYING(run_node(make_spec("EyeLike", {Tensor::zeros(DType::kF32, {2, 2, 2})})), InvalidArgument,
                       "node 'EyeLike_0' (EyeLike)", "must be 2-D");
  EXPECT_THROWS_SAYING(run_node(make_spec("EyeLike", {Tensor::zeros(DType::kF32, {2, 2})}, {{"dtype", std::int64_t{11}}})),
                       Unsupported, "node 'EyeLike_0'", "dtype double is not supported");
}

}  // namespace
}  // namespace redwood
