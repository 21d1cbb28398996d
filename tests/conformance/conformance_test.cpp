// ONNX's node tests (Debian's libonnx-testdata, ONNX 1.12) through Redwood's CPU executor.
// Each folder is its own test case (skipped, with the reason, when it needs an op, attribute or
// dtype Redwood lacks), and Conformance.Summary prints the passed/failed/skipped table per op.

#include "conformance/onnx_conformance.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

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
  const ConformanceOutcome outcome = run_node_test(GetParam().dir);
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
const char* const kRequiredOps[] = {
    "Conv", "ConvTranspose", "BatchNormalization", "Relu", "LeakyRelu", "Clip", "Sigmoid",
    "HardSigmoid", "HardSwish", "Tanh", "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "MaxPool",
    "AveragePool", "GlobalAveragePool", "Resize", "Concat", "Split", "Slice", "Pad", "Reshape",
    "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Shape", "Gather", "Cast", "Constant",
    "ConstantOfShape", "ReduceMean", "MatMul", "Gemm", "Softmax"};

// The per-op table for one executor configuration; fails on any failure or a required op with no
// passing test.
void summarize(const ExecutorOptions& options, const char* label) {
  const auto dirs = list_node_tests(kRoot);
  ASSERT_FALSE(dirs.empty()) << "no ONNX node tests under " << kRoot
                             << ": install Debian's libonnx-testdata (scripts/setup.sh does)";
  struct Row { int passed = 0, failed = 0, skipped = 0; std::set<std::string> reasons; };
  std::map<std::string, Row> rows;
  int passed = 0, failed = 0, skipped = 0;
  std::vector<std::string> failures;
  for (const auto& dir : dirs) {
    const ConformanceOutcome o = run_node_test(dir, options);
    Row& row = rows[o.group];
    switch (o.status) {
      case ConformanceStatus::kPassed: ++row.passed; ++passed; break;
      case ConformanceStatus::kFailed:
        ++row.failed; ++failed;
        failures.push_back(o.test + ": " + o.reason);
        break;
      case ConformanceStatus::kSkipped:
        ++row.skipped; ++skipped;
        row.reasons.insert(o.reason.substr(0, 160));
        break;
    }
  }
  std::string table = fmt::format("{:<44} {:>6} {:>6} {:>7}\n", "op", "passed", "failed", "skipped");
  std::string skips;
  for (const auto& [group, row] : rows) {
    if (row.passed + row.failed == 0) {
      skips += fmt::format("  {:<42} {:>3} skipped: {}\n", group.substr(0, 42), row.skipped,
                           row.reasons.size() == 1 ? *row.reasons.begin() : fmt::format("{}", fmt::join(row.reasons, " | ")));
      continue;
    }
    table += fmt::format("{:<44} {:>6} {:>6} {:>7}\n", group.substr(0, 44), row.passed, row.failed, row.skipped);
    for (const auto& r : row.reasons) table += fmt::format("    skipped: {}\n", r);
  }
  std::printf("ONNX node tests (%s), %s: %d passed, %d failed, %d skipped\n%s\nGroups with every test skipped:\n%s",
              kRoot.c_str(), label, passed, failed, skipped, table.c_str(), skips.c_str());
  for (const auto& f : failures) ADD_FAILURE() << label << ": " << f;
  for (const char* op : kRequiredOps) {
    auto it = rows.find(op);
    EXPECT_TRUE(it != rows.end() && it->second.passed > 0) << label << ": " << op << ": no ONNX node test passed";
  }
}

TEST(Conformance, SummaryReferenceKernels) {
  ExecutorOptions options;
  options.optimize = false;
  options.reference_only = true;
  summarize(options, "reference kernels, unoptimized");
}

TEST(Conformance, SummaryDefaultExecutor) { summarize({}, "default executor (optimized, oneDNN first)"); }

}  // namespace
}  // namespace redwood::testing
