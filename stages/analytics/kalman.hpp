#pragma once
// A constant-velocity Kalman filter for boxes, as SORT, DeepSORT and ByteTrack use it: the state
// is the box's centre, aspect ratio (width / height) and height, and their velocities per frame;
// a detection measures the first four. The noise scales with the box's height (std 1/20 of it for
// position, 1/160 for velocity), so a large box near the camera may move more pixels per frame
// than a small one far away.

#include "stages/geometry.hpp"

#include <array>

namespace redwood {

/// (cx, cy, aspect, height): what a detection measures.
using BoxMeasurement = std::array<double, 4>;

BoxMeasurement to_measurement(const RectF& box);
RectF to_box(const BoxMeasurement& m);

struct BoxKalmanState {
  std::array<double, 8> mean{};        // cx, cy, a, h, vcx, vcy, va, vh
  std::array<double, 64> covariance{};  // 8 x 8, row-major
  /// The box the mean describes.
  RectF box() const { return to_box({mean[0], mean[1], mean[2], mean[3]}); }
};

struct BoxKalmanOptions {
  double std_weight_position = 1.0 / 20;
  double std_weight_velocity = 1.0 / 160;
};

class BoxKalman {
 public:
  explicit BoxKalman(BoxKalmanOptions options = {}) : o_(options) {}

  /// A new track at the measurement, at rest, with a wide velocity uncertainty.
  BoxKalmanState initiate(const BoxMeasurement& z) const;
  /// One frame ahead: x += v, covariance grows by the motion noise.
  void predict(BoxKalmanState& s) const;
  /// Folds in a measurement of the (predicted) state.
  void update(BoxKalmanState& s, const BoxMeasurement& z) const;

 private:
  BoxKalmanOptions o_;
};

}  // namespace redwood
