#pragma once
// A run's statistics in the Prometheus text exposition format (version 0.0.4), for the metrics
// endpoint (pipelines/metrics_server.hpp). Names follow Prometheus' conventions: base units
// (seconds, bytes, ratios), `_total` for counters, `_bucket`/`_sum`/`_count` for histograms, and
// every sample labelled with its pipeline and its stream, stage, sink, pool or device. The list
// with what each metric means is in docs/operations.md.

#include "pipelines/config.hpp"
#include "pipelines/stats.hpp"

#include <string>

namespace redwood {

/// Where the metrics endpoint listens (service.metrics in a pipeline file); off unless set.
struct MetricsSettings {
  bool enabled = false;
  std::string address = "127.0.0.1";  // loopback unless configured: the metrics are not public
  int port = 9464;                    // 0: any free port (the launcher prints the one it got)
};

/// Reads `service.metrics` (enabled, address, port) of a pipeline file; a bad value is a
/// ConfigError at its line. Absent: disabled; present: enabled unless `enabled: false`.
MetricsSettings read_metrics_settings(const PipelineFile& file);

/// The exposition of `now`. Rates that need a window (frames per second, device utilization)
/// are over the time since `previous`, an earlier snapshot of the same run (empty: since the
/// start).
std::string prometheus_text(const std::string& pipeline, const PipelineStats& now, const PipelineStats& previous);

}  // namespace redwood
