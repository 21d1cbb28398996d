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

std::string device_cache_key(const PartitionOptions& options, std::size_t d) {
  if (d < options.profiles.size()) {
    const DeviceProfile& p = options.profiles[d];
    return fmt::format("{} {} {}", p.name, p.key, profile_to_json(p));
  }
  const std::string& device = options.devices.at(d);
  return device_profile_key(device == "cuda" ? "cuda:0" : device);
}

std::string placement_key(const Graph& graph, const std::vector<Shape>& input_shapes, const PartitionOptions& options) {
  // Measured costs change what a placement comes out as; a caller that passes them places anew.
  if (options.history != nullptr || !options.supports.empty()) return "";
  std::vector<std::string> profiles;
  for (std::size_t d = 0; d < options.devices.size(); ++d) {
    const std::string key = device_cache_key(options, d);
    if (key.empty()) return "";
    profiles.push_back(fmt::format("{}: {}", options.devices[d], key));
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

namespace redwood::runtime {
namespace {

constexpr const char* kPipelineFormat = "redwood pipeline placement";
constexpr int kPipelineFormatVersion = 1;

}  // namespace

std::filesystem::path pipeline_placement_file(const std::filesystem::path& dir, const std::string& key) {
  return dir / fmt::format("pipeline-{}.json", hash_hex(xxh64(key.data(), key.size())));
}

std::optional<KeptPipelinePlacement> read_pipeline_placement(const std::filesystem::path& dir, const std::string& key) {
  const std::filesystem::path file = pipeline_placement_file(dir, key);
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return std::nullopt;
  try {
    std::ifstream in(file);
    const nlohmann::json j = nlohmann::json::parse(in);
    RW_EXPECTS(j.at("format").get<std::string>() == kPipelineFormat && j.at("format_version").get<int>() == kPipelineFormatVersion,
               InvalidArgument, "format '{}' version {} (this Redwood reads '{}' version {})", j.at("format").dump(),
               j.at("format_version").dump(), kPipelineFormat, kPipelineFormatVersion);
    RW_EXPECTS(j.at("key").get<std::string>() == key, InvalidArgument, "it is for another key");
    KeptPipelinePlacement kept;
    for (const nlohmann::json& m : j.at("models")) {
      KeptPipelineModel k;
      PlacementDecision& d = k.decision;
      k.name = m.at("name").get<std::string>();
      d.device = m.at("device").get<std::string>();
      d.batch_frames = m.at("batch_frames").get<int>();
      d.batch_rows = m.at("batch_rows").get<double>();
      d.predicted_batch_ms = m.at("predicted_batch_ms").get<double>();
      for (const auto& point : m.at("predicted_at")) d.predicted_at.add(point.at(0).get<double>(), point.at(1).get<double>());
      d.measured = m.at("measured").get<bool>();
      d.note = m.at("note").get<std::string>();
      k.measured_ms = m.at("measured_ms").get<std::map<std::string, std::vector<std::pair<double, double>>>>();
      RW_EXPECTS(!k.name.empty() && !d.device.empty(), InvalidArgument, "a model without a name or device");
      RW_EXPECTS(d.batch_frames >= 1 && d.batch_rows >= 1 && d.predicted_batch_ms >= 0 && !d.predicted_at.empty(),
                 InvalidArgument, "model '{}': batch of {} frames, {} rows, {} ms, {} points", k.name, d.batch_frames,
                 d.batch_rows, d.predicted_batch_ms, d.predicted_at.points.size());
      kept.models.push_back(std::move(k));
    }
    RW_EXPECTS(!kept.models.empty(), InvalidArgument, "no model");
    kept.lines = j.at("lines").get<std::vector<std::string>>();
    return kept;
  } catch (const std::exception& e) {
    log().warn("placement cache: {} not used: {}; placing the pipeline again", file.string(), e.what());
    return std::nullopt;
  }
}

void write_pipeline_placement(const std::filesystem::path& dir, const std::string& key, const KeptPipelinePlacement& placement) {
  nlohmann::json models = nlohmann::json::array();
  for (const KeptPipelineModel& m : placement.models) {
    const PlacementDecision& d = m.decision;
    nlohmann::json points = nlohmann::json::array();
    for (const auto& [rows, ms] : d.predicted_at.points) points.push_back({rows, ms});
    models.push_back({{"name", m.name}, {"device", d.device}, {"batch_frames", d.batch_frames}, {"batch_rows", d.batch_rows},
                      {"predicted_batch_ms", d.predicted_batch_ms}, {"predicted_at", points}, {"measured", d.measured},
                      {"note", d.note}, {"measured_ms", m.measured_ms}});
  }
  const nlohmann::json j = {{"format", kPipelineFormat}, {"format_version", kPipelineFormatVersion}, {"key", key},
                            {"models", models}, {"lines", placement.lines}, {"written", utc_now()}};
  try {
    write_file_atomically(pipeline_placement_file(dir, key), j.dump(2) + "\n");
  } catch (const std::exception& e) {  // the folder, or a name JSON cannot hold: the pipeline goes on
    warn_once("placement cache: not written", fmt::format("placement cache: not written: {}", e.what()));
  }
}

}  // namespace redwood::runtime
