// DepthToSpace and SpaceToDepth beyond the ONNX node tests: a blocksize of 3, a uint8 input, each
// the inverse of the other in the matching mode, the 2x2 helper's odd extents, and the error paths.

#include "backends/cpu/reference/space_to_depth.hpp"
#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

namespace redwood {
namespace {

using testing::expect_close;
using testing::f32;
using testing::Ints;
using testing::iota_f32;
using testing::make_spec;
using testing::run_node;

Tensor depth_to_space(const Tensor& x, std::int64_t block, std::string mode = "DCR") {
  return run_node(make_spec("DepthToSpace", {x}, {{"blocksize", block}, {"mode", mode}})).at(0);
}
Tensor space_to_depth_op(const Tensor& x, std::int64_t block) {
  return run_node(make_spec("SpaceToDepth", {x}, {{"blocksize", block}})).at(0);
}

TEST(SpaceToDepth, BlockThreeOnUint8) {
  // x[0, 0] = [[0..5], [6..11], [12..17]]: channel dy·3 + dx holds x[3Y + dy, 3X + dx].
  std::vector<std::uint8_t> v(18);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::uint8_t>(i);
  const Tensor y = space_to_depth_op(Tensor::from_vector<std::uint8_t>({1, 1, 3, 6}, v), 3);
  EXPECT_EQ(y.dtype(), DType::kU8);
  EXPECT_EQ(y.shape(), (Shape{1, 9, 1, 2}));
  EXPECT_EQ(y.to_int64_vector(), (Ints{0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11, 12, 15, 13, 16, 14, 17}));
}

TEST(DepthToSpace, InvertsSpaceToDepthInDcrMode) {
  const Tensor x = iota_f32({2, 3, 4, 6});
  const Tensor s = space_to_depth_op(x, 2);
  expect_close(depth_to_space(s, 2, "DCR"), x);
  // CRD orders the channels differently, so it is not the inverse here.
  EXPECT_GT(testing::relative_l2(depth_to_space(s, 2, "CRD"), x), 0.1);
}

TEST(SpaceToDepth, TheTwoByTwoHelperPadsOddExtents) {
  // A 3x3 image: the last row and column pair with zeros.
  const Tensor y = space_to_depth(iota_f32({1, 1, 3, 3}));
  expect_close(y, f32({1, 4, 2, 2}, {0, 2, 6, 8, 1, 0, 7, 0, 3, 5, 0, 0, 4, 0, 0, 0}));
}

TEST(DepthToSpace, Errors) {
  EXPECT_THROWS_SAYING(depth_to_space(iota_f32({1, 6, 2, 2}), 2), InvalidArgument,
                       "node 'DepthToSpace_0' (DepthToSpace)", "not a multiple of blocksize² = 4");
  // Attributes are checked at load, where the executor reports what it cannot run as Unsupported.
  EXPECT_THROWS_SAYING(depth_to_space(iota_f32({1, 4, 2, 2}), 2, "XYZ"), Unsupported, "node 'DepthToSpace_0'",
                       "mode 'XYZ' is neither DCR nor CRD");
  EXPECT_THROWS_SAYING(depth_to_space(iota_f32({4, 2, 2}), 2), InvalidArgument, "must be [N, C, H, W]");
  EXPECT_THROWS_SAYING(space_to_depth_op(iota_f32({1, 1, 4, 3}), 2), InvalidArgument,
                       "node 'SpaceToDepth_0' (SpaceToDepth)", "not a multiple of blocksize 2");
  EXPECT_THROWS_SAYING(space_to_depth_op(iota_f32({1, 1, 4, 4}), 0), Unsupported, "blocksize 0 must be positive");
}

}  // namespace
}  // namespace redwood
