// The multi-stream options (redwood run --streams, --realtime, --fps, --loop), the per-stream
// priority, the model keys of the streaming runtime (slots, instances, devices), and an
// asynchronous infer stage failing cleanly: the run names the stage, the frame and the stream.

#include "pipelines/pipeline.hpp"
#include "pipelines/pipeline_text.hpp"
#include "stages/source/source.hpp"
#include "support/onnx_builder.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <thread>

namespace redwood {
namespace {

std::string synthetic(const std::string& extra = "") {
  return "version: 1\n"
         "sources:\n"
         "  - {name: cam, type: synthetic, width: 32, height: 24, frames: 5" + extra + "}\n";
}

std::string load_error(const std::string& yaml, const PipelineOptions& options = {}) {
  try {
    Pipeline p(testing::pipeline_text(yaml), options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// A file-like source at 20 fps whose start takes 300 ms (as opening and seeking a decoder may).
class SlowStartSource final : public Source {
 public:
  explicit SlowStartSource(Params& p) : frames_(p.get<int>("frames", 3)) {}
  bool live() const override { return false; }
  double frame_rate() const override { return 20; }
  void prepare() override {
    if (prepared_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    prepared_ = true;
  }
  ReadStatus read(Picture& image, double& pts_ms, FrameMemory* memory, const std::atomic<bool>& stop) override {
    prepare();
    if (stop || n_ >= frames_) return ReadStatus::kEnd;
    image = frame_picture(memory, 8, 8, 3);
    std::memset(image.data, n_, image.stride * image.height);
    pts_ms = 50.0 * n_++;
    return ReadStatus::kFrame;
  }

 private:
  int frames_;
  int n_ = 0;
  bool prepared_ = false;
};
RW_REGISTER_SOURCE("test_slow_start", SlowStartSource);

TEST(PipelineStreams, PacedClockStartsOnceTheSourcesArePrepared) {
  // Were the 300 ms start inside the run, the first frame would reach the end 300 ms after it
  // was due, and later ones catch up at 20 fps; prepared before the clock, none is late. A queue
  // that holds every frame, and a bound below the start but far above a frame's own time, so
  // that a test run beside others on two busy cores neither drops a frame nor counts a stall.
  Pipeline p(testing::pipeline_text("version: 1\nservice: {queue: 8}\n"
                                    "sources:\n  - {name: slow, type: test_slow_start, frames: 4}\n"),
             PipelineOptions{.realtime = true});
  const auto stats = p.run();
  const auto& s = stats.streams.at(0);
  const std::string seen = "delivered " + std::to_string(s.delivered) + ", dropped " + std::to_string(s.dropped) +
                           ", latest " + std::to_string(s.latency.percentile(100)) + " ms";
  ASSERT_EQ(s.delivered, 4) << seen;
  EXPECT_EQ(s.dropped, 0) << seen;
  EXPECT_LT(s.latency.percentile(100), 250.0) << "a frame was late by the source's start: " << seen;
}

TEST(PipelineStreams, CopiesOfEverySourceRunUnderNumberedNames) {
  Pipeline p(testing::pipeline_text(synthetic() + "  - {name: other, type: synthetic, width: 16, height: 16, frames: 3}\n"),
             PipelineOptions{.streams = 3});
  EXPECT_EQ(p.stream_names(), (std::vector<std::string>{"cam-1", "cam-2", "cam-3", "other-1", "other-2", "other-3"}));
  const auto stats = p.run();
  for (const auto& s : stats.streams) EXPECT_EQ(s.delivered, s.name.rfind("cam", 0) == 0 ? 5 : 3) << s.name;
}

TEST(PipelineStreams, CopiesOfAVideoBeginAtEvenlySpacedPointsOfIt) {
  // vtest.avi has 795 frames: copy k of 4 begins at frame floor(k * 795 / 4) and, with no loop,
  // reads to the end from there.
  Pipeline p(testing::pipeline_text("version: 1\nsources:\n  - {name: v, type: video, path: video/vtest.avi}\n"),
             PipelineOptions{.streams = 4});
  const auto stats = p.run();
  ASSERT_EQ(stats.streams.size(), 4u);
  const std::int64_t expected[] = {795, 795 - 198, 795 - 397, 795 - 596};
  for (std::size_t k = 0; k < 4; ++k) EXPECT_EQ(stats.streams[k].delivered, expected[k]) << stats.streams[k].name;
}

TEST(PipelineStreams, RealtimePacesFramesAtTheRateAsked) {
  // 5 frames at 20 fps: the last is due 200 ms after the start; its latency counts from then.
  Pipeline p(testing::pipeline_text(synthetic()), PipelineOptions{.fps = 20});
  const auto stats = p.run();
  EXPECT_EQ(stats.streams.at(0).delivered, 5);
  EXPECT_GE(stats.elapsed_s, 0.2);
}

TEST(PipelineStreams, LoopStartsFilesOverUntilTheFrameLimit) {
  Pipeline p(testing::pipeline_text(synthetic()), PipelineOptions{.loop = true});
  RunOptions run;
  run.max_frames = 12;
  const auto stats = p.run(run);
  EXPECT_EQ(stats.streams.at(0).read, 12);
  EXPECT_EQ(stats.streams.at(0).delivered, 12);
}

TEST(PipelineStreams, RealtimeNeedsAFileWithAFrameRateAndRefusesLiveSources) {
  EXPECT_NE(load_error(synthetic(", fps: 10, live: true"), {.realtime = true}).find("this source is live already"), std::string::npos);
  Pipeline no_rate(testing::pipeline_text(synthetic()), PipelineOptions{.realtime = true});
  try {
    no_rate.run();
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("source 'cam' has no frame rate to pace it at; give --fps"), std::string::npos) << e.what();
  }
  EXPECT_NE(load_error(synthetic(), {.streams = 0}).find("--streams must be from 1"), std::string::npos);
}

TEST(PipelineStreams, PriorityIsASourceKey) {
  Pipeline p(testing::pipeline_text(synthetic(", priority: 2")));
  EXPECT_EQ(p.run().streams.at(0).delivered, 5);
  EXPECT_NE(load_error(synthetic(", priority: high")).find("priority: expected an integer"), std::string::npos);
}

// `threads: 1` is one worker for the stages: the run delivers every frame (the calling thread
// only watches it, so a limit that counted it left no worker and the run never ended).
TEST(PipelineThreads, OneThreadRunsAndOutOfRangeCountsAreRefused) {
  const std::string yaml = "version: 1\n"
                           "service: {threads: 1}\n"
                           "sources:\n"
                           "  - {name: cam, type: synthetic, width: 32, height: 24, frames: 20}\n";
  auto run = std::async(std::launch::async, [&] { return Pipeline(testing::pipeline_text(yaml)).run(); });
  if (run.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    // The run cannot be stopped from here, and the future would wait for it forever.
    std::fprintf(stderr, "FAILED: the run with one thread never ended\n");
    std::quick_exit(1);
  }
  EXPECT_EQ(run.get().streams.at(0).delivered, 20);
  for (const char* bad : {"-1", "1025"}) {
    EXPECT_NE(load_error("version: 1\nservice: {threads: " + std::string(bad) + "}\n" + synthetic().substr(11))
                  .find("threads: must be from 0 (all cores) to 1024"),
              std::string::npos)
        << bad;
  }
}

// A status interval of 0 (or below) would make the run's loop snapshot the statistics every
// 10 ms and print a status line each time; refused at its line instead.
TEST(PipelineService, StatusIntervalMustBePositive) {
  for (const char* bad : {"0", "-2", "1e9"}) {
    EXPECT_NE(load_error("version: 1\nservice: {status_interval_s: " + std::string(bad) + "}\n" + synthetic().substr(11))
                  .find("status_interval_s: must be above 0 and at most 3600"),
              std::string::npos)
        << bad;
  }
}

class StreamingModel : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::temp_dir("streams");
    testing::OnnxBuilder b(13);
    b.input("pic", onnx::TensorProto::FLOAT, {-1, 3, 8, 8}, {"N"});
    b.initializer("shape", Tensor::from_vector<std::int64_t>({4}, {1, 3, 8, 8}));
    b.node("Reshape", {"pic", "shape"}, {"same"}, "reshape");  // fails for a batch of more than one
    b.output("same", onnx::TensorProto::FLOAT, {1, 3, 8, 8});
    b.save(dir_ / "one.onnx");
  }
  std::string yaml(const std::string& model_keys, const std::string& infer_keys = "") const {
    return "version: 1\n"
           "sources:\n"
           "  - {name: a, type: synthetic, width: 16, height: 16, frames: 6}\n"
           "  - {name: b, type: synthetic, width: 16, height: 16, frames: 6}\n"
           "models:\n"
           "  one: {path: '" + (dir_ / "one.onnx").string() + "'" + model_keys + "}\n"
           "stages:\n"
           "  - {name: x, type: preprocess, model: one}\n"
           "  - {name: run, type: infer, model: one, input: x" + infer_keys + "}\n";
  }
  std::filesystem::path dir_;
};

TEST_F(StreamingModel, SlotsInstancesAndDevicesAreCheckedAtLoad) {
  EXPECT_NE(load_error(yaml(", slots: 5")).find("slots: must be from 1 to 4"), std::string::npos);
  EXPECT_NE(load_error(yaml(", instances: 0")).find("instances: must be from 1 to 16"), std::string::npos);
  EXPECT_NE(load_error(yaml(", devices: [0]")).find("devices: lists GPUs; this model runs on the CPU"), std::string::npos);
  EXPECT_NE(load_error(yaml("", ", batch_sizes: [4, 2]")).find("batch_sizes: expected increasing row counts"),
            std::string::npos);
  EXPECT_NE(load_error(yaml("", ", latency_budget_ms: -1")).find("latency_budget_ms: must be >= 0"), std::string::npos);
  // Pinned nodes: only where the partitioner places (device cuda or auto), known names, known devices.
  EXPECT_NE(load_error(yaml(", nodes: {reshape: cuda}")).find("nodes: pins nodes to devices; this model runs on the CPU alone"),
            std::string::npos);
  EXPECT_NE(load_error(yaml(", device: auto, nodes: {reshape: tpu}")).find("node 'reshape': device 'tpu': expected cpu or cuda"),
            std::string::npos);
  EXPECT_NE(load_error(yaml(", device: auto, nodes: {nosuch: cpu}")).find("the model has no node 'nosuch'"), std::string::npos);
  Pipeline ok(testing::pipeline_text(yaml(", slots: 1, instances: 2")));
  const auto stats = ok.run();
  for (const auto& s : stats.streams) EXPECT_EQ(s.delivered, 6);
  // Two CPU runners took the batches between them.
  ASSERT_EQ(stats.runners.size(), 2u);
  EXPECT_EQ(stats.runners[0].batches + stats.runners[1].batches, 12);
}

TEST_F(StreamingModel, AModelThatCannotRunAFullBatchFailsAtLoadNamingStageAndRows) {
  // Batches of two frames: the model's Reshape refuses them. The runners make their plans for
  // every batch the stage will form before the run, so the file is refused at load, at its
  // max_batch, rather than at the first batch of two in the middle of the run.
  const std::string what = load_error(yaml("", ", max_batch: 2, timeout_ms: 1000"));
  EXPECT_NE(what.find("test.yaml:9:63:"), std::string::npos) << what;  // at max_batch
  EXPECT_NE(what.find("stage 'run': model 'one' cannot run a batch of 2 row(s) ([2, 3, 8, 8]; max_batch 2)"), std::string::npos)
      << what;
  EXPECT_NE(what.find("node 'reshape' (Reshape)"), std::string::npos) << what;
}

}  // namespace
}  // namespace redwood
