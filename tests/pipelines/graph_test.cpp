// The flow graph on synthetic sources: every frame delivered, in order per stream, in-flight
// frames bounded by back-pressure, live drops counted, a stage's exception reaching the caller.
// Test stages and sinks register like real ones, under "test_*" types.

#include "pipelines/pipeline.hpp"
#include "pipelines/pipeline_text.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>

namespace redwood {
namespace {

/// What the test stages and sinks saw.
struct Observed {
  std::mutex mutex;
  std::map<std::string, std::vector<std::pair<std::string, std::int64_t>>> frames;  // sink -> (stream, seq)
  int in_graph = 0;  // frames between the test_work stage and a test_collect sink
  int max_in_graph = 0;
  std::set<int> batch_sizes;
  void reset() {
    std::lock_guard lock(mutex);
    frames.clear();
    in_graph = max_in_graph = 0;
    batch_sizes.clear();
  }
} g_observed;

/// Sleeps a random 0..max_sleep_ms per frame (so frames overtake each other: stateless stages
/// run in parallel), can throw at one frame, counts frames entering.
class TestWork final : public Stage {
 public:
  explicit TestWork(StageArgs& a) : Stage(a.name) {
    max_sleep_ms_ = a.params.get<int>("max_sleep_ms", 0);
    sleep_ms_ = a.params.get<int>("sleep_ms", 0);
    throw_at_ = a.params.get<int>("throw_at", -1);
    count_ = a.params.get<bool>("count", true);
    produce("work", TensorSpec{{1}});
  }

 private:
  void do_process(std::span<Frame* const> frames) override {
    for (Frame* f : frames) {
      if (count_) {
        std::lock_guard lock(g_observed.mutex);
        g_observed.max_in_graph = std::max(g_observed.max_in_graph, ++g_observed.in_graph);
      }
      if (f->seq == throw_at_) throw std::runtime_error("test_work refuses frame " + std::to_string(f->seq));
      int ms = sleep_ms_;
      if (max_sleep_ms_ > 0) {
        thread_local std::mt19937 rng(std::random_device{}());
        ms += std::uniform_int_distribution<int>(0, max_sleep_ms_)(rng);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      f->tensors["work"] = Tensor::scalar<float>(1.f);
    }
  }
  int max_sleep_ms_ = 0, sleep_ms_ = 0, throw_at_ = -1;
  bool count_ = true;
};
RW_REGISTER_STAGE("test_work", TestWork);

/// A batching stage: records the batch sizes it gets.
class TestBatch final : public Stage {
 public:
  explicit TestBatch(StageArgs& a) : Stage(a.name), max_batch_(a.params.get<int>("max_batch", 4)) {}
  int max_batch() const override { return max_batch_; }
  double batch_timeout_ms() const override { return 20; }
  bool serial() const override { return true; }

 private:
  void do_process(std::span<Frame* const> frames) override {
    std::lock_guard lock(g_observed.mutex);
    g_observed.batch_sizes.insert(static_cast<int>(frames.size()));
  }
  int max_batch_;
};
RW_REGISTER_STAGE("test_batch", TestBatch);

/// An ordered stage: records the (stream, seq) it sees and how many calls overlap, and counts
/// its frames per stream (a counter, as analytics stages keep).
class TestOrdered final : public Stage {
 public:
  explicit TestOrdered(StageArgs& a) : Stage(a.name) {}
  bool ordered() const override { return true; }
  std::vector<StageCounter> counters() const override {
    std::lock_guard lock(mutex_);
    std::vector<StageCounter> out;
    for (const auto& [stream, n] : per_stream_) {
      out.push_back({"test_frames_seen", {{"stream", stream}}, static_cast<double>(n), false, "Frames the test stage saw."});
    }
    return out;
  }
  static inline std::vector<std::pair<std::string, std::int64_t>> seen;
  static inline int max_overlap = 0;

 private:
  void do_process(std::span<Frame* const> frames) override {
    const int now = ++inside_;
    {
      std::lock_guard lock(mutex_);
      max_overlap = std::max(max_overlap, now);
      for (Frame* f : frames) {
        seen.emplace_back(f->stream_name, f->seq);
        ++per_stream_[f->stream_name];
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    --inside_;
  }
  mutable std::mutex mutex_;
  std::map<std::string, std::int64_t> per_stream_;
  std::atomic<int> inside_{0};
};
RW_REGISTER_STAGE("test_ordered", TestOrdered);

class TestCollect final : public Sink {
 public:
  explicit TestCollect(SinkArgs& a) : name_(a.name), sleep_ms_(a.params.get<int>("sleep_ms", 0)) {}
  void write(const Frame& f, double) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms_));
    std::lock_guard lock(g_observed.mutex);
    g_observed.frames[name_].emplace_back(f.stream_name, f.seq);
    --g_observed.in_graph;
    ++written_;
  }

 private:
  std::string name_;
  int sleep_ms_;
};
RW_REGISTER_SINK("test_collect", TestCollect);

class PipelineGraph : public ::testing::Test {
 protected:
  void SetUp() override { g_observed.reset(); }
};

PipelineStats run_text(const std::string& yaml, const RunOptions& options = {}) {
  Pipeline p(testing::pipeline_text(yaml));
  return p.run(options);
}

TEST_F(PipelineGraph, DeliversEveryFrameInOrderPerStream) {
  const auto stats = run_text(R"(version: 1
service: {max_in_flight: 6}
sources:
  - {name: a, type: synthetic, width: 32, height: 24, frames: 40}
  - {name: b, type: synthetic, width: 48, height: 32, frames: 30}
stages:
  - {name: work, type: test_work, max_sleep_ms: 8}
sinks:
  - {name: out, type: test_collect}
)");
  ASSERT_EQ(stats.streams.size(), 2u);
  EXPECT_EQ(stats.streams[0].delivered, 40);
  EXPECT_EQ(stats.streams[1].delivered, 30);
  EXPECT_EQ(stats.streams[0].dropped, 0);
  std::map<std::string, std::int64_t> next;
  for (const auto& [stream, seq] : g_observed.frames["out"]) {
    EXPECT_EQ(seq, next[stream]) << "stream " << stream << " out of order";
    next[stream] = seq + 1;
  }
  EXPECT_EQ(next["a"], 40);
  EXPECT_EQ(next["b"], 30);
}

TEST_F(PipelineGraph, AnOrderedStageSeesEachStreamInReadOrderOneFrameAtATime) {
  TestOrdered::seen.clear();
  TestOrdered::max_overlap = 0;
  // The random sleeps before it make frames overtake each other; the stage must not notice.
  const auto stats = run_text(R"(version: 1
service: {max_in_flight: 8}
sources:
  - {name: a, type: synthetic, width: 32, height: 24, frames: 60}
  - {name: b, type: synthetic, width: 48, height: 32, frames: 45}
stages:
  - {name: work, type: test_work, max_sleep_ms: 6}
  - {name: track, type: test_ordered}
sinks:
  - {name: out, type: test_collect}
)");
  EXPECT_EQ(stats.streams[0].delivered, 60);
  EXPECT_EQ(stats.streams[1].delivered, 45);
  std::map<std::string, std::int64_t> next;
  for (const auto& [stream, seq] : TestOrdered::seen) {
    EXPECT_EQ(seq, next[stream]) << "stream " << stream << " reached the ordered stage out of order";
    next[stream] = seq + 1;
  }
  EXPECT_EQ(next["a"], 60);
  EXPECT_EQ(next["b"], 45);
  EXPECT_EQ(TestOrdered::max_overlap, 1);
  // Its counters reach the run's statistics and summary.
  const auto& track = stats.stages.back();
  ASSERT_EQ(track.name, "track");
  EXPECT_EQ(track.parallelism, 1);
  ASSERT_EQ(track.counters.size(), 2u);
  EXPECT_EQ(track.counters[0].value, 60);
  EXPECT_EQ(track.counters[1].value, 45);
  EXPECT_NE(summary_text(stats).find("test_frames_seen{stream=b} 45"), std::string::npos) << summary_text(stats);
}

TEST_F(PipelineGraph, SlowSinkBoundsFramesInFlight) {
  const auto stats = run_text(R"(version: 1
service: {max_in_flight: 3, queue: 2}
sources:
  - {name: a, type: synthetic, width: 32, height: 24, frames: 30}
stages:
  - {name: work, type: test_work}
sinks:
  - {name: slow, type: test_collect, sleep_ms: 10}
)");
  EXPECT_EQ(stats.streams[0].delivered, 30);
  EXPECT_EQ(stats.streams[0].dropped, 0);  // a file-like source blocks, never drops
  EXPECT_LE(g_observed.max_in_graph, 3);
  EXPECT_GE(g_observed.max_in_graph, 2);  // and the bound was reached: the sink was the bottleneck
  EXPECT_LE(stats.streams[0].max_in_flight, 3);
}

TEST_F(PipelineGraph, LiveSourceDropsOldestAndCountsEveryDrop) {
  // 200 fps into a stage that takes 20 ms a frame: most frames must go.
  const auto stats = run_text(R"(version: 1
service: {max_in_flight: 2, queue: 2}
sources:
  - {name: cam, type: synthetic, width: 32, height: 24, frames: 120, fps: 200, live: true}
stages:
  - {name: work, type: test_work, sleep_ms: 20}
sinks:
  - {name: out, type: test_collect}
)");
  const auto& s = stats.streams[0];
  EXPECT_EQ(s.read, 120);
  EXPECT_GT(s.dropped, 20);
  EXPECT_EQ(s.delivered + s.dropped, s.read);
  EXPECT_EQ(static_cast<std::int64_t>(g_observed.frames["out"].size()), s.delivered);
  // The last frame is never the one dropped (oldest first), and seqs still increase.
  EXPECT_EQ(g_observed.frames["out"].back().second, 119);
  for (std::size_t i = 1; i < g_observed.frames["out"].size(); ++i) {
    EXPECT_LT(g_observed.frames["out"][i - 1].second, g_observed.frames["out"][i].second);
  }
}

TEST_F(PipelineGraph, BatchesAcrossStreams) {
  const auto stats = run_text(R"(version: 1
service: {max_in_flight: 4}
sources:
  - {name: a, type: synthetic, width: 32, height: 24, frames: 12}
  - {name: b, type: synthetic, width: 32, height: 24, frames: 12}
  - {name: c, type: synthetic, width: 32, height: 24, frames: 12}
stages:
  - {name: batch, type: test_batch, max_batch: 3}
sinks:
  - {name: out, type: test_collect}
)");
  for (const auto& s : stats.streams) EXPECT_EQ(s.delivered, 12);
  EXPECT_GT(*g_observed.batch_sizes.rbegin(), 1);
  EXPECT_LE(*g_observed.batch_sizes.rbegin(), 3);
}

TEST_F(PipelineGraph, StageExceptionStopsTheRunAndReachesTheCaller) {
  try {
    run_text(R"(version: 1
sources:
  - {name: a, type: synthetic, width: 32, height: 24, frames: 0}
stages:
  - {name: picky, type: test_work, throw_at: 5}
sinks:
  - {name: out, type: test_collect}
)");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("stage 'picky' failed on frame 5 of stream 'a'"), std::string::npos) << m;
    EXPECT_NE(m.find("test_work refuses frame 5"), std::string::npos) << m;
  }
  // Frames before the failing one reached the sink, none after it.
  for (const auto& [stream, seq] : g_observed.frames["out"]) EXPECT_LT(seq, 5);
}

TEST_F(PipelineGraph, StopFlagDrainsAndReturns) {
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    stop = true;
  });
  RunOptions options;
  options.stop = &stop;
  const auto stats = run_text(R"(version: 1
sources:
  - {name: a, type: synthetic, width: 32, height: 24, frames: 0, fps: 100}
stages:
  - {name: work, type: test_work}
sinks:
  - {name: out, type: test_collect}
)", options);
  stopper.join();
  EXPECT_GT(stats.streams[0].delivered, 5);
  EXPECT_EQ(stats.streams[0].delivered, stats.streams[0].read);  // drained: nothing lost
  EXPECT_EQ(stats.streams[0].in_flight, 0);
}

TEST_F(PipelineGraph, MaxFramesPerStream) {
  RunOptions options;
  options.max_frames = 7;
  const auto stats = run_text(R"(version: 1
sources:
  - {name: a, type: synthetic, width: 32, height: 24, frames: 0}
sinks:
  - {name: out, type: test_collect}
)", options);
  EXPECT_EQ(stats.streams[0].delivered, 7);
}

}  // namespace
}  // namespace redwood

namespace redwood {
namespace {

/// A source that throws after two frames (as OpenCV may on a corrupt file).
class ThrowingSource final : public Source {
 public:
  explicit ThrowingSource(Params&) {}
  bool live() const override { return false; }
  ReadStatus read(Picture& image, double& pts_ms, FrameMemory* memory, const std::atomic<bool>&) override {
    if (n_ == 2) throw std::runtime_error("corrupt packet");
    image = frame_picture(memory, 8, 8, 3);
    std::memset(image.data, 0, image.stride * image.height);
    pts_ms = static_cast<double>(n_++);
    return ReadStatus::kFrame;
  }

 private:
  int n_ = 0;
};
RW_REGISTER_SOURCE("test_throwing", ThrowingSource);

TEST(PipelineGraphErrors, SourceExceptionReachesTheCaller) {
  Pipeline p(testing::pipeline_text("version: 1\nsources:\n  - {name: bad, type: test_throwing}\n"));
  try {
    p.run();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("source 'bad' failed after 2 frame(s): corrupt packet"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace redwood
