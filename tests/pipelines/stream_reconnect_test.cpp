// A network stream that drops and comes back. A local ffmpeg serves a test pattern as MPEG-TS over
// TCP on 127.0.0.1 (listen mode: it waits for the pipeline's connection); the test stops it
// mid-run and starts it again on the same port. The pipeline must
//   - keep running through the outage (the source retries with backoff while the port refuses),
//   - resume: frames arrive again after the restart, in order (seq keeps increasing),
//   - report the gap: reconnects >= 1 and outage_ms at least the time the server was down.
// Skips (with the reason) when ffmpeg is missing. Each wait has a generous limit so that a loaded
// 2-core machine only makes it slower; the test takes a few seconds.

#include "pipelines/pipeline.hpp"
#include "pipelines/pipeline_text.hpp"
#include "support/onnx_builder.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <future>
#include <iterator>
#include <mutex>
#include <thread>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace redwood {
namespace {

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// A port nothing listens on right now (the kernel's pick; released for ffmpeg to take).
int free_port() {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len);
  close(s);
  return ntohs(addr.sin_port);
}

/// ffmpeg serving a 160 x 120, 25 fps test pattern in real time, until killed.
pid_t start_server(int port, const std::filesystem::path& log) {
  const std::string url = "tcp://127.0.0.1:" + std::to_string(port) + "?listen=1";
  const pid_t pid = fork();
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec: the parent has threads (the pipeline's).
    const int err = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    const int null = open("/dev/null", O_WRONLY);
    dup2(err, 2);
    dup2(null, 1);
    execlp("ffmpeg", "ffmpeg", "-nostdin", "-loglevel", "error", "-re", "-f", "lavfi", "-i",
           "testsrc=size=160x120:rate=25", "-c:v", "mpeg4", "-g", "5", "-f", "mpegts", url.c_str(),
           static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

void stop_server(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

/// Records the seq of every frame that reaches it.
std::mutex g_mutex;
std::vector<std::int64_t> g_seqs;
class ReconnectCollect final : public Sink {
 public:
  explicit ReconnectCollect(SinkArgs&) {}
  void write(const Frame& f, double) override {
    std::lock_guard lock(g_mutex);
    g_seqs.push_back(f.seq);
    ++written_;
  }
};
RW_REGISTER_SINK("test_reconnect_collect", ReconnectCollect);

std::size_t frames_seen() {
  std::lock_guard lock(g_mutex);
  return g_seqs.size();
}

/// Waits until `done()` or `limit`; false on timeout.
template <typename F>
bool wait_for(F done, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

TEST(PipelineStreamReconnect, ServerStoppedAndRestartedMidRun) {
  if (std::system("command -v ffmpeg >/dev/null 2>&1") != 0) GTEST_SKIP() << "ffmpeg not found (Debian: apt-get install ffmpeg)";
  const auto dir = testing::temp_dir("reconnect");
  const auto log = dir / "ffmpeg.log";
  const int port = free_port();
  const std::string url = "tcp://127.0.0.1:" + std::to_string(port);
  {
    std::lock_guard lock(g_mutex);
    g_seqs.clear();
  }
  Pipeline p(testing::pipeline_text("version: 1\nname: live\nservice: {max_in_flight: 2, queue: 2}\nsources:\n"
                                    "  - {name: cam, type: stream, url: '" + url +
                                    "', initial_backoff_ms: 50, max_backoff_ms: 200, open_timeout_ms: 20000, "
                                    "read_timeout_ms: 1000}\n"
                                    "sinks:\n  - {name: out, type: test_reconnect_collect}\n"));
  pid_t server = start_server(port, log);
  std::atomic<bool> stop{false};
  PipelineStats stats;
  std::string error;
  std::thread runner([&] {
    RunOptions options;
    options.stop = &stop;
    try {
      stats = p.run(options);
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  const auto finish = [&] {
    stop = true;
    runner.join();
    if (server > 0) stop_server(server);
  };

  // Phase 1: frames flow (the source may have retried while ffmpeg was starting).
  if (!wait_for([] { return frames_seen() >= 10; }, std::chrono::seconds(30))) {
    finish();
    FAIL() << "no frames from " << url << " within 30 s; ffmpeg said: " << read_text(log);
  }
  // Phase 2: the server goes away for a second; the port refuses connections meanwhile.
  stop_server(server);
  const auto down_at = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const std::size_t before_restart = frames_seen();
  server = start_server(port, log);
  const double down_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - down_at).count();
  // Phase 3: frames flow again.
  const bool resumed = wait_for([&] { return frames_seen() >= before_restart + 10; }, std::chrono::seconds(30));
  finish();
  ASSERT_TRUE(resumed) << "no frames after the server came back; ffmpeg said: " << read_text(log);
  ASSERT_TRUE(error.empty()) << error;

  const auto& s = stats.streams.at(0);
  EXPECT_GE(s.reconnects, 1);
  // The outage runs from the last frame before the kill to the first after the restart.
  EXPECT_GE(s.outage_ms, down_ms * 0.9) << "reported gap " << s.outage_ms << " ms, server down " << down_ms << " ms";
  EXPECT_EQ(s.delivered + s.dropped, s.read);
  std::lock_guard lock(g_mutex);
  for (std::size_t i = 1; i < g_seqs.size(); ++i) ASSERT_LT(g_seqs[i - 1], g_seqs[i]) << "out of order at " << i;
}

// A stream that never answers and is given up reports its outage (the time since it was lost),
// not 0.00 s.
TEST(PipelineStreamReconnect, AStreamNeverBackReportsItsOutage) {
  const std::string yaml = "version: 1\n"
                           "sources:\n"
                           "  - {name: gone, type: stream, url: 'tcp://127.0.0.1:9', initial_backoff_ms: 100,\n"
                           "     max_backoff_ms: 200, max_reconnects: 2, open_timeout_ms: 1000}\n";
  Pipeline p(testing::pipeline_text(yaml));
  try {
    p.run();
    FAIL() << "a source that never answers ended the run without an error";
  } catch (const RunError& e) {
    const StreamStats& s = e.stats().streams.at(0);
    EXPECT_EQ(s.reconnects, 2);
    EXPECT_GE(s.outage_ms, 250.0) << "two backoffs of 100 and 200 ms";
    EXPECT_NE(std::string(e.what()).find("no answer after 2 reconnection attempt(s)"), std::string::npos) << e.what();
  }
}

// A server that takes the connection (the kernel's backlog does) and never sends: FFmpeg's open
// then blocks until open_timeout_ms. A stop must end the run at once, not after the timeout.
TEST(PipelineStreamReconnect, AStopDoesNotWaitForAHangingOpen) {
  const int server = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(server, 4), 0);
  socklen_t len = sizeof addr;
  getsockname(server, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string yaml = "version: 1\n"
                           "sources:\n"
                           "  - {name: mute, type: stream, url: 'tcp://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) +
                           "', open_timeout_ms: 20000}\n";
  Pipeline p(testing::pipeline_text(yaml));
  std::atomic<bool> stop{false};
  RunOptions options;
  options.stop = &stop;
  auto run = std::async(std::launch::async, [&] { return p.run(options); });
  std::this_thread::sleep_for(std::chrono::milliseconds(800));  // the open is under way by now
  const auto stopped_at = std::chrono::steady_clock::now();
  stop = true;
  const bool ended = run.wait_for(std::chrono::seconds(3)) == std::future_status::ready;
  const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped_at).count();
  const PipelineStats stats = run.get();  // joins (after the open timeout, when the stop was ignored)
  close(server);
  EXPECT_TRUE(ended) << "the run ended " << took_s << " s after the stop";
  EXPECT_EQ(stats.streams.at(0).read, 0);
}

}  // namespace
}  // namespace redwood
