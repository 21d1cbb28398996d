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

}  // namespace
}  // namespace redwood
