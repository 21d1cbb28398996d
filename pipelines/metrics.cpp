// The Prometheus exposition of PipelineStats. Each family is written whole (HELP, TYPE, then
// its samples), as the format requires; label values are escaped (a stream may be named
// anything a YAML string holds).

#include "pipelines/metrics.hpp"

#include <fmt/format.h>

#include <map>

#include <arpa/inet.h>

#include <cmath>
#include <span>

namespace redwood {

MetricsSettings read_metrics_settings(const PipelineFile& file) {
  MetricsSettings settings;
  const YAML::Node service = file.root["service"];
  if (!service || !service.IsMap() || !service["metrics"] || service["metrics"].IsNull()) return settings;
  const auto origin = std::shared_ptr<const ConfigOrigin>(file.origin);
  const YAML::Node node = service["metrics"];
  if (!node.IsMap()) origin->fail(node, "service.metrics: expected a map (address, port, enabled)");
  Params p(node, origin, "service.metrics");
  settings.enabled = p.get<bool>("enabled", true);
  settings.address = p.get<std::string>("address", settings.address);
  settings.port = p.get<int>("port", settings.port);
  in_addr ipv4{};
  if (inet_pton(AF_INET, settings.address.c_str(), &ipv4) != 1) {
    p.fail("address", fmt::format("'{}' is not an IPv4 address (127.0.0.1 for this machine only, 0.0.0.0 for every "
                                  "interface)", settings.address));
  }
  if (settings.port < 0 || settings.port > 65535) p.fail("port", "must be from 1 to 65535 (0: any free port)");
  p.finish();
  return settings;
}

namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

// The upper bounds of the latency histograms' buckets, in seconds: 1 ms to 10 s.
constexpr double kLatencyBuckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
// Batch sizes (rows in a batch).
constexpr double kBatchBuckets[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};

std::string escape(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

class Exposition {
 public:
  explicit Exposition(std::string pipeline) : pipeline_(std::move(pipeline)) {}

  void family(const std::string& name, const char* type, const char* help) {
    fmt::format_to(std::back_inserter(text_), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void sample(const std::string& name, const Labels& labels, double value) {
    text_ += name;
    text_ += '{';
    text_ += fmt::format("pipeline=\"{}\"", escape(pipeline_));
    for (const auto& [k, v] : labels) fmt::format_to(std::back_inserter(text_), ",{}=\"{}\"", k, escape(v));
    text_ += "} ";
    text_ += number(value);
    text_ += '\n';
  }
  /// One histogram's samples: cumulative `_bucket`s at `bounds` and +Inf, `_sum`, `_count`.
  template <typename CountAtMost>
  void histogram(const std::string& name, const Labels& labels, std::span<const double> bounds, CountAtMost count_at_most,
                 double sum, std::int64_t count) {
    for (double le : bounds) {
      Labels with = labels;
      with.emplace_back("le", number(le));
      sample(name + "_bucket", with, static_cast<double>(count_at_most(le)));
    }
    Labels all = labels;
    all.emplace_back("le", "+Inf");
    sample(name + "_bucket", all, static_cast<double>(count));
    sample(name + "_sum", labels, sum);
    sample(name + "_count", labels, static_cast<double>(count));
  }
  /// A family with one sample per item (a stream, stage, sink, device), labelled with its name.
  template <typename Items, typename Value>
  void each(const std::string& name, const char* type, const char* help, const char* label, const Items& items,
            Value value) {
    family(name, type, help);
    for (const auto& item : items) sample(name, {{label, item.name}}, static_cast<double>(value(item)));
  }
  /// A family of one sample.
  void one(const std::string& name, const char* type, const char* help, const Labels& labels, double value) {
    family(name, type, help);
    sample(name, labels, value);
  }
  void latency(const std::string& name, const Labels& labels, const LatencyHistogram& h) {
    histogram(name, labels, kLatencyBuckets, [&](double le) { return h.count_at_most(le * 1000.0); }, h.sum_ms() / 1000.0,
              h.count());
  }

  std::string take() { return std::move(text_); }

 private:
  std::string pipeline_;
  std::string text_;
};

/// The item of an earlier snapshot with this name (streams, devices), or nullptr.
template <typename Items>
const typename Items::value_type* find_named(const Items& items, const std::string& name) {
  for (const auto& item : items) {
    if (item.name == name) return &item;
  }
  return nullptr;
}

}  // namespace

std::string prometheus_text(const std::string& pipeline, const PipelineStats& now, const PipelineStats& previous) {
  Exposition out(pipeline);
  const double window_s = now.elapsed_s - previous.elapsed_s;

  const auto per_stream = [&](const std::string& name, const char* type, const char* help, auto value) {
    out.each(name, type, help, "stream", now.streams, value);
  };
  per_stream("redwood_stream_frames_read_total", "counter", "Frames the stream's source produced.",
             [](const StreamStats& s) { return static_cast<double>(s.read); });
  per_stream("redwood_stream_frames_delivered_total", "counter", "Frames of the stream that reached every sink.",
             [](const StreamStats& s) { return static_cast<double>(s.delivered); });
  per_stream("redwood_stream_frames_dropped_total", "counter",
             "Frames dropped before entering the graph because the stream fell behind (live sources).",
             [](const StreamStats& s) { return static_cast<double>(s.dropped); });
  per_stream("redwood_stream_frames_per_second", "gauge", "Frames delivered per second over the last status interval.",
             [&](const StreamStats& s) {
               const StreamStats* before = find_named(previous.streams, s.name);
               const auto delivered = s.delivered - (before ? before->delivered : 0);
               return window_s > 0 ? static_cast<double>(delivered) / window_s : 0.0;
             });
  per_stream("redwood_stream_frames_in_flight", "gauge", "Frames of the stream between its pump and the sinks.",
             [](const StreamStats& s) { return static_cast<double>(s.in_flight); });
  per_stream("redwood_stream_frames_in_flight_max", "gauge",
             "The most frames of the stream ever in flight at once (bounded by service.max_in_flight).",
             [](const StreamStats& s) { return static_cast<double>(s.max_in_flight); });
  per_stream("redwood_stream_queue_frames", "gauge", "Frames waiting between the stream's source and the graph.",
             [](const StreamStats& s) { return static_cast<double>(s.queued); });
  per_stream("redwood_stream_resumed_at_frame", "gauge",
             "The stream's first frame this run: the frames before it a durable sink (nats) held from an earlier run.",
             [](const StreamStats& s) { return static_cast<double>(s.resumed_at); });
  per_stream("redwood_stream_reconnects_total", "counter", "Reconnection attempts of a network source.",
             [](const StreamStats& s) { return static_cast<double>(s.reconnects); });
  per_stream("redwood_stream_outage_seconds_total", "counter",
             "Time without frames after a network source lost its connection (an ongoing outage included).",
             [](const StreamStats& s) { return s.outage_ms / 1000.0; });
  per_stream("redwood_stream_connected", "gauge", "1 while the stream's source is connected, 0 during an outage.",
             [](const StreamStats& s) { return s.connected ? 1.0 : 0.0; });
  out.family("redwood_frame_latency_seconds", "histogram",
             "End-to-end latency of delivered frames, from read (or due, when paced) to the sinks.");
  for (const auto& s : now.streams) out.latency("redwood_frame_latency_seconds", {{"stream", s.name}}, s.latency);

  const auto per_stage = [&](const std::string& name, const char* type, const char* help, auto value) {
    out.each(name, type, help, "stage", now.stages, value);
  };
  per_stage("redwood_stage_calls_total", "counter", "Calls of the stage (one per frame, or per batch).",
            [](const StageStats& s) { return static_cast<double>(s.calls); });
  per_stage("redwood_stage_frames_total", "counter", "Frames handed to the stage.",
            [](const StageStats& s) { return static_cast<double>(s.frames); });
  per_stage("redwood_stage_busy_seconds_total", "counter",
            "Time in the stage's own code (asynchronous stages: handing frames over).",
            [](const StageStats& s) { return s.busy_ms / 1000.0; });
  per_stage("redwood_stage_cpu_seconds_total", "counter",
            "CPU time of the threads in the stage's own code: busy time less waiting and preemption.",
            [](const StageStats& s) { return s.cpu_ms / 1000.0; });
  out.family("redwood_stage_latency_seconds", "histogram",
             "Duration of each call of the stage, start to finish (asynchronous stages: until the device completed it).");
  for (const auto& s : now.stages) out.latency("redwood_stage_latency_seconds", {{"stage", s.name}}, s.latency);
  // The stages' own counts (tracks started, line crossings, zone occupancy), one family per name.
  std::map<std::string, std::vector<std::pair<const StageStats*, const StageCounter*>>> counted;
  for (const auto& s : now.stages) {
    for (const auto& c : s.counters) counted[c.name].emplace_back(&s, &c);
  }
  for (const auto& [name, samples] : counted) {
    const StageCounter& first = *samples.front().second;
    const std::string family = "redwood_" + name + (first.gauge ? "" : "_total");
    out.family(family, first.gauge ? "gauge" : "counter", first.help.empty() ? "A stage's count." : first.help.c_str());
    for (const auto& [stage, c] : samples) {
      Labels labels{{"stage", stage->name}};
      for (const auto& l : c->labels) labels.push_back(l);
      out.sample(family, labels, c->value);
    }
  }
  out.family("redwood_stage_batch_size", "histogram", "Frames (rows) in each batch a model stage ran.");
  for (const auto& s : now.stages) {
    if (s.batch_rows.empty()) continue;
    std::int64_t batches = 0;
    double rows = 0;
    for (const auto& [n, count] : s.batch_rows) {
      batches += count;
      rows += static_cast<double>(n * count);
    }
    const auto at_most = [&](double le) {
      std::int64_t c = 0;
      for (const auto& [n, count] : s.batch_rows) {
        if (static_cast<double>(n) <= le) c += count;
      }
      return c;
    };
    out.histogram("redwood_stage_batch_size", {{"stage", s.name}}, kBatchBuckets, at_most, rows, batches);
  }

  const auto per_sink = [&](const std::string& name, const char* help, auto value) {
    out.each(name, "counter", help, "sink", now.sinks, value);
  };
  per_sink("redwood_sink_frames_written_total", "Frames the sink wrote or sent.", [](const SinkStats& s) { return s.written; });
  per_sink("redwood_sink_frames_dropped_total", "Frames the sink dropped (a full queue, a slow subscriber).",
           [](const SinkStats& s) { return s.dropped; });
  per_sink("redwood_sink_frames_failed_total", "Frames the sink could not write (e.g. a full disk).",
           [](const SinkStats& s) { return s.failed; });

  // The frames' pool and its upstream (every upstream call is a system allocation).
  const Labels pool{{"pool", "frames"}};
  const auto& m = now.memory.pool;
  out.one("redwood_memory_pool_in_use_bytes", "gauge", "Bytes of the pool held by frames, in whole blocks.", pool,
          static_cast<double>(m.bytes_in_use));
  out.one("redwood_memory_pool_high_water_bytes", "gauge", "The most bytes of the pool ever in use at once.", pool,
          static_cast<double>(m.high_water_bytes));
  out.one("redwood_memory_pool_reserved_bytes", "gauge", "Bytes the pool took from its upstream and holds.", pool,
          static_cast<double>(m.reserved_bytes));
  out.one("redwood_memory_pool_limit_bytes", "gauge", "The pool's limit (service.frame_pool_mb).", pool,
          static_cast<double>(m.limit_bytes));
  out.one("redwood_memory_pool_fragmentation_ratio", "gauge",
          "Share of the pool's free bytes that no single request can use (1 - largest free block / free bytes).", pool,
          m.external_fragmentation());
  out.one("redwood_memory_pool_upstream_allocations_total", "counter",
          "Calls of the pool to its upstream (system allocations); constant in steady state.", pool,
          static_cast<double>(m.upstream_allocations));
  out.one("redwood_memory_pool_fallbacks_total", "counter", "Pictures that went to the heap because the pool was full.",
          pool, static_cast<double>(now.memory.fallbacks));

  if (!now.devices.empty()) {
    const auto per_device = [&](const std::string& name, const char* type, const char* help, auto value) {
      out.each(name, type, help, "device", now.devices, value);
    };
    per_device("redwood_gpu_compute_busy_seconds_total", "counter",
               "Time the GPU's compute engine ran this pipeline's batches (rate(): its utilization).",
               [](const DeviceStats& d) { return d.compute_busy_ms / 1000.0; });
    per_device("redwood_gpu_utilization_ratio", "gauge",
               "Share of the last status interval the GPU's compute engine ran this pipeline's batches.",
               [&](const DeviceStats& d) {
                 const DeviceStats* earlier = find_named(previous.devices, d.name);
                 const double before = earlier ? earlier->compute_busy_ms : 0;
                 return window_s > 0 ? std::min(1.0, (d.compute_busy_ms - before) / 1000.0 / window_s) : 0.0;
               });
    per_device("redwood_gpu_memory_used_bytes", "gauge", "The GPU's memory in use (every process's).",
               [](const DeviceStats& d) { return static_cast<double>(d.memory_used_bytes); });
    per_device("redwood_gpu_memory_total_bytes", "gauge", "The GPU's memory in all.",
               [](const DeviceStats& d) { return static_cast<double>(d.memory_total_bytes); });
  }

  out.one("redwood_process_cpu_seconds_total", "counter", "CPU time of this process since the run started (every thread).",
          {}, now.cpu_s);
  out.one("redwood_run_elapsed_seconds", "gauge", "Time since the run started.", {}, now.elapsed_s);
  out.one("redwood_host_cores", "gauge", "Cores this process may run on.", {}, now.host_cores);
  if (now.shard) {
    // The info-metric convention (value 1, the facts in labels): joined on `pipeline`, it tells
    // which worker of how many a series came from.
    out.one("redwood_shard_info", "gauge", "This worker's shard: its ordinal and the worker count (redwood run --shard).",
            {{"shard", std::to_string(now.shard->index)}, {"shards", std::to_string(now.shard->count)}}, 1);
    out.one("redwood_shard_streams", "gauge", "Streams rendezvous hashing gave this worker (0: it runs idle).", {},
            static_cast<double>(now.shard->owned.size()));
    out.one("redwood_shard_streams_total", "gauge", "Streams the pipeline file describes, over every worker.", {},
            static_cast<double>(now.shard->streams_total));
    out.one("redwood_shard_changes_total", "counter",
            "Re-shards since the process started: the worker count changed (--shard statefulset with REDWOOD_PEERS).", {},
            static_cast<double>(now.shard->changes));
  }
  return out.take();
}

}  // namespace redwood
