#include "apps/redwood/tensor_summary.hpp"

#include <fmt/format.h>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <limits>

namespace redwood::app {

namespace {
constexpr float kRegionThreshold = 0.3f;  // PP-OCR's DB decoding threshold on the probability map
constexpr int kMinRegionPixels = 9;       // smaller blobs are noise, not text
constexpr int kMaxListedRegions = 4;
}  // namespace

std::string summarize_tensor(const Tensor& t) {
  if (t.numel() == 0) return t.description() + " (empty)";
  const std::vector<float> v = t.to_float_vector();
  double sum = 0;
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  std::int64_t nans = 0;
  for (float x : v) {
    if (std::isnan(x)) {
      ++nans;
      continue;
    }
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
  }
  std::string out = fmt::format("{} min {:.4g} max {:.4g} mean {:.4g}", t.description(), lo, hi,
                                sum / static_cast<double>(v.size()));
  if (nans) out += fmt::format(", {} NaN", nans);
  // A single-channel map of probabilities [N, 1, H, W]: count connected regions above threshold.
  if (t.rank() == 4 && t.dim(1) == 1 && lo >= 0.f && hi <= 1.f && t.dim(2) > 1 && t.dim(3) > 1) {
    const int h = static_cast<int>(t.dim(2)), w = static_cast<int>(t.dim(3));
    int regions = 0;
    std::int64_t above = 0;
    std::string boxes;  // the first few regions' boxes, in map pixels
    for (std::int64_t n = 0; n < t.dim(0); ++n) {
      cv::Mat map(h, w, CV_32F, const_cast<float*>(v.data() + n * h * w));
      cv::Mat mask = map > kRegionThreshold;
      above += cv::countNonZero(mask);
      cv::Mat labels, stats, centroids;
      const int count = cv::connectedComponentsWithStats(mask, labels, stats, centroids, 8, CV_32S);
      for (int i = 1; i < count; ++i) {
        if (stats.at<int>(i, cv::CC_STAT_AREA) < kMinRegionPixels) continue;
        if (++regions <= kMaxListedRegions) {
          boxes += fmt::format(" [x {} y {} w {} h {}]", stats.at<int>(i, cv::CC_STAT_LEFT),
                               stats.at<int>(i, cv::CC_STAT_TOP), stats.at<int>(i, cv::CC_STAT_WIDTH),
                               stats.at<int>(i, cv::CC_STAT_HEIGHT));
        }
      }
    }
    out += fmt::format("; {} region(s) above {} ({:.2f}% of pixels){}{}", regions, kRegionThreshold,
                       100.0 * static_cast<double>(above) / static_cast<double>(v.size()), boxes,
                       regions > kMaxListedRegions ? " ..." : "");
  }
  // Class scores [.., C]: report the arg-max of the first row.
  if (t.rank() >= 2 && t.dim(-1) > 1 && t.dim(-1) <= 100000 && !(t.rank() == 4 && t.dim(1) == 1)) {
    const std::int64_t c = t.dim(-1);
    const auto first = v.begin();
    const auto best = std::max_element(first, first + c);
    out += fmt::format("; first row arg-max {} ({:.4g})", best - first, *best);
  }
  return out;
}

}  // namespace redwood::app
