// redwood run CONFIG: build the pipeline a file describes and run it until its sources end,
// --frames frames per stream, or SIGINT/SIGTERM (which drain the frames in flight, then exit 0).
// A status line (frames, fps, p50/p99 latency, drops per stream) at most once a second, a
// summary at the end; a mistake in the file or a stage's error ends in one message, exit 1.
// With service.metrics set, an HTTP endpoint serves /metrics, /healthz and /readyz from before
// the models load until the process exits (pipelines/metrics_server.hpp).
//
//   redwood run configs/ocr-video.yaml --set stages.det.max_batch=2 --frames 20
//   redwood run configs/ocr-video.yaml --streams 100 --fps 30 --loop --duration 60   # 100 cameras
//   redwood run cameras.yaml --shard 1/3            # worker 1 of 3: the streams hashing gives it
//   redwood run cameras.yaml --shard statefulset    # in a StatefulSet's pod (POD_NAME, REDWOOD_PEERS
//                                                   # or REDWOOD_REPLICAS): re-shards when the count changes

#include "apps/redwood/commands.hpp"
#include "backends/cpu/onednn/onednn_common.hpp"
#include "core/error.hpp"
#include "pipelines/metrics_server.hpp"
#include "pipelines/pipeline.hpp"
#include "pipelines/reshard.hpp"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <csignal>

namespace redwood::app {

namespace {

struct RunArgs {
  std::string config;
  std::vector<std::string> sets;
  std::int64_t frames = 0;
  double duration_s = 0;
  bool quiet = false;
  std::string shard;  // --shard I/N or statefulset
  PipelineOptions pipeline;
};

std::atomic<bool> g_stop{false};

extern "C" void on_signal(int) {
  g_stop = true;
  // A second signal ends the process at once (the default action).
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

// Where this worker's shard count comes from: none (not sharded), fixed (--shard I/N,
// REDWOOD_REPLICAS), or the addresses of REDWOOD_PEERS, counted at start and followed while it runs.
ReshardOptions shard_setup(const std::string& shard, PipelineOptions& pipeline) {
  ReshardOptions r;
  if (shard.empty()) return r;
  if (shard != "statefulset") {
    pipeline.shard = parse_shard(shard);
    return r;
  }
  const StatefulSetShard s = read_statefulset(StatefulSetEnv::from_process());
  pipeline.shard = ShardSpec{s.index, s.replicas};
  if (s.replicas > 0) return r;
  r.what = fmt::format("REDWOOD_PEERS='{}'", s.peers);
  r.peers = [peers = s.peers] { return count_peers(peers); };
  r.interval_s = s.peers_interval_s;
  pipeline.shard->count = first_peer_count(r.peers, s.index, s.peers_interval_s, r.what);
  fmt::print("shard count from {}: {} worker(s), counted every {} s\n", r.what, pipeline.shard->count, r.interval_s);
  return r;
}

int run_pipeline(const RunArgs& args) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point begun = Clock::now();
  RW_EXPECTS(args.frames >= 0, InvalidArgument, "--frames must be >= 0 (got {})", args.frames);
  RW_EXPECTS(args.duration_s >= 0, InvalidArgument, "--duration must be >= 0 (got {})", args.duration_s);
  PipelineOptions pipeline_options = args.pipeline;
  ReshardOptions reshard = shard_setup(args.shard, pipeline_options);  // before anything slow
  const PipelineFile file = load_pipeline_file(args.config, args.sets);
  // The endpoint starts first: /healthz answers while models load, /readyz says why not yet. It
  // stays up across re-shards: only the pipeline is built again.
  std::unique_ptr<MetricsServer> metrics;
  if (const MetricsSettings settings = read_metrics_settings(file); settings.enabled) {
    metrics = std::make_unique<MetricsServer>(settings);
    metrics->set_not_ready("loading the pipeline (models, sources, sinks)");
    fmt::print("metrics: http://{}:{}/metrics (health: /healthz, readiness: /readyz)\n", metrics->address(),
               metrics->port());
    std::fflush(stdout);
  }
  std::string name;  // the pipeline's, once built
  double built_ms = -1;  // the first build's: the file read, the models loaded and planned, sources and sinks open
  reshard.on_built = [&metrics, &name, &built_ms, begun](Pipeline& pipeline) {
    name = pipeline.name();
    if (built_ms < 0) built_ms = std::chrono::duration<double, std::milli>(Clock::now() - begun).count();
    if (metrics) metrics->set_not_ready("starting the run");
    // oneDNN's OpenMP teams follow service.threads as oneTBB does (0 keeps OpenMP's default: all
    // cores); docs/optimizer.md says why they are two pools.
    cpu::onednn::set_threads(pipeline.service().threads);
    fmt::print("pipeline {}: {} stream(s) [{}], {} stage(s)\n", pipeline.name(), pipeline.stream_names().size(),
               fmt::join(pipeline.stream_names(), ", "), pipeline.stages().size());
    // A worker that owns nothing runs idle until a signal: its pod stays up, its endpoint answers.
    if (pipeline.shard()) {
      fmt::print("{}{}\n", shard_line(*pipeline.shard()),
                 pipeline.shard()->owned.empty() ? "; idle until SIGINT/SIGTERM" : "");
    }
    std::fflush(stdout);
  };
  PipelineStats previous;      // the last status (for the rates of the status line)
  double earlier_runs_s = 0;  // --duration counts over re-shards (each run's elapsed time starts at 0)
  const int index = pipeline_options.shard ? pipeline_options.shard->index : 0;
  reshard.on_reshard = [&metrics, &name, &previous, &earlier_runs_s, index](const PipelineStats& stats, int from, int to) {
    earlier_runs_s += stats.elapsed_s;
    previous = PipelineStats{};  // the next run's streams and clock are new
    if (metrics) {
      metrics->publish(name, stats);
      metrics->set_not_ready(fmt::format("re-sharding: {} -> {} workers (building the pipeline again)", from, to));
    }
    fmt::print("{}shard count {} -> {}: now worker {} of {}\n", summary_text(stats), from, to, index, to);
    std::fflush(stdout);
  };
  g_stop = false;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  RunOptions options;
  options.max_frames = args.frames;
  options.stop = &g_stop;
  const bool quiet = args.quiet;
  const double duration_s = args.duration_s;
  options.on_status = [&previous, &metrics, &name, &earlier_runs_s, quiet, duration_s](const PipelineStats& now) {
    // --duration: stop and drain
    if (duration_s > 0 && earlier_runs_s + now.elapsed_s >= duration_s) g_stop = true;
    if (metrics) metrics->publish(name, now);
    if (quiet) return;
    fmt::print("{}\n", status_line(now, previous));
    std::fflush(stdout);
    previous = now;
  };
  const auto print_summary = [&metrics, &name](const PipelineStats& stats) {
    if (metrics) {
      metrics->publish(name, stats);
      metrics->finish();
    }
    fmt::print("{}", summary_text(stats));
    std::fflush(stdout);
  };
  const auto restore_signals = [] {
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
  };
  PipelineStats stats;
  try {
    stats = run_following_peers(file, pipeline_options, reshard, options);
  } catch (const RunError& e) {
    // What ran until the error, then the error itself (main prints it and exits 1).
    restore_signals();
    print_summary(e.stats());
    throw;
  } catch (...) {
    restore_signals();
    throw;
  }
  restore_signals();
  if (g_stop) fmt::print("stopped by signal; frames in flight drained\n");
  print_summary(stats);
  // What a (re)start costs before the first result; the caches (docs/planner.md, "Plan cache")
  // shorten the build. After a re-shard the run's clock is the last build's, so it is left out.
  if (stats.first_result_s >= 0 && earlier_runs_s == 0) {
    fmt::print("first result {:.1f} ms after the start (pipeline built in {:.1f} ms, then {:.1f} ms to the first frame through every sink)\n",
               built_ms + stats.first_result_s * 1e3, built_ms, stats.first_result_s * 1e3);
  }
  return 0;
}

}  // namespace

Command make_run_command() {
  auto args = std::make_shared<RunArgs>();
  Command c;
  c.attach_fn = [args](CLI::App& app) {
    CLI::App* sub = app.add_subcommand("run", "Run a pipeline file until its sources end or SIGINT/SIGTERM");
    sub->add_option("config", args->config, "pipeline file (YAML; see docs/pipelines.md)")->required();
    sub->add_option("--set", args->sets, "KEY.PATH=VALUE: override a value of the file (repeatable)");
    sub->add_option("--frames", args->frames, "stop after this many frames per stream (0: until the sources end)")
        ->default_val(0);
    sub->add_flag("--quiet", args->quiet, "no status line (the summary still prints)");
    sub->add_option("--duration", args->duration_s, "stop after this many seconds, draining the frames in flight (0: no limit)")
        ->default_val(0);
    sub->add_option("--streams", args->pipeline.streams,
                    "run N copies of every source (\"<name>-1\" ... \"<name>-N\"), their starts staggered: the multi-stream benchmark")
        ->default_val(1);
    sub->add_flag("--realtime", args->pipeline.realtime,
                  "read files at their frame rate, as cameras deliver frames (a stream that falls behind drops its oldest frames)");
    sub->add_option("--fps", args->pipeline.fps, "with or without --realtime: read files at this rate instead of their own")
        ->default_val(0);
    sub->add_flag("--loop", args->pipeline.loop, "files start over at their end (stop with --frames, --duration or a signal)");
    sub->add_option("--shard", args->shard,
                    "I/N: run only the streams rendezvous hashing gives worker I (0-based) of N; 'statefulset': I from "
                    "the pod name's -<ordinal> (POD_NAME, else HOSTNAME), N from REDWOOD_REPLICAS (fixed) or the "
                    "addresses REDWOOD_PEERS resolves to, counted every REDWOOD_PEERS_INTERVAL s (default 10): the "
                    "run re-shards when it changes");
    return sub;
  };
  c.run = [args] { return run_pipeline(*args); };
  return c;
}

}  // namespace redwood::app
