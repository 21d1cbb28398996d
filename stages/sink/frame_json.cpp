#include "stages/sink/frame_json.hpp"

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
  return {{"schema", kFrameSchema}, {"pipeline", pipeline}, {"stream", f.stream_name}, {"seq", f.seq},
          {"pts_ms", r1(f.pts_ms)}, {"width", f.image.cols}, {"height", f.image.rows}, {"latency_ms", r1(latency_ms)},
          {"detections", std::move(dets)}};
}

}  // namespace redwood
