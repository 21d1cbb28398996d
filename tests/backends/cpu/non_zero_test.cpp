// NonZero beyond the ONNX node test: float zeros of either sign and NaN, float16, a scalar, an
// empty result, and an input of several parallel chunks.

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace redwood {
namespace {

using testing::f32;
using testing::Ints;
using testing::make_spec;
using testing::run_node;

Tensor non_zero(const Tensor& x) { return run_node(make_spec("NonZero", {x})).at(0); }

TEST(NonZero, SignedZerosAndNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor y = non_zero(f32({2, 2}, {-0.0f, nan, 0.0f, -2.0f}));
  EXPECT_EQ(y.dtype(), DType::kI64);
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(y.to_int64_vector(), (Ints{0, 1, 1, 1}));  // rows: coordinates of (0, 1) and (1, 1)
  const Tensor h = non_zero(Tensor::from_vector<Half>({3}, {float_to_half(-0.0f), float_to_half(0.5f), Half{}}));
  EXPECT_EQ(h.to_int64_vector(), (Ints{1}));
}

TEST(NonZero, ScalarAndEmpty) {
  EXPECT_EQ(non_zero(Tensor::scalar<std::int32_t>(7)).shape(), (Shape{1, 1}));
  EXPECT_EQ(non_zero(Tensor::zeros(DType::kU8, {2, 3})).shape(), (Shape{2, 0}));
}

TEST(NonZero, ManyChunks) {
  // 300 000 elements (several chunks of 65 536): every 1000th is set.
  std::vector<std::uint8_t> v(300000, 0);
  for (std::size_t i = 0; i < v.size(); i += 1000) v[i] = 1;
  const Tensor y = non_zero(Tensor::from_vector<std::uint8_t>({3, 100000}, v));
  ASSERT_EQ(y.shape(), (Shape{2, 300}));
  const Ints c = y.to_int64_vector();
  for (std::int64_t j = 0; j < 300; ++j) {
    ASSERT_EQ(c[j] * 100000 + c[300 + j], j * 1000) << "column " << j;
  }
}

}  // namespace
}  // namespace redwood
