// The C++ example subscriber (apps/examples/subscribe.cpp) as a user runs it: its help, bad
// arguments, and the lines it prints for messages published on a ZeroMQ socket.

#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>
#include <zmq.hpp>

#include <chrono>
#include <future>
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

}  // namespace
}  // namespace redwood
