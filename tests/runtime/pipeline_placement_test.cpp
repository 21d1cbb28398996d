// runtime/pipeline_placement: a pipeline's models placed together for throughput under a latency
// limit, on cost tables worked out by hand: the GPU as the bottleneck moving the model that is
// cheaper on the CPU there, the CPU stages' load keeping it on the GPU, a limit ruling out the big
// batch, an overload reported with the least-bad choice, unpaced files, bad tables, and the local
// search against the exhaustive optimum on random tables.

#include "runtime/pipeline_placement.hpp"

#include "core/error.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

namespace redwood::runtime {
namespace {

PipelineOption on_cpu(double ms, double rows = 1) {
  PipelineOption o{"cpu", rows, static_cast<int>(rows), {}, ms};
  o.busy_ms[kCpuCores] = ms;
  return o;
}

// `ms` on the GPU with `copy_ms` each way.
PipelineOption on_gpu(double ms, double rows = 1, double copy_ms = 0.25) {
  PipelineOption o{"cuda", rows, static_cast<int>(rows), {}, ms + 2 * copy_ms};
  o.busy_ms[kGpu] = ms;
  o.busy_ms[kHostToGpu] = o.busy_ms[kGpuToHost] = copy_ms;
  return o;
}

// Two models at 100 frames a second: both are faster on the GPU (4.5 ms a batch) than on the CPU,
// A much more so (20 ms) than B (5 ms).
PipelineProblem two_models() {
  PipelineProblem p;
  p.frames_per_s = 100;
  p.models = {PipelineModel{"a", 1, 5, {on_cpu(20), on_gpu(4)}}, PipelineModel{"b", 1, 5, {on_cpu(5), on_gpu(4)}}};
  return p;
}

TEST(PipelinePlacement, TheGpuBottleneckMovesTheModelCheaperOnTheCpuThere) {
  const PipelinePlacementResult r = place_pipeline(two_models());
  // Alone, each takes the GPU: 8 ms of it a frame, 80 % busy at 100 fps; a batch waits 1 / (1 - 0.8).
  EXPECT_EQ(r.alone.option, (std::vector<int>{1, 1}));
  EXPECT_DOUBLE_EQ(r.alone.load_ms[kGpu], 8);
  EXPECT_DOUBLE_EQ(r.alone.peak_utilization, 0.8);
  EXPECT_NEAR(r.alone.latency_ms, 2 * 4.5 / 0.2, 1e-9);
  // Together: B on the CPU (5 ms a frame, 50 %), A on the GPU (4 ms, 40 %): 200 fps sustainable
  // instead of 125, and each batch queues less.
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(r.method, "exhaustive");
  EXPECT_EQ(r.evaluated, 5u);  // the baseline and the 4 combinations
  EXPECT_EQ(r.best.option, (std::vector<int>{1, 0}));
  EXPECT_EQ(r.best.bottleneck, kCpuCores);
  EXPECT_DOUBLE_EQ(r.best.peak_load_ms, 5);
  EXPECT_DOUBLE_EQ(r.best.sustainable_fps, 200);
  EXPECT_DOUBLE_EQ(r.alone.sustainable_fps, 125);
  EXPECT_NEAR(r.best.utilization[kGpu], 0.4, 1e-12);
  EXPECT_NEAR(r.best.latency_ms, 4.5 / 0.6 + 5 / 0.5, 1e-9);
  EXPECT_FALSE(r.best.overloaded);
  EXPECT_EQ(utilization_text(r.best), "cpu 50 %, gpu 40 %, host->gpu 2 %, gpu->host 2 %");
}

TEST(PipelinePlacement, TheCpuStagesLoadKeepsBothOnTheGpu) {
  PipelineProblem p = two_models();
  p.fixed_ms[kCpuCores] = 4;  // decoding and pre/postprocessing: 4 ms of the cores a frame
  p.fixed_latency_ms = 6;
  const PipelinePlacementResult r = place_pipeline(p);
  // B on the CPU would load it 9 ms a frame, above the GPU's 8 with both there.
  EXPECT_EQ(r.best.option, (std::vector<int>{1, 1}));
  EXPECT_DOUBLE_EQ(r.best.peak_load_ms, 8);
  EXPECT_NEAR(r.best.latency_ms, 6 + 2 * 4.5 / 0.2, 1e-9);
}

// One model at 100 fps on the GPU at 1, 4 or 8 frames a batch; the stage's timeout is 50 ms.
PipelineProblem batches(double limit_ms) {
  PipelineProblem p;
  p.frames_per_s = 100;
  p.latency_limit_ms = limit_ms;
  p.models = {PipelineModel{"det", 1, 50, {on_gpu(4, 1, 0), on_gpu(8, 4, 0), on_gpu(12, 8, 0)}}};
  return p;
}

TEST(PipelinePlacement, ALatencyLimitRulesOutTheBigBatch) {
  // Loads 4, 2 and 1.5 ms a frame. Latencies: 4 / 0.6 = 6.7; 30 ms to fill + 8 / 0.8 = 40;
  // 70 ms to fill capped by the 50 ms timeout + 12 / 0.85 = 64.1.
  const PipelinePlacementResult none = place_pipeline(batches(0));
  EXPECT_EQ(none.best.option, (std::vector<int>{2}));
  EXPECT_NEAR(none.best.latency_ms, 50 + 12 / 0.85, 1e-9);
  EXPECT_EQ(place_pipeline(batches(45)).best.option, (std::vector<int>{1}));
  EXPECT_NEAR(place_pipeline(batches(45)).best.latency_ms, 30 + 8 / 0.8, 1e-9);
  const PipelinePlacementResult tight = place_pipeline(batches(20));
  EXPECT_EQ(tight.best.option, (std::vector<int>{0}));
  EXPECT_TRUE(tight.best.meets_limit);
  EXPECT_NEAR(tight.best.latency_ms, 4 / 0.6, 1e-9);
  // Below every option's latency: the shortest, said to miss the limit.
  const PipelinePlacementResult impossible = place_pipeline(batches(5));
  EXPECT_EQ(impossible.best.option, (std::vector<int>{0}));
  EXPECT_FALSE(impossible.best.meets_limit);
  // The baseline runs the stage's largest batch.
  EXPECT_EQ(none.alone.option, (std::vector<int>{2}));
}

TEST(PipelinePlacement, ALoadNoOptionCarriesIsOverloadedAndGetsTheLeastBadChoice) {
  PipelineProblem p = batches(100);
  p.frames_per_s = 1000;  // 4, 2, 1.5 ms a frame: 400 %, 200 %, 150 % of the GPU
  const PipelinePlacementResult r = place_pipeline(p);
  EXPECT_EQ(r.best.option, (std::vector<int>{2}));
  EXPECT_TRUE(r.best.overloaded);
  EXPECT_FALSE(r.best.meets_limit);
  EXPECT_DOUBLE_EQ(r.best.peak_utilization, 1.5);  // the demand is 1.5 x what it carries
  EXPECT_NEAR(r.best.sustainable_fps, 1000 / 1.5, 1e-9);
  EXPECT_TRUE(std::isinf(r.best.latency_ms));
}

TEST(PipelinePlacement, UnpacedFilesMinimizeTheBottleneckAFrame) {
  PipelineProblem p = two_models();
  p.frames_per_s = 0;
  const PipelinePlacementResult r = place_pipeline(p);
  EXPECT_EQ(r.best.option, (std::vector<int>{1, 0}));
  EXPECT_DOUBLE_EQ(r.best.sustainable_fps, 200);
  EXPECT_DOUBLE_EQ(r.best.utilization[kCpuCores], 1);
  EXPECT_DOUBLE_EQ(r.best.utilization[kGpu], 0.8);
  EXPECT_DOUBLE_EQ(r.best.latency_ms, 4.5 + 5);  // no queueing term: the frames in flight bound it
  EXPECT_FALSE(r.best.overloaded);
}

TEST(PipelinePlacement, CropsCountRowsAFrame) {
  // A classifier fed 4 crops a frame: a batch of 8 rows is 2 frames, 1.5 ms a row on the GPU.
  PipelineProblem p;
  p.frames_per_s = 50;
  p.models = {PipelineModel{"cls", 4, 100, {on_gpu(12, 8, 0)}}};
  const PipelineChoice c = evaluate_pipeline(p, {0});
  EXPECT_DOUBLE_EQ(c.load_ms[kGpu], 6);  // 4 rows / 8 x 12 ms
  EXPECT_DOUBLE_EQ(c.utilization[kGpu], 0.3);
  // The 4 missing rows arrive at 200 rows a second: 20 ms.
  EXPECT_NEAR(c.latency_ms, 20 + 12 / 0.7, 1e-9);
}

TEST(PipelinePlacement, BadTablesThrowNamingTheModel) {
  PipelineProblem p = two_models();
  p.models[1].name = "rec";
  p.models[1].options.clear();
  try {
    place_pipeline(p);
    FAIL() << "a model with no option was placed";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("model 'rec' has no option"), std::string::npos) << e.what();
  }
  p = two_models();
  p.models[0].options[0].rows = 0;
  EXPECT_THROW(place_pipeline(p), InvalidArgument);
  p = two_models();
  p.models[0].rows_per_frame = 0;
  EXPECT_THROW(place_pipeline(p), InvalidArgument);
  EXPECT_THROW(evaluate_pipeline(two_models(), {0, 2}), InvalidArgument);
  EXPECT_THROW(evaluate_pipeline(two_models(), {0}), InvalidArgument);
}

TEST(PipelinePlacement, LocalSearchAgainstTheExhaustiveOptimumOnRandomTables) {
  std::mt19937 rng(19);
  std::uniform_real_distribution<double> ms(0.5, 20), speedup(1, 10);
  double worst = 0, mean = 0;
  int optimal = 0;
  constexpr int kCases = 40;
  for (int n = 0; n < kCases; ++n) {
    PipelineProblem p;
    p.frames_per_s = 20;
    p.fixed_ms[kCpuCores] = ms(rng) / 4;
    for (int m = 0; m < 5; ++m) {
      PipelineModel model{"m" + std::to_string(m), 1, 20, {}};
      for (int rows : {1, 2, 4}) {
        const double cpu = ms(rng) * (0.6 + 0.4 * rows);
        model.options.push_back(on_cpu(cpu, rows));
        model.options.push_back(on_gpu(cpu / speedup(rng) * (0.5 + 0.5 * rows) / (0.6 + 0.4 * rows), rows, 0.1 * rows));
      }
      p.models.push_back(model);
    }
    const PipelinePlacementResult exact = place_pipeline(p);
    p.exhaustive_limit = 0;
    const PipelinePlacementResult local = place_pipeline(p);
    ASSERT_TRUE(exact.exact);
    ASSERT_FALSE(local.exact);
    EXPECT_EQ(local.method, "local search");
    EXPECT_LE(local.best.peak_load_ms, local.alone.peak_load_ms * (1 + 1e-9));
    const double gap = local.best.peak_load_ms / exact.best.peak_load_ms - 1;
    EXPECT_GE(gap, -1e-9);
    worst = std::max(worst, gap);
    mean += gap / kCases;
    optimal += gap < 1e-9;
  }
  std::printf("pipeline placement, local search against exhaustive on %d random tables of 5 models x 6 options: "
              "optimal on %d, mean gap %.2f %%, worst %.2f %%\n",
              kCases, optimal, 100 * mean, 100 * worst);
  EXPECT_LT(worst, 0.05);
}

}  // namespace
}  // namespace redwood::runtime
