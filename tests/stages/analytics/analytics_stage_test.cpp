// The analytics stage built from YAML: its keys and their mistakes (each at its file:line:col),
// events and overlays on hand-made frames (relative units on a 640x480 picture), per-class
// filtering, counters with their labels, and two interleaved streams counted apart.

#include "pipelines/pipeline.hpp"
#include "pipelines/pipeline_text.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

namespace redwood {
namespace {

using testing::load_error;
using testing::pipeline_text;
using testing::where;

// The stage's keys start on line 8, indented by 4.
const std::string kHead =
    "version: 1\n"
    "name: t\n"
    "sources:\n"
    "  - {name: cam0, type: synthetic, width: 640, height: 480, frames: 1}\n"
    "stages:\n"
    "  - name: count\n"
    "    type: analytics\n";

const std::string kDoorAndLobby =
    "    lines:\n"
    "      - name: door\n"
    "        points: [[0.1, 0.6], [0.9, 0.6]]\n"
    "    zones:\n"
    "      - name: lobby\n"
    "        points: [[0.2, 0.2], [0.8, 0.2], [0.8, 0.9], [0.2, 0.9]]\n";

struct Built {
  std::unique_ptr<Pipeline> pipeline;
  Stage& stage;
};

Built build(const std::string& keys) {
  auto p = std::make_unique<Pipeline>(pipeline_text(kHead + keys));
  Stage& s = *p->stages().at(0);
  return {std::move(p), s};
}

Detection tracked(std::int64_t id, PointF feet, std::string label = "person") {
  Detection d;
  d.kind = "object";
  d.label = std::move(label);
  d.track_id = id;
  d.box = {feet.x - 20, feet.y - 80, 40, 80};  // bottom centre at `feet`
  return d;
}

Frame frame(int stream, double pts_ms, std::vector<Detection> detections, const Picture& picture) {
  Frame f;
  f.stream = stream;
  f.stream_name = stream == 0 ? "cam0" : "cam1";
  f.pts_ms = pts_ms;
  f.seq = static_cast<std::int64_t>(pts_ms / 100);
  f.image = picture;
  f.detections = std::move(detections);
  return f;
}

void run(Stage& stage, Frame& f) {
  Frame* one[] = {&f};
  stage.process(one);
}

const StageCounter* find(const std::vector<StageCounter>& counters, const std::string& name,
                         const std::vector<std::pair<std::string, std::string>>& labels) {
  for (const StageCounter& c : counters) {
    if (c.name == name && c.labels == labels) return &c;
  }
  return nullptr;
}

TEST(AnalyticsStage, RelativeUnitsOnA640x480Picture) {
  auto [pipeline, stage] = build(kDoorAndLobby);
  EXPECT_TRUE(stage.ordered());
  const Picture picture = Picture::allocate(640, 480, 1);
  // The door is at y = 0.6 * 480 = 288, x 64 .. 576; the lobby x 128 .. 512, y 96 .. 432.
  Frame f0 = frame(0, 0, {tracked(1, {320, 280}), tracked(-1, {200, 280})}, picture);
  run(stage, f0);
  ASSERT_EQ(f0.events.size(), 1u);
  EXPECT_EQ(f0.events[0].type, "zone_entered");
  EXPECT_EQ(f0.events[0].where, "lobby");

  Frame f1 = frame(0, 100, {tracked(1, {320, 300}), tracked(-1, {200, 300})}, picture);  // the untracked one crosses too
  run(stage, f1);
  ASSERT_EQ(f1.events.size(), 1u);
  EXPECT_EQ(f1.events[0].type, "line_crossed");
  EXPECT_EQ(f1.events[0].direction, "in");  // downwards across a left-to-right line
  EXPECT_EQ(f1.events[0].track_id, 1);
  EXPECT_EQ(f1.events[0].label, "person");

  ASSERT_EQ(f1.overlays.size(), 2u);
  EXPECT_FALSE(f1.overlays[0].closed);
  EXPECT_EQ(f1.overlays[0].points, (std::vector<PointF>{{64, 288}, {576, 288}}));
  EXPECT_EQ(f1.overlays[0].text, "door in 1 out 0");
  EXPECT_TRUE(f1.overlays[1].closed);
  EXPECT_EQ(f1.overlays[1].points, (std::vector<PointF>{{128, 96}, {512, 96}, {512, 432}, {128, 432}}));
  EXPECT_EQ(f1.overlays[1].text, "lobby 1 now, 1 in");

  Frame f2 = frame(0, 200, {tracked(1, {320, 450})}, picture);  // out of the lobby's bottom
  run(stage, f2);
  ASSERT_EQ(f2.events.size(), 1u);
  EXPECT_EQ(f2.events[0].type, "zone_left");
  EXPECT_DOUBLE_EQ(f2.events[0].dwell_ms, 200);
  EXPECT_EQ(f2.overlays[1].text, "lobby 0 now, 1 in");
}

TEST(AnalyticsStage, CountersPerStreamAndClassWithInterleavedStreams) {
  auto [pipeline, stage] = build("    units: pixels\n"
                                 "    anchor: bottom_center\n"
                                 "    classes: [person, car]\n"
                                 "    lines:\n"
                                 "      - {name: door, points: [[100, 300], [500, 300]]}\n"
                                 "    zones:\n"
                                 "      - {name: lobby, points: [[100, 400], [500, 400], [500, 600], [100, 600]]}\n");
  const Picture picture = Picture::allocate(640, 480, 1);
  // Both streams have a track 1: cam0's walks down through the door into the lobby, cam1's stays
  // above the door; a car crosses on cam1 and a bicycle (not listed) on cam0.
  const float cam0_y[] = {250, 350, 500}, cam1_y[] = {250, 260, 270}, car_y[] = {250, 350, 350};
  std::vector<std::string> cam1_events;
  for (int i = 0; i < 3; ++i) {
    Frame a = frame(0, 100.0 * i, {tracked(1, {300, cam0_y[i]}), tracked(2, {200, cam0_y[i]}, "bicycle")}, picture);
    Frame b = frame(1, 100.0 * i, {tracked(1, {300, cam1_y[i]}), tracked(5, {400, car_y[i]}, "car")}, picture);
    run(stage, a);
    run(stage, b);
    for (const Event& e : b.events) cam1_events.push_back(e.type + " " + e.label);
  }
  EXPECT_EQ(cam1_events, std::vector<std::string>{"line_crossed car"});

  const auto counters = stage.counters();
  const auto in = find(counters, "line_crossings", {{"stream", "cam0"}, {"line", "door"}, {"direction", "in"}, {"class", "person"}});
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(in->value, 1);
  EXPECT_FALSE(in->gauge);
  EXPECT_FALSE(in->help.empty());
  const auto out = find(counters, "line_crossings", {{"stream", "cam0"}, {"line", "door"}, {"direction", "out"}, {"class", "person"}});
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->value, 0);
  const auto car = find(counters, "line_crossings", {{"stream", "cam1"}, {"line", "door"}, {"direction", "in"}, {"class", "car"}});
  ASSERT_NE(car, nullptr);
  EXPECT_EQ(car->value, 1);
  EXPECT_EQ(find(counters, "line_crossings", {{"stream", "cam1"}, {"line", "door"}, {"direction", "in"}, {"class", "person"}}), nullptr);
  for (const StageCounter& c : counters) {
    for (const auto& [key, value] : c.labels) EXPECT_NE(value, "bicycle") << c.name;
  }
  const auto occupancy = find(counters, "zone_occupancy", {{"stream", "cam0"}, {"zone", "lobby"}, {"class", "person"}});
  ASSERT_NE(occupancy, nullptr);
  EXPECT_EQ(occupancy->value, 1);
  EXPECT_TRUE(occupancy->gauge);
  EXPECT_FALSE(occupancy->help.empty());
  const auto entries = find(counters, "zone_entries", {{"stream", "cam0"}, {"zone", "lobby"}, {"class", "person"}});
  ASSERT_NE(entries, nullptr);
  EXPECT_EQ(entries->value, 1);
  const auto exits = find(counters, "zone_exits", {{"stream", "cam0"}, {"zone", "lobby"}, {"class", "person"}});
  ASSERT_NE(exits, nullptr);
  EXPECT_EQ(exits->value, 0);
  EXPECT_EQ(find(counters, "zone_entries", {{"stream", "cam1"}, {"zone", "lobby"}, {"class", "person"}}), nullptr);
}

TEST(AnalyticsStage, CenterAnchorAndForgetting) {
  auto [pipeline, stage] = build("    units: pixels\n"
                                 "    anchor: center\n"
                                 "    forget_after_ms: 500\n"
                                 "    zones:\n"
                                 "      - {name: lobby, points: [[0, 0], [100, 0], [100, 100], [0, 100]]}\n");
  const Picture picture = Picture::allocate(640, 480, 1);
  Frame f0 = frame(0, 0, {tracked(1, {50, 120})}, picture);  // feet outside, centre (50, 80) inside
  run(stage, f0);
  ASSERT_EQ(f0.events.size(), 1u);
  Frame f1 = frame(0, 400, {}, picture);
  run(stage, f1);
  EXPECT_TRUE(f1.events.empty());
  Frame f2 = frame(0, 500, {}, picture);
  run(stage, f2);
  ASSERT_EQ(f2.events.size(), 1u);
  EXPECT_EQ(f2.events[0].type, "zone_left");
  EXPECT_DOUBLE_EQ(f2.events[0].dwell_ms, 0);
}

TEST(AnalyticsStage, RelativeUnitsNeedAPicture) {
  auto [pipeline, stage] = build(kDoorAndLobby);
  Frame f = frame(0, 0, {tracked(1, {320, 280})}, Picture{});
  try {
    run(stage, f);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("units: relative needs the picture's size"), std::string::npos) << e.what();
  }
}

struct BadKeys {
  std::string keys;
  int line, column;
  std::string message;
};

TEST(AnalyticsStage, MistakesFailAtTheirPlace) {
  const std::vector<BadKeys> cases{
      {"    lines:\n      - name: door\n        points: [[0.1, 0.6], [0.5, 0.6], [0.9, 0.6]]\n", 10, 17, "a line needs exactly 2 points, got 3"},
      {"    lines:\n      - name: door\n        points: [[0.1, 0.6], [0.1, 0.6]]\n", 10, 17, "a line needs 2 distinct points"},
      {"    lines:\n      - name: door\n        points: [[0.1, 0.6], [1.5, 0.6]]\n", 10, 31, "1.5 is outside [0, 1]"},
      {"    lines:\n      - name: door\n        points: [[0.1, 0.6], [-0.5, 0.6]]\n", 10, 31, "-0.5 is outside [0, 1]"},
      {"    lines:\n      - name: door\n        points: [[0.1], [0.9, 0.6]]\n", 10, 18, "points[0]: expected a point [x, y]"},
      {"    lines:\n      - name: door\n        points: [[a, 0.6], [0.9, 0.6]]\n", 10, 19, "points[0]: expected a number, got 'a'"},
      {"    lines:\n      - name: door\n", 9, 9, "lines[0]: missing required key 'points'"},
      {"    lines:\n      - points: [[0.1, 0.6], [0.9, 0.6]]\n", 9, 9, "lines[0]: missing required key 'name'"},
      {"    lines:\n      - name: door\n        points: [[0.1, 0.6], [0.9, 0.6]]\n        colour: red\n", 11, 9, "unknown key 'colour'"},
      {"    lines: door\n", 8, 12, "lines: expected a list"},
      {"    zones:\n      - name: lobby\n        points: [[0.2, 0.2], [0.8, 0.2]]\n", 10, 17, "a zone needs 3 or more points, got 2"},
      {"    zones:\n      - name: lobby\n        points: [[0.1, 0.1], [0.5, 0.5], [0.9, 0.9]]\n", 10, 17, "has no area"},
      {"    lines:\n      - {name: door, points: [[0.1, 0.6], [0.9, 0.6]]}\n    zones:\n"
       "      - {name: door, points: [[0.2, 0.2], [0.8, 0.2], [0.8, 0.9]]}\n", 11, 16, "'door' names another line or zone already"},
      {"    units: percent\n" + kDoorAndLobby, 8, 12, "'percent' is not one of relative, pixels"},
      {"    anchor: head\n" + kDoorAndLobby, 8, 13, "'head' is not one of bottom_center, center"},
      {"    forget_after_ms: 0\n" + kDoorAndLobby, 8, 22, "forget_after_ms: must be more than 0"},
      {"    classes: []\n" + kDoorAndLobby, 8, 14, "classes: names no class"},
      {"    classes: person\n" + kDoorAndLobby, 8, 14, "classes: expected a list of strings"},
      {"    units: pixels\n", 6, 5, "needs at least one line or zone"},
      {"    line: []\n" + kDoorAndLobby, 8, 5, "unknown key 'line'"},
  };
  for (const BadKeys& c : cases) {
    const std::string e = load_error(kHead + c.keys);
    EXPECT_NE(e.find(where(c.line, c.column)), std::string::npos) << c.keys << "\n" << e;
    EXPECT_NE(e.find(c.message), std::string::npos) << c.keys << "\n" << e;
    EXPECT_NE(e.find("stage 'count'"), std::string::npos) << e;
  }
  EXPECT_EQ(load_error(kHead + kDoorAndLobby), "");
}

}  // namespace
}  // namespace redwood
