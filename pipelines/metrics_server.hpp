#pragma once
// The operations endpoint of a run: an HTTP server on a thread of its own (cpp-httplib) that
// answers
//   GET /metrics  the latest statistics in Prometheus' text format (pipelines/metrics.hpp)
//   GET /healthz  200 "ok" while the process serves at all (liveness)
//   GET /readyz   200 "ready" once the pipeline is built and every stream delivers (models
//                 loaded, sources open and connected, sinks writing); else 503 and the reasons,
//                 one per line
// The run publishes a snapshot at every status interval (service.status_interval_s); a scrape
// never touches the pipeline itself, so a slow or hostile client cannot stall frames.

#include "pipelines/metrics.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace httplib {
class Server;
}

namespace redwood {

/// Why a run with these statistics is not ready: a stream with no frame yet or in an outage, a
/// sink that failed to write. Empty: ready.
std::vector<std::string> readiness_problems(const PipelineStats& stats);

class MetricsServer {
 public:
  /// Binds at once (an address in use or not available is an IoError naming it) and serves from
  /// its own thread until destroyed. Not ready until the first publish().
  explicit MetricsServer(const MetricsSettings& settings);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  /// The port it listens on (the one it got, when settings asked for 0).
  int port() const { return port_; }
  const std::string& address() const { return address_; }

  /// Why the process is not ready until the next publish(): before a run has statistics
  /// ("loading the pipeline"), or between two runs (a re-shard rebuilding the pipeline), when
  /// the last run's figures no longer say whether it delivers.
  void set_not_ready(std::string reason);
  /// A run's latest statistics; readiness follows from them (readiness_problems).
  void publish(const std::string& pipeline, PipelineStats stats);
  /// The run is over: /readyz answers 503 "the run has ended"; /metrics keeps the last figures.
  void finish();

 private:
  std::string metrics_text();
  std::vector<std::string> not_ready();

  std::string address_;
  int port_ = 0;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<bool> listen_returned_{false};

  std::mutex mutex_;  // guards what follows
  std::string pipeline_;
  PipelineStats previous_, latest_;
  bool published_ = false, finished_ = false;
  std::string not_ready_reason_ = "starting";  // in force until the next publish() while set
  bool waiting_ = true;
};

}  // namespace redwood
