// Latencies in fixed memory: percentiles within 2 % of the exact ones (and exact at the ends),
// merging streams, the window since an earlier copy, and a size that does not grow with frames.

#include "core/latency_histogram.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace redwood {
namespace {

double exact(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<std::size_t>(rank, 1, v.size()) - 1];
}

TEST(LatencyHistogram, PercentilesAreWithinTwoPercentOfTheSortedSamples) {
  std::mt19937 rng(7);
  std::lognormal_distribution<double> dist(std::log(40.0), 0.8);  // ~40 ms, a long tail
  LatencyHistogram h;
  std::vector<double> v;
  for (int i = 0; i < 20000; ++i) {
    const double ms = dist(rng);
    h.add(ms);
    v.push_back(ms);
  }
  for (double p : {1.0, 50.0, 90.0, 99.0, 99.9}) {
    const double want = exact(v, p);
    EXPECT_GE(h.percentile(p), want) << p;
    EXPECT_LE(h.percentile(p), want * 1.02) << p;
  }
  EXPECT_EQ(h.percentile(0), *std::min_element(v.begin(), v.end()));
  EXPECT_EQ(h.percentile(100), *std::max_element(v.begin(), v.end()));
  EXPECT_EQ(h.count(), 20000);
  EXPECT_EQ(sizeof(LatencyHistogram), sizeof(h));  // fixed: nothing grows with the samples
  EXPECT_EQ(LatencyHistogram().percentile(50), 0.0);
}

TEST(LatencyHistogram, MergeAndSinceGiveTheStreamsTogetherAndTheRecentWindow) {
  LatencyHistogram a, b;
  for (int i = 1; i <= 100; ++i) a.add(i);         // 1 .. 100 ms
  for (int i = 0; i < 100; ++i) b.add(1000);       // 1 s
  LatencyHistogram both = a;
  both.merge(b);
  EXPECT_EQ(both.count(), 200);
  EXPECT_NEAR(both.percentile(25), 50, 1);
  EXPECT_EQ(both.percentile(99), 1000);
  const LatencyHistogram before = a;
  for (int i = 0; i < 10; ++i) a.add(500);
  const LatencyHistogram recent = a.since(before);
  EXPECT_EQ(recent.count(), 10);
  EXPECT_NEAR(recent.percentile(50), 500, 10);
  // Extremes and nonsense land in the end buckets.
  LatencyHistogram ends;
  ends.add(0);
  ends.add(-3);
  ends.add(1e12);
  EXPECT_EQ(ends.count(), 3);
  EXPECT_EQ(ends.percentile(100), 1e12);
}

TEST(LatencyHistogram, CountAtMostIsACumulativeBucketWithinTwoPercent) {
  LatencyHistogram h;
  for (int i = 1; i <= 1000; ++i) h.add(i);  // 1 .. 1000 ms
  EXPECT_EQ(h.count_at_most(0.001), 0);
  EXPECT_EQ(h.count_at_most(1e9), 1000);
  for (double le : {5.0, 50.0, 250.0, 999.0}) {
    const auto n = h.count_at_most(le);
    // Every sample <= le / 1.02 is in, none above le.
    EXPECT_GE(n, static_cast<std::int64_t>(std::floor(le / 1.02))) << le;
    EXPECT_LE(n, static_cast<std::int64_t>(std::floor(le))) << le;
  }
  // Cumulative: never decreasing in le.
  std::int64_t last = 0;
  for (double le = 0.01; le < 2000; le *= 1.3) {
    EXPECT_GE(h.count_at_most(le), last);
    last = h.count_at_most(le);
  }
}

}  // namespace
}  // namespace redwood
