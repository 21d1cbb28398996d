// The run summary's host line: the process's CPU time over the run against the cores it may use,
// from a constructed run and from a real one.

#include "pipelines/pipeline.hpp"
#include "pipelines/pipeline_text.hpp"
#include "pipelines/stats.hpp"

#include <gtest/gtest.h>

namespace redwood {
namespace {

TEST(RunSummary, SaysHowManyCoresTheProcessKeptBusy) {
  PipelineStats st;
  st.elapsed_s = 3;
  st.cpu_s = 6;
  st.host_cores = 4;
  EXPECT_NE(summary_text(st).find("  cpu: 2.0 of 4 core(s) busy in this process (50 %)\n"), std::string::npos)
      << summary_text(st);
  st.cpu_s = 0;  // not measured: no line
  EXPECT_EQ(summary_text(st).find("cpu:"), std::string::npos);
}

TEST(RunSummary, ARunMeasuresItsCpuTime) {
  EXPECT_GE(host_cores(), 1);
  Pipeline p(testing::pipeline_text("version: 1\n"
                                    "sources:\n"
                                    "  - {name: cam, type: synthetic, width: 640, height: 480, frames: 40}\n"));
  const PipelineStats stats = p.run();
  EXPECT_EQ(stats.streams.at(0).delivered, 40);
  EXPECT_GT(stats.cpu_s, 0.0);
  EXPECT_EQ(stats.host_cores, host_cores());
  EXPECT_NE(summary_text(stats).find("core(s) busy in this process"), std::string::npos) << summary_text(stats);
}

// A split model's runners are its segments: the first carries the model's batch sizes, the
// later ones count the same batches and leave the histogram to it (the stage's is counted once).
TEST(RunSummary, ASplitsLaterSegmentsLeaveTheBatchSizesToTheFirst) {
  PipelineStats st;
  st.elapsed_s = 1;
  RunnerStats first, later, failing;
  first.description = "model 'rec' segment 1 of 2 on cuda:0";
  first.batches = later.batches = 3;
  first.rows = later.rows = 9;
  first.batch_rows = {{3, 3}};
  later.description = "model 'rec' segment 2 of 2 on cpu";
  failing.description = "model 'det' on cpu";
  failing.batches = 1;
  failing.rows = 2;
  failing.failed = 2;
  st.runners = {first, later, failing};
  const std::string text = summary_text(st);
  EXPECT_NE(text.find("segment 1 of 2 on cuda:0: 3 batch(es), 9 row(s), 3.0 per batch, 9.0 rows/s\n"), std::string::npos) << text;
  EXPECT_NE(text.find("hidden under compute\n    batch sizes (rows x batches): 3x3\n  model 'rec' segment 2"), std::string::npos)
      << text;
  EXPECT_NE(text.find("hidden under compute\n  model 'det' on cpu"), std::string::npos) << text;
  EXPECT_NE(text.find("hidden under compute\n    2 failed\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("batch sizes (rows x batches): -"), std::string::npos) << text;
}

// A split's segment says what handing its batches over cost beyond its copies and compute (its
// time from the batch being ready for it to its completion, less them), and how much of it was in
// its runner's submit; a runner that is no split's segment has no such part.
TEST(RunSummary, ASplitsSegmentSaysWhatItsHandOverCost) {
  PipelineStats st;
  st.elapsed_s = 1;
  RunnerStats segment, whole;
  segment.description = "model 'rec' segment 1 of 3 on cuda:0";
  segment.batches = whole.batches = 4;
  segment.copy_in_ms = 0.4;   // 0.1 a batch
  segment.compute_ms = 2.0;   // 0.5
  segment.copy_out_ms = 0.4;  // 0.1
  segment.handover_submit_ms = 0.6;  // 0.15
  segment.handover_after_ms = 3.4;   // from its submit to its completion: 0.85 a batch
  whole.description = "model 'det' on cuda:0";
  whole.compute_ms = 4.0;
  st.runners = {segment, whole};
  const std::string text = summary_text(st);
  EXPECT_NE(text.find("waiting for a slot 0.00 ms, handed over in 0.30 ms beyond its copies and compute (0.15 in its runner's "
                      "submit)\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("handed over", text.find("model 'det'")), std::string::npos) << text;
}

}  // namespace
}  // namespace redwood
