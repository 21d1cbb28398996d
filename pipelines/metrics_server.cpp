#include "pipelines/metrics_server.hpp"

#include "core/error.hpp"
#include "core/log.hpp"

#include <fmt/format.h>
#include <httplib.h>

#include <sys/socket.h>

#include <chrono>

namespace redwood {

std::vector<std::string> readiness_problems(const PipelineStats& stats) {
  std::vector<std::string> problems;
  for (const auto& s : stats.streams) {
    if (!s.connected) {
      problems.push_back(fmt::format("stream '{}': source disconnected ({:.1f} s without frames so far)", s.name,
                                     s.outage_ms / 1000.0));
    } else if (s.read == 0) {
      problems.push_back(fmt::format("stream '{}': no frame read yet", s.name));
    }
  }
  for (const auto& s : stats.sinks) {
    if (s.failed > 0) problems.push_back(fmt::format("sink '{}': {} frame(s) failed to write", s.name, s.failed));
  }
  return problems;
}

MetricsServer::MetricsServer(const MetricsSettings& settings)
    : address_(settings.address), server_(std::make_unique<httplib::Server>()) {
  // httplib's default also sets SO_REUSEPORT, with which a second process could bind the same
  // port and take half the scrapes; SO_REUSEADDR alone lets a restart bind at once.
  server_->set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  // Scrapes are rare and small: two threads answer them (httplib's default is one per core).
  server_->new_task_queue = [] { return new httplib::ThreadPool(2); };
  server_->set_read_timeout(std::chrono::seconds(5));
  server_->set_write_timeout(std::chrono::seconds(5));
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_text(), "text/plain; version=0.0.4; charset=utf-8");
  });
  server_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", "text/plain"); });
  server_->Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    const auto problems = not_ready();
    if (problems.empty()) {
      res.set_content("ready\n", "text/plain");
      return;
    }
    res.status = 503;
    res.set_content(fmt::format("{}\n", fmt::join(problems, "\n")), "text/plain");
  });
  server_->set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.status == 404) res.set_content("not found: the endpoints are /metrics, /healthz and /readyz\n", "text/plain");
  });
  if (settings.port == 0) {
    port_ = server_->bind_to_any_port(settings.address);
  } else if (server_->bind_to_port(settings.address, settings.port)) {
    port_ = settings.port;
  } else {
    port_ = -1;
  }
  if (port_ <= 0) {
    throw IoError(fmt::format("service.metrics: cannot listen on {}:{} (in use by another process, or not an address of "
                              "this machine)",
                              settings.address, settings.port));
  }
  thread_ = std::thread([this] {
    if (!server_->listen_after_bind()) log().error("metrics endpoint on {}:{} stopped serving", address_, port_);
    listen_returned_ = true;
  });
}

MetricsServer::~MetricsServer() {
  // stop() only acts once the loop runs; wait for it to start (or to have failed) first.
  while (!server_->is_running() && !listen_returned_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  server_->stop();
  thread_.join();
}

void MetricsServer::set_not_ready(std::string reason) {
  std::lock_guard lock(mutex_);
  not_ready_reason_ = std::move(reason);
  waiting_ = true;
}

void MetricsServer::publish(const std::string& pipeline, PipelineStats stats) {
  std::lock_guard lock(mutex_);
  pipeline_ = pipeline;
  if (published_) previous_ = std::move(latest_);
  latest_ = std::move(stats);
  published_ = true;
  waiting_ = false;
}

void MetricsServer::finish() {
  std::lock_guard lock(mutex_);
  finished_ = true;
}

std::string MetricsServer::metrics_text() {
  std::lock_guard lock(mutex_);
  const bool ready = published_ && !waiting_ && !finished_ && readiness_problems(latest_).empty();
  std::string text = fmt::format(
      "# HELP redwood_ready 1 when /readyz answers 200 (pipeline built, every stream delivering, sinks writing).\n"
      "# TYPE redwood_ready gauge\nredwood_ready {}\n",
      ready ? 1 : 0);
  if (published_) text += prometheus_text(pipeline_, latest_, previous_);
  return text;
}

std::vector<std::string> MetricsServer::not_ready() {
  std::lock_guard lock(mutex_);
  if (finished_) return {"the run has ended"};
  if (!published_ || waiting_) return {not_ready_reason_};
  return readiness_problems(latest_);
}

}  // namespace redwood
