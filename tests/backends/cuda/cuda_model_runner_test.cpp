// The "cuda" model runner, as the infer stage gets it for `device: cuda` (through the device
// runner registry, core/model_runner.hpp): registered by the whole-archive link, reports CUDA's
// reason where no device is usable, and on a GPU runs a shipped model like the CPU runner does
// (batches of several sizes, each its own plan; the precision from the config's spelling).
// The pipeline side (config keys, the no-GPU error at load) is tests/pipelines/model_device_test.cpp.

#include "core/error.hpp"
#include "core/model_runner.hpp"
#include "core/onnx/onnx_import.hpp"
#include "gpu_test_support.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <filesystem>

namespace redwood::cuda {
namespace {

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
  auto gpu = device_runner_registry().at("cuda").make(graph, "fp32");
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
  EXPECT_THROW(device_runner_registry().at("cuda").make(graph, "fp8"), InvalidArgument);
}

}  // namespace
}  // namespace redwood::cuda
