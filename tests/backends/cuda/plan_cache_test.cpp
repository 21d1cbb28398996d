// The plan cache on the CUDA side (backends/cuda/plan_cache.hpp). Host only, so everywhere: the
// tuners are registered under their names, and each one's picks are read back into its cache when
// they are among the candidates its kernel offers, refused with the reason otherwise. On a GPU: a
// second runner for the same model, in a process state that has forgotten every pick, takes them
// from the file, times nothing, runs the optimized graph read back beside it and computes the same
// bits; a file whose pick no kernel offers is
// rebuilt; the streaming runner writes its entry too.
// The files themselves (format, keys, corruption, atomic writes) are tests/runtime/plan_cache_test.cpp.

#include "backends/cuda/graph_runner.hpp"
#include "backends/cuda/kernels/conv/conv_kernels.hpp"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc.hpp"
#include "backends/cuda/kernels/conv/conv_tuning.hpp"
#include "backends/cuda/kernels/nhwc/nhwc.hpp"
#include "backends/cuda/kernels/variant_tuner.hpp"
#include "backends/cuda/plan_cache.hpp"
#include "core/error.hpp"
#include "core/model_runner.hpp"
#include "core/graph/graph_hash.hpp"
#include "core/onnx/onnx_import.hpp"
#include "gpu_test_support.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace redwood::cuda {
namespace {

namespace fs = std::filesystem;
using kernels::ConvShape;
using kernels::MmaType;

// Every pick check below throws with this in its message.
void expect_refused(const std::string& tuner, const nlohmann::json& pick, const std::string& reason) {
  try {
    check_tuned_pick(tuner, pick, 0);
    ADD_FAILURE() << "accepted: " << pick.dump();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
  }
}

TEST(PlanCacheTuners, AreRegisteredByName) {
  for (const char* name : {"conv", "conv_nhwc", "depthwise_nhwc"}) EXPECT_EQ(stored_picks().count(name), 1u) << name;
  expect_refused("gemm", {{"key", nlohmann::json::object()}, {"config", nlohmann::json::object()}},
                 "this build has no tuner \"gemm\"");
}

TEST(PlanCacheTuners, ConvPicksAreCheckedAndSeeded) {
  forget_tuned_picks();
  const ConvShape shape{1, 64, 28, 28, 128, 3, 3, 28, 28, 1, 1, 1, 1, 1, 1, 1};
  const auto candidates = kernels::conv_candidates(shape, MmaType::kFp16, multiprocessor_count());
  ASSERT_GT(candidates.size(), 1u);
  const kernels::ConvConfig want = candidates.back();
  nlohmann::json pick = {
      {"key",
       {{"n", 1},        {"c", 64},       {"h", 28},     {"w", 28},     {"k", 128},    {"r", 3},      {"s", 3},
        {"oh", 28},      {"ow", 28},      {"stride_h", 1}, {"stride_w", 1}, {"pad_h", 1}, {"pad_w", 1}, {"dil_h", 1},
        {"dil_w", 1},    {"groups", 1},   {"type", "fp16"}}},
      {"config",
       {{"tile", kernels::conv_tiles(MmaType::kFp16)[static_cast<std::size_t>(want.tile)].name},
        {"splits", want.splits},
        {"reduce_in_kernel", want.reduce_in_kernel}}},
      {"how", "measured"}};
  EXPECT_NO_THROW(check_tuned_pick("conv", pick, 0));
  runtime::PickSet picks;
  picks.add("conv", pick);
  EXPECT_EQ(seed_tuned_picks(picks, 0), 1u);
  kernels::ConvConfig got;
  ASSERT_TRUE(conv_tuned_config(shape, MmaType::kFp16, &got));
  EXPECT_EQ(got, want);

  nlohmann::json bad = pick;
  bad["config"]["tile"] = "999x999";
  expect_refused("conv", bad, "\"tile\" is \"999x999\", none of");
  bad = pick;
  bad["config"]["splits"] = 1000;
  expect_refused("conv", bad, "is not among the");
  bad = pick;
  bad["key"].erase("stride_w");
  expect_refused("conv", bad, "\"stride_w\" is missing");
  bad = pick;
  bad["key"]["k"] = 0;
  expect_refused("conv", bad, "\"k\" is 0, outside");
  bad = pick;
  bad["key"]["type"] = "fp8";
  expect_refused("conv", bad, "\"type\" is \"fp8\"");
  forget_tuned_picks();
  EXPECT_FALSE(conv_tuned_config(shape, MmaType::kFp16, &got)) << "forgotten";
}

TEST(PlanCacheTuners, NhwcConvAndDepthwisePicksAreChecked) {
  // rw.ConvNhwc: the first mma.sync candidate is offered on every GPU (wgmma and the narrow
  // kernel only add to the set).
  const ConvShape shape{1, 64, 28, 28, 64, 3, 3, 28, 28, 1, 1, 1, 1, 1, 1, 1};
  const auto candidates =
      kernels::nhwc_conv_candidates(shape, multiprocessor_count(), {}, kernels::NhwcStorage::kF16);
  ASSERT_FALSE(candidates.empty());
  nlohmann::json nhwc = {
      {"key",
       {{"n", 1},       {"c", 64},       {"h", 28},   {"w", 28},     {"k", 64},     {"r", 3},      {"s", 3},
        {"stride_h", 1}, {"stride_w", 1}, {"pad_h", 1}, {"pad_w", 1}, {"dil_h", 1},  {"dil_w", 1},  {"oh", 28},
        {"ow", 28},      {"storage", "fp16"}, {"split_tf32", false}, {"c2", 0}, {"h2", 0}, {"w2", 0}, {"stride2", 1},
        {"families", {{"wgmma", false}, {"tma", false}, {"narrow", false}}}}},
      {"config",
       {{"tile", kernels::nhwc_conv_tiles()[static_cast<std::size_t>(candidates.front().tile)].name},
        {"splits", candidates.front().splits}}}};
  EXPECT_NO_THROW(check_tuned_pick("conv_nhwc", nhwc, 0));
  // The families the pick was made among (CudaOptions' say) are part of its key.
  nlohmann::json no_families = nhwc;
  no_families["key"].erase("families");
  expect_refused("conv_nhwc", no_families, "\"families\" is missing");
  nhwc["key"]["storage"] = "int8";
  expect_refused("conv_nhwc", nhwc, "\"storage\" is \"int8\", none of fp16, bf16, fp32");

  // rw.DepthwiseConvNhwc: 3x3 stride 1, a tiled shape with several variants.
  kernels::NhwcDepthwiseParams p{1, 28, 28, 64, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1};
  const auto variants = kernels::depthwise_nhwc_candidates(kernels::NhwcStorage::kF16, p);
  ASSERT_GT(variants.size(), 1u);
  nlohmann::json dw = {{"key",
                        {{"n", 1}, {"h", 28}, {"w", 28}, {"c", 64}, {"oh", 28}, {"ow", 28}, {"r", 3}, {"s", 3},
                         {"stride_h", 1}, {"stride_w", 1}, {"pad_h", 1}, {"pad_w", 1}, {"dil_h", 1}, {"dil_w", 1},
                         {"storage", "fp16"}}},
                       {"config", {{"vec", variants.back().vec}, {"ox", variants.back().ox}, {"oy", variants.back().oy}}}};
  EXPECT_NO_THROW(check_tuned_pick("depthwise_nhwc", dw, 0));
  dw["config"]["ox"] = 63;
  expect_refused("depthwise_nhwc", dw, "is not among the");
}

TEST(PlanCacheKey, ReadsTheDriverVersionOfEitherKernelModule) {
  EXPECT_EQ(driver_version_from("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  Fri Jan 24 2025"), "570.86.15");
  EXPECT_EQ(driver_version_from("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
                                "(dvs-builder@U16-I1-N07-12-3)  Thu Jul 31 2025"),
            "580.159.04");
  EXPECT_EQ(driver_version_from("NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  535.104  Release Build"), "535.104");
  EXPECT_EQ(driver_version_from(""), "unknown");
  EXPECT_EQ(driver_version_from("no driver here 1.2.3"), "unknown");
}

TEST(PlanCacheKey, HoldsThePlanChangingOptions) {
  RunnerOptions options;
  options.precision = Precision::kBf16;
  options.nhwc = false;
  const auto o = plan_cache_options(options);
  EXPECT_EQ(o.at("precision"), "bf16");
  EXPECT_EQ(o.at("nhwc"), "off");
  EXPECT_EQ(o.at("space_to_depth_stem"), "off") << "no stem by space-to-depth without the NHWC groups";
  EXPECT_EQ(o.at("tune_budget_ms"), "3000");
  EXPECT_EQ(o.count("cuda_graph"), 0u) << "capture does not change a pick";
}

// ---- on a GPU ----

std::size_t count_with(const std::vector<std::string>& lines, const std::string& what) {
  std::size_t n = 0;
  for (const std::string& l : lines) n += l.find(what) != std::string::npos ? 1 : 0;
  return n;
}

struct RunResult {
  std::vector<std::string> variants;
  std::vector<Tensor> outputs;
  std::size_t seeded = 0;
  std::uint64_t graph_hash = 0;  // of the graph the runner ran (after the passes)
  std::size_t pass_changes = 0;  // what the passes' records list
};

// PP-OCRv4 det at fp16 (NCHW and NHWC convolutions, depthwise ones: every tuner) with its plan
// cache in a folder of the test's, each run in a new runner after the process forgot its picks.
class PlanCacheRunner : public ::testing::Test {
 protected:
  void SetUp() override {
    RW_SKIP_WITHOUT_GPU();
    const fs::path file = redwood::testing::assets_dir() / "models" / "ch_PP-OCRv4_det_infer.onnx";
    if (!fs::exists(file)) GTEST_SKIP() << file.string() << " is missing (scripts/setup.sh fetches it)";
    graph_ = load_onnx(file);
    options_.precision = Precision::kFp16;
    options_.plan_cache_dir = redwood::testing::temp_dir("plan-cache-gpu");
  }

  // A restart: only the file remembers the picks.
  RunResult run_fresh(const Tensor& x) {
    forget_tuned_picks();
    GraphRunner runner(graph_, options_);
    RunResult r;
    r.outputs = runner.run({{graph_->inputs[0].name, x}});
    r.variants = runner.plan_for({x.shape()}).variants();
    r.seeded = runner.plan_cache()->seeded();
    r.graph_hash = redwood::graph_hash(runner.graph());
    for (const PassRecord& p : runner.pass_records()) r.pass_changes += p.changes.size();
    return r;
  }

  // The picks' entry: the folder's one .json file (the optimized graph, .rwgraph, lies beside it,
  // and a folder lists its files in no set order).
  fs::path entry_file() const {
    std::vector<fs::path> found;
    for (const auto& e : fs::directory_iterator(options_.plan_cache_dir)) {
      if (e.path().extension() == ".json") found.push_back(e.path());
    }
    EXPECT_EQ(found.size(), 1u) << "entries in " << options_.plan_cache_dir;
    return found.empty() ? fs::path() : found.front();
  }

  std::shared_ptr<Graph> graph_;
  RunnerOptions options_;
};

TEST_F(PlanCacheRunner, ASecondRunnerTakesThePicksFromDisk) {
  const Tensor x = redwood::testing::random_tensor(DType::kF32, {1, 3, 320, 416}, 0, 1, 5);
  const RunResult cold = run_fresh(x);
  EXPECT_EQ(cold.seeded, 0u);
  EXPECT_GT(count_with(cold.variants, "(measured"), 0u);
  // The picks' entry and, beside it, the optimized graph.
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(options_.plan_cache_dir)) files.push_back(e.path().extension().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{".json", ".rwgraph"}));

  const RunResult warm = run_fresh(x);
  EXPECT_GT(warm.seeded, 0u);
  EXPECT_EQ(count_with(warm.variants, "(measured"), 0u) << "nothing timed again";
  // The optimized graph read back is the one the passes made, with their records.
  EXPECT_EQ(warm.graph_hash, cold.graph_hash);
  EXPECT_GT(cold.pass_changes, 0u);
  EXPECT_EQ(warm.pass_changes, cold.pass_changes);
  // Every tuned step of the cold plan (measured, cached, or left at the default by a spent
  // budget) is a cached pick now.
  EXPECT_EQ(count_with(warm.variants, "(cached)"), count_with(cold.variants, "(measured") +
                                                       count_with(cold.variants, "(cached)") +
                                                       count_with(cold.variants, "budget is spent"));
  ASSERT_EQ(warm.outputs.size(), cold.outputs.size());
  for (std::size_t i = 0; i < cold.outputs.size(); ++i) {
    ASSERT_EQ(warm.outputs[i].nbytes(), cold.outputs[i].nbytes());
    EXPECT_EQ(std::memcmp(warm.outputs[i].raw_data(), cold.outputs[i].raw_data(), cold.outputs[i].nbytes()), 0)
        << "output " << i << ": the same picks give the same bits";
  }
  std::printf("plan cache: %zu picks seeded, %zu variants\n", warm.seeded, warm.variants.size());
}

TEST_F(PlanCacheRunner, AFileWithAPickNoKernelOffersIsRebuilt) {
  const Tensor x = redwood::testing::random_tensor(DType::kF32, {1, 3, 256, 288}, 0, 1, 6);
  run_fresh(x);
  const fs::path file = entry_file();
  nlohmann::json entry = nlohmann::json::parse(std::ifstream(file));
  ASSERT_FALSE(entry["picks"].empty());
  // Refused by every tuner: an unknown tile (conv, conv_nhwc), a zero vector width (depthwise_nhwc).
  nlohmann::json& first = entry["picks"].begin().value()[0];
  first["config"] = {{"tile", "no such tile"}, {"splits", 1}, {"reduce_in_kernel", false}, {"vec", 0}};
  std::ofstream(file) << entry.dump();

  const RunResult again = run_fresh(x);
  EXPECT_EQ(again.seeded, 0u) << "no pick of the file is used";
  EXPECT_GT(count_with(again.variants, "(measured"), 0u);
  const auto check = [](const std::string& tuner, const nlohmann::json& pick) { check_tuned_pick(tuner, pick, 0); };
  const runtime::EntryRead read = runtime::read_plan_cache_entry(file, nullptr, check);
  EXPECT_TRUE(read.entry.has_value()) << "rewritten whole: " << read.problem;
}

TEST(PlanCacheStreamingRunner, KeepsItsEntryToo) {
  RW_SKIP_WITHOUT_GPU();
  const fs::path dir = redwood::testing::temp_dir("plan-cache-stream");
  redwood::testing::ScopedEnv cache_dir("REDWOOD_CACHE_DIR", dir.c_str());
  // A fixed-shape convolution: the runner plans (and tunes) it on every slot when it is made.
  redwood::testing::OnnxBuilder b(13);
  b.input("x", onnx::TensorProto::FLOAT, {2, 32, 24, 24});
  b.initializer("w", redwood::testing::random_tensor(DType::kF32, {32, 32, 3, 3}, -0.5, 0.5, 9));
  auto& conv = b.node("Conv", {"x", "w"}, {"y"}, "conv");
  redwood::testing::OnnxBuilder::set_attr(conv, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  b.output("y", onnx::TensorProto::FLOAT, {2, 32, 24, 24});
  b.save(dir / "conv.onnx");
  RunnerConfig config;
  config.precision = "fp16";
  forget_tuned_picks();
  { auto runner = device_runner_registry().at("cuda").make(load_onnx(dir / "conv.onnx"), config); }
  ASSERT_TRUE(fs::is_directory(dir / "plans"));
  std::size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir / "plans")) {
    if (e.path().extension() != ".json") continue;  // beside it: the optimized graph (.rwgraph)
    ++entries;
    const runtime::EntryRead read = runtime::read_plan_cache_entry(e.path(), nullptr, {});
    ASSERT_TRUE(read.entry.has_value()) << read.problem;
    EXPECT_GT(read.entry->picks.size(), 0u);
    EXPECT_EQ(read.entry->model, "conv.onnx");
  }
  EXPECT_EQ(entries, 1u);
}

}  // namespace
}  // namespace redwood::cuda
