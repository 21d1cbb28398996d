// redwood_vision_bench: Redwood's allocation-free copies of OpenCV's image functions against
// OpenCV's own, in the same process, on the OCR pipeline's work: the contours of a 416x320 DB
// mask with 24 text lines and specks, each contour's minimum-area rectangle and score-mask fill,
// the detector's 768x576 -> 416x320 resize and a text crop's resize to a 48-pixel strip. OpenCV
// runs on one thread (as Redwood's copies do) unless the name says `threads:default`. At the end
// it prints each Redwood time over its OpenCV peer's:
//
//   redwood_vision_bench [--benchmark_filter=...] [--benchmark_repetitions=5]

#include "stages/postprocess/contours.hpp"
#include "stages/postprocess/min_area_rect.hpp"
#include "stages/postprocess/polygon_fill.hpp"
#include "stages/preprocess/linear_resize.hpp"

#include <benchmark/benchmark.h>
#include <opencv2/imgproc.hpp>

#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace redwood;

// A detector-like probability map thresholded as the DB postprocess does: text lines (some
// tilted, some touching) and small specks.
const cv::Mat& db_mask() {
  static const cv::Mat mask = [] {
    std::mt19937 rng(7);
    cv::Mat map(320, 416, CV_32F, cv::Scalar::all(0));
    std::uniform_real_distribution<float> x(0.f, 416.f), y(0.f, 320.f), length(30.f, 200.f), height(8.f, 20.f),
        tilt(-8.f, 8.f);
    for (int i = 0; i < 24; ++i) {
      cv::Point2f corners[4];
      cv::RotatedRect({x(rng), y(rng)}, {length(rng), height(rng)}, tilt(rng)).points(corners);
      std::vector<cv::Point> quad;
      for (const auto& c : corners) quad.emplace_back(cvRound(c.x), cvRound(c.y));
      cv::fillConvexPoly(map, quad, cv::Scalar::all(0.9));
    }
    for (int i = 0; i < 60; ++i) {
      cv::circle(map, {cvRound(x(rng)), cvRound(y(rng))}, 1 + i % 3, cv::Scalar::all(0.5), cv::FILLED);
    }
    cv::GaussianBlur(map, map, cv::Size(5, 5), 0);
    cv::Mat m;
    cv::compare(map, 0.3, m, cv::CMP_GT);
    return m;
  }();
  return mask;
}

std::vector<std::vector<cv::Point>> opencv_contours() {
  std::vector<std::vector<cv::Point>> contours;
  cv::findContours(db_mask(), contours, cv::RETR_LIST, cv::CHAIN_APPROX_SIMPLE);
  return contours;
}

void BM_Contours_Redwood(benchmark::State& state) {
  ContourList contours;
  for (auto _ : state) {
    find_contours(db_mask(), contours);
    benchmark::DoNotOptimize(contours.size());
  }
  state.counters["contours"] = static_cast<double>(contours.size());
}

void BM_Contours_OpenCv(benchmark::State& state) {
  std::vector<std::vector<cv::Point>> contours;
  for (auto _ : state) {
    cv::findContours(db_mask(), contours, cv::RETR_LIST, cv::CHAIN_APPROX_SIMPLE);
    benchmark::DoNotOptimize(contours.data());
  }
}

void BM_MinAreaRect_Redwood(benchmark::State& state) {
  const auto contours = opencv_contours();
  HullScratch scratch;
  for (auto _ : state) {
    for (const auto& c : contours) benchmark::DoNotOptimize(min_area_rect(std::span<const cv::Point>(c), scratch));
  }
}

// What the DB postprocess did with OpenCV: the hull, as floats, then minAreaRect.
void BM_MinAreaRect_OpenCv(benchmark::State& state) {
  const auto contours = opencv_contours();
  std::vector<cv::Point> hull;
  std::vector<cv::Point2f> hull_points;
  for (auto _ : state) {
    for (const auto& c : contours) {
      cv::convexHull(c, hull);
      hull_points.assign(hull.begin(), hull.end());
      benchmark::DoNotOptimize(cv::minAreaRect(hull_points));
    }
  }
}

// Each contour's score mask: its bounding box cleared, then the contour filled.
template <typename Fill>
void fill_contours(benchmark::State& state, Fill fill) {
  auto contours = opencv_contours();
  std::vector<cv::Rect> boxes;
  for (auto& c : contours) {
    boxes.push_back(cv::boundingRect(c));
    for (auto& p : c) p -= boxes.back().tl();
  }
  std::vector<std::uint8_t> bytes(416 * 320);
  for (auto _ : state) {
    for (std::size_t i = 0; i < contours.size(); ++i) {
      cv::Mat mask(boxes[i].height, boxes[i].width, CV_8U, bytes.data());
      std::fill_n(mask.data, mask.total(), std::uint8_t{0});
      fill(mask, contours[i]);
      benchmark::DoNotOptimize(mask.data);
    }
  }
}

void BM_PolygonFill_Redwood(benchmark::State& state) {
  PolygonFill polygon_fill;
  fill_contours(state, [&](cv::Mat& mask, const std::vector<cv::Point>& c) { polygon_fill.fill(mask, c, 1); });
}

void BM_PolygonFill_OpenCv(benchmark::State& state) {
  std::vector<std::vector<cv::Point>> one(1);
  fill_contours(state, [&](cv::Mat& mask, const std::vector<cv::Point>& c) {
    one[0] = c;
    cv::fillPoly(mask, one, cv::Scalar(1));
  });
}

cv::Mat random_picture(int rows, int cols) {
  cv::Mat m(rows, cols, CV_8UC3);
  cv::randu(m, cv::Scalar::all(0), cv::Scalar::all(256));
  return m;
}

// range(0): 0 for the detector's resize, 1 for a text crop's.
struct ResizeCase {
  cv::Mat src;
  cv::Size size;
};
ResizeCase resize_case(std::int64_t which) {
  if (which == 0) return {random_picture(576, 768), {416, 320}};
  return {random_picture(37, 231), {300, 48}};
}

void BM_Resize_Redwood(benchmark::State& state) {
  const ResizeCase c = resize_case(state.range(0));
  cv::Mat out(c.size, CV_8UC3);
  LinearResize resize;
  for (auto _ : state) {
    resize.resize(c.src, out);
    benchmark::DoNotOptimize(out.data);
  }
}

void BM_Resize_OpenCv(benchmark::State& state) {
  const ResizeCase c = resize_case(state.range(0));
  cv::Mat out(c.size, CV_8UC3);
  for (auto _ : state) {
    cv::resize(c.src, out, c.size, 0, 0, cv::INTER_LINEAR);
    benchmark::DoNotOptimize(out.data);
  }
}

void BM_Resize_OpenCv_ThreadsDefault(benchmark::State& state) {
  const int threads = cv::getNumThreads();
  cv::setNumThreads(-1);
  BM_Resize_OpenCv(state);
  cv::setNumThreads(threads);
}

BENCHMARK(BM_Contours_Redwood)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Contours_OpenCv)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MinAreaRect_Redwood)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MinAreaRect_OpenCv)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PolygonFill_Redwood)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PolygonFill_OpenCv)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Resize_Redwood)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Resize_OpenCv)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Resize_OpenCv_ThreadsDefault)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

// The console report, then each Redwood time over its OpenCV peer's (the same name with
// _OpenCv for _Redwood; medians where repetitions ran).
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name != "median") continue;
      std::string name = r.run_name.str();
      if (const auto at = name.find("/real_time"); at != std::string::npos) name.erase(at);
      times_[name] = r.GetAdjustedRealTime();
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    for (const auto& [name, time] : times_) {
      const auto at = name.find("_Redwood");
      if (at == std::string::npos) continue;
      for (const char* peer : {"_OpenCv", "_OpenCv_ThreadsDefault"}) {
        std::string other = name;
        other.replace(at, 8, peer);
        if (const auto it = times_.find(other); it != times_.end()) {
          std::printf("%-34s %9.2f us, %-42s %9.2f us: %.2fx\n", name.c_str(), time, other.c_str(), it->second,
                      time / it->second);
        }
      }
    }
  }

 private:
  std::map<std::string, double> times_;
};

}  // namespace

int main(int argc, char** argv) {
  cv::setNumThreads(1);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
