#include "core/error.hpp"
#include "core/tensor.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace redwood {
namespace {

TEST(Tensor, EmptyIsContiguousAndAligned) {
  Tensor t = Tensor::empty(DType::kF32, {2, 3, 4});
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 96u);
  EXPECT_EQ(t.strides(), (Strides{12, 4, 1}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_TRUE(t.owns_data());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.raw_data()) % 64, 0u);
  EXPECT_EQ(t.description(), "float[2, 3, 4]");
}

TEST(Tensor, UndefinedByDefault) {
  Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_EQ(t.description(), "undefined");
}

TEST(Tensor, WrongTypedAccessThrows) {
  Tensor t = Tensor::zeros(DType::kI64, {3});
  EXPECT_THROW(t.data<float>(), InvalidArgument);
  EXPECT_NO_THROW(t.data<std::int64_t>());
}

TEST(Tensor, ReshapeSharesDataAndChecksCount) {
  Tensor t = Tensor::from_vector<float>({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor r = t.reshaped({3, 2});
  EXPECT_EQ(r.raw_data(), t.raw_data());
  EXPECT_EQ(r.get_as_double(5), 5.0);
  EXPECT_THROW(t.reshaped({4, 2}), InvalidArgument);
}

TEST(Tensor, RowsViewTheirShareAndKeepTheBufferAlive) {
  Tensor r;
  {
    Tensor t = Tensor::from_vector<float>({3, 2}, {0, 1, 2, 3, 4, 5});
    r = t.rows(1, 2);
    EXPECT_EQ(r.raw_data(), t.data<float>() + 2);
    EXPECT_EQ(r.shape(), (Shape{2, 2}));
    EXPECT_TRUE(r.owns_data());
    EXPECT_EQ(t.rows(3, 0).numel(), 0);
    EXPECT_THROW(t.rows(2, 2), InvalidArgument);
    EXPECT_THROW(t.rows(-1, 1), InvalidArgument);
  }
  // The whole tensor's handle is gone; the rows still hold its storage.
  EXPECT_EQ(r.to_float_vector(), (std::vector<float>{2, 3, 4, 5}));
}

TEST(Tensor, StridedViewClonesInLogicalOrder) {
  std::vector<float> data{0, 1, 2, 3, 4, 5};
  // The transpose of a 2x3 matrix, as a 3x2 view with swapped strides.
  Tensor v = Tensor::view(data.data(), DType::kF32, {3, 2}, {1, 3});
  EXPECT_FALSE(v.is_contiguous());
  EXPECT_FALSE(v.owns_data());
  Tensor c = v.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.to_float_vector(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(Tensor, CastFollowsOnnxRules) {
  Tensor f = Tensor::from_vector<float>({4}, {1.7f, -1.7f, 0.f, 3.f});
  EXPECT_EQ(f.cast(DType::kI64).to_int64_vector(), (std::vector<std::int64_t>{1, -1, 0, 3}));
  Tensor b = f.cast(DType::kBool);
  EXPECT_EQ(b.get_as_double(0), 1.0);
  EXPECT_EQ(b.get_as_double(2), 0.0);
  // int64 values beyond 2^53 stay exact between integer types
  const std::int64_t big = (std::int64_t{1} << 60) + 1;
  Tensor i = Tensor::from_vector<std::int64_t>({1}, {big});
  EXPECT_EQ(i.cast(DType::kI64).to_int64_vector()[0], big);
}

TEST(Tensor, FloatToIntegerCastSaturatesAndMapsNanToZero) {
  Tensor f = Tensor::from_vector<float>({3}, {std::numeric_limits<float>::quiet_NaN(), 1e30f, -1e30f});
  EXPECT_EQ(f.cast(DType::kI32).to_int64_vector(),
            (std::vector<std::int64_t>{0, std::numeric_limits<std::int32_t>::max(), std::numeric_limits<std::int32_t>::lowest()}));
}

TEST(Tensor, FromVectorChecksCount) {
  EXPECT_THROW(Tensor::from_vector<float>({2, 2}, {1, 2, 3}), InvalidArgument);
}

TEST(Half, RoundTripsRepresentableValues) {
  for (float v : {0.f, -0.f, 1.f, -2.5f, 65504.f, 6.103515625e-05f, 5.960464477539063e-08f}) {
    EXPECT_EQ(half_to_float(float_to_half(v)), v) << v;
  }
  EXPECT_TRUE(std::isinf(half_to_float(float_to_half(70000.f))));
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::numeric_limits<float>::quiet_NaN()))));
  // 1 + 2^-11 is halfway between 1 and the next half; ties go to even (1.0)
  EXPECT_EQ(half_to_float(float_to_half(1.0f + 0.00048828125f)), 1.0f);
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(3.140625f)), 3.140625f);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Shape, Broadcast) {
  EXPECT_EQ(broadcast_shapes({2, 1, 4}, {3, 1}), (Shape{2, 3, 4}));
  EXPECT_EQ(broadcast_shapes({}, {5}), (Shape{5}));
  EXPECT_THROW(broadcast_shapes({2, 3}, {4}), InvalidArgument);
  EXPECT_EQ(normalize_axis(-1, 4), 3);
  EXPECT_THROW(normalize_axis(4, 4), InvalidArgument);
}

}  // namespace
}  // namespace redwood
