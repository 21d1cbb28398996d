#pragma once
// The result message of one frame, schema "redwood.frame/1" (docs/pipelines.md documents it;
// a change that breaks consumers bumps the number):
//
//   {"schema": "redwood.frame/1", "pipeline": "ocr-video", "stream": "cam0", "seq": 12,
//    "pts_ms": 1200.0, "width": 768, "height": 576, "latency_ms": 85.2,
//    "timestamps": {"captured_unix_ms": 1764423000123.4, "admitted_ms": 0.3,
//                   "stages": [{"stage": "det_pre", "done_ms": 3.1}, ...], "published_ms": 85.2},
//    "detections": [{"kind": "text", "score": 0.91, "box": [x, y, w, h],
//                    "quad": [[x, y], [x, y], [x, y], [x, y]], "text": "EXIT 12", "text_score": 0.97},
//                   {"kind": "face", "score": 0.88, "box": [...], "keypoints": [[x, y], ...]}]}

#include "stages/frame.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace redwood {

inline constexpr const char* kFrameSchema = "redwood.frame/1";

/// Appends the frame's message to `out` (the sinks keep one buffer each and clear it per frame:
/// once it has grown, writing a message allocates nothing).
void append_frame_json(std::string& out, const Frame& frame, std::string_view pipeline, double latency_ms);
/// The same message as a JSON value (tests, tools).
nlohmann::json frame_to_json(const Frame& frame, const std::string& pipeline, double latency_ms);

}  // namespace redwood
