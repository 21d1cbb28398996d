// ByteTrack's association on small synthetic trajectories: confirmation, ids, the low-score
// stage, losing and finding a track again, removal, classes, bounded state.

#include "stages/analytics/bytetrack.hpp"

#include <gtest/gtest.h>

namespace redwood {
namespace {

TrackerInput at(float x, float y, float score = 0.9f, std::string cls = "") { return {{x, y, 40, 80}, score, std::move(cls)}; }

TEST(ByteTrack, KeepsOneIdOnAMovingObjectWithABoundedTrail) {
  ByteTrackOptions o;
  o.trail = 5;
  ByteTracker t(o);
  for (int f = 0; f < 20; ++f) {
    const auto out = t.update({at(10.f + 3 * f, 50.f + f)});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].track_id, 1) << f;  // the stream's first frame confirms at once
    ASSERT_EQ(out[0].trail.size(), static_cast<std::size_t>(std::min(f + 1, 5)));
    EXPECT_FLOAT_EQ(out[0].trail.back().x, 30.f + 3 * f);   // this box's centre last
    EXPECT_FLOAT_EQ(out[0].trail.front().y, 90.f + std::max(0, f - 4));
  }
  EXPECT_EQ(t.started(), 1);
  EXPECT_EQ(t.active(), 1);
}

TEST(ByteTrack, ConfirmsOnTheSecondHitAndNumbersWithoutGaps) {
  ByteTracker t;
  EXPECT_EQ(t.update({at(0, 0)})[0].track_id, 1);
  // A one-frame false positive far away: no id, and it uses none up.
  auto out = t.update({at(0, 0), at(400, 0)});
  EXPECT_EQ(out[0].track_id, 1);
  EXPECT_EQ(out[1].track_id, -1);
  out = t.update({at(0, 0)});
  EXPECT_EQ(out[0].track_id, 1);
  // A new object: unconfirmed on its first frame, id 2 from its second.
  out = t.update({at(0, 0), at(200, 0)});
  EXPECT_EQ(out[1].track_id, -1);
  out = t.update({at(0, 0), at(202, 0)});
  EXPECT_EQ(out[1].track_id, 2);
  EXPECT_EQ(out[1].trail.size(), 2u);
  EXPECT_EQ(t.started(), 2);
  // A new detection below new_track_threshold (0.6) starts nothing.
  out = t.update({at(0, 0), at(202, 0), at(400, 300, 0.55f)});
  out = t.update({at(0, 0), at(202, 0), at(400, 300, 0.55f)});
  EXPECT_EQ(out[2].track_id, -1);
  EXPECT_EQ(t.tracks().size(), 2u);
}

TEST(ByteTrack, LowScoreDetectionsKeepATrackButStartNone) {
  ByteTracker t;
  for (int f = 0; f < 10; ++f) t.update({at(2.f * f, 0)});
  // Partly hidden: the detector's score drops to 0.3 for 8 frames. Stage 2 keeps the track.
  for (int f = 10; f < 18; ++f) {
    const auto out = t.update({at(2.f * f, 0, 0.3f), at(500, 500, 0.3f)});
    EXPECT_EQ(out[0].track_id, 1) << f;
    EXPECT_EQ(out[1].track_id, -1) << f;  // a lone low box is not a new object
  }
  EXPECT_EQ(t.update({at(36, 0)})[0].track_id, 1);
  EXPECT_EQ(t.started(), 1);

  // Without the second stage (low_threshold = high_threshold) the same scene loses the track.
  ByteTrackOptions o;
  o.low_threshold = o.high_threshold;
  ByteTracker plain(o);
  for (int f = 0; f < 10; ++f) plain.update({at(2.f * f, 0)});
  EXPECT_EQ(plain.update({at(20, 0, 0.3f)})[0].track_id, -1);
  EXPECT_EQ(plain.active(), 0);
}

TEST(ByteTrack, FindsALostTrackWhereItsMotionLeadsAndForgetsItLater) {
  ByteTracker t;
  // 5 px a frame for 20 frames, then unseen for 10 frames (it moved 50 px, more than its
  // width: only the Kalman prediction brings it back under its id).
  for (int f = 0; f < 20; ++f) t.update({at(5.f * f, 0)});
  for (int f = 20; f < 30; ++f) {
    EXPECT_TRUE(t.update({}).empty());
    EXPECT_EQ(t.active(), 0);
    ASSERT_EQ(t.tracks().size(), 1u);
    EXPECT_EQ(t.tracks().front().state, TrackState::kLost);
  }
  EXPECT_EQ(t.update({at(150, 0)})[0].track_id, 1);
  EXPECT_EQ(t.active(), 1);

  // Unseen for more than max_lost_frames: removed; a return is a new object.
  ByteTrackOptions o;
  o.max_lost_frames = 5;
  ByteTracker short_memory(o);
  for (int f = 0; f < 5; ++f) short_memory.update({at(0, 0)});
  for (int f = 0; f < 5; ++f) short_memory.update({});
  EXPECT_EQ(short_memory.tracks().size(), 1u);
  short_memory.update({});
  EXPECT_TRUE(short_memory.tracks().empty());
  short_memory.update({at(0, 0)});
  EXPECT_EQ(short_memory.update({at(0, 0)})[0].track_id, 2);
}

TEST(ByteTrack, MaxLostMsCountsStreamTime) {
  ByteTrackOptions o;
  o.max_lost_ms = 100;
  ByteTracker t(o);
  t.update({at(0, 0)}, 0);
  t.update({}, 60);
  t.update({}, 100);
  EXPECT_EQ(t.tracks().size(), 1u);  // 100 ms since seen: not more than the limit
  t.update({}, 140);
  EXPECT_TRUE(t.tracks().empty());
}

TEST(ByteTrack, PerClassMatchesOnlyTheSameClass) {
  for (bool per_class : {false, true}) {
    ByteTrackOptions o;
    o.per_class = per_class;
    ByteTracker t(o);
    t.update({at(0, 0, 0.9f, "person")});
    const auto out = t.update({at(1, 0, 0.9f, "car")});
    EXPECT_EQ(out[0].track_id, per_class ? -1 : 1);
  }
}

TEST(ByteTrack, TwoObjectsSwapNoIdsWhenTheyCross) {
  ByteTracker t;
  // Heading at each other 6 px a frame, 10 px apart vertically; while they overlap the one
  // behind is seen with a low score.
  for (int f = 0; f < 40; ++f) {
    const float a = 6.f * f, b = 234.f - 6.f * f;
    const bool overlap = std::abs(a - b) < 40;
    const auto out = t.update({at(a, 0), at(b, 10, overlap ? 0.35f : 0.9f)});
    EXPECT_EQ(out[0].track_id, 1) << f;
    if (f >= 1) EXPECT_EQ(out[1].track_id, 2) << f;
  }
}

TEST(ByteTrack, ALostTrackOnTopOfAnOlderTrackedOneIsDropped) {
  // A detector without NMS reports one object twice for a few frames: two tracks on one object.
  // When the double goes, the younger track is lost right where the older one is tracked: it is
  // the same object, and it goes (byte_tracker.py's remove_duplicate_stracks).
  ByteTracker t;
  t.update({at(0, 0)});
  t.update({at(0, 0), {{1, 1, 40, 80}, 0.9f, ""}});
  const auto out = t.update({at(0, 0), {{1, 1, 40, 80}, 0.9f, ""}});
  EXPECT_EQ(out[0].track_id, 1);
  EXPECT_EQ(out[1].track_id, 2);
  ASSERT_EQ(t.tracks().size(), 2u);
  EXPECT_EQ(t.update({at(0, 0)})[0].track_id, 1);
  ASSERT_EQ(t.tracks().size(), 1u);
  EXPECT_EQ(t.tracks().front().id, 1);
}

TEST(ByteTrack, StateStaysBoundedAndIdsAreNeverReused) {
  ByteTrackOptions o;
  o.max_lost_frames = 3;
  ByteTracker t(o);
  std::int64_t last = 0;
  for (int f = 0; f < 300; ++f) {
    // A new object every 4 frames, seen for 3 frames at a new place.
    const float x = 60.f * ((f / 4) % 20), y = 100.f * ((f / 80) % 5);
    const auto out = f % 4 == 3 ? t.update({}) : t.update({at(x, y)});
    for (const auto& r : out) {
      if (r.track_id >= 0) {
        EXPECT_GE(r.track_id, last);
        last = r.track_id;
      }
    }
    EXPECT_LE(t.tracks().size(), 3u);
  }
  EXPECT_EQ(t.started(), 75);
}

}  // namespace
}  // namespace redwood
