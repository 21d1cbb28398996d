// ONNX's node tests (Debian's libonnx-testdata) through the GPU graph runner, unoptimized so each
// CUDA kernel meets ONNX's own expected outputs: the CPU conformance suite's harness and table
// (tests/conformance/onnx_conformance.hpp) with the graph runner as its target. A test is skipped,
// with the reason, when an op has no CUDA kernel or a kernel needs at plan time an input the test
// feeds at run time (Reshape's shape). One summary case prints the per-op table and fails on any
// failure.

#include "backends/cuda/cuda_error.hpp"
#include "backends/cuda/graph_runner.hpp"
#include "conformance/onnx_conformance.hpp"
#include "core/onnx/onnx_import.hpp"
#include "gpu_test_support.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

namespace redwood::cuda {
namespace {

namespace fs = std::filesystem;

fs::path testdata_root() {
  if (const char* env = std::getenv("REDWOOD_ONNX_TESTDATA")) return env;
  return REDWOOD_ONNX_TESTDATA_DIR;
}

// The graph runner, unoptimized, as the harness's target.
redwood::testing::ConformanceTarget graph_runner_target() {
  redwood::testing::ConformanceTarget t;
  t.label = "CUDA graph runner, unoptimized";
  t.run = [](std::shared_ptr<Graph> graph, const std::map<std::string, Tensor>& feeds) {
    RunnerOptions options;
    options.optimize = false;
    try {
      GraphRunner runner(std::move(graph), options);
      return runner.run(feeds);
    } catch (const CudaError&) {
      cudaGetLastError();  // a failed launch's error, cleared for the next test
      throw;
    }
  };
  // No pre-check: nodes whose inputs are known on the host run there with the reference
  // kernels, so the runner itself says which node it cannot take.
  return t;
}

TEST(GpuConformance, OnnxNodeTestsOnTheGraphRunner) {
  RW_SKIP_WITHOUT_GPU();
  if (redwood::testing::list_node_tests(testdata_root()).empty()) {
    GTEST_SKIP() << "no ONNX node tests under " << testdata_root() << " (Debian's libonnx-testdata)";
  }
  // The ops the shipped models need must each pass at least one of ONNX's tests.
  redwood::testing::expect_conformance(
      testdata_root(), graph_runner_target(),
      {"Conv", "ConvTranspose", "Relu", "LeakyRelu", "Sigmoid", "HardSigmoid", "Add", "Sub", "Mul", "Div", "Pow",
       "Sqrt", "MaxPool", "AveragePool", "GlobalAveragePool", "Concat", "Transpose", "Softmax", "MatMul", "Gemm",
       "BatchNormalization"});
}

}  // namespace
}  // namespace redwood::cuda
