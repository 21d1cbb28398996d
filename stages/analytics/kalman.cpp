// The filter of ByteTrack's kalman_filter.py (from DeepSORT), with fixed-size matrices: F is the
// identity plus the velocity terms, H takes the first four components, the noises are diagonal
// and proportional to the box height.

#include "stages/analytics/kalman.hpp"

#include <cmath>

namespace redwood {

namespace {

constexpr int kN = 8;  // state size
constexpr int kM = 4;  // measurement size

double& at(std::array<double, 64>& p, int r, int c) { return p[r * kN + c]; }
double square(double v) { return v * v; }

}  // namespace

BoxMeasurement to_measurement(const RectF& box) {
  return {box.x + box.width / 2.0, box.y + box.height / 2.0, static_cast<double>(box.width) / box.height,
          static_cast<double>(box.height)};
}

RectF to_box(const BoxMeasurement& m) {
  const double w = m[2] * m[3];
  return {static_cast<float>(m[0] - w / 2), static_cast<float>(m[1] - m[3] / 2), static_cast<float>(w),
          static_cast<float>(m[3])};
}

BoxKalmanState BoxKalman::initiate(const BoxMeasurement& z) const {
  BoxKalmanState s;
  for (int i = 0; i < kM; ++i) s.mean[i] = z[i];
  const double h = z[3], p = o_.std_weight_position, v = o_.std_weight_velocity;
  const std::array<double, kN> std{2 * p * h, 2 * p * h, 1e-2, 2 * p * h, 10 * v * h, 10 * v * h, 1e-5, 10 * v * h};
  for (int i = 0; i < kN; ++i) at(s.covariance, i, i) = square(std[i]);
  return s;
}

void BoxKalman::predict(BoxKalmanState& s) const {
  const double h = s.mean[3], p = o_.std_weight_position, v = o_.std_weight_velocity;
  const std::array<double, kN> std{p * h, p * h, 1e-2, p * h, v * h, v * h, 1e-5, v * h};
  for (int i = 0; i < kM; ++i) s.mean[i] += s.mean[i + kM];
  // P = F P F^T with F = [I I; 0 I]: rows then columns i += i + 4.
  auto& P = s.covariance;
  for (int r = 0; r < kM; ++r) {
    for (int c = 0; c < kN; ++c) at(P, r, c) += at(P, r + kM, c);
  }
  for (int c = 0; c < kM; ++c) {
    for (int r = 0; r < kN; ++r) at(P, r, c) += at(P, r, c + kM);
  }
  for (int i = 0; i < kN; ++i) at(P, i, i) += square(std[i]);
}

void BoxKalman::update(BoxKalmanState& s, const BoxMeasurement& z) const {
  const double h = s.mean[3], p = o_.std_weight_position;
  const std::array<double, kM> r{p * h, p * h, 1e-1, p * h};
  auto& P = s.covariance;
  // S = H P H^T + R (the top-left 4 x 4 block plus the measurement noise); its inverse by
  // Gauss-Jordan (S is symmetric positive definite and small).
  std::array<double, kM * kM> S{}, Sinv{};
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kM; ++j) S[i * kM + j] = at(P, i, j) + (i == j ? square(r[i]) : 0.0);
    Sinv[i * kM + i] = 1.0;
  }
  for (int c = 0; c < kM; ++c) {
    int pivot = c;
    for (int i = c + 1; i < kM; ++i) {
      if (std::abs(S[i * kM + c]) > std::abs(S[pivot * kM + c])) pivot = i;
    }
    for (int j = 0; j < kM; ++j) {
      std::swap(S[c * kM + j], S[pivot * kM + j]);
      std::swap(Sinv[c * kM + j], Sinv[pivot * kM + j]);
    }
    const double d = S[c * kM + c];
    for (int j = 0; j < kM; ++j) {
      S[c * kM + j] /= d;
      Sinv[c * kM + j] /= d;
    }
    for (int i = 0; i < kM; ++i) {
      if (i == c) continue;
      const double f = S[i * kM + c];
      for (int j = 0; j < kM; ++j) {
        S[i * kM + j] -= f * S[c * kM + j];
        Sinv[i * kM + j] -= f * Sinv[c * kM + j];
      }
    }
  }
  // K = P H^T S^-1 (8 x 4); mean += K (z - H mean); P -= K H P.
  std::array<double, kN * kM> K{};
  for (int i = 0; i < kN; ++i) {
    for (int j = 0; j < kM; ++j) {
      double sum = 0;
      for (int k = 0; k < kM; ++k) sum += at(P, i, k) * Sinv[k * kM + j];
      K[i * kM + j] = sum;
    }
  }
  std::array<double, kM> innovation{};
  for (int j = 0; j < kM; ++j) innovation[j] = z[j] - s.mean[j];
  for (int i = 0; i < kN; ++i) {
    for (int j = 0; j < kM; ++j) s.mean[i] += K[i * kM + j] * innovation[j];
  }
  std::array<double, 64> next = P;
  for (int i = 0; i < kN; ++i) {
    for (int c = 0; c < kN; ++c) {
      double sum = 0;
      for (int k = 0; k < kM; ++k) sum += K[i * kM + k] * at(P, k, c);
      at(next, i, c) -= sum;
    }
  }
  P = next;
}

}  // namespace redwood
