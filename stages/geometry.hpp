#pragma once
// Points and rectangles in picture (or tensor) pixels, as detections carry them. Plain values
// with no dependency; stages/picture_cv.hpp converts them to and from OpenCV's types. The
// rectangle operations give OpenCV's results for the same inputs (cv::Rect2f's corner
// constructor and operator&), so code may use either and get the same boxes.

#include <algorithm>
#include <array>
#include <cstddef>
#include <initializer_list>
#include <span>
#include <stdexcept>

namespace redwood {

/// A point: x to the right, y down, from the top-left corner.
struct PointF {
  float x = 0.f, y = 0.f;
  friend bool operator==(const PointF&, const PointF&) = default;
};

/// An axis-aligned rectangle: its top-left corner and its extents.
struct RectF {
  float x = 0.f, y = 0.f, width = 0.f, height = 0.f;

  /// The rectangle two opposite corners span, in any order.
  static RectF spanning(PointF a, PointF b) {
    const float left = std::min(a.x, b.x), top = std::min(a.y, b.y);
    return {left, top, std::max(a.x, b.x) - left, std::max(a.y, b.y) - top};
  }
  PointF top_left() const { return {x, y}; }
  PointF bottom_right() const { return {x + width, y + height}; }
  float area() const { return width * height; }
  bool empty() const { return width <= 0 || height <= 0; }
  friend bool operator==(const RectF&, const RectF&) = default;
};

/// A quadrilateral's corners (a text region's: clockwise from top-left), kept in place: up to
/// four points and no heap, so that a frame's detections allocate nothing for their regions.
/// Empty when a detection has none. It reads as a span of its points.
class Quad {
 public:
  static constexpr std::size_t kCorners = 4;

  Quad() = default;
  Quad(std::initializer_list<PointF> corners) {
    for (const PointF& p : corners) push_back(p);
  }

  void push_back(PointF p) {
    if (size_ == kCorners) throw std::length_error("a quad has at most 4 corners");
    points_[size_++] = p;
  }
  void clear() { size_ = 0; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  PointF& operator[](std::size_t i) { return points_[i]; }
  const PointF& operator[](std::size_t i) const { return points_[i]; }
  const PointF* begin() const { return points_.data(); }
  const PointF* end() const { return points_.data() + size_; }
  operator std::span<const PointF>() const { return {points_.data(), size_}; }
  friend bool operator==(const Quad& a, const Quad& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }

 private:
  std::array<PointF, kCorners> points_{};
  std::size_t size_ = 0;
};

/// The part two rectangles share; all zeros when they share none (or either is empty).
inline RectF intersection(const RectF& a, const RectF& b) {
  if (a.empty() || b.empty()) return {};
  const RectF& x_min = a.x < b.x ? a : b;
  const RectF& x_max = a.x < b.x ? b : a;
  const RectF& y_min = a.y < b.y ? a : b;
  const RectF& y_max = a.y < b.y ? b : a;
  if ((x_min.x < 0 && x_min.x + x_min.width < x_max.x) || (y_min.y < 0 && y_min.y + y_min.height < y_max.y)) return {};
  // Computed as OpenCV does (the extent left past the other's start), which rounds alike.
  const RectF r{x_max.x, y_max.y, std::min(x_min.width - (x_max.x - x_min.x), x_max.width),
                std::min(y_min.height - (y_max.y - y_min.y), y_max.height)};
  return r.empty() ? RectF{} : r;
}

/// Intersection over union, the overlap measure of non-maximum suppression and tracking: 0 when
/// the rectangles share nothing or either is empty.
inline float intersection_over_union(const RectF& a, const RectF& b) {
  if (a.empty() || b.empty()) return 0.f;
  const float w = std::min(a.x + a.width, b.x + b.width) - std::max(a.x, b.x);
  const float h = std::min(a.y + a.height, b.y + b.height) - std::max(a.y, b.y);
  if (w <= 0 || h <= 0) return 0.f;
  const float inter = w * h;
  return inter / (a.area() + b.area() - inter);
}

}  // namespace redwood
