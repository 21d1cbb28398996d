// pipelines/pipeline_planner: a pipeline's two `device: auto` models placed together, on a
// stand-in accelerator (the CPU runner under another name, with chosen profiles: no GPU needed).
// Model A is a convolution, ten times faster on the accelerator; model B a chain of memory-bound
// Relus, barely faster there. Each alone takes the accelerator, which both then keep busy; together,
// B goes to the CPU and the pipeline's bottleneck drops. The decisions reach the models' placed
// runners, which then run on the decided devices and give the models' results.

#include "pipelines/pipeline_planner.hpp"

#include "core/onnx/onnx_import.hpp"
#include "runtime/cpu_runner.hpp"
#include "runtime/placed_runner.hpp"
#include "runtime/stand_in_accelerator.hpp"
#include "pipeline_text.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <cstdio>

namespace redwood {
namespace {

const char* const kAccel = testing::stand_in_accelerator();

runtime::PartitionOptions base_options() {
  runtime::PartitionOptions o;
  o.devices = {"cpu", kAccel};
  // The CPU: 10 GFLOPS, 10 GB/s; the accelerator: 100 GFLOPS, 15 GB/s, copies at 20 GB/s.
  o.profiles = {testing::stand_in_profile("cpu", 10, 10), testing::stand_in_profile(kAccel, 100, 15)};
  o.profiles[1].h2d_pinned_gbps = o.profiles[1].d2h_pinned_gbps = 20;
  o.use_analysis_times = false;  // the roofline alone: the same costs on every machine
  return o;
}

// x [N,16,32,32] -> conv 3x3 (16 -> 16) -> y: 4.7 MFLOP a row.
std::shared_ptr<const Graph> conv_model() {
  const auto dir = testing::temp_dir("pipeline_planner");
  testing::OnnxBuilder b(13);
  b.input("x", onnx::TensorProto::FLOAT, {-1, 16, 32, 32}, {"N"});
  b.initializer("w", testing::random_tensor(DType::kF32, {16, 16, 3, 3}, -0.2, 0.2, 1));
  auto& c = b.node("Conv", {"x", "w"}, {"y"}, "conv");
  testing::OnnxBuilder::set_attr(c, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  b.output("y", onnx::TensorProto::FLOAT, {-1, 16, 32, 32}, {"N"});
  b.save(dir / "a.onnx");
  return load_onnx(dir / "a.onnx");
}

// x [N,16,32,32] -> Relu -> Neg -> Relu -> Neg -> y: 512 KB moved a row, no arithmetic to speak of.
std::shared_ptr<const Graph> memory_bound_model() {
  const auto dir = testing::temp_dir("pipeline_planner");
  testing::OnnxBuilder b(13);
  b.input("x", onnx::TensorProto::FLOAT, {-1, 16, 32, 32}, {"N"});
  b.node("Relu", {"x"}, {"r1"}, "relu1");
  b.node("Neg", {"r1"}, {"n1"}, "neg1");
  b.node("Relu", {"n1"}, {"r2"}, "relu2");
  b.node("Neg", {"r2"}, {"y"}, "neg2");
  b.output("y", onnx::TensorProto::FLOAT, {-1, 16, 32, 32}, {"N"});
  b.save(dir / "b.onnx");
  return load_onnx(dir / "b.onnx");
}

struct Auto {
  ModelEntry entry;
  std::unique_ptr<ModelRunner> runner;
};

// A model entry as the pipeline makes it for `device: auto`, its placed runner, and the stage's
// feed and preparation (max_batch 2: the runner prepared at 1 and 2 rows).
Auto auto_model(std::shared_ptr<const Graph> graph, const std::string& name) {
  Auto a;
  a.entry.graph = std::move(graph);
  a.entry.device = "auto";
  a.entry.joint = std::make_shared<runtime::JointPlacement>();
  a.runner = runtime::make_placed_runner(a.entry.graph, base_options(), RunnerConfig{}, name, a.entry.joint);
  a.entry.joint->add_feed({"stage_" + name, 2, 5, 1});
  for (std::int64_t rows : {1, 2}) a.runner->prepare({{rows, 16, 32, 32}});
  return a;
}

TEST(PipelinePlanner, TwoAutoModelsPlacedTogetherDifferFromEachAlone) {
  Auto a = auto_model(conv_model(), "a");
  Auto b = auto_model(memory_bound_model(), "b");
  EXPECT_EQ(a.entry.joint->largest_shapes(), (std::vector<Shape>{{2, 16, 32, 32}}));
  EXPECT_EQ(a.runner->stats().batches, 0);  // nothing placed or run before the pipeline decides
  ModelTable models;
  models["a"] = a.entry;
  models["b"] = b.entry;
  const std::optional<PipelinePlan> plan = place_auto_models(models, 0, {}, base_options());
  ASSERT_TRUE(plan.has_value());
  ASSERT_EQ(plan->models, (std::vector<std::string>{"a", "b"}));
  const auto placement = [&](const runtime::PipelineChoice& c, std::size_t m) {
    return plan->problem.models[m].options[static_cast<std::size_t>(c.option[m])].placement;
  };
  // Alone, both take the accelerator; together, B runs on the CPU.
  EXPECT_EQ(placement(plan->result.alone, 0), kAccel);
  EXPECT_EQ(placement(plan->result.alone, 1), kAccel);
  EXPECT_EQ(placement(plan->result.best, 0), kAccel);
  EXPECT_EQ(placement(plan->result.best, 1), "cpu");
  EXPECT_TRUE(plan->result.exact);
  EXPECT_EQ(plan->result.alone.bottleneck, runtime::kGpu);
  EXPECT_LT(plan->result.best.peak_load_ms, 0.8 * plan->result.alone.peak_load_ms);
  const std::vector<std::string> lines = plan->lines();
  for (const auto& line : lines) std::printf("%s\n", line.c_str());  // the log's lines (docs/planner.md quotes them)
  ASSERT_GE(lines.size(), 5u);
  EXPECT_NE(lines[0].find("pipeline placement of 2 model(s), demand unpaced"), std::string::npos) << lines[0];
  EXPECT_NE(lines[2].find("model 'b': cpu, batch 2"), std::string::npos) << lines[2];
  EXPECT_NE(lines[2].find(fmt::format("placed alone: {}, batch 2", kAccel)), std::string::npos) << lines[2];
  EXPECT_NE(lines[3].find("chosen: utilization cpu 100 %"), std::string::npos) << lines[3];

  // The runners took the decisions: prepared at 1 and 2 rows on their devices, then run.
  // B, the bottleneck, runs batches of 2 (its launches shared); A, off it, batches of 1: the same
  // peak, and no wait for a second frame.
  EXPECT_EQ(b.entry.joint->batch_frames(8), 2);
  EXPECT_EQ(a.entry.joint->batch_frames(8), 1);
  EXPECT_NE(b.runner->description().find("pipeline placement: whole, batch 2 frame(s) of 2 rows"), std::string::npos)
      << b.runner->description();
  const Tensor x = testing::random_tensor(DType::kF32, {2, 16, 32, 32}, -1, 1, 7);
  for (Auto* m : {&a, &b}) {
    auto cpu = make_cpu_runner(m->entry.graph);
    const Tensor got = testing::run_one(*m->runner, x);
    const Tensor want = testing::run_one(*cpu, x);
    ASSERT_EQ(got.shape(), want.shape());
    for (std::int64_t i = 0; i < got.numel(); ++i) ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-4);
  }
  // The summary's line: the batches measured, against the prediction at the rows they had (here
  // the decided 2, so the decision's own figure).
  const runtime::PipelineOption& chosen = plan->problem.models[1].options[static_cast<std::size_t>(plan->result.best.option[1])];
  const std::string described = b.runner->description();
  EXPECT_NE(described.find("ms a batch of 2.0 rows on average"), std::string::npos) << described;
  EXPECT_NE(described.find(fmt::format(", predicted {:.3f} at those rows", chosen.batch_ms)), std::string::npos) << described;
}

TEST(PipelinePlanner, AModelWithoutShapesAtLoadIsPlacedAloneAndSaysWhy) {
  // Placed alone, a whole-device placement goes to the placement cache: a folder of the test's own.
  const testing::ScopedEnv cache("REDWOOD_CACHE_DIR", testing::temp_dir("pipeline-planner-cache").c_str());
  Auto a = auto_model(conv_model(), "a");
  ModelEntry b;
  b.graph = memory_bound_model();
  b.device = "auto";
  b.joint = std::make_shared<runtime::JointPlacement>();
  auto runner = runtime::make_placed_runner(b.graph, base_options(), RunnerConfig{}, "b", b.joint);
  b.joint->add_feed({"stage_b", 4, 5, -1});  // crops of an unknown count: nothing prepared
  ModelTable models{{"a", a.entry}, {"b", b}};
  const std::optional<PipelinePlan> plan = place_auto_models(models, 30, {}, base_options());
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->models, (std::vector<std::string>{"a"}));
  ASSERT_EQ(plan->alone.size(), 1u);
  EXPECT_EQ(plan->alone[0], "model 'b': placed alone: stage 'stage_b' does not know its input's shape at load");
  EXPECT_EQ(b.joint->batch_frames(4), 4);  // its stage keeps its own batch
  // It places alone at its first batch, as without a pipeline.
  const Tensor x = testing::random_tensor(DType::kF32, {3, 16, 32, 32}, -1, 1, 8);
  EXPECT_EQ(testing::run_one(*runner, x).shape(), x.shape());
  EXPECT_NE(runtime::placed_partition(*runner), nullptr);  // partitioned alone (a fresh cache)
  EXPECT_EQ(runner->description().find("pipeline placement"), std::string::npos) << runner->description();
}

TEST(PipelinePlanner, OptionsScaleFromTheAnalysedBatch) {
  const runtime::Partition p = runtime::partition_model(conv_model(), {{4, 16, 32, 32}}, base_options());
  const auto options = pipeline_options(p, {1, 2, 4}, 1, false, "fp32", nullptr);
  ASSERT_EQ(options.size(), 6u);  // cpu and the accelerator, at 1, 2 and 4 rows
  // On one device a batch's time is its busy time there plus the copies; per row it falls as the
  // launch is shared.
  const auto& cpu4 = options[2];
  EXPECT_EQ(cpu4.placement, "cpu");
  EXPECT_EQ(cpu4.rows, 4);
  EXPECT_NEAR(cpu4.batch_ms, cpu4.busy_ms[runtime::kCpuCores], 1e-12);
  EXPECT_NEAR(options[0].busy_ms[runtime::kCpuCores] * 4, cpu4.busy_ms[runtime::kCpuCores] + 3 * 0.001, 1e-9);
  const auto& accel1 = options[3];
  EXPECT_EQ(accel1.placement, kAccel);
  EXPECT_GT(accel1.busy_ms[runtime::kHostToGpu], 0);
  EXPECT_NEAR(accel1.batch_ms, accel1.busy_ms[runtime::kHostToGpu] + accel1.busy_ms[runtime::kGpu] +
                                   accel1.busy_ms[runtime::kGpuToHost], 1e-9);
  EXPECT_EQ(batch_candidates(6), (std::vector<int>{1, 2, 4, 6}));
  EXPECT_EQ(batch_candidates(1), (std::vector<int>{1}));
}

// A pipeline of one model; `service` and `model_key` are lines of those sections.
std::string one_model(const std::string& service, const std::string& model_key) {
  return "version: 1\nservice:\n  " + service + R"(
sources:
  - name: a
    type: synthetic
    frames: 2
models:
  face:
    path: models/face_detection_front_128x128_barracuda.onnx
    )" + model_key + R"(
stages:
  - name: pre
    type: preprocess
    model: face
    output: face_in
  - name: face
    type: infer
    model: face
    input: face_in
)";
}

TEST(PipelinePlanner, TheKeysAreCheckedWhereTheyAreWritten) {
  const Pipeline p(testing::pipeline_text(one_model("latency_limit_ms: 80\n  cpu_stage_ms: 3", "device: auto\n    rows_per_frame: 6")));
  EXPECT_DOUBLE_EQ(p.service().placement.latency_limit_ms, 80);
  EXPECT_DOUBLE_EQ(p.service().placement.cpu_stage_ms, 3);
  EXPECT_NE(testing::load_error(one_model("latency_limit_ms: -1", "device: auto")).find("latency_limit_ms: must be >= 0"),
            std::string::npos);
  EXPECT_NE(testing::load_error(one_model("cpu_stage_ms: -2", "device: auto")).find("cpu_stage_ms: must be >= 0"),
            std::string::npos);
  const std::string cpu = testing::load_error(one_model("queue: 2", "rows_per_frame: 6"));
  EXPECT_NE(cpu.find("rows_per_frame: is for the pipeline placement of device: auto models"), std::string::npos) << cpu;
  const std::string zero = testing::load_error(one_model("queue: 2", "device: auto\n    rows_per_frame: 0"));
  EXPECT_NE(zero.find("rows_per_frame: must be above 0"), std::string::npos) << zero;
}

}  // namespace
}  // namespace redwood
