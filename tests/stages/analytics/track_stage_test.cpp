// The track stage: its keys (mistakes fail at load with file:line:col), what it writes on
// detections, per-stream trackers with frames of two streams interleaved, its counters, and bad
// detections at run time.

#include "pipelines/pipeline.hpp"
#include "pipelines/pipeline_text.hpp"
#include "stages/stage.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace redwood {
namespace {

using testing::load_error;
using testing::where;

const std::string kHead = R"(version: 1
name: t
sources:
  - name: a
    type: synthetic
    width: 64
    height: 48
    frames: 3
stages:
  - name: tracker
    type: track
)";

/// The error of a track stage with one more key (line 12), and where its value sits.
std::string key_error(const std::string& key, const std::string& value) { return load_error(kHead + "    " + key + ": " + value + "\n"); }
std::string value_place(const std::string& key) { return where(12, 4 + static_cast<int>(key.size()) + 3); }

TEST(TrackStage, LoadsWithDefaultsAndEveryKey) {
  EXPECT_EQ(load_error(kHead), "");
  EXPECT_EQ(load_error(kHead + R"(    kinds: [face, object]
    classes: [person, "2"]
    high_threshold: 0.6
    low_threshold: 0.2
    new_track_threshold: 0.7
    match_threshold: 0.9
    low_match_threshold: 0.4
    unconfirmed_match_threshold: 0.6
    fuse_score: false
    max_lost_frames: 60
    per_class: true
    trail: 0
)"),
            "");
  EXPECT_EQ(key_error("max_lost_ms", "1500"), "");
}

TEST(TrackStage, BadKeysNameTheirPlace) {
  const struct {
    std::string key, value, message;
  } cases[] = {
      {"high_threshold", "1.5", "high_threshold: must be from 0 to 1"},
      {"high_threshold", "high", "high_threshold: expected"},
      {"low_threshold", "0.7", "low_threshold: must be at most high_threshold (0.5)"},
      {"new_track_threshold", "0.4", "new_track_threshold: must be at least high_threshold"},
      {"match_threshold", "0", "match_threshold: must be above 0 and at most 1"},
      {"low_match_threshold", "1.2", "low_match_threshold: must be above 0"},
      {"unconfirmed_match_threshold", "-1", "unconfirmed_match_threshold: must be above 0"},
      {"max_lost_frames", "-1", "max_lost_frames: must be from 0 to 100000"},
      {"max_lost_ms", "0", "max_lost_ms: must be above 0"},
      {"trail", "20000", "trail: must be from 0 (none) to 10000"},
      {"per_class", "maybe", "per_class: expected"},
      {"kinds", "[]", "kinds: expected a non-empty list"},
      {"classes", "{a: 1}", "classes: expected"},
  };
  for (const auto& c : cases) {
    const std::string e = key_error(c.key, c.value);
    EXPECT_NE(e.find(value_place(c.key)), std::string::npos) << c.key << ": " << e;
    EXPECT_NE(e.find("stage 'tracker'"), std::string::npos) << e;
    EXPECT_NE(e.find(c.message), std::string::npos) << c.key << ": " << e;
  }
  const std::string both = load_error(kHead + "    max_lost_frames: 5\n    max_lost_ms: 200\n");
  EXPECT_NE(both.find(where(13, 18)), std::string::npos) << both;
  EXPECT_NE(both.find("not both"), std::string::npos) << both;
  const std::string unknown = key_error("max_lost", "5");
  EXPECT_NE(unknown.find(where(12, 5)), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("unknown key 'max_lost'"), std::string::npos) << unknown;
}

// The stage made as the pipeline makes it, for feeding frames by hand.
std::unique_ptr<Stage> make_track(const std::string& yaml) {
  auto origin = std::make_shared<ConfigOrigin>();
  origin->file = "track.yaml";
  Params p(YAML::Load(yaml), origin, "stage 'tracker'");
  const ModelTable models;
  StageArgs args{"tracker", p, models};
  auto stage = stage_registry().at("track")(args);
  p.finish();
  return stage;
}

Detection det(std::string kind, float x, float y, float score = 0.9f) {
  Detection d;
  d.kind = std::move(kind);
  d.score = score;
  d.box = {x, y, 40, 40};
  return d;
}

TEST(TrackStage, NumbersEachStreamApartWithFramesInterleaved) {
  auto stage = make_track("{kinds: [face], trail: 3}");
  ASSERT_TRUE(stage->ordered());
  for (int f = 0; f < 6; ++f) {
    for (int s = 0; s < 2; ++s) {
      Frame frame;
      frame.stream = s;
      frame.stream_name = s == 0 ? "cam0" : "cam1";
      frame.seq = f;
      frame.pts_ms = 40.0 * f;
      // Stream 0: two faces from the start; stream 1: one, and a second from frame 2. A text
      // detection is not a kind the stage tracks.
      frame.detections.push_back(det("face", 10.f + 2 * f, 10));
      if (s == 0 || f >= 2) frame.detections.push_back(det("face", 200.f - 2 * f, 100));
      frame.detections.push_back(det("text", 10.f + 2 * f, 10));
      Frame* p = &frame;
      stage->process({&p, 1});
      const auto& d = frame.detections;
      EXPECT_EQ(d[0].track_id, 1) << s << " " << f;
      if (s == 0) { EXPECT_EQ(d[1].track_id, 2); }
      if (s == 1 && f >= 2) { EXPECT_EQ(d[1].track_id, f == 2 ? -1 : 2) << f; }  // confirmed on its second hit
      EXPECT_EQ(d.back().track_id, -1);
      EXPECT_TRUE(d.back().trail.empty());
      ASSERT_EQ(d[0].trail.size(), static_cast<std::size_t>(std::min(f + 1, 3)));
      EXPECT_FLOAT_EQ(d[0].trail.back().x, 30.f + 2 * f);
    }
  }
  const auto counters = stage->counters();
  ASSERT_EQ(counters.size(), 4u);
  for (const StageCounter& c : counters) {
    ASSERT_EQ(c.labels.size(), 1u);
    EXPECT_EQ(c.labels[0].first, "stream");
    EXPECT_FALSE(c.help.empty());
    EXPECT_EQ(c.gauge, c.name == "tracks_active");
    EXPECT_EQ(c.value, 2) << c.name << " " << c.labels[0].second;
  }
  EXPECT_EQ(counters[0].name, "tracks_started");
  EXPECT_EQ(counters[0].labels[0].second, "cam0");
  EXPECT_EQ(counters[3].name, "tracks_active");
  EXPECT_EQ(counters[3].labels[0].second, "cam1");
}

TEST(TrackStage, ClassesSelectByLabelOrIdAndPerClassKeepsThemApart) {
  auto stage = make_track("{classes: [person, \"2\"], per_class: true}");
  const auto run = [&](std::vector<Detection> ds) {
    Frame frame;
    frame.stream_name = "a";
    frame.detections = std::move(ds);
    Frame* p = &frame;
    stage->process({&p, 1});
    std::vector<std::int64_t> ids;
    for (const auto& d : frame.detections) ids.push_back(d.track_id);
    return ids;
  };
  Detection person = det("object", 0, 0), car = det("object", 100, 0), dog = det("object", 300, 0);
  person.label = "person";
  car.class_id = 2, car.label = "car";
  dog.label = "dog";
  EXPECT_EQ(run({person, car, dog}), (std::vector<std::int64_t>{1, 2, -1}));
  // The car's box where the person was: per class, it is not the person's track.
  Detection car_there = car;
  car_there.box = person.box;
  EXPECT_EQ(run({car_there}), (std::vector<std::int64_t>{-1}));
}

TEST(TrackStage, NonFiniteDetectionsFailTheFrame) {
  auto stage = make_track("{}");
  Frame frame;
  frame.stream_name = "cam0";
  frame.seq = 7;
  frame.detections.push_back(det("face", 0, 0, std::nanf("")));
  Frame* p = &frame;
  try {
    stage->process({&p, 1});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stream 'cam0' frame 7: detection 0 (face) has a non-finite score or box"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace redwood
