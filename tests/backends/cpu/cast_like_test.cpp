// CastLike beyond the ONNX node tests: integer, bool and bfloat16 targets (Cast's conversions:
// truncation toward zero, nonzero is true, bfloat16 by truncation), the same type, and a missing
// target input.

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

namespace redwood {
namespace {

using testing::f32;
using testing::Ints;
using testing::make_spec;
using testing::run_node;

Tensor cast_like(const Tensor& x, const Tensor& like) { return run_node(make_spec("CastLike", {x, like})).at(0); }

TEST(CastLike, TakesTheSecondInputsType) {
  const Tensor x = f32({4}, {-2.7f, 0.0f, 0.5f, 3.9f});
  const Tensor i = cast_like(x, Tensor::scalar<std::int32_t>(0));
  EXPECT_EQ(i.dtype(), DType::kI32);
  EXPECT_EQ(i.to_int64_vector(), (Ints{-2, 0, 0, 3}));
  const Tensor b = cast_like(x, Tensor::from_vector<bool>({1}, {false}));
  EXPECT_EQ(b.dtype(), DType::kBool);
  EXPECT_EQ(b.to_int64_vector(), (Ints{1, 0, 1, 1}));
  EXPECT_EQ(cast_like(x, Tensor::scalar(1.0f)).to_float_vector(), x.to_float_vector());
}

TEST(CastLike, BFloat16Truncates) {
  // bfloat16 keeps 7 fraction bits: 1 + 2^-7 + 2^-8 truncates to 1 + 2^-7 (0x3f81), where rounding
  // to nearest even would give 1 + 2^-6.
  const Tensor y = cast_like(f32({1}, {1.0f + 0.0078125f + 0.00390625f}), Tensor::from_vector<BFloat16>({1}, {BFloat16{}}));
  ASSERT_EQ(y.dtype(), DType::kBF16);
  EXPECT_EQ(y.data<BFloat16>()[0].bits, 0x3f81);
}

TEST(CastLike, NeedsTheTargetInput) {
  // Checked at load, where the executor reports every node it cannot run as Unsupported.
  EXPECT_THROWS_SAYING(run_node(make_spec("CastLike", {f32({1}, {1}), Tensor{}})), Unsupported,
                       "node 'CastLike_0' (CastLike)", "takes an input and a tensor of the target type");
}

}  // namespace
}  // namespace redwood
