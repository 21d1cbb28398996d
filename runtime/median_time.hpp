#pragma once
// The median wall time of a few calls, for the device profilers (runtime/cpu_profile.cpp,
// backends/cuda/device_profiler.cu), and a sample's spread, for timed segments: the median, not the best, because a profile feeds cost
// estimates of ordinary runs, and not the mean, which one preempted call on a busy machine skews.
// C++17, for .cu files.

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

namespace redwood::runtime {

/// The median of `values` (not empty).
inline double median(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

/// A sample's median with its 10th and 90th percentiles (the values at those ranks).
struct Spread {
  double p10 = 0, median = 0, p90 = 0;
};

/// The spread of `values` (not empty).
inline Spread spread(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return {values[n / 10], values[n / 2], values[n - 1 - n / 10]};
}

/// Median wall time of `reps` calls of f, in milliseconds.
template <typename F>
double median_ms(int reps, F&& f) {
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return median(std::move(times));
}

}  // namespace redwood::runtime
