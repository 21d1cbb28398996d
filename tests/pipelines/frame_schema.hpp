#pragma once
// Checks one result message against the documented schema (docs/pipelines.md, "Message schema"):
// every field present with its type, nothing undocumented, coordinates inside the picture's
// surroundings, and per-stage timestamps in pipeline order, ending at published_ms.

#include "stages/sink/frame_json.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <vector>

namespace redwood::testing {

inline void expect_number_list(const nlohmann::json& j, std::size_t n, const std::string& what) {
  ASSERT_TRUE(j.is_array()) << what << ": " << j;
  ASSERT_EQ(j.size(), n) << what << ": " << j;
  for (const auto& v : j) EXPECT_TRUE(v.is_number()) << what << ": " << j;
}

/// Classifier results: [{"attribute", "class_id", "label", "score"}, ...], not empty.
inline void expect_classes(const nlohmann::json& cs) {
  ASSERT_TRUE(cs.is_array() && !cs.empty()) << cs;
  for (const auto& c : cs) {
    EXPECT_EQ(c.size(), 4u) << c;
    EXPECT_TRUE(c.at("attribute").is_string() && c.at("label").is_string()) << c;
    EXPECT_TRUE(c.at("class_id").is_number_integer() && c.at("score").is_number()) << c;
  }
}

/// `stages`: the names the message's timestamps must list, in this order.
inline void expect_frame_schema(const nlohmann::json& m, const std::vector<std::string>& stages) {
  const std::set<std::string> keys{"schema", "pipeline", "stream", "seq", "pts_ms", "width", "height",
                                   "latency_ms", "timestamps", "detections"};
  const std::set<std::string> optional{"classes", "events"};  // present when not empty
  ASSERT_TRUE(m.is_object()) << m;
  for (const auto& [k, _] : m.items()) EXPECT_TRUE(keys.count(k) || optional.count(k)) << "undocumented field '" << k << "'";
  for (const auto& k : keys) ASSERT_TRUE(m.contains(k)) << "missing '" << k << "': " << m;
  if (m.contains("classes")) expect_classes(m["classes"]);
  if (m.contains("events")) {
    ASSERT_TRUE(m["events"].is_array() && !m["events"].empty()) << m;
    for (const auto& e : m["events"]) {
      const std::string type = e.at("type");
      EXPECT_TRUE(type == "line_crossed" || type == "zone_entered" || type == "zone_left") << e;
      EXPECT_TRUE(e.at("where").is_string() && e.at("label").is_string()) << e;
      EXPECT_TRUE(e.at("track_id").is_number_integer()) << e;
      EXPECT_EQ(e.contains("direction"), type == "line_crossed") << e;
      EXPECT_EQ(e.contains("dwell_ms"), type == "zone_left") << e;
    }
  }
  EXPECT_EQ(m["schema"], kFrameSchema);
  EXPECT_TRUE(m["pipeline"].is_string() && m["stream"].is_string());
  EXPECT_TRUE(m["seq"].is_number_integer() && m["seq"].get<std::int64_t>() >= 0);
  EXPECT_TRUE(m["pts_ms"].is_number() && m["pts_ms"].get<double>() >= 0);
  EXPECT_TRUE(m["width"].is_number_integer() && m["height"].is_number_integer());
  // Written to 0.1 ms: a frame through a short pipeline can read 0.0.
  EXPECT_TRUE(m["latency_ms"].is_number() && m["latency_ms"].get<double>() >= 0) << m["latency_ms"];

  const auto& t = m["timestamps"];
  ASSERT_TRUE(t.is_object()) << m;
  ASSERT_TRUE(t.contains("captured_unix_ms") && t.contains("admitted_ms") && t.contains("stages") &&
              t.contains("published_ms")) << t;
  EXPECT_EQ(t.size(), 4u) << t;
  EXPECT_GT(t["captured_unix_ms"].get<double>(), 1.6e12) << "not a wall-clock time: " << t;  // after 2020
  double last = t["admitted_ms"].get<double>();
  EXPECT_GE(last, 0.0);
  ASSERT_EQ(t["stages"].size(), stages.size()) << t;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const auto& s = t["stages"][i];
    EXPECT_EQ(s.at("stage"), stages[i]) << t;
    const double done = s.at("done_ms").get<double>();
    EXPECT_GE(done + 0.05, last) << "stage times out of order: " << t;  // rounded to 0.1 ms
    last = done;
  }
  EXPECT_GE(t["published_ms"].get<double>() + 0.05, last) << t;
  EXPECT_DOUBLE_EQ(t["published_ms"].get<double>(), m["latency_ms"].get<double>());

  const double w = m["width"].get<double>(), h = m["height"].get<double>();
  ASSERT_TRUE(m["detections"].is_array());
  for (const auto& d : m["detections"]) {
    const std::string kind = d.at("kind");
    EXPECT_FALSE(kind.empty()) << d;
    EXPECT_EQ(d.contains("class_id"), d.contains("label")) << d;
    if (d.contains("class_id")) { EXPECT_TRUE(d["class_id"].is_number_integer() && d["label"].is_string()) << d; }
    if (d.contains("track_id")) { EXPECT_TRUE(d["track_id"].is_number_integer() && d["track_id"].get<std::int64_t>() >= 0) << d; }
    if (d.contains("classes")) expect_classes(d["classes"]);
    EXPECT_TRUE(d.at("score").is_number()) << d;
    expect_number_list(d.at("box"), 4, "box");
    const auto box = d.at("box").get<std::vector<double>>();
    EXPECT_GT(box[2], 0) << d;
    EXPECT_GT(box[3], 0) << d;
    EXPECT_LT(box[0], w) << d;
    EXPECT_LT(box[1], h) << d;
    EXPECT_GT(box[0] + box[2], 0) << d;
    EXPECT_GT(box[1] + box[3], 0) << d;
    if (kind == "text") {
      ASSERT_EQ(d.at("quad").size(), 4u) << d;
      for (const auto& p : d["quad"]) expect_number_list(p, 2, "quad point");
      EXPECT_TRUE(d.at("text").is_string()) << d;
      EXPECT_TRUE(d.at("text_score").is_number()) << d;
      EXPECT_FALSE(d.contains("keypoints")) << d;
    } else if (kind == "face" && d.contains("keypoints")) {
      ASSERT_EQ(d.at("keypoints").size(), 6u) << d;
      for (const auto& p : d["keypoints"]) expect_number_list(p, 2, "keypoint");
      EXPECT_FALSE(d.contains("text")) << d;
    }
  }
}

}  // namespace redwood::testing
