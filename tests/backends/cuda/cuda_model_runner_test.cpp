// The "cuda" model runner, as the infer stage gets it for `device: cuda` (through the device
// runner registry, core/model_runner.hpp): registered by the whole-archive link, reports CUDA's
// reason where no device is usable, and on a GPU runs models like the CPU runner does, through
// its ring of slots: batches of several parts and sizes, padding rows, parts in pinned and in
// pageable memory, picture batches normalized on the GPU, many batches in flight completing in
// order, and errors that leave it usable.
// The pipeline side (config keys, the no-GPU error at load) is tests/pipelines/model_device_test.cpp.

#include "backends/cuda/device_memory.hpp"
#include "core/error.hpp"
#include "core/model_runner.hpp"
#include "core/onnx/onnx_import.hpp"
#include "gpu_test_support.hpp"
#include "runtime/cpu_runner.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <future>
#include <thread>

namespace redwood::cuda {
namespace {

std::unique_ptr<ModelRunner> cuda_runner(std::shared_ptr<const Graph> graph, const std::string& precision, int slots = 3,
                                         bool blocking_completion = true) {
  RunnerConfig config;
  config.precision = precision;
  config.slots = slots;
  if (!blocking_completion) config.device_options["blocking_completion"] = "off";
  return device_runner_registry().at("cuda").make(std::move(graph), config);
}

// y = relu(conv3x3(x) + b) over [N, C, H, W] -> [N, 8, H, W]: small, batched, a real kernel.
std::shared_ptr<const Graph> small_conv_model(std::int64_t channels = 4, std::int64_t h = 16, std::int64_t w = 16) {
  const auto dir = redwood::testing::temp_dir("cuda-runner");
  redwood::testing::OnnxBuilder b(13);
  b.input("x", onnx::TensorProto::FLOAT, {-1, channels, h, w}, {"N"});
  b.initializer("w", redwood::testing::random_tensor(DType::kF32, {8, channels, 3, 3}, -0.5, 0.5, 7));
  b.initializer("b", redwood::testing::random_tensor(DType::kF32, {8}, -0.5, 0.5, 8));
  auto& conv = b.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
  redwood::testing::OnnxBuilder::set_attr(conv, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  b.node("Relu", {"c"}, {"y"}, "relu");
  b.output("y", onnx::TensorProto::FLOAT, {-1, 8, h, w}, {"N"});
  b.save(dir / "conv.onnx");
  return load_onnx(dir / "conv.onnx");
}

// A pinned host tensor from the pool the frames' buffers come from while a model runs on a GPU.
Tensor pinned_tensor(const Tensor& like) {
  memory::MemoryResource& pinned = pinned_upstream();
  const std::size_t bytes = std::max<std::size_t>(like.nbytes(), 1);
  void* p = pinned.allocate(bytes);
  std::memcpy(p, like.raw_data(), like.nbytes());
  std::shared_ptr<Storage> storage(new Storage(p, like.nbytes(), Device::kCpu, [](void*) {}), [&pinned, bytes](Storage* s) {
    pinned.deallocate(s->data(), bytes);
    delete s;
  });
  return Tensor::from_storage(std::move(storage), like.dtype(), like.shape());
}

InferResult run_batch(ModelRunner& runner, InferBatch batch) {
  std::promise<InferResult> promise;
  auto future = promise.get_future();
  runner.submit(std::move(batch), [&promise](InferResult& r) { promise.set_value(std::move(r)); });
  return future.get();
}

TEST(CudaModelRunner, IsRegisteredAndAgreesWithTheProbe) {
  const auto& registry = device_runner_registry();
  ASSERT_TRUE(registry.count("cuda")) << "backend_cuda linked without redwood_link_registered()";
  const std::string why = registry.at("cuda").unavailable();
  EXPECT_EQ(why.empty(), testing::gpu_unavailable().empty()) << why;
}

TEST(CudaModelRunner, RunsTheDetectorLikeTheCpuRunner) {
  RW_SKIP_WITHOUT_GPU();
  const auto file = redwood::testing::assets_dir() / "models" / "ch_PP-OCRv4_det_infer.onnx";
  if (!std::filesystem::exists(file)) GTEST_SKIP() << file.string() << " is missing (scripts/setup.sh fetches it)";
  std::shared_ptr<const Graph> graph = load_onnx(file);
  auto gpu = cuda_runner(graph, "fp32");
  auto cpu = make_cpu_runner(graph);
  EXPECT_NE(gpu->description().find("fp32"), std::string::npos) << gpu->description();
  const std::string input = graph->inputs.at(0).name;
  for (std::int64_t batch : {1, 2, 1}) {  // the infer stage's batches vary; the third replays the first plan
    const Tensor x = redwood::testing::random_tensor(DType::kF32, {batch, 3, 160, 224}, -1, 1, 20 + static_cast<std::uint32_t>(batch));
    const auto want = cpu->run({{input, x}});
    const auto got = gpu->run({{input, x}});
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t o = 0; o < want.size(); ++o) {
      EXPECT_LE(testing::relative_l2(got[o], want[o]), 1e-4) << "batch " << batch << ", output " << o;
    }
  }
  RunnerConfig bad;
  bad.precision = "fp8";
  EXPECT_THROW(device_runner_registry().at("cuda").make(graph, bad), InvalidArgument);
}

// A runner off the GPU's clock (RunnerConfig::device_clock: the planner's segment timing while a
// pipeline is built) counts its batches in its own stats, not in the GPU's busy time that every
// runner on the GPU reports: that is the pipeline's work alone.
TEST(CudaModelRunner, ARunnerOffTheDevicesClockLeavesItsBusyTimeToTheOthers) {
  RW_SKIP_WITHOUT_GPU();
  const auto graph = small_conv_model();
  auto on = cuda_runner(graph, "fp32", 1);
  RunnerConfig config;
  config.slots = 1;
  config.device_clock = false;
  auto off = device_runner_registry().at("cuda").make(graph, config);
  const Tensor x = redwood::testing::random_tensor(DType::kF32, {2, 4, 16, 16}, -1, 1, 4);
  on->run({{"x", x}});
  const double before = on->stats().device_compute_busy_ms;
  ASSERT_GT(before, 0.0);
  for (int i = 0; i < 5; ++i) off->run({{"x", x}});
  EXPECT_EQ(off->stats().batches, 5);
  EXPECT_GT(off->stats().compute_ms, 0.0);
  EXPECT_DOUBLE_EQ(on->stats().device_compute_busy_ms, before);
  EXPECT_DOUBLE_EQ(off->stats().device_compute_busy_ms, before);
  on->run({{"x", x}});
  EXPECT_GT(on->stats().device_compute_busy_ms, before);
}

// Parts of a batch go to their rows and come back split the same way, whether they sit in pinned
// memory (copied straight) or pageable memory (through the slot's staging), and padding rows
// change nothing.
TEST(CudaModelRunner, PartsPaddingAndPinnedOrPageableAgreeWithTheCpu) {
  RW_SKIP_WITHOUT_GPU();
  const auto graph = small_conv_model();
  auto gpu = cuda_runner(graph, "fp32");
  auto cpu = make_cpu_runner(graph);
  const std::vector<Tensor> parts{redwood::testing::random_tensor(DType::kF32, {1, 4, 16, 16}, -1, 1, 1),
                                  redwood::testing::random_tensor(DType::kF32, {3, 4, 16, 16}, -1, 1, 2),
                                  redwood::testing::random_tensor(DType::kF32, {2, 4, 16, 16}, -1, 1, 3)};
  for (bool pinned : {false, true}) {
    for (std::int64_t run_rows : {0, 8}) {
      InferBatch batch;
      batch.inputs.emplace_back();
      for (const Tensor& p : parts) batch.inputs[0].push_back(pinned ? pinned_tensor(p) : p);
      batch.run_rows = run_rows;
      if (pinned) batch.allocate = [](DType dtype, const Shape& shape) { return pinned_tensor(Tensor::zeros(dtype, shape)); };
      InferResult r = run_batch(*gpu, std::move(batch));
      ASSERT_FALSE(r.error) << "pinned " << pinned;
      ASSERT_EQ(r.outputs.size(), 1u);
      ASSERT_EQ(r.outputs[0].size(), parts.size());
      for (std::size_t k = 0; k < parts.size(); ++k) {
        const Tensor want = cpu->run({{"x", parts[k]}}).at(0);
        EXPECT_EQ(r.outputs[0][k].shape(), want.shape());
        EXPECT_LE(testing::relative_l2(r.outputs[0][k], want), 1e-4) << "part " << k << " pinned " << pinned << " run_rows " << run_rows;
      }
    }
  }
  const RunnerStats stats = gpu->stats();
  EXPECT_EQ(stats.batches, 4);
  EXPECT_EQ(stats.rows, 24);
  EXPECT_EQ(stats.run_rows, 6 + 8 + 6 + 8);
  EXPECT_EQ(stats.batch_rows.at(6), 4);
  EXPECT_GT(stats.bytes_in, 0u);
  EXPECT_GT(stats.pinned_h2d_gbps, 0);
  EXPECT_TRUE(stats.copies_overlap);
}

// An output's parts come back as rows of a few tensors of at most 8 MiB, one copy each: with
// 3 MiB output rows, parts of 1, 1, 2, 1 rows make the groups {1, 1}, {2}, {1}; every part holds
// the values the CPU runner gives for it alone.
TEST(CudaModelRunner, OutputPartsShareTensorsOfAFewMebibytes) {
  RW_SKIP_WITHOUT_GPU();
  const auto graph = small_conv_model(1, 256, 384);  // an output row: 8 x 256 x 384 floats, 3 MiB
  auto gpu = cuda_runner(graph, "fp32");
  auto cpu = make_cpu_runner(graph);
  std::vector<Tensor> parts;
  for (std::int64_t rows : {1, 1, 2, 1}) {
    parts.push_back(redwood::testing::random_tensor(DType::kF32, {rows, 1, 256, 384}, -1, 1, 40 + static_cast<std::uint32_t>(parts.size())));
  }
  for (bool pinned : {false, true}) {
    InferBatch batch;
    batch.inputs.emplace_back();
    for (const Tensor& p : parts) batch.inputs[0].push_back(pinned ? pinned_tensor(p) : p);
    if (pinned) batch.allocate = [](DType dtype, const Shape& shape) { return pinned_tensor(Tensor::zeros(dtype, shape)); };
    InferResult r = run_batch(*gpu, std::move(batch));
    ASSERT_FALSE(r.error) << "pinned " << pinned;
    const auto& out = r.outputs.at(0);
    ASSERT_EQ(out.size(), parts.size());
    const std::size_t row_bytes = 8 * 256 * 384 * sizeof(float);
    EXPECT_EQ(out[1].raw_data(), static_cast<std::byte*>(out[0].raw_data()) + row_bytes) << "parts 0 and 1 share a tensor";
    for (std::size_t k = 0; k < parts.size(); ++k) {
      const Tensor want = cpu->run({{"x", parts[k]}}).at(0);
      EXPECT_EQ(out[k].shape(), want.shape());
      EXPECT_LE(testing::relative_l2(out[k], want), 1e-4) << "part " << k << " pinned " << pinned;
    }
  }
}

// y = 2x over [N, 20, 28, 3]: an NHWC picture input, the output shows it exactly.
std::shared_ptr<const Graph> picture_nhwc_model() {
  const auto dir = redwood::testing::temp_dir("cuda-runner");
  redwood::testing::OnnxBuilder b(13);
  b.input("x", onnx::TensorProto::FLOAT, {-1, 20, 28, 3}, {"N"});
  b.initializer("two", Tensor::from_vector<float>({1}, {2.f}));
  b.node("Mul", {"x", "two"}, {"y"}, "mul");
  b.output("y", onnx::TensorProto::FLOAT, {-1, 20, 28, 3}, {"N"});
  b.save(dir / "picture_nhwc.onnx");
  return load_onnx(dir / "picture_nhwc.onnx");
}

// Picture batches (8-bit pixels the runner normalizes on the GPU) give what the CPU runner gives
// for the same batch: several parts, padding rows, pinned and pageable pixels, NCHW and NHWC, at
// fp32 and at fp16 (whose graph input stays fp32); only the pixels' bytes are copied in.
TEST(CudaModelRunner, PictureBatchesGiveWhatTheCpuRunnerGives) {
  RW_SKIP_WITHOUT_GPU();
  const std::vector<Tensor> parts{redwood::testing::random_tensor(DType::kU8, {1, 20, 28, 3}, 0, 255, 31),
                                  redwood::testing::random_tensor(DType::kU8, {3, 20, 28, 3}, 0, 255, 32),
                                  redwood::testing::random_tensor(DType::kU8, {2, 20, 28, 3}, 0, 255, 33)};
  struct Case {
    std::shared_ptr<const Graph> graph;
    bool nchw;
    std::string precision;
    double bound;
  };
  for (const Case& k : {Case{small_conv_model(3, 20, 28), true, "fp32", 1e-4}, Case{small_conv_model(3, 20, 28), true, "fp16", 1e-2},
                        Case{picture_nhwc_model(), false, "fp32", 0}}) {
    const PictureInput picture =
        PictureInput::from_mean_std(1.f / 255, {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}, 3, k.nchw);
    auto gpu = cuda_runner(k.graph, k.precision);
    auto cpu = make_cpu_runner(k.graph);
    for (bool pinned : {false, true}) {
      for (std::int64_t run_rows : {0, 8}) {
        const auto batch = [&](bool on_gpu) {
          InferBatch b;
          b.inputs.emplace_back();
          for (const Tensor& p : parts) b.inputs[0].push_back(on_gpu && pinned ? pinned_tensor(p) : p);
          b.run_rows = run_rows;
          b.picture = picture;
          return b;
        };
        InferResult want = run_batch(*cpu, batch(false));
        InferResult got = run_batch(*gpu, batch(true));
        ASSERT_FALSE(want.error);
        ASSERT_FALSE(got.error) << k.precision << " pinned " << pinned;
        ASSERT_EQ(got.outputs.at(0).size(), parts.size());
        for (std::size_t i = 0; i < parts.size(); ++i) {
          const std::string what = fmt::format("{} {}, part {}, pinned {}, run_rows {}", k.nchw ? "NCHW" : "NHWC",
                                               k.precision, i, pinned, run_rows);
          ASSERT_EQ(got.outputs[0][i].shape(), want.outputs[0][i].shape()) << what;
          if (k.bound == 0) {
            EXPECT_EQ(got.outputs[0][i].to_float_vector(), want.outputs[0][i].to_float_vector()) << what;
          } else {
            EXPECT_LE(testing::relative_l2(got.outputs[0][i], want.outputs[0][i]), k.bound) << what;
          }
        }
      }
    }
    const RunnerStats stats = gpu->stats();
    EXPECT_EQ(stats.batches, 4);
    EXPECT_EQ(stats.bytes_in, 4u * 6 * 20 * 28 * 3);  // the pixels, a quarter of the floats
  }
}

// Many batches from two threads with 1 to 4 slots: never more in flight than slots, every batch
// completes once, in submission order per thread, with its own values.
TEST(CudaModelRunner, ManyBatchesInFlightCompleteInOrderWithTheirOwnValues) {
  RW_SKIP_WITHOUT_GPU();
  const auto graph = small_conv_model();
  auto cpu = make_cpu_runner(graph);
  std::vector<Tensor> inputs, wants;
  for (std::uint32_t i = 0; i < 24; ++i) {
    inputs.push_back(redwood::testing::random_tensor(DType::kF32, {1 + i % 3, 4, 16, 16}, -1, 1, 100 + i));
    wants.push_back(cpu->run({{"x", inputs.back()}}).at(0));
  }
  // Both ways of waiting for a batch's end: asleep on its event, and polling it.
  for (int run = 0; run < 8; ++run) {
    const int slots = 1 + run % 4;
    const bool blocking = run < 4;
    SCOPED_TRACE(blocking ? "blocking completion" : "polling completion");
    auto gpu = cuda_runner(graph, "fp32", slots, blocking);
    EXPECT_EQ(gpu->description().find("blocking_completion=off") == std::string::npos, blocking) << gpu->description();
    std::atomic<int> completed{0}, most_in_flight{0}, bad{0};
    std::vector<int> order[2];
    std::mutex order_mutex;
    std::atomic<int> thrown{0};
    auto submit_every_other = [&](int t) {
      for (std::size_t i = static_cast<std::size_t>(t); i < inputs.size(); i += 2) {
        InferBatch b;
        b.inputs.push_back({inputs[i]});
        b.run_rows = 4;
        gpu->submit(std::move(b), [&, i, t](InferResult& r) {
          if (r.error || testing::relative_l2(r.outputs.at(0).at(0), wants[i]) > 1e-4) ++bad;
          {
            std::lock_guard lock(order_mutex);
            order[t].push_back(static_cast<int>(i));
          }
          ++completed;
        });
        most_in_flight = std::max(most_in_flight.load(), gpu->in_flight());
      }
    };
    auto submitter = [&](int t) {
      try {
        submit_every_other(t);
      } catch (const std::exception& e) {
        ++thrown;  // a test thread must not end the process with terminate()
        std::fprintf(stderr, "submit threw: %s\n", e.what());
      }
    };
    std::thread a(submitter, 0), b(submitter, 1);
    a.join();
    b.join();
    gpu->drain();
    EXPECT_EQ(thrown.load(), 0) << slots << " slot(s)";
    EXPECT_EQ(completed.load(), 24) << slots << " slot(s)";
    EXPECT_EQ(bad.load(), 0) << slots << " slot(s)";
    EXPECT_LE(most_in_flight.load(), slots);
    for (const auto& o : order) EXPECT_TRUE(std::is_sorted(o.begin(), o.end())) << slots << " slot(s)";
    EXPECT_EQ(gpu->in_flight(), 0);
  }
}

// A batch the model cannot take fails in submit, naming what differs, and the runner goes on.
TEST(CudaModelRunner, ABadBatchFailsInSubmitAndTheRunnerGoesOn) {
  RW_SKIP_WITHOUT_GPU();
  const auto graph = small_conv_model();
  auto gpu = cuda_runner(graph, "fp16", 2);
  InferBatch wrong;
  wrong.inputs.push_back({Tensor::zeros(DType::kI64, {1, 4, 16, 16})});
  try {
    gpu->submit(std::move(wrong), [](InferResult&) { ADD_FAILURE() << "done called for a refused batch"; });
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("input 'x'"), std::string::npos) << e.what();
  }
  const Tensor x = redwood::testing::random_tensor(DType::kF32, {2, 4, 16, 16}, -1, 1, 9);
  EXPECT_EQ(gpu->run({{"x", x}}).at(0).shape(), (Shape{2, 8, 16, 16}));
  EXPECT_EQ(gpu->in_flight(), 0);
}

}  // namespace
}  // namespace redwood::cuda
