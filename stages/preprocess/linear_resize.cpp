#include "stages/preprocess/linear_resize.hpp"

#include "core/error.hpp"

#include <opencv2/core/hal/intrin.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

namespace redwood {

namespace {

constexpr int kWeightBits = 11;  // OpenCV's INTER_RESIZE_COEF_BITS
constexpr int kWeightOne = 1 << kWeightBits;

// OpenCV's weight of a fraction: the float times 2048, rounded to the nearest short.
std::int16_t weight(float w) { return cv::saturate_cast<std::int16_t>(w * kWeightOne); }

// OpenCV's 8-bit vertical step over two horizontally interpolated rows (VResizeLinear for uchar,
// which its vector code and its scalar code compute alike).
void vertical(const int* s0, const int* s1, std::int16_t b0, std::int16_t b1, std::uint8_t* out, int width) {
  int x = 0;
#if CV_SIMD128
  const cv::v_int16x8 vb0 = cv::v_setall_s16(b0), vb1 = cv::v_setall_s16(b1);
  for (; x <= width - 16; x += 16) {
    const cv::v_int16x8 a0 = cv::v_pack(cv::v_load(s0 + x) >> 4, cv::v_load(s0 + x + 4) >> 4);
    const cv::v_int16x8 a1 = cv::v_pack(cv::v_load(s0 + x + 8) >> 4, cv::v_load(s0 + x + 12) >> 4);
    const cv::v_int16x8 c0 = cv::v_pack(cv::v_load(s1 + x) >> 4, cv::v_load(s1 + x + 4) >> 4);
    const cv::v_int16x8 c1 = cv::v_pack(cv::v_load(s1 + x + 8) >> 4, cv::v_load(s1 + x + 12) >> 4);
    cv::v_store(out + x, cv::v_rshr_pack_u<2>(cv::v_mul_hi(a0, vb0) + cv::v_mul_hi(c0, vb1),
                                              cv::v_mul_hi(a1, vb0) + cv::v_mul_hi(c1, vb1)));
  }
#endif
  for (; x < width; ++x) {
    out[x] = static_cast<std::uint8_t>((((b0 * (s0[x] >> 4)) >> 16) + ((b1 * (s1[x] >> 4)) >> 16) + 2) >> 2);
  }
}

// OpenCV's INTER_LINEAR shortcut for an exact halving both ways (its INTER_AREA fast path): each
// output pixel the rounded mean of its 2x2 block (the 2-channel case rounds the float mean to
// even, as OpenCV's generic loop does).
void halve(const cv::Mat& src, cv::Mat& dst) {
  const int cn = src.channels();
  for (int y = 0; y < dst.rows; ++y) {
    const std::uint8_t* s0 = src.ptr<std::uint8_t>(2 * y);
    const std::uint8_t* s1 = src.ptr<std::uint8_t>(2 * y + 1);
    std::uint8_t* out = dst.ptr<std::uint8_t>(y);
    for (int x = 0; x < dst.cols; ++x, s0 += 2 * cn, s1 += 2 * cn, out += cn) {
      for (int c = 0; c < cn; ++c) {
        const int sum = s0[c] + s0[c + cn] + s1[c] + s1[c + cn];
        out[c] = cn == 2 ? cv::saturate_cast<std::uint8_t>(static_cast<float>(sum) * 0.25f)
                         : static_cast<std::uint8_t>((sum + 2) >> 2);
      }
    }
  }
}

}  // namespace

template <int kChannels, int kRows>
void LinearResize::horizontal(const std::uint8_t* const* src, int src_bytes, int* const* out) const {
  const int width = static_cast<int>(column_.size());
  const int* column = column_.data();
  const int* next = next_column_.data();
  const std::int16_t* weights = column_weights_.data();
  const std::uint8_t* in[kRows];
  int* to[kRows];
  for (int r = 0; r < kRows; ++r) in[r] = src[r], to[r] = out[r];
  int x = 0;
#if CV_SIMD128
  if constexpr (kChannels >= 3) {
    // A pixel's channels at once: eight bytes from each source pixel widened to 16 bits and
    // interleaved, so that the low four lanes pair channel c of the two pixels; times the two
    // weights and summed in 32 bits. The fourth lane of three channels lands on the next pixel's
    // first value, which that pixel overwrites.
    int end = width;
    while (end > 0 && next[end - 1] + 8 > src_bytes) --end;
    for (; x < end; ++x) {
      std::int32_t pair;
      std::memcpy(&pair, weights + 2 * x, sizeof pair);
      const cv::v_int16x8 w = cv::v_reinterpret_as_s16(cv::v_setall_s32(pair));
      for (int r = 0; r < kRows; ++r) {
        cv::v_uint16x8 pairs, unused;
        cv::v_zip(cv::v_load_expand(in[r] + column[x]), cv::v_load_expand(in[r] + next[x]), pairs, unused);
        cv::v_store(to[r] + x * kChannels, cv::v_dotprod(cv::v_reinterpret_as_s16(pairs), w));
      }
    }
  }
#endif
  for (; x < width; ++x) {
    const int a0 = weights[2 * x], a1 = weights[2 * x + 1];
    for (int r = 0; r < kRows; ++r) {
      const std::uint8_t* p0 = in[r] + column[x];
      const std::uint8_t* p1 = in[r] + next[x];
      for (int c = 0; c < kChannels; ++c) to[r][x * kChannels + c] = p0[c] * a0 + p1[c] * a1;
    }
  }
}

template <int kChannels>
void LinearResize::interpolate(const cv::Mat& src, cv::Mat& dst) {
  const int src_width = src.cols, src_height = src.rows;
  const int width = dst.cols, height = dst.rows;
  // OpenCV's scales: the output's size over the source's, then their inverses.
  const double scale_x = 1. / (static_cast<double>(width) / src_width);
  const double scale_y = 1. / (static_cast<double>(height) / src_height);
  // The columns: where each output pixel's centre falls in the source, clamped at both ends (a
  // clamped column takes its one pixel whole).
  column_.resize(static_cast<std::size_t>(width));
  next_column_.resize(static_cast<std::size_t>(width));
  column_weights_.resize(2 * static_cast<std::size_t>(width));
  for (int x = 0; x < width; ++x) {
    float fx = static_cast<float>((x + 0.5) * scale_x - 0.5);
    int sx = cvFloor(fx);
    fx -= static_cast<float>(sx);
    if (sx < 0) fx = 0, sx = 0;
    const bool last = sx + 1 >= src_width;
    if (last) fx = 0, sx = src_width - 1;
    column_[static_cast<std::size_t>(x)] = sx * kChannels;
    next_column_[static_cast<std::size_t>(x)] = (last ? sx : sx + 1) * kChannels;
    column_weights_[2 * static_cast<std::size_t>(x)] = weight(1.f - fx);
    column_weights_[2 * static_cast<std::size_t>(x) + 1] = weight(fx);
  }
  // Two interpolated rows, each tagged with its source row; a row still held is not redone.
  const std::size_t row_size = static_cast<std::size_t>(width) * kChannels + 4;  // + the spare lane
  rows_.resize(2 * row_size);
  int* rows[2] = {rows_.data(), rows_.data() + row_size};
  int held[2] = {-1, -1};
  const int src_bytes = src_width * kChannels;
  const auto row_of = [&](int y, int keep) -> const int* {
    for (int k = 0; k < 2; ++k) {
      if (held[k] == y) return rows[k];
    }
    const int k = keep == 0 ? 1 : 0;
    const std::uint8_t* line = src.ptr<std::uint8_t>(y);
    horizontal<kChannels, 1>(&line, src_bytes, &rows[k]);
    held[k] = y;
    return rows[k];
  };
  for (int y = 0; y < height; ++y) {
    float fy = static_cast<float>((y + 0.5) * scale_y - 0.5);
    const int sy = cvFloor(fy);
    fy -= static_cast<float>(sy);
    const int y0 = std::clamp(sy, 0, src_height - 1), y1 = std::clamp(sy + 1, 0, src_height - 1);
    if (y0 != y1 && held[0] != y0 && held[1] != y0 && held[0] != y1 && held[1] != y1) {
      // Both rows new (a shrink): one pass over the columns' tables for the two.
      const std::uint8_t* lines[2] = {src.ptr<std::uint8_t>(y0), src.ptr<std::uint8_t>(y1)};
      horizontal<kChannels, 2>(lines, src_bytes, rows);
      held[0] = y0;
      held[1] = y1;
    }
    const int* r0 = row_of(y0, held[0] == y1 ? 0 : held[1] == y1 ? 1 : -1);
    const int* r1 = row_of(y1, r0 == rows[0] ? 0 : 1);
    vertical(r0, r1, weight(1.f - fy), weight(fy), dst.ptr<std::uint8_t>(y), width * kChannels);
  }
}

void LinearResize::resize(const cv::Mat& src, cv::Mat& dst) {
  RW_EXPECTS(src.depth() == CV_8U && src.channels() >= 1 && src.channels() <= 4 && src.dims == 2, InvalidArgument,
             "LinearResize: the source must be 8-bit pixels of 1 to 4 channels, not {}", cv::typeToString(src.type()));
  RW_EXPECTS(dst.type() == src.type() && dst.dims == 2, InvalidArgument,
             "LinearResize: the output must be created by the caller with the source's type ({}), not {}",
             cv::typeToString(src.type()), cv::typeToString(dst.type()));
  RW_EXPECTS(!src.empty() && !dst.empty(), InvalidArgument, "LinearResize: {}x{} to {}x{}: both must have pixels",
             src.cols, src.rows, dst.cols, dst.rows);
  if (dst.size() == src.size()) {
    src.copyTo(dst);
    return;
  }
  // OpenCV's test for its area shortcut: both scales whole numbers, in doubles.
  const double scale_x = 1. / (static_cast<double>(dst.cols) / src.cols);
  const double scale_y = 1. / (static_cast<double>(dst.rows) / src.rows);
  const int whole_x = cv::saturate_cast<int>(scale_x), whole_y = cv::saturate_cast<int>(scale_y);
  if (std::abs(scale_x - whole_x) < DBL_EPSILON && std::abs(scale_y - whole_y) < DBL_EPSILON && whole_x == 2 &&
      whole_y == 2) {
    halve(src, dst);
    return;
  }
  switch (src.channels()) {
    case 1: interpolate<1>(src, dst); break;
    case 2: interpolate<2>(src, dst); break;
    case 3: interpolate<3>(src, dst); break;
    default: interpolate<4>(src, dst); break;
  }
}

}  // namespace redwood
