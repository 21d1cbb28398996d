// DB decoding on synthetic probability maps: a rectangle of text becomes one quad around it,
// grown by the unclip ratio; weak or tiny regions are dropped.

#include "stages/postprocess/db_text.hpp"

#include <gtest/gtest.h>
#include <opencv2/imgproc.hpp>

#include <random>
#include <vector>

namespace redwood {
namespace {

struct Region {
  int x, y, width, height;
};

std::vector<float> map_with(int h, int w, Region r, float p) {
  std::vector<float> m(static_cast<std::size_t>(h) * w, 0.f);
  for (int y = r.y; y < r.y + r.height; ++y)
    for (int x = r.x; x < r.x + r.width; ++x) m[static_cast<std::size_t>(y) * w + x] = p;
  return m;
}

TEST(DbText, OneRegionBecomesAnUnclippedQuad) {
  const auto m = map_with(64, 128, {20, 30, 60, 10}, 0.9f);
  const auto quads = decode_db(m.data(), 64, 128, {});
  ASSERT_EQ(quads.size(), 1u);
  const auto& q = quads[0];
  EXPECT_NEAR(q.score, 0.9f, 1e-3);
  // minAreaRect of the pixel contour is 59 x 9; d = 59*9*1.5/(2*68) ~ 5.9 on every side.
  EXPECT_NEAR(q.points[0].x, 20 - 5.9, 1.0);
  EXPECT_NEAR(q.points[0].y, 30 - 5.9, 1.0);
  EXPECT_NEAR(q.points[2].x, 79 + 5.9, 1.0);
  EXPECT_NEAR(q.points[2].y, 39 + 5.9, 1.0);
  EXPECT_LT(q.points[0].x, q.points[1].x);  // clockwise from top-left
  EXPECT_LT(q.points[1].y, q.points[2].y);
}

TEST(DbText, WeakAndTinyRegionsAreDropped) {
  auto weak = map_with(64, 128, {20, 30, 60, 10}, 0.5f);  // above threshold, below box_threshold
  EXPECT_TRUE(decode_db(weak.data(), 64, 128, {}).empty());
  auto tiny = map_with(64, 128, {20, 30, 2, 2}, 0.9f);
  EXPECT_TRUE(decode_db(tiny.data(), 64, 128, {}).empty());
}

TEST(DbText, QuadsSortTopToBottomThenLeftToRight) {
  auto m = map_with(100, 200, {120, 10, 40, 10}, 0.9f);
  const auto b = map_with(100, 200, {10, 12, 40, 10}, 0.9f);
  const auto c = map_with(100, 200, {10, 60, 40, 10}, 0.9f);
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = std::max({m[i], b[i], c[i]});
  const auto quads = decode_db(m.data(), 100, 200, {});
  ASSERT_EQ(quads.size(), 3u);
  EXPECT_LT(quads[0].points[0].x, 60);
  EXPECT_GT(quads[1].points[0].x, 100);
  EXPECT_GT(quads[2].points[0].y, 40);
}

// decode_db hands minAreaRect the contour's convex hull as floats (no conversion inside OpenCV):
// on ragged blobs of random shapes, the very rectangle minAreaRect finds from the contour itself.
TEST(DbText, TheFloatHullGivesTheContoursMinimumRectangle) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> coordinate(5, 150), size(3, 40);
  for (int round = 0; round < 20; ++round) {
    cv::Mat mask(200, 200, CV_8U, cv::Scalar::all(0));
    for (int k = 0; k < 8; ++k) {
      const cv::RotatedRect blob(cv::Point2f(static_cast<float>(coordinate(rng)), static_cast<float>(coordinate(rng))),
                                 cv::Size2f(static_cast<float>(size(rng)), static_cast<float>(size(rng))),
                                 static_cast<float>(coordinate(rng)));
      cv::ellipse(mask, blob, cv::Scalar::all(255), cv::FILLED);
    }
    std::vector<std::vector<cv::Point>> contours;
    cv::findContours(mask, contours, cv::RETR_LIST, cv::CHAIN_APPROX_SIMPLE);
    for (const auto& contour : contours) {
      std::vector<cv::Point> hull;
      cv::convexHull(contour, hull);
      const std::vector<cv::Point2f> hull_points(hull.begin(), hull.end());
      const cv::RotatedRect want = cv::minAreaRect(contour), got = cv::minAreaRect(hull_points);
      EXPECT_EQ(got.center, want.center);
      EXPECT_EQ(got.size, want.size);
      EXPECT_EQ(got.angle, want.angle);
    }
  }
}

}  // namespace
}  // namespace redwood
