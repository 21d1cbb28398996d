// The runner contract (core/model_runner.hpp) through the CPU runner: submit returns at once and
// done runs later on the runner's thread, in submit order; never more batches in flight than
// slots; parts split back by rows, padding rows dropped; errors reach done (or submit, for a
// batch that does not fit) and leave the runner usable; picture batches (pixels the runner
// normalizes) give what their floats give; the slot ring's order and back-pressure; the
// statistics' unions of intervals.

#include "core/error.hpp"
#include "core/model_runner.hpp"
#include "core/onnx/onnx_import.hpp"
#include "core/recycling_allocator.hpp"
#include "runtime/cpu_runner.hpp"
#include "runtime/executor.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <random>
#include <thread>

namespace redwood {
namespace {

// y = 2x over [N, 3].
std::shared_ptr<const Graph> doubling_model() {
  const auto dir = testing::temp_dir("runner");
  testing::OnnxBuilder b(13);
  b.input("x", onnx::TensorProto::FLOAT, {-1, 3}, {"N"});
  b.initializer("two", Tensor::from_vector<float>({1}, {2.f}));
  b.node("Mul", {"x", "two"}, {"y"}, "mul");
  b.output("y", onnx::TensorProto::FLOAT, {-1, 3}, {"N"});
  b.save(dir / "double.onnx");
  return load_onnx(dir / "double.onnx");
}

// y = reshape(x, [2, 3]) over [N, 3]: runs for N = 2 only, and its output has 2 rows whatever N.
std::shared_ptr<const Graph> reshaping_model() {
  const auto dir = testing::temp_dir("runner");
  testing::OnnxBuilder b(13);
  b.input("x", onnx::TensorProto::FLOAT, {-1, 3}, {"N"});
  b.initializer("shape", Tensor::from_vector<std::int64_t>({2}, {2, 3}));
  b.node("Reshape", {"x", "shape"}, {"y"}, "reshape");
  b.output("y", onnx::TensorProto::FLOAT, {2, 3});
  b.save(dir / "reshape.onnx");
  return load_onnx(dir / "reshape.onnx");
}

// y = mean of x's rows over [N, 3], keeping the axis: one row whatever N.
std::shared_ptr<const Graph> averaging_model() {
  const auto dir = testing::temp_dir("runner");
  testing::OnnxBuilder b(13);
  b.input("x", onnx::TensorProto::FLOAT, {-1, 3}, {"N"});
  auto& mean = b.node("ReduceMean", {"x"}, {"y"}, "mean");
  testing::OnnxBuilder::set_attr(mean, "axes", std::vector<std::int64_t>{0});
  testing::OnnxBuilder::set_attr(mean, "keepdims", std::int64_t{1});
  b.output("y", onnx::TensorProto::FLOAT, {1, 3});
  b.save(dir / "mean.onnx");
  return load_onnx(dir / "mean.onnx");
}

Tensor rows(std::int64_t n, float first) {
  std::vector<float> v;
  for (std::int64_t i = 0; i < n * 3; ++i) v.push_back(first + static_cast<float>(i));
  return Tensor::from_vector<float>({n, 3}, v);
}

InferResult run_batch(ModelRunner& runner, InferBatch batch) {
  std::promise<InferResult> promise;
  auto future = promise.get_future();
  runner.submit(std::move(batch), [&promise](InferResult& r) { promise.set_value(std::move(r)); });
  return future.get();
}

TEST(CpuRunner, CompletesOnItsOwnThreadInSubmitOrderWithinItsSlots) {
  RunnerConfig two;
  two.slots = 2;
  auto runner = make_cpu_runner(doubling_model(), two);
  const auto me = std::this_thread::get_id();
  std::mutex mutex;
  std::vector<int> order;
  std::atomic<int> on_caller{0}, wrong{0}, most_in_flight{0};
  for (int i = 0; i < 40; ++i) {
    InferBatch b;
    b.inputs.push_back({rows(1 + i % 3, static_cast<float>(i))});
    runner->submit(std::move(b), [&, i](InferResult& r) {
      if (std::this_thread::get_id() == me) ++on_caller;
      const auto got = r.outputs.at(0).at(0).to_float_vector();
      for (std::size_t k = 0; k < got.size(); ++k) wrong += got[k] != 2.f * (static_cast<float>(i) + static_cast<float>(k));
      std::lock_guard lock(mutex);
      order.push_back(i);
    });
    most_in_flight = std::max(most_in_flight.load(), runner->in_flight());
  }
  runner->drain();
  EXPECT_EQ(runner->in_flight(), 0);
  ASSERT_EQ(order.size(), 40u);
  EXPECT_TRUE(std::is_sorted(order.begin(), order.end()));
  EXPECT_EQ(on_caller.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(most_in_flight.load(), 2);
  const RunnerStats stats = runner->stats();
  EXPECT_EQ(stats.batches, 40);
  EXPECT_EQ(stats.rows, 14 * 1 + 13 * 2 + 13 * 3);
  EXPECT_EQ(stats.batch_rows.at(2), 13);
  EXPECT_EQ(stats.slots, 2);
  EXPECT_EQ(stats.device, -1);
}

TEST(CpuRunner, ABatchNotCountedRunsButIsLeftOutOfItsStats) {
  auto runner = make_cpu_runner(doubling_model());
  InferBatch ready;
  ready.inputs.push_back({rows(4, 0.f)});
  ready.counted = false;  // as a split's prepare runs its segments
  const InferResult r = run_batch(*runner, std::move(ready));
  ASSERT_FALSE(r.error);
  EXPECT_EQ(r.outputs.at(0).at(0).to_float_vector().at(5), 10.f);
  EXPECT_EQ(runner->run({{"x", rows(2, 1.f)}}, false).at(0).to_float_vector().at(0), 2.f);
  EXPECT_EQ(runner->stats().batches, 0);
  EXPECT_EQ(runner->stats().rows, 0);
  EXPECT_TRUE(runner->stats().run_rows_ms.empty());
  runner->run({{"x", rows(3, 1.f)}});
  const RunnerStats stats = runner->stats();
  EXPECT_EQ(stats.batches, 1);
  EXPECT_EQ(stats.rows, 3);
  ASSERT_EQ(stats.run_rows_ms.size(), 1u);
  EXPECT_EQ(stats.run_rows_ms.begin()->first, 3);
}

TEST(CpuRunner, PartsComeBackSplitByRowsAndPaddingRowsAreDropped) {
  auto runner = make_cpu_runner(doubling_model());
  for (std::int64_t run_rows : {0, 6, 8}) {
    InferBatch b;
    b.inputs.push_back({rows(1, 0), rows(2, 10), rows(3, 20)});
    b.run_rows = run_rows;
    int allocated = 0;
    b.allocate = [&allocated](DType dtype, const Shape& shape) {
      ++allocated;
      return Tensor::empty(dtype, shape);
    };
    InferResult r = run_batch(*runner, std::move(b));
    ASSERT_FALSE(r.error);
    ASSERT_EQ(r.outputs.at(0).size(), 3u);
    const std::int64_t want_rows[] = {1, 2, 3};
    const float first[] = {0, 10, 20};
    for (std::size_t k = 0; k < 3; ++k) {
      const Tensor& y = r.outputs[0][k];
      ASSERT_EQ(y.shape(), (Shape{want_rows[k], 3}));
      const auto v = y.to_float_vector();
      for (std::size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], 2.f * (first[k] + static_cast<float>(i)));
    }
    // The staged batch comes from the batch's allocator, and so does its output once the row
    // count is planned (the parts view its rows: tests/runtime/cpu_runner_steady_test.cpp).
    EXPECT_GE(allocated, 1);
  }
  EXPECT_EQ(runner->stats().run_rows, 6 + 6 + 8);
}

TEST(CpuRunner, ARunErrorReachesDoneAndTheRunnerGoesOn) {
  auto runner = make_cpu_runner(reshaping_model());
  InferBatch bad;
  bad.inputs.push_back({rows(3, 0)});  // 9 values cannot become [2, 3]
  InferResult r = run_batch(*runner, std::move(bad));
  ASSERT_TRUE(r.error);
  EXPECT_TRUE(r.outputs.empty());
  try {
    std::rethrow_exception(r.error);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reshape"), std::string::npos) << e.what();
  }
  EXPECT_EQ(runner->run({{"x", rows(2, 1)}}).at(0).shape(), (Shape{2, 3}));
  EXPECT_EQ(runner->stats().failed, 1);
  // A model whose output is not one row per input row cannot be split into the batch's parts.
  auto sums = make_cpu_runner(averaging_model());
  InferBatch two;
  two.inputs.push_back({rows(1, 0), rows(1, 3)});
  r = run_batch(*sums, std::move(two));
  ASSERT_TRUE(r.error);
  try {
    std::rethrow_exception(r.error);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("output 'y' is float[1, 3], expected 2 rows"), std::string::npos) << e.what();
  }
}

TEST(CpuRunner, ABatchThatDoesNotFitFailsInSubmitNamingWhatDiffers) {
  auto runner = make_cpu_runner(doubling_model());
  const auto refused = [&](InferBatch b, const std::string& says) {
    try {
      runner->submit(std::move(b), [](InferResult&) { ADD_FAILURE() << "done called for a refused batch"; });
      ADD_FAILURE() << "no error for: " << says;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused(InferBatch{}, "a batch of 0 input(s) for 1 graph input(s)");
  InferBatch wrong_type;
  wrong_type.inputs.push_back({Tensor::zeros(DType::kI64, {1, 3})});
  refused(std::move(wrong_type), "input 'x' is int64[1, 3], the graph declares");
  InferBatch ragged;
  ragged.inputs.push_back({rows(1, 0), Tensor::zeros(DType::kF32, {1, 4})});
  refused(std::move(ragged), "the parts of input 'x' differ beyond dim 0");
  InferBatch short_run;
  short_run.inputs.push_back({rows(3, 0)});
  short_run.run_rows = 2;
  refused(std::move(short_run), "run_rows 2 is below the batch's 3 rows");
  EXPECT_THROW(runner->run({{"z", rows(1, 0)}}), InvalidArgument);
  EXPECT_EQ(runner->in_flight(), 0);
}

// Picture batches: 8-bit pixels [rows, H, W, 3] the runner normalizes into the model's floats.
const PictureInput kRgb = PictureInput::from_mean_std(0.5f, {1.f, 2.f, 3.f}, {2.f, 4.f, 8.f}, 3, true);

Tensor pixels(Shape shape, std::uint32_t seed) { return testing::random_tensor(DType::kU8, std::move(shape), 0, 255, seed); }

// y = 2x over [N, 3, 4, 6] (NCHW) or [N, 4, 6, 3] (NHWC): the output shows the input exactly.
std::shared_ptr<const Graph> doubling_picture_model(bool nchw) {
  const auto dir = testing::temp_dir("picture-runner");
  testing::OnnxBuilder b(13);
  const std::vector<std::int64_t> dims = nchw ? std::vector<std::int64_t>{-1, 3, 4, 6} : std::vector<std::int64_t>{-1, 4, 6, 3};
  b.input("x", onnx::TensorProto::FLOAT, dims, {"N"});
  b.initializer("two", Tensor::from_vector<float>({1}, {2.f}));
  b.node("Mul", {"x", "two"}, {"y"}, "mul");
  b.output("y", onnx::TensorProto::FLOAT, dims, {"N"});
  const auto file = dir / (nchw ? "nchw.onnx" : "nhwc.onnx");
  b.save(file);
  return load_onnx(file);
}

TEST(CpuRunnerPicture, PartsAndPaddingRowsGiveWhatTheirFloatsGive) {
  for (bool nchw : {true, false}) {
    PictureInput picture = kRgb;
    picture.nchw = nchw;
    auto runner = make_cpu_runner(doubling_picture_model(nchw));
    const std::vector<Tensor> parts{pixels({1, 4, 6, 3}, 3), pixels({2, 4, 6, 3}, 4)};
    for (std::int64_t run_rows : {0, 3, 4}) {
      InferBatch b;
      b.inputs.push_back(parts);
      b.run_rows = run_rows;
      b.picture = picture;
      InferResult r = run_batch(*runner, std::move(b));
      ASSERT_FALSE(r.error);
      ASSERT_EQ(r.outputs.at(0).size(), 2u);
      for (std::size_t k = 0; k < parts.size(); ++k) {
        const Tensor& part = parts[k];
        Tensor want = Tensor::empty(DType::kF32, picture_model_shape(part.shape(), picture));
        normalize_picture(part.data<std::uint8_t>(), part.dim(0), 4, 6, picture, want.data<float>());
        ASSERT_EQ(r.outputs[0][k].shape(), want.shape());
        const auto got = r.outputs[0][k].to_float_vector(), floats = want.to_float_vector();
        for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], 2.f * floats[i]) << "part " << k << " at " << i;
      }
    }
    // What came in is the pixels' bytes, a quarter of the floats'.
    EXPECT_EQ(runner->stats().bytes_in, 3u * (3 * 4 * 6 * 3));
  }
}

TEST(CpuRunnerPicture, PixelsThatDoNotFitTheModelAreRefusedNamingIt) {
  auto runner = make_cpu_runner(doubling_picture_model(true));
  const auto refused = [&](Tensor part, std::optional<PictureInput> picture, const std::string& says) {
    InferBatch b;
    b.inputs.push_back({std::move(part)});
    b.picture = picture;
    try {
      runner->submit(std::move(b), [](InferResult&) { ADD_FAILURE() << "done called for a refused batch"; });
      ADD_FAILURE() << "no error for: " << says;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("nchw.onnx"), std::string::npos) << e.what();
    }
  };
  refused(pixels({1, 5, 6, 3}, 5), kRgb, "cannot feed input float[N, 3, 4, 6]: the picture is 5 tall, the input 4 (NCHW)");
  refused(pixels({1, 4, 6, 1}, 5), kRgb, "takes a picture as 8-bit pixels [rows, H, W, 3], not uint8[1, 4, 6, 1]");
  refused(Tensor::zeros(DType::kF32, {1, 4, 6, 3}), kRgb, "takes a picture as 8-bit pixels");
  refused(pixels({1, 3, 4, 6}, 5), std::nullopt, "input 'x' is uint8[1, 3, 4, 6], the graph declares");  // no picture: floats
  EXPECT_EQ(runner->in_flight(), 0);
}

TEST(CpuRunner, SlotsOutsideOneToFourAreRefused) {
  for (int slots : {0, 5}) {
    RunnerConfig config;
    config.slots = slots;
    EXPECT_THROW(make_cpu_runner(doubling_model(), config), InvalidArgument) << slots << " slots";
  }
}

TEST(SlotRing, HandsOutTheLongestFreeSlotAndWaitsWhileAllAreBusy) {
  EXPECT_THROW(SlotRing(0), InvalidArgument);
  EXPECT_THROW(SlotRing(5), InvalidArgument);
  SlotRing ring(3);
  EXPECT_EQ(ring.acquire(), 0);
  EXPECT_EQ(ring.acquire(), 1);
  ring.release(0);
  // Slot 2 has been free longer than slot 0, which was just given back.
  EXPECT_EQ(ring.acquire(), 2);
  EXPECT_EQ(ring.acquire(), 0);
  EXPECT_EQ(ring.in_flight(), 3);
  // Every slot busy: acquire waits until one is released.
  std::promise<void> started;
  auto third = std::async(std::launch::async, [&] {
    started.set_value();
    double waited = -1;
    const int slot = ring.acquire(&waited);
    EXPECT_GT(waited, 0.0);
    return slot;
  });
  started.get_future().wait();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(third.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  ring.release(1);
  EXPECT_EQ(third.get(), 1);
  // drain() returns once every slot is back.
  auto drained = std::async(std::launch::async, [&] { ring.drain(); });
  EXPECT_EQ(drained.wait_for(std::chrono::milliseconds(20)), std::future_status::timeout);
  for (int slot : {0, 1, 2}) ring.release(slot);
  drained.get();
  EXPECT_EQ(ring.in_flight(), 0);
}

// Busy time is the union of intervals: overlapping batches count once, gaps not at all.
TEST(RunnerStats, DeviceOverlapIsTheGpusSummedComputeOverItsBusyTime) {
  RunnerStats s;
  EXPECT_DOUBLE_EQ(s.device_overlap(), 1.0) << "the CPU, or nothing measured";
  s.device_compute_busy_ms = 10;
  s.device_compute_sum_ms = 10;
  EXPECT_DOUBLE_EQ(s.device_overlap(), 1.0) << "batches one after another";
  // Two models' batches of 6 ms each over [0, 6] and [2, 8], and one of 4 ms over [8, 12]: the
  // GPU was busy 12 ms for 16 ms of batches.
  s.device_compute_busy_ms = 12;
  s.device_compute_sum_ms = 16;
  EXPECT_DOUBLE_EQ(s.device_overlap(), 16.0 / 12.0);
  s.device_compute_sum_ms = 8;  // a sum under the union (clocks apart) never shrinks a batch
  EXPECT_DOUBLE_EQ(s.device_overlap(), 1.0);
}

TEST(RunnerStatsRecorder, BusyTimesAreUnionsAndOverlapIsTheHiddenCopyTime) {
  RunnerStatsRecorder rec("test", 3, 0, true);
  // Batch 1: copy in [0, 2], compute [2, 10], copy out [10, 12].
  // Batch 2: copy in [8, 10] (under batch 1's compute), compute [10, 18], copy out [18, 20].
  // Batch 3, after a gap: copy in [30, 31], compute [31, 35], copy out [35, 36].
  rec.record({.wait_ms = 1, .copy_in_start = 0, .compute_start = 2, .compute_end = 10, .copy_out_end = 12, .bytes_in = 100,
              .bytes_out = 50, .rows = 4, .run_rows = 4},
             false);
  rec.record({.copy_in_start = 8, .compute_start = 10, .compute_end = 18, .copy_out_end = 20, .rows = 3, .run_rows = 4}, false);
  rec.record({.copy_in_start = 30, .compute_start = 31, .compute_end = 35, .copy_out_end = 36, .rows = 4, .run_rows = 4}, false);
  rec.record({.wait_ms = 2}, true);
  const RunnerStats s = rec.stats();
  EXPECT_EQ(s.batches, 3);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.rows, 11);
  EXPECT_EQ(s.run_rows, 12);
  EXPECT_EQ(s.batch_rows.at(4), 2);
  ASSERT_EQ(s.run_rows_ms.size(), 1u);  // every batch ran 4 rows
  EXPECT_EQ(s.run_rows_ms.at(4).batches, 3);
  EXPECT_DOUBLE_EQ(s.run_rows_ms.at(4).ms, 12 + 12 + 6);
  EXPECT_DOUBLE_EQ(s.run_rows_ms.at(4).compute_ms, 8 + 8 + 4);
  EXPECT_DOUBLE_EQ(s.wait_ms, 3);
  EXPECT_DOUBLE_EQ(s.compute_ms, 8 + 8 + 4);
  EXPECT_DOUBLE_EQ(s.compute_busy_ms, 16 + 4);           // [2, 18] and [31, 35]
  EXPECT_DOUBLE_EQ(s.copy_in_ms + s.copy_out_ms, 2 + 2 + 2 + 2 + 1 + 1);
  EXPECT_DOUBLE_EQ(s.copy_busy_ms, 2 + 4 + 2 + 1 + 1);   // [0,2] [8,12] [18,20] [30,31] [35,36]
  EXPECT_DOUBLE_EQ(s.busy_ms, 20 + 6);                   // [0, 20] and [30, 36]
  EXPECT_DOUBLE_EQ(s.span_ms, 36);
  // Copy time under compute: [8, 10] of batch 2's copy in, [10, 12] of batch 1's copy out.
  EXPECT_DOUBLE_EQ(s.overlap(), 4.0 / 10.0);
  EXPECT_DOUBLE_EQ(s.bound_busy_ms(), 20);  // copies overlap: the busiest engine, compute
}

TEST(IntervalUnion, MergesIntervalsInAnyOrder) {
  IntervalUnion u;
  u.add(10, 20);
  u.add(0, 5);
  u.add(4, 11);   // joins both
  u.add(30, 30);  // empty
  u.add(25, 27);
  u.add(26, 26.5);
  EXPECT_DOUBLE_EQ(u.length(), 20 + 2);
  // Past the window of 256 pieces, the oldest are counted and a late interval is clipped.
  IntervalUnion many;
  for (int i = 0; i < 300; ++i) many.add(10.0 * i, 10.0 * i + 1);
  EXPECT_DOUBLE_EQ(many.length(), 300);
  many.add(0, 100);  // reaches back behind the forgotten pieces: nothing new there
  EXPECT_DOUBLE_EQ(many.length(), 300);
}

// Against the union worked out from all the intervals at once (sorted, then merged).
TEST(IntervalUnion, AgreesWithSortingAndMergingOnRandomIntervals) {
  std::mt19937 rng(17);
  std::uniform_real_distribution<double> at(0, 1000), length(0, 20);
  for (int round = 0; round < 20; ++round) {
    IntervalUnion u;
    std::vector<std::pair<double, double>> all;
    for (int i = 0; i < 150; ++i) {
      const double s = at(rng), e = s + length(rng);
      u.add(s, e);
      all.emplace_back(s, e);
    }
    std::sort(all.begin(), all.end());
    double total = 0, cs = all[0].first, ce = all[0].second;
    for (const auto& [s, e] : all) {
      if (s > ce) total += ce - cs, cs = s, ce = e;
      else ce = std::max(ce, e);
    }
    total += ce - cs;
    EXPECT_NEAR(u.length(), total, 1e-9) << "round " << round;
  }
}

TEST(GatherRows, ConcatenatesAndZeroesTheRest) {
  std::vector<float> out(12, -1.f);
  gather_rows({rows(1, 1), rows(2, 4)}, out.data(), out.size() * sizeof(float));
  EXPECT_EQ(out, (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 0, 0}));
  EXPECT_THROW(gather_rows({rows(5, 0)}, out.data(), out.size() * sizeof(float)), InvalidArgument);
}

TEST(SplitRowsAsViews, PartsViewTheirRowsAndLeaveOutThePadding) {
  const Tensor whole = rows(4, 1);  // 3 rows of parts and a padding row
  std::vector<Tensor> parts = {rows(1, 0)};  // cleared first
  split_rows_as_views(whole, {1, 2}, 4, "output 'y'", parts);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].to_float_vector(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(parts[1].to_float_vector(), (std::vector<float>{4, 5, 6, 7, 8, 9}));
  // Views of its storage, not copies.
  EXPECT_EQ(parts[0].raw_data(), whole.raw_data());
  EXPECT_EQ(static_cast<const std::byte*>(parts[1].raw_data()), static_cast<const std::byte*>(whole.raw_data()) + 3 * sizeof(float));
  EXPECT_THROWS_SAYING(split_rows_as_views(whole, {1, 2}, 5, "output 'y'", parts), InvalidArgument, "output 'y'");
}

// ---- the CPU runner's steady state (runtime/cpu_runner.cpp, runtime/executor.hpp): row counts
// planned before the first batch, a batch beyond them in prepared pieces, output parts that view
// one buffer from the batch's allocator; the recycling allocator of per-frame control blocks ----

// What an allocator handed out: each buffer's first byte and size.
struct Handed {
  std::vector<std::pair<const std::byte*, std::size_t>> buffers;
  bool holds(const Tensor& t) const {
    const auto* p = static_cast<const std::byte*>(t.raw_data());
    for (const auto& [at, bytes] : buffers) {
      if (p >= at && p + t.nbytes() <= at + bytes) return true;
    }
    return false;
  }
};

TensorAllocator recording(Handed& handed) {
  return [&handed](DType dtype, const Shape& shape) {
    Tensor t = Tensor::empty(dtype, shape);
    handed.buffers.emplace_back(static_cast<const std::byte*>(t.raw_data()), t.nbytes());
    return t;
  };
}

void expect_doubled(const Tensor& y, std::int64_t want_rows, float first) {
  ASSERT_EQ(y.shape(), (Shape{want_rows, 3}));
  const auto v = y.to_float_vector();
  for (std::size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], 2.f * (first + static_cast<float>(i))) << "element " << i;
}

TEST(CpuRunnerSteadyState, ABatchBeyondThePreparedRowCountsRunsInPreparedPiecesWithTheResultsOfOneRun) {
  auto runner = make_cpu_runner(doubling_model());
  runner->prepare({Shape{1, 3}});
  runner->prepare({Shape{2, 3}});
  // 2 + 3 rows: pieces of 2, 2 and 1 rows; the second frame's rows straddle two pieces.
  for (int round = 0; round < 2; ++round) {
    Handed handed;
    InferBatch b;
    b.inputs.push_back({rows(2, 0), rows(3, 100)});
    b.allocate = recording(handed);
    InferResult r = run_batch(*runner, std::move(b));
    ASSERT_FALSE(r.error);
    ASSERT_EQ(r.outputs.at(0).size(), 2u);
    expect_doubled(r.outputs[0][0], 2, 0);
    expect_doubled(r.outputs[0][1], 3, 100);
  }
  const RunnerStats stats = runner->stats();
  EXPECT_EQ(stats.batches, 2);
  EXPECT_EQ(stats.rows, 10);
  EXPECT_EQ(stats.batch_rows.at(5), 2);  // counted as the batches they are, not as their pieces
}

TEST(CpuRunnerSteadyState, PreparingARowCountThatDoesNotFitTheModelThrowsNamingIt) {
  auto runner = make_cpu_runner(doubling_model());
  try {
    runner->prepare({Shape{2, 4}});
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'x'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(runner->prepare({}), InvalidArgument);
}

TEST(CpuRunnerSteadyState, OutputPartsAreViewsOfOneBufferFromTheBatchAllocatorOncePlanned) {
  auto runner = make_cpu_runner(doubling_model());
  runner->prepare({Shape{6, 3}});  // the plan of 6 rows: the batch below runs planned at once
  Handed handed;
  InferBatch b;
  b.inputs.push_back({rows(1, 0), rows(2, 10), rows(3, 20)});
  b.allocate = recording(handed);
  InferResult r = run_batch(*runner, std::move(b));
  ASSERT_FALSE(r.error);
  ASSERT_EQ(r.outputs.at(0).size(), 3u);
  expect_doubled(r.outputs[0][0], 1, 0);
  expect_doubled(r.outputs[0][1], 2, 10);
  expect_doubled(r.outputs[0][2], 3, 20);
  // Two buffers: the staged input (the parts gathered) and the output, whose rows the parts view.
  ASSERT_EQ(handed.buffers.size(), 2u);
  const auto* output = handed.buffers[1].first;
  EXPECT_EQ(handed.buffers[1].second, 6u * 3u * sizeof(float));
  for (std::size_t k = 0; k < 3; ++k) EXPECT_TRUE(handed.holds(r.outputs[0][k])) << "part " << k;
  EXPECT_EQ(r.outputs[0][0].raw_data(), output);
  EXPECT_EQ(static_cast<const std::byte*>(r.outputs[0][2].raw_data()), output + 3 * 3 * sizeof(float));
}

TEST(CpuRunnerSteadyState, TheBatchComesBackWithItsResultItsPartsDroppedAndItsRoomKept) {
  auto runner = make_cpu_runner(doubling_model());
  InferBatch b;
  b.inputs.resize(1);
  b.inputs[0].reserve(4);
  b.inputs[0].push_back(rows(2, 0));
  const Tensor* room = b.inputs[0].data();
  InferResult r = run_batch(*runner, std::move(b));
  ASSERT_FALSE(r.error);
  expect_doubled(r.outputs.at(0).at(0), 2, 0);
  // The submitter fills the same vectors again: nothing of the batch is held, nothing reallocated.
  ASSERT_EQ(r.batch.inputs.size(), 1u);
  EXPECT_TRUE(r.batch.inputs[0].empty());
  EXPECT_EQ(r.batch.inputs[0].data(), room);
  EXPECT_EQ(r.batch.inputs[0].capacity(), 4u);
}

TEST(ExecutorRunInto, GraphOutputsComeFromTheCallersAllocatorOnceTheSignatureIsPlanned) {
  Executor e(doubling_model());
  Handed handed;
  const TensorAllocator allocate = recording(handed);
  std::vector<Tensor> outputs;
  const std::vector<Tensor> inputs{rows(4, 1)};
  e.run_into(inputs, outputs, &allocate);  // records the plan: outputs on the heap
  ASSERT_EQ(outputs.size(), 1u);
  expect_doubled(outputs[0], 4, 1);
  EXPECT_TRUE(handed.buffers.empty());
  for (int run = 0; run < 3; ++run) {
    e.run_into(inputs, outputs, &allocate);
    ASSERT_EQ(outputs.size(), 1u);  // cleared and refilled, not appended to
    expect_doubled(outputs[0], 4, 1);
    ASSERT_EQ(handed.buffers.size(), static_cast<std::size_t>(run + 1));
    EXPECT_EQ(outputs[0].raw_data(), handed.buffers.back().first);
  }
  EXPECT_EQ(e.planned_signatures(), 1u);
}

TEST(ExecutorRunInto, RunByNameTakesTheCallersAllocatorToo) {
  Executor e(doubling_model());
  Handed handed;
  const TensorAllocator allocate = recording(handed);
  const std::map<std::string, Tensor> feeds{{"x", rows(4, 1)}};
  expect_doubled(e.run(feeds, &allocate).at(0), 4, 1);  // records the plan: outputs on the heap
  EXPECT_TRUE(handed.buffers.empty());
  const std::vector<Tensor> out = e.run(feeds, &allocate);
  expect_doubled(out.at(0), 4, 1);
  ASSERT_EQ(handed.buffers.size(), 1u);
  EXPECT_EQ(out[0].raw_data(), handed.buffers.back().first);
  expect_doubled(e.run(feeds).at(0), 4, 1);  // without one: the heap
  EXPECT_EQ(handed.buffers.size(), 1u);
}

TEST(ExecutorRunInto, InputsOutOfOrderOrMissingAreRefusedNamingTheModelInput) {
  Executor e(doubling_model());
  std::vector<Tensor> outputs;
  EXPECT_THROW(e.run_into(std::vector<Tensor>{}, outputs), InvalidArgument);
  try {
    e.run_into(std::vector<Tensor>{rows(2, 0).reshaped({3, 2})}, outputs);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("input 'x'"), std::string::npos) << e.what();
  }
}

struct Payload {
  std::int64_t a = 0, b = 0;
};

TEST(RecyclingAllocator, AFreedBlockIsHandedOutAgainAndArraysGoToTheHeap) {
  auto first = std::allocate_shared<Payload>(RecyclingAllocator<Payload>(), Payload{1, 2});
  const void* block = first.get();
  first.reset();
  auto second = std::allocate_shared<Payload>(RecyclingAllocator<Payload>(), Payload{3, 4});
  EXPECT_EQ(static_cast<const void*>(second.get()), block);  // the same control block, recycled
  EXPECT_EQ(second->a, 3);
  auto third = std::allocate_shared<Payload>(RecyclingAllocator<Payload>(), Payload{5, 6});
  EXPECT_NE(static_cast<const void*>(third.get()), block);  // the block is in use: a new one
  RecyclingAllocator<Payload> arrays;
  Payload* many = arrays.allocate(4);
  arrays.deallocate(many, 4);
}

TEST(RecyclingAllocator, AnAdoptedTensorsStorageIsRecycledAndReleasedOnce) {
  int released = 0;
  const auto release = [&released](void*) { ++released; };
  float data[4] = {};
  const void* storage = nullptr;
  {
    Tensor t = Tensor::adopt(data, sizeof data, Device::kCpu, DType::kF32, {4}, release);
    Tensor copy = t;  // shares the storage: released once, with the last handle
    EXPECT_EQ(copy.raw_data(), data);
  }
  EXPECT_EQ(released, 1);
  {
    Tensor t = Tensor::adopt(data, sizeof data, Device::kCpu, DType::kF32, {4}, release);
    storage = t.raw_data();
  }
  EXPECT_EQ(released, 2);
  EXPECT_EQ(storage, data);
}

}  // namespace
}  // namespace redwood
