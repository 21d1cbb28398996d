#pragma once
// A split's host segments timed on this host while it is planned. The analysis times each node
// inside the whole model, where every input was made just before and is still in the cache. A
// host segment of a split starts instead from values another device copied into host memory and
// from weights last read a batch ago, and it converts its edges' layouts: summed node times miss
// most of that. The host is at hand while planning, so each host segment of a cut the planner
// compares is run as the split runner will run it, and timed.

#include "runtime/median_time.hpp"
#include "runtime/cut_model.hpp"

#include <functional>
#include <optional>
#include <vector>

namespace redwood::runtime {

/// The thread counts a host segment is timed at: 1, 2, 4, ... below `most`, and `most`.
std::vector<int> host_thread_counts(int most);

struct HostThreadsChoice {
  int threads = 0;
  double ms = 0;        // the median run at that count, after a long idle
  double p90_ms = 0;    // the 90th percentile
  double woken_ms = 0;  // the median run at that count with its threads woken just before (0: not timed)
};

/// How long a host segment's threads may have been idle and still answer about as if woken just
/// before. oneDNN's OpenMP threads sleep as soon as a kernel ends (the launcher's passive wait
/// policy), and the next kernel's wait for them grows with that sleep: on the GPU hosts (16-core
/// virtual machines), timed alone with a set idle before each run, an empty parallel region of 4
/// threads took 15-22 us after 0.1 ms and 50-170 us after 1 ms, and rec's attention Softmax on 4
/// threads a median 0.147 ms after 0.16 ms and 0.232-0.336 ms after 1-3 ms (at every count by 3
/// ms). In a split, where the host keeps other threads busy between its segments, the same
/// segments ran near their woken time after idles up to about 1 ms (rec's three one-node segments
/// on an H100 host: 0.135, 0.137 and 0.349 ms, their long-idle timings 0.205, 0.205 and 0.551).
inline constexpr double kShortIdleMs = 2.0;

/// Host segment `segment` of a cut of `analysis`, run alone by the CPU executor (as the CPU runner
/// runs it) on zeros of its inputs' shapes, its kernels on `threads` host threads (HostThreads; 0:
/// the process's count), its outputs in recycled memory (as the split runner's pool gives them):
/// one warm-up run, then `runs` timed, each after the last-level cache was evicted (which leaves
/// its threads idle for a long while), then `2 * runs + 1` more with its threads woken just before
/// each (wake_threads: what a segment meets after a short idle, kShortIdleMs; the timing that
/// stands for most segments of a split, so it takes more runs). The medians in
/// milliseconds (`ms` and `woken_ms`); std::nullopt (logged) when the segment fails to run, which
/// its runner will then report.
std::optional<HostThreadsChoice> time_host_segment(const ModelAnalysis& analysis, const Segment& segment, int runs = 5,
                                                   int threads = 0);

/// The fewest of `counts` (ascending) whose 90th percentile is within 5 % of the lowest, each
/// count's runs given by `time_at`: a short segment's batches on every core wait for a team of
/// every core to wake, and range 2-4x from run to run and process to process; on a few threads
/// they run as fast and steadier. The counts are timed from the most down, and once two in a row
/// are beyond that 5 % the fewer are not timed: a segment whose work spreads over the threads only
/// gets slower with fewer, and those runs (a long segment on one thread) are most of its timing.
/// One thread, which wakes no team, is timed all the same where the best count's 90th percentile
/// is at most 1 ms: a 0.4 MB Softmax (rec's attention) runs in a median 0.09 ms on one thread of
/// a 2-core VM and 0.15 ms on two.
HostThreadsChoice choose_threads(const std::vector<int>& counts, const std::function<Spread(int threads)>& time_at);

/// Times host segment `segment` as time_host_segment does (`runs` runs) at the thread counts of
/// host_thread_counts(process_host_threads()) that choose_threads asks for, and returns its
/// choice, with its threads woken before each run timed at the chosen count (woken_ms).
/// std::nullopt (logged) when the segment fails to run.
std::optional<HostThreadsChoice> choose_host_threads(const ModelAnalysis& analysis, const Segment& segment, int runs = 9);

}  // namespace redwood::runtime
