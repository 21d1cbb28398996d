// zmq sink: one JSON message per frame on a ZeroMQ PUB socket, as two parts: the topic
// "<pipeline>/<stream>" (subscribers filter by prefix) and the frame_json message. Sends never
// block, and a slow or absent subscriber never stalls the pipeline. A plain PUB socket drops
// silently at its high-water mark; so the socket is an XPUB with XPUB_NODROP, which refuses the
// send instead (EAGAIN under dontwait), and the sink counts the drop. Subscribers still connect
// with an ordinary SUB socket.
//
// With `curve`, the socket is a CURVE server: traffic is encrypted, and only the clients whose
// public keys are listed may connect, as ZapHandler decides (stages/sink/zap_handler.hpp; key
// files: stages/sink/curve_keys.hpp). The handler is bound before the socket and stopped after
// it is closed: libzmq lets every client in while no handler is bound.
//
//   - name: pub
//     type: zmq
//     endpoint: tcp://0.0.0.0:5555
//     hwm: 100
//     curve: {secret_key: keys/server.key_secret, clients: keys/clients}   # a folder of *.key

#include "core/log.hpp"
#include "stages/sink/curve_keys.hpp"
#include "stages/sink/frame_json.hpp"
#include "stages/sink/sink.hpp"
#include "stages/sink/zap_handler.hpp"

#include <fmt/format.h>
#include <zmq.hpp>

#include <memory>
#include <set>

namespace redwood {
namespace {

// Whether a bound endpoint is reachable from this machine only.
bool local_only(const std::string& endpoint) {
  if (endpoint.rfind("ipc://", 0) == 0 || endpoint.rfind("inproc://", 0) == 0) return true;
  if (endpoint.rfind("tcp://", 0) != 0) return false;
  const std::string host = endpoint.substr(6, endpoint.rfind(':') - 6);
  return host.rfind("127.", 0) == 0 || host == "localhost" || host == "[::1]" || host == "::1" || host == "lo";
}

struct CurveServerKeys {
  CurveKey secret_key;
  std::set<CurveKey> clients;
};

// The `curve` map: the server's secret certificate and the clients' public ones, every mistake
// at its place in the pipeline file and, when in a key file, at its place there too.
CurveServerKeys read_curve_option(Params& sink, const std::string& sink_what) {
  Params p(sink.node("curve"), std::make_shared<ConfigOrigin>(sink.origin()), sink_what + ": curve");
  CurveServerKeys keys;
  const auto secret_text = p.require<std::string>("secret_key");
  const auto secret_file = p.origin().resolve(secret_text);
  try {
    keys.secret_key = *read_curve_certificate(secret_file, true).secret_key;
  } catch (const Error& e) {
    p.fail("secret_key", e.what());
  }
  std::error_code error;
  using std::filesystem::perms;
  const perms mode = std::filesystem::status(secret_file, error).permissions();
  if (!error && (mode & (perms::group_all | perms::others_all)) != perms::none) {
    log().warn("{}: {}: the secret key file '{}' is open to group or others; chmod 600 it", p.origin().where(p.self()["secret_key"]),
               p.what(), secret_file.string());
  }
  // clients: a certificate file or a folder of them, or a list of such.
  const YAML::Node clients = p.node("clients");
  if (!clients || clients.IsNull()) p.fail("clients", "missing required key 'clients' (a file or folder of client *.key certificates)");
  std::vector<YAML::Node> entries;
  if (clients.IsSequence()) {
    for (const auto& e : clients) entries.push_back(e);
    if (entries.empty()) p.fail("clients", "an empty list: no client could connect");
  } else {
    entries.push_back(clients);
  }
  for (const auto& entry : entries) {
    if (!entry.IsScalar()) p.origin().fail(entry, p.what() + ": clients: expected a file or folder (or a list of them)");
    try {
      for (const auto& cert : read_curve_certificates(p.origin().resolve(entry.Scalar()))) keys.clients.insert(cert.public_key);
    } catch (const Error& e) {
      p.origin().fail(entry, fmt::format("{}: clients: {}", p.what(), e.what()));
    }
  }
  p.finish();
  return keys;
}

class ZmqSink final : public Sink {
 public:
  explicit ZmqSink(SinkArgs& a)
      : what_(fmt::format("sink '{}'", a.name)), pipeline_(a.pipeline), socket_(context_, zmq::socket_type::xpub) {
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
    if (p.node("curve")) {  // `curve:` with nothing after it is refused as not a map
      CurveServerKeys keys = read_curve_option(p, what_);
      zap_ = std::make_unique<ZapHandler>(context_, std::move(keys.clients), what_);
      socket_.set(zmq::sockopt::curve_server, true);
      socket_.set(zmq::sockopt::curve_secretkey, keys.secret_key.z85);
      socket_.set(zmq::sockopt::zap_domain, "redwood");
    } else if (!local_only(endpoint_)) {
      log().warn("{}: {}: '{}' is reachable from other machines and its traffic is plain: anyone who can "
                 "connect reads every message (set `curve` to encrypt and authenticate)",
                 p.origin().where(p.self()["endpoint"]), what_, endpoint_);
    }
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

  void close() override {
    socket_.close();
    if (zap_ == nullptr) return;
    if (zap_->refused() > 0) {
      log().warn("{}: refused {} connection attempt(s) by {} unknown CURVE key(s); {} accepted", what_, zap_->refused(),
                 zap_->refused_keys(), zap_->accepted());
    }
    zap_.reset();  // after the socket: it must never accept a handshake with no handler bound
  }

 private:
  std::string what_, pipeline_, endpoint_;
  std::string topic_, body_;
  zmq::context_t context_;
  std::unique_ptr<ZapHandler> zap_;  // declared between them: stopped after socket_ closes, before context_ ends
  zmq::socket_t socket_;
};

}  // namespace

RW_REGISTER_SINK("zmq", ZmqSink);

}  // namespace redwood
