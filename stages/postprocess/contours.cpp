#include "stages/postprocess/contours.hpp"

#include "core/error.hpp"

#include <opencv2/core/hal/intrin.hpp>

#include <algorithm>

namespace redwood {

namespace {

// The image holds 0 (background), 1 (foreground not yet on a traced border), 2 (on a traced
// border) and -126 (on a traced border, with background on its right: OpenCV's nbd | 0x80 for
// nbd 2; list mode never needs another border number).
constexpr std::int8_t kBorder = 2;
constexpr std::int8_t kRightBorder = static_cast<std::int8_t>(kBorder | -128);

// Chain code s steps to the neighbour at (kStepX[s], kStepY[s]): 0 east, then anticlockwise on
// screen (y down).
constexpr int kStepX[8] = {1, 1, 0, -1, -1, -1, 0, 1};
constexpr int kStepY[8] = {0, -1, -1, -1, 0, 1, 1, 1};

// OpenCV's icvFetchContour for CHAIN_APPROX_SIMPLE: follows the border through `start` (the pixel
// at `pt` in mask coordinates), marking it, and appends the points where the chain code changes.
// An outer border starts its search for the first neighbour from the west, a hole's from the east.
void trace_border(std::int8_t* start, int step, cv::Point pt, bool hole, std::vector<cv::Point>& points) {
  int deltas[16];
  const int offsets[8] = {1, -step + 1, -step, -step - 1, -1, step - 1, step, step + 1};
  for (int i = 0; i < 16; ++i) deltas[i] = offsets[i & 7];

  int s_end = hole ? 0 : 4, s = s_end;
  std::int8_t* i1;
  do {
    s = (s - 1) & 7;
    i1 = start + deltas[s];
  } while (*i1 == 0 && s != s_end);

  if (s == s_end) {  // a single pixel
    *start = kRightBorder;
    points.push_back(pt);
    return;
  }
  std::int8_t* i3 = start;
  std::int8_t* i4 = nullptr;
  int prev_s = s ^ 4;
  for (;;) {
    s_end = s;
    while (s < 15) {
      i4 = i3 + deltas[++s];
      if (*i4 != 0) break;
    }
    s &= 7;
    // The search passed the east neighbour (code 0) and found it background: a right border.
    if (static_cast<unsigned>(s - 1) < static_cast<unsigned>(s_end)) {
      *i3 = kRightBorder;
    } else if (*i3 == 1) {
      *i3 = kBorder;
    }
    if (s != prev_s) {
      points.push_back(pt);
      prev_s = s;
    }
    pt.x += kStepX[s];
    pt.y += kStepY[s];
    if (i4 == start && i3 == i1) break;
    i3 = i4;
    s = (s + 4) & 7;
  }
}

// The first x from `x` (below `end`) where row[x] differs from `value`, sixteen bytes at a time
// where the CPU can (the rows are mostly long runs).
int skip_run(const std::int8_t* row, int x, int end, std::int8_t value) {
#if CV_SIMD128
  const cv::v_int8x16 run = cv::v_setall_s8(value);
  for (; x + 16 <= end; x += 16) {
    const cv::v_int8x16 differs = cv::v_load(row + x) != run;
    if (cv::v_check_any(differs)) return x + cv::v_scan_forward(differs);
  }
#endif
  while (x < end && row[x] == value) ++x;
  return x;
}

// One mask row as 0 and 1 (OpenCV's threshold to 0/1).
void binarize(const std::uint8_t* in, std::int8_t* out, int width) {
  int x = 0;
#if CV_SIMD128
  const cv::v_uint8x16 zero = cv::v_setzero_u8(), one = cv::v_setall_u8(1);
  for (; x + 16 <= width; x += 16) {
    cv::v_store(reinterpret_cast<std::uint8_t*>(out + x), (cv::v_load(in + x) != zero) & one);
  }
#endif
  for (; x < width; ++x) out[x] = static_cast<std::int8_t>(in[x] != 0);
}

}  // namespace

void find_contours(const cv::Mat& mask, ContourList& contours) {
  RW_EXPECTS(mask.type() == CV_8UC1 && mask.dims <= 2, InvalidArgument,
             "find_contours: the mask must be 8-bit with one channel, not {}", cv::typeToString(mask.type()));
  contours.points_.clear();
  contours.ranges_.clear();
  if (mask.empty()) return;
  // OpenCV's copyMakeBorder by one zero pixel and its threshold to 0/1.
  const int width = mask.cols + 2, height = mask.rows + 2;
  const std::size_t step = static_cast<std::size_t>(width);
  auto& image = contours.image_;
  image.resize(step * static_cast<std::size_t>(height));
  std::fill_n(image.begin(), step, std::int8_t{0});
  std::fill_n(image.end() - static_cast<std::ptrdiff_t>(step), step, std::int8_t{0});
  for (int y = 0; y < mask.rows; ++y) {
    const std::uint8_t* in = mask.ptr<std::uint8_t>(y);
    std::int8_t* out = image.data() + (static_cast<std::size_t>(y) + 1) * step;
    out[0] = out[width - 1] = 0;
    binarize(in, out + 1, mask.cols);
  }
  // OpenCV's cvFindNextContour in list mode: a border starts where the scan steps from 0 onto 1
  // (an outer border, traced from that pixel) or from an unmarked or left-marked foreground pixel
  // onto 0 (a hole's border, traced from the pixel before). The scan goes on after the start with
  // the start pixel's value as marked by the trace.
  for (int y = 1; y < height - 1; ++y) {
    std::int8_t* row = image.data() + static_cast<std::size_t>(y) * step;
    std::int8_t prev = 0;
    for (int x = 1; x < width - 1; ++x) {
      x = skip_run(row, x, width - 1, prev);
      if (x >= width - 1) break;
      const std::int8_t p = row[x];
      bool hole = false;
      if (!(prev == 0 && p == 1)) {
        if (p != 0 || prev < 1) {
          prev = p;
          continue;
        }
        hole = true;
      }
      const int start_x = x - static_cast<int>(hole);
      const std::size_t begin = contours.points_.size();
      trace_border(row + start_x, width, cv::Point(start_x - 1, y - 1), hole, contours.points_);
      contours.ranges_.emplace_back(begin, contours.points_.size());
      prev = row[x];
    }
  }
  // OpenCV links each new contour in front of the ones before it.
  std::reverse(contours.ranges_.begin(), contours.ranges_.end());
}

}  // namespace redwood
