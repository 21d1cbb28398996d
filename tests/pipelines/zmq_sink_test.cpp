// The ZeroMQ sink never stalls the pipeline: with no subscriber, or one that never reads
// (high-water mark 1), every frame is either sent or counted as dropped, and the run ends.
// With `curve`, only a client whose key the sink lists gets messages; a refusal is logged once
// per key; every mistake in a key file fails the pipeline at load, naming both files' lines.

#include "core/log.hpp"
#include "pipelines/pipeline.hpp"
#include "pipelines/pipeline_text.hpp"
#include "stages/sink/curve_keys.hpp"
#include "support/onnx_builder.hpp"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <zmq.hpp>

#include <fstream>
#include <sstream>
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

// What the redwood logger writes while it lives.
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)) { log().sinks().push_back(sink_); }
  ~LogCapture() {
    auto& sinks = log().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  std::string text() const { return text_.str(); }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Line 12 holds secret_key's value, line 13 clients' (column 19 both).
std::string curve_config(const std::string& endpoint, int frames, const std::string& secret_key, const std::string& clients) {
  return "version: 1\nname: z\nsources:\n  - {name: a, type: synthetic, width: 32, height: 24, frames: " +
         std::to_string(frames) + "}\nsinks:\n  - name: pub\n    type: zmq\n    endpoint: '" + endpoint +
         "'\n    hwm: 100\n    linger_ms: 1000\n    curve:\n      secret_key: '" + secret_key + "'\n      clients: '" +
         clients + "'\n";
}

// A server key pair and one authorized client's, in a folder of the test's own.
class PipelineZmqCurve : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::temp_dir("zmq-curve");
    server_ = write_curve_key_pair(dir_ / "server");
    alice_ = write_curve_key_pair(dir_ / "clients" / "alice");  // the folder holds her secret too: not read
    endpoint_ = "ipc://" + (dir_ / "pub.sock").string();
  }
  std::string curve_yaml(int frames) const { return curve_config(endpoint_, frames, server_.second.string(), (dir_ / "clients").string()); }

  // A SUB socket, CURVE when given a client key file, that reports its handshake's outcome.
  struct Subscriber {
    zmq::socket_t socket, monitor;
    Subscriber(zmq::context_t& context, const std::string& endpoint, const std::filesystem::path* server_public,
               const std::filesystem::path* client_secret)
        : socket(context, zmq::socket_type::sub), monitor(context, zmq::socket_type::pair) {
      if (client_secret != nullptr) {
        const auto client = read_curve_certificate(*client_secret, true);
        socket.set(zmq::sockopt::curve_serverkey, read_curve_certificate(*server_public, false).public_key.z85);
        socket.set(zmq::sockopt::curve_publickey, client.public_key.z85);
        socket.set(zmq::sockopt::curve_secretkey, client.secret_key->z85);
      }
      socket.set(zmq::sockopt::subscribe, "");
      socket.set(zmq::sockopt::reconnect_ivl, 20);
      socket.set(zmq::sockopt::linger, 0);
      monitor.set(zmq::sockopt::linger, 0);
      const int events = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                         ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
      const std::string address = "inproc://monitor-" + std::to_string(reinterpret_cast<std::uintptr_t>(this));
      if (zmq_socket_monitor(socket.handle(), address.c_str(), events) != 0) throw zmq::error_t();
      monitor.connect(address);
      socket.connect(endpoint);
    }
    // The first handshake event (ZMQ_EVENT_HANDSHAKE_*), 0 after a second without one.
    int handshake() {
      monitor.set(zmq::sockopt::rcvtimeo, 1000);
      zmq::message_t event, address;
      if (!monitor.recv(event) || event.size() < 2 || !monitor.recv(address)) return 0;
      std::uint16_t id = 0;
      std::memcpy(&id, event.data(), sizeof id);
      return id;
    }
    // Messages (two parts each) received, up to `most`, until none comes for `idle`.
    int receive(int most, std::chrono::milliseconds idle) {
      socket.set(zmq::sockopt::rcvtimeo, static_cast<int>(idle.count()));
      int n = 0;
      for (zmq::message_t part; n < most && socket.recv(part);) n += socket.get(zmq::sockopt::rcvmore) ? 0 : 1;
      return n;
    }
  };

  std::filesystem::path dir_;
  std::pair<std::filesystem::path, std::filesystem::path> server_, alice_;
  std::string endpoint_;
};

TEST_F(PipelineZmqCurve, AuthorizedClientReceivesEveryMessage) {
  Pipeline p(testing::pipeline_text(curve_yaml(20)));
  zmq::context_t context;
  Subscriber alice(context, endpoint_, &server_.first, &alice_.second);
  ASSERT_EQ(alice.handshake(), ZMQ_EVENT_HANDSHAKE_SUCCEEDED);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // her subscription reaches the sink
  const auto stats = p.run();
  EXPECT_EQ(stats.sinks[0].written, 20);
  EXPECT_EQ(alice.receive(20, std::chrono::milliseconds(500)), 20);
}

TEST_F(PipelineZmqCurve, UnknownClientGetsNothingAndIsCountedAndLoggedOnce) {
  const auto mallory = write_curve_key_pair(dir_ / "mallory");
  const std::string mallory_key = read_curve_certificate(mallory.first, false).public_key.z85;
  LogCapture captured;
  {
    Pipeline p(testing::pipeline_text(curve_yaml(20)));
    zmq::context_t context;
    // Two connections with her key: two refusals, one log line.
    Subscriber intruder(context, endpoint_, &server_.first, &mallory.second);
    Subscriber again(context, endpoint_, &server_.first, &mallory.second);
    ASSERT_EQ(intruder.handshake(), ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
    ASSERT_EQ(again.handshake(), ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
    const auto stats = p.run();
    EXPECT_EQ(stats.sinks[0].written, 20);
    EXPECT_EQ(intruder.receive(1000, std::chrono::milliseconds(200)), 0);
    EXPECT_EQ(again.receive(1000, std::chrono::milliseconds(1)), 0);
  }
  const std::string log_text = captured.text();
  EXPECT_EQ(occurrences(log_text, "sink 'pub': refused a client at "), 1) << log_text;
  EXPECT_EQ(occurrences(log_text, " with CURVE key '" + mallory_key + "': not in the sink's clients"), 1) << log_text;
  EXPECT_NE(log_text.find("sink 'pub': refused 2 connection attempt(s) by 1 unknown CURVE key(s); 0 accepted"),
            std::string::npos)
      << log_text;
}

TEST_F(PipelineZmqCurve, PlainClientGetsNothing) {
  Pipeline p(testing::pipeline_text(curve_yaml(20)));
  zmq::context_t context;
  Subscriber plain(context, endpoint_, nullptr, nullptr);
  const int event = plain.handshake();  // libzmq 4.3 reports a mechanism mismatch without detail
  ASSERT_TRUE(event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL || event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) << event;
  const auto stats = p.run();
  EXPECT_EQ(stats.sinks[0].written, 20);
  EXPECT_EQ(plain.receive(1000, std::chrono::milliseconds(200)), 0);
}

TEST_F(PipelineZmqCurve, BadKeyFilesFailAtLoadNamingBothFiles) {
  const std::string public_z85 = read_curve_certificate(server_.first, false).public_key.z85;
  const std::string secret_z85 = read_curve_certificate(server_.second, true).secret_key->z85;
  const auto write = [&](const std::string& name, const std::string& text) {
    const auto path = dir_ / name;
    std::ofstream(path) << text;
    std::filesystem::permissions(path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    return path.string();
  };
  // The keys on lines 4 and 5, their values from column 19.
  const auto certificate = [](const std::string& public_key, const std::string& secret_key) {
    return "# test\nmetadata\ncurve\n    public-key = \"" + public_key + "\"\n    secret-key = \"" + secret_key + "\"\n";
  };
  const std::string clients = (dir_ / "clients").string();
  struct Case {
    std::string secret_key, clients, says;
  };
  std::string bad_char = secret_z85;
  bad_char[7] = '~';
  const std::string other_secret = read_curve_certificate(alice_.second, true).secret_key->z85;
  std::filesystem::create_directories(dir_ / "no-keys");
  for (const Case& c : {
           Case{(dir_ / "absent.key_secret").string(), clients, testing::where(12, 19) + " sink 'pub': curve: secret_key: " +
                                                                    (dir_ / "absent.key_secret").string() + ": cannot read"},
           Case{write("short.key_secret", certificate(public_z85, secret_z85.substr(1))), clients,
                testing::where(12, 19) + " sink 'pub': curve: secret_key: " + (dir_ / "short.key_secret").string() +
                    ":5:19: secret-key is 39 characters; a Z85 CURVE key has 40"},
           Case{write("tilde.key_secret", certificate(public_z85, bad_char)), clients,
                (dir_ / "tilde.key_secret").string() + ":5:26: secret-key: '~' is not a Z85 character"},
           Case{write("mixed.key_secret", certificate(public_z85, other_secret)), clients,
                (dir_ / "mixed.key_secret").string() + ":5:19: secret-key does not belong to the public-key at line 4"},
           Case{server_.first.string(), clients, server_.first.string() + ": no secret-key line"},
           Case{server_.second.string(), (dir_ / "no-keys").string(),
                testing::where(13, 16) + " sink 'pub': curve: clients: " + (dir_ / "no-keys").string() + ": no *.key certificate"},
           Case{server_.second.string(), write("bad.key", certificate(public_z85.substr(0, 30) + "\"", "")),
                (dir_ / "bad.key").string() + ":4:19: public-key is 31 characters"},
           Case{server_.second.string(), write("nothing.key", "metadata\ncurve\n"),
                (dir_ / "nothing.key").string() + ": no public-key line"},
       }) {
    const std::string e = testing::load_error(curve_config(endpoint_, 1, c.secret_key, c.clients));
    EXPECT_NE(e.find(c.says), std::string::npos) << "expected: " << c.says << "\ngot: " << e;
  }
  const std::string unknown = testing::load_error(curve_config(endpoint_, 1, server_.second.string(), clients) + "      client: x\n");
  EXPECT_NE(unknown.find(testing::where(14, 7) + " sink 'pub': curve: unknown key 'client'"), std::string::npos) << unknown;
  const std::string empty = testing::load_error(config(endpoint_, 1).substr(0, config(endpoint_, 1).size() - 2) + ", curve: }\n");
  EXPECT_NE(empty.find("sink 'pub': curve: expected a map of settings"), std::string::npos) << empty;
}

TEST_F(PipelineZmqCurve, WarnsOfAnOpenSecretKeyAndOfPlainTrafficBeyondLoopback) {
  LogCapture captured;
  std::filesystem::permissions(server_.second, std::filesystem::perms::group_read | std::filesystem::perms::others_read,
                               std::filesystem::perm_options::add);
  { Pipeline p(testing::pipeline_text(curve_yaml(1))); }
  { Pipeline p(testing::pipeline_text(config("tcp://127.0.0.1:*", 1))); }
  EXPECT_EQ(captured.text().find("traffic is plain"), std::string::npos) << captured.text();
  const std::string open_config = config("tcp://*:*", 1);
  { Pipeline p(testing::pipeline_text(open_config)); }
  const std::string log_text = captured.text();
  EXPECT_NE(log_text.find(testing::where(12, 19) + " sink 'pub': curve: the secret key file '" + server_.second.string() +
                          "' is open to group or others; chmod 600 it"),
            std::string::npos)
      << log_text;
  const int endpoint_column = static_cast<int>(open_config.find("'tcp") - open_config.rfind('\n', open_config.find("'tcp")));
  EXPECT_NE(log_text.find(testing::where(6, endpoint_column) + " sink 'pub': 'tcp://*:*' is reachable from other machines and its traffic is plain"),
            std::string::npos)
      << log_text;
}

}  // namespace
}  // namespace redwood
