// Counting the workers through DNS, and following the count (pipelines/peer_count.hpp says why).

#include "pipelines/peer_count.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/thread_name.hpp"
#include "pipelines/shard.hpp"

#include <fmt/format.h>

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <string_view>

namespace redwood {

namespace {

using Clock = std::chrono::steady_clock;

std::chrono::duration<double> seconds(double s) { return std::chrono::duration<double>(s); }

}  // namespace

int count_peers(const std::string& name) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;  // one entry per address, not one per socket type
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &found);
  if (rc != 0) {
    const std::string why = rc == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(rc);
    throw IoError(fmt::format("cannot resolve '{}': {}", name, why));
  }
  std::set<std::string> v4, v6;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
      v4.emplace(reinterpret_cast<const char*>(&in->sin_addr), sizeof in->sin_addr);
    } else if (a->ai_family == AF_INET6) {
      const auto* in = reinterpret_cast<const sockaddr_in6*>(a->ai_addr);
      v6.emplace(reinterpret_cast<const char*>(&in->sin6_addr), sizeof in->sin6_addr);
    }
  }
  ::freeaddrinfo(found);
  const auto n = static_cast<int>(std::max(v4.size(), v6.size()));
  RW_EXPECTS(n > 0, IoError, "'{}' resolves to no IPv4 or IPv6 address", name);
  return n;
}

int workers_counted(int seen, int index) { return std::clamp(seen, index + 1, kMaxShards); }

int first_peer_count(const PeerCounter& counter, int index, double interval_s, const std::string& what) {
  const auto give_up = Clock::now() + seconds(3 * interval_s);
  const auto pause = seconds(std::min(1.0, interval_s));
  for (bool first = true;; first = false) {
    try {
      return workers_counted(counter(), index);
    } catch (const std::exception& e) {
      if (Clock::now() + pause > give_up) {
        throw IoError(fmt::format("--shard statefulset: {}: {} (retried for {:g} s: 3 x REDWOOD_PEERS_INTERVAL)", what,
                                  e.what(), 3 * interval_s));
      }
      if (first) log().warn("{}: {}; retrying for up to {:g} s", what, e.what(), 3 * interval_s);
    }
    std::this_thread::sleep_for(pause);
  }
}

int peer_count_now(const std::string& peers, int index) {
  try {
    return workers_counted(count_peers(peers), index);
  } catch (const IoError& e) {
    throw IoError(fmt::format("--shard statefulset: REDWOOD_PEERS: {}", e.what()));
  }
}

PeerCountFollower::PeerCountFollower(int index, int current) : index_(index), current_(workers_counted(current, index)) {}

std::optional<int> PeerCountFollower::seen(int seen) {
  const int n = workers_counted(seen, index_);
  if (n == current_) {
    candidate_.reset();
    return std::nullopt;
  }
  if (candidate_ != n) {
    candidate_ = n;  // once: wait for the next check
    return std::nullopt;
  }
  candidate_.reset();
  current_ = n;
  return n;
}

void PeerCountFollower::failed() { candidate_.reset(); }

PeerWatch::PeerWatch(PeerCounter counter, int index, int current, double interval_s, std::string what)
    : counter_(std::move(counter)), interval_s_(interval_s), what_(std::move(what)), follower_(index, current),
      count_(follower_.current()) {
  RW_EXPECTS(interval_s > 0, InvalidArgument, "PeerWatch: interval {} s (must be > 0)", interval_s);
  thread_ = std::thread([this] { loop(); });
}

PeerWatch::~PeerWatch() {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void PeerWatch::loop() {
  set_thread_name("rw-peers");
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, seconds(interval_s_), [this] { return done_; })) {
    lock.unlock();
    check();
    lock.lock();
  }
}

void PeerWatch::check() {
  try {
    const int seen = counter_();
    if (failing_) {
      log().info("{}: counted {} worker(s) again", what_, seen);
      failing_ = false;
    }
    if (const auto changed = follower_.seen(seen)) count_ = *changed;
  } catch (const std::exception& e) {
    follower_.failed();
    if (!failing_) {
      log().warn("{}: {}; keeping {} worker(s) (logged once until it answers again)", what_, e.what(),
                 follower_.current());
      failing_ = true;
    }
  }
  ++checks_;
}

}  // namespace redwood
