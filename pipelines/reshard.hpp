#pragma once
// A sharded run that follows the worker count (`redwood run --shard statefulset` with
// REDWOOD_PEERS): the pipeline is built for worker `index` of the current count and run; when a
// PeerWatch confirms a different count, the run is stopped as SIGTERM stops it (sources stop,
// frames in flight drain, sinks close), and the pipeline is built again for the new count and
// run, in the same process. Streams this worker no longer owns stop here; streams it now owns
// start here (rendezvous hashing: pipelines/shard.hpp). A change seen while a pipeline is being
// built is acted on once it runs.

#include "pipelines/peer_count.hpp"
#include "pipelines/pipeline.hpp"

#include <functional>

namespace redwood {

struct ReshardOptions {
  PeerCounter peers;         // counts the workers; empty: one run, sharded as PipelineOptions says
  double interval_s = kDefaultPeersInterval;
  std::string what = "the peer count";  // names the counter in log lines
  /// Each pipeline once built, before it runs (the launcher prints what it runs).
  std::function<void(Pipeline&)> on_built;
  /// A run stopped for a new count: its statistics, the count it ran with and the new one.
  std::function<void(const PipelineStats&, int from, int to)> on_reshard;
};

/// Runs `file`: with reshard.peers, as worker pipeline.shard->index of pipeline.shard->count
/// workers at first (first_peer_count), re-sharding as described above; without, once, as
/// Pipeline::run. Ends when a run ends by itself (its sources end, run.max_frames) or *run.stop is set.
/// Each run counts run.max_frames anew. Returns the last run's statistics, their shard's `changes` the re-shards so far; every status
/// (run.on_status) carries that count too. Throws what building or running a pipeline throws
/// (ConfigError, RunError).
PipelineStats run_following_peers(const PipelineFile& file, PipelineOptions pipeline, const ReshardOptions& reshard,
                                  const RunOptions& run);

}  // namespace redwood
