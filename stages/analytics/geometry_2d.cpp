#include "stages/analytics/geometry_2d.hpp"

#include <algorithm>

namespace redwood {
namespace {

/// (b - a) x (p - a): > 0 when p is on the right of a -> b on a y-down picture.
double cross(PointF a, PointF b, PointF p) {
  return (static_cast<double>(b.x) - a.x) * (static_cast<double>(p.y) - a.y) -
         (static_cast<double>(b.y) - a.y) * (static_cast<double>(p.x) - a.x);
}

int sign(double v) { return v > 0 ? 1 : v < 0 ? -1 : 0; }

bool on_segment(PointF a, PointF b, PointF p) {
  return cross(a, b, p) == 0 && p.x >= std::min(a.x, b.x) && p.x <= std::max(a.x, b.x) &&
         p.y >= std::min(a.y, b.y) && p.y <= std::max(a.y, b.y);
}

}  // namespace

int side_of_line(PointF a, PointF b, PointF p) { return sign(cross(a, b, p)); }

bool step_crosses_segment(PointF a, PointF b, PointF p, PointF q) {
  const int sp = side_of_line(a, b, p), sq = side_of_line(a, b, q);
  if (sq == 0 || sp == sq) return false;
  // p and q are on the line's two sides (or p on it), so p -> q meets the line once; that point
  // is on the segment when a and b are not both strictly on one side of p -> q.
  return side_of_line(p, q, a) * side_of_line(p, q, b) <= 0;
}

bool inside_polygon(std::span<const PointF> polygon, PointF p) {
  const std::size_t n = polygon.size();
  bool inside = false;
  for (std::size_t i = 0, j = n - 1; i < n; j = i++) {
    const PointF u = polygon[i], v = polygon[j];
    if (on_segment(u, v, p)) return true;
    // Even-odd: count the edges a ray from p to the right crosses (each edge half-open in y).
    if ((u.y > p.y) != (v.y > p.y)) {
      const double x = u.x + (static_cast<double>(p.y) - u.y) * (static_cast<double>(v.x) - u.x) / (static_cast<double>(v.y) - u.y);
      if (p.x < x) inside = !inside;
    }
  }
  return inside;
}

double polygon_area(std::span<const PointF> polygon) {
  double twice = 0;
  for (std::size_t i = 0, n = polygon.size(); i < n; ++i) {
    const PointF u = polygon[i], v = polygon[(i + 1) % n];
    twice += static_cast<double>(u.x) * v.y - static_cast<double>(v.x) * u.y;
  }
  return twice / 2;
}

std::vector<PointF> to_pixels(std::span<const PointF> relative, int width, int height) {
  std::vector<PointF> out;
  out.reserve(relative.size());
  for (const PointF& r : relative) out.push_back({r.x * static_cast<float>(width), r.y * static_cast<float>(height)});
  return out;
}

}  // namespace redwood
