// Rendezvous hashing of stream ids and the --shard option (pipelines/shard.hpp says why).

#include "pipelines/shard.hpp"

#include "core/error.hpp"
#include "pipelines/peer_count.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>

namespace redwood {

namespace {

// murmur3's 64-bit finalizer: every input bit flips about half the output bits, which FNV-1a
// alone does not do for inputs differing in their last bytes ("cam-1" and "cam-2").
std::uint64_t fmix64(std::uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
constexpr std::uint64_t kFnvPrime = 0x100000001b3ULL;

std::uint64_t fnv1a(std::uint64_t h, const void* data, std::size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) {
    h ^= bytes[i];
    h *= kFnvPrime;
  }
  return h;
}

/// A whole decimal number in `text` within [low, high], or false.
bool whole_number(std::string_view text, int low, int high, int& value) {
  if (text.empty()) return false;
  const auto [rest, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && rest == text.data() + text.size() && value >= low && value <= high;
}

}  // namespace

std::uint64_t shard_weight(std::string_view stream, int worker) {
  std::uint64_t h = fnv1a(kFnvOffset, stream.data(), stream.size());
  // The worker's ordinal as four little-endian bytes (not the host's order: the same everywhere).
  const auto k = static_cast<std::uint32_t>(worker);
  const unsigned char bytes[4] = {static_cast<unsigned char>(k), static_cast<unsigned char>(k >> 8),
                                  static_cast<unsigned char>(k >> 16), static_cast<unsigned char>(k >> 24)};
  h = fnv1a(h, bytes, sizeof bytes);
  return fmix64(h);
}

int owner_of(std::string_view stream, int shards) {
  RW_EXPECTS(shards >= 1, InvalidArgument, "owner_of: {} shards (need at least 1)", shards);
  int best = 0;
  std::uint64_t best_weight = shard_weight(stream, 0);
  for (int k = 1; k < shards; ++k) {
    // Ties (a 2^-64 chance) go to the lower ordinal, so every worker still agrees.
    if (const std::uint64_t w = shard_weight(stream, k); w > best_weight) {
      best = k;
      best_weight = w;
    }
  }
  return best;
}

ShardSpec parse_shard(const std::string& text) {
  if (text == "statefulset") {
    const StatefulSetShard s = read_statefulset(StatefulSetEnv::from_process());
    return {s.index, s.replicas > 0 ? s.replicas : peer_count_now(s.peers, s.index)};
  }
  const auto slash = text.find('/');
  ShardSpec shard;
  if (slash == std::string::npos || !whole_number(std::string_view(text).substr(0, slash), 0, kMaxShards, shard.index) ||
      !whole_number(std::string_view(text).substr(slash + 1), 1, kMaxShards, shard.count)) {
    throw InvalidArgument(fmt::format("--shard {}: expected I/N (this worker's 0-based ordinal I of N workers, N from 1 "
                                      "to {}, e.g. 1/3) or 'statefulset'",
                                      text, kMaxShards));
  }
  if (shard.index >= shard.count) {
    throw InvalidArgument(fmt::format("--shard {}: the ordinal must be below the count (ordinals are 0 to {})", text,
                                      shard.count - 1));
  }
  return shard;
}

StatefulSetEnv StatefulSetEnv::from_process() {
  return {std::getenv("POD_NAME"), std::getenv("HOSTNAME"), std::getenv("REDWOOD_REPLICAS"), std::getenv("REDWOOD_PEERS"),
          std::getenv("REDWOOD_PEERS_INTERVAL")};
}

StatefulSetShard read_statefulset(const StatefulSetEnv& env) {
  const auto set = [](const char* value) { return value != nullptr && *value != '\0'; };
  const bool from_pod = set(env.pod_name);
  const char* variable = from_pod ? "POD_NAME" : "HOSTNAME";
  const std::string name = from_pod ? env.pod_name : env.hostname != nullptr ? env.hostname : "";
  if (name.empty()) {
    throw InvalidArgument("--shard statefulset: neither POD_NAME nor HOSTNAME is set (a StatefulSet's pod is named "
                          "<set>-<ordinal>; give POD_NAME from metadata.name)");
  }
  StatefulSetShard shard;
  const auto dash = name.rfind('-');
  if (dash == std::string::npos || !whole_number(std::string_view(name).substr(dash + 1), 0, kMaxShards - 1, shard.index)) {
    throw InvalidArgument(fmt::format("--shard statefulset: {}='{}' does not end in -<ordinal> as a StatefulSet's pod "
                                      "name does (e.g. redwood-2)",
                                      variable, name));
  }
  // Checked even with a fixed count, where it is unused: a mistyped value is caught either way.
  if (set(env.peers_interval)) {
    const std::string text = env.peers_interval;
    double s = 0;
    const auto [rest, ec] = std::from_chars(text.data(), text.data() + text.size(), s);
    // (from_chars takes "inf" and "nan" too: the bounds refuse them.)
    if (ec != std::errc() || rest != text.data() + text.size() || !(s >= kMinPeersInterval && s <= kMaxPeersInterval)) {
      throw InvalidArgument(fmt::format("--shard statefulset: REDWOOD_PEERS_INTERVAL='{}' is not a number of seconds "
                                        "from {} to {} (default {})",
                                        text, kMinPeersInterval, kMaxPeersInterval, kDefaultPeersInterval));
    }
    shard.peers_interval_s = s;
  }
  if (set(env.replicas)) {
    const std::string count = env.replicas;
    if (!whole_number(count, 1, kMaxShards, shard.replicas)) {
      throw InvalidArgument(fmt::format("--shard statefulset: REDWOOD_REPLICAS='{}' is not a count from 1 to {}", count,
                                        kMaxShards));
    }
    if (shard.index >= shard.replicas) {
      throw InvalidArgument(fmt::format("--shard statefulset: {}='{}' has ordinal {}, not below REDWOOD_REPLICAS={} "
                                        "(the ordinal must be below the count)",
                                        variable, name, shard.index, shard.replicas));
    }
    return shard;
  }
  if (!set(env.peers)) {
    throw InvalidArgument("--shard statefulset: neither REDWOOD_REPLICAS (a fixed worker count) nor REDWOOD_PEERS (the "
                          "StatefulSet's headless Service, whose addresses count the workers) is set");
  }
  shard.peers = env.peers;
  return shard;
}

ShardSpec shard_from_statefulset(const char* pod_name, const char* hostname, const char* replicas) {
  StatefulSetEnv env;
  env.pod_name = pod_name;
  env.hostname = hostname;
  env.replicas = replicas;
  const StatefulSetShard s = read_statefulset(env);
  return {s.index, s.replicas};
}

}  // namespace redwood
