#pragma once
// Sharding without a coordinator: N launchers run one pipeline file, each knowing only its
// ordinal and N (`redwood run --shard I/N`, or a Kubernetes StatefulSet's pod name and replica
// count), and each runs the streams that rendezvous (highest-random-weight) hashing of the stream
// id gives it. Every worker computes the same answer alone; going from N to N+1 workers moves
// only the streams the new worker now wins, about 1/(N+1) of them, and moves them onto it.
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
/// shard_from_statefulset). Throws InvalidArgument naming the option and what is wrong.
ShardSpec parse_shard(const std::string& text);
/// A StatefulSet's pod is named "<set>-<ordinal>" (POD_NAME, given from metadata.name, else
/// HOSTNAME, which Kubernetes sets to the pod name); the count comes from REDWOOD_REPLICAS.
/// The values are passed in (null: unset) so that tests need no environment.
ShardSpec shard_from_statefulset(const char* pod_name, const char* hostname, const char* replicas);

}  // namespace redwood
