#pragma once
// Pipeline: a pipeline file built into sources, stages and sinks, checked end to end at
// construction, and run on a oneTBB flow graph:
//
//   source ─► queue ─► pump ─(token)─► stage ─► stage ─► [batcher ─► infer] ─► ... ─► sequencer ─► sinks
//   (thread   block |   (thread      function_nodes;   one thread per batching     per stream    in frame
//    each)    drop      each)        stateless ones     stage, frames of all       reorder       order
//             oldest                 run in parallel    streams together
//
// Invariants: at most service.max_in_flight frames of a stream are between pump and sinks; each
// sink sees a stream's frames in read order; a live stream's drops are counted, a file stream
// never drops. A stage's exception stops the run: sources stop, frames in flight drain (skipping
// sinks for the failed ones), and run() throws the error, naming the stage. A source's exception
// stops the sources too, but the frames read so far go through to the sinks before run() throws.

#include "pipelines/config.hpp"
#include "pipelines/metrics.hpp"
#include "pipelines/pipeline_planner.hpp"
#include "pipelines/shard.hpp"
#include "pipelines/stats.hpp"
#include "stages/frame_memory.hpp"
#include "stages/sink/sink.hpp"
#include "stages/source/source.hpp"
#include "stages/stage.hpp"

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace redwood {

/// The most worker threads `service.threads` and `--threads` accept.
inline constexpr int kMaxThreads = 1024;

struct ServiceSettings {
  int max_in_flight = 4;        // per stream
  int queue = 2;                // frames waiting between a source and the graph, per stream
  int threads = 0;              // oneTBB workers that run the stages (0: one per core)
  double status_interval_s = 1;
  FrameMemoryConfig memory;     // the frame pool (pictures, tensors, batches, crops)
  MetricsSettings metrics;      // the metrics and health endpoint (the launcher serves it)
  /// latency_limit_ms, cpu_stage_ms: the placement of device: auto models (pipeline_planner.hpp).
  PipelinePlacementSettings placement;
};

/// How the launcher asks a pipeline to run its sources (redwood run --streams, --realtime).
struct PipelineOptions {
  /// Copies of every source, named "<name>-1" ... "<name>-N" when N > 1: the multi-stream
  /// benchmark. Their starts are staggered over one frame period, so that frames of the copies
  /// arrive spread out as those of independent cameras do.
  int streams = 1;
  /// Files are read at their frame rate (or at `fps` when > 0), as a camera delivers them: the
  /// reader waits for each frame's time, and a stream that falls behind drops its oldest
  /// waiting frame and counts it, as a live source does.
  bool realtime = false;
  double fps = 0;
  /// Files start over at their end (with realtime: an endless camera).
  bool loop = false;
  /// With --shard: only the streams (named after the copies above are made) that rendezvous
  /// hashing gives this worker are built and run (pipelines/shard.hpp). A worker given none
  /// stays up idle until stopped (Pipeline::run), as a StatefulSet's pod must.
  std::optional<ShardSpec> shard = std::nullopt;
};

struct RunOptions {
  std::int64_t max_frames = 0;                 // per stream (0: until the sources end)
  const std::atomic<bool>* stop = nullptr;     // set (e.g. by SIGINT) to stop and drain
  std::function<void(const PipelineStats&)> on_status;  // at most every status_interval_s
};

/// A run that ended in an error (a stage's, a sink's or a source's), with the statistics of what
/// ran until then (the launcher prints them before the message).
class RunError : public Error {
 public:
  RunError(const std::string& message, PipelineStats stats) : Error(message), stats_(std::move(stats)) {}
  const PipelineStats& stats() const { return stats_; }

 private:
  PipelineStats stats_;
};

class Pipeline {
 public:
  /// Builds and checks everything the file names; throws ConfigError at file:line:column.
  explicit Pipeline(const PipelineFile& file, const PipelineOptions& options = {});
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  /// Runs until every source ends, max_frames per stream, or *stop; drains the frames in
  /// flight. Throws RunError with the first error a stage, sink or source raised (after
  /// stopping cleanly).
  PipelineStats run(const RunOptions& options = {});

  const std::string& name() const { return name_; }
  const ServiceSettings& service() const { return service_; }
  std::vector<std::string> stream_names() const;
  /// With --shard: this worker's place and the streams it owns (also in every PipelineStats).
  const std::optional<ShardStats>& shard() const { return shard_; }
  const std::vector<std::unique_ptr<Stage>>& stages() const { return stages_; }
  /// The placement of the `device: auto` models, made together at load (none when no such model
  /// runs where CUDA is usable).
  const std::optional<PipelinePlan>& placement() const { return placement_; }
  /// The pool frames' buffers come from (statistics: PipelineStats::memory).
  FrameMemory& memory() { return *memory_; }

  struct Stream {
    std::string name;
    std::unique_ptr<Source> source;
    int priority = 0;          // batching stages take frames of higher priority first
    double start_phase = 0;    // realtime copies: this copy's start, in frame periods (0 to 1)
  };
  struct NamedSink {
    std::string name;
    std::unique_ptr<Sink> sink;
  };

 private:
  /// run() of a sharded worker that owns no stream: waits for options.stop (statuses go on).
  PipelineStats idle(const RunOptions& options, const std::function<PipelineStats(PipelineStats)>& with_shard);
  /// Every stream's frames a second together: --fps, else the sources' rates when paced (--realtime,
  /// or live sources); 0 when unpaced or a rate is unknown.
  double frames_per_s() const;
  /// Places the device: auto models together (pipeline_planner.hpp), once every stage is checked,
  /// under the run's thread limit: the host segments it times run on the threads the run allows.
  void place_models();
  /// oneTBB's limit on the process's threads while the pipeline places and runs (0: none). With
  /// `threads: N`, N + 1: N workers run the stages, and the limit counts the calling thread too,
  /// which only watches the run (sources feed the graph from threads of their own); a limit of N
  /// would leave `threads: 1` no worker at all.
  int thread_limit() const { return service_.threads > 0 ? service_.threads + 1 : 0; }
  /// When a run ends: the batch times the placed models' runners measured, into the cost history
  /// on disk (record_batch_times). Logs and goes on when it cannot.
  void record_batch_times() noexcept;

  std::string name_;
  PipelineOptions options_;
  ServiceSettings service_;
  ModelTable models_;
  std::vector<Stream> streams_;
  std::vector<std::unique_ptr<Stage>> stages_;
  std::vector<NamedSink> sinks_;
  std::unique_ptr<FrameMemory> memory_;
  std::optional<ShardStats> shard_;
  std::optional<PipelinePlan> placement_;
};

}  // namespace redwood
