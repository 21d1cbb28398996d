// The launcher as a user runs it: `redwood infer` on small generated models, good and bad input.

#include "core/npy.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>
#include <opencv2/imgcodecs.hpp>

#include <cstdio>
#include <fstream>
#include <sys/wait.h>

namespace redwood {
namespace {

using testing::OnnxBuilder;
constexpr int kFloat = onnx::TensorProto::FLOAT;

using RunResult = testing::LauncherResult;

RunResult run_redwood(const std::string& args) { return testing::run_launcher(args); }

class InferCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::temp_dir("infer");
    OnnxBuilder b(13);
    b.input("x", kFloat, {-1, 4}, {"N"});
    b.initializer("bias", Tensor::from_vector<float>({4}, {1.f, -1.f, 0.5f, -0.5f}));
    b.node("Add", {"x", "bias"}, {"sum"}, "add");
    b.node("Relu", {"sum"}, {"y:0"}, "relu");
    b.output("y:0", kFloat, {-1, 4}, {"N"});
    model_ = (dir_ / "add_relu.onnx").string();
    b.save(model_);
  }
  std::filesystem::path dir_;
  std::string model_;
};

TEST_F(InferCommand, RunsNpyInputAndSavesOutputs) {
  write_npy(dir_ / "x.npy", Tensor::from_vector<float>({2, 4}, {0, 0, 0, 0, -2, 2, 1, 1}));
  const auto out_dir = dir_ / "out";
  RunResult r = run_redwood("infer " + model_ + " --input x=" + (dir_ / "x.npy").string() +
                            " --repeat 3 --save " + out_dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("output: y:0 float[2, 4]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("latency: p50"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("over 3 run(s)"), std::string::npos) << r.output;
  // the output name "y:0" is made file-safe
  Tensor y = read_npy(out_dir / "y_0.npy");
  EXPECT_EQ(y.to_float_vector(), (std::vector<float>{1, 0, 0.5f, 0, 0, 1, 1.5f, 0.5f}));
}

TEST_F(InferCommand, RandomInputsTakeAShape) {
  RunResult r = run_redwood("infer " + model_ + " --random x=3x4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("input: x float[3, 4]"), std::string::npos) << r.output;
  r = run_redwood("infer " + model_ + " --random x=3xfour");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("'3xfour' is not a shape"), std::string::npos) << r.output;
}

TEST_F(InferCommand, PicturesFeedImageInputs) {
  OnnxBuilder b(13);
  b.input("image", kFloat, {1, 3, -1, -1}, {"H", "W"});
  b.node("Relu", {"image"}, {"y"}, "relu");
  b.output("y", kFloat, {1, 3, -1, -1}, {"H", "W"});
  b.save(dir_ / "image.onnx");
  cv::Mat picture(6, 8, CV_8UC3, cv::Scalar(255, 0, 0));  // blue, in OpenCV's BGR
  ASSERT_TRUE(cv::imwrite((dir_ / "blue.png").string(), picture));
  RunResult r = run_redwood("infer " + (dir_ / "image.onnx").string() + " --input image=" +
                            (dir_ / "blue.png").string() + " --save " + dir_.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Tensor y = read_npy(dir_ / "y.npy");
  ASSERT_EQ(y.shape(), (Shape{1, 3, 6, 8}));
  EXPECT_EQ(y.get_as_double(0), 0.0);          // R plane
  EXPECT_NEAR(y.get_as_double(2 * 48), 1.0, 1e-6);  // B plane, scaled to 1
}

TEST_F(InferCommand, BadInputsEndWithOneClearMessage) {
  struct Case {
    std::string args;
    std::string message;
  };
  std::ofstream(dir_ / "corrupt.onnx", std::ios::binary) << "\x08\x07garbage that is not a model";
  OnnxBuilder noise(13);
  noise.input("x", kFloat, {2});
  noise.node("RandomNormalLike", {"x"}, {"y"}, "noise_node");  // an ONNX op without a CPU kernel
  noise.output("y", kFloat, {2});
  noise.save(dir_ / "noise.onnx");
  write_npy(dir_ / "wide.npy", Tensor::zeros(DType::kF32, {2, 5}));
  write_npy(dir_ / "ints.npy", Tensor::zeros(DType::kI64, {2, 4}));
  const std::vector<Case> cases = {
      {"infer " + (dir_ / "missing.onnx").string(), "missing.onnx: no such file"},
      {"infer " + (dir_ / "corrupt.onnx").string(), "not a valid ONNX model"},
      {"infer " + (dir_ / "noise.onnx").string() + " --random x=2",
       "node 'noise_node' (RandomNormalLike): op RandomNormalLike has no cpu kernel"},
      {"infer " + model_, "input 'x' (float[N, 4]) is not given"},
      {"infer " + model_ + " --input x=" + (dir_ / "wide.npy").string(), "dimension 1 differs"},
      {"infer " + model_ + " --input x=" + (dir_ / "ints.npy").string(), "expects float[N, 4] but was given int64[2, 4]"},
      {"infer " + model_ + " --input x=" + (dir_ / "nothing.png").string(), "nothing.png: no such file"},
      {"infer " + model_ + " --input z=" + (dir_ / "wide.npy").string(), "no input 'z'"},
      {"infer " + model_ + " --random x=4611686018427387905x4", "--random x: shape [4611686018427387905, 4] has more than 2^56 elements"},
  };
  for (const auto& c : cases) {
    const auto out_dir = dir_ / "should_not_exist";
    RunResult r = run_redwood(c.args + " --save " + out_dir.string());
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find("redwood: error: "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(out_dir)) << "an output was written despite the error";
  }
}

// --save is checked before the model runs: a folder that cannot be made is one message, exit 1,
// and nothing is written.
TEST_F(InferCommand, AnUnwritableSaveFolderFailsBeforeTheRun) {
  std::ofstream(dir_ / "plain.txt") << "a file, not a folder";
  const auto target = dir_ / "plain.txt" / "out";
  RunResult r = run_redwood("infer " + model_ + " --random x=2x4 --save " + target.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("redwood: error: --save " + target.string() + ": " + (dir_ / "plain.txt").string() + " is not a folder"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("latency:"), std::string::npos) << "the model ran before --save was checked";
}

TEST(Launcher, ProbeListsKernels) {
  RunResult r = run_redwood("probe");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cpu kernels:"), std::string::npos);
  EXPECT_NE(r.output.find("Relu"), std::string::npos);
}

// Command-line mistakes exit 1 like every other bad input (CLI11's own codes are 104, 106...).
TEST(Launcher, UsageErrorsExitOne) {
  for (const char* args : {"frobnicate", "infer", "infer m.onnx --threads -3", "infer m.onnx --threads 5000",
                           "infer m.onnx --repeat lots"}) {
    RunResult r = run_redwood(args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
  }
  EXPECT_EQ(run_redwood("--help").exit_code, 0);
}

}  // namespace
}  // namespace redwood
