#pragma once
// Run statistics per stream: frames read, delivered, dropped (live sources falling behind),
// in flight (and its high water: back-pressure must keep it <= max_in_flight), reconnects, and
// end-to-end latency (read to sinks) for p50/p99 in a fixed-size histogram.

#include "core/model_runner.hpp"
#include "core/latency_histogram.hpp"
#include "stages/stage.hpp"
#include "stages/frame_memory.hpp"

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace redwood {

struct StreamStats {
  std::string name;
  std::int64_t read = 0;        // frames the source produced
  std::int64_t resumed_at = 0;  // the first seq read: frames before it a durable sink already held
  std::int64_t dropped = 0;     // dropped before entering the graph (live, oldest first)
  std::int64_t delivered = 0;   // frames every sink got
  std::int64_t in_flight = 0;
  std::int64_t max_in_flight = 0;
  std::int64_t queued = 0;      // frames waiting between the source and the graph
  std::int64_t reconnects = 0;
  double outage_ms = 0;         // time without frames after lost connections (network sources)
  bool connected = true;        // false during an outage (network sources)
  LatencyHistogram latency;     // of every delivered frame, in fixed memory
};

/// A stage's work over the run, and what it could sustain alone (its bound).
struct StageStats {
  std::string name;
  std::int64_t calls = 0, frames = 0;
  double busy_ms = 0;        // in the stage's own code (asynchronous: handing frames over)
  double cpu_ms = 0;         // CPU time of that (busy_ms less waiting and preemption)
  LatencyHistogram latency;  // per call, start to finish (asynchronous: to completion)
  std::map<std::int64_t, std::int64_t> batch_rows;  // a model stage's batches: rows -> batches
  int parallelism = 1;       // threads that may run it at once
  /// Frames per second the stage could sustain if nothing else ran: frames over its busy time
  /// spread across its parallelism, and for a model also over its runners' busy time (the device:
  /// a GPU's compute engine, or the CPU runner's worker).
  double bound_fps = 0;
  std::vector<StageCounter> counters;  // the stage's own counts (tracks, line crossings...)
};

/// A GPU that several models may share: its compute engine's busy time (the union over every
/// model's batches) and the frames it could take per second at that cost.
struct DeviceStats {
  std::string name;          // "cuda:0"
  std::int64_t frames = 0;   // the most frames any of its stages handled
  double compute_busy_ms = 0;
  double bound_fps = 0;
  std::int64_t memory_used_bytes = 0, memory_total_bytes = 0;  // the whole device's (0: unknown)
};

struct SinkStats {
  std::string name;
  std::int64_t written = 0, dropped = 0, failed = 0;
};

/// A worker's share of a sharded pipeline (redwood run --shard): its ordinal of `count`, and the
/// streams rendezvous hashing gave it out of every stream the file describes.
struct ShardStats {
  int index = 0, count = 1;
  std::int64_t streams_total = 0;
  std::vector<std::string> owned;
  std::int64_t changes = 0;  // re-shards since the process started (a count followed at run time)
};

struct PipelineStats {
  double elapsed_s = 0;
  double first_result_s = -1;  // from the run's start to the first frame every sink got (-1: none yet)
  double cpu_s = 0;    // the process's CPU time (user + system, every thread) over the run
  int host_cores = 0;  // the cores this process may run on
  std::vector<StreamStats> streams;
  std::vector<StageStats> stages;
  std::vector<RunnerStats> runners;  // the models' runners (core/model_runner.hpp)
  std::vector<DeviceStats> devices;  // the GPUs they run on
  std::vector<SinkStats> sinks;
  FrameMemoryStats memory;  // the frame pool: in steady state its upstream calls stay constant
  std::int64_t frames_created = 0;  // Frame objects made; the rest were recycled (FramePool)
  std::optional<ShardStats> shard;  // with --shard
};

/// The CPU time this process has used so far (user + system, every thread), in seconds.
double process_cpu_seconds();
/// The cores this process may run on (its CPU affinity).
int host_cores();


/// "cam0 120 frames 9.8 fps p50 85.1 ms p99 130.2 ms drops 0 | ..." — fps over the time since
/// `previous` (same streams). Over four streams, one line for all: total fps, the slowest and
/// fastest stream, latency over every stream's frames, drops.
std::string status_line(const PipelineStats& now, const PipelineStats& previous);
/// A multi-line summary for the end of a run: per stream (over four: the totals, and the
/// slowest streams), per stage (busy, bound), per model runner (throughput, batches, overlap,
/// device busy, copy bandwidth), sinks and the frame pool.
std::string summary_text(const PipelineStats& stats);
/// "shard 1/3: 4 of 10 stream(s): a, b, c, d" (past 20 names: the first 20 and how many more).
std::string shard_line(const ShardStats& shard);

}  // namespace redwood
