// DB decoding on synthetic probability maps: a rectangle of text becomes one quad around it,
// grown by the unclip ratio; weak or tiny regions are dropped; each candidate's contour,
// rectangle and score are the ones OpenCV's functions give.

#include "stages/postprocess/db_text.hpp"

#include "stages/postprocess/contours.hpp"
#include "stages/postprocess/min_area_rect.hpp"
#include "stages/postprocess/polygon_fill.hpp"

#include <gtest/gtest.h>
#include <opencv2/imgproc.hpp>

#include <algorithm>
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

// decode_db's steps are Redwood's copies of OpenCV's functions: on detector-like maps (text bars,
// some tilted, touching or with holes, over blurred noise), the same contours, and for each the
// same rectangle and score as the OpenCV calls they replace (the contour's convex hull as floats
// given to cv::minAreaRect; cv::fillPoly's mask averaged by cv::mean).
TEST(DbText, EachCandidateIsTheOneOpenCvGives) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> x(0.f, 416.f), y(0.f, 320.f), length(5.f, 200.f), thickness(2.f, 24.f),
      tilt(-30.f, 30.f);
  ContourList contours;
  HullScratch scratch;
  PolygonFill fill;
  std::vector<cv::Point> shifted;
  for (int round = 0; round < 20; ++round) {
    cv::Mat map(320, 416, CV_32F);
    cv::randu(map, 0.f, 0.5f);
    cv::GaussianBlur(map, map, cv::Size(7, 7), 0);
    for (int k = 0; k < 30; ++k) {
      const cv::RotatedRect bar({x(rng), y(rng)}, {length(rng), thickness(rng)}, tilt(rng));
      cv::ellipse(map, bar, cv::Scalar::all(k % 5 == 4 ? 0.1 : 0.95), k % 3 == 0 ? 3 : cv::FILLED);
    }
    cv::GaussianBlur(map, map, cv::Size(3, 3), 0);
    cv::Mat mask;
    cv::compare(map, 0.3, mask, cv::CMP_GT);
    std::vector<std::vector<cv::Point>> want;
    cv::findContours(mask, want, cv::RETR_LIST, cv::CHAIN_APPROX_SIMPLE);
    find_contours(mask, contours);
    ASSERT_EQ(contours.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      const auto contour = contours[i];
      ASSERT_TRUE(std::equal(contour.begin(), contour.end(), want[i].begin(), want[i].end()));
      std::vector<cv::Point> hull;
      cv::convexHull(want[i], hull);
      const cv::RotatedRect want_rect = cv::minAreaRect(std::vector<cv::Point2f>(hull.begin(), hull.end()));
      const cv::RotatedRect got_rect = min_area_rect(contour, scratch);
      EXPECT_EQ(got_rect.center, want_rect.center);
      EXPECT_EQ(got_rect.size, want_rect.size);
      EXPECT_EQ(got_rect.angle, want_rect.angle);
      const cv::Rect box = cv::boundingRect(want[i]);
      std::vector<std::vector<cv::Point>> want_polygon{want[i]};
      for (auto& p : want_polygon[0]) p -= box.tl();
      shifted = want_polygon[0];
      cv::Mat want_mask(box.size(), CV_8U, cv::Scalar::all(0)), got_mask(box.size(), CV_8U, cv::Scalar::all(0));
      cv::fillPoly(want_mask, want_polygon, cv::Scalar(1));
      fill.fill(got_mask, shifted, 1);
      EXPECT_EQ(cv::mean(map(box), got_mask)[0], cv::mean(map(box), want_mask)[0]);
    }
  }
}

}  // namespace
}  // namespace redwood
