// The allocation-free polygon fill against cv::fillPoly (8-bit, LINE_8): the same pixels set on
// the contours of random blobs (the DB postprocess's score masks), random convex quads, random
// polygons that cross themselves, and degenerate ones (a point, a segment, repeated vertices).

#include "stages/postprocess/polygon_fill.hpp"

#include "core/error.hpp"

#include <gtest/gtest.h>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace redwood {
namespace {

void expect_same_as_opencv(cv::Size size, const std::vector<cv::Point>& polygon, PolygonFill& fill,
                           const std::string& what) {
  cv::Mat want(size, CV_8U, cv::Scalar::all(7)), got(size, CV_8U, cv::Scalar::all(7));
  const std::vector<std::vector<cv::Point>> polygons{polygon};
  cv::fillPoly(want, polygons, cv::Scalar::all(1));
  fill.fill(got, polygon, 1);
  ASSERT_EQ(cv::norm(want, got, cv::NORM_INF), 0) << what << ": " << cv::Mat(polygon).t();
}

TEST(PolygonFill, ContoursOfBlobsInTheirBoundingBoxes) {
  std::mt19937 rng(29);
  std::uniform_real_distribution<float> at(0.f, 300.f), size(1.f, 80.f), angle(0.f, 180.f);
  PolygonFill fill;
  for (int round = 0; round < 60; ++round) {
    cv::Mat mask(240, 300, CV_8U, cv::Scalar::all(0));
    for (int k = 0; k < 12; ++k) {
      cv::ellipse(mask, cv::RotatedRect({at(rng), at(rng)}, {size(rng), size(rng) / 3}, angle(rng)),
                  cv::Scalar::all(k % 3 == 2 ? 0 : 255), cv::FILLED);
    }
    std::vector<std::vector<cv::Point>> contours;
    cv::findContours(mask, contours, cv::RETR_LIST, cv::CHAIN_APPROX_SIMPLE);
    for (auto& contour : contours) {
      const cv::Rect box = cv::boundingRect(contour);
      for (auto& p : contour) p -= box.tl();
      expect_same_as_opencv(box.size(), contour, fill, "contour");
    }
  }
}

TEST(PolygonFill, RandomPolygons) {
  std::mt19937 rng(31);
  std::uniform_int_distribution<int> side(1, 120), vertices(1, 12);
  PolygonFill fill;
  for (int round = 0; round < 3000; ++round) {
    const cv::Size size(side(rng), side(rng));
    std::uniform_int_distribution<int> x(0, size.width - 1), y(0, size.height - 1);
    std::vector<cv::Point> polygon;
    if (round % 2 == 0) {  // a rotated rectangle's corners, as the DB boxes are
      std::uniform_real_distribution<float> fx(0.f, static_cast<float>(size.width - 1)),
          fy(0.f, static_cast<float>(size.height - 1)), angle(0.f, 180.f);
      const cv::RotatedRect r({fx(rng), fy(rng)}, {fx(rng), fy(rng)}, angle(rng));
      cv::Point2f corners[4];
      r.points(corners);
      for (const auto& c : corners) {
        polygon.emplace_back(std::clamp(cvRound(c.x), 0, size.width - 1), std::clamp(cvRound(c.y), 0, size.height - 1));
      }
    } else {
      const int n = vertices(rng);
      for (int i = 0; i < n; ++i) polygon.emplace_back(x(rng), y(rng));
    }
    expect_same_as_opencv(size, polygon, fill, "round " + std::to_string(round));
  }
}

TEST(PolygonFill, PointsOutsideTheImageAreRefused) {
  PolygonFill fill;
  cv::Mat image(10, 10, CV_8U, cv::Scalar::all(0));
  const std::vector<cv::Point> outside{{0, 0}, {10, 3}, {2, 5}};
  EXPECT_THROW(fill.fill(image, outside, 1), InvalidArgument);
  cv::Mat colour(10, 10, CV_8UC3);
  const std::vector<cv::Point> inside{{0, 0}, {9, 3}, {2, 5}};
  EXPECT_THROW(fill.fill(colour, inside, 1), InvalidArgument);
}

}  // namespace
}  // namespace redwood
