// zmq sink: one JSON message per frame on a ZeroMQ PUB socket, as two parts: the topic
// "<pipeline>/<stream>" (subscribers filter by prefix) and the frame_json message. Sends never
// block, and a slow or absent subscriber never stalls the pipeline. A plain PUB socket drops
// silently at its high-water mark; so the socket is an XPUB with XPUB_NODROP, which refuses the
// send instead (EAGAIN under dontwait), and the sink counts the drop. Subscribers still connect
// with an ordinary SUB socket.
//
//   - name: pub
//     type: zmq
//     endpoint: tcp://127.0.0.1:5555
//     hwm: 100

#include "core/log.hpp"
#include "stages/sink/frame_json.hpp"
#include "stages/sink/sink.hpp"

#include <fmt/format.h>
#include <zmq.hpp>

namespace redwood {
namespace {

class ZmqSink final : public Sink {
 public:
  explicit ZmqSink(SinkArgs& a) : pipeline_(a.pipeline), socket_(context_, zmq::socket_type::xpub) {
    Params& p = a.params;
    endpoint_ = p.require<std::string>("endpoint");
    // ZeroMQ takes a TCP port modulo 65536 (99999 binds 34463): a port out of range is refused.
    if (endpoint_.rfind("tcp://", 0) == 0) {
      const std::string port = endpoint_.substr(endpoint_.rfind(':') + 1);
      const bool digits = !port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos;
      const int number = digits ? std::stoi(port) : 0;
      if (port != "*" && (number < 1 || number > 65535)) {
        p.fail("endpoint", fmt::format("'{}': the port must be from 1 to 65535 (or * for any free port)", endpoint_));
      }
    }
    const int hwm = p.get<int>("hwm", 100);
    if (hwm < 1) p.fail("hwm", "must be at least 1");
    socket_.set(zmq::sockopt::sndhwm, hwm);
    socket_.set(zmq::sockopt::xpub_nodrop, 1);
    socket_.set(zmq::sockopt::linger, p.get<int>("linger_ms", 1000));
    try {
      socket_.bind(endpoint_);
    } catch (const zmq::error_t& e) {
      p.fail("endpoint", fmt::format("cannot bind '{}': {}", endpoint_, e.what()));
    }
  }

  void write(const Frame& f, double latency_ms) override {
    // Subscription messages arrive on an XPUB socket; nothing here needs them.
    for (zmq::message_t m; socket_.recv(m, zmq::recv_flags::dontwait);) {
    }
    // The buffers keep their capacity from frame to frame (write is called by one thread).
    topic_.assign(pipeline_).append("/").append(f.stream_name);
    body_.clear();
    append_frame_json(body_, f, pipeline_, latency_ms);
    const std::string& topic = topic_;
    const std::string& body = body_;
    // A PUB socket at its high-water mark drops silently; dontwait makes that visible as a
    // refused send so that it can be counted.
    const auto sent_topic = socket_.send(zmq::buffer(topic), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    if (!sent_topic) {
      ++dropped_;
      return;
    }
    socket_.send(zmq::buffer(body), zmq::send_flags::dontwait);  // the second part follows the first
    ++written_;
  }

  void close() override { socket_.close(); }

 private:
  std::string pipeline_, endpoint_;
  std::string topic_, body_;
  zmq::context_t context_;
  zmq::socket_t socket_;
};

}  // namespace

RW_REGISTER_SINK("zmq", ZmqSink);

}  // namespace redwood
