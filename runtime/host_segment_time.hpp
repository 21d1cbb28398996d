#pragma once
// A split's host segments timed on this host while it is planned. The analysis times each node
// inside the whole model, where every input was made just before and is still in the cache. A
// host segment of a split starts instead from values another device copied into host memory and
// from weights last read a batch ago, and it converts its edges' layouts: summed node times miss
// most of that. The host is at hand while planning, so each host segment of a cut the planner
// compares is run as the split runner will run it, and timed.

#include "runtime/partition.hpp"

#include <optional>

namespace redwood::runtime {

/// Host segment `segment` of a cut of `analysis`, run alone by the CPU executor (as the CPU runner
/// runs it) on zeros of its inputs' shapes, its outputs in recycled memory (as the split runner's
/// pool gives them): one warm-up run, then `runs` timed, each after the last-level cache was evicted. The median in milliseconds; std::nullopt (logged) when the
/// segment fails to run, which its runner will then report.
std::optional<double> time_host_segment(const ModelAnalysis& analysis, const Segment& segment, int runs = 5);

}  // namespace redwood::runtime
