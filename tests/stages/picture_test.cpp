// Pictures (stages/picture.hpp, stages/picture_cv.hpp): copies and Mat views share the bytes,
// a Mat kept as a picture stays alive as long as the picture, and pool pictures
// (FrameMemory::picture) go back to the pool with their last copy, even after the pool's owner.

#include "stages/frame_memory.hpp"
#include "stages/picture.hpp"
#include "stages/picture_cv.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

namespace redwood {
namespace {

TEST(Picture, HeapPictureIsContiguousAlignedAndShared) {
  const Picture p = Picture::allocate(5, 3, 3);
  ASSERT_FALSE(p.empty());
  EXPECT_EQ(p.stride, 15u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p.data) % 64, 0u);
  const Picture copy = p;
  EXPECT_EQ(copy.data, p.data);
  EXPECT_EQ(p.owner.use_count(), 2);
  EXPECT_TRUE(Picture{}.empty());
  EXPECT_THROW(Picture::allocate(-1, 3, 3), InvalidArgument);
}

TEST(Picture, AsMatViewsThePixelsWithoutCopying) {
  Picture p = Picture::allocate(4, 2, 3);
  cv::Mat m = as_mat(p);
  EXPECT_EQ(m.data, p.data);
  EXPECT_EQ(m.type(), CV_8UC3);
  EXPECT_EQ(m.size(), cv::Size(4, 2));
  m.setTo(cv::Scalar(1, 2, 3));
  EXPECT_EQ(p.row(1)[3 * 3 + 2], 3);
  EXPECT_TRUE(as_mat(Picture{}).empty());
  EXPECT_EQ(as_mat(Picture::allocate(2, 2, 1)).type(), CV_8UC1);
}

TEST(Picture, FromMatKeepsTheMatsBufferWithoutCopying) {
  Picture p;
  const std::uint8_t* bytes = nullptr;
  {
    cv::Mat m(6, 8, CV_8UC3, cv::Scalar(10, 20, 30));
    bytes = m.data;
    p = from_mat(m);
  }  // the Mat's last handle outside the picture is gone; the picture still holds the buffer
  EXPECT_EQ(p.data, bytes);
  EXPECT_EQ(p.width, 8);
  EXPECT_EQ(p.height, 6);
  EXPECT_EQ(p.channels, 3);
  EXPECT_EQ(p.row(5)[7 * 3 + 2], 30);
  // A region keeps its parent's stride.
  cv::Mat big(10, 10, CV_8UC1, cv::Scalar(0));
  const Picture region = from_mat(big(cv::Rect(2, 3, 4, 5)));
  EXPECT_EQ(region.stride, 10u);
  EXPECT_EQ(region.data, big.ptr(3) + 2);
  EXPECT_TRUE(from_mat(cv::Mat()).empty());
  EXPECT_THROW(from_mat(cv::Mat(2, 2, CV_32F)), InvalidArgument);
}

TEST(Picture, CopyPixelsCopiesRowByRow) {
  cv::Mat source(3, 4, CV_8UC3);
  cv::randu(source, 0, 256);
  cv::Mat wide(3, 6, CV_8UC3, cv::Scalar::all(0));
  const Picture from = from_mat(source), to = from_mat(wide(cv::Rect(1, 0, 4, 3)));
  copy_pixels(from, to);
  EXPECT_EQ(cv::norm(as_mat(to), source, cv::NORM_INF), 0);
  EXPECT_EQ(wide.at<cv::Vec3b>(0, 0), cv::Vec3b(0, 0, 0));
  EXPECT_THROW(copy_pixels(from, Picture::allocate(4, 2, 3)), InvalidArgument);
}

TEST(Picture, PoolPicturesGoBackToThePoolWithTheirLastCopy) {
  auto memory = std::make_unique<FrameMemory>();
  const std::uint64_t before = memory->stats().pool.allocations;
  Picture p = frame_picture(memory.get(), 64, 48, 3);
  EXPECT_EQ(memory->stats().pool.allocations, before + 1);
  EXPECT_GE(memory->stats().pool.bytes_in_use, 64u * 48 * 3);
  EXPECT_EQ(p.stride, 64u * 3);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p.data) % 64, 0u);
  Picture copy = p;
  p = {};
  EXPECT_GT(memory->stats().pool.bytes_in_use, 0u) << "a copy still holds it";
  copy = {};
  EXPECT_EQ(memory->stats().pool.bytes_in_use, 0u);
  EXPECT_EQ(memory->stats().fallbacks, 0u);
  // A picture may outlive the FrameMemory object: the pool lives until its last buffer goes.
  Picture late = memory->picture(16, 16, 1);
  memory.reset();
  late.row(15)[15] = 7;
  EXPECT_EQ(late.row(15)[15], 7);
  // No pool: the heap.
  EXPECT_FALSE(frame_picture(nullptr, 4, 4, 3).empty());
}

}  // namespace
}  // namespace redwood
