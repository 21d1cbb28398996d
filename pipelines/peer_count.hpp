#pragma once
// How many workers there are, found at run time: a StatefulSet's headless Service (with
// publishNotReadyAddresses) resolves to one address per pod, so counting its addresses counts
// the pods, whatever an autoscaler made of spec.replicas, with no coordinator and no API-server
// access. `--shard statefulset` with REDWOOD_PEERS counts at start and then every
// REDWOOD_PEERS_INTERVAL seconds (PeerWatch); pipelines/reshard.hpp re-shards on a change.
//
// Two rules keep a worker from re-sharding on noise: a worker always counts itself (ordinal I
// means at least I+1 workers, even before DNS lists its own address), and a new count replaces
// the current one only when two checks in a row see it (PeerCountFollower): a pod coming up or
// going away during a rolling change may be listed in one answer and not the next.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace redwood {

/// Counts the workers now; throws (any std::exception, its message saying why) when it cannot.
/// count_peers for a DNS name in the launcher; anything in a test.
using PeerCounter = std::function<int()>;

/// The workers `name` stands for: its distinct addresses (getaddrinfo), counted per address
/// family and the larger count taken, so that a dual-stack Service (an IPv4 and an IPv6 address
/// per pod) counts each pod once. Throws IoError naming `name` when it does not resolve.
int count_peers(const std::string& name);

/// A count as a worker of ordinal `index` takes it: at least index + 1, at most kMaxShards.
int workers_counted(int seen, int index);

/// The count at start, when REDWOOD_PEERS is used: `counter` is asked until it answers, every
/// min(1 s, interval_s) for up to 3 x interval_s (30 s by default: the pod's own DNS record, or
/// the cluster's DNS, may lag its start by a few seconds); then IoError saying what failed.
/// `what` names the source in messages ("REDWOOD_PEERS='redwood-cams'").
int first_peer_count(const PeerCounter& counter, int index, double interval_s, const std::string& what);
/// parse_shard's one look: count_peers(peers) once, taken by workers_counted; IoError on failure.
int peer_count_now(const std::string& peers, int index);

/// The two-in-a-row rule, apart from time and DNS so that tests can drive it check by check.
class PeerCountFollower {
 public:
  PeerCountFollower(int index, int current);

  /// A check that counted `seen` workers (taken by workers_counted). Returns the new count when
  /// this check confirms a change: the previous check saw the same count, and it differs from
  /// the current one. A count equal to the current one forgets a change seen once.
  std::optional<int> seen(int seen);
  /// A check that failed: the current count stays, and a change seen once must be seen twice
  /// again (a failure breaks the row).
  void failed();

  int current() const { return current_; }

 private:
  int index_;
  int current_;
  std::optional<int> candidate_;  // a different count the last check saw
};

/// Counts the workers every `interval_s` on a thread of its own and follows the count with
/// PeerCountFollower; count() is the followed count, which the run compares with the one it
/// shards by. A failing counter keeps the count and is logged once (a warning), then once more
/// when it answers again. Destruction stops the thread (waiting for a check in progress: a DNS
/// lookup ends within the resolver's timeout).
class PeerWatch {
 public:
  PeerWatch(PeerCounter counter, int index, int current, double interval_s, std::string what);
  ~PeerWatch();
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  /// The count two checks in a row confirmed last (the starting count until then).
  int count() const { return count_.load(); }
  /// Checks done so far (failed ones too).
  long checks() const { return checks_.load(); }

 private:
  void loop();
  void check();

  PeerCounter counter_;
  double interval_s_;
  std::string what_;
  PeerCountFollower follower_;  // the watch thread's alone
  bool failing_ = false;        // the watch thread's alone
  std::atomic<int> count_;
  std::atomic<long> checks_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;  // guarded by mutex_
  std::thread thread_;
};

}  // namespace redwood
