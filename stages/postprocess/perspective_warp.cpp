#include "stages/postprocess/perspective_warp.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

namespace redwood {

namespace {

// OpenCV's fixed-point constants (imgproc's INTER_BITS and INTER_REMAP_COEF_BITS).
constexpr int kSubpixelBits = 5;
constexpr int kSubpixels = 1 << kSubpixelBits;  // source coordinates in 1/32 pixel
constexpr int kWeightBits = 15;
constexpr int kWeightOne = 1 << kWeightBits;

// cv::interpolateCubic (A = -0.75), in floats as OpenCV computes it.
void cubic_weights(float x, float* w) {
  const float a = -0.75f;
  w[0] = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a;
  w[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
  w[2] = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1;
  w[3] = 1.f - w[0] - w[1] - w[2];
}

// OpenCV's BicubicTab_i: per (y, x) fraction in 1/32, 4x4 integer weights summing to exactly
// 1 << 15. The rounding error goes to the largest or smallest of the weights at rows and columns
// 2 and 3 (OpenCV's "central" four for a kernel of 4, taken as it takes them).
struct CubicTable {
  short w[kSubpixels * kSubpixels][16];

  CubicTable() {
    float one_d[kSubpixels][4];
    const float step = 1.f / kSubpixels;
    for (int i = 0; i < kSubpixels; ++i) cubic_weights(static_cast<float>(i) * step, one_d[i]);
    for (int i = 0; i < kSubpixels; ++i) {
      for (int j = 0; j < kSubpixels; ++j) {
        short* t = w[i * kSubpixels + j];
        int sum = 0;
        for (int k1 = 0; k1 < 4; ++k1) {
          for (int k2 = 0; k2 < 4; ++k2) {
            const float v = one_d[i][k1] * one_d[j][k2];
            t[k1 * 4 + k2] = cv::saturate_cast<short>(v * kWeightOne);
            sum += t[k1 * 4 + k2];
          }
        }
        if (sum == kWeightOne) continue;
        const int diff = sum - kWeightOne;
        int max_k1 = 2, max_k2 = 2, min_k1 = 2, min_k2 = 2;
        for (int k1 = 2; k1 < 4; ++k1) {
          for (int k2 = 2; k2 < 4; ++k2) {
            if (t[k1 * 4 + k2] < t[min_k1 * 4 + min_k2]) {
              min_k1 = k1, min_k2 = k2;
            } else if (t[k1 * 4 + k2] > t[max_k1 * 4 + max_k2]) {
              max_k1 = k1, max_k2 = k2;
            }
          }
        }
        if (diff < 0) {
          t[max_k1 * 4 + max_k2] = static_cast<short>(t[max_k1 * 4 + max_k2] - diff);
        } else {
          t[min_k1 * 4 + min_k2] = static_cast<short>(t[min_k1 * 4 + min_k2] - diff);
        }
      }
    }
  }
};

const CubicTable& cubic_table() {
  static const CubicTable table;
  return table;
}

// BORDER_REPLICATE's index.
inline int clamp_index(int i, int n) { return std::clamp(i, 0, n - 1); }

// One output pixel from the 4x4 source pixels whose top-left is (sx, sy), as remapBicubic does:
// the integer sum rounded off its 15 fraction bits and saturated to 8 bits.
template <int kChannels>
void cubic_pixel(const cv::Mat& src, int sx, int sy, const short* w, std::uint8_t* out) {
  const int width = src.cols, height = src.rows;
  int xs[4], ys[4];
  const bool inside = static_cast<unsigned>(sx) < static_cast<unsigned>(std::max(width - 3, 0)) &&
                      static_cast<unsigned>(sy) < static_cast<unsigned>(std::max(height - 3, 0));
  for (int i = 0; i < 4; ++i) {
    xs[i] = (inside ? sx + i : clamp_index(sx + i, width)) * kChannels;
    ys[i] = inside ? sy + i : clamp_index(sy + i, height);
  }
  for (int c = 0; c < kChannels; ++c) {
    int sum = 0;
    for (int i = 0; i < 4; ++i) {
      const std::uint8_t* row = src.ptr<std::uint8_t>(ys[i]) + c;
      sum += row[xs[0]] * w[i * 4] + row[xs[1]] * w[i * 4 + 1] + row[xs[2]] * w[i * 4 + 2] + row[xs[3]] * w[i * 4 + 3];
    }
    out[c] = cv::saturate_cast<std::uint8_t>((sum + (1 << (kWeightBits - 1))) >> kWeightBits);
  }
}

template <int kChannels>
void warp(const cv::Mat& src, const double* m, cv::Mat& dst) {
  const CubicTable& table = cubic_table();
  const int width = dst.cols, height = dst.rows;
  // OpenCV's blocks (imgwarp.cpp, WarpPerspectiveInvoker): a row's coordinates start again at
  // each block's first column, and that sum's rounding shows in the pixels.
  constexpr int kBlock = 32;
  int block_rows = std::min(kBlock / 2, height);
  const int block_cols = std::min(kBlock * kBlock / block_rows, width);
  block_rows = std::min(kBlock * kBlock / block_cols, height);
  (void)block_rows;  // rows do not change the sums: a row's start is its whole index
  for (int y = 0; y < height; ++y) {
    std::uint8_t* out = dst.ptr<std::uint8_t>(y);
    for (int x = 0; x < width; x += block_cols) {
      const int columns = std::min(block_cols, width - x);
      const double x0 = m[0] * x + m[1] * y + m[2];
      const double y0 = m[3] * x + m[4] * y + m[5];
      const double w0 = m[6] * x + m[7] * y + m[8];
      for (int x1 = 0; x1 < columns; ++x1) {
        double w = w0 + m[6] * x1;
        w = w != 0 ? kSubpixels / w : 0;
        const double fx = std::max(static_cast<double>(INT_MIN), std::min(static_cast<double>(INT_MAX), (x0 + m[0] * x1) * w));
        const double fy = std::max(static_cast<double>(INT_MIN), std::min(static_cast<double>(INT_MAX), (y0 + m[3] * x1) * w));
        const int ix = cv::saturate_cast<int>(fx), iy = cv::saturate_cast<int>(fy);
        const int sx = cv::saturate_cast<short>(ix >> kSubpixelBits), sy = cv::saturate_cast<short>(iy >> kSubpixelBits);
        const int fraction = (iy & (kSubpixels - 1)) * kSubpixels + (ix & (kSubpixels - 1));
        cubic_pixel<kChannels>(src, sx - 1, sy - 1, table.w[fraction], out + static_cast<std::size_t>(x + x1) * kChannels);
      }
    }
  }
}

}  // namespace

cv::Matx33d perspective_transform(const std::array<cv::Point2f, 4>& from, const std::array<cv::Point2f, 4>& to) {
  // cv::getPerspectiveTransform's system, entry for entry (the products in float, as there).
  double a[8][8], b[8];
  for (int i = 0; i < 4; ++i) {
    a[i][0] = a[i + 4][3] = from[i].x;
    a[i][1] = a[i + 4][4] = from[i].y;
    a[i][2] = a[i + 4][5] = 1;
    a[i][3] = a[i][4] = a[i][5] = a[i + 4][0] = a[i + 4][1] = a[i + 4][2] = 0;
    a[i][6] = -from[i].x * to[i].x;
    a[i][7] = -from[i].y * to[i].x;
    a[i + 4][6] = -from[i].x * to[i].y;
    a[i + 4][7] = -from[i].y * to[i].y;
    b[i] = to[i].x;
    b[i + 4] = to[i].y;
  }
  cv::Matx33d h;
  cv::Mat system(8, 8, CV_64F, a), rhs(8, 1, CV_64F, b), solution(8, 1, CV_64F, h.val);
  cv::solve(system, rhs, solution, cv::DECOMP_LU);
  h.val[8] = 1.;
  return h;
}

void warp_perspective_cubic(const cv::Mat& src, const cv::Matx33d& src_to_dst, cv::Mat& dst) {
  RW_EXPECTS(src.depth() == CV_8U && src.channels() >= 1 && src.channels() <= 4 && src.dims == 2, InvalidArgument,
             "warp_perspective_cubic: the source must be 8-bit pixels of 1 to 4 channels, not {}",
             cv::typeToString(src.type()));
  RW_EXPECTS(dst.type() == src.type() && dst.dims == 2, InvalidArgument,
             "warp_perspective_cubic: the output must be created by the caller with the source's type ({}), not {}",
             cv::typeToString(src.type()), cv::typeToString(dst.type()));
  if (dst.empty() || src.empty()) return;
  // The output-to-source map, inverted as warpPerspective inverts it (cv::invert, LU).
  double m[9];
  std::copy(src_to_dst.val, src_to_dst.val + 9, m);
  cv::Mat inverse(3, 3, CV_64F, m);
  cv::invert(inverse, inverse);
  switch (src.channels()) {
    case 1: warp<1>(src, m, dst); break;
    case 2: warp<2>(src, m, dst); break;
    case 3: warp<3>(src, m, dst); break;
    default: warp<4>(src, m, dst); break;
  }
}

}  // namespace redwood
