#pragma once
// Runs one of ONNX's own node tests (libonnx-testdata: model.onnx with input_N.pb and
// output_N.pb) through Redwood's executor and compares with the expected outputs as ONNX's
// backend tests do (rtol 1e-3, atol 1e-7). A test is selected when Redwood supports every op,
// attribute and dtype in it; otherwise it is skipped with the reason.

#include "runtime/executor.hpp"

#include <filesystem>
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

/// The node-test folders under `root`, sorted.
std::vector<std::filesystem::path> list_node_tests(const std::filesystem::path& root);

/// Loads, runs and compares one node test, with the executor configured by `options` (the
/// default: optimized, every provider; or the reference kernels alone).
ConformanceOutcome run_node_test(const std::filesystem::path& dir, const ExecutorOptions& options = {});

}  // namespace redwood::testing
