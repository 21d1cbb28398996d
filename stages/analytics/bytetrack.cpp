// ByteTrack's BYTETracker.update (byte_tracker.py), one stream. Differences from the Python:
// tracks are numbered when confirmed, not when first seen, so the ids a stream shows have no
// gaps from one-frame false positives; a track keeps the class of its first detection (per_class);
// of a lost and a tracked track on one object, only a younger lost one is dropped (the Python
// drops the younger of the two, but the tracked one's id is already on this frame's detection).

#include "stages/analytics/bytetrack.hpp"

#include "stages/analytics/hungarian.hpp"

#include <algorithm>
#include <cmath>

namespace redwood {

ByteTracker::ByteTracker(ByteTrackOptions options) : o_(options) {}

int ByteTracker::active() const {
  return static_cast<int>(std::count_if(tracks_.begin(), tracks_.end(), [](const Track& t) {
    return t.confirmed && t.state == TrackState::kTracked;
  }));
}

void ByteTracker::hit(Track& t, const TrackerInput& d, double pts_ms) {
  kalman_.update(t.kalman, to_measurement(d.box));
  t.state = TrackState::kTracked;
  t.score = d.score;
  t.last_frame = frame_;
  t.last_pts_ms = pts_ms;
  if (!t.confirmed) {
    t.confirmed = true;
    t.id = next_id_++;
  }
  if (o_.trail > 0) {
    t.trail.push_back({d.box.x + d.box.width / 2, d.box.y + d.box.height / 2});
    while (static_cast<int>(t.trail.size()) > o_.trail) t.trail.pop_front();
  }
}

std::vector<ByteTracker::TrackIt> ByteTracker::match(const std::vector<TrackIt>& tracks, std::vector<int>& pending,
                                                     const std::vector<TrackerInput>& detections, double limit,
                                                     bool fuse, std::vector<TrackerOutput>& out, double pts_ms) {
  CostMatrix costs(static_cast<int>(tracks.size()), static_cast<int>(pending.size()));
  for (int i = 0; i < costs.rows; ++i) {
    const RectF predicted = tracks[i]->kalman.box();
    for (int j = 0; j < costs.cols; ++j) {
      const TrackerInput& d = detections[pending[j]];
      if (o_.per_class && d.cls != tracks[i]->cls) {
        costs.at(i, j) = kForbidden;
        continue;
      }
      const float overlap = intersection_over_union(predicted, d.box);
      costs.at(i, j) = 1.0 - (fuse ? overlap * d.score : overlap);
    }
  }
  const Assignment a = assign_min_cost(costs, limit);
  for (const auto& [i, j] : a.matches) {
    Track& t = *tracks[i];
    const int k = pending[j];
    hit(t, detections[k], pts_ms);
    out[k].track_id = t.id;
    out[k].trail.assign(t.trail.begin(), t.trail.end());
  }
  std::vector<TrackIt> unmatched;
  for (int i : a.unmatched_rows) unmatched.push_back(tracks[i]);
  std::vector<int> left;
  for (int j : a.unmatched_cols) left.push_back(pending[j]);
  pending = std::move(left);
  return unmatched;
}

std::vector<TrackerOutput> ByteTracker::update(const std::vector<TrackerInput>& detections, double pts_ms) {
  ++frame_;
  std::vector<TrackerOutput> out(detections.size());

  // 1. Predict. A lost track's height stops changing (byte_tracker.py zeroes its velocity), so
  // that a box unseen for long neither shrinks to nothing nor balloons.
  std::vector<TrackIt> pool, unconfirmed;
  for (auto it = tracks_.begin(); it != tracks_.end(); ++it) {
    if (it->state != TrackState::kTracked) it->kalman.mean[7] = 0;
    kalman_.predict(it->kalman);
    (it->confirmed ? pool : unconfirmed).push_back(it);
  }

  // 2. High and low detections, in input order. Empty boxes (a decoder's clipped-away ones)
  // have no aspect ratio: they are left untracked.
  std::vector<int> high, low;
  for (int k = 0; k < static_cast<int>(detections.size()); ++k) {
    const TrackerInput& d = detections[k];
    if (d.box.empty()) continue;
    if (d.score >= o_.high_threshold) {
      high.push_back(k);
    } else if (d.score >= o_.low_threshold) {
      low.push_back(k);
    }
  }

  // 3. Confirmed tracks (tracked and lost) with the high detections.
  const std::vector<TrackIt> left = match(pool, high, detections, o_.match_threshold, o_.fuse_score, out, pts_ms);
  // 4. Those still tracked with the low ones; what stays unmatched is lost.
  std::vector<TrackIt> tracked_left;
  for (TrackIt t : left) {
    if (t->state == TrackState::kTracked) tracked_left.push_back(t);
  }
  for (TrackIt t : match(tracked_left, low, detections, o_.low_match_threshold, false, out, pts_ms)) {
    t->state = TrackState::kLost;
  }
  // 5. Unconfirmed tracks with the high detections left: a second hit confirms, a miss drops.
  for (TrackIt t : match(unconfirmed, high, detections, o_.unconfirmed_match_threshold, o_.fuse_score, out, pts_ms)) {
    tracks_.erase(t);
  }
  // 6. Lost too long: removed.
  std::erase_if(tracks_, [&](const Track& t) {
    if (t.state != TrackState::kLost) return false;
    return o_.max_lost_ms > 0 ? pts_ms - t.last_pts_ms > o_.max_lost_ms : frame_ - t.last_frame > o_.max_lost_frames;
  });
  // 7. New tracks from the confident high detections left.
  for (int k : high) {
    const TrackerInput& d = detections[k];
    if (d.score < o_.new_track_threshold) continue;
    Track t;
    t.kalman = kalman_.initiate(to_measurement(d.box));
    t.cls = d.cls;
    t.score = d.score;
    t.start_frame = t.last_frame = frame_;
    t.last_pts_ms = pts_ms;
    if (o_.trail > 0) t.trail.push_back({d.box.x + d.box.width / 2, d.box.y + d.box.height / 2});
    if (frame_ == 1) {
      t.confirmed = true;
      t.id = next_id_++;
      out[k].track_id = t.id;
      out[k].trail.assign(t.trail.begin(), t.trail.end());
    }
    tracks_.push_back(std::move(t));
  }
  // A lost track whose prediction lies on a tracked one is the same object found again under a
  // new track (remove_duplicate_stracks): the younger of the two goes. Only lost ones can go
  // here: a tracked one was matched this frame and its id was already given out.
  std::vector<const Track*> doomed;
  for (const Track& lost : tracks_) {
    if (!lost.confirmed || lost.state != TrackState::kLost) continue;
    for (const Track& t : tracks_) {
      if (!t.confirmed || t.state != TrackState::kTracked) continue;
      if (intersection_over_union(lost.kalman.box(), t.kalman.box()) > 0.85f && lost.last_frame - lost.start_frame <= t.last_frame - t.start_frame) {
        doomed.push_back(&lost);
        break;
      }
    }
  }
  std::erase_if(tracks_, [&](const Track& t) { return std::find(doomed.begin(), doomed.end(), &t) != doomed.end(); });
  return out;
}

}  // namespace redwood
