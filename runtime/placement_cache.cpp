#include "runtime/placement_cache.hpp"

#include "core/cache_dir.hpp"
#include "core/error.hpp"
#include "core/graph/graph_hash.hpp"
#include "core/log.hpp"
#include "runtime/device_profile.hpp"
#include "runtime/plan_cache.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <fstream>
#include <sstream>

namespace redwood::runtime {
namespace {

std::filesystem::path entry_file(const std::filesystem::path& dir, const std::string& key) {
  return dir / fmt::format("{}.json", hash_hex(xxh64(key.data(), key.size())));
}

}  // namespace

std::filesystem::path placement_cache_dir() { return cache_dir() / "placements"; }

std::string placement_key(const Graph& graph, const std::vector<Shape>& input_shapes, const PartitionOptions& options) {
  // Measured costs change what a placement comes out as; a caller that passes them places anew.
  if (options.history != nullptr || !options.supports.empty()) return "";
  std::vector<std::string> profiles;
  for (std::size_t d = 0; d < options.devices.size(); ++d) {
    const std::string& device = options.devices[d];
    std::string key;
    if (d < options.profiles.size()) {
      const DeviceProfile& p = options.profiles[d];
      key = fmt::format("{} {} {}", p.name, p.key, profile_to_json(p));
    } else {
      key = device_profile_key(device == "cuda" ? "cuda:0" : device);
    }
    if (key.empty()) return "";
    profiles.push_back(fmt::format("{}: {}", device, key));
  }
  std::vector<std::string> shapes;
  for (const Shape& s : input_shapes) shapes.push_back(shape_str(s));
  std::vector<std::string> pinned;
  for (const auto& [node, device] : options.pinned) pinned.push_back(node + "=" + device);
  return fmt::format(
      "model {}; shapes {}; devices {}; precision {}; objective {}; pinned {}; prefer {}; analysis times {}; {}",
      hash_hex(graph_hash(graph)), fmt::join(shapes, " "), fmt::join(profiles, " | "), options.precision,
      options.objective == PartitionOptions::Objective::kLatency ? "latency" : "throughput", fmt::join(pinned, ","),
      options.prefer.empty() ? "-" : options.prefer, options.use_analysis_times ? "on" : "off", build_stamp());
}

std::optional<KeptPlacement> read_placement(const std::filesystem::path& dir, const std::string& key) {
  if (key.empty()) return std::nullopt;
  const std::filesystem::path file = entry_file(dir, key);
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return std::nullopt;
  try {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    const nlohmann::json j = nlohmann::json::parse(text.str());
    RW_EXPECTS(j.at("key").get<std::string>() == key, InvalidArgument, "it is for another key");
    KeptPlacement kept{j.at("device").get<std::string>(), j.at("predicted_ms").get<double>()};
    RW_EXPECTS(!kept.device.empty(), InvalidArgument, "no device");
    return kept;
  } catch (const std::exception& e) {
    log().warn("placement cache: {} not used: {}; placing again", file.string(), e.what());
    return std::nullopt;
  }
}

void write_placement(const std::filesystem::path& dir, const std::string& key, const KeptPlacement& placement) {
  if (key.empty()) return;
  const nlohmann::json j = {{"key", key}, {"device", placement.device}, {"predicted_ms", placement.predicted_ms},
                            {"written", utc_now()}};
  try {
    write_file_atomically(entry_file(dir, key), j.dump(2) + "\n");
  } catch (const Error& e) {
    warn_once("placement cache: not written", fmt::format("placement cache: not written: {}", e.what()));
  }
}

}  // namespace redwood::runtime
