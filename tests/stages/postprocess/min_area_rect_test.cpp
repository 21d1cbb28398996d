// The allocation-free convex hull and minimum-area rectangle against cv::convexHull and
// cv::minAreaRect: the same hull points in the same order and the same rectangle, float for
// float, on contours of random blobs (what the DB postprocess gives them), random integer and
// float point sets, duplicates, points on one line, and one or two points.

#include "stages/postprocess/min_area_rect.hpp"

#include <gtest/gtest.h>
#include <opencv2/imgproc.hpp>

#include <random>
#include <string>
#include <vector>

namespace redwood {
namespace {

template <typename Point>
void expect_same_as_opencv(const std::vector<Point>& points, HullScratch& scratch, const std::string& what) {
  std::vector<Point> want_hull, got_hull;
  cv::convexHull(points, want_hull);
  convex_hull(std::span<const Point>(points), got_hull, scratch);
  ASSERT_EQ(got_hull, want_hull) << what;
  const cv::RotatedRect want = cv::minAreaRect(points);
  const cv::RotatedRect got = min_area_rect(std::span<const Point>(points), scratch);
  ASSERT_EQ(got.center, want.center) << what;
  ASSERT_EQ(got.size, want.size) << what;
  ASSERT_EQ(got.angle, want.angle) << what;
}

std::vector<std::vector<cv::Point>> blob_contours(std::mt19937& rng) {
  cv::Mat mask(200, 240, CV_8U, cv::Scalar::all(0));
  std::uniform_real_distribution<float> at(0.f, 240.f), size(1.f, 60.f), angle(0.f, 180.f);
  for (int k = 0; k < 10; ++k) {
    cv::ellipse(mask, cv::RotatedRect({at(rng), at(rng)}, {size(rng), size(rng) / 4}, angle(rng)), cv::Scalar::all(255),
                cv::FILLED);
  }
  std::vector<std::vector<cv::Point>> contours;
  cv::findContours(mask, contours, cv::RETR_LIST, cv::CHAIN_APPROX_SIMPLE);
  return contours;
}

TEST(MinAreaRect, ContoursOfBlobs) {
  std::mt19937 rng(11);
  HullScratch scratch;
  for (int round = 0; round < 100; ++round) {
    for (const auto& contour : blob_contours(rng)) {
      expect_same_as_opencv(contour, scratch, "contour");
      std::vector<cv::Point> hull;  // the DB postprocess's float hull, as minAreaRect is given it
      cv::convexHull(contour, hull);
      expect_same_as_opencv(std::vector<cv::Point2f>(hull.begin(), hull.end()), scratch, "float hull");
    }
  }
}

TEST(MinAreaRect, RandomPointSets) {
  std::mt19937 rng(23);
  std::uniform_int_distribution<int> count(1, 60), coordinate(-50, 50), small(0, 3);
  std::uniform_real_distribution<float> real(-100.f, 100.f);
  HullScratch scratch;
  for (int round = 0; round < 2000; ++round) {
    const int n = count(rng);
    std::vector<cv::Point> ints;
    std::vector<cv::Point2f> floats;
    for (int i = 0; i < n; ++i) {
      ints.emplace_back(round % 3 == 0 ? small(rng) : coordinate(rng), coordinate(rng));  // many repeats when small
      floats.emplace_back(real(rng), real(rng));
    }
    expect_same_as_opencv(ints, scratch, "ints " + std::to_string(round));
    expect_same_as_opencv(floats, scratch, "floats " + std::to_string(round));
  }
}

TEST(MinAreaRect, DegenerateSets) {
  HullScratch scratch;
  const std::vector<std::vector<cv::Point>> sets = {
      {{3, 4}},
      {{3, 4}, {3, 4}, {3, 4}},
      {{0, 0}, {5, 2}},
      {{0, 0}, {1, 1}, {2, 2}, {3, 3}, {1, 1}},  // one line, a repeat in it
      {{0, 5}, {0, 1}, {0, 3}},                   // one vertical line
      {{4, 0}, {1, 0}, {9, 0}, {1, 0}},           // one horizontal line
      {{0, 0}, {10, 0}, {10, 10}, {0, 10}},
      {{0, 0}, {10, 0}, {10, 10}, {0, 10}, {5, 5}, {10, 5}, {0, 0}},
  };
  for (const auto& points : sets) expect_same_as_opencv(points, scratch, "set of " + std::to_string(points.size()));
}

TEST(MinAreaRect, NoPointsGiveAnEmptyRectangle) {
  HullScratch scratch;
  const cv::RotatedRect r = min_area_rect(std::span<const cv::Point>(), scratch);
  EXPECT_EQ(r.size, cv::Size2f(0, 0));
  std::vector<cv::Point> hull{{1, 1}};
  convex_hull(std::span<const cv::Point>(), hull, scratch);
  EXPECT_TRUE(hull.empty());
}

}  // namespace
}  // namespace redwood
