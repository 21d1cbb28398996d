// The redwood.frame/1 message as the sinks write it: every field of the schema, detections of
// both kinds, strings escaped so that any recognized text stays valid JSON, and non-finite
// numbers written as 0 (JSON has none).

#include "stages/sink/frame_json.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace redwood {
namespace {

Frame sample_frame() {
  Frame f;
  f.stream_name = "cam \"0\"";
  f.seq = 12;
  f.pts_ms = 1200.04;
  f.read_at = Clock::now();
  f.admitted_at = f.read_at + std::chrono::microseconds(300);
  f.captured = std::chrono::system_clock::time_point(std::chrono::milliseconds(1764423000123));
  f.image = Picture::allocate(768, 576, 3);
  f.stage_done.push_back({"det", f.read_at + std::chrono::milliseconds(41)});
  Detection text;
  text.kind = "text";
  text.score = 0.99612f;
  text.box = {39.04f, 36.0f, 461.0f, 36.0f};
  text.quad = {{39.1f, 36.4f}, {499.9f, 36.4f}, {499.9f, 71.6f}, {39.1f, 71.6f}};
  text.text = "EXIT \\ 12\n\"A\"\x01";
  text.text_score = 0.9764f;
  Detection face;
  face.kind = "face";
  face.score = std::numeric_limits<float>::quiet_NaN();
  face.box = {250, 212.9f, 138.3f, 138.1f};
  face.keypoints = {{321.8f, 263.7f}};
  f.detections = {text, face};
  return f;
}

TEST(FrameJson, WritesEverySchemaFieldAsValidJson) {
  const Frame f = sample_frame();
  std::string out = "previous ";  // appended to, never cleared by the writer
  append_frame_json(out, f, "ocr", 85.25);
  ASSERT_EQ(out.rfind("previous ", 0), 0u);
  const auto j = nlohmann::json::parse(out.substr(9));
  EXPECT_EQ(j["schema"], "redwood.frame/1");
  EXPECT_EQ(j["pipeline"], "ocr");
  EXPECT_EQ(j["stream"], "cam \"0\"");
  EXPECT_EQ(j["seq"], 12);
  EXPECT_DOUBLE_EQ(j["pts_ms"].get<double>(), 1200.0);
  EXPECT_EQ(j["width"], 768);
  EXPECT_EQ(j["height"], 576);
  EXPECT_DOUBLE_EQ(j["latency_ms"].get<double>(), 85.3);
  EXPECT_DOUBLE_EQ(j["timestamps"]["captured_unix_ms"].get<double>(), 1764423000123.0);
  EXPECT_DOUBLE_EQ(j["timestamps"]["admitted_ms"].get<double>(), 0.3);
  EXPECT_EQ(j["timestamps"]["stages"][0]["stage"], "det");
  EXPECT_DOUBLE_EQ(j["timestamps"]["stages"][0]["done_ms"].get<double>(), 41.0);
  const auto& text = j["detections"][0];
  EXPECT_EQ(text["kind"], "text");
  EXPECT_DOUBLE_EQ(text["score"].get<double>(), 0.996);
  EXPECT_EQ(text["box"], nlohmann::json({39.0, 36.0, 461.0, 36.0}));
  EXPECT_EQ(text["quad"].size(), 4u);
  EXPECT_EQ(text["text"], "EXIT \\ 12\n\"A\"\x01");
  EXPECT_DOUBLE_EQ(text["text_score"].get<double>(), 0.976);
  const auto& face = j["detections"][1];
  EXPECT_EQ(face["kind"], "face");
  EXPECT_EQ(face["score"], 0);  // NaN: JSON has none
  EXPECT_FALSE(face.contains("text"));
  EXPECT_EQ(face["keypoints"], nlohmann::json({{321.8, 263.7}}));
  EXPECT_EQ(frame_to_json(f, "ocr", 85.25), j);
}

TEST(FrameJson, WritesClassesTracksAndEventsOnlyWhenPresent) {
  Frame f = sample_frame();
  auto plain = frame_to_json(f, "ocr", 1.0);
  EXPECT_FALSE(plain.contains("events"));
  EXPECT_FALSE(plain.contains("classes"));
  EXPECT_FALSE(plain["detections"][1].contains("track_id"));
  EXPECT_FALSE(plain["detections"][1].contains("class_id"));

  Detection& car = f.detections[1];
  car.kind = "object";
  car.class_id = 2;
  car.label = "car";
  car.track_id = 17;
  car.classes.push_back({"colour", 4, "red", 0.8123f});
  f.classes.push_back({"scene", 0, "street", 0.5f});
  f.events.push_back({"line_crossed", "gate", "in", 17, "car", 0});
  f.events.push_back({"zone_left", "lot", "", 17, "car", 1234.56});
  const auto j = frame_to_json(f, "cars", 1.0);
  const auto& d = j["detections"][1];
  EXPECT_EQ(d["class_id"], 2);
  EXPECT_EQ(d["label"], "car");
  EXPECT_EQ(d["track_id"], 17);
  EXPECT_EQ(d["classes"], nlohmann::json::parse(R"([{"attribute":"colour","class_id":4,"label":"red","score":0.812}])"));
  EXPECT_EQ(j["classes"][0]["label"], "street");
  ASSERT_EQ(j["events"].size(), 2u);
  EXPECT_EQ(j["events"][0], nlohmann::json::parse(R"({"type":"line_crossed","where":"gate","direction":"in","track_id":17,"label":"car"})"));
  EXPECT_EQ(j["events"][1], nlohmann::json::parse(R"({"type":"zone_left","where":"lot","track_id":17,"label":"car","dwell_ms":1234.6})"));
}

TEST(FrameJson, AReusedBufferAllocatesNothingOnceGrown) {
  const Frame f = sample_frame();
  std::string out;
  append_frame_json(out, f, "ocr", 1.0);
  const std::size_t capacity = out.capacity();
  const char* data = out.data();
  for (int i = 0; i < 10; ++i) {
    out.clear();
    append_frame_json(out, f, "ocr", 1.0);
  }
  EXPECT_EQ(out.capacity(), capacity);
  EXPECT_EQ(out.data(), data);
}

}  // namespace
}  // namespace redwood
