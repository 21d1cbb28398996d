#include "stages/sink/zap_handler.hpp"

#include "core/error.hpp"
#include "core/log.hpp"

#include <zmq_addon.hpp>

#include <iterator>
#include <vector>

namespace redwood {
namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
constexpr const char* kStopEndpoint = "inproc://redwood.zap.stop";

// " at 192.0.2.7", from a request's address frame (empty over ipc://).
std::string peer(const zmq::message_t& address) {
  return address.size() == 0 ? std::string() : " at " + address.to_string();
}

}  // namespace

ZapHandler::ZapHandler(zmq::context_t& context, std::set<CurveKey> allowed, std::string what)
    : allowed_(std::move(allowed)),
      what_(std::move(what)),
      requests_(context, zmq::socket_type::rep),
      stop_(context, zmq::socket_type::pair),
      stop_peer_(context, zmq::socket_type::pair) {
  for (zmq::socket_t* s : {&requests_, &stop_, &stop_peer_}) s->set(zmq::sockopt::linger, 0);
  try {
    requests_.bind(kZapEndpoint);
    stop_peer_.bind(kStopEndpoint);
    stop_.connect(kStopEndpoint);
  } catch (const zmq::error_t& e) {
    throw IoError(fmt::format("{}: cannot start the CURVE authentication handler: {}", what_, e.what()));
  }
  // The sockets pass to the thread here; thread creation orders the memory as ZeroMQ requires.
  thread_ = std::thread([this] { serve(); });
}

ZapHandler::~ZapHandler() {
  try {
    stop_.send(zmq::str_buffer("stop"), zmq::send_flags::none);
  } catch (const zmq::error_t& e) {
    log().error("{}: cannot stop the CURVE authentication handler: {}", what_, e.what());
  }
  if (thread_.joinable()) thread_.join();
}

void ZapHandler::serve() {
  try {
    zmq::pollitem_t items[] = {{requests_.handle(), 0, ZMQ_POLLIN, 0}, {stop_peer_.handle(), 0, ZMQ_POLLIN, 0}};
    for (;;) {
      zmq::poll(items, 2, std::chrono::milliseconds(-1));
      if ((items[1].revents & ZMQ_POLLIN) != 0) return;
      if ((items[0].revents & ZMQ_POLLIN) != 0) answer();
    }
  } catch (const std::exception& e) {
    // The REP socket stays bound until the destructor: clients wait in their handshake rather
    // than being let in unchecked.
    log().error("{}: the CURVE authentication handler stopped: {}; no client can connect now", what_, e.what());
  }
}

void ZapHandler::answer() {
  std::vector<zmq::message_t> request;
  if (!zmq::recv_multipart(requests_, std::back_inserter(request))) return;
  // Request: version, request id, domain, address, routing id, mechanism, credentials...
  // (CURVE: one credential, the client's 32-byte public key).
  std::string status = "400", text = "unknown client key", user;
  if (request.size() < 6 || request[0].to_string_view() != "1.0") {
    status = "500";
    text = "malformed ZAP request";
    log().error("{}: malformed ZAP request ({} frame(s)); refused", what_, request.size());
  } else if (request[5].to_string_view() != "CURVE" || request.size() != 7 || request[6].size() != 32) {
    text = "CURVE only";
    ++refused_;
    log().warn("{}: refused a {} client{}: only CURVE clients are accepted", what_, request[5].to_string(),
               peer(request[3]));
  } else {
    const CurveKey key = CurveKey::from_bytes(static_cast<const std::uint8_t*>(request[6].data()));
    if (allowed_.count(key) != 0) {
      status = "200";
      text = "OK";
      user = key.z85;
      ++accepted_;
    } else {
      ++refused_;
      if (refused_logged_.insert(key).second) {
        ++refused_keys_;
        log().warn("{}: refused a client{} with CURVE key '{}': not in the sink's clients (later attempts "
                   "with this key are counted, not logged)",
                   what_, peer(request[3]), key.z85);
      }
    }
  }
  const std::string request_id = request.size() > 1 ? request[1].to_string() : std::string();
  std::vector<zmq::const_buffer> reply = {zmq::str_buffer("1.0"), zmq::buffer(request_id), zmq::buffer(status),
                                          zmq::buffer(text),      zmq::buffer(user),       zmq::const_buffer()};
  zmq::send_multipart(requests_, reply);
}

}  // namespace redwood
