// The allocation-free bilinear resize against cv::resize (INTER_LINEAR): the same bytes on random
// pictures of 1 to 4 channels, random sizes and scales both up and down (each way on its own),
// the pipeline's sizes (the detector's input, the recognizer's 48-pixel strips), exact halvings
// (OpenCV's area shortcut), the same size (a copy), one-pixel sources, and views into wider
// pictures.

#include "stages/preprocess/linear_resize.hpp"

#include "core/error.hpp"

#include <gtest/gtest.h>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>
#include <random>

namespace redwood {
namespace {

void expect_same_as_opencv(const cv::Mat& src, cv::Size size, LinearResize& resize) {
  cv::Mat want;
  cv::resize(src, want, size, 0, 0, cv::INTER_LINEAR);
  cv::Mat got(size, src.type(), cv::Scalar::all(3));
  resize.resize(src, got);
  ASSERT_EQ(cv::norm(want, got, cv::NORM_INF), 0) << src.cols << "x" << src.rows << "x" << src.channels() << " -> "
                                                   << size.width << "x" << size.height;
}

cv::Mat random_picture(int rows, int cols, int channels) {
  cv::Mat m(rows, cols, CV_8UC(channels));
  cv::randu(m, cv::Scalar::all(0), cv::Scalar::all(256));
  return m;
}

TEST(LinearResize, RandomSizesAndScales) {
  std::mt19937 rng(41);
  std::uniform_int_distribution<int> side(1, 200), channels(1, 4);
  LinearResize resize;  // one for every case: its tables must follow each call's sizes
  for (int round = 0; round < 1500; ++round) {
    const cv::Mat src = random_picture(side(rng), side(rng), channels(rng));
    expect_same_as_opencv(src, {side(rng), side(rng)}, resize);
  }
}

TEST(LinearResize, ThePipelinesSizes) {
  std::mt19937 rng(43);
  std::uniform_int_distribution<int> width(1, 700), height(8, 120);
  LinearResize resize;
  expect_same_as_opencv(random_picture(576, 768, 3), {416, 320}, resize);
  expect_same_as_opencv(random_picture(576, 768, 3), {832, 640}, resize);
  expect_same_as_opencv(random_picture(1080, 1920, 3), {640, 360}, resize);
  for (int round = 0; round < 300; ++round) {  // text crops to 48-pixel strips, at most 320 wide
    const cv::Mat crop = random_picture(height(rng), width(rng), 3);
    const int w = std::clamp(static_cast<int>(std::ceil(48.0 * crop.cols / crop.rows)), 1, 320);
    expect_same_as_opencv(crop, {w, 48}, resize);
  }
}

TEST(LinearResize, HalvingsCopiesAndEdgeCases) {
  LinearResize resize;
  for (int cn = 1; cn <= 4; ++cn) {
    expect_same_as_opencv(random_picture(96, 130, cn), {65, 48}, resize);   // exact halving: area means
    expect_same_as_opencv(random_picture(97, 130, cn), {65, 48}, resize);   // not quite: bilinear
    expect_same_as_opencv(random_picture(40, 60, cn), {60, 40}, resize);    // same size: a copy
    expect_same_as_opencv(random_picture(40, 60, cn), {60, 20}, resize);    // one axis only
    expect_same_as_opencv(random_picture(1, 1, cn), {37, 5}, resize);
    expect_same_as_opencv(random_picture(1, 9, cn), {4, 3}, resize);
    expect_same_as_opencv(random_picture(9, 1, cn), {3, 17}, resize);
    expect_same_as_opencv(random_picture(50, 50, cn), {1, 1}, resize);
    expect_same_as_opencv(random_picture(3, 500, cn), {1000, 7}, resize);
    const cv::Mat wide = random_picture(80, 120, cn);  // a view: rows apart
    expect_same_as_opencv(wide(cv::Rect(5, 3, 71, 50)), {33, 29}, resize);
  }
}

TEST(LinearResize, AnOutputOfAnotherTypeIsRefused) {
  LinearResize resize;
  const cv::Mat src(8, 8, CV_8UC3, cv::Scalar::all(1));
  cv::Mat grey(4, 4, CV_8UC1), empty;
  EXPECT_THROW(resize.resize(src, grey), InvalidArgument);
  EXPECT_THROW(resize.resize(src, empty), InvalidArgument);
  const cv::Mat floats(8, 8, CV_32FC3, cv::Scalar::all(1));
  cv::Mat float_out(4, 4, CV_32FC3);
  EXPECT_THROW(resize.resize(floats, float_out), InvalidArgument);
}

}  // namespace
}  // namespace redwood
