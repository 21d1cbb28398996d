#include "stages/sink/frame_json.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <iterator>
#include <span>

namespace redwood {
namespace {

// One decimal is a tenth of a pixel: plenty, and keeps messages short.
double r1(double v) { return std::round(v * 10.0) / 10.0; }
double r3(double v) { return std::round(v * 1000.0) / 1000.0; }

// Writes appended to `out` with fmt (shortest round-trip doubles, as JSON libraries print them):
// once the buffer has grown to a message's size, nothing here allocates.
class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  void raw(std::string_view s) { out_.append(s); }
  void number(double v) {
    if (!std::isfinite(v)) v = 0;  // JSON has no NaN or infinity
    fmt::format_to(std::back_inserter(out_), "{}", v);
  }
  void integer(std::int64_t v) { fmt::format_to(std::back_inserter(out_), "{}", v); }
  void string(std::string_view s) {
    out_.push_back('"');
    for (const char c : s) {
      switch (c) {
        case '"': out_.append("\\\""); break;
        case '\\': out_.append("\\\\"); break;
        case '\n': out_.append("\\n"); break;
        case '\r': out_.append("\\r"); break;
        case '\t': out_.append("\\t"); break;
        case '\b': out_.append("\\b"); break;
        case '\f': out_.append("\\f"); break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            fmt::format_to(std::back_inserter(out_), "\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
          } else {
            out_.push_back(c);  // UTF-8 passes through
          }
      }
    }
    out_.push_back('"');
  }
  void key(std::string_view k) {
    string(k);
    out_.push_back(':');
  }
  /// A comma, then the key of the next member.
  void next(std::string_view k) {
    out_.push_back(',');
    key(k);
  }
  void points(std::span<const PointF> pts) {
    out_.push_back('[');
    for (std::size_t i = 0; i < pts.size(); ++i) {
      if (i) out_.push_back(',');
      out_.push_back('[');
      number(r1(pts[i].x));
      out_.push_back(',');
      number(r1(pts[i].y));
      out_.push_back(']');
    }
    out_.push_back(']');
  }
  /// [{"attribute": ..., "class_id": ..., "label": ..., "score": ...}, ...]
  void classes(const std::vector<Classification>& cs) {
    out_.push_back('[');
    for (std::size_t i = 0; i < cs.size(); ++i) {
      if (i) out_.push_back(',');
      out_.push_back('{');
      key("attribute");
      string(cs[i].attribute);
      next("class_id");
      integer(cs[i].class_id);
      next("label");
      string(cs[i].label);
      next("score");
      number(r3(cs[i].score));
      out_.push_back('}');
    }
    out_.push_back(']');
  }

 private:
  std::string& out_;
};

}  // namespace

void append_frame_json(std::string& out, const Frame& f, std::string_view pipeline, double latency_ms) {
  Writer w(out);
  // Stage times are milliseconds after the source produced the frame (one monotonic clock), so
  // consumers read the pipeline's breakdown directly; "captured" anchors them on the wall clock.
  const auto since_read = [&](Clock::time_point t) { return r1(std::chrono::duration<double, std::milli>(t - f.read_at).count()); };
  const double captured = std::chrono::duration<double, std::milli>(f.captured.time_since_epoch()).count();
  w.raw("{");
  w.key("schema");
  w.string(kFrameSchema);
  w.next("pipeline");
  w.string(pipeline);
  w.next("stream");
  w.string(f.stream_name);
  w.next("seq");
  w.integer(f.seq);
  w.next("pts_ms");
  w.number(r1(f.pts_ms));
  w.next("width");
  w.integer(f.image.width);
  w.next("height");
  w.integer(f.image.height);
  w.next("latency_ms");
  w.number(r1(latency_ms));
  w.next("timestamps");
  w.raw("{");
  w.key("captured_unix_ms");
  w.number(std::round(captured * 10.0) / 10.0);
  w.next("admitted_ms");
  w.number(f.admitted_at >= f.read_at ? since_read(f.admitted_at) : 0.0);
  w.next("stages");
  w.raw("[");
  for (std::size_t i = 0; i < f.stage_done.size(); ++i) {
    if (i) w.raw(",");
    w.raw("{");
    w.key("stage");
    w.string(f.stage_done[i].stage);
    w.next("done_ms");
    w.number(since_read(f.stage_done[i].at));
    w.raw("}");
  }
  w.raw("],");
  w.key("published_ms");
  w.number(r1(latency_ms));
  w.raw("},");
  w.key("detections");
  w.raw("[");
  for (std::size_t i = 0; i < f.detections.size(); ++i) {
    const Detection& d = f.detections[i];
    if (i) w.raw(",");
    w.raw("{");
    w.key("kind");
    w.string(d.kind);
    if (d.class_id >= 0) {
      w.next("class_id");
      w.integer(d.class_id);
      w.next("label");
      w.string(d.label);
    }
    if (d.track_id >= 0) {
      w.next("track_id");
      w.integer(d.track_id);
    }
    w.next("score");
    w.number(r3(d.score));
    w.next("box");
    w.raw("[");
    w.number(r1(d.box.x));
    w.raw(",");
    w.number(r1(d.box.y));
    w.raw(",");
    w.number(r1(d.box.width));
    w.raw(",");
    w.number(r1(d.box.height));
    w.raw("]");
    if (!d.quad.empty()) {
      w.next("quad");
      w.points(d.quad);
    }
    if (!d.keypoints.empty()) {
      w.next("keypoints");
      w.points(d.keypoints);
    }
    if (d.kind == "text") {
      w.next("text");
      w.string(d.text);
      w.next("text_score");
      w.number(r3(d.text_score));
    }
    if (!d.classes.empty()) {
      w.next("classes");
      w.classes(d.classes);
    }
    w.raw("}");
  }
  w.raw("]");
  if (!f.classes.empty()) {
    w.next("classes");
    w.classes(f.classes);
  }
  if (!f.events.empty()) {
    w.next("events");
    w.raw("[");
    for (std::size_t i = 0; i < f.events.size(); ++i) {
      const Event& e = f.events[i];
      if (i) w.raw(",");
      w.raw("{");
      w.key("type");
      w.string(e.type);
      w.next("where");
      w.string(e.where);
      if (!e.direction.empty()) {
        w.next("direction");
        w.string(e.direction);
      }
      w.next("track_id");
      w.integer(e.track_id);
      w.next("label");
      w.string(e.label);
      if (e.type == "zone_left") {
        w.next("dwell_ms");
        w.number(r1(e.dwell_ms));
      }
      w.raw("}");
    }
    w.raw("]");
  }
  w.raw("}");
}

nlohmann::json frame_to_json(const Frame& f, const std::string& pipeline, double latency_ms) {
  std::string text;
  append_frame_json(text, f, pipeline, latency_ms);
  return nlohmann::json::parse(text);
}

}  // namespace redwood
