#pragma once
// OpenCV's side of pictures and geometry: a Picture viewed as a cv::Mat and a cv::Mat kept as a
// Picture (neither copies pixels), points and rectangles converted, and Mats whose buffers come
// from the frame pool. Code that calls OpenCV includes this; frames, and the code that only
// reads them, see stages/picture.hpp and stages/geometry.hpp alone.

#include "stages/geometry.hpp"
#include "stages/picture.hpp"

#include <opencv2/core.hpp>

#include <cstdint>
#include <vector>

namespace redwood {

class FrameMemory;

/// The picture's pixels as an 8-bit Mat of its channels, not copied. The Mat does not own them:
/// it is valid while `picture` (or a copy of it) is. Empty for an empty picture.
inline cv::Mat as_mat(const Picture& picture) {
  if (picture.empty()) return {};
  return cv::Mat(picture.height, picture.width, CV_8UC(picture.channels), picture.data, picture.stride);
}

/// The Mat's pixels as a picture, not copied: the picture keeps the Mat (its reference to the
/// buffer) until its last copy goes. A Mat over bytes it does not own gives a picture that does
/// not own them either. Empty for an empty Mat; throws InvalidArgument for a Mat that is not
/// two-dimensional 8-bit pixels.
Picture from_mat(cv::Mat mat);

inline cv::Point2f to_cv(PointF p) { return {p.x, p.y}; }
inline cv::Rect2f to_cv(const RectF& r) { return {r.x, r.y, r.width, r.height}; }
inline PointF from_cv(const cv::Point2f& p) { return {p.x, p.y}; }
inline RectF from_cv(const cv::Rect2f& r) { return {r.x, r.y, r.width, r.height}; }

/// A Mat header whose buffer, once created, comes from `memory` (when given): for the
/// intermediate pictures of a stage (resized, warped), which stay Mats.
cv::Mat frame_mat(FrameMemory* memory);

/// A rows x cols Mat of `type` over `buffer`, which grows when too small and never shrinks: for an
/// intermediate picture that lives only inside one call. Handed to OpenCV as an output of that
/// size and type, it is written in place (create() finds it the right size), so a per-thread
/// buffer makes the call allocate nothing once the largest picture has been seen. Valid until
/// the buffer next grows.
inline cv::Mat scratch_mat(std::vector<std::uint8_t>& buffer, int rows, int cols, int type) {
  const std::size_t bytes = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols) * CV_ELEM_SIZE(type);
  if (buffer.size() < bytes) buffer.resize(bytes);
  return cv::Mat(rows, cols, type, buffer.data());
}

}  // namespace redwood
