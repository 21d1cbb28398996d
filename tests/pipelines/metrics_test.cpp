// The metrics endpoint: the Prometheus exposition of a run's statistics (families, labels and
// their escaping, cumulative histograms, rates over a window), accepted by `promtool check
// metrics`; the HTTP server's /metrics, /healthz and /readyz with the reasons it is not ready; a
// port taken by another server; service.metrics in a pipeline file; and the shipped OCR pipeline
// scraped while `redwood run` runs it.

#include "pipelines/metrics_server.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace redwood {
namespace {

PipelineStats sample_stats(double elapsed_s, std::int64_t delivered) {
  PipelineStats s;
  s.elapsed_s = elapsed_s;
  s.cpu_s = 1.5;
  s.host_cores = 2;
  for (const char* name : {"cam0", "lobby \"east\"\\2"}) {
    StreamStats st;
    st.name = name;
    st.read = delivered + 2;
    st.delivered = delivered;
    st.dropped = 1;
    st.in_flight = 1;
    st.max_in_flight = 4;
    st.queued = 1;
    for (std::int64_t i = 0; i < delivered; ++i) st.latency.add(static_cast<double>(i % 100) + 0.5);  // 0.5 .. 99.5 ms
    s.streams.push_back(st);
  }
  StageStats det;
  det.name = "det";
  det.calls = 10;
  det.frames = 40;
  det.busy_ms = 250;
  det.cpu_ms = 125;
  for (int i = 0; i < 10; ++i) det.latency.add(20);
  det.batch_rows = {{2, 3}, {8, 7}};  // 3 batches of 2 rows, 7 of 8
  s.stages.push_back(det);
  StageStats count;
  count.name = "count";
  count.counters.push_back({"line_crossings", {{"stream", "cam0"}, {"line", "door"}, {"direction", "in"}}, 7, false,
                            "Tracked objects that crossed the line."});
  count.counters.push_back({"line_crossings", {{"stream", "cam0"}, {"line", "door"}, {"direction", "out"}}, 2, false,
                            "Tracked objects that crossed the line."});
  count.counters.push_back({"zone_occupancy", {{"stream", "cam0"}, {"zone", "lobby"}}, 3, true, "Objects in the zone now."});
  s.stages.push_back(count);
  s.sinks.push_back({"log", delivered * 2, 3, 0});
  DeviceStats gpu;
  gpu.name = "cuda:0";
  gpu.compute_busy_ms = elapsed_s * 500;  // busy half the time
  gpu.memory_used_bytes = 1 << 30;
  gpu.memory_total_bytes = std::int64_t{8} << 30;
  s.devices.push_back(gpu);
  s.memory.pool.bytes_in_use = 1 << 20;
  s.memory.pool.high_water_bytes = 4 << 20;
  return s;
}

/// The value of the sample with exactly this name and label set ("" when absent).
std::string value_of(const std::string& text, const std::string& series) {
  std::stringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(series + " ", 0) == 0) return line.substr(series.size() + 1);
  }
  return "";
}

/// The families `text` declares (its # TYPE lines).
std::set<std::string> families_of(const std::string& text) {
  std::set<std::string> out;
  const std::regex type_line("^# TYPE (\\S+) \\S+$");
  std::stringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_match(line, m, type_line)) out.insert(m[1]);
  }
  return out;
}

TEST(PrometheusText, FamiliesLabelsHistogramsAndRates) {
  const PipelineStats before = sample_stats(10, 100);
  const PipelineStats now = sample_stats(12, 160);
  const std::string text = prometheus_text("ocr", now, before);

  const std::set<std::string> families = families_of(text);
  EXPECT_EQ(static_cast<std::size_t>(std::count(text.begin(), text.end(), '#')), 2 * families.size())
      << "a family declared twice";
  EXPECT_GE(families.size(), 20u) << text;
  for (const auto& name : families) {
    if (text.find("# TYPE " + name + " counter") != std::string::npos) {
      EXPECT_TRUE(name.size() > 6 && name.substr(name.size() - 6) == "_total") << name << " is a counter without _total";
    }
  }

  EXPECT_EQ(value_of(text, R"(redwood_stream_frames_delivered_total{pipeline="ocr",stream="cam0"})"), "160");
  // Quotes and backslashes in a name are escaped.
  EXPECT_EQ(value_of(text, R"(redwood_stream_frames_read_total{pipeline="ocr",stream="lobby \"east\"\\2"})"), "162");
  // 60 frames over the 2 s since `before`.
  EXPECT_EQ(value_of(text, R"(redwood_stream_frames_per_second{pipeline="ocr",stream="cam0"})"), "30");
  EXPECT_EQ(value_of(text, R"(redwood_gpu_utilization_ratio{pipeline="ocr",device="cuda:0"})"), "0.5");
  EXPECT_EQ(value_of(text, R"(redwood_gpu_memory_used_bytes{pipeline="ocr",device="cuda:0"})"), "1073741824");

  // The latency histogram: cumulative, in seconds, +Inf equal to _count, _sum in seconds.
  const std::string cam0 = R"(pipeline="ocr",stream="cam0")";
  double last = 0;
  for (const char* le : {"0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "10", "+Inf"}) {
    const auto v = value_of(text, fmt::format("redwood_frame_latency_seconds_bucket{{{},le=\"{}\"}}", cam0, le));
    ASSERT_FALSE(v.empty()) << le;
    EXPECT_GE(std::stod(v), last) << le;
    last = std::stod(v);
  }
  EXPECT_EQ(last, 160);
  EXPECT_EQ(value_of(text, "redwood_frame_latency_seconds_count{" + cam0 + "}"), "160");
  // Latencies 0.5 .. 99.5 ms: 0.5 ms is the only one under 1 ms in each hundred; all under 0.1 s.
  EXPECT_EQ(value_of(text, "redwood_frame_latency_seconds_bucket{" + cam0 + ",le=\"0.001\"}"), "2");
  EXPECT_EQ(value_of(text, "redwood_frame_latency_seconds_bucket{" + cam0 + ",le=\"0.1\"}"), "160");
  // The sum is exact: (0.5 + ... + 99.5) + (0.5 + ... + 59.5) ms.
  EXPECT_NEAR(std::stod(value_of(text, "redwood_frame_latency_seconds_sum{" + cam0 + "}")), 5.0 + 1.8, 1e-9);

  // Batch sizes: 3 batches of 2 rows, 7 of 8.
  const std::string det = R"(pipeline="ocr",stage="det")";
  EXPECT_EQ(value_of(text, "redwood_stage_batch_size_bucket{" + det + ",le=\"1\"}"), "0");
  EXPECT_EQ(value_of(text, "redwood_stage_batch_size_bucket{" + det + ",le=\"4\"}"), "3");
  EXPECT_EQ(value_of(text, "redwood_stage_batch_size_bucket{" + det + ",le=\"8\"}"), "10");
  EXPECT_EQ(value_of(text, "redwood_stage_batch_size_sum{" + det + "}"), "62");
  EXPECT_EQ(value_of(text, "redwood_stage_latency_seconds_count{" + det + "}"), "10");
  EXPECT_EQ(value_of(text, "redwood_stage_busy_seconds_total{" + det + "}"), "0.25");
  EXPECT_EQ(value_of(text, "redwood_stage_cpu_seconds_total{" + det + "}"), "0.125");
  EXPECT_EQ(value_of(text, R"(redwood_sink_frames_dropped_total{pipeline="ocr",sink="log"})"), "3");
  // Stages' own counters: one family per name, labelled with the stage and the counter's labels.
  EXPECT_EQ(value_of(text, R"(redwood_line_crossings_total{pipeline="ocr",stage="count",stream="cam0",line="door",direction="out"})"), "2");
  EXPECT_EQ(value_of(text, R"(redwood_zone_occupancy{pipeline="ocr",stage="count",stream="cam0",zone="lobby"})"), "3");
  EXPECT_NE(text.find("# TYPE redwood_zone_occupancy gauge"), std::string::npos);
  EXPECT_NE(text.find("# HELP redwood_line_crossings_total Tracked objects that crossed the line."), std::string::npos);
  EXPECT_EQ(value_of(text, R"(redwood_memory_pool_high_water_bytes{pipeline="ocr",pool="frames"})"), "4194304");
}

/// `promtool check metrics` on `text`: "" when it passes, else what it said.
std::string promtool_problems(const std::string& text) {
  const auto file = testing::temp_dir("metrics") / "exposition.txt";
  std::ofstream(file) << text;
  const auto r = testing::run_command("promtool check metrics < " + file.string());
  return r.exit_code == 0 && r.output.empty() ? "" : r.output + " (exit " + std::to_string(r.exit_code) + ")";
}

bool have_promtool() { return testing::run_command("command -v promtool").exit_code == 0; }

TEST(PrometheusText, PromtoolAcceptsIt) {
  if (!have_promtool()) GTEST_SKIP() << "promtool not found (Debian package prometheus; scripts/setup.sh installs it)";
  EXPECT_EQ(promtool_problems(prometheus_text("ocr", sample_stats(12, 160), sample_stats(10, 100))), "");
  // Sanity of the check itself: a counter without _total and a bad unit are reported.
  EXPECT_NE(promtool_problems("# HELP frames Frames.\n# TYPE frames counter\nframes 3\n"), "");
}

TEST(GrafanaDashboard, EveryQueryUsesAMetricTheEndpointServes) {
  const auto path = std::filesystem::path(REDWOOD_SOURCE_DIR) / "configs" / "grafana" / "redwood-dashboard.json";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  const auto dashboard = nlohmann::json::parse(in);
  auto served = families_of(prometheus_text("p", sample_stats(12, 160), sample_stats(10, 100)));
  served.insert("redwood_ready");  // the server's own
  std::set<int> ids;
  int queries = 0;
  const std::regex metric("redwood_[a-z0-9_]+");
  for (const auto& panel : dashboard.at("panels")) {
    EXPECT_TRUE(ids.insert(panel.at("id").get<int>()).second) << "panel id twice: " << panel.at("id");
    if (!panel.contains("targets")) continue;
    for (const auto& target : panel.at("targets")) {
      const std::string expr = target.at("expr");
      ++queries;
      bool any = false;
      for (std::sregex_iterator it(expr.begin(), expr.end(), metric), end; it != end; ++it) {
        std::string name = it->str();
        for (const char* suffix : {"_bucket", "_sum", "_count"}) {
          const std::string base = name.substr(0, name.size() - std::min(name.size(), std::strlen(suffix)));
          if (name.ends_with(suffix) && served.count(base)) name = base;
        }
        EXPECT_TRUE(served.count(name)) << "panel '" << panel.at("title").get<std::string>() << "' queries " << it->str()
                                        << ", which the endpoint does not serve";
        any = true;
      }
      EXPECT_TRUE(any) << expr;
    }
  }
  EXPECT_GE(queries, 20);
}

MetricsSettings loopback_any_port() {
  MetricsSettings settings;
  settings.enabled = true;
  settings.port = 0;
  return settings;
}

TEST(MetricsServer, ServesMetricsHealthAndReadinessWithReasons) {
  MetricsServer server(loopback_any_port());
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  client.set_connection_timeout(std::chrono::seconds(5));

  auto health = client.Get("/healthz");
  ASSERT_TRUE(health) << httplib::to_string(health.error());
  EXPECT_EQ(health->status, 200);
  server.set_not_ready("loading the pipeline");
  auto ready = client.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 503);
  EXPECT_EQ(ready->body, "loading the pipeline\n");
  EXPECT_NE(client.Get("/metrics")->body.find("redwood_ready 0"), std::string::npos);

  PipelineStats stats = sample_stats(2, 50);
  server.publish("ocr", stats);
  ready = client.Get("/readyz");
  EXPECT_EQ(ready->status, 200) << ready->body;
  auto metrics = client.Get("/metrics");
  EXPECT_EQ(metrics->status, 200);
  EXPECT_EQ(metrics->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(metrics->body.find("redwood_ready 1\n"), std::string::npos);
  EXPECT_NE(metrics->body.find(R"(redwood_stream_frames_delivered_total{pipeline="ocr",stream="cam0"} 50)"), std::string::npos);

  // Between two runs (a re-shard rebuilding the pipeline): not ready until the next run publishes,
  // though the last run's figures stay on /metrics.
  server.set_not_ready("re-sharding: 2 -> 3 workers");
  ready = client.Get("/readyz");
  EXPECT_EQ(ready->status, 503);
  EXPECT_EQ(ready->body, "re-sharding: 2 -> 3 workers\n");
  metrics = client.Get("/metrics");
  EXPECT_NE(metrics->body.find("redwood_ready 0\n"), std::string::npos);
  EXPECT_NE(metrics->body.find(R"(redwood_stream_frames_delivered_total{pipeline="ocr",stream="cam0"} 50)"), std::string::npos);
  server.publish("ocr", stats);
  EXPECT_EQ(client.Get("/readyz")->status, 200);

  // A camera in an outage, a stream with nothing yet, a sink that cannot write: 503, each named.
  stats.streams[0].connected = false;
  stats.streams[0].outage_ms = 2500;
  stats.streams[1].read = 0;
  stats.sinks[0].failed = 2;
  server.publish("ocr", stats);
  ready = client.Get("/readyz");
  EXPECT_EQ(ready->status, 503);
  EXPECT_EQ(ready->body,
            "stream 'cam0': source disconnected (2.5 s without frames so far)\n"
            "stream 'lobby \"east\"\\2': no frame read yet\n"
            "sink 'log': 2 frame(s) failed to write\n");

  server.finish();
  EXPECT_EQ(client.Get("/readyz")->body, "the run has ended\n");
  auto missing = client.Get("/metrics.json");
  EXPECT_EQ(missing->status, 404);
  EXPECT_NE(missing->body.find("/metrics, /healthz and /readyz"), std::string::npos);
}

TEST(MetricsServer, APortInUseIsAClearError) {
  MetricsServer first(loopback_any_port());
  MetricsSettings same = loopback_any_port();
  same.port = first.port();
  try {
    MetricsServer second(same);
    FAIL() << "a second server bound port " << same.port;
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("cannot listen on 127.0.0.1:{}", same.port)), std::string::npos)
        << e.what();
  }
}

MetricsSettings settings_of(const std::string& service) {
  return read_metrics_settings(parse_pipeline_text("version: 1\nservice:\n" + service, "metrics.yaml"));
}

TEST(MetricsSettings, ReadFromServiceWithPlacesForMistakes) {
  EXPECT_FALSE(settings_of("  threads: 1\n").enabled);
  const auto on = settings_of("  metrics: {port: 9100}\n");
  EXPECT_TRUE(on.enabled);
  EXPECT_EQ(on.address, "127.0.0.1");
  EXPECT_EQ(on.port, 9100);
  EXPECT_FALSE(settings_of("  metrics: {port: 9100, enabled: false}\n").enabled);
  const auto expect_error = [](const std::string& service, const std::string& part) {
    try {
      settings_of(service);
      ADD_FAILURE() << "accepted: " << service;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("metrics.yaml:4:"), std::string::npos) << e.what();
    }
  };
  expect_error("  metrics:\n    port: 70000\n", "must be from 1 to 65535");
  expect_error("  metrics:\n    address: localhost\n", "not an IPv4 address");
  expect_error("  metrics:\n    bind: 1.2.3.4\n", "bind");
}

/// The shipped OCR pipeline under `redwood run`, scraped while it runs: promtool accepts what it
/// serves, the model stages have latency and batch histograms, and /readyz turns 200.
TEST(MetricsEndpoint, ScrapedWhileTheShippedOcrPipelineRuns) {
  const auto video = testing::assets_dir() / "video" / "vtest-captions.avi";
  if (!std::filesystem::exists(video)) GTEST_SKIP() << video << " is missing: run scripts/setup.sh";
  const auto dir = testing::temp_dir("metrics-run");
  const auto out = dir / "run.txt";
  const std::string config = std::string(REDWOOD_SOURCE_DIR) + "/configs/ocr-video.yaml";
  const std::string endpoint = "sinks.pub.endpoint=ipc://" + (dir / "pub.sock").string();
  const std::string log = "sinks.log.path=" + (dir / "log.jsonl").string();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::freopen(out.c_str(), "w", stdout);
    std::freopen(out.c_str(), "a", stderr);
    execl(REDWOOD_BINARY, REDWOOD_BINARY, "run", config.c_str(), "--loop", "--duration", "60", "--set",
          "service.metrics.port=0", "--set", endpoint.c_str(), "--set", log.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto read_out = [&out] {
    std::ifstream in(out);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  // The port the launcher got, then the first status line (frames flowing).
  int port = 0;
  std::smatch m;
  const std::regex url("metrics: http://127\\.0\\.0\\.1:(\\d+)/metrics");
  for (int waited = 0; waited < 60000; waited += 50) {
    const std::string text = read_out();
    if (std::regex_search(text, m, url)) port = std::stoi(m[1]);
    if (port > 0 && text.find(" fps p50 ") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::string body, ready_body;
  int ready_status = 0;
  if (port > 0) {
    httplib::Client client("127.0.0.1", port);
    // A second status interval: the stages have run batches by then.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    if (auto r = client.Get("/metrics")) body = r->body;
    if (auto r = client.Get("/readyz")) {
      ready_status = r->status;
      ready_body = r->body;
    }
  }
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string output = read_out();
  ASSERT_GT(port, 0) << output;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  EXPECT_EQ(ready_status, 200) << ready_body;
  EXPECT_NE(body.find("redwood_ready 1"), std::string::npos) << body;
  for (const char* stage : {"det", "rec"}) {
    EXPECT_NE(body.find(fmt::format("redwood_stage_latency_seconds_count{{pipeline=\"ocr-video\",stage=\"{}\"}}", stage)),
              std::string::npos)
        << stage << "\n" << body;
    EXPECT_NE(body.find(fmt::format("redwood_stage_batch_size_count{{pipeline=\"ocr-video\",stage=\"{}\"}}", stage)),
              std::string::npos)
        << stage << "\n" << body;
  }
  const auto read = value_of(body, R"(redwood_stream_frames_read_total{pipeline="ocr-video",stream="captions"})");
  ASSERT_FALSE(read.empty()) << body;
  EXPECT_GT(std::stod(read), 0);
  if (have_promtool()) {
    EXPECT_EQ(promtool_problems(body), "");
  }
}

}  // namespace
}  // namespace redwood
