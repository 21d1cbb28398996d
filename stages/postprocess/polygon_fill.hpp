#pragma once
// A polygon fill that sets the pixels cv::fillPoly sets (8-bit one-channel image, LINE_8, no
// fractional bits), without its heap allocations: OpenCV copies the points into a new vector of
// 64-bit points and collects the edges into another on every call. Here the same steps (each edge
// drawn as OpenCV's 8-connected line, then the even-odd scan over the edges in 16.16 fixed point)
// run over an edge list the PolygonFill keeps, so a fill reused frame after frame stops
// allocating once it has seen its largest polygon. tests/stages/postprocess/polygon_fill_test.cpp
// holds it to cv::fillPoly's pixels on random polygons, convex and not.

#include <opencv2/core.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace redwood {

class PolygonFill {
 public:
  /// cv::fillPoly(image, {polygon}, value): the closed polygon's outline and inside set to
  /// `value`. `image` is 8-bit with one channel and the points lie inside it; throws
  /// InvalidArgument otherwise.
  void fill(cv::Mat& image, std::span<const cv::Point> polygon, std::uint8_t value);

 private:
  struct Edge {
    int y0 = 0, y1 = 0;  // the rows it spans, y1 excluded
    std::int64_t x = 0, dx = 0;  // its x at the current row and its step per row, in 1/65536
    Edge* next = nullptr;  // the next edge of the active list
  };
  std::vector<Edge> edges_;
};

}  // namespace redwood
