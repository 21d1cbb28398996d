// Expand and Tile beyond the ONNX node tests: a shape shorter than the input, other dtypes, zero
// repeats, a non-contiguous-looking broadcast in the middle, and the error paths.

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

namespace redwood {
namespace {

using testing::expect_close;
using testing::f32;
using testing::i64;
using testing::Ints;
using testing::iota_f32;
using testing::make_spec;
using testing::run_node;

Tensor expand(const Tensor& x, const Tensor& shape) { return run_node(make_spec("Expand", {x, shape})).at(0); }
Tensor tile(const Tensor& x, const Tensor& repeats) { return run_node(make_spec("Tile", {x, repeats})).at(0); }

TEST(Expand, ShapeShorterThanTheInputAndOnesKeepExtents) {
  // numpy: np.broadcast_to(x, (2, 3)) for x of shape (2, 1); shape [1] keeps x's shape.
  const Tensor x = f32({2, 1}, {1, 2});
  expect_close(expand(x, i64({3})), f32({2, 3}, {1, 1, 1, 2, 2, 2}));
  expect_close(expand(x, i64({1})), x);
  expect_close(expand(x, i64({2, 1, 1})), f32({2, 2, 1}, {1, 2, 1, 2}));
}

TEST(Expand, MiddleAxisOfInt32) {
  const Tensor x = Tensor::from_vector<std::int32_t>({2, 1, 2}, {1, 2, 3, 4});
  const Tensor y = expand(x, i64({2, 3, 2}));
  EXPECT_EQ(y.dtype(), DType::kI32);
  EXPECT_EQ(y.to_int64_vector(), (Ints{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));
}

TEST(Expand, Errors) {
  EXPECT_THROWS_SAYING(expand(f32({3}, {1, 2, 3}), i64({2})), InvalidArgument, "node 'Expand_0' (Expand)",
                       "cannot expand float[3]", "do not broadcast");
  EXPECT_THROWS_SAYING(expand(f32({1}, {1}), i64({-1})), InvalidArgument, "node 'Expand_0'", "negative");
  EXPECT_THROWS_SAYING(expand(f32({1}, {1}), Tensor::from_vector<std::int32_t>({1}, {2})), Unsupported,
                       "node 'Expand_0'", "shape");
}

TEST(Tile, BoolAndZeroRepeats) {
  const Tensor x = Tensor::from_vector<bool>({1, 2}, {true, false});
  const Tensor y = tile(x, i64({2, 2}));
  EXPECT_EQ(y.dtype(), DType::kBool);
  EXPECT_EQ(y.to_int64_vector(), (Ints{1, 0, 1, 0, 1, 0, 1, 0}));
  EXPECT_EQ(tile(iota_f32({2, 3}), i64({0, 1})).shape(), (Shape{0, 3}));
}

TEST(Tile, ThreeDimensions) {
  // numpy: np.tile(np.arange(4).reshape(2, 1, 2), (1, 2, 2))
  const Tensor y = tile(iota_f32({2, 1, 2}), i64({1, 2, 2}));
  expect_close(y, f32({2, 2, 4}, {0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3}));
}

TEST(Tile, Errors) {
  EXPECT_THROWS_SAYING(tile(iota_f32({2, 2}), i64({2})), InvalidArgument, "node 'Tile_0' (Tile)",
                       "repeats [2] must have one entry per dimension of float[2, 2]");
  EXPECT_THROWS_SAYING(tile(iota_f32({2}), i64({-1})), InvalidArgument, "node 'Tile_0'", "negative");
}

}  // namespace
}  // namespace redwood
