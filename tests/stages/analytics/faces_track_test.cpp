// configs/faces.yaml (BlazeFace on Megamind.avi) with a track stage after the decoder: the face
// keeps one id while it stays on screen, and a new id comes only where it jumps (the clip's cuts). Printed: frames, faces, distinct ids, and between
// consecutive frames the overlapping detections (IoU >= 0.3) that kept their id or changed it.

#include "pipelines/pipeline.hpp"
#include "stages/stage.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <set>

namespace redwood {
namespace {

struct Seen {
  std::int64_t seq = 0;
  std::vector<std::pair<std::int64_t, RectF>> faces;  // track id, box
};
std::mutex g_seen_mutex;
std::vector<Seen> g_seen;

/// Keeps each frame's face ids and boxes.
class TrackCapture final : public Stage {
 public:
  explicit TrackCapture(StageArgs& a) : Stage(a.name) {}

 private:
  void do_process(std::span<Frame* const> frames) override {
    for (Frame* f : frames) {
      Seen s{f->seq, {}};
      for (const auto& d : f->detections) s.faces.emplace_back(d.track_id, d.box);
      std::lock_guard lock(g_seen_mutex);
      g_seen.push_back(std::move(s));
    }
  }
};
RW_REGISTER_STAGE("test_track_capture", TrackCapture);

float overlap(const RectF& a, const RectF& b) {
  const float inter = intersection(a, b).area();
  return inter / (a.area() + b.area() - inter);
}

TEST(TrackFacesMegamind, TheFaceKeepsItsId) {
  const auto config = std::filesystem::path(REDWOOD_SOURCE_DIR) / "configs" / "faces.yaml";
  if (!std::filesystem::exists(testing::assets_dir() / "video" / "Megamind.avi")) GTEST_SKIP() << "assets missing";
  const auto dir = testing::temp_dir("faces-track");
  PipelineFile file = load_pipeline_file(config, {"sinks.pub.endpoint=ipc://" + (dir / "pub.sock").string(),
                                                  "sinks.log.path=" + (dir / "faces.jsonl").string(),
                                                  "sinks.annotated.path=" + (dir / "{stream}.avi").string(),
                                                  "sources.megamind.start_frame=0"});
  YAML::Node track, capture;
  track["name"] = "tracker";
  track["type"] = "track";
  track["kinds"].push_back("face");
  capture["name"] = "capture";
  capture["type"] = "test_track_capture";
  file.root["stages"].push_back(track);
  file.root["stages"].push_back(capture);
  g_seen.clear();
  Pipeline pipeline(file);
  RunOptions run;
  run.max_frames = 270;  // the whole clip (about 1 s on one core)
  const auto stats = pipeline.run(run);
  ASSERT_EQ(stats.streams.at(0).delivered, 270);
  ASSERT_EQ(g_seen.size(), 270u);
  std::sort(g_seen.begin(), g_seen.end(), [](const Seen& a, const Seen& b) { return a.seq < b.seq; });

  int faces = 0, with_id = 0, kept = 0, changed = 0, new_ids_where_a_face_was = 0;
  std::set<std::int64_t> ids;
  std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> span;  // id -> first, last frame
  for (std::size_t i = 0; i < g_seen.size(); ++i) {
    for (const auto& [id, box] : g_seen[i].faces) {
      ++faces;
      if (id < 0) continue;
      ++with_id;
      const bool is_new = ids.insert(id).second;
      span.try_emplace(id, g_seen[i].seq, g_seen[i].seq).first->second.second = g_seen[i].seq;
      if (i == 0) continue;
      for (const auto& [before, box_before] : g_seen[i - 1].faces) {
        if (before < 0 || overlap(box, box_before) < 0.3f) continue;
        (before == id ? kept : changed) += 1;
        new_ids_where_a_face_was += is_new;
      }
    }
  }
  std::printf("Megamind frames 0-269: %d faces, %d with an id, %zu distinct id(s); consecutive overlapping faces: %d kept their id, %d changed\n",
              faces, with_id, ids.size(), kept, changed);
  for (const auto& [id, s] : span) std::printf("  id %lld: frames %lld-%lld\n", static_cast<long long>(id), static_cast<long long>(s.first), static_cast<long long>(s.second));
  // The stage's counters agree: as many tracks started as distinct ids.
  const auto& tracker = *pipeline.stages().at(pipeline.stages().size() - 2);
  ASSERT_EQ(tracker.name(), "tracker");
  const auto counters = tracker.counters();
  ASSERT_EQ(counters.size(), 2u);
  EXPECT_EQ(counters[0].name, "tracks_started");
  EXPECT_EQ(counters[0].labels, (std::vector<std::pair<std::string, std::string>>{{"stream", "megamind"}}));
  EXPECT_EQ(counters[0].value, static_cast<double>(ids.size()));
  // The clip: no face in frame 0, then one face all along, with two cuts (frames 98 and 154)
  // where it jumps across the picture. A face is unconfirmed on its first frame after each, and
  // a new id there is right (nothing overlaps); anywhere else its id must hold.
  EXPECT_GE(faces, 260);
  EXPECT_GE(with_id, faces - 3);
  EXPECT_EQ(changed, 0);
  EXPECT_EQ(new_ids_where_a_face_was, 0);
  EXPECT_EQ(kept, with_id - static_cast<int>(ids.size()));  // every face with an id but each track's first
  EXPECT_LE(ids.size(), 3u);
  // The messages carry the ids (the jsonl sink of the shipped file).
  std::ifstream log(dir / "faces.jsonl");
  int logged = 0;
  for (std::string line; std::getline(log, line);) {
    const auto message = nlohmann::json::parse(line);
    for (const auto& d : message.at("detections")) logged += d.contains("track_id");
  }
  EXPECT_EQ(logged, with_id);
}

}  // namespace
}  // namespace redwood
