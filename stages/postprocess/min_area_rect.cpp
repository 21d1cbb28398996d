#include "stages/postprocess/min_area_rect.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace redwood {

namespace {

template <typename T>
int sign(T v) {
  return (v > 0) - (v < 0);
}

// OpenCV's Sklansky_: one quarter of the hull, walking the sorted points from `start` to `end`
// (either way), keeping the ones that turn by `sign2`; returns the count left on `stack`
// (positions in the sorted order). `Dot` is the type the turn is computed in (int64 for integer
// points, double for floats).
template <typename T, typename Dot, typename Point>
int sklansky(const Point* points, const int* order, int start, int end, int* stack, int nsign, int sign2) {
  const auto at = [&](int i) -> const Point& { return points[order[i]]; };
  const int incr = end > start ? 1 : -1;
  int pprev = start, pcur = pprev + incr, pnext = pcur + incr;
  int stacksize = 3;
  if (start == end || (at(start).x == at(end).x && at(start).y == at(end).y)) {
    stack[0] = start;
    return 1;
  }
  stack[0] = pprev;
  stack[1] = pcur;
  stack[2] = pnext;
  end += incr;  // one past the end
  while (pnext != end) {
    const T cury = at(pcur).y, nexty = at(pnext).y;
    const T by = nexty - cury;
    if (sign(by) != nsign) {
      const T ax = at(pcur).x - at(pprev).x;
      const T bx = at(pnext).x - at(pcur).x;
      const T ay = cury - at(pprev).y;
      const Dot convexity = static_cast<Dot>(ay) * bx - static_cast<Dot>(ax) * by;  // > 0: convex
      if (sign(convexity) == sign2 && (ax != 0 || ay != 0)) {
        pprev = pcur;
        pcur = pnext;
        pnext += incr;
        stack[stacksize] = pnext;
        stacksize++;
      } else if (pprev == start) {
        pcur = pnext;
        stack[1] = pcur;
        pnext += incr;
        stack[2] = pnext;
      } else {
        stack[stacksize - 2] = pnext;
        pcur = pprev;
        pprev = stack[stacksize - 4];
        stacksize--;
      }
    } else {
      pnext += incr;
      stack[stacksize - 1] = pnext;
    }
  }
  return --stacksize;
}

// cv::convexHull(points, hull, clockwise = false): the hull's points as indices into `points`,
// in scratch.indices.
template <typename T, typename Dot, typename Point>
void hull_indices(std::span<const Point> points, HullScratch& scratch) {
  const int total = static_cast<int>(points.size());
  auto& hull = scratch.indices;
  hull.clear();
  if (total == 0) return;
  auto& order = scratch.order;
  order.resize(static_cast<std::size_t>(total));
  scratch.stack.resize(static_cast<std::size_t>(total) + 2);
  for (int i = 0; i < total; ++i) order[static_cast<std::size_t>(i)] = i;
  const Point* data = points.data();
  // By x, then y, then place in the input (OpenCV compares the pointers): a total order, so any
  // sort gives OpenCV's.
  std::sort(order.begin(), order.end(), [data](int a, int b) {
    if (data[a].x != data[b].x) return data[a].x < data[b].x;
    if (data[a].y != data[b].y) return data[a].y < data[b].y;
    return a < b;
  });
  const auto at = [&](int i) -> const Point& { return data[order[static_cast<std::size_t>(i)]]; };
  int miny_ind = 0, maxy_ind = 0;
  for (int i = 1; i < total; ++i) {
    const T y = at(i).y;
    if (at(miny_ind).y > y) miny_ind = i;
    if (at(maxy_ind).y < y) maxy_ind = i;
  }
  if (at(0).x == at(total - 1).x && at(0).y == at(total - 1).y) {
    hull.push_back(order[0]);
    return;
  }
  int* stack = scratch.stack.data();
  const int* ord = order.data();
  // Upper half: the right part first, as clockwise = false swaps the halves.
  int* tl_stack = stack;
  int tl_count = sklansky<T, Dot>(data, ord, 0, maxy_ind, tl_stack, -1, 1);
  int* tr_stack = stack + tl_count;
  int tr_count = sklansky<T, Dot>(data, ord, total - 1, maxy_ind, tr_stack, -1, -1);
  std::swap(tl_stack, tr_stack);
  std::swap(tl_count, tr_count);
  for (int i = 0; i < tl_count - 1; ++i) hull.push_back(ord[tl_stack[i]]);
  for (int i = tr_count - 1; i > 0; --i) hull.push_back(ord[tr_stack[i]]);
  const int stop_idx = tr_count > 2 ? tr_stack[1] : tl_count > 2 ? tl_stack[tl_count - 2] : -1;
  // Lower half.
  int* bl_stack = stack;
  int bl_count = sklansky<T, Dot>(data, ord, 0, miny_ind, bl_stack, 1, -1);
  int* br_stack = stack + bl_count;
  int br_count = sklansky<T, Dot>(data, ord, total - 1, miny_ind, br_stack, 1, 1);
  if (stop_idx >= 0) {
    const int check_idx = bl_count > 2 ? bl_stack[1] : bl_count + br_count > 2 ? br_stack[2 - bl_count] : -1;
    if (check_idx == stop_idx ||
        (check_idx >= 0 && at(check_idx).x == at(stop_idx).x && at(check_idx).y == at(stop_idx).y)) {
      // All the points on one line: the lower half is the upper one mirrored, less its ends.
      bl_count = std::min(bl_count, 2);
      br_count = std::min(br_count, 2);
    }
  }
  for (int i = 0; i < bl_count - 1; ++i) hull.push_back(ord[bl_stack[i]]);
  for (int i = br_count - 1; i > 0; --i) hull.push_back(ord[br_stack[i]]);

  // OpenCV's cyclic shift that makes the indices ascend or descend where they can.
  const int nout = static_cast<int>(hull.size());
  if (nout < 3) return;
  int min_idx = 0, max_idx = 0, lt = 0;
  for (int i = 1; i < nout; ++i) {
    const int idx = hull[static_cast<std::size_t>(i)];
    lt += hull[static_cast<std::size_t>(i - 1)] < idx;
    if (lt > 1 && lt <= i - 2) break;
    if (idx < hull[static_cast<std::size_t>(min_idx)]) min_idx = i;
    if (idx > hull[static_cast<std::size_t>(max_idx)]) max_idx = i;
  }
  const int mmdist = std::abs(max_idx - min_idx);
  if ((mmdist == 1 || mmdist == nout - 1) && (lt <= 1 || lt >= nout - 2)) {
    const bool ascending = (max_idx + 1) % nout == min_idx;
    const int i0 = ascending ? min_idx : max_idx;
    if (i0 > 0) {
      int j = i0, i = 0;
      for (; i < nout; ++i) {
        const int curr_idx = stack[i] = hull[static_cast<std::size_t>(j)];
        const int next_j = j + 1 < nout ? j + 1 : 0;
        const int next_idx = hull[static_cast<std::size_t>(next_j)];
        if (i < nout - 1 && (ascending != (curr_idx < next_idx))) break;
        j = next_j;
      }
      if (i == nout) std::copy_n(stack, nout, hull.begin());
    }
  }
}

template <typename T, typename Dot, typename Point>
void convex_hull_of(std::span<const Point> points, std::vector<Point>& hull, HullScratch& scratch) {
  RW_EXPECTS(points.empty() || hull.data() != points.data(), InvalidArgument,
             "convex_hull: the hull must not be written over its points");
  hull_indices<T, Dot>(points, scratch);
  hull.clear();
  for (const int i : scratch.indices) hull.push_back(points[static_cast<std::size_t>(i)]);
}

// OpenCV's rotatingCalipers (CALIPERS_MINAREARECT) over a convex polygon of n > 2 vertices in
// either orientation: out[0] is a corner, out[1] and out[2] the rectangle's sides from it.
void rotating_calipers(const cv::Point2f* points, int n, HullScratch& scratch, cv::Point2f out[3]) {
  float minarea = FLT_MAX;
  scratch.edges.resize(static_cast<std::size_t>(n));
  scratch.inverse_lengths.resize(static_cast<std::size_t>(n));
  cv::Point2f* vect = scratch.edges.data();
  float* inv_vect_length = scratch.inverse_lengths.data();
  int left = 0, bottom = 0, right = 0, top = 0;
  int seq[4] = {-1, -1, -1, -1};
  cv::Point2f rot_vect[4];
  // The calipers' sides are (a, b), (-b, a), (-a, -b), (b, -a), starting from (1, 0).
  float orientation = 0;
  float base_a;
  float base_b = 0;
  cv::Point2f pt0 = points[0];
  float left_x = pt0.x, right_x = pt0.x, top_y = pt0.y, bottom_y = pt0.y;
  for (int i = 0; i < n; ++i) {
    if (pt0.x < left_x) left_x = pt0.x, left = i;
    if (pt0.x > right_x) right_x = pt0.x, right = i;
    if (pt0.y > top_y) top_y = pt0.y, top = i;
    if (pt0.y < bottom_y) bottom_y = pt0.y, bottom = i;
    const cv::Point2f pt = points[(i + 1) & (i + 1 < n ? -1 : 0)];
    const double dx = pt.x - pt0.x, dy = pt.y - pt0.y;
    vect[i].x = static_cast<float>(dx);
    vect[i].y = static_cast<float>(dy);
    inv_vect_length[i] = static_cast<float>(1. / std::sqrt(dx * dx + dy * dy));
    pt0 = pt;
  }
  {  // the polygon's orientation
    double ax = vect[n - 1].x, ay = vect[n - 1].y;
    for (int i = 0; i < n; ++i) {
      const double bx = vect[i].x, by = vect[i].y;
      const double convexity = ax * by - ay * bx;
      if (convexity != 0) {
        orientation = convexity > 0 ? 1.f : -1.f;
        break;
      }
      ax = bx;
      ay = by;
    }
    RW_EXPECTS(orientation != 0, InvalidArgument, "min_area_rect: the hull's points are all on one line");
  }
  base_a = orientation;
  seq[0] = bottom;
  seq[1] = right;
  seq[2] = top;
  seq[3] = left;
  // True when vec1 is clockwise of vec2.
  const auto first_is_right = [](cv::Point2f vec1, cv::Point2f vec2) {
    const cv::Point2f turned(vec1.y, -vec1.x);
    return turned.x * vec2.x + turned.y * vec2.y < 0;
  };
  int best_left = 0, best_bottom = 0;
  float best_a = 0, best_b = 0, best_width = 0, best_height = 0;
  for (int k = 0; k < n; ++k) {
    // The caliper side at the least angle to its polygon edge leads.
    rot_vect[0] = vect[seq[0]];
    rot_vect[1] = cv::Point2f(vect[seq[1]].y, -vect[seq[1]].x);
    rot_vect[2] = cv::Point2f(-vect[seq[2]].x, -vect[seq[2]].y);
    rot_vect[3] = cv::Point2f(-vect[seq[3]].y, vect[seq[3]].x);
    int main_element = 0;
    for (int i = 1; i < 4; ++i) {
      if (first_is_right(rot_vect[i], rot_vect[main_element])) main_element = i;
    }
    const int pindex = seq[main_element];
    const float lead_x = vect[pindex].x * inv_vect_length[pindex];
    const float lead_y = vect[pindex].y * inv_vect_length[pindex];
    switch (main_element) {
      case 0: base_a = lead_x, base_b = lead_y; break;
      case 1: base_a = lead_y, base_b = -lead_x; break;
      case 2: base_a = -lead_x, base_b = -lead_y; break;
      default: base_a = -lead_y, base_b = lead_x; break;
    }
    seq[main_element] += 1;
    seq[main_element] = seq[main_element] == n ? 0 : seq[main_element];
    // The rectangle's sides: left-right and bottom-top distances along the base.
    float dx = points[seq[1]].x - points[seq[3]].x;
    float dy = points[seq[1]].y - points[seq[3]].y;
    const float width = dx * base_a + dy * base_b;
    dx = points[seq[2]].x - points[seq[0]].x;
    dy = points[seq[2]].y - points[seq[0]].y;
    const float height = -dx * base_b + dy * base_a;
    const float area = width * height;
    if (area <= minarea) {
      minarea = area;
      best_left = seq[3];
      best_a = base_a;
      best_width = width;
      best_b = base_b;
      best_height = height;
      best_bottom = seq[0];
    }
  }
  const float A1 = best_a, B1 = best_b;
  const float A2 = -best_b, B2 = best_a;
  const float C1 = A1 * points[best_left].x + points[best_left].y * B1;
  const float C2 = A2 * points[best_bottom].x + points[best_bottom].y * B2;
  const float idet = 1.f / (A1 * B2 - A2 * B1);
  out[0] = cv::Point2f((C1 * B2 - C2 * B1) * idet, (A1 * C2 - A2 * C1) * idet);
  out[1] = cv::Point2f(A1 * best_width, B1 * best_width);
  out[2] = cv::Point2f(A2 * best_height, B2 * best_height);
}

// cv::minAreaRect's last steps over the hull in floats.
cv::RotatedRect rect_of_hull(const std::vector<cv::Point2f>& hull, HullScratch& scratch) {
  cv::RotatedRect box;
  const int n = static_cast<int>(hull.size());
  if (n > 2) {
    cv::Point2f out[3];
    rotating_calipers(hull.data(), n, scratch, out);
    box.center.x = out[0].x + (out[1].x + out[2].x) * 0.5f;
    box.center.y = out[0].y + (out[1].y + out[2].y) * 0.5f;
    const auto length = [](cv::Point2f v) {
      return static_cast<float>(std::sqrt(static_cast<double>(v.x) * v.x + static_cast<double>(v.y) * v.y));
    };
    box.size.width = length(out[1]);
    box.size.height = length(out[2]);
    box.angle = static_cast<float>(std::atan2(static_cast<double>(out[1].y), static_cast<double>(out[1].x)));
  } else if (n == 2) {
    box.center.x = (hull[0].x + hull[1].x) * 0.5f;
    box.center.y = (hull[0].y + hull[1].y) * 0.5f;
    const double dx = hull[1].x - hull[0].x, dy = hull[1].y - hull[0].y;
    box.size.width = static_cast<float>(std::sqrt(dx * dx + dy * dy));
    box.size.height = 0;
    box.angle = static_cast<float>(std::atan2(dy, dx));
  } else if (n == 1) {
    box.center = hull[0];
  }
  box.angle = static_cast<float>(box.angle * 180 / CV_PI);  // float * int, then the double division, as there
  return box;
}

}  // namespace

void convex_hull(std::span<const cv::Point> points, std::vector<cv::Point>& hull, HullScratch& scratch) {
  convex_hull_of<int, std::int64_t>(points, hull, scratch);
}

void convex_hull(std::span<const cv::Point2f> points, std::vector<cv::Point2f>& hull, HullScratch& scratch) {
  convex_hull_of<float, double>(points, hull, scratch);
}

cv::RotatedRect min_area_rect(std::span<const cv::Point> points, HullScratch& scratch) {
  convex_hull(points, scratch.hull, scratch);
  scratch.hull_points.assign(scratch.hull.begin(), scratch.hull.end());  // OpenCV's convertTo(CV_32F)
  return rect_of_hull(scratch.hull_points, scratch);
}

cv::RotatedRect min_area_rect(std::span<const cv::Point2f> points, HullScratch& scratch) {
  RW_EXPECTS(points.empty() || points.data() != scratch.hull_points.data(), InvalidArgument,
             "min_area_rect: the points must not be the scratch's own hull");
  convex_hull(points, scratch.hull_points, scratch);
  return rect_of_hull(scratch.hull_points, scratch);
}

}  // namespace redwood
