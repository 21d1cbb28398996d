#include "stages/sink/frame_json.hpp"

#include <chrono>
#include <cmath>

namespace redwood {
namespace {
// One decimal is a tenth of a pixel: plenty, and keeps messages short.
double r1(double v) { return std::round(v * 10.0) / 10.0; }
double r3(double v) { return std::round(v * 1000.0) / 1000.0; }
nlohmann::json points(const std::vector<cv::Point2f>& pts) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& p : pts) a.push_back({r1(p.x), r1(p.y)});
  return a;
}
}  // namespace

nlohmann::json frame_to_json(const Frame& f, const std::string& pipeline, double latency_ms) {
  nlohmann::json dets = nlohmann::json::array();
  for (const Detection& d : f.detections) {
    nlohmann::json j{{"kind", d.kind}, {"score", r3(d.score)}, {"box", {r1(d.box.x), r1(d.box.y), r1(d.box.width), r1(d.box.height)}}};
    if (!d.quad.empty()) j["quad"] = points(d.quad);
    if (!d.keypoints.empty()) j["keypoints"] = points(d.keypoints);
    if (d.kind == "text") {
      j["text"] = d.text;
      j["text_score"] = r3(d.text_score);
    }
    dets.push_back(std::move(j));
  }
  // Stage times are milliseconds after the source produced the frame (one monotonic clock), so
  // consumers read the pipeline's breakdown directly; "captured" anchors them on the wall clock.
  const auto since_read = [&](Clock::time_point t) { return r1(std::chrono::duration<double, std::milli>(t - f.read_at).count()); };
  nlohmann::json stages = nlohmann::json::array();
  for (const StageMark& m : f.stage_done) stages.push_back({{"stage", std::string(m.stage)}, {"done_ms", since_read(m.at)}});
  const double captured = std::chrono::duration<double, std::milli>(f.captured.time_since_epoch()).count();
  nlohmann::json timestamps{{"captured_unix_ms", std::round(captured * 10.0) / 10.0},
                            {"admitted_ms", f.admitted_at >= f.read_at ? since_read(f.admitted_at) : 0.0},
                            {"stages", std::move(stages)},
                            {"published_ms", r1(latency_ms)}};
  return {{"schema", kFrameSchema}, {"pipeline", pipeline}, {"stream", f.stream_name}, {"seq", f.seq},
          {"pts_ms", r1(f.pts_ms)}, {"width", f.image.cols}, {"height", f.image.rows}, {"latency_ms", r1(latency_ms)},
          {"timestamps", std::move(timestamps)}, {"detections", std::move(dets)}};
}

}  // namespace redwood
