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

#include <algorithm>
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
  std::vector<std::string> device_options;
  for (const auto& [name, value] : options.device_options) device_options.push_back(name + "=" + value);
  return fmt::format(
      "model {}; shapes {}; devices {}; precision {}; device options {}; objective {}; pinned {}; prefer {}; analysis "
      "times {}; {}",
      hash_hex(graph_hash(graph)), fmt::join(shapes, " "), fmt::join(profiles, " | "), options.precision,
      fmt::join(device_options, ","),
      options.objective == PartitionOptions::Objective::kLatency ? "latency" : "throughput", fmt::join(pinned, ","),
      options.prefer.empty() ? "-" : options.prefer, options.use_analysis_times ? "on" : "off", build_stamp());
}

namespace {

// One entry file, as both kinds keep them: read when it exists, parsed, checked to be for `key`,
// then handed to `parse`; anything wrong is logged (naming the file, then `again`) and the entry
// is not used.
template <typename Parse>
auto read_entry(const std::filesystem::path& file, const std::string& key, std::string_view again, Parse&& parse)
    -> std::optional<decltype(parse(nlohmann::json{}))> {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return std::nullopt;
  try {
    std::ifstream in(file);
    const nlohmann::json j = nlohmann::json::parse(in);
    return parse(j);
  } catch (const std::exception& e) {
    log().warn("placement cache: {} not used: {}; {}", file.string(), e.what(), again);
    return std::nullopt;
  }
}

// A curve as [[rows, ms], ...], and back (points in any order; one at the same rows replaces).
nlohmann::json curve_json(const RowsCurve& curve) {
  nlohmann::json points = nlohmann::json::array();
  for (const auto& [rows, ms] : curve.points) points.push_back({rows, ms});
  return points;
}
RowsCurve curve_from(const nlohmann::json& points) {
  RowsCurve curve;
  for (const auto& point : points) curve.add(point.at(0).get<double>(), point.at(1).get<double>());
  return curve;
}

// A split's segment predictions against rows (`segment_at`), where the entry has them.
std::vector<RowsCurve> segment_curves_from(const nlohmann::json& j) {
  std::vector<RowsCurve> out;
  if (j.contains("segment_at")) {
    for (const auto& c : j.at("segment_at")) out.push_back(curve_from(c));
  }
  return out;
}
nlohmann::json segment_curves_json(const std::vector<RowsCurve>& curves) {
  nlohmann::json out = nlohmann::json::array();
  for (const RowsCurve& c : curves) out.push_back(curve_json(c));
  return out;
}

// A split keeps a prediction, and a curve of them, for each segment; `whose` starts the message.
void check_split_predictions(const std::string& whose, const std::vector<double>& segment_ms,
                             const std::vector<RowsCurve>& segment_at) {
  RW_EXPECTS(!segment_ms.empty(), InvalidArgument, "{}a split without its segments' predictions", whose);
  RW_EXPECTS(segment_at.size() == segment_ms.size() &&
                 std::none_of(segment_at.begin(), segment_at.end(), [](const RowsCurve& c) { return c.empty(); }),
             InvalidArgument, "{}a split of {} segment prediction(s) without a curve against rows for each", whose,
             segment_ms.size());
}

void check_key(const nlohmann::json& j, const std::string& key) {
  RW_EXPECTS(j.at("key").get<std::string>() == key, InvalidArgument, "it is for another key");
}

// Written whole or not at all; a folder that cannot take it is a warning, once: the run goes on.
void write_entry(const std::filesystem::path& file, const nlohmann::json& j) {
  try {
    write_file_atomically(file, j.dump(2) + "\n");
  } catch (const std::exception& e) {
    warn_once("placement cache: not written", fmt::format("placement cache: not written: {}", e.what()));
  }
}

}  // namespace

std::optional<KeptPlacement> read_placement(const std::filesystem::path& dir, const std::string& key) {
  if (key.empty()) return std::nullopt;
  return read_entry(entry_file(dir, key), key, "placing again", [&](const nlohmann::json& j) {
    check_key(j, key);
    KeptPlacement kept{j.at("device").get<std::string>(), j.at("predicted_ms").get<double>(), {}, {}, {}, {}};
    if (j.contains("nodes")) kept.nodes = j.at("nodes").get<std::vector<std::string>>();
    if (j.contains("threads")) kept.threads = j.at("threads").get<std::vector<int>>();
    if (j.contains("segment_ms")) kept.segment_ms = j.at("segment_ms").get<std::vector<double>>();
    kept.segment_at = segment_curves_from(j);
    RW_EXPECTS(kept.device.empty() != kept.nodes.empty(), InvalidArgument,
               "neither a device nor a device per node, or both");
    if (!kept.nodes.empty()) check_split_predictions("", kept.segment_ms, kept.segment_at);
    return kept;
  });
}

void check_kept_predictions(const Partition& cut, const std::vector<double>& segment_ms,
                            const std::vector<RowsCurve>& segment_at) {
  RW_EXPECTS(segment_ms.size() == cut.segments.size() && segment_at.size() == cut.segments.size(), InvalidArgument,
             "{} segment prediction(s) and {} curve(s) kept for {} segment(s)", segment_ms.size(), segment_at.size(),
             cut.segments.size());
}

void write_placement(const std::filesystem::path& dir, const std::string& key, const KeptPlacement& placement) {
  if (key.empty()) return;
  nlohmann::json j{{"key", key}, {"device", placement.device}, {"predicted_ms", placement.predicted_ms},
                   {"written", utc_now()}};
  if (!placement.nodes.empty()) j["nodes"] = placement.nodes;
  if (!placement.threads.empty()) j["threads"] = placement.threads;
  if (!placement.segment_ms.empty()) j["segment_ms"] = placement.segment_ms;
  if (!placement.segment_at.empty()) j["segment_at"] = segment_curves_json(placement.segment_at);
  write_entry(entry_file(dir, key), j);
}

namespace {

constexpr const char* kPipelineFormat = "redwood pipeline placement";
constexpr int kPipelineFormatVersion = 3;  // 2: a split's segment_ms; 3: and segment_at

}  // namespace

std::filesystem::path pipeline_placement_file(const std::filesystem::path& dir, const std::string& key) {
  return dir / fmt::format("pipeline-{}.json", hash_hex(xxh64(key.data(), key.size())));
}

std::optional<KeptPipelinePlacement> read_pipeline_placement(const std::filesystem::path& dir, const std::string& key) {
  return read_entry(pipeline_placement_file(dir, key), key, "placing the pipeline again", [&](const nlohmann::json& j) {
    RW_EXPECTS(j.at("format").get<std::string>() == kPipelineFormat && j.at("format_version").get<int>() == kPipelineFormatVersion,
               InvalidArgument, "format '{}' version {} (this Redwood reads '{}' version {})", j.at("format").dump(),
               j.at("format_version").dump(), kPipelineFormat, kPipelineFormatVersion);
    check_key(j, key);
    KeptPipelinePlacement kept;
    for (const nlohmann::json& m : j.at("models")) {
      KeptPipelineModel k;
      PlacementDecision& d = k.decision;
      k.name = m.at("name").get<std::string>();
      d.device = m.at("device").get<std::string>();
      d.batch_frames = m.at("batch_frames").get<int>();
      d.batch_rows = m.at("batch_rows").get<double>();
      d.predicted_batch_ms = m.at("predicted_batch_ms").get<double>();
      d.predicted_at = curve_from(m.at("predicted_at"));
      d.measured = m.at("measured").get<bool>();
      d.note = m.at("note").get<std::string>();
      k.measured_ms = m.at("measured_ms").get<std::map<std::string, std::vector<std::pair<double, double>>>>();
      if (m.contains("nodes")) k.nodes = m.at("nodes").get<std::vector<std::string>>();
      if (m.contains("threads")) k.threads = m.at("threads").get<std::vector<int>>();
      if (m.contains("segment_ms")) d.segment_ms = m.at("segment_ms").get<std::vector<double>>();
      d.segment_at = segment_curves_from(m);
      RW_EXPECTS(!k.name.empty(), InvalidArgument, "a model without a name");
      RW_EXPECTS(d.device.empty() != k.nodes.empty(), InvalidArgument,
                 "model '{}': neither a device nor a device per node, or both", k.name);
      if (!k.nodes.empty()) check_split_predictions(fmt::format("model '{}': ", k.name), d.segment_ms, d.segment_at);
      RW_EXPECTS(d.batch_frames >= 1 && d.batch_rows >= 1 && d.predicted_batch_ms >= 0 && !d.predicted_at.empty(),
                 InvalidArgument, "model '{}': batch of {} frames, {} rows, {} ms, {} points", k.name, d.batch_frames,
                 d.batch_rows, d.predicted_batch_ms, d.predicted_at.points.size());
      kept.models.push_back(std::move(k));
    }
    RW_EXPECTS(!kept.models.empty(), InvalidArgument, "no model");
    kept.lines = j.at("lines").get<std::vector<std::string>>();
    return kept;
  });
}

void write_pipeline_placement(const std::filesystem::path& dir, const std::string& key, const KeptPipelinePlacement& placement) {
  nlohmann::json models = nlohmann::json::array();
  for (const KeptPipelineModel& m : placement.models) {
    const PlacementDecision& d = m.decision;
    models.push_back({{"name", m.name}, {"device", d.device}, {"batch_frames", d.batch_frames}, {"batch_rows", d.batch_rows},
                      {"predicted_batch_ms", d.predicted_batch_ms}, {"predicted_at", curve_json(d.predicted_at)}, {"measured", d.measured},
                      {"note", d.note}, {"measured_ms", m.measured_ms}});
    if (!m.nodes.empty()) models.back()["nodes"] = m.nodes;
    if (!m.threads.empty()) models.back()["threads"] = m.threads;
    if (!d.segment_ms.empty()) models.back()["segment_ms"] = d.segment_ms;
    if (!d.segment_at.empty()) models.back()["segment_at"] = segment_curves_json(d.segment_at);
  }
  const nlohmann::json j = {{"format", kPipelineFormat}, {"format_version", kPipelineFormatVersion}, {"key", key},
                            {"models", models}, {"lines", placement.lines}, {"written", utc_now()}};
  write_entry(pipeline_placement_file(dir, key), j);
}

}  // namespace redwood::runtime
