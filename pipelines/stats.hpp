#pragma once
// Run statistics per stream: frames read, delivered, dropped (live sources falling behind),
// in flight (and its high water: back-pressure must keep it <= max_in_flight), reconnects, and
// end-to-end latency (read to sinks) for p50/p99.

#include "stages/frame_memory.hpp"

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace redwood {

struct StreamStats {
  std::string name;
  std::int64_t read = 0;        // frames the source produced
  std::int64_t dropped = 0;     // dropped before entering the graph (live, oldest first)
  std::int64_t delivered = 0;   // frames every sink got
  std::int64_t in_flight = 0;
  std::int64_t max_in_flight = 0;
  std::int64_t reconnects = 0;
  double outage_ms = 0;         // time without frames after lost connections (network sources)
  std::vector<double> latencies_ms;  // every delivered frame
};

struct SinkStats {
  std::string name;
  std::int64_t written = 0, dropped = 0;
};

struct PipelineStats {
  double elapsed_s = 0;
  std::vector<StreamStats> streams;
  std::vector<SinkStats> sinks;
  FrameMemoryStats memory;  // the frame pool: in steady state its upstream calls stay constant
  std::int64_t frames_created = 0;  // Frame objects made; the rest were recycled (FramePool)
};

/// p in [0, 100]; 0 for no samples.
double percentile(std::vector<double> values, double p);

/// "cam0 120 frames 9.8 fps p50 85.1 ms p99 130.2 ms drops 0 | ..." — fps over `window_s`
/// from the delivered counts of `previous` (same streams).
std::string status_line(const PipelineStats& now, const PipelineStats& previous);
/// A multi-line summary for the end of a run.
std::string summary_text(const PipelineStats& stats);

}  // namespace redwood
