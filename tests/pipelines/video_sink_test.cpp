// The annotated-video sink: every frame of every stream in its own file, read back whole; a disk
// short of space (min_free_mb) or a write cut short (a file-size limit standing in for a full
// disk) ends the run with an error naming the sink and the file, the frames lost counted as failed.

#include "core/error.hpp"
#include "pipelines/pipeline.hpp"
#include "pipelines/pipeline_text.hpp"
#include "support/onnx_builder.hpp"

#include <gtest/gtest.h>
#include <opencv2/videoio.hpp>

#include <fstream>

namespace redwood {
namespace {

std::string yaml(const std::filesystem::path& pattern, int frames, const std::string& extra = "") {
  return "version: 1\n"
         "sources:\n"
         "  - {name: a, type: synthetic, width: 320, height: 240, frames: " + std::to_string(frames) + "}\n"
         "  - {name: b, type: synthetic, width: 320, height: 240, frames: " + std::to_string(frames) + "}\n"
         "sinks:\n"
         "  - {name: vid, type: video, path: '" + pattern.string() + "'" + extra + "}\n";
}

TEST(VideoSink, EveryStreamInItsOwnFileReadBackWhole) {
  const auto dir = testing::temp_dir("video-sink") / "whole";
  // A queue for every frame: the synthetic source is faster than the encoder, and this test is
  // about files read back whole, not about drops.
  Pipeline p(testing::pipeline_text(yaml(dir / "{stream}.avi", 12, ", queue: 100")));
  const auto stats = p.run();
  EXPECT_EQ(stats.sinks.at(0).written, 24);
  EXPECT_EQ(stats.sinks.at(0).failed, 0);
  for (const char* stream : {"a", "b"}) {
    cv::VideoCapture in((dir / (std::string(stream) + ".avi")).string());
    ASSERT_TRUE(in.isOpened()) << stream;
    EXPECT_EQ(in.get(cv::CAP_PROP_FRAME_COUNT), 12) << stream;
    EXPECT_EQ(in.get(cv::CAP_PROP_FRAME_WIDTH), 320) << stream;
  }
}

TEST(VideoSink, ADiskShortOfSpaceEndsTheRunNamingTheFile) {
  const auto dir = testing::temp_dir("video-sink") / "space";
  // More free space than any disk has: the first frame finds it short.
  Pipeline p(testing::pipeline_text(yaml(dir / "{stream}.avi", 30, ", min_free_mb: 1073741824")));
  try {
    p.run();
    FAIL() << "the run reported success with no room to write";
  } catch (const RunError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("sink 'vid'"), std::string::npos) << what;
    EXPECT_NE(what.find("the disk is (nearly) full"), std::string::npos) << what;
    EXPECT_NE(what.find(dir.string()), std::string::npos) << what;
    EXPECT_GE(e.stats().sinks.at(0).failed, 1);
    EXPECT_EQ(e.stats().sinks.at(0).written, 0);
  }
}

TEST(VideoSink, BadKeysFailAtLoad) {
  const auto dir = testing::temp_dir("video-sink");
  EXPECT_NE(testing::load_error(yaml(dir / "{stream}.avi", 1, ", queue: 0")).find("queue: must be from 1 to 1024"),
            std::string::npos);
  EXPECT_NE(testing::load_error(yaml(dir / "{stream}.avi", 1, ", min_free_mb: -1")).find("min_free_mb: must be from 0"),
            std::string::npos);
  EXPECT_NE(testing::load_error(yaml(dir / "same.avi", 1)).find("several streams need '{stream}'"), std::string::npos);
}

// OpenCV's writer reports no failed write; a file-size limit (`ulimit -f`, SIGXFSZ ignored so that
// writes past it fail with EFBIG) stands in for a disk that fills up, and the sink must notice
// when it reads the file back: `redwood run` then ends with exit 1 naming the sink and the file.
TEST(VideoSink, AWriteCutShortEndsTheRunWithAnError) {
  const auto dir = testing::temp_dir("video-sink") / "cut";
  std::filesystem::create_directories(dir);
  const auto config = dir / "cut.yaml";
  std::ofstream(config) << yaml(dir / "{stream}.avi", 60, ", min_free_mb: 0, queue: 100");
  const auto r = testing::run_command("bash -c \"ulimit -f 64; trap '' XFSZ; exec " + std::string(REDWOOD_BINARY) +
                                      " run --quiet " + config.string() + "\"");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("sink 'vid' failed"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("a write failed"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(dir.string()), std::string::npos) << r.output;
}

}  // namespace
}  // namespace redwood
