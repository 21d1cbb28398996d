// track stage: multi-object tracking with ids stable across a stream's frames (ByteTrack,
// stages/analytics/bytetrack.hpp). It numbers the detections of each stream: a detection on a
// confirmed track gets Detection::track_id (1, 2, 3... per stream, never reused) and
// Detection::trail, the track's recent box centres, oldest first; the others keep -1. Each
// stream has its own tracker; its frames come one at a time in order (ordered()).
//
//   - name: tracker
//     type: track
//     kinds: [face]            # which detections to track (default: all)
//     classes: [person, car]   # by label or class id (default: all)
//     high_threshold: 0.5      # first-stage detections
//     low_threshold: 0.1       # second stage: low-score boxes keep tracks alive
//     new_track_threshold: 0.6 # default high_threshold + 0.1
//     match_threshold: 0.8     # cost limits (cost 1 - IoU)
//     low_match_threshold: 0.5
//     unconfirmed_match_threshold: 0.7
//     fuse_score: true
//     max_lost_frames: 30      # or max_lost_ms: 1000 (stream time)
//     per_class: false
//     trail: 30

#include "stages/analytics/bytetrack.hpp"
#include "stages/stage.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <set>

namespace redwood {

namespace {

class TrackStage final : public Stage {
 public:
  explicit TrackStage(StageArgs& args) : Stage(args.name) {
    Params& p = args.params;
    remember_place(p);
    kinds_ = p.string_set("kinds");
    classes_ = p.string_set("classes");
    const auto threshold = [&](const std::string& key, float fallback) {
      const float v = p.get<float>(key, fallback);
      if (!(v >= 0.f && v <= 1.f)) p.fail(key, "must be from 0 to 1");
      return v;
    };
    ByteTrackOptions& o = options_;
    o.high_threshold = threshold("high_threshold", o.high_threshold);
    o.low_threshold = threshold("low_threshold", o.low_threshold);
    if (o.low_threshold > o.high_threshold) p.fail("low_threshold", fmt::format("must be at most high_threshold ({})", o.high_threshold));
    o.new_track_threshold = threshold("new_track_threshold", std::min(1.f, o.high_threshold + 0.1f));
    if (o.new_track_threshold < o.high_threshold) {
      p.fail("new_track_threshold", fmt::format("must be at least high_threshold ({}): tracks start from high detections", o.high_threshold));
    }
    const auto limit = [&](const std::string& key, float fallback) {
      const float v = p.get<float>(key, fallback);
      if (!(v > 0.f && v <= 1.f)) p.fail(key, "must be above 0 and at most 1 (a limit on 1 - IoU)");
      return v;
    };
    o.match_threshold = limit("match_threshold", o.match_threshold);
    o.low_match_threshold = limit("low_match_threshold", o.low_match_threshold);
    o.unconfirmed_match_threshold = limit("unconfirmed_match_threshold", o.unconfirmed_match_threshold);
    o.fuse_score = p.get<bool>("fuse_score", o.fuse_score);
    if (p.has("max_lost_frames") && p.has("max_lost_ms")) p.fail("max_lost_ms", "give max_lost_frames or max_lost_ms, not both");
    o.max_lost_frames = p.get<int>("max_lost_frames", o.max_lost_frames);
    if (o.max_lost_frames < 0 || o.max_lost_frames > 100000) p.fail("max_lost_frames", "must be from 0 to 100000");
    o.max_lost_ms = p.get<double>("max_lost_ms", 0.0);
    if (p.has("max_lost_ms") && !(o.max_lost_ms > 0 && o.max_lost_ms <= 3.6e6)) {
      p.fail("max_lost_ms", "must be above 0 and at most 3600000 (an hour)");
    }
    o.per_class = p.get<bool>("per_class", o.per_class);
    o.trail = p.get<int>("trail", o.trail);
    if (o.trail < 0 || o.trail > 10000) p.fail("trail", "must be from 0 (none) to 10000");
  }

  bool ordered() const override { return true; }

  std::vector<StageCounter> counters() const override {
    std::lock_guard lock(mutex_);
    std::vector<StageCounter> out;
    for (const auto& [stream, s] : streams_) {
      out.push_back({"tracks_started", {{"stream", s.name}}, static_cast<double>(s.tracker.started()), false,
                     "Tracks confirmed so far (each a new id)"});
      out.push_back({"tracks_active", {{"stream", s.name}}, static_cast<double>(s.tracker.active()), true,
                     "Confirmed tracks seen in the stream's latest frame"});
    }
    return out;
  }

 private:
  struct Stream {
    std::string name;
    ByteTracker tracker;
  };

  bool selected(const Detection& d) const {
    if (!kinds_.empty() && !kinds_.contains(d.kind)) return false;
    if (classes_.empty()) return true;
    return classes_.contains(d.label) || (d.class_id >= 0 && classes_.contains(std::to_string(d.class_id)));
  }

  // The class a track keeps to with per_class: the detector's class id, else its label, else
  // the decoder's kind.
  static std::string class_of(const Detection& d) {
    if (d.class_id >= 0) return "#" + std::to_string(d.class_id);
    return d.label.empty() ? "kind:" + d.kind : "label:" + d.label;
  }

  void do_process(std::span<Frame* const> frames) override {
    for (Frame* f : frames) {
      std::vector<TrackerInput> inputs;
      std::vector<int> index;  // detection of each input
      for (int k = 0; k < static_cast<int>(f->detections.size()); ++k) {
        Detection& d = f->detections[k];
        if (!selected(d)) continue;
        const RectF& b = d.box;
        if (!std::isfinite(d.score) || !std::isfinite(b.x) || !std::isfinite(b.y) || !std::isfinite(b.width) ||
            !std::isfinite(b.height)) {
          throw InvalidArgument(fmt::format("stage '{}': stream '{}' frame {}: detection {} ({}) has a non-finite score or box",
                                            name(), f->stream_name, f->seq, k, d.kind));
        }
        d.track_id = -1;
        d.trail.clear();
        inputs.push_back({b, d.score, options_.per_class ? class_of(d) : std::string()});
        index.push_back(k);
      }
      std::lock_guard lock(mutex_);
      auto it = streams_.find(f->stream);
      if (it == streams_.end()) it = streams_.emplace(f->stream, Stream{f->stream_name, ByteTracker(options_)}).first;
      auto outputs = it->second.tracker.update(inputs, f->pts_ms);
      for (std::size_t i = 0; i < outputs.size(); ++i) {
        Detection& d = f->detections[index[i]];
        d.track_id = outputs[i].track_id;
        if (d.track_id >= 0) d.trail = std::move(outputs[i].trail);
      }
    }
  }

  std::set<std::string> kinds_, classes_;
  ByteTrackOptions options_;
  mutable std::mutex mutex_;  // streams_: frames of different streams may come on different threads
  std::map<int, Stream> streams_;
};

}  // namespace

RW_REGISTER_STAGE("track", TrackStage);

}  // namespace redwood
