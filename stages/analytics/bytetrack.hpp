#pragma once
// ByteTrack (Zhang et al., "ByteTrack: Multi-Object Tracking by Associating Every Detection Box",
// ECCV 2022), the associator of one stream: boxes, scores and classes in, a track id per box out.
// No Frame here; stages/analytics/track.cpp feeds it.
//
// Each frame, as byte_tracker.py does:
//   1. predict every track one frame ahead (box Kalman filter, kalman.hpp);
//   2. split the detections into high (score >= high_threshold) and low (>= low_threshold);
//   3. match confirmed tracks, tracked and lost, with the high ones (cost 1 - IoU, fused with
//      the score, limit match_threshold);
//   4. match the still unmatched tracked ones with the low ones (1 - IoU, limit
//      low_match_threshold): a partly occluded object keeps its track though its score dropped;
//   5. match unconfirmed tracks (seen once) with the high ones left (limit
//      unconfirmed_match_threshold); unconfirmed tracks left unmatched are dropped;
//   6. unmatched tracked tracks become lost; lost ones unseen for longer than max_lost_frames
//      (or max_lost_ms of stream time) are removed;
//   7. high detections left with score >= new_track_threshold start tracks, confirmed on their
//      second hit (at once on the stream's first frame).
// A confirmed track gets its id when confirmed: ids count 1, 2, 3... per tracker, never reused.

#include "stages/analytics/kalman.hpp"

#include <cstdint>
#include <deque>
#include <list>
#include <string>
#include <vector>

namespace redwood {

struct ByteTrackOptions {
  float high_threshold = 0.5f;
  float low_threshold = 0.1f;
  float new_track_threshold = 0.6f;
  float match_threshold = 0.8f;            // cost limit, stage 1
  float low_match_threshold = 0.5f;        // cost limit, stage 2
  float unconfirmed_match_threshold = 0.7f;
  bool fuse_score = true;                  // stage 1 and unconfirmed cost: 1 - IoU * score
  int max_lost_frames = 30;
  double max_lost_ms = 0;                  // > 0: lost tracks age in stream time instead
  bool per_class = false;                  // a track matches only detections of its class
  int trail = 30;                          // box centres kept per track (0: none)
};

struct TrackerInput {
  RectF box;
  float score = 0.f;
  std::string cls;  // compared only with per_class
};

/// What became of one input detection.
struct TrackerOutput {
  std::int64_t track_id = -1;  // -1: not on a confirmed track
  std::vector<PointF> trail;   // that track's recent box centres, oldest first (this one last)
};

enum class TrackState { kTracked, kLost };

struct Track {
  std::int64_t id = -1;  // -1 until confirmed
  bool confirmed = false;
  TrackState state = TrackState::kTracked;
  BoxKalmanState kalman;
  std::string cls;
  float score = 0.f;
  std::int64_t start_frame = 0;  // frame of the first hit
  std::int64_t last_frame = 0;   // frame of the last hit
  double last_pts_ms = 0;
  std::deque<PointF> trail;
};

class ByteTracker {
 public:
  explicit ByteTracker(ByteTrackOptions options = {});

  /// One frame of the stream (frames in order; pts_ms its time, for max_lost_ms): the result for
  /// each detection, in input order.
  std::vector<TrackerOutput> update(const std::vector<TrackerInput>& detections, double pts_ms = 0);

  /// The tracks alive now (tracked, lost and unconfirmed), for tests and counters.
  const std::list<Track>& tracks() const { return tracks_; }
  /// Confirmed tracks seen in the last frame (lost ones not counted).
  int active() const;
  /// Tracks confirmed so far (the last id given).
  std::int64_t started() const { return next_id_ - 1; }
  std::int64_t frames() const { return frame_; }

 private:
  using TrackIt = std::list<Track>::iterator;
  /// Matches tracks with detections (indices into `detections`) under the cost limit; the
  /// matched detections are applied to their tracks; returns the unmatched tracks and removes
  /// the matched detections from `pending`.
  std::vector<TrackIt> match(const std::vector<TrackIt>& tracks, std::vector<int>& pending,
                             const std::vector<TrackerInput>& detections, double limit, bool fuse,
                             std::vector<TrackerOutput>& out, double pts_ms);
  void hit(Track& t, const TrackerInput& d, double pts_ms);

  ByteTrackOptions o_;
  BoxKalman kalman_;
  std::list<Track> tracks_;
  std::int64_t frame_ = 0;
  std::int64_t next_id_ = 1;
};

}  // namespace redwood
