#pragma once
// ZapHandler: who may connect to the CURVE sockets of one ZeroMQ context. libzmq asks, for each
// CURVE handshake, the ZAP handler bound at inproc://zeromq.zap.01 in the socket's context (ZAP
// 1.0, rfc.zeromq.org/spec/27); this one accepts the client public keys it was given and refuses
// every other, counting each refusal and logging the first of each key.
//
//   client ── CURVE handshake ──► server socket ── ZAP request ──► ZapHandler (its thread)
//                                              ◄── 200 / 400 ─────
//
// What must hold: the handler is bound before a CURVE server socket binds, and outlives it. With
// no handler at that address libzmq 4.3 lets every client in (ZAP_ENFORCE_DOMAIN is draft API);
// a handler that is bound but no longer answering leaves handshakes waiting, which is safe.

#include "stages/sink/curve_keys.hpp"

#include <zmq.hpp>

#include <atomic>
#include <cstdint>
#include <set>
#include <string>
#include <thread>

namespace redwood {

class ZapHandler {
 public:
  /// Binds the ZAP address in `context` (one handler per context) and starts the thread.
  /// `what` starts its log lines ("sink 'pub'").
  ZapHandler(zmq::context_t& context, std::set<CurveKey> allowed, std::string what);
  /// Stops the thread and closes its sockets; the CURVE server sockets should be closed first.
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  /// Handshakes refused (each connection attempt counts).
  std::int64_t refused() const { return refused_.load(); }
  /// Distinct unknown keys refused.
  std::int64_t refused_keys() const { return refused_keys_.load(); }
  std::int64_t accepted() const { return accepted_.load(); }

 private:
  void serve();
  void answer();

  std::set<CurveKey> allowed_;
  std::string what_;
  std::set<CurveKey> refused_logged_;  // the thread's own
  std::atomic<std::int64_t> refused_{0}, refused_keys_{0}, accepted_{0};
  zmq::socket_t requests_;   // REP at inproc://zeromq.zap.01; the thread's
  zmq::socket_t stop_;       // PAIR: the owner sends one message to stop the thread
  zmq::socket_t stop_peer_;  // PAIR: the thread's end
  std::thread thread_;
};

}  // namespace redwood
