#pragma once
// Sharding without a coordinator: N launchers run one pipeline file, each knowing only its
// ordinal and N (`redwood run --shard I/N`, or a Kubernetes StatefulSet's pod name and either a
// fixed count or the addresses of its headless Service, counted at run time:
// pipelines/peer_count.hpp), and each runs the streams that rendezvous (highest-random-weight)
// hashing of the stream id gives it. Every worker computes the same answer alone; going from N
// to N+1 workers moves only the streams the new worker now wins, about 1/(N+1) of them, and
// moves them onto it.
//
// The weights use a hash of our own (FNV-1a, then a murmur3 finalizer), never std::hash: its
// values differ between standard libraries and builds, and two workers built differently would
// then both own (or both skip) a stream.

#include <cstdint>
#include <string>
#include <string_view>

namespace redwood {

/// This worker's place among the workers: ordinal `index` (0-based) of `count`.
struct ShardSpec {
  int index = 0;
  int count = 1;
};

/// The largest `count` accepted (a StatefulSet of more replicas is not a thing to run here).
inline constexpr int kMaxShards = 65536;

/// A stable, well-mixed 64-bit hash of (stream, worker): the same on every machine and build.
std::uint64_t shard_weight(std::string_view stream, int worker);
/// The worker (0 to shards-1) that owns `stream`: the one of highest weight. shards >= 1.
int owner_of(std::string_view stream, int shards);
inline bool owns(const ShardSpec& shard, std::string_view stream) { return owner_of(stream, shard.count) == shard.index; }

/// `--shard` as written: "I/N" (0 <= I < N), or "statefulset" (read from the environment, as
/// read_statefulset; with REDWOOD_PEERS the count is looked up once, here: a run that follows it
/// uses run_following_peers instead, pipelines/reshard.hpp). Throws InvalidArgument naming the
/// option and what is wrong (IoError when REDWOOD_PEERS does not resolve).
ShardSpec parse_shard(const std::string& text);

/// The environment `--shard statefulset` reads (null or empty: unset), passed in so that tests
/// need no environment.
struct StatefulSetEnv {
  const char* pod_name = nullptr;        // POD_NAME, the pod's metadata.name
  const char* hostname = nullptr;        // HOSTNAME (Kubernetes sets it to the pod name)
  const char* replicas = nullptr;        // REDWOOD_REPLICAS: a fixed worker count
  const char* peers = nullptr;           // REDWOOD_PEERS: the StatefulSet's headless Service
  const char* peers_interval = nullptr;  // REDWOOD_PEERS_INTERVAL: seconds between counts
  /// The process's environment.
  static StatefulSetEnv from_process();
};

/// REDWOOD_PEERS_INTERVAL's default and bounds, in seconds.
inline constexpr double kDefaultPeersInterval = 10;
inline constexpr double kMinPeersInterval = 0.1, kMaxPeersInterval = 3600;

/// Where a StatefulSet's pod finds its place: the ordinal from its name ("<set>-<ordinal>",
/// POD_NAME, else HOSTNAME), and the count either fixed (REDWOOD_REPLICAS, which wins when both
/// are set) or counted at run time as the addresses REDWOOD_PEERS resolves to
/// (pipelines/peer_count.hpp).
struct StatefulSetShard {
  int index = 0;
  int replicas = 0;    // the fixed count; 0: the count follows `peers`
  std::string peers;   // the DNS name that counts the workers (empty with a fixed count)
  double peers_interval_s = kDefaultPeersInterval;
};

/// Reads and checks the variables; throws InvalidArgument naming the variable and what is wrong
/// (neither REDWOOD_REPLICAS nor REDWOOD_PEERS set, a pod name without -<ordinal>, an ordinal not
/// below REDWOOD_REPLICAS, an interval that is not a number of seconds within the bounds).
StatefulSetShard read_statefulset(const StatefulSetEnv& env);
/// The fixed form: read_statefulset with only these three variables; REDWOOD_REPLICAS required.
ShardSpec shard_from_statefulset(const char* pod_name, const char* hostname, const char* replicas);

}  // namespace redwood
