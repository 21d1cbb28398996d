#include "stages/analytics/analytics.hpp"

#include "core/error.hpp"
#include "stages/analytics/geometry_2d.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace redwood {

PointF anchor_of(const RectF& box, Anchor anchor) {
  const float x = box.x + box.width / 2;
  return anchor == Anchor::kCenter ? PointF{x, box.y + box.height / 2} : PointF{x, box.y + box.height};
}

std::vector<TrackedObject> tracked_objects(std::span<const Detection> detections, Anchor anchor,
                                           std::span<const std::string> classes) {
  std::vector<TrackedObject> out;
  std::set<std::int64_t> seen;
  for (const Detection& d : detections) {
    if (d.track_id < 0) continue;
    const auto listed = [&](const std::string& c) { return c == d.label || c == d.kind; };
    if (!classes.empty() && std::none_of(classes.begin(), classes.end(), listed)) continue;
    if (!seen.insert(d.track_id).second) continue;
    out.push_back({d.track_id, d.label.empty() ? d.kind : d.label, anchor_of(d.box, anchor)});
  }
  return out;
}

StreamAnalytics::StreamAnalytics(AnalyticsScene scene, double forget_after_ms)
    : scene_(std::move(scene)),
      forget_after_ms_(forget_after_ms),
      line_counts_(scene_.lines.size()),
      zone_counts_(scene_.zones.size()) {}

void StreamAnalytics::set_scene(AnalyticsScene scene) {
  if (scene.lines.size() != scene_.lines.size() || scene.zones.size() != scene_.zones.size()) {
    throw InvalidArgument("StreamAnalytics::set_scene: another number of lines or zones");
  }
  scene_ = std::move(scene);
}

void StreamAnalytics::leave(std::size_t zone, ZoneStay& stay, std::int64_t track_id, double at_ms,
                            std::vector<Event>& events) {
  ZoneCounts& c = zone_counts_[zone][stay.label];
  ++c.exits;
  --c.occupancy;
  events.push_back({"zone_left", scene_.zones[zone].name, "", track_id, stay.label, std::max(0.0, at_ms - stay.entered_ms)});
  stay.inside = false;
}

void StreamAnalytics::forget(std::map<std::int64_t, TrackState>::iterator it, std::vector<Event>& events) {
  for (std::size_t z = 0; z < it->second.zones.size(); ++z) {
    if (it->second.zones[z].inside) leave(z, it->second.zones[z], it->first, it->second.last_seen_ms, events);
  }
  tracks_.erase(it);
}

std::vector<Event> StreamAnalytics::update(double pts_ms, std::span<const TrackedObject> objects) {
  std::vector<Event> events;
  const bool went_back = last_pts_ms_ && pts_ms < *last_pts_ms_;
  last_pts_ms_ = pts_ms;
  for (auto it = tracks_.begin(); it != tracks_.end();) {
    const auto next = std::next(it);
    if (went_back || pts_ms - it->second.last_seen_ms >= forget_after_ms_) forget(it, events);
    it = next;
  }

  std::set<std::int64_t> moved;
  for (const TrackedObject& o : objects) {
    if (!moved.insert(o.track_id).second) continue;  // a track moves once a frame: its first object
    auto [it, fresh] = tracks_.try_emplace(o.track_id);
    TrackState& t = it->second;
    if (fresh) {
      t.side.assign(scene_.lines.size(), 0);
      t.zones.assign(scene_.zones.size(), {});
    }
    for (std::size_t i = 0; i < scene_.lines.size(); ++i) {
      const CountingLine& line = scene_.lines[i];
      const int side = side_of_line(line.a, line.b, o.anchor);
      if (side == 0) continue;  // on the line: keeps the side it was on
      if (!fresh && t.side[i] != 0 && side != t.side[i] && step_crosses_segment(line.a, line.b, t.last, o.anchor)) {
        const bool in = side > 0;  // left -> right
        LineCounts& c = line_counts_[i][o.label];
        ++(in ? c.in : c.out);
        events.push_back({"line_crossed", line.name, in ? "in" : "out", o.track_id, o.label, 0});
      }
      t.side[i] = side;
    }
    for (std::size_t z = 0; z < scene_.zones.size(); ++z) {
      ZoneStay& stay = t.zones[z];
      const bool inside = inside_polygon(scene_.zones[z].points, o.anchor);
      if (inside && !stay.inside) {
        stay = {true, pts_ms, o.label};
        ZoneCounts& c = zone_counts_[z][o.label];
        ++c.entries;
        ++c.occupancy;
        events.push_back({"zone_entered", scene_.zones[z].name, "", o.track_id, o.label, 0});
      } else if (!inside && stay.inside) {
        leave(z, stay, o.track_id, pts_ms, events);
      }
    }
    t.last = o.anchor;
    t.last_seen_ms = pts_ms;
  }
  return events;
}

namespace {
template <typename Counts>
Counts all_classes(const std::map<std::string, Counts>& per_class) {
  Counts total;
  for (const auto& [label, c] : per_class) total += c;
  return total;
}
}  // namespace

LineCounts StreamAnalytics::line_total(std::size_t line) const { return all_classes(line_counts_.at(line)); }

ZoneCounts StreamAnalytics::zone_total(std::size_t zone) const { return all_classes(zone_counts_.at(zone)); }

std::vector<Overlay> StreamAnalytics::overlays() const {
  std::vector<Overlay> out;
  for (std::size_t i = 0; i < scene_.lines.size(); ++i) {
    const CountingLine& l = scene_.lines[i];
    const LineCounts c = line_total(i);
    out.push_back({{l.a, l.b}, false, fmt::format("{} in {} out {}", l.name, c.in, c.out)});
  }
  for (std::size_t z = 0; z < scene_.zones.size(); ++z) {
    const CountingZone& zone = scene_.zones[z];
    const ZoneCounts c = zone_total(z);
    out.push_back({zone.points, true, fmt::format("{} {} now, {} in", zone.name, c.occupancy, c.entries)});
  }
  return out;
}

}  // namespace redwood
