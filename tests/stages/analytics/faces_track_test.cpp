// configs/faces.yaml as shipped (BlazeFace on Megamind.avi, then its track stage): the face
// keeps one id while it stays on screen, and a new id comes only where it jumps (the clip's
// cuts). Printed: faces, distinct ids, and between consecutive frames the overlapping detections
// (IoU >= 0.3) that kept their id or changed it. Then two copies of the clip as two streams whose
// frames interleave in the pipeline: each stream numbers its own tracks.

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
  std::string stream;
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
      Seen s{f->stream_name, f->seq, {}};
      for (const auto& d : f->detections) s.faces.emplace_back(d.track_id, d.box);
      std::lock_guard lock(g_seen_mutex);
      g_seen.push_back(std::move(s));
    }
  }
};
RW_REGISTER_STAGE("test_track_capture", TrackCapture);

/// configs/faces.yaml from frame 0 (its `tracker` follows the faces), sinks in `dir`, then the capture.
PipelineFile faces_with_tracker(const std::filesystem::path& dir) {
  PipelineFile file = load_pipeline_file(std::filesystem::path(REDWOOD_SOURCE_DIR) / "configs" / "faces.yaml",
                                         {"sinks.pub.endpoint=ipc://" + (dir / "pub.sock").string(),
                                          "sinks.log.path=" + (dir / "faces.jsonl").string(),
                                          "sinks.annotated.path=" + (dir / "{stream}.avi").string(),
                                          "sources.megamind.start_frame=0"});
  YAML::Node capture;
  capture["name"] = "capture";
  capture["type"] = "test_track_capture";
  file.root["stages"].push_back(capture);
  g_seen.clear();
  return file;
}

struct Summary {
  int faces = 0, with_id = 0, kept = 0, changed = 0, new_ids_where_a_face_was = 0;
  std::set<std::int64_t> ids;
  std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> span;  // id -> first, last frame
};

/// The pipeline's stage named `name`.
const Stage& stage_named(const Pipeline& pipeline, const std::string& name) {
  for (const auto& stage : pipeline.stages()) {
    if (stage->name() == name) return *stage;
  }
  throw std::runtime_error("no stage named " + name);
}

/// One stream's frames (in any order) -> what its ids did.
Summary summarize(std::vector<Seen> frames) {
  std::sort(frames.begin(), frames.end(), [](const Seen& a, const Seen& b) { return a.seq < b.seq; });
  Summary s;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    for (const auto& [id, box] : frames[i].faces) {
      ++s.faces;
      if (id < 0) continue;
      ++s.with_id;
      const bool is_new = s.ids.insert(id).second;
      s.span.try_emplace(id, frames[i].seq, frames[i].seq).first->second.second = frames[i].seq;
      if (i == 0 || frames[i - 1].seq != frames[i].seq - 1) continue;
      for (const auto& [before, box_before] : frames[i - 1].faces) {
        if (before < 0 || intersection_over_union(box, box_before) < 0.3f) continue;
        (before == id ? s.kept : s.changed) += 1;
        s.new_ids_where_a_face_was += is_new;
      }
    }
  }
  std::printf("%s frames %lld-%lld: %d faces, %d with an id, %zu distinct id(s); consecutive overlapping faces: %d kept their id, %d changed\n",
              frames.front().stream.c_str(), static_cast<long long>(frames.front().seq), static_cast<long long>(frames.back().seq),
              s.faces, s.with_id, s.ids.size(), s.kept, s.changed);
  for (const auto& [id, range] : s.span) {
    std::printf("  id %lld: frames %lld-%lld\n", static_cast<long long>(id), static_cast<long long>(range.first),
                static_cast<long long>(range.second));
  }
  return s;
}

TEST(TrackFacesMegamind, TheFaceKeepsItsId) {
  if (!std::filesystem::exists(testing::assets_dir() / "video" / "Megamind.avi")) GTEST_SKIP() << "assets missing";
  const auto dir = testing::temp_dir("faces-track");
  Pipeline pipeline(faces_with_tracker(dir));
  RunOptions run;
  run.max_frames = 270;  // the whole clip (about 1 s on one core)
  const auto stats = pipeline.run(run);
  ASSERT_EQ(stats.streams.at(0).delivered, 270);
  ASSERT_EQ(g_seen.size(), 270u);
  const Summary s = summarize(g_seen);

  // The clip: no face in frame 0, then one face all along, with two cuts (frames 98 and 154)
  // where it jumps across the picture. A face is unconfirmed on its first frame after each, and
  // a new id there is right (nothing overlaps); anywhere else its id must hold.
  EXPECT_GE(s.faces, 260);
  EXPECT_GE(s.with_id, s.faces - 3);
  EXPECT_EQ(s.changed, 0);
  EXPECT_EQ(s.new_ids_where_a_face_was, 0);
  EXPECT_EQ(s.kept, s.with_id - static_cast<int>(s.ids.size()));  // every face with an id but each track's first
  EXPECT_LE(s.ids.size(), 3u);
  // The stage's counters agree: as many tracks started as distinct ids.
  const auto& tracker = stage_named(pipeline, "tracker");
  const auto counters = tracker.counters();
  ASSERT_EQ(counters.size(), 2u);
  EXPECT_EQ(counters[0].name, "tracks_started");
  EXPECT_EQ(counters[0].labels, (std::vector<std::pair<std::string, std::string>>{{"stream", "megamind"}}));
  EXPECT_EQ(counters[0].value, static_cast<double>(s.ids.size()));
  // The messages carry the ids (the jsonl sink of the shipped file).
  std::ifstream log(dir / "faces.jsonl");
  int logged = 0;
  for (std::string line; std::getline(log, line);) {
    const auto message = nlohmann::json::parse(line);
    for (const auto& d : message.at("detections")) logged += d.contains("track_id");
  }
  EXPECT_EQ(logged, s.with_id);
}

TEST(TrackFacesMegamind, TwoStreamsNumberTheirOwnTracks) {
  if (!std::filesystem::exists(testing::assets_dir() / "video" / "Megamind.avi")) GTEST_SKIP() << "assets missing";
  const auto dir = testing::temp_dir("faces-track-2");
  PipelineOptions options;
  options.streams = 2;  // the second copy starts half-way through the clip
  Pipeline pipeline(faces_with_tracker(dir), options);
  RunOptions run;
  run.max_frames = 100;
  const auto stats = pipeline.run(run);
  ASSERT_EQ(stats.streams.size(), 2u);
  ASSERT_EQ(g_seen.size(), 200u);
  const auto counters = stage_named(pipeline, "tracker").counters();
  ASSERT_EQ(counters.size(), 4u);
  for (const char* stream : {"megamind-1", "megamind-2"}) {
    std::vector<Seen> frames;
    std::copy_if(g_seen.begin(), g_seen.end(), std::back_inserter(frames), [&](const Seen& f) { return f.stream == stream; });
    ASSERT_EQ(frames.size(), 100u) << stream;
    const Summary s = summarize(frames);
    EXPECT_GE(s.faces, 95) << stream;
    ASSERT_FALSE(s.ids.empty()) << stream;
    EXPECT_EQ(*s.ids.begin(), 1) << stream;  // each stream counts from 1
    EXPECT_EQ(*s.ids.rbegin(), static_cast<std::int64_t>(s.ids.size())) << stream;
    EXPECT_EQ(s.changed, 0) << stream;
    EXPECT_EQ(s.new_ids_where_a_face_was, 0) << stream;
    const auto started = std::find_if(counters.begin(), counters.end(), [&](const StageCounter& c) {
      return c.name == "tracks_started" && c.labels.at(0).second == stream;
    });
    ASSERT_NE(started, counters.end()) << stream;
    EXPECT_EQ(started->value, static_cast<double>(s.ids.size())) << stream;
  }
}

}  // namespace
}  // namespace redwood
