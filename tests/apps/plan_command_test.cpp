// `redwood plan` as a user runs it: the partitioner's view of a small generated model on the CPU
// (here the only device), with --profile's measurements, and the mistakes it names.

#include "runtime/placement_cache.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>

namespace redwood {
namespace {

using testing::OnnxBuilder;

class PlanCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::temp_dir("plan");
    OnnxBuilder b(13);
    b.input("x", onnx::TensorProto::FLOAT, {-1, 4, 8, 8}, {"N"});
    b.initializer("w", testing::random_tensor(DType::kF32, {8, 4, 3, 3}, -0.5, 0.5, 1));
    auto& conv = b.node("Conv", {"x", "w"}, {"c"}, "conv");
    OnnxBuilder::set_attr(conv, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
    b.node("Softmax", {"c"}, {"y"}, "softmax");
    b.output("y", onnx::TensorProto::FLOAT, {-1, 8, 8, 8}, {"N"});
    model_ = (dir_ / "conv_softmax.onnx").string();
    b.save(model_);
  }
  // The launcher with its cache (profiles, cost history) in this test's folder.
  testing::LauncherResult plan(const std::string& args) {
    return testing::run_command(
        fmt::format("REDWOOD_CACHE_DIR='{}' '{}' plan '{}' {}", (dir_ / "cache").string(), REDWOOD_BINARY, model_, args));
  }
  std::filesystem::path dir_;
  std::string model_;
};

TEST_F(PlanCommand, ProfilePredictsAndMeasuresEachSegment) {
  const auto r = plan("--devices cpu --batch 2 --profile --runs 3 --dot " + (dir_ / "plan.dot").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("input: x float[2, 4, 8, 8]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2 placed"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("profile: 2 node times measured"), std::string::npos) << r.output;
  // One device runs the model whole: no split, so no segment is timed alone.
  EXPECT_NE(r.output.find("s (timed alone while planning: 0 host segment(s) in 0.00 s, 0 accelerator segment(s) in 0.00 s)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("planned in "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("gap of the placer to the exact optimum (list schedule): 0.00 %"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("measured"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("one batch: predicted"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir_ / "cache" / "history" / "costs.json"));
  std::ifstream dot(dir_ / "plan.dot");
  const std::string text((std::istreambuf_iterator<char>(dot)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("digraph"), std::string::npos);
}

TEST_F(PlanCommand, MistakesAreNamed) {
  auto r = plan("--devices cpu,tpu");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("no 'tpu' device"), std::string::npos) << r.output;
  r = plan("--devices cuda,cpu");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("the first device must be cpu"), std::string::npos) << r.output;
  r = plan("--pin nosuchnode=cpu");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("no node 'nosuchnode' to pin"), std::string::npos) << r.output;
  r = plan("--pin conv");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("expected NODE=DEVICE"), std::string::npos) << r.output;
  r = plan("--devices cpu --objective fastest");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("expected latency or throughput"), std::string::npos) << r.output;
  r = plan("--profile --batch 0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--batch 0"), std::string::npos) << r.output;
}

TEST_F(PlanCommand, CacheInfoListsThePlanCacheWithoutAModel) {
  const std::string cache = (dir_ / "cache").string();
  auto r = testing::run_command(fmt::format("REDWOOD_CACHE_DIR='{}' '{}' plan --cache-info", cache, REDWOOD_BINARY));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(cache), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("model cache: " + cache + "/models: not made yet"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("placement cache: " + cache + "/placements: not made yet"), std::string::npos) << r.output;
  r = testing::run_command(fmt::format("'{}' plan", REDWOOD_BINARY));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("which model?"), std::string::npos) << r.output;
}

// A kept split lists its nodes by device and its host segments' threads ("all": the process's).
TEST_F(PlanCommand, CacheInfoListsAKeptSplitWithItsHostSegmentsThreads) {
  const std::string cache = (dir_ / "cache").string();
  std::vector<runtime::RowsCurve> curves(4);
  for (std::size_t k = 0; k < curves.size(); ++k) curves[k].add(1, 1.0);
  runtime::write_placement(dir_ / "cache" / "placements", "a split's key",
                           {"", 4.2, {"cuda", "cpu", "cuda", "cpu"}, {4, 0}, {1.1, 0.9, 1.3, 0.9}, curves});
  const auto r = testing::run_command(fmt::format("REDWOOD_CACHE_DIR='{}' '{}' plan --cache-info", cache, REDWOOD_BINARY));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("split: 2 node(s) on cpu, 2 node(s) on cuda; host segments on 4, all thread(s), predicted 4.200 ms"),
            std::string::npos)
      << r.output;
}

// A model the launcher has loaded is in the model cache, which --cache-info lists with its size.
TEST_F(PlanCommand, CacheInfoListsTheModelCache) {
  const std::string cache = (dir_ / "cache").string();
  auto r = testing::run_command(
      fmt::format("REDWOOD_CACHE_DIR='{}' '{}' plan --cache-info '{}'", cache, REDWOOD_BINARY, model_));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("  model cache: "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("  model cache: no entry"), std::string::npos) << r.output;
  r = testing::run_command(fmt::format("REDWOOD_CACHE_DIR='{}' '{}' plan --cache-info", cache, REDWOOD_BINARY));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("model cache: " + cache + "/models: 1 imported model, "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(".rwgraph  "), std::string::npos) << r.output;
}

}  // namespace
}  // namespace redwood
