// configs/faces.yaml as shipped (sinks redirected) on Megamind.avi: BlazeFace finds the one face
// once it is on screen, inside the picture, with six keypoints inside its box's surroundings;
// and its boxes agree with the same model run through ONNX Runtime on the same frames.

#include "core/npy.hpp"
#include "pipelines/pipeline.hpp"
#include "stages/postprocess/blazeface.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <fstream>
#include <algorithm>
#include <cmath>
#include <mutex>

namespace redwood {
namespace {

TEST(PipelineFacesEndToEnd, FindsTheFaceInMegamind) {
  const auto config = std::filesystem::path(REDWOOD_SOURCE_DIR) / "configs" / "faces.yaml";
  if (!std::filesystem::exists(testing::assets_dir() / "video" / "Megamind.avi")) GTEST_SKIP() << "assets missing";
  const auto dir = testing::temp_dir("faces-e2e");
  Pipeline pipeline(load_pipeline_file(config, {"sinks.pub.endpoint=ipc://" + (dir / "pub.sock").string(),
                                                "sinks.log.path=" + (dir / "faces.jsonl").string(),
                                                "sinks.annotated.path=" + (dir / "{stream}.avi").string(),
                                                "sources.megamind.start_frame=20"}));
  RunOptions options;
  options.max_frames = 5;
  const auto stats = pipeline.run(options);
  EXPECT_EQ(stats.streams.at(0).delivered, 5);
  EXPECT_TRUE(std::filesystem::file_size(dir / "megamind.avi") > 0);
  std::ifstream in(dir / "faces.jsonl");
  int frames = 0;
  for (std::string line; std::getline(in, line); ++frames) {
    const auto m = nlohmann::json::parse(line);
    ASSERT_EQ(m.at("detections").size(), 1u) << line;
    const auto& d = m.at("detections")[0];
    EXPECT_EQ(d.at("kind"), "face");
    EXPECT_GT(d.at("score").get<double>(), 0.75);
    const auto box = d.at("box").get<std::vector<double>>();
    EXPECT_GT(box[2], 60);  // a face of about 130 pixels in a 720 x 528 picture
    EXPECT_LT(box[2], 250);
    EXPECT_GE(box[0], 0);
    EXPECT_LE(box[0] + box[2], 720.5);
    ASSERT_EQ(d.at("keypoints").size(), 6u);
    for (const auto& k : d.at("keypoints")) {
      EXPECT_GT(k[0].get<double>(), box[0] - box[2] * 0.3);
      EXPECT_LT(k[0].get<double>(), box[0] + box[2] * 1.3);
    }
  }
  EXPECT_EQ(frames, 5);
}

// Redwood against ONNX Runtime on the faces pipeline. What makes the comparison meaningful:
//  - the same input: a stage appended to the shipped pipeline saves, per frame, the very tensor
//    Redwood's infer stage consumed (face_in, after preprocess) and the picture<->tensor mapping;
//    ONNX Runtime (scripts/ort_run.js, its own process) runs the same ONNX file on those bytes;
//  - the same decode: ORT's four raw outputs go through decode_blazeface with the options and the
//    anchor order of configs/faces.yaml, and through the same mapping back to the picture. So a
//    difference can only come from inference (Redwood's importer, optimizer and kernels) — which is
//    what this test is about; the decoder has its own test (blazeface_test.cpp);
//  - not vacuous: the frames hold a face, every frame must find the same number of faces both
//    ways, and there must be faces to compare at all.
// Each Redwood box must overlap its ONNX Runtime counterpart with IoU >= 0.9 (printed: min/mean).

struct Captured {
  std::int64_t seq = 0;
  ImageTransform transform;
  int width = 0, height = 0;
  std::vector<RectF> boxes;
  std::vector<float> raw;  // Redwood's raw outputs, in the order of face_post's scores then boxes
};
std::mutex g_faces_mutex;
std::vector<Captured> g_captured;
std::filesystem::path g_capture_dir;

/// Saves face_in of each frame as <dir>/<seq>.npy and keeps Redwood's face boxes.
class FaceCapture final : public Stage {
 public:
  explicit FaceCapture(StageArgs& a) : Stage(a.name) {
    consume("face_in");
    for (const char* key : {"s16", "s8", "b16", "b8"}) consume(key);
  }

 private:
  void do_process(std::span<Frame* const> frames) override {
    for (Frame* f : frames) {
      write_npy(g_capture_dir / (std::to_string(f->seq) + ".npy"), f->tensors.at("face_in"));
      Captured c{f->seq, f->transforms.at("face_in"), f->image.width, f->image.height, {}, {}};
      for (const auto& d : f->detections) c.boxes.push_back(d.box);
      for (const char* key : {"s16", "s8", "b16", "b8"}) {
        const auto v = f->tensors.at(key).to_float_vector();
        c.raw.insert(c.raw.end(), v.begin(), v.end());
      }
      std::lock_guard lock(g_faces_mutex);
      g_captured.push_back(std::move(c));
    }
  }
};
RW_REGISTER_STAGE("test_face_capture", FaceCapture);

float iou(const RectF& a, const RectF& b) {
  const float inter = intersection(a, b).area();
  const float uni = a.area() + b.area() - inter;
  return uni > 0 ? inter / uni : 0.f;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

TEST(PipelineFacesEndToEnd, BoxesAgreeWithOnnxRuntime) {
  const auto config = std::filesystem::path(REDWOOD_SOURCE_DIR) / "configs" / "faces.yaml";
  const auto model = testing::assets_dir() / "models" / "face_detection_front_128x128_barracuda.onnx";
  const auto ort = testing::assets_dir() / "tools" / "ort" / "node_modules" / "onnxruntime-node" / "package.json";
  const auto runner = std::filesystem::path(REDWOOD_SOURCE_DIR) / "scripts" / "ort_run.js";
  if (!std::filesystem::exists(testing::assets_dir() / "video" / "Megamind.avi")) GTEST_SKIP() << "assets missing: run scripts/setup.sh";
  if (!std::filesystem::exists(ort)) GTEST_SKIP() << ort << " (ONNX Runtime) missing: run scripts/setup.sh";
  if (std::system("command -v node >/dev/null 2>&1") != 0) GTEST_SKIP() << "node not found: run scripts/setup.sh";

  const auto dir = testing::temp_dir("faces-ort");
  g_capture_dir = dir;
  g_captured.clear();
  PipelineFile file = load_pipeline_file(config, {"sinks.pub.endpoint=ipc://" + (dir / "pub.sock").string(),
                                                  "sinks.log.path=" + (dir / "faces.jsonl").string(),
                                                  "sinks.annotated.path=" + (dir / "{stream}.avi").string(),
                                                  "sources.megamind.start_frame=20"});
  YAML::Node capture;
  capture["name"] = "capture";
  capture["type"] = "test_face_capture";
  file.root["stages"].push_back(capture);
  // Decode as configs/faces.yaml does (its face_post stage), whatever the file says today.
  const YAML::Node post = file.root["stages"][2];
  ASSERT_EQ(post["type"].as<std::string>(), "blazeface");
  BlazeFaceOptions options;
  options.score_threshold = post["score_threshold"].as<float>();
  options.iou_threshold = post["iou_threshold"].as<float>();
  const int input_size = post["input_size"].as<int>();
  const auto anchors = blazeface_anchors(input_size);
  const YAML::Node outputs = file.root["stages"][1]["outputs"];  // model output -> tensor key
  std::map<std::string, std::string> output_of;                 // tensor key -> model output
  for (const auto& kv : outputs) output_of[kv.second.as<std::string>()] = kv.first.as<std::string>();

  Pipeline pipeline(file);
  RunOptions run;
  run.max_frames = 12;
  ASSERT_EQ(pipeline.run(run).streams.at(0).delivered, 12);
  ASSERT_EQ(g_captured.size(), 12u);

  std::sort(g_captured.begin(), g_captured.end(), [](const Captured& a, const Captured& b) { return a.seq < b.seq; });
  int faces = 0;
  float max_raw_diff = 0.f;
  float min_iou = 1.f;
  double sum_iou = 0;
  std::string table;
  for (const Captured& c : g_captured) {
    const auto input = dir / (std::to_string(c.seq) + ".npy");
    const auto out = dir / ("ort-" + std::to_string(c.seq));
    const std::string command = "node " + shell_quote(runner.string()) + " " + shell_quote(model.string()) + " --input " +
                                shell_quote("input:0=" + input.string()) + " --out " + shell_quote(out.string()) +
                                " > /dev/null 2> " + shell_quote((dir / "ort.err").string());
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    // The output files are named after the model's outputs, ':' written as '_'.
    const auto read_output = [&](const std::string& key) {
      std::string name = output_of.at(key);
      for (char& ch : name) ch = ch == ':' ? '_' : ch;
      return read_npy(out / (name + ".npy")).to_float_vector();
    };
    std::vector<float> scores, boxes;
    for (const auto& key : post["scores"].as<std::vector<std::string>>()) {
      const auto v = read_output(key);
      scores.insert(scores.end(), v.begin(), v.end());
    }
    for (const auto& key : post["boxes"].as<std::vector<std::string>>()) {
      const auto v = read_output(key);
      boxes.insert(boxes.end(), v.begin(), v.end());
    }
    ASSERT_EQ(scores.size(), anchors.size());
    ASSERT_EQ(boxes.size(), anchors.size() * 16);
    // How far apart the two runtimes' raw outputs are (for the record; the boxes are the check).
    ASSERT_EQ(c.raw.size(), scores.size() + boxes.size());
    for (std::size_t i = 0; i < c.raw.size(); ++i) {
      const float theirs = i < scores.size() ? scores[i] : boxes[i - scores.size()];
      max_raw_diff = std::max(max_raw_diff, std::abs(c.raw[i] - theirs));
    }
    std::vector<RectF> reference;
    const ImageTransform& tf = c.transform;
    for (const FaceDetection& fd : decode_blazeface(scores.data(), boxes.data(), anchors, input_size, options)) {
      const auto to_pic = [&](PointF n) { return tf.to_picture({n.x * tf.tensor_width, n.y * tf.tensor_height}); };
      reference.push_back(intersection(RectF::spanning(to_pic(fd.box.top_left()), to_pic(fd.box.bottom_right())),
                                       RectF{0, 0, static_cast<float>(c.width), static_cast<float>(c.height)}));
    }
    ASSERT_EQ(c.boxes.size(), reference.size()) << "frame " << c.seq << ": Redwood found " << c.boxes.size()
                                                << " face(s), ONNX Runtime " << reference.size();
    for (const RectF& mine : c.boxes) {
      float best = 0.f;
      for (const RectF& theirs : reference) best = std::max(best, iou(mine, theirs));
      EXPECT_GE(best, 0.9f) << "frame " << c.seq;
      min_iou = std::min(min_iou, best);
      sum_iou += best;
      ++faces;
      table += fmt::format("  frame {:>3}: IoU {:.6f}\n", c.seq + 20, best);
    }
  }
  ASSERT_GT(faces, 0) << "no face in the frames: nothing was compared";
  std::printf("faces compared with ONNX Runtime: %d; IoU min %.6f mean %.6f; raw outputs max |diff| %.3g\n%s", faces,
              min_iou, sum_iou / faces, max_raw_diff, table.c_str());
  ::testing::Test::RecordProperty("iou_min", fmt::format("{:.6f}", min_iou));
  ::testing::Test::RecordProperty("raw_max_abs_diff", fmt::format("{:.3g}", max_raw_diff));
  ::testing::Test::RecordProperty("iou_mean", fmt::format("{:.4f}", sum_iou / faces));
}

}  // namespace
}  // namespace redwood
