#include "runtime/host_segment_time.hpp"

#include "core/error.hpp"
#include "core/host_threads.hpp"
#include "core/log.hpp"
#include "runtime/cpu_profile.hpp"
#include "runtime/executor.hpp"
#include "runtime/median_time.hpp"
#include "runtime/value_pool.hpp"

#include <oneapi/tbb/parallel_for.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <vector>

namespace redwood::runtime {
namespace {

// Writes a buffer past the last-level cache (at most 256 MiB), which pushes out what it held.
class CacheEvictor {
 public:
  CacheEvictor() : buffer_(past_last_level_cache(std::size_t{256} << 20)) {}
  void evict() {
    std::memset(buffer_.data(), ++fill_, buffer_.size());
  }

 private:
  std::vector<unsigned char> buffer_;
  unsigned char fill_ = 0;
};

// Wakes the threads a segment's kernels run on, on the calling thread (inside HostThreads::run):
// oneDNN's OpenMP team of this thread, in an empty parallel region, and oneTBB's workers of its
// arena, each given a few microseconds of spinning.
void wake_threads(int threads) {
  const int n = threads > 0 ? threads : omp_get_max_threads();
#pragma omp parallel num_threads(n)
  {
    [[maybe_unused]] volatile int here = omp_get_thread_num();
  }
  oneapi::tbb::parallel_for(
      0, n,
      [](int) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(5);
        while (std::chrono::steady_clock::now() < until) {
        }
      },
      oneapi::tbb::simple_partitioner{});
}

// The spread of the segment's runs at `threads`, as time_host_segment describes them: each after
// a long idle, or (`woken`) with its threads woken just before.
Spread timed_runs(const ModelAnalysis& analysis, const Segment& segment, int runs, int threads, CacheEvictor& cache,
                  bool woken = false) {
  std::map<std::string, Tensor> feeds;
  for (const auto& in : segment.inputs) {
    const TensorDesc& d = analysis.values.at(in);
    feeds[boxed_name(in)] = Tensor::zeros(d.dtype, boxed_shape(d.shape));
  }
  // The outputs come from recycled memory, as the split runner's pool gives them: taken from the
  // heap each run, they would be page-faulted in each time (an 8.5 MB output: 2,000 faults).
  auto pool = std::make_shared<ValuePool>(nullptr);
  const TensorAllocator allocate = pool->allocator();
  // A new executor for each count: oneDNN makes a primitive for the threads it will run on.
  Executor executor(segment.graph);
  const HostThreads host(threads);
  host.run([&] { executor.run(feeds, &allocate); });  // plans: oneDNN's primitives, the workspace
  std::vector<double> ms;
  for (int r = 0; r < runs; ++r) {
    cache.evict();
    host.run([&] {
      if (woken) wake_threads(threads);
      const auto t0 = std::chrono::steady_clock::now();
      executor.run(feeds, &allocate);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    });
  }
  return spread(std::move(ms));
}

// The segment timed (`runs` runs a count) at the counts choose_threads asks for, and its choice:
// a run as slow as the best count's slow runs, which leaves the other cores to the rest of the
// pipeline and wakes fewer threads; then at the chosen count with its threads woken before each
// run, 2 * runs + 1 runs: that timing stands for most segments of a split, and on the GPU hosts a
// median of five moved by up to 30 % from one timing to the next. std::nullopt (logged) when the
// segment fails to run, which its runner will then report.
std::optional<HostThreadsChoice> time_at_counts(const ModelAnalysis& analysis, const Segment& segment, int runs,
                                                const std::vector<int>& counts) {
  RW_EXPECTS(runs > 0, InvalidArgument, "timing a host segment: {} runs", runs);
  try {
    CacheEvictor cache;
    HostThreadsChoice choice =
        choose_threads(counts, [&](int threads) { return timed_runs(analysis, segment, runs, threads, cache); });
    choice.woken_ms = timed_runs(analysis, segment, 2 * runs + 1, choice.threads, cache, true).median;
    return choice;
  } catch (const std::exception& e) {  // an Error, or memory for the inputs or the eviction buffer
    log().warn("{}: not timed on the host ({}); its nodes' times stand for it", segment.graph->name, e.what());
    return std::nullopt;
  }
}

}  // namespace

HostThreadsChoice choose_threads(const std::vector<int>& counts, const std::function<Spread(int threads)>& time_at) {
  RW_EXPECTS(!counts.empty(), InvalidArgument, "choosing host threads among no thread count");
  constexpr double kWithin = 1.05;
  std::vector<HostThreadsChoice> tried;  // the most threads first
  double best = 0;
  int beyond = 0;  // counts in a row, the last tried, beyond kWithin of the best
  for (auto it = counts.rbegin(); it != counts.rend() && beyond < 2; ++it) {
    const Spread ms = time_at(*it);
    tried.push_back({*it, ms.median, ms.p90});
    best = tried.size() == 1 ? ms.p90 : std::min(best, ms.p90);
    beyond = ms.p90 > best * kWithin ? beyond + 1 : 0;
  }
  // One thread wakes no team: a short segment may run fastest there though fewer threads than the
  // best count were slower. Its runs cost little where the best is short.
  constexpr double kShortMs = 1.0;
  if (counts.front() == 1 && tried.back().threads != 1 && best <= kShortMs) {
    const Spread ms = time_at(1);
    tried.push_back({1, ms.median, ms.p90});
    best = std::min(best, ms.p90);
  }
  for (auto it = tried.rbegin(); it != tried.rend(); ++it) {
    if (it->p90_ms <= best * kWithin) return *it;
  }
  return tried.front();
}

std::optional<HostThreadsChoice> time_host_segment(const ModelAnalysis& analysis, const Segment& segment, int runs,
                                                   int threads) {
  return time_at_counts(analysis, segment, runs, {threads});
}

std::vector<int> host_thread_counts(int most) {
  std::vector<int> counts;
  for (int t = 1; t < most; t *= 2) counts.push_back(t);
  counts.push_back(std::max(most, 1));
  return counts;
}

std::optional<HostThreadsChoice> choose_host_threads(const ModelAnalysis& analysis, const Segment& segment, int runs) {
  return time_at_counts(analysis, segment, runs, host_thread_counts(process_host_threads()));
}

}  // namespace redwood::runtime
