#include "core/latency_histogram.hpp"

#include <algorithm>
#include <cmath>

namespace redwood {

namespace {

int bucket_of(double ms) {
  if (!(ms > LatencyHistogram::kFirstMs)) return 0;  // also NaN
  const double i = std::ceil(std::log(ms / LatencyHistogram::kFirstMs) / std::log(LatencyHistogram::kGrowth));
  return static_cast<int>(std::min(i, static_cast<double>(LatencyHistogram::kBuckets - 1)));
}

}  // namespace

double LatencyHistogram::upper_ms(int i) { return kFirstMs * std::pow(kGrowth, i); }

void LatencyHistogram::add(double ms) {
  ++counts_[static_cast<std::size_t>(bucket_of(ms))];
  min_ms_ = count_ == 0 ? ms : std::min(min_ms_, ms);
  max_ms_ = count_ == 0 ? ms : std::max(max_ms_, ms);
  ++count_;
  sum_ms_ += ms;
}

void LatencyHistogram::merge(const LatencyHistogram& other) {
  if (other.count_ == 0) return;
  for (std::size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  min_ms_ = count_ == 0 ? other.min_ms_ : std::min(min_ms_, other.min_ms_);
  max_ms_ = count_ == 0 ? other.max_ms_ : std::max(max_ms_, other.max_ms_);
  count_ += other.count_;
  sum_ms_ += other.sum_ms_;
}

LatencyHistogram LatencyHistogram::since(const LatencyHistogram& earlier) const {
  LatencyHistogram d = *this;
  for (std::size_t i = 0; i < counts_.size(); ++i) d.counts_[i] -= earlier.counts_[i];
  d.count_ -= earlier.count_;
  d.sum_ms_ -= earlier.sum_ms_;
  return d;
}

std::int64_t LatencyHistogram::count_at_most(double ms) const {
  std::int64_t n = 0;
  for (int i = 0; i < kBuckets && upper_ms(i) <= ms; ++i) n += counts_[static_cast<std::size_t>(i)];
  return n;
}

double LatencyHistogram::percentile(double p) const {
  if (count_ <= 0) return 0;
  // The rank of the sample asked for, as the sorted-vector percentile takes it (1-based, ceil).
  const auto rank = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::ceil(p / 100.0 * static_cast<double>(count_))), 1,
                                             count_);
  if (rank == 1) return min_ms_;  // the ends are kept exactly
  if (rank == count_) return max_ms_;
  std::int64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += counts_[static_cast<std::size_t>(i)];
    if (seen >= rank) return std::clamp(upper_ms(i), min_ms_, max_ms_);
  }
  return max_ms_;
}

}  // namespace redwood
