// The allocation-free contour tracer against cv::findContours (RETR_LIST, CHAIN_APPROX_SIMPLE): the
// same contours in the same order, point for point, on random noise (single pixels, diagonal
// touches, holes of one pixel), nested blobs with holes and islands in them, shapes that touch
// the picture's edges, thresholded smooth maps like the DB detector's, and the small cases.

#include "stages/postprocess/contours.hpp"

#include "core/error.hpp"

#include <gtest/gtest.h>
#include <opencv2/imgproc.hpp>

#include <random>
#include <string>
#include <vector>

namespace redwood {
namespace {

void expect_same_as_opencv(const cv::Mat& mask, ContourList& got, const std::string& what) {
  std::vector<std::vector<cv::Point>> want;
  cv::findContours(mask, want, cv::RETR_LIST, cv::CHAIN_APPROX_SIMPLE);
  find_contours(mask, got);
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto c = got[i];
    ASSERT_EQ(c.size(), want[i].size()) << what << ", contour " << i;
    for (std::size_t k = 0; k < c.size(); ++k) {
      ASSERT_EQ(c[k], want[i][k]) << what << ", contour " << i << ", point " << k;
    }
  }
}

cv::Mat noise(int rows, int cols, double density, std::mt19937& rng) {
  cv::Mat mask(rows, cols, CV_8U);
  std::bernoulli_distribution on(density);
  std::uniform_int_distribution<int> value(1, 255);  // any nonzero byte is foreground
  for (int y = 0; y < rows; ++y) {
    for (int x = 0; x < cols; ++x) mask.at<std::uint8_t>(y, x) = on(rng) ? static_cast<std::uint8_t>(value(rng)) : 0;
  }
  return mask;
}

// Blobs drawn over each other in alternating colours: each later one may cut a hole in an earlier
// one or put an island in a hole; some run off the picture's edges.
cv::Mat nested_blobs(int rows, int cols, int count, std::mt19937& rng) {
  cv::Mat mask(rows, cols, CV_8U, cv::Scalar::all(0));
  std::uniform_real_distribution<float> x(-5.f, static_cast<float>(cols) + 5.f);
  std::uniform_real_distribution<float> y(-5.f, static_cast<float>(rows) + 5.f);
  std::uniform_real_distribution<float> size(1.f, static_cast<float>(std::min(rows, cols)) / 2.f), angle(0.f, 180.f);
  std::uniform_int_distribution<int> kind(0, 2);
  for (int k = 0; k < count; ++k) {
    const cv::Scalar colour = cv::Scalar::all(k % 2 == 0 ? 255 : 0);
    const cv::RotatedRect r({x(rng), y(rng)}, {size(rng), size(rng) * 2.f / static_cast<float>(k + 1)}, angle(rng));
    switch (kind(rng)) {
      case 0: cv::ellipse(mask, r, colour, cv::FILLED); break;
      case 1: {
        cv::Point2f corners[4];
        r.points(corners);
        std::vector<cv::Point> quad(corners, corners + 4);
        cv::fillConvexPoly(mask, quad, colour);
        break;
      }
      default: cv::ellipse(mask, r, colour, 1 + k % 3); break;  // rings: holes with islands
    }
  }
  return mask;
}

cv::Mat thresholded_smooth(int rows, int cols, std::mt19937& rng) {
  cv::Mat map(rows, cols, CV_32F);
  cv::randu(map, 0.f, 1.f);
  std::uniform_int_distribution<int> blur(1, 4);
  const int k = 2 * blur(rng) + 1;
  cv::GaussianBlur(map, map, cv::Size(k, k), 0);
  cv::Mat mask;
  cv::compare(map, 0.5, mask, cv::CMP_GT);
  return mask;
}

TEST(Contours, TheSameContoursInTheSameOrderAsOpenCv) {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> side(1, 90);
  std::uniform_real_distribution<double> density(0.05, 0.95);
  ContourList got;  // one list for every case: what a reused list keeps must not leak into the next
  for (int round = 0; round < 300; ++round) {
    const int rows = side(rng), cols = side(rng);
    expect_same_as_opencv(noise(rows, cols, density(rng), rng), got, "noise " + std::to_string(round));
    expect_same_as_opencv(nested_blobs(rows + 20, cols + 20, 2 + round % 12, rng), got,
                          "blobs " + std::to_string(round));
    expect_same_as_opencv(thresholded_smooth(rows + 10, cols + 10, rng), got, "smooth " + std::to_string(round));
  }
}

TEST(Contours, DetectorSizedMasks) {
  std::mt19937 rng(3);
  ContourList got;
  for (int round = 0; round < 10; ++round) {
    expect_same_as_opencv(thresholded_smooth(320, 416, rng), got, "smooth");
    expect_same_as_opencv(nested_blobs(320, 416, 40, rng), got, "blobs");
  }
}

TEST(Contours, SmallAndWholeMasks) {
  ContourList got;
  std::mt19937 rng(9);
  for (const cv::Size size : {cv::Size(1, 1), cv::Size(1, 7), cv::Size(7, 1), cv::Size(2, 2), cv::Size(64, 3)}) {
    expect_same_as_opencv(cv::Mat(size, CV_8U, cv::Scalar::all(0)), got, "empty");
    expect_same_as_opencv(cv::Mat(size, CV_8U, cv::Scalar::all(255)), got, "full");
    for (int i = 0; i < 20; ++i) expect_same_as_opencv(noise(size.height, size.width, 0.5, rng), got, "noise");
  }
  cv::Mat frame(40, 50, CV_8U, cv::Scalar::all(255));  // a hole in a mask that fills the picture
  frame(cv::Rect(10, 10, 20, 15)).setTo(0);
  expect_same_as_opencv(frame, got, "frame");
  const cv::Mat big = nested_blobs(100, 120, 20, rng);  // a view into a wider picture
  expect_same_as_opencv(big(cv::Rect(7, 5, 83, 61)), got, "view");
}

TEST(Contours, AnotherTypeIsRefused) {
  ContourList got;
  EXPECT_THROW(find_contours(cv::Mat(4, 4, CV_8UC3, cv::Scalar::all(1)), got), InvalidArgument);
  EXPECT_THROW(find_contours(cv::Mat(4, 4, CV_32F, cv::Scalar::all(1)), got), InvalidArgument);
  find_contours(cv::Mat(), got);
  EXPECT_TRUE(got.empty());
}

}  // namespace
}  // namespace redwood
