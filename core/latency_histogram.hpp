#pragma once
// Latencies in fixed memory: counts in log-spaced buckets, each 2 % wider than the last, from
// 0.01 ms to about 100 minutes (beyond: the last bucket). A stream's percentiles then cost the
// same after a minute or a month of frames (a list of every latency would grow by 8 bytes a
// frame), and a percentile is within 2 % above the exact one; the smallest and largest latency
// seen are kept exactly.

#include <array>
#include <cstdint>

namespace redwood {

class LatencyHistogram {
 public:
  static constexpr double kFirstMs = 0.01;  // bucket 0 holds everything up to here
  static constexpr double kGrowth = 1.02;   // each bucket's upper bound over the last's
  static constexpr int kBuckets = 1024;     // the last ends at 0.01 ms * 1.02^1023, about 6.3e6 ms

  void add(double ms);
  /// Adds another histogram's counts (the streams of a run together).
  void merge(const LatencyHistogram& other);
  /// The latencies added since `earlier`, a copy of this histogram taken before (min and max
  /// then span both: they only bound the percentiles).
  LatencyHistogram since(const LatencyHistogram& earlier) const;

  /// The latency below which p % of the samples fall (p in [0, 100]); 0 when empty.
  double percentile(double p) const;
  std::int64_t count() const { return count_; }
  /// The samples in buckets whose upper bound is at most `ms` (a Prometheus bucket "le"): every
  /// sample <= ms / 1.02 is counted, none above ms.
  std::int64_t count_at_most(double ms) const;
  double sum_ms() const { return sum_ms_; }
  /// The upper bound of bucket i, in milliseconds.
  static double upper_ms(int i);

 private:
  std::array<std::int64_t, kBuckets> counts_{};
  std::int64_t count_ = 0;
  double sum_ms_ = 0;
  double min_ms_ = 0, max_ms_ = 0;
};

}  // namespace redwood
