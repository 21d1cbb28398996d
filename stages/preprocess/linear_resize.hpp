#pragma once
// A bilinear resize that gives cv::resize's bytes (INTER_LINEAR, 8-bit pictures of 1 to 4
// channels) without its heap allocations: OpenCV builds its column and row tables in a new buffer
// on every call and each of its row stripes interpolates into two more. Here the same fixed-point
// steps run in buffers a LinearResize keeps: each source column's weights in 1/2048
// (INTER_RESIZE_COEF_BITS 11, rounded from floats as OpenCV rounds them), the horizontal pass
// summed exactly in integers, the vertical pass as OpenCV's 8-bit one computes it (both sums
// shifted right by 4, each product's high 16 bits, then rounded off 2 bits), and OpenCV's own
// shortcuts kept: the same size is a copy and an exact halving both ways averages 2x2 blocks.
// The inner loops use OpenCV's universal intrinsics where the CPU has them.
// tests/stages/preprocess/linear_resize_test.cpp holds it to cv::resize byte for byte.

#include <opencv2/core.hpp>

#include <cstdint>
#include <vector>

namespace redwood {

class LinearResize {
 public:
  /// cv::resize(src, dst, dst.size(), 0, 0, INTER_LINEAR) for 8-bit pictures of 1 to 4 channels:
  /// `dst` must have src's type and the size wanted already (a view of a reused buffer allocates
  /// nothing); throws InvalidArgument otherwise. `src` and `dst` must not overlap.
  void resize(const cv::Mat& src, cv::Mat& dst);

 private:
  template <int kChannels>
  void interpolate(const cv::Mat& src, cv::Mat& dst);
  // The horizontal pass over kRows source rows at once, each into its own output row.
  template <int kChannels, int kRows>
  void horizontal(const std::uint8_t* const* src, int src_bytes, int* const* out) const;

  // Per output column: the offsets of its two source pixels' first bytes, and their weights.
  std::vector<int> column_;
  std::vector<int> next_column_;
  std::vector<std::int16_t> column_weights_;  // two per column
  std::vector<int> rows_;  // two horizontally interpolated source rows
};

}  // namespace redwood
