// BlazeFace decoding: MediaPipe's anchor layout, offsets relative to anchors, sigmoid scores,
// NMS.

#include "stages/postprocess/blazeface.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace redwood {
namespace {

TEST(BlazeFace, AnchorsFollowMediaPipe) {
  for (int size : {128, 256}) {
    const auto a = blazeface_anchors(size);
    ASSERT_EQ(a.size(), 896u) << size;
    EXPECT_FLOAT_EQ(a[0].cx, 0.5f / 16);  // first map: 16 x 16 cells, 2 anchors each
    EXPECT_FLOAT_EQ(a[1].cx, 0.5f / 16);
    EXPECT_FLOAT_EQ(a[2].cx, 1.5f / 16);
    EXPECT_FLOAT_EQ(a[512].cx, 0.5f / 8);  // second map: 8 x 8 cells, 6 anchors each
    EXPECT_FLOAT_EQ(a[517].cx, 0.5f / 8);
    EXPECT_FLOAT_EQ(a[518].cx, 1.5f / 8);
  }
}

TEST(BlazeFace, DecodesOffsetsAndSuppressesOverlaps) {
  const auto anchors = blazeface_anchors(128);
  std::vector<float> scores(896, -10.f), boxes(896 * 16, 0.f);
  // Two overlapping candidates around anchor 100 and one apart at anchor 700.
  for (int i : {100, 101, 700}) {
    scores[i] = i == 100 ? 3.f : 2.f;
    boxes[i * 16 + 0] = 6.4f;  // +0.05 of the input in x
    boxes[i * 16 + 2] = 25.6f;  // width 0.2
    boxes[i * 16 + 3] = 12.8f;  // height 0.1
    boxes[i * 16 + 4] = -6.4f;  // first keypoint -0.05 in x
  }
  const auto faces = decode_blazeface(scores.data(), boxes.data(), anchors, 128, {});
  ASSERT_EQ(faces.size(), 2u);
  EXPECT_NEAR(faces[0].score, 1.f / (1.f + std::exp(-3.f)), 1e-5);
  EXPECT_NEAR(faces[0].box.x + faces[0].box.width / 2, anchors[100].cx + 0.05f, 1e-5);
  EXPECT_NEAR(faces[0].box.width, 0.2f, 1e-5);
  EXPECT_NEAR(faces[0].box.height, 0.1f, 1e-5);
  EXPECT_NEAR(faces[0].keypoints[0].x, anchors[100].cx - 0.05f, 1e-5);
  EXPECT_EQ(faces[0].keypoints.size(), 6u);
}

}  // namespace
}  // namespace redwood
