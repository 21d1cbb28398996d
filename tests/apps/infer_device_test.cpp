// `redwood infer` on a chosen device: the time to first inference it prints (what the plan cache
// shortens on a GPU; scripts/plan_cache_device_run.sh reads the line), --device and --precision
// checked before anything runs, and --device cuda running on a GPU or saying why it cannot.

#include "core/model_runner.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <regex>

namespace redwood {
namespace {

using testing::OnnxBuilder;

class InferDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto dir = testing::temp_dir("infer-device");
    OnnxBuilder b(13);
    b.input("x", onnx::TensorProto::FLOAT, {-1, 4}, {"N"});
    b.node("Relu", {"x"}, {"y"}, "relu");
    b.output("y", onnx::TensorProto::FLOAT, {-1, 4}, {"N"});
    model_ = (dir / "relu.onnx").string();
    b.save(model_);
  }
  std::string model_;
};

TEST_F(InferDevice, PrintsTheTimeToFirstInferenceOnce) {
  const auto r = testing::run_launcher("infer " + model_ + " --random x=2x4 --repeat 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::regex line(R"(time to first inference: [0-9.]+ ms \(import [0-9.]+ ms, runner [0-9.]+ ms, first run [0-9.]+ ms\))");
  const auto found = std::distance(std::sregex_iterator(r.output.begin(), r.output.end(), line), std::sregex_iterator());
  EXPECT_EQ(found, 1) << r.output;
}

// The second start reads the imported model back from the model cache (core/onnx/model_cache.hpp)
// and computes the same outputs.
TEST_F(InferDevice, ASecondStartReadsTheModelFromTheModelCache) {
  testing::ScopedEnv cache("REDWOOD_CACHE_DIR", testing::temp_dir("infer-model-cache").c_str());
  testing::ScopedEnv debug("REDWOOD_LOG", "debug");
  const std::string command = "infer " + model_ + " --random x=2x4";
  const auto first = testing::run_launcher(command);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(first.output.find("read back from"), std::string::npos) << first.output;
  const auto second = testing::run_launcher(command);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("model cache: " + model_ + " read back from"), std::string::npos) << second.output;
  // --random's values are seeded: the same input, so the same output summary line.
  auto output_line = [](const std::string& text) {
    const auto at = text.find("output: y");
    return at == std::string::npos ? std::string() : text.substr(at, text.find('\n', at) - at);
  };
  EXPECT_FALSE(output_line(first.output).empty()) << first.output;
  EXPECT_EQ(output_line(first.output), output_line(second.output));
}

TEST_F(InferDevice, BadDeviceOptionsAreRefusedFirst) {
  const std::pair<std::string, std::string> cases[] = {
      {"--device tpu", "--device must be cpu or cuda (got 'tpu')"},
      {"--precision fp16", "--precision fp16 needs --device cuda"},
      {"--device cuda --profile", "--profile times the CPU executor's ops"},
      {"--cuda wgmma=off", "--cuda sets options of the CUDA backend; this run is on the cpu (add --device cuda)"},
      {"--device cuda --cuda wgmma", "--cuda 'wgmma': expected NAME=VALUE"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = testing::run_launcher("infer " + model_ + " --random x=2x4 " + args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
  }
}

TEST_F(InferDevice, CudaRunsOnAGpuOrSaysWhyNot) {
  const auto& registry = device_runner_registry();
  const auto it = registry.find("cuda");
  const std::string why = it == registry.end() ? "this Redwood was built without CUDA" : it->second.unavailable();
  // On a GPU the runner tunes and keeps its picks: in a folder of the test's, not the user's cache.
  testing::ScopedEnv cache("REDWOOD_CACHE_DIR", testing::temp_dir("infer-device-cache").c_str());
  const auto r = testing::run_launcher("infer " + model_ + " --random x=2x4 --device cuda --precision fp16");
  if (why.empty()) {
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(" on cuda:0 "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("output: y float[2, 4]"), std::string::npos) << r.output;
  } else {
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("--device cuda: " + why), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace redwood
