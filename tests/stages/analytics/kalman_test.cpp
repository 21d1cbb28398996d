// The box Kalman filter against ByteTrack's kalman_filter.py written out with whole matrices
// (F, H, Q, R; P F^T; S^-1 by Gauss-Jordan) here in the test, and on a box moving at constant
// velocity, whose speed it must learn.

#include "stages/analytics/kalman.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace redwood {
namespace {

using Mat = std::vector<std::vector<double>>;

Mat zeros(int r, int c) { return Mat(r, std::vector<double>(c, 0.0)); }
Mat mul(const Mat& a, const Mat& b) {
  Mat out = zeros(static_cast<int>(a.size()), static_cast<int>(b[0].size()));
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < b[0].size(); ++j)
      for (std::size_t k = 0; k < b.size(); ++k) out[i][j] += a[i][k] * b[k][j];
  return out;
}
Mat transpose(const Mat& a) {
  Mat out = zeros(static_cast<int>(a[0].size()), static_cast<int>(a.size()));
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < a[0].size(); ++j) out[j][i] = a[i][j];
  return out;
}
Mat add(const Mat& a, const Mat& b, double sign = 1.0) {
  Mat out = a;
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < a[0].size(); ++j) out[i][j] += sign * b[i][j];
  return out;
}
Mat inverse(Mat a) {
  const int n = static_cast<int>(a.size());
  Mat inv = zeros(n, n);
  for (int i = 0; i < n; ++i) inv[i][i] = 1;
  for (int c = 0; c < n; ++c) {
    const double d = a[c][c];
    for (int j = 0; j < n; ++j) a[c][j] /= d, inv[c][j] /= d;
    for (int i = 0; i < n; ++i) {
      if (i == c) continue;
      const double f = a[i][c];
      for (int j = 0; j < n; ++j) a[i][j] -= f * a[c][j], inv[i][j] -= f * inv[c][j];
    }
  }
  return inv;
}
Mat diag_sq(const std::vector<double>& s) {
  Mat out = zeros(static_cast<int>(s.size()), static_cast<int>(s.size()));
  for (std::size_t i = 0; i < s.size(); ++i) out[i][i] = s[i] * s[i];
  return out;
}

// ByteTrack's filter, matrices and all.
struct Reference {
  Mat x = zeros(8, 1), P = zeros(8, 8), F = zeros(8, 8), H = zeros(4, 8);
  static constexpr double wp = 1.0 / 20, wv = 1.0 / 160;
  explicit Reference(const BoxMeasurement& z) {
    for (int i = 0; i < 8; ++i) F[i][i] = 1;
    for (int i = 0; i < 4; ++i) F[i][i + 4] = 1, H[i][i] = 1, x[i][0] = z[i];
    const double h = z[3];
    P = diag_sq({2 * wp * h, 2 * wp * h, 1e-2, 2 * wp * h, 10 * wv * h, 10 * wv * h, 1e-5, 10 * wv * h});
  }
  void predict() {
    const double h = x[3][0];
    x = mul(F, x);
    P = add(mul(mul(F, P), transpose(F)), diag_sq({wp * h, wp * h, 1e-2, wp * h, wv * h, wv * h, 1e-5, wv * h}));
  }
  void update(const BoxMeasurement& z) {
    const double h = x[3][0];
    const Mat S = add(mul(mul(H, P), transpose(H)), diag_sq({wp * h, wp * h, 1e-1, wp * h}));
    const Mat K = mul(mul(P, transpose(H)), inverse(S));
    Mat innovation = zeros(4, 1);
    for (int i = 0; i < 4; ++i) innovation[i][0] = z[i] - x[i][0];
    x = add(x, mul(K, innovation));
    P = add(P, mul(mul(K, S), transpose(K)), -1.0);
  }
};

void expect_same(const BoxKalmanState& s, const Reference& r) {
  for (int i = 0; i < 8; ++i) {
    EXPECT_NEAR(s.mean[i], r.x[i][0], 1e-9 * (1 + std::abs(r.x[i][0]))) << "mean " << i;
    for (int j = 0; j < 8; ++j) EXPECT_NEAR(s.covariance[i * 8 + j], r.P[i][j], 1e-9 * (1 + std::abs(r.P[i][j]))) << i << "," << j;
  }
}

TEST(BoxKalman, MatchesByteTrackFormulas) {
  const BoxKalman kf;
  const BoxMeasurement z0{100, 50, 0.5, 80};
  BoxKalmanState s = kf.initiate(z0);
  Reference r(z0);
  expect_same(s, r);
  const std::vector<BoxMeasurement> zs{{104, 51, 0.52, 81}, {109, 53, 0.49, 79}, {113, 52, 0.51, 82}};
  for (const auto& z : zs) {
    kf.predict(s);
    r.predict();
    expect_same(s, r);
    kf.update(s, z);
    r.update(z);
    expect_same(s, r);
  }
  // Two frames without a measurement, then one.
  kf.predict(s), r.predict(), kf.predict(s), r.predict();
  kf.update(s, {125, 55, 0.5, 80});
  r.update({125, 55, 0.5, 80});
  expect_same(s, r);
}

TEST(BoxKalman, LearnsAConstantVelocity) {
  const BoxKalman kf;
  RectF box{10, 20, 40, 80};
  BoxKalmanState s = kf.initiate(to_measurement(box));
  for (int t = 0; t < 30; ++t) {
    box.x += 4, box.y -= 1;
    kf.predict(s);
    kf.update(s, to_measurement(box));
  }
  EXPECT_NEAR(s.mean[4], 4.0, 0.05);
  EXPECT_NEAR(s.mean[5], -1.0, 0.05);
  // Ten frames unseen: the prediction goes on at that speed.
  for (int t = 0; t < 10; ++t) kf.predict(s);
  const RectF p = s.box();
  EXPECT_NEAR(p.x, box.x + 40, 1.0);
  EXPECT_NEAR(p.y, box.y - 10, 1.0);
  EXPECT_NEAR(p.width, 40, 0.5);
  EXPECT_NEAR(p.height, 80, 0.5);
}

TEST(BoxKalman, BoxRoundTrip) {
  const RectF b{3, 4, 30, 60};
  const BoxMeasurement m = to_measurement(b);
  EXPECT_DOUBLE_EQ(m[0], 18);
  EXPECT_DOUBLE_EQ(m[1], 34);
  EXPECT_DOUBLE_EQ(m[2], 0.5);
  EXPECT_DOUBLE_EQ(m[3], 60);
  EXPECT_EQ(to_box(m), b);
}

}  // namespace
}  // namespace redwood
