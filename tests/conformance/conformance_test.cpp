// ONNX's node tests (Debian's libonnx-testdata, ONNX 1.12) through Redwood's CPU executor (the
// harness, onnx_conformance.hpp, is the GPU conformance test's too). Each folder is its own test
// case (skipped, with the reason, when it needs an op, attribute or dtype Redwood lacks), and the
// Conformance.Summary cases print the passed/failed/skipped table per op, per configuration.

#include "conformance/onnx_conformance.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>


namespace redwood::testing {
namespace {

const std::filesystem::path kRoot = REDWOOD_ONNX_TESTDATA_DIR;

// One test folder; printed as its name so ctest lists "…/test_conv_with_strides_padding" alone.
struct NodeTestDir {
  std::filesystem::path dir;
  friend void PrintTo(const NodeTestDir& t, std::ostream* os) { *os << t.dir.filename().string(); }
};

class OnnxNodeTest : public ::testing::TestWithParam<NodeTestDir> {};

TEST_P(OnnxNodeTest, MatchesExpectedOutputs) {
  const ConformanceOutcome outcome = run_node_test(GetParam().dir, executor_target());
  switch (outcome.status) {
    case ConformanceStatus::kPassed: break;
    case ConformanceStatus::kFailed: FAIL() << outcome.group << ": " << outcome.reason; break;
    case ConformanceStatus::kSkipped: GTEST_SKIP() << outcome.reason; break;
  }
}

std::vector<NodeTestDir> all_tests() {
  std::vector<NodeTestDir> tests;
  for (auto& dir : list_node_tests(kRoot)) tests.push_back({dir});
  if (tests.empty()) tests.push_back({kRoot / "missing"});  // one case that reports the missing data
  return tests;
}

INSTANTIATE_TEST_SUITE_P(Onnx, OnnxNodeTest, ::testing::ValuesIn(all_tests()),
                         [](const ::testing::TestParamInfo<NodeTestDir>& info) {
                           std::string name = info.param.dir.filename().string();
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

// The foundation's op list: each must pass at least one ONNX node test.
const std::vector<std::string> kRequiredOps = {
    "Conv", "ConvTranspose", "BatchNormalization", "Relu", "LeakyRelu", "Clip", "Sigmoid",
    "HardSigmoid", "HardSwish", "Tanh", "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "MaxPool",
    "AveragePool", "GlobalAveragePool", "Resize", "Concat", "Split", "Slice", "Pad", "Reshape",
    "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Shape", "Gather", "Cast", "Constant",
    "ConstantOfShape", "ReduceMean", "MatMul", "Gemm", "Softmax"};

TEST(Conformance, SummaryReferenceKernels) {
  ExecutorOptions options;
  options.optimize = false;
  options.reference_only = true;
  expect_conformance(kRoot, executor_target(options, "reference kernels, unoptimized"), kRequiredOps);
}

TEST(Conformance, SummaryDefaultExecutor) {
  expect_conformance(kRoot, executor_target({}, "default executor (optimized, oneDNN first)"), kRequiredOps);
}

}  // namespace
}  // namespace redwood::testing
