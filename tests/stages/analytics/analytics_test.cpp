// The analytics' geometry (sides of a line on a y-down picture, steps that cross a segment,
// points in polygons) and its per-stream state machine with known answers: a walk across a line
// both ways, wiggles and touches on it, going round its end, dwell in a zone, occupancy, classes
// kept apart, forgetting, time going back.

#include "stages/analytics/analytics.hpp"
#include "stages/analytics/geometry_2d.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace redwood {
namespace {

TEST(AnalyticsGeometry, SideOfLineOnAPictureWithYDown) {
  // Walking from (0, 0) to (10, 0), i.e. to the right on the picture: the right-hand side is
  // below (larger y), the left-hand side above.
  EXPECT_EQ(side_of_line({0, 0}, {10, 0}, {5, 5}), 1);
  EXPECT_EQ(side_of_line({0, 0}, {10, 0}, {5, -5}), -1);
  EXPECT_EQ(side_of_line({0, 0}, {10, 0}, {5, 0}), 0);
  EXPECT_EQ(side_of_line({0, 0}, {10, 0}, {20, 0}), 0);  // on the line's extension
  // Walking down the picture (0, 0) -> (0, 10): the right-hand side is to the left (smaller x).
  EXPECT_EQ(side_of_line({0, 0}, {0, 10}, {-3, 5}), 1);
  EXPECT_EQ(side_of_line({0, 0}, {0, 10}, {3, 5}), -1);
}

TEST(AnalyticsGeometry, StepsThatCrossTheSegment) {
  const PointF a{0, 0}, b{10, 0};
  EXPECT_TRUE(step_crosses_segment(a, b, {5, -1}, {5, 1}));
  EXPECT_TRUE(step_crosses_segment(a, b, {5, 1}, {6, -1}));
  EXPECT_TRUE(step_crosses_segment(a, b, {-1, -1}, {1, 1}));     // through a itself
  EXPECT_TRUE(step_crosses_segment(a, b, {5, 0}, {5, 1}));       // from a point on the segment
  EXPECT_FALSE(step_crosses_segment(a, b, {12, -1}, {12, 1}));   // past b
  EXPECT_FALSE(step_crosses_segment(a, b, {12, 0}, {12, 1}));    // from the line's extension
  EXPECT_FALSE(step_crosses_segment(a, b, {5, -1}, {5, -2}));    // stays on one side
  EXPECT_FALSE(step_crosses_segment(a, b, {5, -1}, {5, 0}));     // reaches the line, not past it
}

TEST(AnalyticsGeometry, PointsInPolygons) {
  const std::vector<PointF> square{{0, 0}, {10, 0}, {10, 10}, {0, 10}};
  EXPECT_TRUE(inside_polygon(square, {5, 5}));
  EXPECT_FALSE(inside_polygon(square, {15, 5}));
  EXPECT_FALSE(inside_polygon(square, {5, -0.01f}));
  EXPECT_TRUE(inside_polygon(square, {10, 5}));  // the boundary is inside
  EXPECT_TRUE(inside_polygon(square, {0, 0}));   // a corner too
  // An L: the notch at the top right is outside.
  const std::vector<PointF> ell{{0, 0}, {4, 0}, {4, 6}, {10, 6}, {10, 10}, {0, 10}};
  EXPECT_TRUE(inside_polygon(ell, {2, 2}));
  EXPECT_FALSE(inside_polygon(ell, {7, 2}));
  EXPECT_TRUE(inside_polygon(ell, {7, 8}));
}

TEST(AnalyticsGeometry, AreasAndPixels) {
  const std::vector<PointF> clockwise{{0, 0}, {10, 0}, {10, 10}, {0, 10}};  // as seen on the picture
  EXPECT_DOUBLE_EQ(polygon_area(clockwise), 100);
  const std::vector<PointF> flat{{0, 0}, {5, 5}, {10, 10}};
  EXPECT_DOUBLE_EQ(polygon_area(flat), 0);
  const std::vector<PointF> relative{{0.1f, 0.6f}, {0.9f, 0.6f}};
  const auto px = to_pixels(relative, 640, 480);
  EXPECT_FLOAT_EQ(px[0].x, 64);
  EXPECT_FLOAT_EQ(px[0].y, 288);
  EXPECT_FLOAT_EQ(px[1].x, 576);
  EXPECT_EQ(anchor_of({10, 20, 30, 40}, Anchor::kBottomCenter), (PointF{25, 60}));
  EXPECT_EQ(anchor_of({10, 20, 30, 40}, Anchor::kCenter), (PointF{25, 40}));
}

// A door from (100, 300) to (500, 300): "in" is downwards on the picture; a lobby zone below it.
AnalyticsScene door_and_lobby() {
  return {{{"door", {100, 300}, {500, 300}}}, {{"lobby", {{100, 400}, {500, 400}, {500, 600}, {100, 600}}}}};
}

TrackedObject at(std::int64_t id, float x, float y, std::string label = "person") { return {id, std::move(label), {x, y}}; }

/// Moves one track along `ys` (x fixed), one frame per 100 ms from `t0`; returns the crossings
/// as "in"/"out" in order.
std::vector<std::string> walk(StreamAnalytics& a, std::int64_t id, float x, const std::vector<float>& ys, double t0 = 0) {
  std::vector<std::string> crossings;
  for (std::size_t i = 0; i < ys.size(); ++i) {
    const TrackedObject o = at(id, x, ys[i]);
    for (const Event& e : a.update(t0 + 100.0 * i, {&o, 1})) {
      if (e.type == "line_crossed") crossings.push_back(e.direction);
    }
  }
  return crossings;
}

using Dirs = std::vector<std::string>;

TEST(StreamAnalytics, AWalkAcrossTheLineBothWaysIsInThenOut) {
  StreamAnalytics a(door_and_lobby(), 2000);
  const TrackedObject above = at(7, 300, 250), below = at(7, 300, 350);
  EXPECT_TRUE(a.update(0, {&above, 1}).empty());
  const auto in = a.update(100, {&below, 1});
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].type, "line_crossed");
  EXPECT_EQ(in[0].where, "door");
  EXPECT_EQ(in[0].direction, "in");
  EXPECT_EQ(in[0].track_id, 7);
  EXPECT_EQ(in[0].label, "person");
  const auto out = a.update(200, {&above, 1});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].direction, "out");
  EXPECT_EQ(a.line_total(0).in, 1);
  EXPECT_EQ(a.line_total(0).out, 1);
}

TEST(StreamAnalytics, TouchesWigglesAndRunsAlongCountOnlyRealCrossings) {
  StreamAnalytics a(door_and_lobby(), 2000);
  EXPECT_EQ(walk(a, 1, 300, {290, 300, 300, 290}), Dirs{});                 // touches, goes back
  EXPECT_EQ(walk(a, 2, 300, {290, 300, 300, 310}), Dirs{"in"});             // stops on it, goes on
  EXPECT_EQ(walk(a, 3, 300, {299, 301, 299, 301, 301}), (Dirs{"in", "out", "in"}));  // three real crossings
  EXPECT_EQ(walk(a, 4, 300, {310, 300, 310, 300, 310}), Dirs{});            // below, touching twice
  EXPECT_EQ(a.line_total(0).in, 3);
  EXPECT_EQ(a.line_total(0).out, 1);
}

TEST(StreamAnalytics, RunningAlongTheLineAndGoingRoundItsEnd) {
  StreamAnalytics a(door_and_lobby(), 2000);
  // Onto the line, along it, off the other side within the segment: one crossing.
  const std::vector<PointF> along{{200, 290}, {200, 300}, {300, 300}, {400, 300}, {400, 310}};
  int crossings = 0;
  for (std::size_t i = 0; i < along.size(); ++i) {
    const TrackedObject o{1, "person", along[i]};
    crossings += static_cast<int>(a.update(100.0 * i, {&o, 1}).size());
  }
  EXPECT_EQ(crossings, 1);
  // Past the end (x 600 > 500): the side changes, nothing is counted; back across the segment
  // from there counts as out.
  EXPECT_EQ(walk(a, 2, 600, {250, 350}, 1000), Dirs{});
  const TrackedObject back = at(2, 300, 250);
  const auto events = a.update(1200, {&back, 1});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].direction, "out");
}

TEST(StreamAnalytics, DwellInAZoneIsStreamTimeInside) {
  StreamAnalytics a(door_and_lobby(), 2000);
  std::vector<Event> all;
  for (int t = 0; t <= 4000; t += 100) {
    const bool inside = t >= 1000 && t < 4000;  // inside 1000 ms .. 3900 ms, out at 4000 ms
    const TrackedObject o = at(5, inside ? 300 : 700, 500);
    for (Event& e : a.update(t, {&o, 1})) all.push_back(e);
    if (t == 1000) {
      EXPECT_EQ(a.zone_total(0).occupancy, 1);
    }
  }
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].type, "zone_entered");
  EXPECT_EQ(all[0].where, "lobby");
  EXPECT_EQ(all[1].type, "zone_left");
  EXPECT_EQ(all[1].track_id, 5);
  EXPECT_DOUBLE_EQ(all[1].dwell_ms, 3000);
  EXPECT_EQ(a.zone_total(0).occupancy, 0);
  EXPECT_EQ(a.zone_total(0).entries, 1);
  EXPECT_EQ(a.zone_total(0).exits, 1);
}

TEST(StreamAnalytics, OccupancyAndTracksFirstSeenInside) {
  StreamAnalytics a(door_and_lobby(), 2000);
  const std::vector<TrackedObject> three{at(1, 200, 500), at(2, 300, 500), at(3, 400, 500)};
  const auto entered = a.update(0, three);  // first seen inside: each enters
  ASSERT_EQ(entered.size(), 3u);
  for (const Event& e : entered) EXPECT_EQ(e.type, "zone_entered");
  const std::vector<TrackedObject> one_out{at(1, 200, 500), at(2, 300, 700), at(3, 400, 500)};
  const auto left = a.update(100, one_out);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].type, "zone_left");
  EXPECT_EQ(left[0].track_id, 2);
  EXPECT_DOUBLE_EQ(left[0].dwell_ms, 100);
  EXPECT_EQ(a.zone_total(0).occupancy, 2);
  EXPECT_EQ(a.zone_total(0).entries, 3);
  const auto overlays = a.overlays();
  ASSERT_EQ(overlays.size(), 2u);
  EXPECT_EQ(overlays[0].text, "door in 0 out 0");
  EXPECT_FALSE(overlays[0].closed);
  EXPECT_EQ(overlays[1].text, "lobby 2 now, 3 in");
  EXPECT_TRUE(overlays[1].closed);
  EXPECT_EQ(overlays[1].points.size(), 4u);
}

TEST(StreamAnalytics, ClassesAreCountedApart) {
  StreamAnalytics a(door_and_lobby(), 2000);
  const std::vector<TrackedObject> above{at(1, 200, 250, "person"), at(2, 300, 250, "car"), at(3, 400, 250, "person")};
  const std::vector<TrackedObject> below{at(1, 200, 500, "person"), at(2, 300, 500, "car"), at(3, 400, 350, "person")};
  a.update(0, above);
  a.update(100, below);
  const auto& lines = a.line_counts()[0];
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines.at("person").in, 2);
  EXPECT_EQ(lines.at("car").in, 1);
  const auto& zones = a.zone_counts()[0];
  EXPECT_EQ(zones.at("person").occupancy, 1);
  EXPECT_EQ(zones.at("car").occupancy, 1);
  EXPECT_EQ(a.line_total(0).in, 3);
}

TEST(StreamAnalytics, TrackedObjectsTakeTrackedDetectionsOfTheListedClasses) {
  const auto detection = [](std::string kind, std::string label, RectF box, std::int64_t track_id) {
    Detection d;
    d.kind = std::move(kind);
    d.label = std::move(label);
    d.box = box;
    d.track_id = track_id;
    return d;
  };
  const std::vector<Detection> d{
      detection("object", "person", {10, 10, 20, 40}, 1),
      detection("object", "car", {0, 0, 5, 5}, 2),
      detection("face", "", {0, 0, 5, 5}, 3),           // no label: its kind
      detection("object", "person", {0, 0, 5, 5}, -1),  // no track: ignored
      detection("object", "person", {0, 0, 5, 5}, 1),   // a duplicate id: the first one counts
  };
  const auto all = tracked_objects(d, Anchor::kBottomCenter, {});
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].anchor, (PointF{20, 50}));
  EXPECT_EQ(all[2].label, "face");
  const std::vector<std::string> classes{"person", "face"};
  const auto some = tracked_objects(d, Anchor::kCenter, classes);
  ASSERT_EQ(some.size(), 2u);
  EXPECT_EQ(some[0].track_id, 1);
  EXPECT_EQ(some[0].anchor, (PointF{20, 30}));
  EXPECT_EQ(some[1].track_id, 3);
}

TEST(StreamAnalytics, ForgottenTracksLeaveTheirZonesAndTheirStateGoes) {
  StreamAnalytics a(door_and_lobby(), 2000);
  for (int t = 0; t <= 1000; t += 100) {
    const TrackedObject o = at(9, 300, 500);
    a.update(t, {&o, 1});
  }
  EXPECT_TRUE(a.update(2900, {}).empty());  // unseen for 1900 ms: still there
  EXPECT_EQ(a.tracks(), 1u);
  const auto gone = a.update(3000, {});
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].type, "zone_left");
  EXPECT_DOUBLE_EQ(gone[0].dwell_ms, 1000);  // to the frame it was last seen in
  EXPECT_EQ(a.tracks(), 0u);
  EXPECT_EQ(a.zone_total(0).occupancy, 0);
  EXPECT_EQ(a.zone_total(0).exits, 1);

  // A thousand short tracks over time: state stays with the tracks alive.
  for (int i = 0; i < 1000; ++i) {
    const TrackedObject o = at(100 + i, 300, 250);
    a.update(4000 + 100.0 * i, {&o, 1});
  }
  EXPECT_LE(a.tracks(), 21u);
}

TEST(StreamAnalytics, TimeGoingBackForgetsEveryTrack) {
  StreamAnalytics a(door_and_lobby(), 2000);
  const TrackedObject o = at(1, 300, 500);
  a.update(5000, {&o, 1});
  a.update(5100, {&o, 1});
  const auto events = a.update(0, {&o, 1});  // the source restarted: left, then entered again
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].type, "zone_left");
  EXPECT_DOUBLE_EQ(events[0].dwell_ms, 100);
  EXPECT_EQ(events[1].type, "zone_entered");
  EXPECT_EQ(a.zone_total(0).entries, 2);
  EXPECT_EQ(a.zone_total(0).occupancy, 1);
}

}  // namespace
}  // namespace redwood
