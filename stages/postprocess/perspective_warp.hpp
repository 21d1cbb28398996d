#pragma once
// A perspective warp that gives cv::warpPerspective's pixels (INTER_CUBIC, BORDER_REPLICATE, 8-bit)
// without its heap allocations: OpenCV warps through cv::remap one 16x64 block of the output at
// a time, and remap allocates two buffers (four heap blocks) per block, some sixty a text crop.
// Here the same fixed-point steps run in one pass into the caller's Mat: the source coordinate
// of each output pixel in 1/32 pixel (computed in doubles block by block, as OpenCV does, since
// the rounding depends on where a block starts), then OpenCV's 4x4 cubic weights in 1/32768,
// summed in integers and rounded as its remap rounds. tests/stages/postprocess/perspective_warp_test.cpp
// holds it to OpenCV's output byte for byte.

#include <opencv2/core.hpp>

#include <array>

namespace redwood {

/// The homography taking the 4 `from` points onto the 4 `to` points: cv::getPerspectiveTransform's
/// matrix (the same 8x8 system solved the same way), held in a Matx rather than a new Mat.
cv::Matx33d perspective_transform(const std::array<cv::Point2f, 4>& from, const std::array<cv::Point2f, 4>& to);

/// cv::warpPerspective(src, dst, src_to_dst, dst.size(), INTER_CUBIC, BORDER_REPLICATE) for
/// 8-bit pictures of 1 to 4 channels: `dst` must have src's type and its size already (a view of
/// a reused buffer allocates nothing); throws InvalidArgument otherwise. `src` and `dst` must
/// not overlap.
void warp_perspective_cubic(const cv::Mat& src, const cv::Matx33d& src_to_dst, cv::Mat& dst);

}  // namespace redwood
