// pipelines/pipeline_planner: a pipeline's two `device: auto` models placed together, on a
// stand-in accelerator (the CPU runner under another name, with chosen profiles: no GPU needed).
// Model A is a convolution, ten times faster on the accelerator; model B a chain of memory-bound
// Relus, barely faster there. Each alone takes the accelerator, which both then keep busy; together,
// B goes to the CPU and the pipeline's bottleneck drops. The decisions reach the models' placed
// runners, which then run on the decided devices and give the models' results.

#include "pipelines/pipeline_planner.hpp"

#include "core/graph/graph_hash.hpp"
#include "core/onnx/onnx_import.hpp"
#include "runtime/cpu_runner.hpp"
#include "runtime/partition_profile.hpp"
#include "runtime/partition_rows.hpp"
#include "runtime/placed_runner.hpp"
#include "runtime/placement_cache.hpp"
#include "runtime/stand_in_accelerator.hpp"
#include "pipeline_text.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

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

using testing::softmax_between_convs_model;

struct Auto {
  ModelEntry entry;
  std::unique_ptr<ModelRunner> runner;
};

// A model entry as the pipeline makes it for `device: auto` (its nodes `pinned`), its placed
// runner, and the stage's feed and preparation (max_batch 2: the runner prepared at 1 and 2 rows).
Auto auto_model(std::shared_ptr<const Graph> graph, const std::string& name,
                const runtime::PartitionOptions& base = base_options(), std::map<std::string, std::string> pinned = {}) {
  Auto a;
  a.entry.graph = std::move(graph);
  a.entry.device = "auto";
  a.entry.pinned = std::move(pinned);
  a.entry.joint = std::make_shared<runtime::JointPlacement>();
  a.runner = runtime::make_placed_runner(a.entry.graph, base, RunnerConfig{}, name, a.entry.joint);
  a.entry.joint->add_feed({"stage_" + name, 2, 5, 1});
  for (std::int64_t rows : {1, 2}) a.runner->prepare({{rows, 16, 32, 32}});
  return a;
}

TEST(PipelinePlanner, TwoAutoModelsPlacedTogetherDifferFromEachAlone) {
  const testing::ScopedEnv cache("REDWOOD_CACHE_DIR", testing::temp_dir("pipeline-planner-cache").c_str());
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

// Both models as a pipeline makes them, placed together with `history` (may be null) at `fps`.
struct Placed {
  Auto a, b;
  ModelTable models;
  std::optional<PipelinePlan> plan;
};
Placed place_both(const runtime::CostHistory* history, double fps = 0, int max_batch = 2) {
  Placed p;
  for (auto [slot, name] : {std::pair{&p.a, "a"}, std::pair{&p.b, "b"}}) {
    slot->entry.graph = std::string(name) == "a" ? conv_model() : memory_bound_model();
    slot->entry.device = "auto";
    slot->entry.joint = std::make_shared<runtime::JointPlacement>();
    slot->runner = runtime::make_placed_runner(slot->entry.graph, base_options(), RunnerConfig{}, name, slot->entry.joint);
    slot->entry.joint->add_feed({std::string("stage_") + name, max_batch, 5, 1});
    for (std::int64_t rows : {1, 2}) slot->runner->prepare({{rows, 16, 32, 32}});
    p.models[name] = slot->entry;
  }
  runtime::PartitionOptions base = base_options();
  base.history = history;
  p.plan = place_auto_models(p.models, fps, {}, base);
  return p;
}

const runtime::PipelineOption& chosen(const PipelinePlan& plan, std::size_t m) {
  return plan.problem.models[m].options[static_cast<std::size_t>(plan.result.best.option[m])];
}

// The key of model `graph`'s whole batch of `rows` rows on device `d` of the test's options.
std::string batch_key(const Graph& graph, std::size_t d, std::int64_t rows) {
  return runtime::CostHistory::model_key(graph_hash(graph), history_device(base_options(), d), "fp32",
                                         {TensorDesc{DType::kF32, {rows, 16, 32, 32}}});
}

TEST(PipelinePlanner, RunsRecordTheirBatchTimesAndTheNextPlacementTakesThem) {
  const auto dir = testing::temp_dir("pipeline-planner-history");
  const testing::ScopedEnv cache("REDWOOD_CACHE_DIR", dir.c_str());
  Placed first = place_both(nullptr);
  ASSERT_TRUE(first.plan.has_value());
  ASSERT_FALSE(first.plan->from_cache);
  // The runners run batches of 1 and 2 rows on their devices (b on the CPU runner); 2 batches of
  // 2 rows only for b, below the count a row count needs to be recorded.
  const Tensor one = testing::random_tensor(DType::kF32, {1, 16, 32, 32}, -1, 1, 3);
  const Tensor two = testing::random_tensor(DType::kF32, {2, 16, 32, 32}, -1, 1, 4);
  for (int i = 0; i < 3; ++i) {
    testing::run_one(*first.a.runner, one);
    testing::run_one(*first.a.runner, two);
    testing::run_one(*first.b.runner, one);
    if (i < 2) testing::run_one(*first.b.runner, two);
  }
  runtime::CostHistory history;
  EXPECT_EQ(record_batch_times(first.models, history), 3u);
  // Each sample the mean of its batches (copies and compute), as the summary counts them.
  const auto mean = [](const ModelRunner& r, std::int64_t rows) {
    const RunnerStats::RowsTimes t = r.stats().run_rows_ms.at(rows);  // a copy: stats() is one
    return t.ms / static_cast<double>(t.batches);
  };
  const std::string a_device = chosen(*first.plan, 0).placement;
  ASSERT_EQ(a_device, kAccel);
  ASSERT_EQ(chosen(*first.plan, 1).placement, "cpu");
  for (std::int64_t rows : {1, 2}) {
    const auto got = history.find(batch_key(*first.a.entry.graph, 1, rows));
    ASSERT_TRUE(got.has_value()) << rows;
    EXPECT_DOUBLE_EQ(*got, mean(*first.a.runner, rows));
  }
  EXPECT_DOUBLE_EQ(*history.find(batch_key(*first.b.entry.graph, 0, 1)), mean(*first.b.runner, 1));
  EXPECT_FALSE(history.find(batch_key(*first.b.entry.graph, 0, 2)).has_value());
  const std::string path = (dir / "history" / "costs.json").string();
  history.save(path);

  // A second load reads them: a's accelerator option takes the recorded times at the rows they
  // were measured at (b's CPU option at 1 row, its 2 rows the node costs scaled to that point), and
  // the cached entry, made without measured times, is not used.
  runtime::CostHistory back;
  back.load(path);
  Placed second = place_both(&back);
  ASSERT_TRUE(second.plan.has_value());
  EXPECT_FALSE(second.plan->from_cache);
  for (const runtime::PipelineOption& o : second.plan->problem.models[0].options) {
    if (o.placement != kAccel) {
      EXPECT_FALSE(o.measured);
      continue;
    }
    EXPECT_TRUE(o.measured);
    EXPECT_DOUBLE_EQ(o.batch_ms, *history.find(batch_key(*first.a.entry.graph, 1, static_cast<std::int64_t>(o.rows))));
  }
  for (const runtime::PipelineOption& o : second.plan->problem.models[1].options) {
    if (o.placement == "cpu" && o.rows == 1) {
      EXPECT_DOUBLE_EQ(o.batch_ms, mean(*first.b.runner, 1));
    }
    if (o.placement == "cpu" && o.rows == 2) {
      EXPECT_TRUE(o.measured);
      const auto& node1 = first.plan->problem.models[1].options[0];
      const auto& node2 = first.plan->problem.models[1].options[1];
      ASSERT_EQ(node2.rows, 2);
      EXPECT_NEAR(o.batch_ms, mean(*first.b.runner, 1) * node2.batch_ms / node1.batch_ms, 1e-9);
    }
  }
}

// A runner given a batch before the pipeline decided placed alone and keeps that placement: its
// batches are not the decision's, and only the runner that runs as decided is recorded.
TEST(PipelinePlanner, ARunnerThatPlacedAloneBeforeTheDecisionIsNotRecordedForIt) {
  const testing::ScopedEnv cache("REDWOOD_CACHE_DIR", testing::temp_dir("pipeline-planner-early").c_str());
  Auto a = auto_model(conv_model(), "a");
  auto early = runtime::make_placed_runner(a.entry.graph, base_options(), RunnerConfig{}, "a", a.entry.joint);
  const Tensor one = testing::random_tensor(DType::kF32, {1, 16, 32, 32}, -1, 1, 5);
  testing::run_one(*early, one);  // no decision yet: places alone
  const std::optional<PipelinePlan> plan = place_auto_models({{"a", a.entry}}, 0, {}, base_options());
  ASSERT_TRUE(plan.has_value());
  ASSERT_TRUE(a.entry.joint->decision()->history_key);
  for (int i = 0; i < 3; ++i) {
    testing::run_one(*a.runner, one);
    testing::run_one(*early, one);
    testing::run_one(*early, one);
  }
  EXPECT_EQ(early->stats().batches, 7);
  runtime::CostHistory history;
  EXPECT_EQ(record_batch_times({{"a", a.entry}}, history), 1u);
  const RunnerStats decided = a.runner->stats();
  const RunnerStats::RowsTimes& t = decided.run_rows_ms.at(1);
  EXPECT_EQ(t.batches, 3);
  const double overlap = decided.device_overlap();
  EXPECT_DOUBLE_EQ(*history.find(a.entry.joint->decision()->history_key(1)), t.ms / overlap / 3.0);
}

TEST(PipelinePlanner, MeasuredTimesInterpolateInRows) {
  runtime::RowsCurve c;
  c.add(2, 3.0);
  c.add(8, 6.0);
  c.add(4, 4.0);
  EXPECT_DOUBLE_EQ(c.at(3), 3.5);  // between 2 and 4: f + slope * r through them
  EXPECT_DOUBLE_EQ(c.at(6), 5.0);
  EXPECT_DOUBLE_EQ(c.at(16), 10.0);  // beyond: the last two's line
  EXPECT_DOUBLE_EQ(c.at(1), 2.5);    // below: the first two's
  c.add(4, 2.0);                     // replaced; the first two now fall with rows
  EXPECT_DOUBLE_EQ(c.at(1), 3.0);    // no cheaper below the first point than at it
  EXPECT_DOUBLE_EQ(c.at(0.5), 3.0);

  // Points at 1 and 3 rows: the option at 2 rows is the line through them.
  const auto graph = conv_model();
  runtime::CostHistory h;
  h.record(batch_key(*graph, 0, 1), 10.0);
  h.record(batch_key(*graph, 0, 3), 14.0);
  h.record(batch_key(*graph, 0, 3), 20.0);  // the median of 14, 20
  const auto points = h.model_times(graph_hash(*graph), history_device(base_options(), 0), "fp32",
                                    {TensorDesc{DType::kF32, {2, 16, 32, 32}}}, 2);
  EXPECT_EQ(points, (std::map<std::int64_t, double>{{1, 10.0}, {3, 17.0}}));
  const runtime::Partition p = runtime::partition_model(graph, {{2, 16, 32, 32}}, base_options());
  MeasuredCurves measured;
  for (const auto& [rows, ms] : points) measured["cpu"].add(static_cast<double>(rows), ms);
  const auto options = pipeline_options(p, {1, 2, 4}, 1, false, nullptr, measured);
  ASSERT_EQ(options[1].placement, "cpu");
  EXPECT_DOUBLE_EQ(options[0].batch_ms, 10.0);
  EXPECT_DOUBLE_EQ(options[1].batch_ms, 13.5);
  EXPECT_DOUBLE_EQ(options[2].batch_ms, 20.5);  // extrapolated from the two
  EXPECT_DOUBLE_EQ(options[1].busy_ms[runtime::kCpuCores], 13.5);
  EXPECT_FALSE(options[3].measured);  // the accelerator: node costs
}

TEST(PipelinePlanner, InjectedHistoriesPickWhatTheMeasuredTimesFavour) {
  const testing::ScopedEnv cache("REDWOOD_CACHE_DIR", testing::temp_dir("pipeline-planner-injected").c_str());
  // On node costs, a takes the accelerator and b the CPU (TwoAutoModelsPlacedTogether...). Runs
  // measured a slow on the accelerator and b slow on the CPU: each goes to the other device.
  const auto a = conv_model();
  const auto b = memory_bound_model();
  {
    runtime::CostHistory h;
    for (std::int64_t rows : {1, 2}) {
      h.record(batch_key(*a, 1, rows), 40.0 * static_cast<double>(rows));
      h.record(batch_key(*b, 0, rows), 50.0 * static_cast<double>(rows));
    }
    Placed p = place_both(&h);
    ASSERT_TRUE(p.plan.has_value());
    EXPECT_EQ(chosen(*p.plan, 0).placement, "cpu");
    EXPECT_EQ(chosen(*p.plan, 1).placement, kAccel);
    EXPECT_FALSE(chosen(*p.plan, 0).measured);
    EXPECT_FALSE(chosen(*p.plan, 1).measured);
  }
  // Measured fast where the node costs put them: they stay, and the log and the summary say the
  // predictions came from measured batches.
  runtime::CostHistory h;
  for (std::int64_t rows : {1, 2}) {
    h.record(batch_key(*a, 1, rows), 0.001 * static_cast<double>(rows));
    h.record(batch_key(*b, 0, rows), 0.002 + 0.001 * static_cast<double>(rows));
  }
  Placed p = place_both(&h);
  ASSERT_TRUE(p.plan.has_value());
  ASSERT_EQ(chosen(*p.plan, 0).placement, kAccel);
  ASSERT_EQ(chosen(*p.plan, 1).placement, "cpu");
  EXPECT_TRUE(chosen(*p.plan, 0).measured);
  EXPECT_TRUE(chosen(*p.plan, 1).measured);
  const std::vector<std::string> lines = p.plan->lines();
  for (const auto& line : lines) std::printf("%s\n", line.c_str());
  EXPECT_NE(lines[2].find("model 'b': cpu, batch 2 (2 rows), 0.004 ms a batch (measured)"), std::string::npos) << lines[2];
  const Tensor x = testing::random_tensor(DType::kF32, {2, 16, 32, 32}, -1, 1, 5);
  testing::run_one(*p.b.runner, x);
  const std::string described = p.b.runner->description();
  EXPECT_NE(described.find("predicted 0.004 ms a batch (from measured batches)"), std::string::npos) << described;
  EXPECT_NE(described.find("predicted 0.004 at those rows (from measured batches)"), std::string::npos) << described;
}

TEST(PipelinePlanner, ACorruptHistoryIsIgnoredWithALogLine) {
  const auto dir = testing::temp_dir("pipeline-planner-corrupt");
  const testing::ScopedEnv cache("REDWOOD_CACHE_DIR", dir.c_str());
  const auto path = dir / "costs.json";
  std::ofstream(path) << R"({"format": 1, "entries": {"model 1|cpu|fp32|f32[1,16,32,32]": [-4]}})";
  runtime::CostHistory h;
  const testing::LogCapture log;
  h.load(path.string());
  EXPECT_NE(log.text().find("ignoring the cost history, it is not valid"), std::string::npos) << log.text();
  EXPECT_EQ(h.size(), 0u);
  Placed p = place_both(&h);
  ASSERT_TRUE(p.plan.has_value());
  for (const auto& model : p.plan->problem.models) {
    for (const auto& o : model.options) EXPECT_FALSE(o.measured);
  }
}

TEST(PipelinePlanner, TheDecisionIsKeptAndReadBackWithoutAnalysis) {
  const testing::ScopedEnv cache("REDWOOD_CACHE_DIR", testing::temp_dir("pipeline-planner-kept").c_str());
  Placed first = place_both(nullptr);
  ASSERT_TRUE(first.plan.has_value());
  ASSERT_FALSE(first.plan->from_cache);
  EXPECT_NE(first.a.entry.joint->decision()->partition, nullptr);  // analysed

  Placed second = place_both(nullptr);
  ASSERT_TRUE(second.plan.has_value());
  EXPECT_TRUE(second.plan->from_cache);
  const std::vector<std::string> lines = second.plan->lines();
  ASSERT_GE(lines.size(), 2u);
  EXPECT_NE(lines[0].find("pipeline placement read from the placement cache ("), std::string::npos) << lines[0];
  EXPECT_EQ(std::vector<std::string>(lines.begin() + 1, lines.end()), first.plan->lines());
  for (auto [was, is] : {std::pair{&first.a, &second.a}, std::pair{&first.b, &second.b}}) {
    const auto then = was->entry.joint->decision();
    const auto now = is->entry.joint->decision();
    EXPECT_EQ(now->partition, nullptr);  // nothing analysed
    EXPECT_EQ(runtime::placed_partition(*is->runner), nullptr);
    EXPECT_EQ(now->device, then->device);
    EXPECT_EQ(now->batch_frames, then->batch_frames);
    EXPECT_DOUBLE_EQ(now->predicted_batch_ms, then->predicted_batch_ms);
    EXPECT_EQ(now->note, then->note);
    EXPECT_DOUBLE_EQ(now->predicted_at.at(1.5), then->predicted_at.at(1.5));
    // The runner runs where it was decided and computes the model.
    const Tensor x = testing::random_tensor(DType::kF32, {2, 16, 32, 32}, -1, 1, 9);
    auto cpu = make_cpu_runner(is->entry.graph);
    const Tensor got = testing::run_one(*is->runner, x);
    const Tensor want = testing::run_one(*cpu, x);
    for (std::int64_t i = 0; i < got.numel(); ++i) ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-4);
    EXPECT_NE(is->runner->description().find(fmt::format(", predicted {:.3f} at those rows", then->predicted_at.at(2))),
              std::string::npos)
        << is->runner->description();
  }

  // Another demand, another batch limit: other keys, analysed again.
  EXPECT_FALSE(place_both(nullptr, 30).plan->from_cache);
  EXPECT_FALSE(place_both(nullptr, 0, 4).plan->from_cache);
  EXPECT_TRUE(place_both(nullptr).plan->from_cache);
  // Another input shape: another key.
  {
    Auto a = auto_model(conv_model(), "a");
    Auto b = auto_model(memory_bound_model(), "b");
    b.runner->prepare({{3, 16, 32, 32}});
    const auto plan = place_auto_models({{"a", a.entry}, {"b", b.entry}}, 0, {}, base_options());
    EXPECT_FALSE(plan->from_cache);
  }

  // A damaged entry, or one for another key (another build's, whose key differs), is logged and
  // placed again, then replaced. In a folder of its own, the one entry.
  const auto damaged = testing::temp_dir("pipeline-planner-damaged");
  cache.set(damaged.c_str());
  EXPECT_FALSE(place_both(nullptr).plan->from_cache);
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(damaged / "placements")) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  const std::filesystem::path file = files[0];
  EXPECT_EQ(file.filename().string().rfind("pipeline-", 0), 0u) << file;
  std::string entry;
  {
    std::ifstream in(file);
    entry.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::ofstream(file) << entry.substr(0, entry.size() / 2);
  {
    const testing::LogCapture log;
    EXPECT_FALSE(place_both(nullptr).plan->from_cache);
    EXPECT_NE(log.text().find("not used"), std::string::npos) << log.text();
  }
  EXPECT_TRUE(place_both(nullptr).plan->from_cache);  // replaced by the placement made again
  nlohmann::json j = nlohmann::json::parse(entry);
  j["key"] = j["key"].get<std::string>() + "; another build";
  std::ofstream(file) << j.dump();
  {
    const testing::LogCapture log;
    EXPECT_FALSE(place_both(nullptr).plan->from_cache);
    EXPECT_NE(log.text().find("it is for another key"), std::string::npos) << log.text();
  }
  EXPECT_TRUE(place_both(nullptr).plan->from_cache);
}

// A model the pipeline splits: its nodes' devices are kept, and a restart cuts it again there
// (one run for its values' shapes; nothing timed, no placer) and runs it split.
TEST(PipelinePlanner, ASplitDecisionIsKeptAndCutAgainWhereItWasPlaced) {
  const auto folder = testing::temp_dir("pipeline-planner-kept-split");
  const testing::ScopedEnv cache("REDWOOD_CACHE_DIR", folder.c_str());
  const auto graph = softmax_between_convs_model();
  const auto place = [&] {
    Auto s = auto_model(graph, "s");
    const auto plan = place_auto_models({{"s", s.entry}}, 0, {}, base_options());
    return std::pair{std::move(s), plan};
  };
  auto [first, first_plan] = place();
  ASSERT_TRUE(first_plan.has_value());
  EXPECT_FALSE(first_plan->from_cache);
  ASSERT_EQ(chosen(*first_plan, 0).placement, "split");
  const auto then = first.entry.joint->decision();
  ASSERT_TRUE(then->device.empty());
  ASSERT_NE(then->partition, nullptr);

  auto [second, second_plan] = place();
  ASSERT_TRUE(second_plan.has_value());
  EXPECT_TRUE(second_plan->from_cache);
  const auto now = second.entry.joint->decision();
  EXPECT_TRUE(now->device.empty());
  ASSERT_NE(now->partition, nullptr);  // cut again where it was placed
  EXPECT_EQ(now->partition->placement.device, then->partition->placement.device);
  EXPECT_EQ(now->partition->segments.size(), then->partition->segments.size());
  EXPECT_EQ(now->batch_frames, then->batch_frames);
  EXPECT_DOUBLE_EQ(now->predicted_batch_ms, then->predicted_batch_ms);
  EXPECT_NE(runtime::placed_partition(*first.runner), nullptr);
  EXPECT_EQ(runtime::placed_partition(*second.runner), nullptr);  // cut again: no costs
  EXPECT_EQ(second.runner->segment_stats().size(), now->partition->segments.size());  // runs split
  // The summary's segment predictions, at the analysed shape and against rows: made from the
  // first's costs, kept, read back.
  ASSERT_EQ(then->segment_ms.size(), then->partition->segments.size());
  EXPECT_EQ(then->segment_ms, runtime::predicted_segment_ms(*then->partition));
  EXPECT_EQ(now->segment_ms, then->segment_ms);
  const std::vector<runtime::RowsCurve> curves = runtime::segment_curves(*then->partition, nullptr);
  ASSERT_EQ(then->segment_at.size(), curves.size());
  ASSERT_EQ(now->segment_at.size(), curves.size());
  const auto predicted = runtime::placed_segment_predictions(*second.runner);
  ASSERT_TRUE(predicted.has_value());
  EXPECT_EQ(predicted->ms, then->segment_ms);
  EXPECT_EQ(predicted->at, shape_str(then->partition->analysis.input_shapes.at(0)));
  ASSERT_EQ(predicted->at_rows.size(), curves.size());
  for (std::size_t k = 0; k < curves.size(); ++k) {
    EXPECT_EQ(then->segment_at[k].points, curves[k].points) << "segment " << k;
    EXPECT_EQ(now->segment_at[k].points, curves[k].points) << "segment " << k;
    EXPECT_EQ(predicted->at_rows[k].points, curves[k].points) << "segment " << k;
  }
  const Tensor x = testing::random_tensor(DType::kF32, {2, 16, 32, 32}, -1, 1, 11);
  auto cpu = make_cpu_runner(graph);
  const Tensor got = testing::run_one(*second.runner, x);
  const Tensor want = testing::run_one(*cpu, x);
  ASSERT_EQ(got.shape(), want.shape());
  for (std::int64_t i = 0; i < got.numel(); ++i) ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-4);
  // The two batch sizes prepared ran through the split uncounted: its stats and its segments' are
  // the one batch run (what the summary and the cost history read).
  EXPECT_EQ(second.runner->stats().batches, 1);
  for (const auto& s : second.runner->segment_stats()) EXPECT_EQ(s.batches, 1) << s.description;
  // With a batch of 1 row more, each segment's line sets its prediction at the batches' 1.5 rows
  // on average (the curve between 1 and 2 rows, below the prediction at the analysed 2) beside
  // the one at the analysed rows.
  ASSERT_EQ(runtime::analysed_rows(*then->partition), 2);
  testing::run_one(*second.runner, testing::random_tensor(DType::kF32, {1, 16, 32, 32}, -1, 1, 12));
  const std::vector<RunnerStats> segments = second.runner->segment_stats();
  ASSERT_EQ(segments.size(), curves.size());
  for (std::size_t k = 0; k < segments.size(); ++k) {
    EXPECT_LT(curves[k].at(1.5), then->segment_ms[k]) << "segment " << k;
    const std::string line = fmt::format("predicted {:.3f} at {} and {:.3f} at the batches' 1.5 rows", then->segment_ms[k],
                                         predicted->at, curves[k].at(1.5));
    EXPECT_NE(segments[k].description.find(line), std::string::npos) << segments[k].description;
  }

  // A kept split that does not fit the model (here the Softmax put on the accelerator, which
  // cannot run it) is not used: the pipeline is placed again, and the entry replaced.
  std::filesystem::path file;
  for (const auto& e : std::filesystem::directory_iterator(folder / "placements")) file = e.path();
  nlohmann::json j = nlohmann::json::parse(std::ifstream(file));
  ASSERT_TRUE(j["models"][0].contains("nodes"));
  for (auto& node : j["models"][0]["nodes"]) node = kAccel;
  std::ofstream(file) << j.dump();
  {
    const testing::LogCapture log;
    auto [again, again_plan] = place();
    EXPECT_FALSE(again_plan->from_cache);
    EXPECT_NE(log.text().find("its split does not fit the model"), std::string::npos) << log.text();
  }
  auto [last, last_plan] = place();
  EXPECT_TRUE(last_plan->from_cache);

  // A kept split with a prediction too few for its segments does not stand either,
  j = nlohmann::json::parse(std::ifstream(file));
  j["models"][0]["segment_ms"].erase(0);
  j["models"][0]["segment_at"].erase(0);
  std::ofstream(file) << j.dump();
  {
    const testing::LogCapture log;
    auto [fewer, fewer_plan] = place();
    EXPECT_FALSE(fewer_plan->from_cache);
    EXPECT_NE(log.text().find("curve(s) kept for"), std::string::npos) << log.text();
  }
  // nor one without its predictions against rows.
  j = nlohmann::json::parse(std::ifstream(file));
  ASSERT_TRUE(j["models"][0].contains("segment_at"));
  j["models"][0].erase("segment_at");
  std::ofstream(file) << j.dump();
  const testing::LogCapture log;
  auto [no_curves, no_curves_plan] = place();
  EXPECT_FALSE(no_curves_plan->from_cache);
  EXPECT_NE(log.text().find("without a curve against rows for each"), std::string::npos) << log.text();
}

// A split's host segments run on the threads chosen for them while placing (timed on this host).
// Its runs keep those counts in the history beside the segments' times, so that the next
// placement runs each segment on the threads its times were measured on instead of timing its
// thread counts anew; once, since the history's node entries key the pipeline's kept placement.
TEST(PipelinePlanner, ASplitsRunsKeepItsHostSegmentsThreadsForTheNextPlacement) {
  const testing::ScopedEnv cache("REDWOOD_CACHE_DIR", testing::temp_dir("pipeline-planner-split-threads").c_str());
  const auto graph = softmax_between_convs_model();
  runtime::CostHistory history;
  runtime::PartitionOptions base = base_options();
  base.use_analysis_times = true;  // the host segments timed here, each at the threads it runs best on
  base.history = &history;
  const auto place = [&] {
    // The convolutions pinned to the accelerator: the split, whatever this host's times.
    Auto s = auto_model(graph, "s", base, {{"conv1", kAccel}, {"conv2", kAccel}});
    auto plan = place_auto_models({{"s", s.entry}}, 0, {}, base);
    return std::pair{std::move(s), std::move(plan)};
  };
  auto [first, first_plan] = place();
  ASSERT_TRUE(first_plan.has_value());
  ASSERT_EQ(chosen(*first_plan, 0).placement, "split");
  const runtime::Partition& part = *first.entry.joint->decision()->partition;
  std::vector<std::string> host_cuts;
  for (const runtime::Segment& s : part.segments) {
    if (s.device != 0) continue;
    ASSERT_GT(s.threads, 0) << "a host segment's threads are chosen while placing";
    host_cuts.push_back(part.cut_key(s));
    EXPECT_FALSE(history.find(runtime::CostHistory::host_threads_key(host_cuts.back())).has_value());
  }
  ASSERT_EQ(host_cuts.size(), 1u);
  // Its accelerator segments timed at the rows of the batch sizes tried below the analysed rows
  // (the curves the split's options are costed on); the host's left to its nodes.
  ASSERT_GT(runtime::analysed_rows(part), 1);
  for (const runtime::Segment& s : part.segments) {
    const auto it = part.device_row_times.find(part.cut_key(s));
    if (s.device == 0) {
      EXPECT_EQ(it, part.device_row_times.end());
      continue;
    }
    ASSERT_NE(it, part.device_row_times.end());
    EXPECT_EQ(it->second.begin()->first, 1);
    EXPECT_LT(it->second.rbegin()->first, runtime::analysed_rows(part));
  }
  for (int i = 0; i < 3; ++i) testing::run_one(*first.runner, testing::random_tensor(DType::kF32, {2, 16, 32, 32}, -1, 1, 50 + i));
  EXPECT_EQ(record_batch_times({{"s", first.entry}}, history), part.segments.size() + 1) << "batch times alone are counted";
  const std::vector<int> threads = part.host_segment_threads();
  ASSERT_EQ(threads.size(), 1u);
  EXPECT_EQ(history.find(runtime::CostHistory::host_threads_key(host_cuts[0])), static_cast<double>(threads[0]));
  // Recorded again, the same count adds nothing the placement's key would see.
  const std::uint64_t node_entries = history.node_entries_hash();
  record_batch_times({{"s", first.entry}}, history);
  EXPECT_EQ(history.node_entries_hash(), node_entries);

  // The next placement runs the segment on them, whatever timing them anew would choose: here a
  // count none would (the history's choice moved to one thread over three records).
  const int other = threads[0] == 1 ? 2 : 1;
  for (int i = 0; i < 3; ++i) history.record(runtime::CostHistory::host_threads_key(host_cuts[0]), other);
  auto [second, second_plan] = place();
  ASSERT_TRUE(second_plan.has_value());
  EXPECT_FALSE(second_plan->from_cache);
  ASSERT_EQ(chosen(*second_plan, 0).placement, "split");
  EXPECT_EQ(second.entry.joint->decision()->partition->host_segment_threads(), std::vector<int>{other});
}

// A split's runs record its batches, and each segment's compute, by the rows they ran. The next
// start places again (measured times where there were none) and takes the split's batch time
// and its segments' curves from them; the start after reads that placement back, with them.
TEST(PipelinePlanner, ASplitsRunsRecordItsBatchesAndSegmentsByRowsAndTheNextStartPredictsFromThem) {
  const testing::ScopedEnv cache("REDWOOD_CACHE_DIR", testing::temp_dir("pipeline-planner-split-history").c_str());
  const auto graph = softmax_between_convs_model();
  runtime::CostHistory history;
  runtime::PartitionOptions base = base_options();
  // A CPU far slower than the one the tests run on: the split stays the choice once its
  // batches are measured here.
  base.profiles[0] = testing::stand_in_profile("cpu", 0.1, 0.1);
  base.history = &history;
  const auto place = [&] {
    Auto s = auto_model(graph, "s", base);
    auto plan = place_auto_models({{"s", s.entry}}, 0, {}, base);
    return std::pair{std::move(s), std::move(plan)};
  };
  auto [first, first_plan] = place();
  ASSERT_TRUE(first_plan.has_value());
  ASSERT_FALSE(first_plan->from_cache);
  ASSERT_EQ(chosen(*first_plan, 0).placement, "split");
  const auto decided = first.entry.joint->decision();
  ASSERT_TRUE(decided->history_key);
  const runtime::Partition& part = *decided->partition;
  const std::size_t segments = part.segments.size();
  ASSERT_GE(segments, 3u);
  for (int i = 0; i < 3; ++i) {
    for (std::int64_t rows : {1, 2}) {
      testing::run_one(*first.runner, testing::random_tensor(DType::kF32, {rows, 16, 32, 32}, -1, 1, 30 + i));
    }
  }
  EXPECT_EQ(record_batch_times({{"s", first.entry}}, history), 2 * (segments + 1));
  // The split's batch, copies and compute, as the summary counts it; each segment's compute. The
  // two convolutions' segments do the same work (the same ops at the same shapes, the same values
  // crossing), timed alone under one cut key, but run at different places in the split: each
  // one's times are kept under its own key.
  ASSERT_EQ(part.cut_key(part.segments[0]), part.cut_key(part.segments[segments - 1]));
  ASSERT_NE(part.ran_key(part.segments[0]), part.ran_key(part.segments[segments - 1]));
  std::map<std::int64_t, double> batch;
  std::map<std::string, std::vector<double>> samples;
  const RunnerStats whole = first.runner->stats();
  const std::vector<RunnerStats> parts = first.runner->segment_stats();
  ASSERT_EQ(parts.size(), segments);
  const auto key = [&](std::size_t k, std::int64_t rows) {
    return runtime::CostHistory::segment_rows_key(part.ran_key(part.segments[k]), rows);
  };
  for (std::int64_t rows : {1, 2}) {
    const RunnerStats::RowsTimes& t = whole.run_rows_ms.at(rows);
    batch[rows] = t.ms / static_cast<double>(t.batches);
    EXPECT_DOUBLE_EQ(*history.find(decided->history_key(rows)), batch[rows]) << rows << " rows";
    for (std::size_t k = 0; k < segments; ++k) {
      const RunnerStats::RowsTimes& st = parts[k].run_rows_ms.at(rows);
      EXPECT_EQ(st.batches, 3) << "segment " << k;
      samples[key(k, rows)].push_back(st.compute_ms / static_cast<double>(st.batches));
    }
  }
  std::vector<std::map<std::int64_t, double>> segment(segments);
  for (std::int64_t rows : {1, 2}) {
    for (std::size_t k = 0; k < segments; ++k) {
      const std::vector<double>& v = samples.at(key(k, rows));
      ASSERT_EQ(v.size(), 1u) << "segment " << k << ": its own key";
      segment[k][rows] = v.front();
      const auto got = history.find(key(k, rows));
      ASSERT_TRUE(got.has_value()) << "segment " << k << " at " << rows << " rows";
      EXPECT_NEAR(*got, segment[k][rows], 1e-12) << "segment " << k << " at " << rows << " rows";
    }
  }
  // The next start: placed again, the split's option from its measured batches, its segments'
  // curves through their measured times.
  const auto check = [&](const runtime::PlacementDecision& d) {
    ASSERT_TRUE(d.device.empty());
    ASSERT_TRUE(d.history_key);
    EXPECT_EQ(d.history_key(2), decided->history_key(2));
    ASSERT_EQ(d.segment_at.size(), segments);
    for (std::size_t k = 0; k < segments; ++k) {
      for (std::int64_t rows : {1, 2}) EXPECT_NEAR(d.segment_at[k].at(static_cast<double>(rows)), segment[k][rows], 1e-12);
    }
  };
  auto [second, second_plan] = place();
  ASSERT_TRUE(second_plan.has_value());
  EXPECT_FALSE(second_plan->from_cache);
  int splits = 0;
  for (const runtime::PipelineOption& o : second_plan->problem.models[0].options) {
    if (o.placement != "split") {
      EXPECT_FALSE(o.measured);
      continue;
    }
    ++splits;
    EXPECT_TRUE(o.measured);
    EXPECT_DOUBLE_EQ(o.batch_ms, batch.at(static_cast<std::int64_t>(o.rows))) << o.rows << " rows";
  }
  EXPECT_EQ(splits, 2);
  ASSERT_EQ(chosen(*second_plan, 0).placement, "split");
  check(*second.entry.joint->decision());
  // Runs since moved the segments' times (1.5x, three samples each: the median moves) and left
  // the split's batches as they were, so the placement stands. The start after reads it back
  // with its curves through the times the history holds now, and a batch's segments each say
  // their time at its rows.
  for (std::size_t k = 0; k < segments; ++k) {
    for (std::int64_t rows : {1, 2}) {
      const double moved = segment[k][rows] * 1.5;
      for (int i = 0; i < 3; ++i) history.record(key(k, rows), moved);
      segment[k][rows] = moved;
    }
  }
  auto [third, third_plan] = place();
  ASSERT_TRUE(third_plan.has_value());
  EXPECT_TRUE(third_plan->from_cache);
  check(*third.entry.joint->decision());
  for (int i = 0; i < 3; ++i) {
    testing::run_one(*third.runner, testing::random_tensor(DType::kF32, {2, 16, 32, 32}, -1, 1, 40 + i));
  }
  const std::vector<RunnerStats> lines = third.runner->segment_stats();
  ASSERT_EQ(lines.size(), segments);
  for (std::size_t k = 0; k < segments; ++k) {
    const std::string line = fmt::format("{:.3f} at the batches' 2.0 rows", segment[k][2]);
    EXPECT_NE(lines[k].description.find(line), std::string::npos) << lines[k].description;
  }
  // The kept split's runs are recorded again, under the keys the first start's were: the split's
  // batch and each segment at 2 rows, and no key the history did not hold.
  const std::size_t keys = history.size();
  EXPECT_EQ(record_batch_times({{"s", third.entry}}, history), segments + 1);
  EXPECT_EQ(history.size(), keys);
}

// A split's runs in a pipeline also measure what its batches take beyond their segments' compute
// and crossings: the pipeline's hand-over a segment on this host. A split no run measured (a first
// start, a new cut) is predicted with it instead of the hand-over learned one batch at a time.
TEST(PipelinePlanner, ASplitsRunsLearnThePipelinesHandOverThatPredictsASplitNotMeasuredYet) {
  const testing::ScopedEnv cache("REDWOOD_CACHE_DIR", testing::temp_dir("pipeline-planner-handover").c_str());
  const auto graph = softmax_between_convs_model();
  runtime::CostHistory history;
  runtime::PartitionOptions base = base_options();
  base.profiles[0] = testing::stand_in_profile("cpu", 0.1, 0.1);  // the split stays the choice
  base.history = &history;
  const auto place = [&](runtime::CostHistory* h) {
    // Each in a cache folder of its own: the placement cache's key does not see a run's samples.
    const testing::ScopedEnv own("REDWOOD_CACHE_DIR", testing::temp_dir("pipeline-planner-handover").c_str());
    runtime::PartitionOptions options = base;
    options.history = h;
    Auto s = auto_model(graph, "s", options);
    auto plan = place_auto_models({{"s", s.entry}}, 0, {}, options);
    return std::pair{std::move(s), std::move(plan)};
  };
  auto [first, first_plan] = place(&history);
  ASSERT_TRUE(first_plan.has_value());
  ASSERT_EQ(chosen(*first_plan, 0).placement, "split");
  const runtime::Partition& part = *first.entry.joint->decision()->partition;
  const std::size_t segments = part.segments.size();
  ASSERT_GE(segments, 3u);
  const std::string key = runtime::CostHistory::pipeline_handover_key(part.profiles[0]);
  EXPECT_FALSE(history.find(key).has_value());
  for (int i = 0; i < 3; ++i) {
    for (std::int64_t rows : {1, 2}) testing::run_one(*first.runner, testing::random_tensor(DType::kF32, {rows, 16, 32, 32}, -1, 1, 60 + i));
  }
  const std::uint64_t node_entries = history.node_entries_hash();
  record_batch_times({{"s", first.entry}}, history);
  // One sample a row count: the batch's mean beyond its segments' mean compute and the crossings
  // at those rows, shared among the segments.
  const RunnerStats whole = first.runner->stats();
  const std::vector<RunnerStats> parts = first.runner->segment_stats();
  ASSERT_EQ(parts.size(), segments);
  std::vector<double> samples;
  for (std::int64_t rows : {1, 2}) {
    const RunnerStats::RowsTimes& t = whole.run_rows_ms.at(rows);
    std::vector<runtime::RowsCurve> compute(segments);
    for (std::size_t k = 0; k < segments; ++k) {
      const RunnerStats::RowsTimes& st = parts[k].run_rows_ms.at(rows);
      compute[k].add(static_cast<double>(rows), st.compute_ms / static_cast<double>(st.batches) / parts[k].device_overlap());
    }
    const double rest = t.ms / static_cast<double>(t.batches) - runtime::split_latency_at_rows(part, compute, static_cast<double>(rows), 0.0);
    samples.push_back(std::max(0.0, rest) / static_cast<double>(segments));
  }
  const auto learned = history.find(key);
  ASSERT_TRUE(learned.has_value());
  EXPECT_NEAR(*learned, (samples[0] + samples[1]) / 2, 1e-9);
  // The run's summary says how much of a batch went between its segments (the batch's mean less
  // each segment's copies and compute a batch) and where: staging the inputs (the split's copy
  // in), in the segments' runners beyond their copies and compute, from one segment to the next
  // (the rest), splitting the outputs (its copy out).
  const double b = static_cast<double>(whole.batches);
  double between = (whole.copy_in_ms + whole.compute_ms + whole.copy_out_ms) / b;
  double beyond = 0, submits = 0;
  for (const RunnerStats& st : parts) {
    const double ms = (st.copy_in_ms + st.compute_ms + st.copy_out_ms) / static_cast<double>(st.batches);
    between -= ms;
    beyond += std::max(0.0, (st.handover_submit_ms + st.handover_after_ms) / static_cast<double>(st.batches) - ms);
    submits += st.handover_submit_ms / static_cast<double>(st.batches);
  }
  between = std::max(0.0, between);
  const double hops = std::max(0.0, between - whole.copy_in_ms / b - beyond - whole.copy_out_ms / b);
  const std::string line = fmt::format(
      "; {:.3f} ms of it between its segments ({:.3f} a segment: {:.3f} staging its inputs, {:.3f} in the segments' runners "
      "beyond their copies and compute, {:.3f} of it in their submits, {:.3f} from one segment to the next, {:.3f} its outputs)",
      between, between / static_cast<double>(segments), whole.copy_in_ms / b, beyond, std::min(submits, beyond), hops,
      whole.copy_out_ms / b);
  EXPECT_NE(parts[0].description.find(line), std::string::npos) << parts[0].description;
  EXPECT_EQ(history.node_entries_hash(), node_entries) << "a run's sample: the kept placement's key does not see it";

  // A history holding the hand-over alone (the split never measured): the split's options are
  // the node costs' batch with that hand-over a segment, against the partition's without it.
  runtime::CostHistory handover_only;
  for (int i = 0; i < 3; ++i) handover_only.record(key, 0.75);
  auto [with, with_plan] = place(&handover_only);
  runtime::CostHistory empty;
  auto [without, without_plan] = place(&empty);
  ASSERT_TRUE(with_plan.has_value());
  ASSERT_TRUE(without_plan.has_value());
  ASSERT_FALSE(with_plan->from_cache);
  ASSERT_FALSE(without_plan->from_cache);
  const runtime::Partition& cut = *without.entry.joint->decision()->partition;
  ASSERT_EQ(with.entry.joint->decision()->partition->node_devices(), cut.node_devices());
  const auto& with_options = with_plan->problem.models[0].options;
  const auto& without_options = without_plan->problem.models[0].options;
  ASSERT_EQ(with_options.size(), without_options.size());
  int splits = 0;
  for (std::size_t i = 0; i < with_options.size(); ++i) {
    if (with_options[i].placement != "split") {
      EXPECT_DOUBLE_EQ(with_options[i].batch_ms, without_options[i].batch_ms);
      continue;
    }
    ++splits;
    EXPECT_FALSE(with_options[i].measured);
    EXPECT_NEAR(with_options[i].batch_ms - without_options[i].batch_ms,
                static_cast<double>(cut.segments.size()) * (0.75 - cut.handover_ms), 1e-9)
        << with_options[i].rows << " rows";
  }
  EXPECT_GT(splits, 0);
  // The run's summary says where the split's batch time came from.
  ASSERT_EQ(chosen(*with_plan, 0).placement, "split");
  const std::string note = with.entry.joint->decision()->note;
  EXPECT_NE(note.find("its segments handed over in 0.750 ms each, as runs in a pipeline measured"), std::string::npos) << note;
  EXPECT_EQ(without.entry.joint->decision()->note.find("handed over"), std::string::npos)
      << "no hand-over learned and none measured in the profiles: " << without.entry.joint->decision()->note;

  // Nothing learned on this host, but the devices' runner round trips measured in their profiles:
  // a segment's hand-over is their mean, and the note says so.
  base.profiles[0].runner_roundtrip_ms = 0.2;
  base.profiles[1].runner_roundtrip_ms = 0.4;
  auto [profiled, profiled_plan] = place(&empty);
  ASSERT_TRUE(profiled_plan.has_value());
  ASSERT_EQ(chosen(*profiled_plan, 0).placement, "split");
  const std::string profiled_note = profiled.entry.joint->decision()->note;
  EXPECT_NE(profiled_note.find("its segments handed over in 0.300 ms each, as the devices' runner round trips measured"),
            std::string::npos)
      << profiled_note;
}

TEST(PipelinePlanner, AKeptDecisionIsPlacedAgainWhenRunsMeasuredOtherTimes) {
  const testing::ScopedEnv cache("REDWOOD_CACHE_DIR", testing::temp_dir("pipeline-planner-kept-measured").c_str());
  const auto a = conv_model();
  runtime::CostHistory h;
  EXPECT_FALSE(place_both(&h).plan->from_cache);
  EXPECT_TRUE(place_both(&h).plan->from_cache);
  // Measured times where there were none: placed again (with them), then kept.
  h.record(batch_key(*a, 1, 1), 0.05);
  h.record(batch_key(*a, 1, 2), 0.10);
  EXPECT_FALSE(place_both(&h).plan->from_cache);
  EXPECT_TRUE(place_both(&h).plan->from_cache);
  h.record(batch_key(*a, 1, 2), 0.104);  // the median moves by 2 %: the entry stands
  EXPECT_TRUE(place_both(&h).plan->from_cache);
  h.record(batch_key(*a, 1, 1), 0.5);
  h.record(batch_key(*a, 1, 1), 0.5);  // a's time at 1 row: 0.05 -> 0.5
  EXPECT_FALSE(place_both(&h).plan->from_cache);
  EXPECT_TRUE(place_both(&h).plan->from_cache);
}

// configs/ocr-video.yaml's two models as `device: auto` would give them to the pipeline (det fed
// 320x416 pictures, max_batch 2; rec fed 48x320 crops, max_batch 4, prepared at 1 to 4 rows), on
// the stand-in accelerator: how long the placement takes analysed, and read from the cache.
TEST(PipelinePlanner, OcrModelsPlacedThenReadFromTheCache) {
  const auto models_dir = testing::assets_dir() / "models";
  if (!std::filesystem::exists(models_dir / "ch_PP-OCRv4_det_infer.onnx")) GTEST_SKIP() << "assets missing: run scripts/setup.sh";
  const testing::ScopedEnv cache("REDWOOD_CACHE_DIR", testing::temp_dir("pipeline-planner-ocr").c_str());
  runtime::PartitionOptions base = base_options();
  base.use_analysis_times = true;  // as a pipeline places: the analysis times the CPU
  // An accelerator whose every launch takes a second (it lacks rec's Softmax too): both models
  // whole on the CPU, which is kept.
  base.profiles[1].launch_ms = 1000;
  const auto det = load_onnx(models_dir / "ch_PP-OCRv4_det_infer.onnx");
  const auto rec = load_onnx(models_dir / "ch_PP-OCRv4_rec_infer.onnx");
  const auto place = [&] {
    std::vector<Auto> made(2);
    ModelTable models;
    for (int m = 0; m < 2; ++m) {
      Auto& a = made[static_cast<std::size_t>(m)];
      a.entry.graph = m == 0 ? det : rec;
      a.entry.device = "auto";
      a.entry.joint = std::make_shared<runtime::JointPlacement>();
      a.runner = runtime::make_placed_runner(a.entry.graph, base, RunnerConfig{}, m == 0 ? "det" : "rec", a.entry.joint);
      a.entry.joint->add_feed({m == 0 ? "det" : "rec", m == 0 ? 2 : 4, 5, m == 0 ? 1 : -1});
      for (std::int64_t rows = 1; rows <= (m == 0 ? 2 : 4); ++rows) {
        a.runner->prepare({m == 0 ? Shape{rows, 3, 320, 416} : Shape{rows, 3, 48, 320}});
      }
      models[m == 0 ? "det" : "rec"] = a.entry;
    }
    const auto start = std::chrono::steady_clock::now();
    const auto plan = place_auto_models(models, 0, {}, base);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    for (const auto& line : plan->lines()) std::printf("%s\n", line.c_str());
    return std::pair{plan->from_cache, ms};
  };
  const auto [cold_cached, cold_ms] = place();
  const auto [warm_cached, warm_ms] = place();
  EXPECT_FALSE(cold_cached);
  EXPECT_TRUE(warm_cached);  // both whole on one device
  std::printf("OCR models' pipeline placement: %.1f ms analysed and searched, %.1f ms read from the placement cache\n", cold_ms,
              warm_ms);
}

TEST(PipelinePlanner, OptionsScaleFromTheAnalysedBatch) {
  const runtime::Partition p = runtime::partition_model(conv_model(), {{4, 16, 32, 32}}, base_options());
  const auto options = pipeline_options(p, {1, 2, 4}, 1, false, nullptr);
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

// A split's batch runs segment by segment, each value crossing through the host, each segment
// handed over: its option's time at each row count is that (split_latency_at_rows), above its
// list schedule, which keeps values on the device between nodes.
TEST(PipelinePlanner, ASplitsOptionsRunItsSegmentsAsTheSplitRunnerDoes) {
  runtime::Partition p = runtime::partition_model(softmax_between_convs_model(), {{4, 16, 32, 32}}, base_options());
  ASSERT_FALSE(p.single_device());
  p.handover_ms = 0.05;
  const std::vector<runtime::RowsCurve> curves = runtime::segment_curves(p, nullptr);
  const auto options = pipeline_options(p, {1, 2, 4}, 1, false, nullptr);
  int splits = 0;
  for (const auto& o : options) {
    if (o.placement != "split") continue;
    ++splits;
    EXPECT_NEAR(o.batch_ms, runtime::split_latency_at_rows(p, curves, o.rows), 1e-12) << o.rows << " rows";
    const runtime::PlacementProblem at = runtime::problem_at_rows(p, o.rows, nullptr);
    EXPECT_GT(o.batch_ms, runtime::makespan(at, p.placement.device) + 3 * p.handover_ms - 1e-9) << o.rows << " rows";
    double segments = 0;
    for (const auto& c : curves) segments += c.at(o.rows);
    EXPECT_GT(o.batch_ms, segments + 3 * p.handover_ms) << o.rows << " rows: and the crossings";
  }
  EXPECT_EQ(splits, 3);
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
