// analytics stage: counts tracked objects crossing lines and staying in zones, per stream and
// per class, as events on the frames (Frame::events), counters (the run's summary, the metrics
// endpoint) and overlays (the lines and zones with their counts, drawn by the video sink). It
// needs a `track` stage before it: detections without a track id are ignored. The semantics
// (which side is "in", what counts as a crossing, dwell, forgetting) are in analytics.hpp.
//
//   - name: count
//     type: analytics
//     units: relative        # or pixels: the points below are fractions of the picture's size
//     anchor: bottom_center  # the point of a box tested: bottom_center (feet), center
//     classes: [person]      # labels (or kinds) counted; default every tracked detection
//     forget_after_ms: 2000  # a track unseen this long (stream time) is gone
//     lines:
//       - name: door
//         points: [[0.1, 0.6], [0.9, 0.6]]  # "in": from the left of A -> B to its right (here: downwards)
//     zones:
//       - name: lobby
//         points: [[0.2, 0.2], [0.8, 0.2], [0.8, 0.9], [0.2, 0.9]]

#include "stages/analytics/analytics.hpp"
#include "stages/analytics/geometry_2d.hpp"
#include "stages/stage.hpp"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <set>

namespace redwood {
namespace {

/// A list of [x, y] points at params[key], each checked at its own place in the file.
std::vector<PointF> read_points(Params& p, const std::string& key, bool relative) {
  const YAML::Node list = p.node(key);
  if (!list || list.IsNull()) p.fail(key, "missing required key '" + key + "'");
  if (!list.IsSequence()) p.fail(key, "expected a list of [x, y] points");
  std::vector<PointF> points;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const YAML::Node pt = list[i];
    const std::string what = fmt::format("{}: {}[{}]", p.what(), key, i);
    if (!pt.IsSequence() || pt.size() != 2) p.origin().fail(pt, what + ": expected a point [x, y]");
    float xy[2];
    for (int k = 0; k < 2; ++k) {
      try {
        xy[k] = pt[k].as<float>();
      } catch (const YAML::Exception&) {
        p.origin().fail(pt[k], what + ": expected a number, got '" + (pt[k].IsScalar() ? pt[k].Scalar() : "a list or map") + "'");
      }
      if (!std::isfinite(xy[k])) p.origin().fail(pt[k], what + ": expected a finite number");
      if (relative && (xy[k] < 0 || xy[k] > 1)) {
        p.origin().fail(pt[k], fmt::format("{}: {} is outside [0, 1] (units: relative: fractions of the picture's size)", what, xy[k]));
      }
    }
    points.push_back({xy[0], xy[1]});
  }
  return points;
}

class AnalyticsStage final : public Stage {
 public:
  explicit AnalyticsStage(StageArgs& args) : Stage(args.name) {
    Params& p = args.params;
    remember_place(p);
    relative_ = p.choice("units", "relative", {"relative", "pixels"}) == "relative";
    anchor_ = p.choice("anchor", "bottom_center", {"bottom_center", "center"}) == "center" ? Anchor::kCenter : Anchor::kBottomCenter;
    if (p.has("classes")) {
      classes_ = p.get<std::vector<std::string>>("classes", {});
      if (classes_.empty()) p.fail("classes", "names no class (leave it out to count every tracked detection)");
    }
    forget_after_ms_ = p.get<double>("forget_after_ms", 2000);
    if (!(forget_after_ms_ > 0)) p.fail("forget_after_ms", "must be more than 0");

    const auto origin = std::make_shared<ConfigOrigin>(p.origin());
    std::set<std::string> names;
    const auto items = [&](const std::string& key, auto&& read) {
      const YAML::Node list = p.node(key);
      if (!list || list.IsNull()) return;
      if (!list.IsSequence()) p.fail(key, "expected a list");
      for (std::size_t i = 0; i < list.size(); ++i) {
        Params item(list[i], origin, fmt::format("{}: {}[{}]", p.what(), key, i));
        const auto name = item.require<std::string>("name");
        if (!names.insert(name).second) item.fail("name", fmt::format("'{}' names another line or zone already", name));
        read(item, name);
        item.finish();
      }
    };
    items("lines", [&](Params& item, const std::string& name) {
      const auto points = read_points(item, "points", relative_);
      if (points.size() != 2) item.fail("points", fmt::format("a line needs exactly 2 points, got {}", points.size()));
      if (points[0] == points[1]) item.fail("points", "a line needs 2 distinct points");
      scene_.lines.push_back({name, points[0], points[1]});
    });
    items("zones", [&](Params& item, const std::string& name) {
      auto points = read_points(item, "points", relative_);
      if (points.size() < 3) item.fail("points", fmt::format("a zone needs 3 or more points, got {}", points.size()));
      if (polygon_area(points) == 0) item.fail("points", "the zone's polygon has no area (its points are on one line)");
      scene_.zones.push_back({name, std::move(points)});
    });
    if (scene_.lines.empty() && scene_.zones.empty()) p.fail("lines", "needs at least one line or zone (lines:, zones:)");
  }

  bool ordered() const override { return true; }

  std::vector<StageCounter> counters() const override {
    std::lock_guard lock(mutex_);
    std::vector<StageCounter> out;
    for (const auto& [index, s] : streams_) {
      for (std::size_t i = 0; i < scene_.lines.size(); ++i) {
        for (const auto& [label, c] : s.analytics->line_counts()[i]) {
          for (const auto& [direction, n] : {std::pair{"in", c.in}, std::pair{"out", c.out}}) {
            out.push_back({"line_crossings", {{"stream", s.name}, {"line", scene_.lines[i].name}, {"direction", direction}, {"class", label}},
                           static_cast<double>(n), false,
                           "Tracked objects that crossed the line, by direction (in: from the left of A->B to its right)."});
          }
        }
      }
    }
    const auto zone_counter = [&](const char* name, std::int64_t ZoneCounts::*value, bool gauge, const char* help) {
      for (const auto& [index, s] : streams_) {
        for (std::size_t z = 0; z < scene_.zones.size(); ++z) {
          for (const auto& [label, c] : s.analytics->zone_counts()[z]) {
            out.push_back({name, {{"stream", s.name}, {"zone", scene_.zones[z].name}, {"class", label}},
                           static_cast<double>(c.*value), gauge, help});
          }
        }
      }
    };
    zone_counter("zone_entries", &ZoneCounts::entries, false, "Tracked objects that entered the zone.");
    zone_counter("zone_exits", &ZoneCounts::exits, false,
                 "Tracked objects that left the zone (walked out, or unseen for forget_after_ms).");
    zone_counter("zone_occupancy", &ZoneCounts::occupancy, true, "Tracked objects in the zone now.");
    return out;
  }

 private:
  struct StreamEntry {
    std::string name;
    int width = 0, height = 0;  // the picture size scene_ was scaled to (relative units)
    std::optional<StreamAnalytics> analytics;
  };

  AnalyticsScene scaled(int width, int height) const {
    AnalyticsScene s = scene_;
    for (CountingLine& l : s.lines) {
      const PointF ends[2] = {l.a, l.b};
      const auto px = to_pixels(ends, width, height);
      l.a = px[0];
      l.b = px[1];
    }
    for (CountingZone& z : s.zones) z.points = to_pixels(z.points, width, height);
    return s;
  }

  void do_process(std::span<Frame* const> frames) override {
    std::lock_guard lock(mutex_);
    for (Frame* f : frames) {
      StreamEntry& s = streams_[f->stream];
      if (s.name.empty()) s.name = f->stream_name.empty() ? std::to_string(f->stream) : f->stream_name;
      if (relative_) {
        const int w = f->image.width, h = f->image.height;
        if (w <= 0 || h <= 0) {
          throw Error(fmt::format("stage '{}': units: relative needs the picture's size, and frame {} of stream '{}' has no picture",
                                  name(), f->seq, s.name));
        }
        if (!s.analytics) {
          s.analytics.emplace(scaled(w, h), forget_after_ms_);
        } else if (w != s.width || h != s.height) {
          s.analytics->set_scene(scaled(w, h));
        }
        s.width = w;
        s.height = h;
      } else if (!s.analytics) {
        s.analytics.emplace(scene_, forget_after_ms_);
      }
      const auto objects = tracked_objects(f->detections, anchor_, classes_);
      for (Event& e : s.analytics->update(f->pts_ms, objects)) f->events.push_back(std::move(e));
      for (Overlay& o : s.analytics->overlays()) f->overlays.push_back(std::move(o));
    }
  }

  bool relative_ = true;
  Anchor anchor_ = Anchor::kBottomCenter;
  std::vector<std::string> classes_;
  double forget_after_ms_ = 2000;
  AnalyticsScene scene_;  // as written: fractions (relative) or pixels
  mutable std::mutex mutex_;  // counters() reads from other threads
  std::map<int, StreamEntry> streams_;
};

}  // namespace

RW_REGISTER_STAGE("analytics", AnalyticsStage);

}  // namespace redwood
