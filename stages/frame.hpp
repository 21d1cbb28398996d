#pragma once
// Frame: what travels through a pipeline. A source fills the picture, stream id and sequence
// number; stages add tensors (by key) and detections; sinks read them. One Frame is owned by one
// stage at a time (the flow graph hands the pointer on), so nothing in it is locked.

#include "core/recycling_allocator.hpp"
#include "core/tensor.hpp"
#include "stages/geometry.hpp"
#include "stages/picture.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace redwood {

using Clock = std::chrono::steady_clock;
class FrameMemory;

/// How a preprocess stage mapped the picture into its tensor: picture = (tensor - pad) / scale.
struct ImageTransform {
  float scale_x = 1.f, scale_y = 1.f;
  float pad_x = 0.f, pad_y = 0.f;
  int tensor_width = 0, tensor_height = 0;
  PointF to_picture(PointF p) const { return {(p.x - pad_x) / scale_x, (p.y - pad_y) / scale_y}; }
};

/// What a classifier said about a detection's crop, or about the whole picture.
struct Classification {
  std::string attribute;  // the classify stage's `attribute` ("expression", "vehicle_type")
  int class_id = -1;
  std::string label;      // from the stage's labels file; the id as text when it has none
  float score = 0.f;
};

/// One thing found in a frame: a text region, a face, an object of a detector's class.
/// Coordinates are picture pixels.
struct Detection {
  std::string kind;                  // what the decoder finds: "text", "face", "object"...
  int class_id = -1;                 // a detector's class index (-1: the decoder has no classes)
  std::string label;                 // that class's name (the detect stage's labels file)
  float score = 0.f;
  RectF box;                         // axis-aligned bounds
  Quad quad;                         // text: the rotated region, clockwise from top-left
  std::vector<PointF> keypoints;
  std::string text;                  // text recognized in the region (empty when none ran)
  float text_score = 0.f;
  std::int64_t track_id = -1;        // the track stage's id, stable across a stream's frames (-1: none)
  std::vector<PointF> trail;         // the track's recent positions (box centres), oldest first
  std::vector<Classification> classes;  // secondary classifiers' results on this detection's crop
};

/// Something the analytics stage saw happen in this frame.
struct Event {
  std::string type;          // "line_crossed", "zone_entered", "zone_left"
  std::string where;         // the line's or zone's name
  std::string direction;     // line_crossed: "in" or "out" (the line's own convention)
  std::int64_t track_id = -1;
  std::string label;         // the object's class label (its kind when it has none)
  double dwell_ms = 0;       // zone_left: how long the object stayed in the zone
};

/// A shape to draw on the annotated video (the analytics stage's lines and zones, their counts).
struct Overlay {
  std::vector<PointF> points;  // picture pixels
  bool closed = false;         // a zone's polygon; a line is open
  std::string text;            // written beside the first point
};

/// When a stage finished with a frame (Stage::process records it). `stage` views the stage's
/// name, which lives as long as the pipeline.
struct StageMark {
  std::string_view stage;
  Clock::time_point at;
};

/// A frame's map by tensor key. Every frame gains the same few keys and a recycled frame clears
/// them, so the nodes come from a free list (core/recycling_allocator.hpp): no heap allocation
/// per key and frame once warm (a key of more than 15 characters still allocates its text).
template <typename V>
using KeyMap = std::map<std::string, V, std::less<>, RecyclingAllocator<std::pair<const std::string, V>>>;

struct Frame {
  int stream = 0;                 // index of the source in the pipeline
  std::string stream_name;
  int priority = 0;               // the source's: batching stages take higher priorities first
  std::int64_t seq = 0;           // 0, 1, 2... per stream, in read order (gaps: dropped frames)
  std::int64_t admitted = 0;      // order of entry into the graph, gapless per stream (sequencer key)
  double pts_ms = 0;              // position in the source (video time, or since start when live)
  Clock::time_point read_at;      // when the source produced it: latency is measured from here
  std::chrono::system_clock::time_point captured;  // the same moment on the wall clock (for messages)
  Clock::time_point admitted_at;  // when it entered the graph (after the source's queue)
  std::vector<StageMark> stage_done;  // one per stage that ran on it, in pipeline order
  Picture image;                  // 8-bit BGR
  FrameMemory* memory = nullptr;  // the pipeline's buffer pool (stages/frame_memory.hpp); null: heap
  KeyMap<Tensor> tensors;
  KeyMap<ImageTransform> transforms;  // by tensor key, from preprocess
  std::vector<Detection> detections;
  /// Per crops tensor (by key): the index in `detections` each of its rows was cut from, so that
  /// a secondary model's results attach to their parent detection. A recycled frame keeps the keys
  /// with their lists emptied (their room serves the next frame).
  KeyMap<std::vector<int>> crop_parents;
  std::vector<Classification> classes;  // classifiers run on the whole picture
  std::vector<Event> events;
  std::vector<Overlay> overlays;
  bool failed = false;            // a stage threw on it: the pipeline stops, sinks never see it
};

using FramePtr = std::shared_ptr<Frame>;

}  // namespace redwood
