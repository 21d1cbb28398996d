// Rendezvous hashing of stream ids and the --shard option (pipelines/shard.hpp says why).

#include "pipelines/shard.hpp"

#include "core/error.hpp"

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
    return shard_from_statefulset(std::getenv("POD_NAME"), std::getenv("HOSTNAME"), std::getenv("REDWOOD_REPLICAS"));
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

ShardSpec shard_from_statefulset(const char* pod_name, const char* hostname, const char* replicas) {
  const bool from_pod = pod_name != nullptr && *pod_name != '\0';
  const char* variable = from_pod ? "POD_NAME" : "HOSTNAME";
  const std::string name = from_pod ? pod_name : hostname != nullptr ? hostname : "";
  if (name.empty()) {
    throw InvalidArgument("--shard statefulset: neither POD_NAME nor HOSTNAME is set (a StatefulSet's pod is named "
                          "<set>-<ordinal>; give POD_NAME from metadata.name)");
  }
  ShardSpec shard;
  const auto dash = name.rfind('-');
  if (dash == std::string::npos || !whole_number(std::string_view(name).substr(dash + 1), 0, kMaxShards - 1, shard.index)) {
    throw InvalidArgument(fmt::format("--shard statefulset: {}='{}' does not end in -<ordinal> as a StatefulSet's pod "
                                      "name does (e.g. redwood-2)",
                                      variable, name));
  }
  const std::string count = replicas != nullptr ? replicas : "";
  if (count.empty()) {
    throw InvalidArgument("--shard statefulset: REDWOOD_REPLICAS is not set (the StatefulSet's replica count)");
  }
  if (!whole_number(count, 1, kMaxShards, shard.count)) {
    throw InvalidArgument(fmt::format("--shard statefulset: REDWOOD_REPLICAS='{}' is not a count from 1 to {}", count,
                                      kMaxShards));
  }
  if (shard.index >= shard.count) {
    throw InvalidArgument(fmt::format("--shard statefulset: {}='{}' has ordinal {}, not below REDWOOD_REPLICAS={} "
                                      "(the ordinal must be below the count)",
                                      variable, name, shard.index, shard.count));
  }
  return shard;
}

}  // namespace redwood
