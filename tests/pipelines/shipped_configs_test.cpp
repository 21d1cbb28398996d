// The pipeline files in configs/ as shipped: every one loads (models, stage contracts, keys), and
// configs/detect.yaml — YOLOv5s, ByteTrack and a counting line on vtest.avi — runs its first
// seconds with people found, tracked and counted, every message matching the schema.

#include "pipelines/frame_schema.hpp"
#include "pipelines/pipeline.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <set>

namespace redwood {
namespace {

namespace fs = std::filesystem;

fs::path configs_dir() { return fs::path(REDWOOD_SOURCE_DIR) / "configs"; }

/// Overrides that send every sink of `config` into `dir` (no fixed ports, no /tmp/redwood).
std::vector<std::string> sinks_into(const fs::path& config, const fs::path& dir) {
  std::vector<std::string> out;
  const YAML::Node root = YAML::LoadFile(config.string());
  for (const auto& sink : root["sinks"]) {
    const auto name = sink["name"].as<std::string>();
    const auto type = sink["type"].as<std::string>();
    if (type == "zmq") out.push_back("sinks." + name + ".endpoint=ipc://" + (dir / (name + ".sock")).string());
    if (type == "jsonl") out.push_back("sinks." + name + ".path=" + (dir / (name + ".jsonl")).string());
    if (type == "video") out.push_back("sinks." + name + ".path=" + (dir / (name + "-{stream}.avi")).string());
  }
  if (root["service"] && root["service"]["metrics"]) out.push_back("service.metrics.port=0");
  return out;
}

/// The models and videos a config reads, missing here: the reason to skip it.
std::string missing_assets(const fs::path& config) {
  const YAML::Node root = YAML::LoadFile(config.string());
  std::vector<fs::path> needed;
  for (const auto& m : root["models"]) needed.push_back(config.parent_path() / m.second["path"].as<std::string>());
  for (const auto& s : root["sources"]) {
    if (s["path"]) needed.push_back(config.parent_path() / s["path"].as<std::string>());
  }
  for (const auto& p : needed) {
    if (!fs::exists(p)) return p.string() + " is missing: run scripts/setup.sh";
  }
  return "";
}

TEST(ShippedConfigs, EveryPipelineFileLoads) {
  int loaded = 0;
  for (const auto& entry : fs::directory_iterator(configs_dir())) {
    if (entry.path().extension() != ".yaml") continue;
    SCOPED_TRACE(entry.path().filename().string());
    const std::string missing = missing_assets(entry.path());
    if (!missing.empty()) {
      std::printf("skipped %s: %s\n", entry.path().filename().c_str(), missing.c_str());
      continue;
    }
    const auto dir = testing::temp_dir("configs");
    EXPECT_NO_THROW(Pipeline(load_pipeline_file(entry.path(), sinks_into(entry.path(), dir))));
    ++loaded;
  }
  if (loaded == 0) GTEST_SKIP() << "no config's assets are here: run scripts/setup.sh";
  EXPECT_GE(loaded, 5);  // ocr-video, ocr-streams, faces, face-expressions, detect
}

TEST(ShippedConfigs, DetectFindsTracksAndCountsPeopleOnVtest) {
  const auto config = configs_dir() / "detect.yaml";
  const std::string missing = missing_assets(config);
  if (!missing.empty()) GTEST_SKIP() << missing;
  const auto dir = testing::temp_dir("detect-config");
  Pipeline pipeline(load_pipeline_file(config, sinks_into(config, dir)));
  RunOptions run;
  run.max_frames = 60;  // six seconds of the clip: people walk across the line in it
  const PipelineStats stats = pipeline.run(run);
  ASSERT_EQ(stats.streams.at(0).delivered, 60);

  std::map<std::string, double> counts;  // counter name (+ direction) -> value
  for (const auto& stage : stats.stages) {
    for (const auto& c : stage.counters) {
      std::string key = c.name;
      for (const auto& [k, v] : c.labels) {
        if (k == "direction") key += "/" + v;
      }
      counts[key] += c.value;
    }
  }
  EXPECT_GE(counts["tracks_started"], 4) << "vtest shows several people from the first seconds";
  EXPECT_GE(counts["line_crossings/in"] + counts["line_crossings/out"], 1);
  EXPECT_GE(counts["zone_entries"], 1);

  std::ifstream log(dir / "log.jsonl");
  int messages = 0, people = 0, tracked = 0;
  std::set<std::int64_t> ids;
  for (std::string line; std::getline(log, line); ++messages) {
    const auto m = nlohmann::json::parse(line);
    testing::expect_frame_schema(m, {"det_pre", "det", "objects", "tracker", "count"});
    for (const auto& d : m["detections"]) {
      EXPECT_EQ(d["label"], "person") << "the detect stage keeps only people";
      ++people;
      if (d.contains("track_id")) {
        ++tracked;
        ids.insert(d["track_id"].get<std::int64_t>());
      }
    }
  }
  EXPECT_EQ(messages, 60);
  EXPECT_GE(people, 60 * 3) << "at least three people a frame on average";
  EXPECT_GE(tracked, people * 8 / 10) << "most detections belong to a confirmed track";
  EXPECT_EQ(static_cast<double>(ids.size()), counts["tracks_started"]);
  std::printf("detect.yaml, 60 frames: %d people, %d tracked, %zu ids, line in %.0f out %.0f, zone entries %.0f\n",
              people, tracked, ids.size(), counts["line_crossings/in"], counts["line_crossings/out"], counts["zone_entries"]);
}

}  // namespace
}  // namespace redwood
