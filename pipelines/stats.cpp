#include "pipelines/stats.hpp"

#include <fmt/format.h>

#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>

namespace redwood {

namespace {

// Streams are shown one by one up to this many; beyond, as totals and the slowest ones.
constexpr std::size_t kStreamsShown = 4;

std::string histogram_text(const std::map<std::int64_t, std::int64_t>& h) {
  std::string out;
  for (const auto& [rows, n] : h) out += fmt::format("{}{}x{}", out.empty() ? "" : " ", rows, n);
  return out.empty() ? "-" : out;
}

/// "line_crossings{stream=cam0, line=door, direction=in} 12" (a gauge says "now").
std::string counter_line(const StageCounter& c) {
  std::string labels;
  for (const auto& [k, v] : c.labels) labels += fmt::format("{}{}={}", labels.empty() ? "" : ", ", k, v);
  return fmt::format("{}{}{}{} {}{}", c.name, labels.empty() ? "" : "{", labels, labels.empty() ? "" : "}", c.value,
                     c.gauge ? " (now)" : "");
}

}  // namespace

std::string status_line(const PipelineStats& now, const PipelineStats& previous) {
  const double window = std::max(1e-3, now.elapsed_s - previous.elapsed_s);
  std::string line = fmt::format("[{:7.1f}s]", now.elapsed_s);
  LatencyHistogram all_recent;
  double total_fps = 0, min_fps = 1e300, max_fps = 0;
  std::int64_t delivered = 0, drops = 0;
  for (std::size_t i = 0; i < now.streams.size(); ++i) {
    const StreamStats& s = now.streams[i];
    const std::int64_t before = i < previous.streams.size() ? previous.streams[i].delivered : 0;
    const LatencyHistogram recent = i < previous.streams.size() ? s.latency.since(previous.streams[i].latency) : s.latency;
    const double fps = static_cast<double>(s.delivered - before) / window;
    if (now.streams.size() <= kStreamsShown) {
      line += fmt::format("{} {}: {} frames {:.1f} fps p50 {:.0f} ms p99 {:.0f} ms drops {}", i ? " |" : "", s.name,
                          s.delivered, fps, recent.percentile(50), recent.percentile(99), s.dropped);
      if (s.reconnects) line += fmt::format(" reconnects {} outage {:.1f} s", s.reconnects, s.outage_ms / 1000.0);
      continue;
    }
    all_recent.merge(recent);
    total_fps += fps;
    min_fps = std::min(min_fps, fps);
    max_fps = std::max(max_fps, fps);
    delivered += s.delivered;
    drops += s.dropped;
  }
  if (now.streams.size() > kStreamsShown) {
    line += fmt::format(" {} streams: {} frames {:.0f} fps (per stream {:.1f} to {:.1f}) p50 {:.0f} ms p99 {:.0f} ms drops {}",
                        now.streams.size(), delivered, total_fps, min_fps, max_fps, all_recent.percentile(50),
                        all_recent.percentile(99), drops);
  }
  return line;
}

double process_cpu_seconds() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

int host_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  return CPU_COUNT(&set);
}

std::string shard_line(const ShardStats& shard) {
  constexpr std::size_t kNamesShown = 20;  // a worker of hundreds of cameras: a line, not a page
  const std::size_t shown = std::min(shard.owned.size(), kNamesShown);
  std::string names = fmt::format("{}", fmt::join(shard.owned.begin(), shard.owned.begin() + static_cast<std::ptrdiff_t>(shown), ", "));
  if (shown < shard.owned.size()) names += fmt::format(" and {} more", shard.owned.size() - shown);
  return fmt::format("shard {}/{}: {} of {} stream(s){}{}", shard.index, shard.count, shard.owned.size(),
                     shard.streams_total, shard.owned.empty() ? " (idle)" : ": ", names);
}

std::string summary_text(const PipelineStats& st) {
  std::string out = fmt::format("summary: {:.1f} s\n", st.elapsed_s);
  if (st.shard) out += "  " + shard_line(*st.shard) + "\n";
  const auto stream_line = [&](const StreamStats& s) {
    return fmt::format("  stream {}: read {}, delivered {}, dropped {}, {:.2f} fps, latency p50 {:.1f} ms p99 {:.1f} ms, "
                       "max in flight {}{}{}\n",
                       s.name, s.read, s.delivered, s.dropped, st.elapsed_s > 0 ? s.delivered / st.elapsed_s : 0.0,
                       s.latency.percentile(50), s.latency.percentile(99), s.max_in_flight,
                       s.reconnects ? fmt::format(", reconnects {}, outage {:.2f} s", s.reconnects, s.outage_ms / 1000.0)
                                    : std::string(),
                       s.resumed_at ? fmt::format(", resumed at frame {}", s.resumed_at) : std::string());
  };
  if (st.streams.size() <= kStreamsShown) {
    for (const StreamStats& s : st.streams) out += stream_line(s);
  } else {
    LatencyHistogram all;
    std::int64_t read = 0, delivered = 0, dropped = 0;
    for (const StreamStats& s : st.streams) {
      all.merge(s.latency);
      read += s.read;
      delivered += s.delivered;
      dropped += s.dropped;
    }
    out += fmt::format("  {} streams: read {}, delivered {}, dropped {}, {:.1f} fps in all ({:.2f} per stream), "
                       "latency p50 {:.1f} ms p99 {:.1f} ms\n",
                       st.streams.size(), read, delivered, dropped, st.elapsed_s > 0 ? delivered / st.elapsed_s : 0.0,
                       st.elapsed_s > 0 ? delivered / st.elapsed_s / static_cast<double>(st.streams.size()) : 0.0,
                       all.percentile(50), all.percentile(99));
    // The slowest streams, by delivered frames, then by p99.
    std::vector<const StreamStats*> order;
    for (const StreamStats& s : st.streams) order.push_back(&s);
    std::sort(order.begin(), order.end(), [](const StreamStats* a, const StreamStats* b) {
      return a->delivered != b->delivered ? a->delivered < b->delivered : a->dropped > b->dropped;
    });
    out += "  the slowest streams:\n";
    for (std::size_t i = 0; i < std::min<std::size_t>(3, order.size()); ++i) out += "  " + stream_line(*order[i]);
  }
  double bound = 0;
  std::string bottleneck;
  for (const StageStats& s : st.stages) {
    if (s.calls == 0) continue;
    out += fmt::format("  stage {}: {} frame(s) in {} call(s), {:.2f} ms per call ({:.2f} ms CPU), bound {:.0f} fps{}\n",
                       s.name, s.frames, s.calls, s.busy_ms / static_cast<double>(s.calls),
                       s.cpu_ms / static_cast<double>(s.calls), s.bound_fps,
                       s.parallelism > 1 ? fmt::format(" ({} threads)", s.parallelism) : std::string());
    for (const StageCounter& c : s.counters) out += "    " + counter_line(c) + "\n";
    if (s.bound_fps > 0 && (bound == 0 || s.bound_fps < bound)) {
      bound = s.bound_fps;
      bottleneck = s.name;
    }
  }
  for (const DeviceStats& d : st.devices) {
    // Models sharing a GPU share its compute engine: its bound is theirs together.
    out += fmt::format("  {}: compute busy {:.0f} % of the run (every model), bound {:.0f} fps\n", d.name,
                       st.elapsed_s > 0 ? d.compute_busy_ms / (10.0 * st.elapsed_s) : 0.0, d.bound_fps);
    if (d.bound_fps > 0 && (bound == 0 || d.bound_fps < bound)) {
      bound = d.bound_fps;
      bottleneck = d.name;
    }
  }
  if (st.host_cores > 0 && st.elapsed_s > 0 && st.cpu_s > 0) {
    // Everything the process runs shares these cores: stages, sources' decoding, batchers and the
    // runners' threads; near all of them busy, the host's CPU is the bound.
    const double busy = st.cpu_s / st.elapsed_s;
    out += fmt::format("  cpu: {:.1f} of {} core(s) busy in this process ({:.0f} %)\n", busy, st.host_cores,
                       100.0 * busy / st.host_cores);
  }
  if (bound > 0 && st.elapsed_s > 0) {
    std::int64_t delivered = 0;
    for (const StreamStats& s : st.streams) delivered += s.delivered;
    const double fps = delivered / st.elapsed_s;
    out += fmt::format("  throughput {:.1f} fps, {:.0f} % of the bottleneck's bound ({}: {:.0f} fps)\n", fps,
                       100.0 * fps / bound, bottleneck, bound);
  }
  for (const RunnerStats& r : st.runners) {
    if (r.batches == 0 && r.failed == 0) continue;
    const double wall_ms = st.elapsed_s * 1000.0;
    out += fmt::format("  {}: {} batch(es), {} row(s), {:.1f} per batch{}, {:.1f} rows/s\n", r.description, r.batches, r.rows,
                       r.batches ? static_cast<double>(r.rows) / static_cast<double>(r.batches) : 0.0,
                       r.run_rows > r.rows ? fmt::format(" ({} run, with padding)", r.run_rows) : std::string(),
                       wall_ms > 0 ? 1000.0 * static_cast<double>(r.rows) / wall_ms : 0.0);
    out += fmt::format("    per batch: copy in {:.2f} ms, compute {:.2f} ms, copy out {:.2f} ms, waiting for a slot {:.2f} ms",
                       r.batches ? r.copy_in_ms / r.batches : 0.0, r.batches ? r.compute_ms / r.batches : 0.0,
                       r.batches ? r.copy_out_ms / r.batches : 0.0, r.batches ? r.wait_ms / r.batches : 0.0);
    if (r.batches > 0 && r.handover_submit_ms + r.handover_after_ms > 0) {
      // A split's segment: what handing the batch to its runner and back cost, on the host's clock.
      out += fmt::format(", handed over in {:.2f} ms beyond its copies and compute ({:.2f} in its runner's submit)",
                         r.handover_beyond_ms(), r.handover_submit_ms / static_cast<double>(r.batches));
    }
    out += "\n";
    out += fmt::format("    busy {:.0f} % of the run (compute {:.0f} %), copies {:.0f} % hidden under compute", 
                       wall_ms > 0 ? 100.0 * r.busy_ms / wall_ms : 0.0, wall_ms > 0 ? 100.0 * r.compute_busy_ms / wall_ms : 0.0,
                       100.0 * r.overlap());
    if (r.bytes_in + r.bytes_out > 0) {
      out += fmt::format(", copies at {:.1f} GB/s", r.copy_gbps());
      if (r.pinned_h2d_gbps > 0) out += fmt::format(" (pinned peak {:.1f} in, {:.1f} out)", r.pinned_h2d_gbps, r.pinned_d2h_gbps);
    }
    // A split's later segments leave the model's batch sizes to its first.
    const std::string failed = r.failed ? fmt::format("{} failed", r.failed) : std::string();
    if (!r.batch_rows.empty()) {
      out += fmt::format("\n    batch sizes (rows x batches): {}{}\n", histogram_text(r.batch_rows), failed.empty() ? "" : ", " + failed);
    } else {
      out += failed.empty() ? std::string("\n") : fmt::format("\n    {}\n", failed);
    }
  }
  for (const SinkStats& s : st.sinks) {
    out += fmt::format("  sink {}: written {}, dropped {}{}\n", s.name, s.written, s.dropped,
                       s.failed ? fmt::format(", failed {}", s.failed) : std::string());
  }
  const auto& m = st.memory;
  out += fmt::format("  frame pool: {} frame object(s), {} allocations, in use {}, high water {}, reserved {}, system allocations {} (freed {}){}\n",
                     st.frames_created, m.pool.allocations, memory::format_bytes(m.pool.bytes_in_use), memory::format_bytes(m.pool.high_water_bytes),
                     memory::format_bytes(m.pool.reserved_bytes), m.pool.upstream_allocations, m.pool.upstream_deallocations,
                     m.fallbacks ? fmt::format(", {} buffer(s) from the heap (pool full)", m.fallbacks) : std::string());
  return out;
}

}  // namespace redwood
