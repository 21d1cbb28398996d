#pragma once
// The convex hull and the minimum-area rectangle of a point set as cv::convexHull and
// cv::minAreaRect compute them, without their heap allocations: OpenCV sorts and stacks in
// buffers of its own, returns the hull in a new Mat, converts an integer hull to floats in
// another and sizes the rotating calipers' edge vectors for each call. Here the same steps
// (Sklansky's scan over the points sorted by x, then y; the calipers over the hull in floats)
// run in buffers a HullScratch keeps across calls, with the same arithmetic in the same types,
// so the hull is the same points in the same order and the rectangle the same floats.
// tests/stages/postprocess/min_area_rect_test.cpp holds both to OpenCV's on random point sets.

#include <opencv2/core.hpp>

#include <span>
#include <vector>

namespace redwood {

/// Buffers for convex_hull and min_area_rect, kept by the caller (per thread or per stage): they
/// stop growing once the largest point set has been seen.
struct HullScratch {
  std::vector<int> order, stack, indices;
  std::vector<cv::Point> hull;
  std::vector<cv::Point2f> hull_points;
  std::vector<cv::Point2f> edges;  // the rotating calipers' hull edges and their inverse lengths
  std::vector<float> inverse_lengths;
};

/// cv::convexHull(points, hull) (anticlockwise as OpenCV counts it, the points themselves) into
/// `hull`, cleared first.
void convex_hull(std::span<const cv::Point> points, std::vector<cv::Point>& hull, HullScratch& scratch);
void convex_hull(std::span<const cv::Point2f> points, std::vector<cv::Point2f>& hull, HullScratch& scratch);

/// cv::minAreaRect(points): the rotated rectangle of least area around the points (their hull's
/// rotating calipers; a segment for two hull points, the point for one, an empty one for none).
cv::RotatedRect min_area_rect(std::span<const cv::Point> points, HullScratch& scratch);
cv::RotatedRect min_area_rect(std::span<const cv::Point2f> points, HullScratch& scratch);

}  // namespace redwood
