// configs/ocr-video.yaml as shipped (but for the ZeroMQ endpoint and the JSON Lines path) over
// the WHOLE captioned clip (795 frames, 79.5 s, ten captions), through a ZeroMQ subscriber:
//  - one message per frame read minus counted drops (the file source drops none; the sink counts
//    any refused send), in read order;
//  - every message matches the documented schema (frame_schema.hpp);
//  - at least 90 % of the burnt-in captions (scripts/vtest_captions.tsv, with their times) are
//    recognized exactly on at least one frame where they show. The per-caption result (frames
//    read exactly / frames shown) is printed and recorded as test properties.
// Runs in about a minute on a 2-core machine (the detector at 416 x 320 on the CPU).

#include "pipelines/frame_schema.hpp"
#include "pipelines/pipeline.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include <fmt/format.h>

#include <fstream>
#include <sstream>
#include <thread>

namespace redwood {
namespace {

struct Caption {
  double start_s = 0, end_s = 0;
  std::string text;
};

std::vector<Caption> read_captions(const std::filesystem::path& tsv) {
  std::ifstream in(tsv);
  std::vector<Caption> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::stringstream row(line);
    std::string start, end, x, y, text;
    std::getline(row, start, '\t');
    std::getline(row, end, '\t');
    std::getline(row, x, '\t');
    std::getline(row, y, '\t');
    std::getline(row, text);
    out.push_back({std::stod(start), std::stod(end), text});
  }
  return out;
}

TEST(PipelineOcrEndToEnd, WholeClipOverZeroMqRecognizesTheCaptions) {
  const auto config = std::filesystem::path(REDWOOD_SOURCE_DIR) / "configs" / "ocr-video.yaml";
  const auto video = testing::assets_dir() / "video" / "vtest-captions.avi";
  if (!std::filesystem::exists(video)) GTEST_SKIP() << video << " is missing: run scripts/setup.sh";
  const auto captions = read_captions(std::filesystem::path(REDWOOD_SOURCE_DIR) / "scripts" / "vtest_captions.tsv");
  ASSERT_EQ(captions.size(), 10u);
  const auto dir = testing::temp_dir("ocr-e2e");
  const auto jsonl = dir / "ocr.jsonl";
  const std::string endpoint = "ipc://" + (dir / "pub.sock").string();
  Pipeline pipeline(load_pipeline_file(config, {"sinks.pub.endpoint=" + endpoint, "sinks.log.path=" + jsonl.string()}));
  std::vector<std::string> stage_names;
  for (const auto& s : pipeline.stages()) stage_names.push_back(s->name());

  zmq::context_t context;
  zmq::socket_t sub(context, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "ocr-video/");
  sub.set(zmq::sockopt::rcvtimeo, 200);
  sub.set(zmq::sockopt::rcvhwm, 0);  // the test's own socket must not lose what the sink sent
  sub.connect(endpoint);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // PUB/SUB: let the subscription land

  std::vector<std::pair<std::string, std::string>> received;  // topic, body
  std::atomic<bool> done{false};
  std::thread receiver([&] {
    for (;;) {
      zmq::message_t topic, body;
      if (!sub.recv(topic)) {  // timed out
        if (done) break;
        continue;
      }
      if (!sub.get(zmq::sockopt::rcvmore) || !sub.recv(body)) {
        received.emplace_back(topic.to_string(), "<no second part>");
        continue;
      }
      received.emplace_back(topic.to_string(), body.to_string());
    }
  });
  const PipelineStats stats = pipeline.run();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  done = true;
  receiver.join();

  const auto& s = stats.streams.at(0);
  EXPECT_EQ(s.read, 795);  // vtest.avi's frames, all of them
  EXPECT_EQ(s.dropped, 0);  // a file source never drops
  const auto& pub = stats.sinks.at(0);
  ASSERT_EQ(pub.name, "pub");
  ASSERT_EQ(static_cast<std::int64_t>(received.size()), s.read - s.dropped - pub.dropped)
      << "sink drops " << pub.dropped;

  std::vector<nlohmann::json> messages;
  for (std::size_t i = 0; i < received.size(); ++i) {
    EXPECT_EQ(received[i].first, "ocr-video/captions");
    messages.push_back(nlohmann::json::parse(received[i].second));
    const auto& m = messages.back();
    testing::expect_frame_schema(m, stage_names);
    EXPECT_EQ(m.at("pipeline"), "ocr-video");
    EXPECT_EQ(m.at("stream"), "captions");
    if (pub.dropped == 0) {
      EXPECT_EQ(m.at("seq"), static_cast<std::int64_t>(i));
    }
    EXPECT_EQ(m.at("width"), 768);
    EXPECT_EQ(m.at("height"), 576);
    for (const auto& d : m.at("detections")) EXPECT_EQ(d.at("kind"), "text");
    if (::testing::Test::HasFatalFailure()) return;
  }

  // A caption shows on frames with start <= t <= end (ffmpeg's between() is inclusive).
  int recognized = 0;
  std::string report;
  for (const Caption& c : captions) {
    int shown = 0, exact = 0;
    for (const auto& m : messages) {
      const double t = m.at("pts_ms").get<double>() / 1000.0;
      if (t < c.start_s - 1e-6 || t > c.end_s + 1e-6) continue;
      ++shown;
      for (const auto& d : m.at("detections")) {
        if (d.at("text") == c.text) {
          ++exact;
          break;
        }
      }
    }
    recognized += exact > 0;
    report += fmt::format("  {:<16} {:>3} / {:>3} frames\n", c.text, exact, shown);
    ::testing::Test::RecordProperty(c.text, fmt::format("{}/{}", exact, shown));
  }
  std::printf("captions recognized exactly on at least one frame: %d of %zu\n%s", recognized, captions.size(),
              report.c_str());
  EXPECT_GE(recognized * 10, static_cast<int>(captions.size()) * 9) << report;

  std::ifstream lines(jsonl);
  std::int64_t count = 0;
  for (std::string line; std::getline(lines, line);) ++count;
  EXPECT_EQ(count, s.delivered);
}

}  // namespace
}  // namespace redwood
