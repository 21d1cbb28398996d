// The C++ example subscriber (apps/examples/subscribe.cpp) as a user runs it: its help, bad
// arguments, and the lines it prints for messages published on a ZeroMQ socket, plain or CURVE
// (the Python example, apps/examples/subscribe.py, over CURVE too).

#include "stages/sink/curve_keys.hpp"
#include "stages/sink/zap_handler.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>
#include <zmq.hpp>

#include <chrono>
#include <fstream>
#include <future>
#include <memory>
#include <set>
#include <thread>

namespace redwood {
namespace {

testing::LauncherResult subscribe(const std::string& args) {
  return testing::run_command(std::string(REDWOOD_SUBSCRIBE_EXAMPLE) + " " + args);
}

TEST(SubscribeExample, HelpPrintsUsageAndExitsZero) {
  for (const char* flag : {"--help", "-h"}) {
    const auto r = subscribe(flag);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("usage:"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("--count N"), std::string::npos) << r.output;
  }
}

TEST(SubscribeExample, BadArgumentsNameTheProblem) {
  struct Case {
    std::string args, says;
  };
  for (const Case& c : {Case{"", "give the ENDPOINT"}, Case{"tcp://127.0.0.1:1 --count", "--count needs a value"},
                        Case{"tcp://127.0.0.1:1 --count ten", "--count wants a non-negative integer, not 'ten'"},
                        Case{"tcp://127.0.0.1:1 --timeout -1", "--timeout wants a non-negative number"},
                        Case{"tcp://127.0.0.1:1 --verbose", "unknown option '--verbose'"},
                        Case{"tcp://127.0.0.1:1 a/ b/", "unexpected argument 'b/'"},
                        Case{"not-an-endpoint", "not-an-endpoint: Invalid argument"}}) {
    const auto r = subscribe(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.args << "\n" << r.output;
  }
}

// A publisher sends a frame message, a message of another schema and a frame message with a
// field of the wrong type, over and over until the subscriber has printed two lines and exits
// (--count 2): the foreign and malformed messages are skipped with a warning, never a crash.
TEST(SubscribeExample, PrintsFramesAndSkipsOtherMessages) {
  const std::string endpoint = "ipc://" + (testing::temp_dir("subscribe") / "pub.sock").string();
  zmq::context_t context;
  zmq::socket_t pub(context, zmq::socket_type::pub);
  pub.bind(endpoint);
  auto result = std::async(std::launch::async, [&] { return subscribe(endpoint + " demo/ --count 2 --timeout 10"); });
  const std::string good = R"({"schema":"redwood.frame/1","seq":7,"latency_ms":12.4,)"
                           R"("detections":[{"kind":"text","score":0.93,"text":"HELLO"}]})";
  const std::string foreign = R"({"schema":"other/2"})";
  const std::string bad = R"({"schema":"redwood.frame/1","seq":"seven","detections":[]})";
  while (result.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
    for (const std::string* body : {&foreign, &bad, &good}) {
      pub.send(zmq::buffer(std::string("demo/cam0")), zmq::send_flags::sndmore);
      pub.send(zmq::buffer(*body), zmq::send_flags::none);
    }
  }
  const auto r = result.get();
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("demo/cam0 #7 12 ms: HELLO 0.93"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("that is not redwood.frame/1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("skipping a malformed redwood.frame/1 message"), std::string::npos) << r.output;
}

// A CURVE publisher as the zmq sink is one (its ZAP handler, one allowed client), and key pairs.
class SubscribeCurve : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::temp_dir("subscribe-curve");
    server_ = write_curve_key_pair(dir_ / "server");
    client_ = write_curve_key_pair(dir_ / "client");
    endpoint_ = "ipc://" + (dir_ / "pub.sock").string();
    zap_ = std::make_unique<ZapHandler>(context_, std::set<CurveKey>{read_curve_certificate(client_.first, false).public_key},
                                        "test publisher");
    pub_.set(zmq::sockopt::curve_server, true);
    pub_.set(zmq::sockopt::curve_secretkey, read_curve_certificate(server_.second, true).secret_key->z85);
    pub_.set(zmq::sockopt::linger, 0);
    pub_.bind(endpoint_);
  }
  void TearDown() override {
    pub_.close();  // before its ZAP handler
    zap_.reset();
  }
  std::string curve_args() const {
    return endpoint_ + " --server-key " + server_.first.string() + " --client-key " + client_.second.string();
  }
  // Publishes `body` on demo/cam0 until `result` is ready, and returns it.
  testing::LauncherResult publish_until_done(std::future<testing::LauncherResult>& result, const std::string& body) {
    while (result.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
      pub_.send(zmq::buffer(std::string("demo/cam0")), zmq::send_flags::sndmore);
      pub_.send(zmq::buffer(body), zmq::send_flags::none);
    }
    return result.get();
  }

  std::filesystem::path dir_;
  std::pair<std::filesystem::path, std::filesystem::path> server_, client_;
  std::string endpoint_;
  zmq::context_t context_;
  std::unique_ptr<ZapHandler> zap_;
  zmq::socket_t pub_{context_, zmq::socket_type::pub};
};

TEST_F(SubscribeCurve, CppExampleReceivesOverCurve) {
  auto result = std::async(std::launch::async, [&] { return subscribe(curve_args() + " --count 2 --timeout 5"); });
  const auto r = publish_until_done(result, R"({"schema":"redwood.frame/1","seq":3,"latency_ms":5.0,"detections":[]})");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("demo/cam0 #3 5 ms: -"), std::string::npos) << r.output;
  EXPECT_EQ(zap_->refused(), 0);
  EXPECT_GE(zap_->accepted(), 1);
}

TEST_F(SubscribeCurve, CppExampleNamesABadKeyFile) {
  std::ofstream(dir_ / "short.key") << "curve\n    public-key = \"abc\"\n";
  struct Case {
    std::string args, says;
  };
  const std::string absent = (dir_ / "absent.key").string(), short_key = (dir_ / "short.key").string();
  for (const Case& c : {Case{endpoint_ + " --server-key " + absent + " --client-key " + client_.second.string(),
                             "subscribe: " + absent + ": cannot read: No such file or directory"},
                        Case{endpoint_ + " --server-key " + short_key + " --client-key " + client_.second.string(),
                             "subscribe: " + short_key + ":2: public-key is not a CURVE key (40 Z85 characters)"},
                        Case{endpoint_ + " --server-key " + server_.first.string() + " --client-key " + client_.first.string(),
                             "subscribe: " + client_.first.string() + ": no secret-key line"},
                        Case{endpoint_ + " --server-key " + server_.first.string(), "CURVE needs both --server-key and --client-key"},
                        Case{endpoint_ + " --client-key", "--client-key needs a value"}}) {
    const auto r = subscribe(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.args << "\n" << r.output;
  }
}

// A client key the publisher does not list: the handshake is refused and nothing arrives.
TEST_F(SubscribeCurve, CppExampleWithAnUnknownKeyGetsNothing) {
  const auto stranger = write_curve_key_pair(dir_ / "stranger");
  auto result = std::async(std::launch::async, [&] {
    return subscribe(endpoint_ + " --server-key " + server_.first.string() + " --client-key " + stranger.second.string() +
                     " --count 1 --timeout 0.5");
  });
  const auto r = publish_until_done(result, R"({"schema":"redwood.frame/1","seq":3,"latency_ms":5.0,"detections":[]})");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("demo/cam0"), std::string::npos) << r.output;
  EXPECT_GE(zap_->refused(), 1);
}

TEST_F(SubscribeCurve, PythonExampleReceivesOverCurveAndNamesABadKeyFile) {
  const std::string python = "/usr/bin/python3";
  if (testing::run_command(python + " -c 'import zmq.auth'").exit_code != 0) GTEST_SKIP() << python << " has no zmq (python3-zmq)";
  const std::string script = python + " " + REDWOOD_SOURCE_DIR + "/apps/examples/subscribe.py ";
  auto result = std::async(std::launch::async, [&] { return testing::run_command(script + curve_args() + " --count 2 --timeout 5"); });
  const auto r = publish_until_done(
      result, R"({"schema":"redwood.frame/1","seq":4,"latency_ms":6.0,"detections":[{"kind":"face","score":0.9,"box":[1,2,3,4]}]})");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("demo/cam0 #4 6 ms: 'face' 0.90 at (1,2 3x4)"), std::string::npos) << r.output;

  const auto bad = testing::run_command(script + endpoint_ + " --server-key " + server_.first.string() + " --client-key " +
                                        client_.first.string());
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("subscribe.py: " + client_.first.string() + ": no secret-key line"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace redwood
