// A picture input (core/picture_input.hpp): the normalization every runner applies, the model's
// shape of a batch of pixels, the reasons pixels cannot feed an input. The CPU runner's picture
// batches: tests/core/model_runner_test.cpp; against the preprocess stage's own floats
// (image_to_tensor): tests/stages/preprocess/image_tensor_test.cpp; the GPU's kernel and runner:
// tests/backends/cuda/kernels/data/picture_normalize_test.cpp and cuda_model_runner_test.cpp.

#include "core/error.hpp"
#include "core/picture_input.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

namespace redwood {
namespace {

const PictureInput kRgb = PictureInput::from_mean_std(0.5f, {1.f, 2.f, 3.f}, {2.f, 4.f, 8.f}, 3, true);

Tensor pixels(Shape shape, std::uint32_t seed) { return testing::random_tensor(DType::kU8, std::move(shape), 0, 255, seed); }

float normalized(std::uint8_t p, const PictureInput& picture, int c) {
  return static_cast<float>(p) * picture.alpha[static_cast<std::size_t>(c)] + picture.beta[static_cast<std::size_t>(c)];
}

TEST(PictureInput, AlphaAndBetaAreScaleMeanAndStdAsOneMultiplyAdd) {
  for (int c = 0; c < 3; ++c) {
    const float p = 200.f;
    const float want = (p * 0.5f - std::array{1.f, 2.f, 3.f}[c]) / std::array{2.f, 4.f, 8.f}[c];
    EXPECT_NEAR(p * kRgb.alpha[static_cast<std::size_t>(c)] + kRgb.beta[static_cast<std::size_t>(c)], want, 1e-5f);
  }
}

TEST(PictureInput, NormalizesIntoPlanesOrInterleavedPerChannel) {
  const std::int64_t rows = 2, h = 3, w = 5;
  const Tensor px = pixels({rows, h, w, 3}, 1);
  const auto* p = px.data<std::uint8_t>();
  for (bool nchw : {true, false}) {
    PictureInput picture = kRgb;
    picture.nchw = nchw;
    std::vector<float> out(static_cast<std::size_t>(px.numel()), -99.f);
    normalize_picture(p, rows, h, w, picture, out.data());
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t y = 0; y < h; ++y) {
        for (std::int64_t x = 0; x < w; ++x) {
          for (int c = 0; c < 3; ++c) {
            const std::int64_t in = ((r * h + y) * w + x) * 3 + c;
            const std::int64_t at = nchw ? ((r * 3 + c) * h + y) * w + x : in;
            EXPECT_EQ(out[static_cast<std::size_t>(at)], normalized(p[in], picture, c)) << nchw << " " << r << y << x << c;
          }
        }
      }
    }
  }
  // Grey: one channel, the same either way.
  const PictureInput grey = PictureInput::from_mean_std(1.f / 255, {0.5f, 0.f, 0.f}, {0.25f, 1.f, 1.f}, 1, true);
  const Tensor g = pixels({1, h, w, 1}, 2);
  std::vector<float> out(static_cast<std::size_t>(g.numel()));
  normalize_picture(g.data<std::uint8_t>(), 1, h, w, grey, out.data());
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], normalized(g.data<std::uint8_t>()[i], grey, 0));
}

TEST(PictureInput, TheModelShapeOfPixelsAndWhyTheyMayNotFit) {
  PictureInput nhwc = kRgb;
  nhwc.nchw = false;
  EXPECT_EQ(picture_model_shape({4, 32, 48, 3}, kRgb), (Shape{4, 3, 32, 48}));
  EXPECT_EQ(picture_model_shape({4, 32, 48, 3}, nhwc), (Shape{4, 32, 48, 3}));
  EXPECT_THROW(picture_model_shape({4, 32, 48, 1}, kRgb), InvalidArgument);
  EXPECT_THROW(picture_model_shape({32, 48, 3}, kRgb), InvalidArgument);

  const ValueInfo nchw_input = testing::batched_nchw("x", 3, 32, 48);
  EXPECT_EQ(picture_mismatch(nchw_input, kRgb, 32, 48), "");
  EXPECT_EQ(picture_mismatch(nchw_input, kRgb, -1, -1), "");  // not known yet: fits
  EXPECT_EQ(picture_mismatch(nchw_input, kRgb, 16, 48), "the picture is 16 tall, the input 32 (NCHW)");
  EXPECT_EQ(picture_mismatch(nchw_input, kRgb, 32, 40), "the picture is 40 wide, the input 48 (NCHW)");
  // Read as NHWC, [N, 3, 32, 48] has 48 channels.
  EXPECT_EQ(picture_mismatch(nchw_input, nhwc, 3, 32), "3 channel(s) in the picture, 48 in the input (NHWC)");
  ValueInfo ints = nchw_input;
  ints.dtype = DType::kI64;
  EXPECT_EQ(picture_mismatch(ints, kRgb, 32, 48), "a picture feeds float inputs only");
}

}  // namespace
}  // namespace redwood
