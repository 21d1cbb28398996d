// The launcher's CPU threading policy: OpenMP's threads (oneDNN's) wait passively unless the
// user chose otherwise, and `redwood bench --load` checks its argument.

#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

namespace redwood {
namespace {

std::string launcher() { return REDWOOD_BINARY; }

TEST(LauncherThreads, OpenMpWaitsPassivelyUnlessTheUserChose) {
  auto r = testing::run_command("env -u OMP_WAIT_POLICY " + launcher() + " probe");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("openmp (oneDNN): wait policy PASSIVE"), std::string::npos) << r.output;
  r = testing::run_command("env OMP_WAIT_POLICY=active " + launcher() + " probe");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("openmp (oneDNN): wait policy active"), std::string::npos) << r.output;
}

TEST(LauncherThreads, BenchLoadMustBeAFewBusyThreads) {
  const auto dir = testing::temp_dir("bench-load");
  testing::OnnxBuilder b(13);
  b.input("x", onnx::TensorProto::FLOAT, {1, 4});
  b.node("Relu", {"x"}, {"y"}, "relu");
  b.output("y", onnx::TensorProto::FLOAT, {1, 4});
  b.save(dir / "relu.onnx");
  const std::string model = (dir / "relu.onnx").string();
  auto r = testing::run_launcher("bench " + model + " --runs 15 --load -1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--load must be from 0 to 256 busy threads (got -1)"), std::string::npos) << r.output;
  r = testing::run_launcher("bench " + model + " --runs 15 --load 2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("background load: 2 busy thread(s)"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace redwood
