// configs/ocr-video.yaml as shipped (but for the ZeroMQ endpoint and the JSON Lines path) on the
// first frames of vtest-captions.avi, through a ZeroMQ subscriber: one message per frame read
// minus counted drops, in order, the documented schema, and the burnt-in caption recognized.

#include "pipelines/pipeline.hpp"
#include "stages/sink/frame_json.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include <fstream>
#include <thread>

namespace redwood {
namespace {

TEST(PipelineOcrEndToEnd, CaptionsArriveOverZeroMq) {
  const auto config = std::filesystem::path(REDWOOD_SOURCE_DIR) / "configs" / "ocr-video.yaml";
  const auto video = testing::assets_dir() / "video" / "vtest-captions.avi";
  if (!std::filesystem::exists(video)) GTEST_SKIP() << video << " is missing: run scripts/setup.sh";
  const auto jsonl = testing::temp_dir("ocr-e2e") / "ocr.jsonl";
  const std::string endpoint = "ipc://" + (testing::temp_dir("ocr-e2e") / "pub.sock").string();
  Pipeline pipeline(load_pipeline_file(
      config, {"sinks.pub.endpoint=" + endpoint, "sinks.log.path=" + jsonl.string(), "stages.det.max_batch=2"}));

  zmq::context_t context;
  zmq::socket_t sub(context, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "ocr-video/");
  sub.set(zmq::sockopt::rcvtimeo, 200);
  sub.connect(endpoint);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // PUB/SUB: let the subscription land

  std::vector<nlohmann::json> messages;
  std::atomic<bool> done{false};
  std::thread receiver([&] {
    for (;;) {
      zmq::message_t topic, body;
      if (!sub.recv(topic)) {  // timed out
        if (done) break;
        continue;
      }
      ASSERT_TRUE(sub.get(zmq::sockopt::rcvmore));
      ASSERT_TRUE(sub.recv(body));
      EXPECT_EQ(topic.to_string(), "ocr-video/captions");
      messages.push_back(nlohmann::json::parse(body.to_string()));
    }
  });
  RunOptions options;
  options.max_frames = 3;
  const PipelineStats stats = pipeline.run(options);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  done = true;
  receiver.join();

  const auto& s = stats.streams.at(0);
  EXPECT_EQ(s.read, 3);
  ASSERT_EQ(static_cast<std::int64_t>(messages.size()), s.read - s.dropped);
  std::string all_text;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    EXPECT_EQ(m.at("schema"), kFrameSchema);
    EXPECT_EQ(m.at("pipeline"), "ocr-video");
    EXPECT_EQ(m.at("stream"), "captions");
    EXPECT_EQ(m.at("seq"), static_cast<std::int64_t>(i));
    EXPECT_EQ(m.at("width"), 768);
    EXPECT_EQ(m.at("height"), 576);
    EXPECT_GT(m.at("latency_ms").get<double>(), 0.0);
    for (const auto& d : m.at("detections")) {
      EXPECT_EQ(d.at("kind"), "text");
      EXPECT_EQ(d.at("box").size(), 4u);
      EXPECT_EQ(d.at("quad").size(), 4u);
      all_text += d.at("text").get<std::string>() + "|";
    }
  }
  // The caption of the first 8 seconds, at (40, 40).
  EXPECT_NE(all_text.find("REDWOOD"), std::string::npos) << all_text;
  EXPECT_NE(all_text.find("RUNTIME"), std::string::npos) << all_text;

  std::ifstream lines(jsonl);
  int count = 0;
  for (std::string line; std::getline(lines, line);) ++count;
  EXPECT_EQ(count, 3);
}

}  // namespace
}  // namespace redwood
