// Sources: a folder of pictures, a video file (with start_frame), and a network stream that
// cannot connect (retried with backoff, every attempt counted, then given up).

#include "pipelines/pipeline.hpp"
#include "pipelines/pipeline_text.hpp"
#include "support/onnx_builder.hpp"

#include <gtest/gtest.h>
#include <opencv2/imgcodecs.hpp>

#include <fstream>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

TEST(PipelineSources, VideoLoopsFromStartFrameEachPass) {
  // 3 frames a pass from frame 792, looped by the source itself: two passes for 6 frames (frames
  // before start_frame are decoded and dropped, each pass).
  RunOptions options;
  options.max_frames = 6;
  Pipeline p(testing::pipeline_text(
      "version: 1\nsources:\n  - {name: v, type: video, path: video/vtest.avi, start_frame: 792, loop: true, decoder_threads: 1}\n"));
  const auto stats = p.run(options);
  EXPECT_EQ(stats.streams[0].delivered, 6);
}

TEST(PipelineSources, VideoDecoderThreadsOutOfRangeFailAtTheKey) {
  for (const char* bad : {"-1", "65"}) {
    try {
      Pipeline p(testing::pipeline_text(std::string("version: 1\nsources:\n  - {name: v, type: video, path: video/vtest.avi, "
                                                    "decoder_threads: ") + bad + "}\n"));
      FAIL() << "decoder_threads " << bad << " was taken";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("decoder_threads: must be from 0 (automatic) to 64"), std::string::npos) << e.what();
    }
  }
}

TEST(PipelineSources, UnreachableStreamRetriesWithBackoffThenFails) {
  // Port 9 (discard) on loopback: nothing listens, every connection is refused at once.
  Pipeline p(testing::pipeline_text(
      "version: 1\nsources:\n  - {name: cam, type: stream, url: 'tcp://127.0.0.1:9', initial_backoff_ms: 20, "
      "max_backoff_ms: 80, max_reconnects: 3}\n"));
  try {
    p.run();
    FAIL() << "a stream that never answers must fail the run";
  } catch (const RunError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("source 'cam' failed after 0 frame(s): stream tcp://127.0.0.1:9: no answer after 3 reconnection "
                     "attempt(s) (max_reconnects 3)"), std::string::npos) << m;
    EXPECT_EQ(e.stats().streams[0].read, 0);
    EXPECT_EQ(e.stats().streams[0].reconnects, 3);  // the first open, then three retries 20, 40, 80 ms apart
  }
}

TEST(PipelineSources, SilentServerTimesOutAndFails) {
  // A server that accepts connections and never sends a byte: only the open timeout catches it.
  const int server = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(server, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(server, 8), 0);  // the kernel completes handshakes; nobody ever writes
  socklen_t len = sizeof addr;
  getsockname(server, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string url = "tcp://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  Pipeline p(testing::pipeline_text("version: 1\nsources:\n  - {name: cam, type: stream, url: '" + url +
                                    "', initial_backoff_ms: 20, max_backoff_ms: 40, max_reconnects: 1, "
                                    "open_timeout_ms: 300, read_timeout_ms: 300}\n"));
  try {
    p.run();
    ADD_FAILURE() << "a silent server must fail the run";
  } catch (const RunError& e) {
    EXPECT_NE(std::string(e.what()).find("stream " + url + ": no answer after 1 reconnection attempt(s)"), std::string::npos)
        << e.what();
    EXPECT_EQ(e.stats().streams[0].read, 0);
  }
  close(server);
}

}  // namespace
}  // namespace redwood
