// The frame pool (stages/frame_memory.hpp): a pipeline's pictures, preprocessed tensors, batches
// and crops come from its buddy pool, and after warm-up the pool stops asking the system for
// memory. The pipeline: synthetic pictures -> preprocess -> batched infer (y = 2x) -> two fake
// text regions per frame -> text_crops -> batched secondary infer on the crops. A probe stage
// reads the pool's counters at the end of warm-up; the run's statistics give them at the end.
// Frame objects themselves are recycled (FramePool): their count stays bounded.

#include "pipelines/pipeline.hpp"
#include "pipelines/pipeline_text.hpp"
#include "support/onnx_builder.hpp"

#include <gtest/gtest.h>

#include <mutex>

namespace redwood {
namespace {

constexpr int kWarmUp = 300;
constexpr int kFrames = 600;

std::mutex g_mutex;
FrameMemoryStats g_at_warm_up;
bool g_probed = false;
int g_frames_seen = 0;          // frames past the probe (the last stage), both streams
int g_frames_at_warm_up = 0;    // of them, when the counters were read

/// Adds two text regions to every frame (what db_text would find), so that crops run.
class FakeText final : public Stage {
 public:
  explicit FakeText(StageArgs& a) : Stage(a.name) {}

 private:
  void do_process(std::span<Frame* const> frames) override {
    for (Frame* f : frames) {
      for (float y : {10.f, 60.f}) {
        Detection d;
        d.kind = "text";
        d.quad = {{10, y}, {120, y}, {120, y + 30}, {10, y + 30}};
        d.box = {10, y, 110, 30};
        f->detections.push_back(d);
      }
    }
  }
};
RW_REGISTER_STAGE("test_fake_text", FakeText);

/// Reads the pool's counters when the warm-up frame passes.
class PoolProbe final : public Stage {
 public:
  explicit PoolProbe(StageArgs& a) : Stage(a.name) {}
  bool serial() const override { return true; }

 private:
  void do_process(std::span<Frame* const> frames) override {
    for (Frame* f : frames) {
      ASSERT_NE(f->memory, nullptr);
      std::lock_guard lock(g_mutex);
      ++g_frames_seen;
      // Each stream's warm-up frame reads the counters: the later one stands.
      if (f->seq == kWarmUp) {
        g_at_warm_up = f->memory->stats();
        g_frames_at_warm_up = g_frames_seen;
        g_probed = true;
      }
    }
  }
};
RW_REGISTER_STAGE("test_pool_probe", PoolProbe);

std::filesystem::path save_scale_model(const std::filesystem::path& file, std::int64_t h, std::int64_t w) {
  testing::OnnxBuilder b(13);
  b.input("x", onnx::TensorProto::FLOAT, {-1, 3, h, w}, {"N"});
  b.initializer("two", Tensor::from_vector<float>({1}, {2.f}));
  b.node("Mul", {"x", "two"}, {"y"}, "mul");
  b.output("y", onnx::TensorProto::FLOAT, {-1, 3, h, w}, {"N"});
  b.save(file);
  return file;
}

TEST(PipelineFrameMemory, SteadyStateStopsTakingFromTheSystem) {
  const auto dir = testing::temp_dir("frame-memory");
  const auto pic = save_scale_model(dir / "pic.onnx", 120, 160);
  const auto crop = save_scale_model(dir / "crop.onnx", 48, 320);
  // 4 MiB chunks: small enough that buffers kept past their frame would soon need a new one.
  Pipeline p(testing::pipeline_text(
      "version: 1\n"
      "service: {max_in_flight: 4, queue: 2, frame_chunk_mb: 4, frame_pool_mb: 256}\n"
      "sources:\n"
      "  - {name: a, type: synthetic, width: 160, height: 120, frames: " + std::to_string(kFrames) + "}\n"
      "  - {name: b, type: synthetic, width: 160, height: 120, frames: " + std::to_string(kFrames) + "}\n"
      "models:\n"
      "  pic: {path: '" + pic.string() + "'}\n"
      "  crop: {path: '" + crop.string() + "'}\n"
      "stages:\n"
      "  - {name: pre, type: preprocess, model: pic, output: x}\n"
      "  - {name: scale, type: infer, model: pic, input: x, outputs: {y: y}, max_batch: 2, timeout_ms: 2}\n"
      "  - {name: text, type: test_fake_text}\n"
      "  - {name: crops, type: text_crops, output: rec_in}\n"
      "  - {name: rec, type: infer, model: crop, input: rec_in, outputs: {y: rec_out}, max_batch: 2, timeout_ms: 2}\n"
      "  - {name: probe, type: test_pool_probe}\n"));
  const PipelineStats stats = p.run();
  for (const auto& s : stats.streams) ASSERT_EQ(s.delivered, kFrames);
  ASSERT_TRUE(g_probed);
  const FrameMemoryStats& end = stats.memory;
  const FrameMemoryStats& warm = g_at_warm_up;

  // The buffers went through the pool: per frame at least the picture, the preprocessed tensor,
  // the crops tensor and two rectified crops (batches and slices come on top). Counted over the
  // frames begun after the counters were read: the streams run apart (the earlier one is past its
  // warm-up frame by then, further on a loaded machine), and up to max_in_flight frames of each
  // had begun before.
  const auto frames_after = static_cast<std::uint64_t>(2 * kFrames - g_frames_at_warm_up - 2 * 4);
  EXPECT_GE(end.pool.allocations - warm.pool.allocations, 5 * frames_after);
  EXPECT_EQ(end.fallbacks, 0u) << "buffers that bypassed the pool";
  // After warm-up the pool stops going back to the system. Batches form by timing, so on a loaded
  // machine the most buffers alive at once may first occur after warm-up and take one chunk
  // more; a pool that grew with the frames would take one every few dozen frames (300 here), and
  // a buffer kept past its frame shows in bytes_in_use below.
  EXPECT_GT(warm.pool.upstream_allocations, 0u);
  EXPECT_LE(end.pool.upstream_allocations, warm.pool.upstream_allocations + 1)
      << "the pool took " << (end.pool.upstream_allocations - warm.pool.upstream_allocations)
      << " chunk(s) from the system after warm-up; reserved " << memory::format_bytes(end.pool.reserved_bytes);
  EXPECT_EQ(end.pool.upstream_deallocations, warm.pool.upstream_deallocations);
  // Every system call the pool made is one its upstream saw (nothing else allocates through it).
  EXPECT_EQ(end.upstream.allocations, end.pool.upstream_allocations);
  // Nothing kept: every buffer of every frame went back.
  EXPECT_EQ(end.pool.bytes_in_use, 0u) << memory::format_bytes(end.pool.bytes_in_use) << " still in use";
  EXPECT_EQ(end.pool.allocations, end.pool.deallocations);
  // Frame objects are recycled too: no more than can be in the pipeline at once (per stream the
  // queue, the frames in flight, one in the reader's and one in the pump's hand, one being reset).
  EXPECT_LE(stats.frames_created, 2 * (2 + 4 + 3));
  EXPECT_GT(stats.frames_created, 0);
}

TEST(PipelineFrameMemory, ReserveTakesTheChunksAtLoadAndTheRunNoMore) {
  const auto dir = testing::temp_dir("frame-memory-reserve");
  const auto pic = save_scale_model(dir / "pic.onnx", 120, 160);
  Pipeline p(testing::pipeline_text(
      "version: 1\n"
      "service: {frame_chunk_mb: 4, frame_pool_mb: 64, frame_pool_reserve_mb: 32}\n"
      "sources:\n"
      "  - {name: a, type: synthetic, width: 160, height: 120, frames: 200}\n"
      "  - {name: b, type: synthetic, width: 160, height: 120, frames: 200}\n"
      "models:\n"
      "  pic: {path: '" + pic.string() + "'}\n"
      "stages:\n"
      "  - {name: pre, type: preprocess, model: pic, output: x}\n"
      "  - {name: scale, type: infer, model: pic, input: x, outputs: {y: y}, max_batch: 2, timeout_ms: 2}\n"));
  const FrameMemoryStats loaded = p.memory().stats();
  EXPECT_EQ(loaded.pool.upstream_allocations, 8u) << "32 MiB in 4 MiB chunks, before any frame";
  EXPECT_GE(loaded.pool.reserved_bytes, 32u << 20);
  EXPECT_EQ(loaded.pool.bytes_in_use, 0u);
  const PipelineStats stats = p.run();
  for (const auto& s : stats.streams) ASSERT_EQ(s.delivered, 200);
  EXPECT_EQ(stats.memory.pool.upstream_allocations, loaded.pool.upstream_allocations)
      << "the run took chunks beyond the reserve";
  EXPECT_EQ(stats.memory.fallbacks, 0u);
}

TEST(PipelineFrameMemory, ReserveBeyondThePoolFailsAtItsKey) {
  try {
    Pipeline p(testing::pipeline_text("version: 1\nservice: {frame_pool_mb: 64, frame_pool_reserve_mb: 65}\n"
                                      "sources:\n  - {name: a, type: synthetic, frames: 1}\n"));
    FAIL() << "a reserve past the pool was taken";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("frame_pool_reserve_mb: must be from 0 to frame_pool_mb (64)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace redwood
