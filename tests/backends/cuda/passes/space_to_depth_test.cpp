// backends/cuda/passes/space_to_depth.hpp: a stride-2 convolution equals the stride-1 convolution over the 2x2
// space-to-depth of its input with the rearranged weights and the computed pads, to fp32 summation
// order, for the ResNet stem (7x7/2 pad 3 on 224x224), odd extents (37x33), 3x3/2 pad 1, 5x5/2
// pad 2, asymmetric pads and even kernels, 1 to 4 channels; and the shapes the algebra does not
// cover are refused (nullopt).

#include "backends/cuda/passes/space_to_depth.hpp"
#include "backends/cpu/reference/space_to_depth.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <array>

namespace redwood {
namespace {

using redwood::testing::Ints;

struct Case {
  std::int64_t n, c, h, w, k, r, s;
  std::array<std::int64_t, 4> pads;  // top, left, bottom, right
};

// The convolution through the executor (fp32 CPU kernels) with the given window attributes.
Tensor conv(const Tensor& x, const Tensor& w, const Tensor& b, const Ints& strides, const Ints& pads) {
  return testing::run_node(testing::make_spec("Conv", {x, w, b}, {{"strides", strides}, {"pads", pads}})).at(0);
}

TEST(SpaceToDepth, StrideTwoConvolutionEqualsStrideOneOverTheSpaceToDepth) {
  const Case cases[] = {
      {1, 3, 224, 224, 8, 7, 7, {3, 3, 3, 3}},  // the ResNet stem
      {2, 3, 37, 33, 8, 7, 7, {3, 3, 3, 3}},    // odd extents
      {2, 3, 37, 33, 16, 3, 3, {1, 1, 1, 1}},   // MobileNet's stem
      {1, 3, 30, 31, 8, 5, 5, {2, 2, 2, 2}},
      {1, 4, 17, 20, 8, 5, 5, {1, 2, 2, 1}},    // asymmetric pads, 4 channels
      {2, 1, 19, 18, 8, 4, 6, {1, 2, 1, 2}},    // even kernels, 1 channel
      {1, 2, 21, 21, 8, 3, 7, {0, 3, 1, 3}},
  };
  std::uint32_t seed = 40;
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str({c.n, c.c, c.h, c.w}) + " kernel " + std::to_string(c.r) + "x" + std::to_string(c.s));
    const Tensor x = testing::random_tensor(DType::kF32, {c.n, c.c, c.h, c.w}, -1, 1, ++seed);
    const Tensor w = testing::random_tensor(DType::kF32, {c.k, c.c, c.r, c.s}, -0.5, 0.5, ++seed);
    const Tensor b = testing::random_tensor(DType::kF32, {c.k}, -0.2, 0.2, ++seed);
    const auto plan = plan_space_to_depth_conv(c.h, c.w, c.r, c.s, c.pads);
    ASSERT_TRUE(plan.has_value());
    const Tensor want = conv(x, w, b, {2, 2}, Ints(c.pads.begin(), c.pads.end()));
    const Tensor xs = space_to_depth(x);
    EXPECT_EQ(xs.shape(), (Shape{c.n, 4 * c.c, (c.h + 1) / 2, (c.w + 1) / 2}));
    const Tensor ws = space_to_depth_weights(w, *plan);
    EXPECT_EQ(ws.shape(), (Shape{c.k, 4 * c.c, plan->kernel_h, plan->kernel_w}));
    const Tensor got = conv(xs, ws, b, {1, 1}, Ints(plan->pads.begin(), plan->pads.end()));
    ASSERT_EQ(got.shape(), want.shape());
    EXPECT_LT(testing::relative_l2(got, want), 1e-6);
  }
}

TEST(SpaceToDepth, TheStemsPlan) {
  // 7x7/2 pad 3 on 224: one zero tap in front (3 is odd), a 4x4 kernel, pads 2 and 1 (112 rows
  // out of a 112-row image).
  const auto stem = plan_space_to_depth_conv(224, 224, 7, 7, {3, 3, 3, 3});
  ASSERT_TRUE(stem.has_value());
  EXPECT_EQ(stem->kernel_h, 4);
  EXPECT_EQ(stem->kernel_w, 4);
  EXPECT_EQ(stem->shift_h, 1);
  EXPECT_EQ(stem->pads, (std::array<std::int64_t, 4>{2, 2, 1, 1}));
  // 3x3/2 pad 1: 2x2, pads 1 and 0.
  const auto small = plan_space_to_depth_conv(224, 224, 3, 3, {1, 1, 1, 1});
  ASSERT_TRUE(small.has_value());
  EXPECT_EQ(small->kernel_h, 2);
  EXPECT_EQ(small->pads, (std::array<std::int64_t, 4>{1, 1, 0, 0}));
  // 5x5/2 pad 2: no shift, 3x3.
  const auto five = plan_space_to_depth_conv(224, 224, 5, 5, {2, 2, 2, 2});
  ASSERT_TRUE(five.has_value());
  EXPECT_EQ(five->kernel_h, 3);
  EXPECT_EQ(five->shift_h, 0);
  EXPECT_EQ(five->pads, (std::array<std::int64_t, 4>{1, 1, 1, 1}));

  // The weights: tap (ty, tx) of channel c lands at channel (dy·2 + dx)·C + c, tap (jy, jx) with
  // 2j + d - shift = t.
  Tensor w = Tensor::zeros(DType::kF32, {1, 3, 7, 7});
  w.data<float>()[(2 * 7 + 0) * 7 + 5] = 1.5f;  // c 2, ty 0, tx 5
  const Tensor ws = space_to_depth_weights(w, *stem);
  // With the shift of 1: ty + 1 = 1 = 2·0 + 1 → jy 0, dy 1; tx + 1 = 6 = 2·3 + 0 → jx 3, dx 0.
  const std::int64_t channel = (1 * 2 + 0) * 3 + 2;
  EXPECT_EQ(ws.data<float>()[(channel * 4 + 0) * 4 + 3], 1.5f);
  double sum = 0;
  for (std::int64_t i = 0; i < ws.numel(); ++i) sum += ws.data<float>()[i];
  EXPECT_EQ(sum, 1.5);
}

TEST(SpaceToDepth, RefusesWhatItDoesNotCover) {
  // An odd extent, an even kernel and no padding: the last input row is read by no window, and the
  // stride-1 convolution would need a negative end pad.
  EXPECT_FALSE(plan_space_to_depth_conv(9, 8, 4, 3, {0, 0, 0, 0}).has_value());
  EXPECT_FALSE(plan_space_to_depth_conv(8, 9, 3, 4, {0, 0, 0, 0}).has_value());
  // An input smaller than the kernel, a negative pad.
  EXPECT_FALSE(plan_space_to_depth_conv(4, 4, 7, 7, {0, 0, 0, 0}).has_value());
  EXPECT_FALSE(plan_space_to_depth_conv(16, 16, 3, 3, {-1, 1, 1, 1}).has_value());
}

}  // namespace
}  // namespace redwood
