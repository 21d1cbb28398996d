// A sharded run that re-shards when the worker count changes (pipelines/reshard.hpp says how).

#include "pipelines/reshard.hpp"

#include "core/error.hpp"

#include <chrono>
#include <future>
#include <optional>

namespace redwood {

PipelineStats run_following_peers(const PipelineFile& file, PipelineOptions pipeline, const ReshardOptions& reshard,
                                  const RunOptions& run) {
  RW_EXPECTS(!reshard.peers || pipeline.shard, InvalidArgument,
             "run_following_peers: a peer counter needs the worker's place (PipelineOptions::shard)");
  int changes = 0;
  const auto stopped = [&run] { return run.stop != nullptr && run.stop->load(); };
  const auto with_changes = [&changes](PipelineStats s) {
    if (s.shard) s.shard->changes = changes;
    return s;
  };
  RunOptions options = run;
  if (run.on_status) options.on_status = [&](const PipelineStats& s) { run.on_status(with_changes(s)); };
  std::optional<PeerWatch> watch;
  if (reshard.peers) {
    watch.emplace(reshard.peers, pipeline.shard->index, pipeline.shard->count, reshard.interval_s, reshard.what);
  }
  for (;;) {
    Pipeline p(file, pipeline);
    if (reshard.on_built) reshard.on_built(p);
    if (!watch) return with_changes(p.run(options));
    // The run stops on the caller's flag or on a new count: both are relayed into a flag of its
    // own, which the run polls (as it polls any stop flag) from the thread it runs on.
    std::atomic<bool> stop_run{false};
    options.stop = &stop_run;
    auto result = std::async(std::launch::async, [&p, &options] { return p.run(options); });
    std::optional<int> resharding;  // the new count, once the run is stopped for it
    while (result.wait_for(std::chrono::milliseconds(10)) != std::future_status::ready) {
      if (stop_run) continue;
      if (stopped()) {
        stop_run = true;
      } else if (const int now = watch->count(); now != pipeline.shard->count) {
        resharding = now;
        stop_run = true;
      }
    }
    PipelineStats stats;
    try {
      stats = with_changes(result.get());
    } catch (const RunError& e) {
      throw RunError(e.what(), with_changes(e.stats()));
    }
    // A signal that came while the run stopped for a new count ends it all the same.
    if (!resharding || stopped()) return stats;
    ++changes;
    stats.shard->changes = changes;
    if (reshard.on_reshard) reshard.on_reshard(stats, pipeline.shard->count, *resharding);
    pipeline.shard->count = *resharding;
  }
}

}  // namespace redwood
