// The allocation-free perspective warp against OpenCV's own (cv::getPerspectiveTransform,
// cv::warpPerspective with INTER_CUBIC and BORDER_REPLICATE): the same matrix and the same bytes,
// on random pictures and quads of text-crop shapes, sources smaller than the 4x4 kernel, quads
// reaching outside the picture, and outputs wider than one of OpenCV's 64-column blocks.

#include "stages/postprocess/perspective_warp.hpp"

#include "core/error.hpp"

#include <gtest/gtest.h>
#include <opencv2/imgproc.hpp>

#include <random>

namespace redwood {
namespace {

struct Case {
  int src_width, src_height, channels;
  int out_width, out_height;
  float reach;  // how far past the picture the quad's corners may go, as a fraction of its size
};

void expect_same_as_opencv(const Case& c, std::mt19937& rng) {
  cv::Mat src(c.src_height, c.src_width, CV_8UC(c.channels));
  cv::randu(src, cv::Scalar::all(0), cv::Scalar::all(256));
  std::uniform_real_distribution<float> px(-c.reach * c.src_width, (1 + c.reach) * c.src_width);
  std::uniform_real_distribution<float> py(-c.reach * c.src_height, (1 + c.reach) * c.src_height);
  const std::array<cv::Point2f, 4> quad{cv::Point2f{px(rng), py(rng)}, {px(rng), py(rng)}, {px(rng), py(rng)},
                                        {px(rng), py(rng)}};
  const auto w = static_cast<float>(c.out_width), h = static_cast<float>(c.out_height);
  const std::array<cv::Point2f, 4> corners{cv::Point2f{0, 0}, {w, 0}, {w, h}, {0, h}};

  const cv::Mat want_matrix = cv::getPerspectiveTransform(quad.data(), corners.data());
  const cv::Matx33d got_matrix = perspective_transform(quad, corners);
  for (int i = 0; i < 9; ++i) ASSERT_EQ(got_matrix.val[i], want_matrix.at<double>(i / 3, i % 3)) << "entry " << i;

  cv::Mat want;
  cv::warpPerspective(src, want, want_matrix, cv::Size(c.out_width, c.out_height), cv::INTER_CUBIC, cv::BORDER_REPLICATE);
  cv::Mat got(c.out_height, c.out_width, src.type());
  warp_perspective_cubic(src, got_matrix, got);
  ASSERT_EQ(cv::norm(want, got, cv::NORM_INF), 0) << c.src_width << "x" << c.src_height << "x" << c.channels << " -> "
                                                   << c.out_width << "x" << c.out_height;
}

TEST(PerspectiveWarp, TheSameMatrixAndBytesAsOpenCv) {
  std::mt19937 rng(17);
  const Case cases[] = {
      {768, 576, 3, 320, 40, 0.f},  {768, 576, 3, 130, 48, 0.f},  {768, 576, 3, 40, 200, 0.05f},
      {200, 150, 3, 257, 33, 0.2f}, {64, 48, 1, 97, 17, 0.5f},    {50, 40, 4, 70, 70, 0.3f},
      {3, 2, 3, 20, 9, 1.f},        {1, 1, 1, 5, 5, 1.f},         {768, 576, 3, 1, 1, 0.f},
      {768, 576, 2, 650, 20, 0.f},
  };
  for (const Case& c : cases) {
    for (int i = 0; i < 20; ++i) expect_same_as_opencv(c, rng);
  }
}

TEST(PerspectiveWarp, AnAxisAlignedQuadCopiesItsPixels) {
  cv::Mat src(20, 30, CV_8UC3);
  cv::randu(src, cv::Scalar::all(0), cv::Scalar::all(256));
  const std::array<cv::Point2f, 4> quad{cv::Point2f{5, 4}, {15, 4}, {15, 10}, {5, 10}};
  const std::array<cv::Point2f, 4> corners{cv::Point2f{0, 0}, {10, 0}, {10, 6}, {0, 6}};
  cv::Mat got(6, 10, CV_8UC3);
  warp_perspective_cubic(src, perspective_transform(quad, corners), got);
  EXPECT_EQ(cv::norm(got, src(cv::Rect(5, 4, 10, 6)), cv::NORM_INF), 0);
}

TEST(PerspectiveWarp, AnOutputOfAnotherTypeIsRefused) {
  const cv::Mat src(8, 8, CV_8UC3, cv::Scalar::all(1));
  cv::Mat grey(4, 4, CV_8UC1), floats(4, 4, CV_32FC3);
  EXPECT_THROW(warp_perspective_cubic(src, cv::Matx33d::eye(), grey), InvalidArgument);
  const cv::Mat float_src(8, 8, CV_32FC3, cv::Scalar::all(1));
  EXPECT_THROW(warp_perspective_cubic(float_src, cv::Matx33d::eye(), floats), InvalidArgument);
}

}  // namespace
}  // namespace redwood
