#pragma once
// ONNX's own node tests (libonnx-testdata: model.onnx with input_N.pb and output_N.pb) as one
// table of op cases that every provider runs through this one harness (ggml's test-backend-ops
// idea): a ConformanceTarget says how a provider runs a graph (the CPU executor with the reference
// kernels alone or with every provider, tests/conformance/; the CUDA graph runner,
// tests/backends/cuda/gpu_conformance_test.cpp), and the outputs are compared with the expected
// ones as ONNX's backend tests do (rtol 1e-3, atol 1e-7). A test is skipped, with the reason,
// when the target lacks an op, attribute or dtype in it.

#include "runtime/executor.hpp"

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace redwood::testing {

enum class ConformanceStatus { kPassed, kFailed, kSkipped };

struct ConformanceOutcome {
  std::string test;    // folder name, e.g. "test_conv_with_strides_padding"
  std::string group;   // op type(s) of the model, e.g. "Conv"
  ConformanceStatus status = ConformanceStatus::kSkipped;
  std::string reason;  // why skipped, or what differed
};

inline constexpr double kConformanceRtol = 1e-3;
inline constexpr double kConformanceAtol = 1e-7;

/// How one provider runs a node test's graph.
struct ConformanceTarget {
  std::string label;  // "reference kernels, unoptimized"
  /// The graph's outputs for these feeds; throws Unsupported for what the provider cannot run
  /// (the test is then skipped with that reason), anything else for a failure.
  std::function<std::vector<Tensor>(std::shared_ptr<Graph> graph, const std::map<std::string, Tensor>& feeds)> run;
  /// Whether the provider has a kernel for an op type, asked before the model is loaded so that a
  /// test of an op it lacks is skipped naming the op; empty: every op is tried.
  std::function<bool(const std::string& op_type)> has_op;
};

/// The CPU executor with these options (the default: optimized, every provider).
ConformanceTarget executor_target(const ExecutorOptions& options = {}, std::string label = "default executor");

/// The node-test folders under `root`, sorted.
std::vector<std::filesystem::path> list_node_tests(const std::filesystem::path& root);

/// Loads, runs and compares one node test on `target`.
ConformanceOutcome run_node_test(const std::filesystem::path& dir, const ConformanceTarget& target);

/// Every node test under `root` on `target`: prints the per-op table (passed, failed, skipped,
/// and why groups were skipped), adds a test failure for each failed node test and for each of
/// `required_ops` that passes none. Returns how many passed.
int expect_conformance(const std::filesystem::path& root, const ConformanceTarget& target,
                       const std::vector<std::string>& required_ops);

}  // namespace redwood::testing
