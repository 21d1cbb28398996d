// Sources: a folder of pictures, a video file (with start_frame), and a network stream that
// cannot connect (retried with backoff, every attempt counted, then given up).

#include "pipelines/pipeline.hpp"
#include "pipelines/pipeline_text.hpp"
#include "support/onnx_builder.hpp"

#include <gtest/gtest.h>
#include <opencv2/imgcodecs.hpp>

#include <fstream>

namespace redwood {
namespace {

TEST(PipelineSources, ImageFolderInNameOrder) {
  const auto dir = testing::temp_dir("images");
  for (int i = 0; i < 3; ++i) {
    cv::imwrite((dir / ("p" + std::to_string(i) + ".png")).string(), cv::Mat(20 + i, 30, CV_8UC3, cv::Scalar::all(i * 50)));
  }
  std::ofstream(dir / "notes.txt") << "not a picture";
  const auto out = dir / "out.jsonl";
  Pipeline p(testing::pipeline_text("version: 1\nsources:\n  - {name: s, type: images, path: '" + dir.string() +
                                    "'}\nsinks:\n  - {name: log, type: jsonl, path: '" + out.string() + "'}\n"));
  const auto stats = p.run();
  EXPECT_EQ(stats.streams[0].delivered, 3);
  std::ifstream in(out);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[0].find("\"height\":20"), std::string::npos) << lines[0];
  EXPECT_NE(lines[2].find("\"height\":22"), std::string::npos) << lines[2];
}

TEST(PipelineSources, VideoFileFromStartFrame) {
  Pipeline p(testing::pipeline_text("version: 1\nsources:\n  - {name: v, type: video, path: video/vtest.avi, start_frame: 790}\n"));
  const auto stats = p.run();
  EXPECT_EQ(stats.streams[0].delivered, 5);  // vtest.avi has 795 frames
}

TEST(PipelineSources, UnreachableStreamRetriesWithBackoffAndCounts) {
  Pipeline p(testing::pipeline_text(
      "version: 1\nsources:\n  - {name: cam, type: stream, url: 'rtsp://127.0.0.1:9/none', initial_backoff_ms: 20, "
      "max_backoff_ms: 80, max_reconnects: 3}\n"));
  const auto stats = p.run();
  EXPECT_EQ(stats.streams[0].read, 0);
  EXPECT_EQ(stats.streams[0].reconnects, 3);  // the first open, then three retries 20, 40, 80 ms apart
}

}  // namespace
}  // namespace redwood
