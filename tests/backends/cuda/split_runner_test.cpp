// A model with an op the GPU has no kernel for (LRN) runs split: the partitioner places what the
// GPU supports there and the rest on the CPU (runtime/partition.hpp), the split runner runs the
// segments on their devices (runtime/split_runner.hpp), and the outputs match the CPU's. The
// support check is host-only, so the placement tests run without a GPU too.

#include "core/model_runner.hpp"
#include "core/onnx/onnx_import.hpp"
#include "gpu_test_support.hpp"
#include "runtime/cpu_runner.hpp"
#include "runtime/device_segment_time.hpp"
#include "runtime/partition.hpp"
#include "runtime/partition_profile.hpp"
#include "runtime/placed_runner.hpp"
#include "runtime/split_runner.hpp"
#include "support/onnx_builder.hpp"

#include <fmt/format.h>

#include <future>

namespace redwood::runtime {
namespace {

// x [N,4,16,16] -> Conv -> LRN (the GPU has no LRN kernel) -> Conv -> y
std::shared_ptr<const Graph> lrn_model() {
  const auto dir = redwood::testing::temp_dir("split-gpu");
  redwood::testing::OnnxBuilder b(13);
  b.input("x", onnx::TensorProto::FLOAT, {-1, 4, 16, 16}, {"N"});
  b.initializer("w1", redwood::testing::random_tensor(DType::kF32, {8, 4, 3, 3}, -0.5, 0.5, 1));
  b.initializer("w2", redwood::testing::random_tensor(DType::kF32, {8, 8, 3, 3}, -0.5, 0.5, 2));
  auto& c1 = b.node("Conv", {"x", "w1"}, {"c1"}, "conv1");
  redwood::testing::OnnxBuilder::set_attr(c1, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  auto& lrn = b.node("LRN", {"c1"}, {"n"}, "lrn");
  redwood::testing::OnnxBuilder::set_attr(lrn, "size", std::int64_t{3});
  auto& c2 = b.node("Conv", {"n", "w2"}, {"y"}, "conv2");
  redwood::testing::OnnxBuilder::set_attr(c2, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  b.output("y", onnx::TensorProto::FLOAT, {-1, 8, 16, 16}, {"N"});
  b.save(dir / "lrn.onnx");
  return load_onnx(dir / "lrn.onnx");
}

std::vector<Tensor> run(ModelRunner& runner, const Tensor& x) {
  std::promise<InferResult> promise;
  auto future = promise.get_future();
  InferBatch batch;
  batch.inputs = {{x}};
  runner.submit(std::move(batch), [&](InferResult& r) { promise.set_value(std::move(r)); });
  InferResult r = future.get();
  if (r.error) std::rethrow_exception(r.error);
  return {r.outputs[0][0]};
}

PartitionOptions prefer_gpu() {
  PartitionOptions o;
  o.devices = {"cpu", "cuda"};
  o.prefer = "cuda";
  return o;
}

TEST(SplitPlacement, TheGpuGetsWhatItHasKernelsForAndTheHostTheLrn) {
  // Host-only: the profiles are given, so no GPU is needed to place.
  PartitionOptions o = prefer_gpu();
  DeviceProfile cpu, gpu;
  cpu.device = "cpu";
  gpu.device = "cuda:0";
  cpu.peak_gflops["fp32"] = 100;
  gpu.peak_gflops["fp32"] = 10000;
  cpu.memory_gbps = 10;
  gpu.memory_gbps = 1000;
  gpu.h2d_pageable_gbps = gpu.d2h_pageable_gbps = 10;
  o.profiles = {cpu, gpu};
  const Partition p = partition_model(lrn_model(), {{2, 4, 16, 16}}, o);
  ASSERT_EQ(p.placement.device.size(), 3u);
  EXPECT_EQ(p.placement.device, (std::vector<int>{1, 0, 1}));
  EXPECT_NE(p.why_not[1][1].find("LRN"), std::string::npos) << p.why_not[1][1];
  ASSERT_EQ(p.segments.size(), 3u);
  ASSERT_TRUE(p.naive.has_value());
  EXPECT_EQ(p.naive->device, (std::vector<int>{1, 0, 0}));
}

TEST(SplitRunner, AModelWithAnOpTheGpuLacksRunsSplitAndMatchesTheCpu) {
  RW_SKIP_WITHOUT_GPU();
  const auto graph = lrn_model();
  RunnerConfig config;
  config.slots = 2;
  auto placed = make_placed_runner(graph, prefer_gpu(), config, "lrn");
  auto cpu = make_cpu_runner(graph, config);
  for (std::int64_t rows : {1, 3}) {
    const Tensor x = redwood::testing::random_tensor(DType::kF32, {rows, 4, 16, 16}, -1, 1, 7 + static_cast<int>(rows));
    const Tensor got = run(*placed, x)[0], want = run(*cpu, x)[0];
    ASSERT_EQ(got.shape(), want.shape());
    EXPECT_LT(redwood::testing::relative_l2(got, want), cuda::testing::tolerance(cuda::Precision::kFp32));
  }
  const Partition* p = placed_partition(*placed);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->segments.size(), 3u);
  EXPECT_NE(placed->description().find("split in 3 segments"), std::string::npos) << placed->description();
  const auto segments = placed->segment_stats();
  ASSERT_EQ(segments.size(), 3u);
  EXPECT_GE(segments[0].device, 0);   // a GPU's
  EXPECT_EQ(segments[1].device, -1);  // the CPU's
  // The run's summary: each segment's compute a batch beside its prediction where it was placed.
  const auto predicted = placed_segment_predictions(*placed);
  ASSERT_TRUE(predicted.has_value());
  ASSERT_EQ(predicted->ms.size(), 3u);
  for (std::size_t k = 0; k < segments.size(); ++k) {
    EXPECT_NE(segments[k].description.find(fmt::format(" ms a batch, predicted {:.3f} at {}", predicted->ms[k], predicted->at)),
              std::string::npos)
        << segments[k].description;
  }
}

TEST(SplitPlacement, EachGpuSegmentOfTheSplitIsTimedOnTheGpuWhilePlanning) {
  RW_SKIP_WITHOUT_GPU();
  ASSERT_TRUE(can_time_on("cuda"));
  const Partition p = partition_model(lrn_model(), {{2, 4, 16, 16}}, prefer_gpu());  // the analysis's times in use
  ASSERT_EQ(p.segments.size(), 3u);
  const std::vector<SegmentTimes> predicted = predict_segments(p);
  for (std::size_t k = 0; k < p.segments.size(); ++k) {
    EXPECT_TRUE(predicted[k].timed_alone) << "segment " << k;
    if (p.segments[k].device == 0) continue;
    const auto timed = p.device_times.find(p.cut_key(p.segments[k]));
    ASSERT_NE(timed, p.device_times.end()) << "segment " << k;
    EXPECT_GT(timed->second, 0.0);
    EXPECT_DOUBLE_EQ(predicted[k].predicted_ms, timed->second);
  }
  // The split runs, and its GPU segments' runners record compute as the timing read it.
  const PartitionTimes measured = measure_partition(p, RunnerConfig{}, 3, 1);
  for (std::size_t k = 0; k < p.segments.size(); ++k) EXPECT_GT(measured.segments[k].measured_ms, 0.0) << "segment " << k;
}

}  // namespace
}  // namespace redwood::runtime
