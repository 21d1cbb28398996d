// ONNX's node tests (Debian's libonnx-testdata) through the GPU graph runner, unoptimized so each
// CUDA kernel meets ONNX's own expected outputs (rtol 1e-3, atol 1e-7, as ONNX's backend tests
// and the CPU conformance suite). A test is skipped, with the reason, when an op has no CUDA
// kernel or a kernel needs at plan time an input the test feeds at run time (Reshape's shape).
// One summary case prints the per-op table and fails on any failure.

#include "backends/cuda/cuda_error.hpp"
#include "backends/cuda/graph_runner.hpp"
#include "conformance/onnx_conformance.hpp"
#include "core/onnx/onnx_import.hpp"
#include "gpu_test_support.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>

namespace redwood::cuda {
namespace {

namespace fs = std::filesystem;

fs::path testdata_root() {
  if (const char* env = std::getenv("REDWOOD_ONNX_TESTDATA")) return env;
  return REDWOOD_ONNX_TESTDATA_DIR;
}

std::vector<fs::path> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (int i = 0;; ++i) {
    const auto f = dir / (prefix + std::to_string(i) + ".pb");
    if (!fs::exists(f)) break;
    files.push_back(f);
  }
  return files;
}

// "" when equal within ONNX's tolerance, else the worst element.
std::string compare(const Tensor& actual, const Tensor& expected) {
  if (actual.dtype() != expected.dtype() || actual.shape() != expected.shape()) {
    return fmt::format("got {}, expected {}", actual.description(), expected.description());
  }
  for (std::int64_t i = 0; i < expected.numel(); ++i) {
    const double a = actual.get_as_double(i), e = expected.get_as_double(i);
    if (std::isnan(a) != std::isnan(e)) return fmt::format("[{}] = {} vs expected {}", i, a, e);
    if (std::isnan(e) || (std::isinf(e) && a == e)) continue;
    if (std::abs(a - e) > redwood::testing::kConformanceAtol + redwood::testing::kConformanceRtol * std::abs(e)) {
      return fmt::format("[{}] = {} vs expected {}", i, a, e);
    }
  }
  return "";
}

struct Outcome {
  std::string group;
  redwood::testing::ConformanceStatus status = redwood::testing::ConformanceStatus::kSkipped;
  std::string reason;
};

Outcome run_on_gpu(const fs::path& dir) {
  using redwood::testing::ConformanceStatus;
  Outcome out;
  std::shared_ptr<Graph> graph;
  try {
    graph = load_onnx(dir / "model.onnx");
  } catch (const Error& e) {
    out.group = "(not loadable)";
    out.reason = e.what();
    return out;
  }
  std::set<std::string> ops;
  for (const Node& n : graph->nodes) ops.insert(n.op_type);
  out.group = fmt::format("{}", fmt::join(ops, "+"));
  if (dir.filename().string().find("training") != std::string::npos) {
    out.reason = "training-mode behaviour";
    return out;
  }
  std::map<std::string, Tensor> feeds;
  std::vector<Tensor> expected;
  try {
    const auto ins = numbered(dir / "test_data_set_0", "input_");
    if (ins.size() != graph->inputs.size()) {
      out.reason = "inputs and graph inputs differ in number";
      return out;
    }
    for (std::size_t i = 0; i < ins.size(); ++i) feeds[graph->inputs[i].name] = load_onnx_tensor(ins[i]);
    for (const auto& f : numbered(dir / "test_data_set_0", "output_")) expected.push_back(load_onnx_tensor(f));
  } catch (const Error& e) {
    out.reason = e.what();
    return out;
  }
  try {
    RunnerOptions options;
    options.optimize = false;
    GraphRunner runner(graph, options);
    const auto actual = runner.run(feeds);
    if (actual.size() != expected.size()) {
      out.status = ConformanceStatus::kFailed;
      out.reason = fmt::format("{} outputs, expected {}", actual.size(), expected.size());
      return out;
    }
    for (std::size_t i = 0; i < actual.size(); ++i) {
      const std::string diff = compare(actual[i], expected[i]);
      if (!diff.empty()) {
        out.status = ConformanceStatus::kFailed;
        out.reason = fmt::format("output {}: {}", i, diff);
        return out;
      }
    }
    out.status = ConformanceStatus::kPassed;
  } catch (const Unsupported& e) {
    out.reason = e.what();
  } catch (const CudaError& e) {
    out.status = ConformanceStatus::kFailed;
    out.reason = e.what();
    cudaGetLastError();
  } catch (const std::exception& e) {
    out.status = ConformanceStatus::kFailed;
    out.reason = e.what();
  }
  return out;
}

TEST(GpuConformance, OnnxNodeTestsOnTheGraphRunner) {
  RW_SKIP_WITHOUT_GPU();
  using redwood::testing::ConformanceStatus;
  const auto dirs = redwood::testing::list_node_tests(testdata_root());
  if (dirs.empty()) GTEST_SKIP() << "no ONNX node tests under " << testdata_root() << " (Debian's libonnx-testdata)";
  struct Row { int passed = 0, failed = 0, skipped = 0; std::string reason; };
  std::map<std::string, Row> rows;
  int passed = 0, failed = 0, skipped = 0;
  for (const auto& dir : dirs) {
    std::set<std::string> ops;
    const Outcome o = run_on_gpu(dir);
    Row& row = rows[o.group];
    if (o.status == ConformanceStatus::kPassed) {
      ++row.passed;
      ++passed;
    } else if (o.status == ConformanceStatus::kFailed) {
      ++row.failed;
      ++failed;
      ADD_FAILURE() << dir.filename().string() << ": " << o.reason;
    } else {
      ++row.skipped;
      ++skipped;
      if (row.reason.empty()) row.reason = o.reason.substr(0, 140);
    }
  }
  std::printf("ONNX node tests on the GPU runner: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
  for (const auto& [group, row] : rows) {
    if (row.passed + row.failed == 0) continue;
    std::printf("  %-40s %4d passed %3d failed %3d skipped %s\n", group.substr(0, 40).c_str(), row.passed, row.failed,
                row.skipped, row.skipped ? ("(" + row.reason + ")").c_str() : "");
  }
  // The ops the shipped models need must each pass at least one of ONNX's tests.
  for (const char* op : {"Conv", "ConvTranspose", "Relu", "LeakyRelu", "Sigmoid", "HardSigmoid", "Add", "Sub", "Mul",
                         "Div", "Pow", "Sqrt", "MaxPool", "AveragePool", "GlobalAveragePool", "Concat", "Transpose",
                         "Softmax", "MatMul", "Gemm", "BatchNormalization"}) {
    auto it = rows.find(op);
    EXPECT_TRUE(it != rows.end() && it->second.passed > 0) << op << ": no ONNX node test passed on the GPU";
  }
}

}  // namespace
}  // namespace redwood::cuda
