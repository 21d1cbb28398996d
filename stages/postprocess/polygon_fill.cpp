#include "stages/postprocess/polygon_fill.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <utility>

namespace redwood {

namespace {

constexpr int kShift = 16;  // OpenCV's XY_SHIFT: edge x in 16.16 fixed point
constexpr std::int64_t kOne = std::int64_t{1} << kShift;

// OpenCV's Line over its LineIterator (8-connected, left to right) for two points inside the image.
void draw_line(cv::Mat& image, cv::Point p1, cv::Point p2, std::uint8_t value) {
  int delta_x = 1, delta_y = 1;
  int dx = p2.x - p1.x, dy = p2.y - p1.y;
  if (dx < 0) {
    dx = -dx;
    dy = -dy;
    p1 = p2;
  }
  if (dy < 0) {
    dy = -dy;
    delta_y = -1;
  }
  const bool vertical = dy > dx;
  if (vertical) {
    std::swap(dx, dy);
    std::swap(delta_x, delta_y);
  }
  int err = dx - (dy + dy);
  const int plus_delta = dx + dx, minus_delta = -(dy + dy);
  // Each step moves along the major axis; a negative error also moves along the minor one.
  int minus_shift = delta_x, plus_shift = 0, minus_step = 0, plus_step = delta_y;
  if (vertical) {
    std::swap(plus_step, plus_shift);
    std::swap(minus_step, minus_shift);
  }
  int x = p1.x, y = p1.y;
  for (int i = 0; i <= dx; ++i) {
    image.ptr<std::uint8_t>(y)[x] = value;
    const int mask = err < 0 ? -1 : 0;
    err += minus_delta + (plus_delta & mask);
    x += minus_shift + (plus_shift & mask);
    y += minus_step + (plus_step & mask);
  }
}

}  // namespace

void PolygonFill::fill(cv::Mat& image, std::span<const cv::Point> polygon, std::uint8_t value) {
  RW_EXPECTS(image.type() == CV_8UC1 && image.dims == 2, InvalidArgument,
             "PolygonFill: the image must be 8-bit with one channel, not {}", cv::typeToString(image.type()));
  const cv::Rect inside(0, 0, image.cols, image.rows);
  for (const cv::Point& p : polygon) {
    RW_EXPECTS(inside.contains(p), InvalidArgument, "PolygonFill: the point ({}, {}) is outside the {}x{} image", p.x,
               p.y, image.cols, image.rows);
  }
  if (polygon.empty()) return;
  // OpenCV's CollectPolyEdges: every edge drawn as a line, the non-horizontal ones kept.
  edges_.clear();
  edges_.reserve(polygon.size() + 1);
  cv::Point p0 = polygon.back();
  for (const cv::Point& p1 : polygon) {
    draw_line(image, p0, p1, value);
    if (p0.y != p1.y) {
      Edge e;
      const cv::Point& top = p0.y < p1.y ? p0 : p1;
      e.y0 = std::min(p0.y, p1.y);
      e.y1 = std::max(p0.y, p1.y);
      e.x = static_cast<std::int64_t>(top.x) << kShift;
      e.dx = ((static_cast<std::int64_t>(p1.x) - p0.x) << kShift) / (p1.y - p0.y);
      edges_.push_back(e);
    }
    p0 = p1;
  }
  // OpenCV's FillEdgeCollection: the active edges sorted by x, each pair's span filled per row.
  const int total = static_cast<int>(edges_.size());
  if (total < 2) return;
  int y_max = INT_MIN;
  for (const Edge& e : edges_) y_max = std::max(y_max, e.y1);
  std::sort(edges_.begin(), edges_.end(), [](const Edge& a, const Edge& b) {
    if (a.y0 != b.y0) return a.y0 < b.y0;
    if (a.x != b.x) return a.x < b.x;
    return a.dx < b.dx;
  });
  Edge sentinel;  // the active list's head, then the end of the sorted edges
  sentinel.y0 = INT_MAX;
  edges_.push_back(sentinel);
  sentinel.next = nullptr;
  int i = 0;
  Edge* e = &edges_[0];
  y_max = std::min(y_max, image.rows);
  for (int y = e->y0; y < y_max; ++y) {
    Edge* prelast = &sentinel;
    Edge* last = sentinel.next;
    bool draw = false;
    while (last != nullptr || e->y0 == y) {
      if (last != nullptr && last->y1 == y) {  // the edge ends at this row
        prelast->next = last->next;
        last = last->next;
        continue;
      }
      Edge* keep_prelast = prelast;
      if (last != nullptr && (e->y0 > y || last->x < e->x)) {
        prelast = last;
        last = last->next;
      } else if (i < total) {  // an edge starts at this row: into the active list
        prelast->next = e;
        e->next = last;
        prelast = e;
        e = &edges_[static_cast<std::size_t>(++i)];
      } else {
        break;
      }
      if (draw) {
        int x1, x2;
        if (keep_prelast->x > prelast->x) {
          x1 = static_cast<int>((prelast->x + kOne - 1) >> kShift);
          x2 = static_cast<int>(keep_prelast->x >> kShift);
        } else {
          x1 = static_cast<int>((keep_prelast->x + kOne - 1) >> kShift);
          x2 = static_cast<int>(prelast->x >> kShift);
        }
        if (y >= 0 && x1 < image.cols && x2 >= 0) {
          x1 = std::max(x1, 0);
          x2 = std::min(x2, image.cols - 1);
          if (x2 >= x1) std::memset(image.ptr<std::uint8_t>(y) + x1, value, static_cast<std::size_t>(x2 - x1 + 1));
        }
        keep_prelast->x += keep_prelast->dx;
        prelast->x += prelast->dx;
      }
      draw = !draw;
    }
    // Bubble the active list back into x order.
    Edge* keep = nullptr;
    do {
      prelast = &sentinel;
      last = sentinel.next;
      Edge* last_exchange = nullptr;
      while (last != keep && last->next != nullptr) {
        Edge* te = last->next;
        if (last->x > te->x) {
          prelast->next = te;
          last->next = te->next;
          te->next = last;
          prelast = te;
          last_exchange = prelast;
        } else {
          prelast = last;
          last = te;
        }
      }
      if (last_exchange == nullptr) break;
      keep = last_exchange;
    } while (keep != sentinel.next && keep != &sentinel);
  }
}

}  // namespace redwood
