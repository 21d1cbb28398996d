// A model's `device:`, `precision:` and `cuda:` keys (docs/pipelines.md, models): values checked at their
// file:line:column, and `device: cuda` where no GPU is usable (this machine, CI) fails at load
// naming the model, the place and CUDA's reason (or "built without CUDA"), while `device: auto`
// falls back to the CPU. The GPU side (the "cuda" runner running a model) is in
// tests/backends/cuda/cuda_model_runner_test.cpp: pipeline binaries link OpenCV and do not go
// to the GPU host.

#include "core/model_runner.hpp"
#include "pipelines/pipeline.hpp"
#include "pipelines/pipeline_text.hpp"

#include <gtest/gtest.h>

#include <filesystem>

namespace redwood {
namespace {

using testing::pipeline_text;

// Line 9 holds the model's extra key; its value starts at column 13 ("    device: ").
std::string faces(const std::string& model_key) {
  return R"(version: 1
sources:
  - name: a
    type: synthetic
    frames: 2
models:
  face:
    path: models/face_detection_front_128x128_barracuda.onnx
    )" + model_key + R"(
stages:
  - name: pre
    type: preprocess
    model: face
    output: face_in
    scale: 0.00784314
    mean: [1, 1, 1]
  - name: face
    type: infer
    model: face
    input: face_in
)";
}

std::string where(int line, int column) {
  return (testing::assets_dir() / "test.yaml").string() + ":" + std::to_string(line) + ":" + std::to_string(column) + ":";
}

std::string load_error(const std::string& yaml) {
  try {
    Pipeline p(pipeline_text(yaml));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

/// Why `device: cuda` cannot work in this process ("" when a GPU is usable).
std::string cuda_reason() {
  const auto& registry = device_runner_registry();
  const auto it = registry.find("cuda");
  return it == registry.end() ? "this Redwood was built without CUDA" : it->second.unavailable();
}

class ModelDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto model = testing::assets_dir() / "models" / "face_detection_front_128x128_barracuda.onnx";
    if (!std::filesystem::exists(model)) GTEST_SKIP() << model.string() << " is missing (scripts/setup.sh fetches it)";
  }
};

TEST_F(ModelDevice, CpuAndFp32AreTheDefaultsAndMaySayItAloud) {
  Pipeline p(pipeline_text(faces("device: cpu")));
  Pipeline q(pipeline_text(faces("precision: fp32")));
  EXPECT_EQ(p.stream_names(), std::vector<std::string>{"a"});
}

TEST_F(ModelDevice, UnknownDeviceNamesThePlaceAndTheChoices) {
  const std::string e = load_error(faces("device: gpu"));
  EXPECT_NE(e.find(where(9, 13)), std::string::npos) << e;
  EXPECT_NE(e.find("model 'face'"), std::string::npos) << e;
  EXPECT_NE(e.find("'gpu' is not one of cpu, cuda, auto"), std::string::npos) << e;
}

TEST_F(ModelDevice, UnknownPrecisionNamesThePlaceAndTheChoices) {
  const std::string e = load_error(faces("device: cuda\n    precision: fp8"));
  EXPECT_NE(e.find(where(10, 16)), std::string::npos) << e;
  EXPECT_NE(e.find("'fp8' is not one of fp32, tf32, fp16, bf16"), std::string::npos) << e;
}

TEST_F(ModelDevice, ReducedPrecisionNeedsTheGpu) {
  const std::string e = load_error(faces("precision: fp16"));
  EXPECT_NE(e.find(where(9, 16)), std::string::npos) << e;
  EXPECT_NE(e.find("'fp16' needs device cuda or auto"), std::string::npos) << e;
}

TEST_F(ModelDevice, CudaWithoutAUsableGpuFailsAtLoadWithCudasReason) {
  const std::string reason = cuda_reason();
  if (reason.empty()) GTEST_SKIP() << "a CUDA device is usable here; the GPU side is redwood_gpu_tests' CudaModelRunner";
  const std::string e = load_error(faces("device: cuda"));
  EXPECT_NE(e.find(where(9, 13)), std::string::npos) << e;
  EXPECT_NE(e.find("model 'face': device cuda is not usable: " + reason), std::string::npos) << e;
}

TEST_F(ModelDevice, AutoWithoutAUsableGpuRunsOnTheCpu) {
  if (!cuda_reason().empty()) {
    Pipeline p(pipeline_text(faces("device: auto\n    precision: fp16")));
    EXPECT_EQ(p.stream_names(), std::vector<std::string>{"a"});
  } else {
    GTEST_SKIP() << "a CUDA device is usable here, so auto picks it";
  }
}

TEST_F(ModelDevice, CudaOptionsAreCheckedWhereTheyAreWritten) {
  if (!device_runner_registry().contains("cuda")) GTEST_SKIP() << "this Redwood was built without CUDA";
  // Known options load (auto falls back to the CPU here, or runs on the GPU where one is usable).
  Pipeline p(pipeline_text(faces("device: auto\n    cuda: {wgmma: off, pdl: false}")));
  EXPECT_EQ(p.stream_names(), std::vector<std::string>{"a"});
  const std::string unknown = load_error(faces("device: auto\n    cuda: {wgmmma: off}"));
  EXPECT_NE(unknown.find(where(10, 11)), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("unknown CUDA option 'wgmmma' (known: wgmma, tma"), std::string::npos) << unknown;
  const std::string value = load_error(faces("device: auto\n    cuda: {tma: sometimes}"));
  EXPECT_NE(value.find("CUDA option 'tma': 'sometimes' is not a switch value"), std::string::npos) << value;
  const std::string on_cpu = load_error(faces("device: cpu\n    cuda: {wgmma: off}"));
  EXPECT_NE(on_cpu.find("sets CUDA options; this model runs on the CPU"), std::string::npos) << on_cpu;
}

}  // namespace
}  // namespace redwood
