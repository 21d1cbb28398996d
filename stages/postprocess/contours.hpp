#pragma once
// The contours of a binary mask as cv::findContours(mask, contours, RETR_LIST, CHAIN_APPROX_SIMPLE)
// finds them, point for point and in the same order, without its heap allocations: OpenCV copies
// the mask into a new padded Mat, keeps the contours in memory-storage blocks and copies each into
// a new vector, about six allocations a call. Here the same Suzuki-Abe border following (OpenCV's
// scan, marks and chain-code steps) runs over a padded copy that a ContourList keeps, and the
// points go into one vector it keeps too, so a list reused frame after frame stops allocating once
// it has seen its largest mask. tests/stages/postprocess/contours_test.cpp holds it to OpenCV's
// output on random masks.

#include <opencv2/core.hpp>

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace redwood {

/// Contours found by find_contours, each a closed polygon of pixel centres: the pixels where the
/// border turns (CHAIN_APPROX_SIMPLE), from where OpenCV starts, in its direction, and in its
/// order (the last border the raster scan meets comes first).
class ContourList {
 public:
  std::size_t size() const { return ranges_.size(); }
  bool empty() const { return ranges_.empty(); }
  std::span<const cv::Point> operator[](std::size_t i) const {
    const auto [begin, end] = ranges_[i];
    return {points_.data() + begin, points_.data() + end};
  }
  /// The i-th contour as a CV_32SC2 column over the list's points (for an OpenCV function that
  /// reads one); valid until the next find_contours into this list.
  cv::Mat mat(std::size_t i) const {
    const auto c = (*this)[i];
    return cv::Mat(static_cast<int>(c.size()), 1, CV_32SC2, const_cast<cv::Point*>(c.data()));
  }

 private:
  friend void find_contours(const cv::Mat& mask, ContourList& contours);

  std::vector<std::int8_t> image_;  // the mask as 0/1 with a zero border, marked while traced
  std::vector<cv::Point> points_;
  std::vector<std::pair<std::size_t, std::size_t>> ranges_;  // [begin, end) in points_
};

/// Finds the borders of the nonzero regions of `mask` (8-bit, one channel, any size) and their
/// holes' borders into `contours` (cleared first): cv::findContours with RETR_LIST and
/// CHAIN_APPROX_SIMPLE. Throws InvalidArgument for another type.
void find_contours(const cv::Mat& mask, ContourList& contours);

}  // namespace redwood
