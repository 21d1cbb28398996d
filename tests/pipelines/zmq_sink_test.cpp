// The ZeroMQ sink never stalls the pipeline: with no subscriber, or one that never reads
// (high-water mark 1), every frame is either sent or counted as dropped, and the run ends.

#include "pipelines/pipeline.hpp"
#include "pipelines/pipeline_text.hpp"
#include "support/onnx_builder.hpp"

#include <gtest/gtest.h>
#include <zmq.hpp>

#include <thread>

namespace redwood {
namespace {

std::string config(const std::string& endpoint, int frames) {
  return "version: 1\nname: z\nsources:\n  - {name: a, type: synthetic, width: 32, height: 24, frames: " +
         std::to_string(frames) + "}\nsinks:\n  - {name: pub, type: zmq, endpoint: '" + endpoint +
         "', hwm: 1, linger_ms: 0}\n";
}

TEST(PipelineZmqSink, AbsentSubscriberNeverStalls) {
  const std::string endpoint = "ipc://" + (testing::temp_dir("zmq-sink") / "absent.sock").string();
  Pipeline p(testing::pipeline_text(config(endpoint, 500)));
  const auto stats = p.run();
  EXPECT_EQ(stats.streams[0].delivered, 500);
  EXPECT_EQ(stats.sinks[0].written + stats.sinks[0].dropped, 500);
}

TEST(PipelineZmqSink, SlowSubscriberCountsDrops) {
  const std::string endpoint = "ipc://" + (testing::temp_dir("zmq-sink") / "slow.sock").string();
  Pipeline p(testing::pipeline_text(config(endpoint, 3000)));
  zmq::context_t context;
  zmq::socket_t sub(context, zmq::socket_type::sub);
  sub.set(zmq::sockopt::rcvhwm, 1);
  sub.set(zmq::sockopt::rcvbuf, 4096);
  sub.set(zmq::sockopt::subscribe, "");
  sub.connect(endpoint);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  const auto stats = p.run();  // the subscriber never reads
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(stats.streams[0].delivered, 3000);
  EXPECT_EQ(stats.sinks[0].written + stats.sinks[0].dropped, 3000);
  EXPECT_GT(stats.sinks[0].dropped, 0) << "3000 messages into a subscriber that never reads, HWM 1";
}

}  // namespace
}  // namespace redwood
