#pragma once
// The analytics state machine of one stream: tracked objects in, frame by frame in stream order;
// line crossings and zone entries and exits out, as events, with the counts so far. It knows
// nothing of pipelines (the analytics stage, analytics_stage.cpp, keeps one per stream).
//
// Lines. A line is the segment a -> b; a point is on its left or its right as seen on the
// picture (y down) when walking from a to b (geometry_2d.hpp, side_of_line). Each track keeps
// the side its anchor was last strictly on; a point exactly on the line keeps that side. A
// crossing is a change of side whose step (the anchor's previous position -> its current one)
// meets the segment, ends included: left -> right is "in", right -> left is "out". So touching the
// line and going back, or running along it, counts nothing; going round an end of the segment
// changes the side without counting; a wiggle across the line counts each real crossing.
//
// Zones. A zone is a polygon; a track is inside when its anchor is (the boundary counts as
// inside). zone_entered when it goes from outside to inside (a track first seen inside enters),
// zone_left when it goes out, or when the track is forgotten: unseen for forget_after_ms of stream
// time (Frame::pts_ms). dwell_ms is the time between the entering frame and the leaving one (for
// a forgotten track, the frame it was last seen in). A stream whose time goes back (a source
// that restarted) forgets all its tracks: their times no longer compare. Forgotten tracks'
// state is removed, so memory follows the tracks alive, not the run's length.
//
// Counts are per class: the detection's label, or its kind when it has none; a zone stay keeps
// the class it entered with, so that occupancy stays entries - exits per class.

#include "stages/frame.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace redwood {

/// The point of a box that is tested against lines and zones.
enum class Anchor { kBottomCenter, kCenter };
PointF anchor_of(const RectF& box, Anchor anchor);

struct CountingLine {
  std::string name;
  PointF a, b;  // picture pixels; "in" is from the left of a -> b to its right
};
struct CountingZone {
  std::string name;
  std::vector<PointF> points;  // picture pixels, 3 or more, non-zero area
};
/// A stream's lines and zones in its picture's pixels.
struct AnalyticsScene {
  std::vector<CountingLine> lines;
  std::vector<CountingZone> zones;
};

/// One tracked detection of a frame, as the analytics see it.
struct TrackedObject {
  std::int64_t track_id = -1;
  std::string label;  // the class counted: Detection::label, or its kind when it has none
  PointF anchor;
};

/// A frame's detections that carry a track id (the first of each id) and whose label or kind is
/// one of `classes` (every one when `classes` is empty).
std::vector<TrackedObject> tracked_objects(std::span<const Detection> detections, Anchor anchor,
                                           std::span<const std::string> classes);

struct LineCounts {
  std::int64_t in = 0, out = 0;
  LineCounts& operator+=(const LineCounts& o) {
    in += o.in;
    out += o.out;
    return *this;
  }
};
struct ZoneCounts {
  std::int64_t entries = 0, exits = 0, occupancy = 0;
  ZoneCounts& operator+=(const ZoneCounts& o) {
    entries += o.entries;
    exits += o.exits;
    occupancy += o.occupancy;
    return *this;
  }
};

class StreamAnalytics {
 public:
  StreamAnalytics(AnalyticsScene scene, double forget_after_ms);

  /// The same lines and zones in another picture size (relative units, a stream whose size
  /// changed); the tracks' state is kept.
  void set_scene(AnalyticsScene scene);
  const AnalyticsScene& scene() const { return scene_; }

  /// One frame: forgets tracks unseen for forget_after_ms, then moves each object's track and
  /// returns what happened, in object order (forgotten tracks' zone_left first, by track id).
  std::vector<Event> update(double pts_ms, std::span<const TrackedObject> objects);

  /// Counts so far, per line (zone) in scene order, per class.
  const std::vector<std::map<std::string, LineCounts>>& line_counts() const { return line_counts_; }
  const std::vector<std::map<std::string, ZoneCounts>>& zone_counts() const { return zone_counts_; }
  /// All classes together.
  LineCounts line_total(std::size_t line) const;
  ZoneCounts zone_total(std::size_t zone) const;

  /// The lines and zones to draw, with their counts: "door in 3 out 1", "lobby 2 now, 5 in".
  std::vector<Overlay> overlays() const;
  /// Tracks with state (seen, not yet forgotten).
  std::size_t tracks() const { return tracks_.size(); }

 private:
  struct ZoneStay {
    bool inside = false;
    double entered_ms = 0;
    std::string label;  // the class it entered as
  };
  struct TrackState {
    PointF last;             // the anchor in the frame it was last seen in
    double last_seen_ms = 0;
    std::vector<int> side;   // per line: -1 left, +1 right, 0 never off the line yet
    std::vector<ZoneStay> zones;
  };

  void leave(std::size_t zone, ZoneStay& stay, std::int64_t track_id, double at_ms, std::vector<Event>& events);
  void forget(std::map<std::int64_t, TrackState>::iterator it, std::vector<Event>& events);

  AnalyticsScene scene_;
  double forget_after_ms_;
  std::optional<double> last_pts_ms_;
  std::map<std::int64_t, TrackState> tracks_;  // ordered: forgotten tracks leave in id order
  std::vector<std::map<std::string, LineCounts>> line_counts_;
  std::vector<std::map<std::string, ZoneCounts>> zone_counts_;
};

}  // namespace redwood
